"""In-place updates while a graph is recorded: an update of a tensor the graph made is a
node that does it for real; one that would reach a tensor outliving the graph, a view
shared with another live tensor, or a tensor gradients flow through is refused (it runs
in Python between two graphs). Also a call that updates tensors as a side effect (a
training-mode batch norm's statistics)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, cast

import paddle

from ..errors import INPLACE_OUTSIDE, Unsupported
from ..variables.arguments import as_argument
from ..variables.base import VariableTracker
from ..variables.tensor import TensorVariable, live_tensor_trackers


def buffer_key(t: Any) -> Any:
    """The allocation a tensor's data lives in (views share their base's), or None."""
    try:
        ptr = t.data_ptr()
        return None if not ptr else (str(t.place), ptr - t._offset())
    except Exception:  # noqa: BLE001 - no data yet, or no strided memory API
        return None


def may_share_memory(a: Any, b: Any) -> bool:
    """Whether two tensors may be views of one another (Paddle's own answer; yes when it
    cannot tell)."""
    if a is b:
        return True
    # Paddle's method takes any object and reads it as a tensor: a number (a graph's
    # number input) or a tensor without data would crash the process
    if not (isinstance(a, paddle.Tensor) and isinstance(b, paddle.Tensor)):
        return False
    try:
        if not (a._is_initialized() and b._is_initialized()):
            return False
        return bool(a._is_shared_buffer_with(b))
    except Exception:  # noqa: BLE001 - a tensor without data
        return True


def _contiguous(t: Any) -> bool:
    try:
        return bool(t.is_contiguous())
    except Exception:  # noqa: BLE001
        return True


def _tensors_in(v: VariableTracker) -> List[TensorVariable]:
    found: List[TensorVariable] = []

    def keep(t):
        if isinstance(t, TensorVariable):
            found.append(t)
        return None

    try:
        as_argument(v, keep)
    except Unsupported:
        pass
    return found


class InplaceUpdates:
    """The in-place half of ``OutputGraph`` (a mixin: it reads the graph, its inputs,
    the tensors read as attributes and their allocations, and records through
    ``_run_example``, ``_create_node`` and ``_set_meta`` of the output graph it is part
    of)."""

    # what it reads of the output graph it is part of
    graph: Any
    inputs: List[Any]
    entry_grad_mode: bool
    _attr_vars: Dict[int, TensorVariable]
    _buffers: Dict[Any, Any]
    grad_mode: Callable[[], bool]
    _run_example: Callable[..., Any]
    _create_node: Callable[..., Any]
    _set_meta: Callable[[Any, Any], None]
    _wrap_result: Callable[[Any, Any], VariableTracker]
    _detached: Callable[[VariableTracker], VariableTracker]

    def call_updating(self, tx, fn, args, kwargs, updated: List[TensorVariable]):
        """A call that also writes into the tensors ``updated`` (a training-mode batch
        norm's running statistics). The graph does the update when it runs, as eager
        Paddle does; the example run must not do it a second time to tensors from outside
        the frame, so they are put back afterwards."""
        saved = []
        for t in updated:
            if t.source is not None or t.node.op in ("placeholder", "get_attr"):
                if t.example._is_initialized():
                    saved.append((t.example, t.example.clone()))
        try:
            result = self._run_example("call_function", fn, fn, args, kwargs)
        finally:
            for tensor, value in saved:
                tensor.set_value(value)
        node = self._create_node(tx, "call_function", fn, args, kwargs)
        # the update is an effect: never merged, folded or dropped; and an exported
        # (inference) model cannot do it (the ONNX export refuses such nodes)
        node.meta["impure"] = True
        node.meta["updates_inputs"] = [t.node.name for t in updated]
        for t in updated:
            t.node.meta["mutated"] = True
        out = self._wrap_result(node, result)
        if self.entry_grad_mode and not self.grad_mode():
            out = self._detached(out)
        return out

    def record_inplace(
        self, tx, op: str, target, run, args: List[VariableTracker], kwargs, what: str
    ) -> TensorVariable:
        """An in-place update of ``args[0]``, a tensor the graph made: a node that does the
        update for real and returns the tensor, which every tracker of it reads from then on.

        Refused (``Unsupported``: the update runs in Python between two graphs, on the real
        tensors) where it would change a tensor that outlives the graph, where another live
        tensor of the capture shares its memory (the update would have to reach it too),
        and where gradients could flow through it.
        """
        y = cast(TensorVariable, args[0])  # (every caller updates a tensor: args[0])
        why = self._inplace_refusal(y, args, kwargs)
        if why is not None:
            raise Unsupported(
                f"{what} {why} (it runs in Python between two graphs)", category=INPLACE_OUTSIDE
            )
        shape, dtype = list(y.example.shape), y.example.dtype
        result = self._run_example(op, target, run, args, kwargs)
        # y.example belongs to this capture alone (checked above): the update may change it
        if result is not y.example:
            raise Unsupported(
                f"{what} returned another tensor than the one it updates", category=INPLACE_OUTSIDE
            )
        if list(result.shape) != shape or result.dtype != dtype:
            raise Unsupported(
                f"{what} changes the shape or dtype of the tensor it updates",
                category=INPLACE_OUTSIDE,
            )
        mutated = [y.node] + self._views_below(y.node)
        node = self._create_node(tx, op, target, args, kwargs)
        node.meta["inplace"] = True
        for n in mutated:
            # passes.effects: a node whose value is changed later is not pure (it may not be
            # merged with an equal one, computed ahead of time or moved past the update)
            n.meta["mutated"] = True
        self._set_meta(node, result)
        # trackers are shared objects: every local, cell and container holding y sees it
        y.node = node
        y.stop_gradient_set = None  # eager's flag after an update depends on its inputs
        return y

    def _inplace_refusal(self, y: TensorVariable, args, kwargs) -> Optional[str]:
        """Why an in-place update of ``y`` cannot be captured, or None."""
        if y.source is not None or y.node.op in ("placeholder", "get_attr"):
            what = y.source.name() if y.source is not None else y.node.name
            return f"mutates {what}, a tensor from outside the frame (input, parameter or buffer)"
        ex = y.example
        for src, _node, outside in self._outside_tensors():
            if may_share_memory(ex, outside):
                return f"mutates a tensor that may share memory with {src} (a view of it)"
            if not _contiguous(outside):
                # reshape, contiguous() and friends make a view of a contiguous tensor and
                # a copy of another; the guards do not pin strides
                return f"mutates a tensor while {src} is not contiguous (it may be a view of it)"
        for n in [y.node] + self._views_below(y.node):
            if n.op in ("placeholder", "get_attr"):
                return f"mutates a view of {n.name}, a tensor from outside the frame"
        for other in live_tensor_trackers():
            if other is y or getattr(other.node, "graph", None) is not self.graph:
                continue
            if may_share_memory(ex, other.example):
                return (
                    f"mutates a tensor that {other.node.name}, another tensor of the capture, "
                    "shares memory with (a view made in the graph)"
                )
        # the real gradient mode: the one the frame was entered with (a ``no_grad`` block
        # of the captured code does not change it during the capture)
        if paddle.is_grad_enabled():
            needs = self._requires_grad()
            for a in [*args, *kwargs.values()]:
                for t in _tensors_in(a):
                    if needs.get(t.node, False):
                        return (
                            f"mutates a tensor with gradients on while {t.node.name} requires "
                            "them (autograd through in-place updates is left to eager Paddle)"
                        )
        return None

    def _outside_tensors(self):
        """(name, node, example) of every tensor from outside the frame the graph reads."""
        for src, node, ex in self.inputs:
            if isinstance(ex, paddle.Tensor):  # (not an int input)
                yield src.name(), node, ex
        for var in self._attr_vars.values():
            name = var.source.name() if var.source is not None else var.node.name
            yield name, var.node, var.example

    def _views_below(self, node) -> list:
        """The nodes ``node`` may be a view of: its inputs, theirs... whose examples live
        in the same allocation."""
        key = self._buffers.get(node)
        found, todo, seen = [], [node], {node}
        while todo:
            for i in todo.pop().all_input_nodes:
                if i in seen:
                    continue
                seen.add(i)
                if key is None or self._buffers.get(i) in (key, None):
                    found.append(i)
                    todo.append(i)
        return found

    def _requires_grad(self) -> Dict[Any, bool]:
        """node -> whether its value may require gradients (conservative: any input does)."""
        outside = {node: not ex.stop_gradient for _, node, ex in self._outside_tensors()}
        needs: Dict[Any, bool] = {}
        for n in self.graph.nodes:
            if n in outside:
                needs[n] = outside[n]
            elif n.op == "call_method" and n.target == "detach":
                needs[n] = False
            else:
                needs[n] = any(needs.get(i, False) for i in n.all_input_nodes)
        return needs


__all__ = ["InplaceUpdates", "buffer_key", "may_share_memory"]
