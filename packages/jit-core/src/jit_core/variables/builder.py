"""Turn a real Python value read from a frame into a tracker, recording the guards that
make it safe to reuse the capture."""

from __future__ import annotations

import collections
import dataclasses
import enum
import inspect
import types
from typing import Any, Optional

import numpy as np
import paddle

from ..config import DISABLED_ATTR
from ..errors import DYNAMIC_VALUE, INTERNAL, UNTRACED_CALL, Unsupported
from ..runtime import guards
from ..runtime.skipfiles import is_library_module, is_skipped_file
from ..sources import AttrSource, ItemSource, ObjectSource, Source
from . import ndarrays
from .base import KnownValueVariable, NullVariable, VariableTracker, call_first
from .constant import ConstantVariable
from .containers import (
    DictVariable,
    ListVariable,
    NamedTupleVariable,
    TupleVariable,
    is_namedtuple_class,
)
from .functions import (
    _SPECIAL,
    PURE_BUILTINS,
    REBUILT_FUNCTIONS,
    BoundMethodVariable,
    BuiltinVariable,
    PaddleFunctionVariable,
    UserFunctionVariable,
    UserMethodVariable,
    _wrap_folded,
)
from .layers import LayerVariable
from .objects import ClassVariable, ModuleVariable, UserObjectVariable
from .training import is_training_object
from .values import constant_arguments, fold_numpy_call, is_numpy_function, is_numpy_value, is_place

_CONSTANT_TYPES = (
    int,
    float,
    bool,
    str,
    bytes,
    complex,
    type(None),
    type(Ellipsis),
    type(NotImplemented),
    range,
    frozenset,  # LOAD_CONST of `x in {1, 2}`; immutable, compared by value in guards
    types.CodeType,
)

_Parameter = type(paddle.create_parameter([1], "float32"))


def is_paddle_dtype(value: Any) -> bool:
    t = type(value)
    return t.__name__ in ("dtype", "VarType", "DataType") and (t.__module__ or "").startswith(
        "paddle"
    )


def is_tensor(value: Any) -> bool:
    return isinstance(value, paddle.Tensor)


def _is_paddle_callable(value: Any) -> bool:
    mod = getattr(value, "__module__", None) or ""
    if mod.startswith("paddle"):
        # model-zoo functions are user code (inlined), the rest of paddle is an op
        f = getattr(getattr(value, "__code__", None), "co_filename", None)
        return f is None or is_skipped_file(f)
    # C functions of paddle's core report odd modules; their class does not lie
    return type(value).__module__.startswith("paddle")


def wrap_static(value: Any) -> VariableTracker:
    """Wrap a value that came from no source (a constant of the capture itself)."""
    return _wrap(None, value, None, False)


def wrap(tx, value: Any, source: Optional[Source], owned_by_layer: bool = False) -> VariableTracker:
    return _wrap(tx, value, source, owned_by_layer)


def _guard(tx, source, kind, value=None):
    if tx is not None and source is not None:
        tx.output.guards.add(source, kind, value)


def _wrap(tx, value: Any, source: Optional[Source], owned_by_layer: bool) -> VariableTracker:
    if value is call_first:
        _guard(tx, source, guards.ID_MATCH, value)
        return NullVariable()
    if is_tensor(value):
        if tx is None:
            raise Unsupported("a tensor constant without a source", category=INTERNAL)
        if source is not None and tx.output.shape_policy.shares_layer(source):
            # of a layer whose capture serves every instance: each call's own tensor
            return tx.output.add_input(tx, value, source, static=True)
        if isinstance(value, _Parameter) or owned_by_layer or source is None:
            # Parameters and buffers are read live from their layer, not passed as inputs.
            _guard(tx, source, guards.ID_MATCH, value)
            return tx.output.get_attr(tx, value, source)
        return tx.output.add_input(tx, value, source)
    if isinstance(value, enum.Enum):
        _guard(tx, source, guards.ID_MATCH, value)
        return ConstantVariable(value, source)
    if type(value) is np.ndarray and tx is not None and source is not None:
        array = ndarrays.from_outside(tx, value, source)
        if array is not None:
            return array
    if (
        type(value) in (int, float)
        and tx is not None
        and source is not None
        and tx.output.shape_policy.number_is_input(source.name())
    ):
        # an int or float whose value changed between calls (a loop counter, a time
        # step): an input of the graph, so that one capture serves every value
        return tx.output.add_number_input(value, source)
    if (
        isinstance(value, (bool, type(None), np.generic) + _CONSTANT_TYPES)
        or is_paddle_dtype(value)
        or is_place(value)
    ):
        var = ConstantVariable(value, source)
        if tx is not None and source is not None:
            # guarded when the capture first looks at the value, not when it only
            # passes it on (a loop counter a loop body never reads)
            var.guard_on_use(tx.output.guards, guards.CONSTANT_MATCH)
        return var
    if isinstance(value, paddle.nn.Layer):
        if tx is not None and source is not None and tx.output.shape_policy.shares_layer(source):
            _guard(tx, source, guards.TYPE_MATCH, type(value))
        else:
            _guard(tx, source, guards.ID_MATCH, value)
        return LayerVariable(value, source)
    if tx is not None and source is None and type(value) in _OUTSIDE_CONTAINERS:
        # a list or dict that exists outside the capture, reached without a path from the
        # frame (a default or closure of a function reached without one, an attribute of
        # such an object): it must still count as outside, so that a mutation is written
        # back to it instead of happening to a copy only
        source = ObjectSource(value, f"a {type(value).__name__} from outside the capture")
    outside = tx is not None and source is not None and type(value) in _OUTSIDE_CONTAINERS
    if outside:
        known = tx.output.side_effects.known(value, source)
        if known is not None:  # read before: one object, one tracker (its mutations)
            return known
    var = _wrap_container(tx, value, source, owned_by_layer)
    if var is not None:
        if outside:
            tx.output.side_effects.register(value, var)
        return var
    return _wrap_named(tx, value, source)


def _wrap_named(tx, value: Any, source: Optional[Source]) -> VariableTracker:
    """A module, class, function, method, or any other object: guarded by identity
    where the capture relies on which one it is, by type where on its kind."""
    if isinstance(value, types.ModuleType):
        _guard(tx, source, guards.ID_MATCH, value)
        return ModuleVariable(value, source)
    if inspect.isclass(value):
        if value in _SPECIAL or value in PURE_BUILTINS:
            return BuiltinVariable(value, source)
        _guard(tx, source, guards.ID_MATCH, value)
        return ClassVariable(value, source)
    if isinstance(value, types.FunctionType):
        rebuilt = value in REBUILT_FUNCTIONS
        _guard(tx, source, guards.FUNCTION_MATCH if rebuilt else guards.ID_MATCH, value)
        if _is_paddle_callable(value):
            return PaddleFunctionVariable(value, source)
        if is_skipped_file(value.__code__.co_filename):
            return _LibraryFunctionVariable(value, source)
        return UserFunctionVariable(value, source)
    if (
        tx is not None
        and source is not None
        and isinstance(value, (types.MethodType, types.BuiltinMethodType))
        and is_tensor(getattr(value, "__self__", None))
    ):
        return _tensor_method(tx, value, source)
    if isinstance(value, types.MethodType):
        fn, obj = value.__func__, value.__self__
        if isinstance(fn, types.FunctionType) and not _is_paddle_callable(fn):
            # a bound method is made anew at each read (``obj.method is obj.method`` is
            # False): its function is what stays the same
            if source is not None:
                _guard(tx, AttrSource(source, "__func__"), guards.ID_MATCH, fn)
            # the object it is bound to is read through the method, and guarded so
            obj_source = (
                AttrSource(source, "__self__")
                if source is not None
                else ObjectSource(obj, "the object a method is bound to")
            )
            return UserMethodVariable(fn, _wrap(tx, obj, obj_source, False))
        return PaddleFunctionVariable(value, source) if _is_paddle_callable(fn) else _lib(value)
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        if _is_paddle_callable(value):
            return PaddleFunctionVariable(value, source)
        if is_numpy_function(value):
            return _LibraryFunctionVariable(value, source)
        return BuiltinVariable(value, source)
    if callable(value) and _is_paddle_callable(value) and not is_training_object(value):
        return PaddleFunctionVariable(value, source)
    if callable(value) and not isinstance(value, type) and is_numpy_function(value):
        # ufuncs, and NumPy 2's functions (``_ArrayFunctionDispatcher`` objects)
        return _LibraryFunctionVariable(value, source)
    if tx is not None and source is not None:
        _guard(tx, source, guards.TYPE_MATCH, type(value))
    return UserObjectVariable(value, source)


def _tensor_method(tx, value: Any, source: Source) -> VariableTracker:
    """A method bound to a tensor (``x.add``, kept in a local or on the stack at a graph
    break): the tensor is read through it, a graph input like any other, and the method is
    called on it. Wrapped as a function, it would be a constant of the graph that holds
    the tensor of the first call."""
    name, tensor = value.__name__, value.__self__
    if isinstance(value, types.MethodType):
        same = getattr(type(tensor), name, None) is value.__func__
        _guard(tx, AttrSource(source, "__func__"), guards.ID_MATCH, value.__func__)
    else:  # a method of the C type
        same = getattr(tensor, name, None) == value
        _guard(tx, source, guards.TYPE_MATCH, type(value))
        _guard(tx, AttrSource(source, "__name__"), guards.CONSTANT_MATCH, name)
    if not same:
        raise Unsupported(
            f"a method of a tensor that is not its attribute {name!r}", category=DYNAMIC_VALUE
        )
    return BoundMethodVariable(_wrap(tx, tensor, AttrSource(source, "__self__"), False), name)


#: containers from outside the frame whose mutation the capture writes back
#: (``executor.side_effects``): one tracker per object
_OUTSIDE_CONTAINERS = (list, dict, collections.OrderedDict)


def _wrap_container(tx, value: Any, source: Optional[Source], owned_by_layer: bool):
    """A tuple, list or dict with its items wrapped, or None for any other value."""
    if type(value) is list and tx is not None and source is not None:
        # from outside: its items are wrapped, and its length guarded, when first read
        _guard(tx, source, guards.TYPE_MATCH, list)
        var = ListVariable.outside(
            source, lambda: _wrap_items(tx, value, source, owned_by_layer).items
        )
        if tx.output.shape_policy.list_is_input(source.name()):
            var.as_input = lambda: tx.output.tensor_list(var, value, source)
        return var
    return _wrap_items(tx, value, source, owned_by_layer)


def _wrap_items(tx, value: Any, source: Optional[Source], owned_by_layer: bool):
    if isinstance(value, (tuple, list)):
        _guard(tx, source, guards.LEN_MATCH, value)
        items = [
            _wrap(tx, v, ItemSource(source, i) if source is not None else None, owned_by_layer)
            for i, v in enumerate(value)
        ]
        cls = TupleVariable if isinstance(value, tuple) else ListVariable
        if is_namedtuple_class(type(value)):
            return NamedTupleVariable(items, type(value), source)
        if type(value) not in (tuple, list):
            raise Unsupported(
                f"a {type(value).__name__} (subclass of {cls.container_type.__name__})",
                category=DYNAMIC_VALUE,
            )
        return cls(items, source)
    if type(value) in (dict, collections.OrderedDict):
        for k in value:
            if not isinstance(k, (str, int, bool, float, type(None), tuple)):
                raise Unsupported(
                    f"a dict with a key of type {type(k).__name__}", category=DYNAMIC_VALUE
                )
        _guard(tx, source, guards.DICT_KEYS, value)
        return DictVariable(
            {
                k: _wrap(
                    tx, v, ItemSource(source, k) if source is not None else None, owned_by_layer
                )
                for k, v in value.items()
            },
            source,
            dict_type=type(value),
        )
    return None


def _lib(value):
    return _LibraryFunctionVariable(value, None)


class _LibraryFunctionVariable(KnownValueVariable):
    """A Python function of a library we do not trace into (the standard library, ...)."""

    def describe(self) -> str:
        mod = getattr(self.fn, "__module__", "?")
        return f"library function {mod}.{getattr(self.fn, '__qualname__', self.fn)}"

    def call_function(self, tx, args, kwargs):
        if is_numpy_function(self.fn):
            computed = ndarrays.call_numpy(tx, self.fn, list(args), dict(kwargs))
            if computed is not None:
                return computed
            folded = numpy_call(self.fn, args, kwargs)
            if folded is not None:
                return folded
        if self.fn is dataclasses.fields and len(args) == 1 and not kwargs:
            from .new_objects import dataclass_fields

            found = dataclass_fields(args[0])
            if found is not None:
                return found
        if getattr(self.fn, DISABLED_ATTR, None) is not None:
            name = getattr(self.fn, "__qualname__", self.fn)
            raise Unsupported(
                f"{name} is marked jit_core.disable(): it runs eagerly", category=UNTRACED_CALL
            )
        raise Unsupported(f"call to {self.describe()}, which is not traced", category=UNTRACED_CALL)


def numpy_call(fn, args, kwargs) -> Optional[VariableTracker]:
    """A NumPy function on constants, folded to a constant (None: not all constants)."""
    consts = constant_arguments(args, kwargs)
    if consts is None:
        return None
    return _wrap_folded(fold_numpy_call(fn, *consts))


__all__ = [
    "wrap",
    "wrap_static",
    "is_tensor",
    "is_paddle_dtype",
    "is_library_module",
    "is_numpy_value",
]
