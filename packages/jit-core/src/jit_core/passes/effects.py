"""Which nodes may be merged, moved or evaluated ahead of time.

A node is *pure* when running it twice with the same inputs gives the same values and
changes nothing else: no in-place update (Paddle names those ``op_``), no ``out=``
argument, no random numbers, and no layer call (a layer can hold state: BatchNorm
statistics in training mode, Dropout's generator).

A node whose value an in-place update changes later (``meta["mutated"]``, set by the
capture on the updated tensor and on every node it is a view of) is not pure either: it
must not be merged with an equal node (the update would reach both), computed ahead of
time (the update would change the folded constant) nor moved past the update.

A node whose value leaves the graph (``leaving``) may be updated outside it: after a
graph break, or by the caller. Two such nodes stay two tensors, and such a node is not
folded into a constant that every call would hand out again.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Set, cast

import paddle

from ..fx import Node
from ..fx.graph import _is_impure

# words of a Paddle function name that mean it draws random numbers; whole words, so that
# normalize, grid_sample and channel_shuffle are not taken for random ones
_RANDOM_WORDS = frozenset(
    {
        "dropout",
        "dropout2d",
        "dropout3d",
        "rand",
        "randn",
        "randint",
        "randperm",
        "uniform",
        "normal",
        "bernoulli",
        "multinomial",
        "poisson",
        "gumbel",
        "rrelu",
        "exponential",
        "binomial",
        "gamma",
        "sampling",
    }
)


def target_name(node: Node) -> str:
    if isinstance(node.target, str):
        return node.target
    return getattr(node.target, "__name__", "") or type(node.target).__name__


#: the dropouts of ``paddle.nn.functional``: with ``training=False`` or ``p=0`` they draw no
#: random numbers (a scale, or the input itself)
_FUNCTIONAL_DROPOUTS = frozenset(
    {"dropout", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"}
)


def _inference_dropout(node: Node) -> bool:
    """A dropout that draws no random numbers: ``F.dropout(x, p, training=False)`` (GPT's
    ``training=self.training`` in eval), ``p=0``, or ``_C_ops.dropout(x, seed, p,
    is_test=True, ...)`` as Paddle's program dumps and GraphNet samples write one."""
    if node.target is getattr(paddle._C_ops, "dropout", None):
        is_test = node.kwargs.get("is_test", node.args[3] if len(node.args) > 3 else None)
        return is_test is True
    target = node.target
    if (
        node.op != "call_function"
        or getattr(target, "__name__", "") not in _FUNCTIONAL_DROPOUTS
        or getattr(paddle.nn.functional, target.__name__, None) is not target
    ):
        return False
    try:
        # a function of paddle.nn.functional (the ``is not target`` test above also lets
        # mypy read ``target`` as possibly None)
        fn = cast(Callable[..., Any], target)
        bound = inspect.signature(fn).bind(*node.args, **node.kwargs)
    except TypeError:
        return False
    bound.apply_defaults()
    training, p = bound.arguments.get("training"), bound.arguments.get("p")
    return training is False or (type(p) in (int, float) and p == 0)


def _random_name(name: str) -> bool:
    return any(w in _RANDOM_WORDS for w in name.lower().strip("_").split("_"))


def is_random(node: Node) -> bool:
    return _random_name(target_name(node)) and not _inference_dropout(node)


def may_draw(target: Any) -> bool:
    """Whether a node of ``target`` may be random (``is_random`` before the node exists)."""
    if isinstance(target, str):
        return _random_name(target)
    return _random_name(getattr(target, "__name__", "") or type(target).__name__)


def is_pure(node: Node) -> bool:
    if node.meta.get("mutated"):
        return False
    if node.op == "get_attr":
        return True
    if node.op not in ("call_function", "call_method"):
        return False
    if _is_impure(node) or is_random(node):
        return False
    return not ({"out", "output"} & set(node.kwargs))


def draws_only(node: Node) -> bool:
    """Whether ``node`` would be pure but for the random numbers it draws."""
    return (
        node.op in ("call_function", "call_method")
        and is_random(node)
        and not node.meta.get("mutated")
        and not _is_impure(node)
        and not ({"out", "output"} & set(node.kwargs))
    )


def is_mutated(node: Node) -> bool:
    """Whether an in-place update changes this node's value after it is computed."""
    return bool(node.meta.get("mutated"))


def leaving(gm) -> Set[Node]:
    """The nodes whose values the graph's output hands out."""
    found: Set[Node] = set()

    def visit(v: Any) -> None:
        if isinstance(v, Node):
            found.add(v)
        elif isinstance(v, (tuple, list)):
            for item in v:
                visit(item)
        elif isinstance(v, dict):
            for item in v.values():
                visit(item)

    for node in gm.graph.nodes:
        if node.op == "output":
            visit(node.args)
    return found
