"""The controls torch.compile users reach for, without editing each ``optimize()`` call:

- ``disable(fn)``: ``fn`` is never captured; a capture that reaches a call of it breaks
  the graph there and the call runs eagerly (``recursive=False``: only ``fn``'s own
  frame runs eagerly, what it calls is captured as usual);
- ``set_stance(stance)``: what every optimized object does from now on, or inside a
  ``with`` block or a decorated function: ``"default"``; ``"force_eager"`` (run the
  original code, capture nothing, keep the caches); ``"eager_on_recompile"`` (use what
  is compiled, run eagerly where a call would recompile); ``"fail_on_recompile"`` (raise
  ``RecompileError`` where a call would recompile);
- ``error_on_graph_break(True)``: a graph break raises ``GraphBreakError``, as
  ``full_graph=True`` does, for every optimized object (``False``: none does).

The settings are process-wide, as torch.compile's are.
"""

from __future__ import annotations

import functools
import types
from typing import Any, Callable, Optional

from . import api
from .config import CONTROLS, DISABLED_ATTR, DISABLED_CODES, STANCES
from .runtime.direct_entry import set_eval_frame


def disable(fn: Optional[Callable] = None, *, recursive: bool = True) -> Any:
    """Keep ``fn`` out of capture (a decorator, or a call): it runs eagerly wherever it is
    called from optimized code, and the graph breaks at the call. With ``recursive``
    (the default) what it calls runs eagerly too; with ``recursive=False`` only ``fn``'s
    own frame does, and what it calls is captured as usual."""
    if fn is None:
        return lambda f: disable(f, recursive=recursive)
    if isinstance(fn, (api.OptimizedFunction, api.OptimizedLayer)):
        raise TypeError("disable() takes the original function, not what optimize() returned")
    func = getattr(fn, "__func__", fn)  # a method: its function
    if not isinstance(func, types.FunctionType):
        raise TypeError(
            f"disable() takes a Python function or method, got {type(fn).__name__} (a "
            "builtin or C function is never captured anyway)"
        )
    if not recursive:
        DISABLED_CODES.add(func.__code__)
        setattr(func, DISABLED_ATTR, "frame")
        return fn

    @functools.wraps(func)
    def run_eagerly(*args, **kwargs):
        # no hook while it runs: nothing it calls is captured either
        prev = set_eval_frame(None)
        try:
            return func(*args, **kwargs)
        finally:
            set_eval_frame(prev)

    setattr(run_eagerly, DISABLED_ATTR, "recursive")
    return run_eagerly


class _Setting:
    """A process-wide setting that is set by the call, and, used as a context manager or
    a decorator, put back as it was when the block or the call ends."""

    def __init__(self, name: str, value: Any):
        self._name = name
        self._value = value
        self._before = getattr(CONTROLS, name)
        self._apply(value)

    def _apply(self, value: Any) -> None:
        setattr(CONTROLS, self._name, value)
        if self._name == "stance":
            api.apply_controls()

    def __enter__(self) -> _Setting:
        self._apply(self._value)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._apply(self._before)

    def __call__(self, fn: Callable) -> Callable:
        # as a decorator it applies to the calls only: undo what the call of the
        # constructor set
        self._apply(self._before)

        @functools.wraps(fn)
        def within(*args, **kwargs):
            before = getattr(CONTROLS, self._name)
            self._apply(self._value)
            try:
                return fn(*args, **kwargs)
            finally:
                self._apply(before)

        return within


def set_stance(stance: str = "default") -> _Setting:
    """Set what every optimized object does (``STANCES``); returns an object that, used
    with ``with`` or as a decorator, sets it only for the block or the calls."""
    if stance not in STANCES:
        raise ValueError(f"stance must be one of {', '.join(STANCES)}; got {stance!r}")
    return _Setting("stance", stance)


def error_on_graph_break(error: bool = True) -> _Setting:
    """Make every graph break raise ``GraphBreakError`` (``True``), or none (``False``),
    whatever ``full_graph`` each ``optimize()`` call gave; as a context manager or a
    decorator, for the block or the calls only."""
    if not isinstance(error, bool):
        raise TypeError(f"error_on_graph_break takes True or False, got {error!r}")
    return _Setting("error_on_graph_break", error)


__all__ = ["STANCES", "disable", "error_on_graph_break", "set_stance"]
