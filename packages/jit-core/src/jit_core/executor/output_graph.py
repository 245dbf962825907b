"""The graph a capture builds, with its inputs, the objects it refers to and its guards.

Every Paddle operation is run once on example values while it is recorded, so that the
next operation knows the shapes and dtypes it gets. Those runs have no lasting effect:
in-place operations are refused before they run, layer buffers touched in training mode
are restored, and the random generator state is put back at the end of the capture.
"""

from __future__ import annotations

import keyword
from typing import Any, Callable, Dict, List, Optional, Tuple

import paddle

from .. import guards
from ..errors import Unsupported
from ..fx import Graph
from ..sources import Source, attr_path
from ..variables.base import VariableTracker
from ..variables.constant import ConstantVariable
from ..variables.containers import (
    BaseListVariable,
    DictVariable,
    ListVariable,
    SliceVariable,
    TupleVariable,
)
from ..variables.tensor import TensorVariable


def _as_argument(v: VariableTracker, tensor: Callable[[TensorVariable], Any]) -> Any:
    """The Python value of an argument, with each tensor replaced by ``tensor(t)``."""
    if isinstance(v, TensorVariable):
        return tensor(v)
    if isinstance(v, BaseListVariable):
        return v.container_type(_as_argument(i, tensor) for i in v.items)
    if isinstance(v, DictVariable):
        return {k: _as_argument(i, tensor) for k, i in v.items.items()}
    if isinstance(v, SliceVariable):
        return slice(*(_as_argument(p, tensor) for p in v.parts))
    if v.is_python_constant():
        return v.as_python_constant()
    raise Unsupported(f"{v.describe()} cannot be passed to a Paddle operation")


def example_of(v: VariableTracker) -> Any:
    """The argument as the example run sees it: tensors are their example values."""
    return _as_argument(v, lambda t: t.example)


def node_arg_of(v: VariableTracker) -> Any:
    """The argument as the graph records it: tensors are their nodes."""
    return _as_argument(v, lambda t: t.node)


def _identifier(hint: str) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "v"
    if name[0].isdigit():
        name = "_" + name
    if keyword.iskeyword(name):
        name += "_"
    return name


class OutputGraph:
    def __init__(self):
        self.graph = Graph()
        self.guards = guards.GuardSet()
        #: name -> object registered on the GraphModule (layers, parameters, buffers)
        self.root: Dict[str, Any] = {}
        self._root_ids: Dict[int, str] = {}
        #: (source, placeholder node, example tensor) in input order
        self.inputs: List[Tuple[Source, Any, Any]] = []
        self._input_by_source: Dict[str, TensorVariable] = {}
        self._attr_vars: Dict[int, TensorVariable] = {}
        #: the gradient mode the frame was entered with, and the modes of the
        #: ``no_grad``-style blocks open at this point of the capture (innermost last)
        self.entry_grad_mode = paddle.is_grad_enabled()
        self._grad_modes: List[bool] = []

    # ------------------------------------------------------------ gradient mode
    def grad_mode(self) -> bool:
        """The gradient mode at this point of the captured code."""
        return self._grad_modes[-1] if self._grad_modes else self.entry_grad_mode

    def push_grad_mode(self, mode: bool) -> None:
        if mode and not self.grad_mode():
            raise Unsupported(
                "turning gradients on inside a block where they are off is not captured yet"
            )
        # the graph is valid only for the mode it was captured in
        self.guards.grad_enabled = self.entry_grad_mode
        self._grad_modes.append(mode)

    def pop_grad_mode(self) -> None:
        if not self._grad_modes:
            raise Unsupported("leaving a gradient-mode block that was not entered in the capture")
        self._grad_modes.pop()

    def _detached(self, var: VariableTracker) -> VariableTracker:
        """What an operation gives inside ``no_grad`` while the graph runs with gradients
        on: the same values, detached (``stop_gradient``, no gradient flows back)."""
        if isinstance(var, TensorVariable):
            node = self.graph.call_method("detach", (var.node,))
            self._set_meta(node, var.example)
            return TensorVariable(node, var.example)
        if isinstance(var, (TupleVariable, ListVariable)):
            return type(var)([self._detached(v) for v in var.items])
        return var

    # ------------------------------------------------------------ inputs and attributes
    def add_input(self, tx, tensor, source: Source) -> TensorVariable:
        key = source.name()
        if key in self._input_by_source:
            return self._input_by_source[key]
        self.guards.add(source, guards.TENSOR_MATCH, guards.TensorSpec.of(tensor))
        # placeholders go first, in the order the inputs were met
        first = next(iter(self.graph.nodes), None)
        name = self._unique_placeholder_name(attr_path(source))
        if first is not None:
            anchor = self._last_placeholder()
            if anchor is None:
                with self.graph.inserting_before(first):
                    node = self.graph.placeholder(name)
            else:
                with self.graph.inserting_after(anchor):
                    node = self.graph.placeholder(name)
        else:
            node = self.graph.placeholder(name)
        node.meta["source"] = key
        self._set_meta(node, tensor)
        var = TensorVariable(node, tensor, source)
        self.inputs.append((source, node, tensor))
        self._input_by_source[key] = var
        return var

    def _last_placeholder(self):
        last = None
        for n in self.graph.nodes:
            if n.op == "placeholder":
                last = n
            else:
                break
        return last

    def _unique_placeholder_name(self, hint: str) -> str:
        base = _identifier(hint)
        used = {n.name for n in self.graph.nodes}
        name, i = base, 1
        while name in used:
            name = f"{base}_{i}"
            i += 1
        return name

    def register_object(self, obj: Any, source: Optional[Source]) -> str:
        if id(obj) in self._root_ids:
            return self._root_ids[id(obj)]
        base = _identifier(attr_path(source) if source is not None else type(obj).__name__.lower())
        name, i = base, 1
        while name in self.root:
            name = f"{base}_{i}"
            i += 1
        self.root[name] = obj
        self._root_ids[id(obj)] = name
        return name

    def get_attr(self, tx, tensor, source: Optional[Source]) -> TensorVariable:
        if id(tensor) in self._attr_vars:
            return self._attr_vars[id(tensor)]
        name = self.register_object(tensor, source)
        node = self.graph.get_attr(name)
        self._set_meta(node, tensor)
        var = TensorVariable(node, tensor, source)
        self._attr_vars[id(tensor)] = var
        return var

    # ------------------------------------------------------------ operations
    @staticmethod
    def _set_meta(node, example) -> None:
        node.meta["shape"] = list(example.shape)
        node.meta["dtype"] = str(example.dtype).replace("paddle.", "")

    def call_function(
        self, tx, fn, args: List[VariableTracker], kwargs: Dict[str, VariableTracker]
    ):
        return self._record(tx, "call_function", fn, fn, args, kwargs)

    def call_method(self, tx, name: str, args: List[VariableTracker], kwargs):
        def run(obj, *a, **k):
            return getattr(obj, name)(*a, **k)

        return self._record(tx, "call_method", name, run, args, kwargs)

    def call_module(self, tx, layer_var, args, kwargs):
        layer = layer_var.value
        target = self.register_object(layer, layer_var.source)

        def run(*a, **k):
            return _run_leaf_layer(layer, a, k)

        return self._record(tx, "call_module", target, run, args, kwargs)

    def _record(self, tx, op: str, target, run, args, kwargs) -> VariableTracker:
        ex_args = [example_of(a) for a in args]
        ex_kwargs = {k: example_of(v) for k, v in kwargs.items()}
        node_args = tuple(node_arg_of(a) for a in args)
        node_kwargs = {k: node_arg_of(v) for k, v in kwargs.items()}
        try:
            with paddle.no_grad():
                result = run(*ex_args, **ex_kwargs)
        except Unsupported:
            raise
        except Exception as e:
            what = target if isinstance(target, str) else getattr(target, "__name__", repr(target))
            raise Unsupported(
                f"{what}(...) raised {type(e).__name__} during capture ({str(e).strip()[:200]}); "
                "the frame runs eagerly so the error comes from Paddle itself"
            ) from e
        node = self.graph.create_node(op, target, node_args, node_kwargs)
        if tx is not None:
            node.meta["source_loc"] = tx.location()
        out = self._wrap_result(node, result)
        if self.entry_grad_mode and not self.grad_mode():
            out = self._detached(out)
        return out

    def _wrap_result(self, node, result) -> VariableTracker:
        import operator

        if isinstance(result, paddle.Tensor):
            self._set_meta(node, result)
            return TensorVariable(node, result)
        if isinstance(result, (tuple, list)) and all(
            isinstance(r, (paddle.Tensor, tuple, list)) for r in result
        ):
            items = []
            for i, r in enumerate(result):
                item_node = self.graph.call_function(operator.getitem, (node, i))
                items.append(self._wrap_result(item_node, r))
            return (TupleVariable if isinstance(result, tuple) else ListVariable)(items)
        if result is None:
            raise Unsupported(
                f"{node.format_node() if hasattr(node, 'format_node') else node} returned None: "
                "it works by side effect, which is not captured yet"
            )
        raise Unsupported(
            f"a Paddle operation returned a Python {type(result).__name__}, a value computed "
            "from tensor data that would leave the graph"
        )

    # ------------------------------------------------------------ results
    def set_outputs(self, tensors: List[TensorVariable]) -> None:
        self.graph.output(tuple(t.node for t in tensors))


def _run_leaf_layer(layer: paddle.nn.Layer, args, kwargs):
    # In training mode layers like BatchNorm update their running statistics in place;
    # the capture must not, so they are put back after the example run. Paddle keeps those
    # statistics as buffers in some layers and as stop_gradient parameters in others.
    saved = []
    if layer.training:
        state = [b for _, b in layer.named_buffers()]
        state += [p for _, p in layer.named_parameters() if p.stop_gradient]
        for t in state:
            if t is not None and t._is_initialized():
                saved.append((t, t.clone()))
    try:
        return layer(*args, **kwargs)
    finally:
        for buf, value in saved:
            buf.set_value(value)


__all__ = ["OutputGraph", "ConstantVariable", "example_of", "node_arg_of"]
