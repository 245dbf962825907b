"""What eager autograd says of a tensor the graph made: ``t.stop_gradient`` and
``t.is_leaf`` with gradients on, which library code reads to choose a path
(PaddleNLP's encoders: ``has_gradient = not output.stop_gradient`` before each layer).

The capture runs its operations on example values without gradients, so their own flags
say nothing. Eager's answer depends on which inputs and parameters need gradients and on
which operations are differentiable; rather than a table of Paddle's operators, the graph
so far is run again with gradients on (from where the last question stopped: each node
once per capture), from the inputs with their own flags and the real parameters, and
the tensor asked about answers for itself. Nothing outlives the run: layers get back the
statistics they update, the random stream is the capture's (restored after it), and no
backward runs. The answer holds while the inputs' flags (in their guards) and the flags
of the parameters it depends on (guarded here) stay as they are.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

import paddle

from ..errors import DYNAMIC_VALUE, Unsupported
from ..fx import Node
from ..fx.interpreter import run_leaf_layer
from ..runtime import guards
from ..sources import AttrSource, Source


class AutogradFlags:
    """The autograd half of ``OutputGraph`` (a mixin: it reads the graph, its inputs, its
    root objects and their sources, and adds guards)."""

    graph: Any
    inputs: List[Any]
    root: Dict[str, Any]
    guards: Any
    _root_sources: Dict[str, Optional[Source]]

    def _init_autograd_flags(self) -> None:
        #: node -> its value run again with gradients on (``autograd_flag``)
        self._replayed: Dict[Node, Any] = {}
        #: nodes whose parameters' flags are guarded already
        self._flags_guarded: Set[Node] = set()

    def autograd_flag(self, node: Node, name: str) -> bool:
        """``stop_gradient`` or ``is_leaf`` (``name``) of ``node``'s value, as eager sets it."""
        try:
            value = self._replay_to(node)
        except Exception as e:
            raise Unsupported(
                f".{name} of a tensor made in the frame, while gradients are on (running "
                f"the graph again with them raised {type(e).__name__})",
                category=DYNAMIC_VALUE,
            ) from e
        self._guard_parameter_flags(node)
        return bool(getattr(value, name))

    def _replay_to(self, node: Node) -> Any:
        done = self._replayed
        if node in done:
            return done[node]
        examples = {n: ex for _, n, ex in self.inputs}
        kept = _kept_state(self.root.values())
        try:
            with paddle.set_grad_enabled(True):
                for n in self.graph.nodes:
                    if n not in done and n.op != "output":
                        done[n] = self._run(n, examples)
                    if n is node:
                        break
        finally:
            kept.restore()
        return done[node]

    def _run(self, n: Node, examples: Dict[Node, Any]) -> Any:
        done = self._replayed

        def fetch(a: Any) -> Any:
            if isinstance(a, Node):
                return done[a]
            if isinstance(a, (list, tuple)):
                return type(a)(fetch(x) for x in a)
            if isinstance(a, dict):
                return {k: fetch(v) for k, v in a.items()}
            return a

        args, kwargs = fetch(n.args), fetch(n.kwargs)
        if n.op == "placeholder":
            return _leaf_like(examples[n])
        if n.op == "get_attr":
            return self.root[n.target]
        if n.op == "call_module":
            return run_leaf_layer(self.root[n.target], args, kwargs)
        if n.op == "call_method":
            obj, *rest = args
            return getattr(obj, n.target)(*rest, **kwargs)
        return n.target(*args, **kwargs)

    def _guard_parameter_flags(self, node: Node) -> None:
        """Guard ``stop_gradient`` of every parameter ``node`` depends on: a layer frozen
        later must not find the answer given for it unfrozen."""
        todo = [node]
        while todo:
            n = todo.pop()
            if n in self._flags_guarded:
                continue
            self._flags_guarded.add(n)
            todo.extend(n.all_input_nodes)
            if n.op not in ("get_attr", "call_module"):
                continue
            source = self._root_sources.get(n.target)
            obj = self.root.get(n.target)
            if source is None:
                continue
            if isinstance(obj, paddle.Tensor):
                named = [(source, obj)]
            elif isinstance(obj, paddle.nn.Layer):
                named = [(_attr_chain(source, k), p) for k, p in obj.named_parameters()]
            else:
                continue
            for src, tensor in named:
                flag = AttrSource(src, "stop_gradient")
                self.guards.add(flag, guards.CONSTANT_MATCH, tensor.stop_gradient)


def _attr_chain(source: Source, path: str) -> Source:
    for part in path.split("."):
        source = AttrSource(source, part)
    return source


def _leaf_like(example: Any) -> Any:
    """An input as eager holds it: a tensor of the example's values that needs a gradient
    where the example does (a leaf of its own)."""
    if isinstance(example, paddle.Tensor):
        leaf = example.detach()
        leaf.stop_gradient = example.stop_gradient
        return leaf
    if isinstance(example, list):
        return [_leaf_like(x) for x in example]
    return example


class _kept_state:
    """The state a run of the layers may update (buffers, and the parameters no gradient
    reaches: BatchNorm's statistics), put back by ``restore()``."""

    def __init__(self, objects) -> None:
        self.saved = []
        for obj in objects:
            if isinstance(obj, paddle.nn.Layer):
                tensors = list(obj.state_dict().values())
            elif isinstance(obj, paddle.Tensor):
                tensors = [obj]  # a buffer the graph reads (and an op may update)
            else:
                continue
            for t in tensors:
                if t.stop_gradient and t._is_initialized():
                    self.saved.append((t, t.clone()))

    def restore(self) -> None:
        with paddle.no_grad():
            for tensor, value in self.saved:
                tensor.set_value(value)


__all__ = ["AutogradFlags"]
