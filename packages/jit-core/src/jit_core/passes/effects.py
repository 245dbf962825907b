"""Which nodes may be merged, moved or evaluated ahead of time.

A node is *pure* when running it twice with the same inputs gives the same values and
changes nothing else: no in-place update (Paddle names those ``op_``), no ``out=``
argument, no random numbers, and no layer call (a layer can hold state: BatchNorm
statistics in training mode, Dropout's generator).
"""

from __future__ import annotations

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


def is_random(node: Node) -> bool:
    words = target_name(node).lower().strip("_").split("_")
    return any(w in _RANDOM_WORDS for w in words)


def is_pure(node: Node) -> bool:
    if node.op == "get_attr":
        return True
    if node.op not in ("call_function", "call_method"):
        return False
    if _is_impure(node) or is_random(node):
        return False
    return not ({"out", "output"} & set(node.kwargs))
