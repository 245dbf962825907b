"""Variable trackers: what the symbolic executor knows about each value it handles."""

from .base import CellVariable, NullVariable, VariableTracker
from .builder import wrap, wrap_static
from .constant import ConstantVariable
from .containers import (
    DictVariable,
    ListIteratorVariable,
    ListVariable,
    SetVariable,
    SliceVariable,
    TupleVariable,
)
from .functions import (
    BoundMethodVariable,
    BuiltinVariable,
    NestedFunctionVariable,
    PaddleFunctionVariable,
    UserFunctionVariable,
    UserMethodVariable,
)
from .layers import LayerVariable
from .ndarrays import NdarrayVariable
from .objects import ClassVariable, ModuleVariable, UserObjectVariable
from .tensor import TensorVariable

__all__ = [
    "BoundMethodVariable",
    "BuiltinVariable",
    "CellVariable",
    "ClassVariable",
    "ConstantVariable",
    "DictVariable",
    "LayerVariable",
    "ListIteratorVariable",
    "ListVariable",
    "ModuleVariable",
    "NdarrayVariable",
    "NestedFunctionVariable",
    "NullVariable",
    "PaddleFunctionVariable",
    "SetVariable",
    "SliceVariable",
    "TensorVariable",
    "TupleVariable",
    "UserFunctionVariable",
    "UserMethodVariable",
    "UserObjectVariable",
    "VariableTracker",
    "wrap",
    "wrap_static",
]
