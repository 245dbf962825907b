"""Tensors: every operation on them becomes a node of the graph."""

from __future__ import annotations

import operator
import weakref
from typing import List, Optional

import paddle

from ..errors import (
    DATA_LEAVES_GRAPH,
    DYNAMIC_VALUE,
    INPLACE_OUTSIDE,
    LIMIT,
    RAISES,
    TENSOR_BRANCH,
    UNSUPPORTED,
    Unsupported,
)
from ..inplace import METHOD_HELPERS
from ..runtime import guards
from ..sources import AttrSource, Source
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import ListVariable
from .training import TENSOR_CALLS

#: methods whose result is a Python value computed from the tensor's *data*
_LEAVES_GRAPH = {
    "numpy",
    "item",
    "tolist",
    "__bool__",
    "__float__",
    "__int__",
    "__index__",
    "__array__",
    "__complex__",
    "__len__",
    "cpu",
    "cuda",
    "pin_memory",
    "register_hook",
    "set_value",
    "copy_",
    "get_tensor",
    "value",
}

#: tensor attributes that depend only on metadata the guards pin (shape, dtype, ...)
_METADATA_ATTRS = {"shape", "dtype", "ndim", "size", "stop_gradient", "is_leaf"}
#: attributes of the tensor object itself: guarded values where the tensor comes from the
#: frame (an input, a parameter); ``is_distributed`` is what PaddleNLP's LM heads ask of
#: their weight, ``type`` (``VarType.DENSE_TENSOR``, or a sparse or string tensor's) what
#: code that serves several kinds of tensor asks
_GUARDED_ATTRS = {"name", "persistable", "is_distributed", "type"}


#: in-place methods that change a tensor's shape, dtype or autograd state, or take its
#: memory from elsewhere: never captured
_INPLACE_REFUSED = {
    "reshape_",
    "squeeze_",
    "unsqueeze_",
    "flatten_",
    "transpose_",
    "t_",
    "cast_",
    "resize_",
    "detach_",
    "stop_gradient_",
    "set_",
}

#: every TensorVariable alive: an in-place update checks that no other live tracker of its
#: capture shares memory with the tensor it changes
_TRACKERS: weakref.WeakSet[TensorVariable] = weakref.WeakSet()


def _has_static_method(name: str) -> bool:
    value = getattr(getattr(paddle, "pir", None), "Value", None)
    return value is None or hasattr(value, name)


def is_inplace_name(name: str) -> bool:
    return name.endswith("_") and not name.endswith("__")


def live_tensor_trackers() -> List[TensorVariable]:
    return list(_TRACKERS)


class TensorVariable(VariableTracker):
    #: dimensions whose size the guards do not pin (a dynamic input's, ``jit_core.shapes``)
    dynamic_dims: frozenset = frozenset()
    #: ``stop_gradient`` as the captured code set it (``t.stop_gradient = True``), for a
    #: tensor the graph made; None where nothing set it since its value was made
    stop_gradient_set: Optional[bool] = None

    def __init__(self, node, example, source=None):
        super().__init__(source)
        #: the node of the tensor's current value: an in-place update captured in the graph
        #: moves it to the update's node (executor.output_graph.record_inplace)
        self.node = node
        self.example = example
        _TRACKERS.add(self)

    def python_type(self) -> type:
        return type(self.example)

    def describe(self) -> str:
        return f"tensor {self.node.name} {list(self.example.shape)}"

    def reconstruct(self, cg) -> None:
        cg.tensor(self)

    def truthy(self, tx) -> bool:
        raise Unsupported(
            "a tensor value decides a branch (the truth of a tensor is known only at run time)",
            category=TENSOR_BRANCH,
        )

    def var_getattr(self, tx, name: str) -> VariableTracker:
        ex = self.example
        if name == "shape":
            shape = ListVariable([tx.output.size_of(self, d) for d in range(len(ex.shape))])
            # Paddle 3.1+ returns paddle.Size, a list subclass: rebuilt values keep it
            shape.container_type = type(ex.shape)
            return shape
        if name == "stop_gradient" and self.stop_gradient_set is not None:
            return ConstantVariable(self.stop_gradient_set)
        if name in ("stop_gradient", "is_leaf") and self.source is None:
            # example values are computed without gradients: their flags say what eager
            # gives only when nothing in the graph could be tracked by autograd; else
            # the graph so far answers, run with gradients
            if tx.output.may_track_gradients():
                return ConstantVariable(tx.output.autograd_flag(self.node, name))
        if name == "size":
            total: VariableTracker = ConstantVariable(1)
            for d in range(len(ex.shape)):
                total = tx.binary_op(operator.mul, total, tx.output.size_of(self, d))
            return total
        if name in _METADATA_ATTRS:
            return ConstantVariable(getattr(ex, name))
        if name == "place":
            # pinned by the tensor guard where a build can make tensors on several devices
            return ConstantVariable(ex.place)
        if name in _GUARDED_ATTRS:
            return self._guarded_attribute(tx, name)
        if name == "T":
            perm = list(range(len(ex.shape)))[::-1]
            return tx.output.call_method(tx, "transpose", [self, ConstantVariable(perm)], {})
        attr = getattr(type(ex), name, None)
        if attr is not None and callable(attr):
            from .functions import BoundMethodVariable

            return BoundMethodVariable(self, name)
        raise Unsupported(f"tensor attribute {name!r} is not captured", category=DYNAMIC_VALUE)

    def store_attr(self, tx, name: str, value: VariableTracker) -> bool:
        """``t.stop_gradient = True`` on a tensor the graph made (library code marks masks
        and position ids so): from here on the code sees it detached, as eager's autograd
        does (what used it before keeps its gradient path). Where nothing could be tracked
        by autograd the flag is all it changes. ``= False``, and stores on graph inputs,
        stay side effects."""
        if name != "stop_gradient" or self.source is not None or not value.is_python_constant():
            return False
        flag = value.as_python_constant()
        if flag is not True:
            # turning gradients on makes a leaf that later operations track: not captured
            # unless the tensor is already in that state
            return flag is False and self.stop_gradient_set is False
        if tx.output.may_track_gradients():
            detached = tx.output.call_method(tx, "detach", [self], {})
            self.node, self.example = detached.node, detached.example
        self.stop_gradient_set = True
        return True

    def _guarded_attribute(self, tx, name: str) -> VariableTracker:
        value = getattr(self.example, name)
        if self.source is None:
            if name == "name":
                # each run names the tensors it makes anew: eager would see another name
                raise Unsupported(
                    "the name of a tensor made in the frame differs from run to run",
                    category=DYNAMIC_VALUE,
                )
            return ConstantVariable(value)
        src = AttrSource(self.source, name)
        tx.output.guards.add(src, guards.CONSTANT_MATCH, value)
        return ConstantVariable(value, src)

    def call_method(self, tx, name: str, args, kwargs):
        if name in TENSOR_CALLS:
            return self._training_call(tx, name, args, kwargs)
        if name in ("numpy", "__array__") and not args and not kwargs:
            from .ndarrays import from_tensor

            # an ndarray computed in the graph; its value leaves where the array does
            return from_tensor(tx, self, f"tensor.{name}()")
        if name in _LEAVES_GRAPH:
            raise Unsupported(
                f"tensor.{name}() makes the tensor's value leave the graph",
                category=DATA_LEAVES_GRAPH,
            )
        if name == "__setitem__" and len(args) == 2 and not kwargs:
            tx.setitem(self, args[0], args[1])
            return ConstantVariable(None)
        if is_inplace_name(name) or name == "__setitem__":
            return self._inplace_method(tx, name, args, kwargs)
        if name in ("dim", "ndimension") and not args:
            return ConstantVariable(len(self.example.shape))
        if name == "is_dist" and not args and not kwargs:
            # asked by Paddle's own layers (Conv2D.forward) before their dense path
            if self.example.is_dist():
                raise Unsupported(
                    "a distributed tensor reached the capture (tensor.is_dist())",
                    category=UNSUPPORTED,
                )
            return ConstantVariable(False)
        if name == "__getitem__" and len(args) == 1:
            return tx.output.call_function(tx, operator.getitem, [self, args[0]], {})
        if name == "numel" and not args:
            return tx.output.call_method(tx, "numel", [self], {})
        return tx.output.call_method(tx, name, [self] + list(args), kwargs)

    def _training_call(self, tx, name: str, args, kwargs) -> VariableTracker:
        """``t.backward()``, ``p.clear_grad()``: effects of the graph, run after its
        operations (``executor.train_effects``)."""
        if name == "backward" and not (tx.output.grad_mode() and tx.output.may_track_gradients()):
            # no graph input or parameter needs a gradient here: eager raises or does nothing
            raise Unsupported(
                "tensor.backward() where no input or parameter of the graph requires "
                "gradients (it runs in Python between two graphs)",
                category=DATA_LEAVES_GRAPH,
            )
        text = f"{self.source.name() if self.source is not None else self.node.name}.{name}()"
        fn = getattr(paddle.Tensor, name)
        return tx.output.record_effect(tx, fn, [self] + list(args), dict(kwargs), text)

    def _inplace_method(self, tx, name: str, args, kwargs) -> VariableTracker:
        what = f"in-place tensor method .{name}()"
        if name.startswith("_") or name in _INPLACE_REFUSED:
            raise Unsupported(
                f"{what} mutates a tensor (it runs in Python between two graphs)",
                category=INPLACE_OUTSIDE,
            )
        helper = METHOD_HELPERS.get(name)
        if helper is not None:
            return tx.output.record_inplace(
                tx, "call_function", helper, helper, [self] + list(args), kwargs, what
            )
        if not _has_static_method(name):
            # the inference backends export the graph as a static program, which has no
            # such method
            raise Unsupported(
                f"{what} mutates a tensor and has no static-graph form (it runs in Python "
                "between two graphs)",
                category=INPLACE_OUTSIDE,
            )

        def run(obj, *a, **k):
            return getattr(obj, name)(*a, **k)

        return tx.output.record_inplace(
            tx, "call_method", name, run, [self] + list(args), kwargs, what
        )

    def unpack_var_sequence(self, tx) -> List[VariableTracker]:
        if not self.example.shape:
            raise Unsupported("iterating over a 0-d tensor", category=RAISES)
        # the number of rows decides the number of graph ops: a dynamic one is pinned
        n = tx.output.size_of(self, 0).as_python_constant()
        if n > 64:
            raise Unsupported(
                f"iterating over a tensor with {n} rows (unrolling is capped at 64)", category=LIMIT
            )
        return [
            tx.output.call_function(tx, operator.getitem, [self, ConstantVariable(i)], {})
            for i in range(n)
        ]


class TensorListVariable(VariableTracker):
    """A list of tensors of any length that the graph takes whole (``tensor_list``): a
    graph node and the list at capture, used only as an argument of Paddle operations."""

    def __init__(self, node, example: list, source: Optional[Source] = None):
        super().__init__(source)
        self.node = node
        self.example = example

    def describe(self) -> str:
        return f"list of {len(self.example)} tensors (any length)"
