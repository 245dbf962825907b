"""Python constants: numbers, strings, None, ranges, dtypes... anything immutable."""

from __future__ import annotations

import dataclasses
import functools
import operator
from typing import Any, Dict, List

import numpy as np

from ..bytecode import compat
from ..errors import DYNAMIC_VALUE, RAISES, Unsupported
from .base import KnownValueVariable, VariableTracker
from .values import (
    TYPE_INFO_ATTRIBUTES,
    check_numpy_result,
    is_numpy_value,
    is_place,
    is_type_info_value,
    numpy_attribute_allowed,
    place_method,
)

#: methods of constants that are pure, so capture can call them on the real value
_PURE_METHODS = {
    "format",
    "join",
    "split",
    "strip",
    "lstrip",
    "rstrip",
    "lower",
    "upper",
    "replace",
    "startswith",
    "endswith",
    "count",
    "index",
    "find",
    "isdigit",
    "isidentifier",
    "bit_length",
    "conjugate",
    "is_integer",
    "real",
    "imag",
    "__add__",
    "__mul__",
    "__getitem__",
    "__len__",
    "__contains__",
    "keys",
    "values",
    "items",
}


#: what a dataclass field tells (``dataclasses.fields(obj)`` in captured code): constants
_FIELD_ATTRIBUTES = frozenset({"name", "default", "init", "repr", "compare", "kw_only"})


class ConstantVariable(KnownValueVariable):
    """A constant. One read from the frame is guarded only once the capture depends on
    it: reading ``value`` (every use goes through it) adds the guard; a constant that is
    only passed on is loaded again from its source by the generated code."""

    _pending = None

    @property
    def value(self) -> Any:
        pending = self._pending
        if pending is not None:
            self._pending = None
            guard_set, kind = pending
            guard_set.add(self.source, kind, self._value)
        return self._value

    @value.setter
    def value(self, value: Any) -> None:
        self._value = value

    def guard_on_use(self, guard_set, kind: str) -> None:
        self._pending = (guard_set, kind)

    def unread_source(self):
        """The source to load the value from when the capture never looked at it."""
        return self.source if self._pending is not None else None

    def reconstruct(self, cg) -> None:
        unread = self.unread_source()
        if unread is not None:  # not guarded: the same value, from the frame
            cg.extend(unread.reconstruct(cg.code))
        elif isinstance(self._value, np.ndarray):
            # a new array on every call, as the original code makes one: a shared
            # constant would carry a caller's in-place changes into the next call
            cg.extend(compat.load_callable_const(functools.partial(np.copy, self._value)))
            cg.extend(compat.call(0))
        else:
            cg.extend(compat.load_const(self.value))

    def describe(self) -> str:
        r = repr(self.value)
        return f"constant {r if len(r) < 40 else r[:37] + '...'}"

    def truthy(self, tx) -> bool:
        try:
            return bool(self.value)
        except Exception as e:  # a NumPy array of several elements
            raise Unsupported(
                f"truth value of {self.describe()} raises {type(e).__name__}", category=RAISES
            ) from e

    def unpack_var_sequence(self, tx) -> List[VariableTracker]:
        if isinstance(self.value, (range, str, tuple, bytes, frozenset)):
            return [ConstantVariable(v) for v in self.value]
        raise Unsupported(f"iterating over {self.describe()}", category=DYNAMIC_VALUE)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if isinstance(self.value, dataclasses.Field) and name in _FIELD_ATTRIBUTES:
            return ConstantVariable(getattr(self.value, name))
        if is_numpy_value(self.value) and numpy_attribute_allowed(name):
            return self._numpy_attribute(name)
        if is_type_info_value(self.value) and name in TYPE_INFO_ATTRIBUTES:
            return ConstantVariable(self._read_attribute(name))
        if is_place(self.value) and place_method(name):
            from .functions import BuiltinVariable

            return BuiltinVariable(getattr(self.value, name), pure=True)
        if name in _PURE_METHODS or name in ("start", "stop", "step"):
            attr = self._read_attribute(name)
            if callable(attr):
                from .functions import BuiltinVariable

                return BuiltinVariable(attr, pure=True)
            return ConstantVariable(attr)
        raise Unsupported(f"attribute {name!r} of {self.describe()}", category=DYNAMIC_VALUE)

    def call_method(self, tx, name: str, args, kwargs: Dict[str, VariableTracker]):
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def _read_attribute(self, name: str) -> Any:
        """``getattr`` on the constant; one that raises is refused (the eager run raises)."""
        try:
            return getattr(self.value, name)
        except AttributeError as e:
            raise Unsupported(
                f"attribute {name!r} of {self.describe()} raises", category=RAISES
            ) from e

    def _numpy_attribute(self, name: str) -> VariableTracker:
        """``.shape``, ``.astype(...)``, ``.sum()`` of a NumPy value: none of them changes
        it (mutating methods are refused), so they run now, on the constant."""
        from .functions import _wrap_folded

        attr = self._read_attribute(name)
        if callable(attr):
            return _NumpyMethodVariable(attr)
        return _wrap_folded(check_numpy_result(attr, f".{name}"))


class _NumpyMethodVariable(KnownValueVariable):
    """A bound method of a NumPy value, called on constants at capture."""

    def describe(self) -> str:
        return f"NumPy method {getattr(self.value, '__name__', '?')}"

    def call_function(self, tx, args, kwargs):
        from .builder import numpy_call

        out = numpy_call(self.value, args, kwargs)
        if out is None:
            raise Unsupported(
                f"{self.describe()} with arguments that are not constants", category=DYNAMIC_VALUE
            )
        return out


#: binary operators of the ``operator`` module that are safe to fold on constants
FOLDABLE = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.floordiv,
    operator.mod,
    operator.pow,
    operator.matmul,
    operator.lshift,
    operator.rshift,
    operator.and_,
    operator.or_,
    operator.xor,
    operator.lt,
    operator.le,
    operator.gt,
    operator.ge,
    operator.eq,
    operator.ne,
    operator.neg,
    operator.pos,
    operator.invert,
    operator.not_,
    operator.getitem,
    operator.contains,
    operator.is_,
    operator.is_not,
}
