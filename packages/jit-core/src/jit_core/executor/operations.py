"""The operations of the translator on values: subscripts and item assignment, binary
and unary operators, identity, iteration. On tensors they become graph nodes (an item
assignment an in-place update); on Python values they fold where the result is a
constant, and break the graph where it depends on what only a run knows."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Callable, List, Optional, cast

from ..errors import (
    DYNAMIC_VALUE,
    INPLACE_OUTSIDE,
    RAISES,
    SIDE_EFFECT,
    TENSOR_BRANCH,
    Unsupported,
)
from ..inplace import setitem_
from ..variables import (
    BuiltinVariable,
    ConstantVariable,
    DictVariable,
    LayerVariable,
    ListVariable,
    ModuleVariable,
    NullVariable,
    TensorVariable,
    UserFunctionVariable,
    ndarrays,
    symbolic,
)
from ..variables.base import VariableTracker
from ..variables.constant import FOLDABLE
from ..variables.containers import BaseListVariable, ListIteratorVariable, SetVariable
from ..variables.functions import _wrap_folded
from ..variables.generators import LazyIteratorVariable
from ..variables.ndarrays import NdarrayVariable
from ..variables.new_objects import NewObjectVariable
from ..variables.symbolic import SymIntVariable

if TYPE_CHECKING:  # pragma: no cover
    from .translator import Translator


class Operations:
    """The value half of the ``Translator`` (a mixin: it records through ``self.output``
    and asks values through the trackers' own methods with ``self`` as their ``tx``:
    ``cast("Translator", self)`` where a method's ``tx`` is annotated)."""

    # what it reads of the translator it is part of
    output: Any

    def getitem(self, obj: VariableTracker, key: VariableTracker) -> VariableTracker:
        if isinstance(obj, TensorVariable):
            return self.output.call_function(self, operator.getitem, [obj, key], {})
        if isinstance(obj, NdarrayVariable):
            return ndarrays.getitem(self, obj, key)
        if isinstance(obj, (BaseListVariable, DictVariable, LayerVariable)):
            return obj.getitem(self, key)
        if obj.is_python_constant() and key.is_python_constant():
            return self._fold(operator.getitem, [obj, key])
        return obj.call_method(cast("Translator", self), "__getitem__", [key], {})

    def setitem(self, obj: VariableTracker, key: VariableTracker, value: VariableTracker) -> None:
        if isinstance(obj, TensorVariable):
            self._tensor_setitem(obj, key, value)
            return
        if isinstance(obj, (ListVariable, DictVariable)):
            obj.setitem(self, key, value)
            return
        if isinstance(obj, NewObjectVariable):
            obj.call_method(cast("Translator", self), "__setitem__", [key, value], {})
            return
        raise Unsupported(f"item assignment on {obj.describe()}", category=SIDE_EFFECT)

    def _tensor_setitem(
        self, obj: TensorVariable, key: VariableTracker, value: VariableTracker
    ) -> None:
        what = "tensor item assignment"
        if not _plain_index(key):
            raise Unsupported(
                f"{what} with index {key.describe()} (only ints, slices, None and ... are "
                "captured) is an in-place op (it runs in Python between two graphs)",
                category=INPLACE_OUTSIDE,
            )
        if not isinstance(value, TensorVariable) and not (
            value.is_python_constant() and type(value.as_python_constant()) in (bool, int, float)
        ):
            raise Unsupported(
                f"{what} of {value.describe()} is an in-place op (it runs in Python between "
                "two graphs)",
                category=INPLACE_OUTSIDE,
            )
        self.output.record_inplace(
            self, "call_function", setitem_, setitem_, [obj, key, value], {}, what
        )

    def delitem(self, obj: VariableTracker, key: VariableTracker) -> None:
        if isinstance(obj, (ListVariable, DictVariable)):
            obj.delitem(self, key)
            return
        raise Unsupported(f"del item of {obj.describe()}", category=SIDE_EFFECT)

    def _fold(self, fn: Callable, args: List[VariableTracker]) -> VariableTracker:
        values = [a.as_python_constant() for a in args]
        try:
            return _wrap_folded(fn(*values))
        except Exception as e:
            raise Unsupported(
                f"{getattr(fn, '__name__', fn)} on constants raises {type(e).__name__}: {e}",
                category=RAISES,
            ) from e

    def binary_op(self, fn: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker:
        if fn is operator.getitem:
            return self.getitem(a, b)
        if isinstance(a, NdarrayVariable) or isinstance(b, NdarrayVariable):
            if fn in (operator.is_, operator.is_not):
                return self.identity_compare(fn, a, b)
            return ndarrays.binary(self, fn, a, b, f"operator {getattr(fn, '__name__', fn)}")
        if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
            if fn in (operator.is_, operator.is_not):
                return self.identity_compare(fn, a, b)
            if fn is operator.contains:
                raise Unsupported(
                    "`in` with a tensor compares tensor values", category=TENSOR_BRANCH
                )
            return self.output.call_function(self, fn, [a, b], {})
        if fn in (operator.is_, operator.is_not):
            return self.identity_compare(fn, a, b)
        if isinstance(a, SymIntVariable) or isinstance(b, SymIntVariable):
            sized = symbolic.binary(self, fn, a, b)
            if sized is not None:
                return sized
        if isinstance(a, BaseListVariable) and isinstance(b, BaseListVariable):
            compared = symbolic.compare_sequences(self, fn, a, b)
            if compared is not None:
                return compared
            # a namedtuple's sum is a plain tuple
            if fn is operator.add and type(a.with_items([])) is type(b.with_items([])):
                return a.with_items(a.items + b.items)
        if isinstance(a, BaseListVariable) and b.is_python_constant() and fn is operator.mul:
            return a.with_items(a.items * b.as_python_constant())
        if isinstance(a, SetVariable) or isinstance(b, SetVariable):
            return _set_operation(self, fn, a, b)
        if fn is operator.contains and isinstance(a, (BaseListVariable, DictVariable)):
            # operator.contains(container, item)
            if isinstance(a, DictVariable):
                return ConstantVariable(a._key(b) in a.items)
            if b.is_python_constant():
                want = b.as_python_constant()
                for item in a.items:
                    if item.is_python_constant() and item.as_python_constant() == want:
                        return ConstantVariable(True)
                    if not item.is_python_constant():
                        raise Unsupported(
                            f"`in` over {a.describe()} compares non-constants",
                            category=DYNAMIC_VALUE,
                        )
                return ConstantVariable(False)
        if fn in (operator.eq, operator.ne) and not (
            a.is_python_constant() and b.is_python_constant()
        ):
            same = self.identity_compare(operator.is_, a, b).as_python_constant()
            if same or _default_eq(a) and _default_eq(b):
                return ConstantVariable(same if fn is operator.eq else not same)
        if a.is_python_constant() and b.is_python_constant() and fn in FOLDABLE:
            return self._fold(fn, [a, b])
        raise Unsupported(
            f"operator {getattr(fn, '__name__', fn)} on {a.describe()} and {b.describe()}",
            category=DYNAMIC_VALUE,
        )

    def unary_op(self, fn: Callable, a: VariableTracker) -> VariableTracker:
        if fn is operator.not_:
            return ConstantVariable(not a.truthy(cast("Translator", self)))
        if isinstance(a, TensorVariable):
            return self.output.call_function(self, fn, [a], {})
        if isinstance(a, NdarrayVariable):
            return ndarrays.unary(self, fn, a, f"operator {getattr(fn, '__name__', fn)}")
        if isinstance(a, SymIntVariable) and fn is operator.neg:
            return self.output.size_op(operator.sub, ConstantVariable(0), a)
        if a.is_python_constant():
            return self._fold(fn, [a])
        raise Unsupported(
            f"operator {getattr(fn, '__name__', fn)} on {a.describe()}", category=DYNAMIC_VALUE
        )

    def identity_compare(self, fn, a: VariableTracker, b: VariableTracker) -> VariableTracker:
        same = _same_object(a, b)
        if same is None:
            raise Unsupported(
                f"`is` between {a.describe()} and {b.describe()}", category=DYNAMIC_VALUE
            )
        return ConstantVariable(same if fn is operator.is_ else not same)

    def iterate(self, obj: VariableTracker) -> VariableTracker:
        if isinstance(obj, ListIteratorVariable):
            return obj
        if isinstance(obj, LazyIteratorVariable):
            # iter(generator) is the generator; a loop steps it (a loop and the code of
            # a genexpr over it): its items run now, when that is exact (see force)
            return obj.force(self, stepwise=True)
        return ListIteratorVariable(obj.unpack_var_sequence(cast("Translator", self)))


_SET_OPERATORS = {
    operator.or_: "union",
    operator.and_: "intersection",
    operator.sub: "difference",
    operator.xor: "symmetric_difference",
}
_SET_COMPARISONS = (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge)


def _set_operation(tx, fn: Callable, a: VariableTracker, b: VariableTracker) -> VariableTracker:
    """An operator with a set made during the capture on one side."""
    if fn is operator.contains and isinstance(a, SetVariable):
        return a.call_method(tx, "__contains__", [b], {})
    if isinstance(a, SetVariable) and fn in _SET_OPERATORS:
        if not (isinstance(b, SetVariable) or isinstance(_constant_or_none(b), (set, frozenset))):
            raise Unsupported(
                f"{getattr(fn, '__name__', fn)} of a set and {b.describe()}", category=DYNAMIC_VALUE
            )
        return a.call_method(tx, _SET_OPERATORS[fn], [b], {})
    if fn in _SET_COMPARISONS:
        values = [x.value if isinstance(x, SetVariable) else _constant_or_none(x) for x in (a, b)]
        if all(isinstance(v, (set, frozenset)) for v in values):
            return ConstantVariable(fn(*values))
    raise Unsupported(
        f"operator {getattr(fn, '__name__', fn)} on {a.describe()} and {b.describe()}",
        category=DYNAMIC_VALUE,
    )


def _constant_or_none(v: VariableTracker) -> Any:
    return v.as_python_constant() if v.is_python_constant() else None


def _default_eq(v: VariableTracker) -> bool:
    """True for objects whose == is identity (layers, modules, plain functions)."""
    return isinstance(v, (LayerVariable, ModuleVariable, UserFunctionVariable))


def _same_object(a: VariableTracker, b: VariableTracker) -> Optional[bool]:
    if a is b:
        return True
    if isinstance(a, TensorVariable) and isinstance(b, TensorVariable):
        return a.node is b.node
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        other = b if isinstance(a, TensorVariable) else a
        if other.is_python_constant() or isinstance(other, (BaseListVariable, DictVariable)):
            return False
        return None
    if isinstance(a, NdarrayVariable) and isinstance(b, NdarrayVariable):
        return a.tensor.node is b.tensor.node  # (every operation gives a new array)
    if isinstance(a, NdarrayVariable) or isinstance(b, NdarrayVariable):
        other = b if isinstance(a, NdarrayVariable) else a
        if other.is_python_constant() or isinstance(other, (BaseListVariable, DictVariable)):
            return False
        return None
    if isinstance(a, NullVariable) or isinstance(b, NullVariable):
        return None
    ra, rb = _real(a), _real(b)
    if ra is not _NO and rb is not _NO:
        return ra is rb
    if isinstance(a, (BaseListVariable, DictVariable)) or isinstance(
        b, (BaseListVariable, DictVariable)
    ):
        if (
            a.is_python_constant()
            and b.is_python_constant()
            and not isinstance(a, (BaseListVariable, DictVariable))
        ):
            return False
        return isinstance(a, type(b)) and a is b if type(a) is type(b) else False
    return None


_NO = object()


def _real(v: VariableTracker) -> Any:
    if isinstance(v, ConstantVariable):
        return v.value
    if isinstance(v, BuiltinVariable):
        return v.fn
    value = getattr(v, "value", _NO)
    if value is not _NO:
        return value
    fn = getattr(v, "fn", _NO)
    return fn


def _plain_index(key: VariableTracker) -> bool:
    """Whether a subscript is made of ints, slices of ints, None and ``...`` only."""
    if isinstance(key, TensorVariable) or not key.is_python_constant():
        return False
    try:
        value = key.as_python_constant()
    except Unsupported:
        return False
    items = value if isinstance(value, tuple) else (value,)
    for v in items:
        if isinstance(v, slice):
            parts = (v.start, v.stop, v.step)
            if any(p is not None and type(p) is not int for p in parts):
                return False
        elif v is not None and v is not Ellipsis and type(v) is not int:
            return False
    return True


__all__ = ["Operations"]
