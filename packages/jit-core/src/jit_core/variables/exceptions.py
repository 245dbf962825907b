"""The exception a capture took to a handler (``errors.Raised``), while the handler runs,
and an exception the frame makes to raise (``raise ValueError("...")``).

It matches ``except`` clauses by its type (which a ``RAISES`` guard pins) and can be
bound to a name (``except E as e``); the ``args`` of one the frame made from constants can
be read. Anything else done with it (reading the message of one Paddle raised, keeping it
past the handler) makes the frame be captured again with its ``try`` blocks run in
Python (``errors.ExceptionsNotSimulated``).
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from ..errors import RAISES, ExceptionsNotSimulated, Unsupported
from .base import KnownValueVariable, VariableTracker
from .constant import ConstantVariable
from .containers import BaseListVariable

#: exception classes whose instances a frame may make and raise inside the capture: the
#: built-in ``Exception`` classes, but those that steer iteration (a generator's return)
_NOT_SIMULATED = (StopIteration, StopAsyncIteration)


class ExceptionVariable(VariableTracker):
    """``exc`` (or, for the type slot of 3.8-3.10's handler stack, its class)."""

    def __init__(self, exc: BaseException, is_type: bool = False, made_here: bool = False):
        super().__init__(None)
        self.exc = exc
        self.is_type = is_type
        #: made by the frame from constants (``raise ValueError("...")``): its ``args``
        #: are what they are on every call
        self.made_here = made_here

    def python_type(self) -> type:
        return type if self.is_type else type(self.exc)

    def describe(self) -> str:
        what = "type of the exception" if self.is_type else "exception"
        how = "made in the frame" if self.made_here else "raised during capture"
        return f"{what} {type(self.exc).__name__} {how}"

    def truthy(self, tx) -> bool:
        return True

    def matches(self, wanted: VariableTracker) -> bool:
        """Whether ``except wanted:`` takes this exception."""
        return issubclass(type(self.exc), _classes(wanted))

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "args" and self.made_here and not self.is_type:
            return ConstantVariable(self.exc.args)
        raise ExceptionsNotSimulated(f"the handler reads {name!r} of the {self.describe()}")

    def reconstruct(self, cg) -> None:
        raise ExceptionsNotSimulated(f"the {self.describe()} outlives its handler")


def simulated_exception_class(cls: Any) -> bool:
    """Whether the capture makes and raises instances of ``cls`` itself: a built-in
    exception class (its constructor only stores its arguments)."""
    return (
        isinstance(cls, type)
        and issubclass(cls, Exception)
        and cls.__module__ == "builtins"
        and not issubclass(cls, _NOT_SIMULATED)
    )


def made_exception(cls: type, args: tuple) -> ExceptionVariable:
    """``cls(*args)``, made now from constant ``args`` (``simulated_exception_class``)."""
    return ExceptionVariable(_made(cls, args), made_here=True)


def _made(cls: type, args: tuple) -> BaseException:
    try:
        return cls(*args)
    except Exception as e:  # (UnicodeDecodeError() wants five arguments)
        raise Unsupported(
            f"{cls.__name__}(...) raises {type(e).__name__}: {e}", category=RAISES
        ) from e


def exception_raised(v: VariableTracker) -> Optional[BaseException]:
    """What ``raise v`` raises, where the capture can take it to a handler: an exception
    the frame made (``made_exception``), or a new instance of a built-in exception class
    (``raise ValueError``); else None."""
    if isinstance(v, ExceptionVariable) and v.made_here and not v.is_type:
        return v.exc
    cls: Any = v.value if isinstance(v, KnownValueVariable) else None
    return _made(cls, ()) if simulated_exception_class(cls) else None


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
