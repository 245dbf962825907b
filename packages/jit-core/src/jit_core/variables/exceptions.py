"""The exception a capture took to a handler (``errors.Raised``), while the handler runs.

It matches ``except`` clauses by its type (which a ``RAISES`` guard pins) and can be
bound to a name (``except E as e``); anything else done with it (reading its message,
keeping it past the handler) makes the frame be captured again with its ``try`` blocks
run in Python (``errors.ExceptionsNotSimulated``).
"""

from __future__ import annotations

from typing import Any, Tuple

from ..errors import RAISES, ExceptionsNotSimulated, Unsupported
from .base import VariableTracker
from .containers import BaseListVariable


class ExceptionVariable(VariableTracker):
    """``exc`` (or, for the type slot of 3.8-3.10's handler stack, its class)."""

    def __init__(self, exc: BaseException, is_type: bool = False):
        super().__init__(None)
        self.exc = exc
        self.is_type = is_type

    def python_type(self) -> type:
        return type if self.is_type else type(self.exc)

    def describe(self) -> str:
        what = "type of the exception" if self.is_type else "exception"
        return f"{what} {type(self.exc).__name__} raised during capture"

    def truthy(self, tx) -> bool:
        return True

    def matches(self, wanted: VariableTracker) -> bool:
        """Whether ``except wanted:`` takes this exception."""
        return issubclass(type(self.exc), _classes(wanted))

    def var_getattr(self, tx, name: str) -> VariableTracker:
        raise ExceptionsNotSimulated(f"the handler reads {name!r} of the {self.describe()}")

    def reconstruct(self, cg) -> None:
        raise ExceptionsNotSimulated(f"the {self.describe()} outlives its handler")


def except_matches(exc: VariableTracker, wanted: VariableTracker) -> bool:
    """Whether ``except wanted:`` takes ``exc``, the exception of a handler the capture
    entered (anything else on the stack there is not captured)."""
    if not isinstance(exc, ExceptionVariable):
        raise Unsupported(f"`except` matching {exc.describe()}", category=RAISES)
    return exc.matches(wanted)


def _classes(v: VariableTracker) -> Tuple[type, ...]:
    if isinstance(v, BaseListVariable):
        return tuple(c for item in v.items for c in _classes(item))
    value: Any = getattr(v, "value", None)
    if value is None and v.is_python_constant():
        value = v.as_python_constant()
    values = value if isinstance(value, tuple) else (value,)
    if not all(isinstance(c, type) and issubclass(c, BaseException) for c in values):
        raise Unsupported(f"`except` of {v.describe()}, which is not an exception class")
    return tuple(values)
