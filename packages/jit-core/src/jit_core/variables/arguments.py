"""A tracker as a Paddle call takes it: its Python value, with each tensor (and dynamic
size) replaced by its example value (to run the call once while capturing) or by its
graph node (to record the call)."""

from __future__ import annotations

from typing import Any, Callable, Union

from ..errors import DYNAMIC_VALUE, Unsupported
from .base import VariableTracker
from .containers import BaseListVariable, DictVariable, ListVariable, SliceVariable
from .symbolic import SymIntVariable
from .tensor import TensorListVariable, TensorVariable

#: what ``as_argument`` hands its ``tensor`` function: a value the graph holds as a node
GraphValue = Union[TensorVariable, SymIntVariable, TensorListVariable]


def as_argument(v: VariableTracker, tensor: Callable[[GraphValue], Any]) -> Any:
    """The Python value of an argument, with each tensor (and dynamic size) replaced by
    ``tensor(t)``."""
    if isinstance(v, (TensorVariable, SymIntVariable, TensorListVariable)):
        return tensor(v)
    if isinstance(v, ListVariable) and v.unread and v.as_input is not None:
        whole = v.as_input()
        if whole is not None:
            return tensor(whole)
    if isinstance(v, BaseListVariable):
        items = [as_argument(i, tensor) for i in v.items]
        try:
            return v.python_value(items)
        except TypeError:
            # paddle.Size holds ints only: a shape with dynamic sizes is a plain list
            return list(items)
    if isinstance(v, DictVariable):
        return {k: as_argument(i, tensor) for k, i in v.items.items()}
    if isinstance(v, SliceVariable):
        return slice(*(as_argument(p, tensor) for p in v.parts))
    if v.is_python_constant():
        return v.as_python_constant()
    raise Unsupported(
        f"{v.describe()} cannot be passed to a Paddle operation", category=DYNAMIC_VALUE
    )


def example_of(v: VariableTracker) -> Any:
    """The argument as the example run sees it: tensors are their example values."""
    return as_argument(v, lambda t: t.example)


def node_arg_of(v: VariableTracker) -> Any:
    """The argument as the graph records it: tensors are their nodes."""
    return as_argument(v, lambda t: t.node)


__all__ = ["as_argument", "example_of", "node_arg_of"]
