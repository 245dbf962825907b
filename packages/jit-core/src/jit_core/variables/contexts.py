"""Context managers inside captured code: ``with paddle.no_grad():``,
``paddle.set_grad_enabled(...)``, ``paddle.enable_grad()``, ``paddle.amp.auto_cast(...)``,
``contextlib.nullcontext()`` and user objects whose ``__enter__``/``__exit__`` are plain Python.

Gradient mode is part of what the graph computes: inside a ``no_grad`` block that runs
while gradients are on, every tensor an operation makes is detached in the graph, which
gives the values, ``stop_gradient`` flags and gradient flow eager Paddle gives (the entry
is guarded on the gradient mode at entry). Turning gradients *on* inside a block where
they are off cannot be expressed that way and is refused.

``auto_cast`` changes which kernels and dtypes the operations inside use. A block whose
``auto_cast`` leaves the mixed-precision state as it is (disabled, or on a device where
Paddle turns it off) is captured with that state guarded; one that turns mixed precision
on is refused, and the frame runs eagerly with that reason.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Optional, Tuple

import paddle

from ..bytecode import compat
from ..errors import CONTEXT_MANAGER, RAISES, Unsupported
from ..runtime import guards
from ..sources import CallSource
from .base import VariableTracker
from .constant import ConstantVariable

#: the gradient-mode context managers and the mode each sets (set_grad_enabled: its arg)
_GRAD_CLASSES = {}
for _name, _mode in (("no_grad", False), ("enable_grad", True), ("set_grad_enabled", None)):
    _cls = getattr(paddle, _name, None)
    if isinstance(_cls, type):
        _GRAD_CLASSES[_cls] = _mode


def is_grad_mode_class(cls: Any) -> bool:
    return cls in _GRAD_CLASSES


def amp_state() -> Tuple[str, str]:
    """Paddle's mixed-precision state: (level, dtype), as comparable strings."""
    tracer = paddle.base.framework._dygraph_tracer()
    if tracer is None:
        return ("", "")
    return (str(tracer._amp_level), str(tracer._amp_dtype))


def _is_auto_cast(fn: Any) -> bool:
    return fn is getattr(getattr(paddle, "amp", None), "auto_cast", None) or (
        getattr(fn, "__name__", "") in ("auto_cast", "amp_guard")
        and (getattr(fn, "__module__", "") or "").startswith("paddle.amp")
    )


class GradModeVariable(VariableTracker):
    """An instance of ``paddle.no_grad``/``enable_grad``/``set_grad_enabled`` made in
    the frame; ``set_grad_enabled`` changes the mode when made, the others on enter."""

    def __init__(self, mode: bool, applied_on_init: bool, klass: Optional[type] = None):
        super().__init__(None)
        self.mode = mode
        self.applied = applied_on_init
        self.klass = klass

    def reconstruct(self, cg) -> None:
        if self.applied or self.klass is None:
            # entered, or set_grad_enabled (which switches when made): a new object
            # would not be in the state this one is in
            super().reconstruct(cg)
            return
        # not entered yet (a break just before the `with`): a new one is the same
        cg.extend(compat.load_callable_const(self.klass) + compat.call(0))

    def describe(self) -> str:
        return f"gradient mode context ({'on' if self.mode else 'off'})"

    @classmethod
    def create(cls, tx, klass: type, args, kwargs) -> GradModeVariable:
        mode = _GRAD_CLASSES[klass]
        if mode is None:
            values = list(args) + list(kwargs.values())
            if len(values) != 1 or not values[0].is_python_constant():
                raise Unsupported(
                    "set_grad_enabled() with a mode that is not a constant",
                    category=CONTEXT_MANAGER,
                )
            mode = bool(values[0].as_python_constant())
            # it switches the mode as soon as it is made: only the `with` form (the next
            # instruction enters it) is a block the capture can see the end of
            nxt = tx.instructions[tx.ip] if tx.ip < len(tx.instructions) else None
            if nxt is None or nxt.opname not in ("BEFORE_WITH", "SETUP_WITH"):
                raise Unsupported(
                    "paddle.set_grad_enabled() outside a `with` changes the gradient mode "
                    "for the rest of the program",
                    category=CONTEXT_MANAGER,
                )
            var = cls(mode, applied_on_init=True)
            tx.output.push_grad_mode(mode)
            return var
        if args or kwargs:
            raise Unsupported(f"{klass.__name__}() with arguments", category=CONTEXT_MANAGER)
        return cls(mode, applied_on_init=False, klass=klass)

    def enter(self, tx) -> VariableTracker:
        if not self.applied:
            tx.output.push_grad_mode(self.mode)
            self.applied = True
        return ConstantVariable(None)

    def exit(self, tx) -> VariableTracker:
        tx.output.pop_grad_mode()
        return ConstantVariable(None)


class AmpContextVariable(VariableTracker):
    """``paddle.amp.auto_cast(...)`` with constant arguments."""

    def __init__(self, fn: Any, args: list, kwargs: dict):
        super().__init__(None)
        self.fn = fn
        self.args = args
        self.kwargs = kwargs

    def describe(self) -> str:
        return "paddle.amp.auto_cast context"

    def enter(self, tx) -> VariableTracker:
        before = amp_state()
        # what the block would run under: enter and leave the real context right away
        # (it only sets the tracer's state, which exit puts back)
        with self.fn(*self.args, **self.kwargs):
            inside = amp_state()
        if inside != before:
            raise Unsupported(
                f"auto_cast turns mixed precision on ({inside[0]}, {inside[1]}): the "
                "kernels and dtypes it picks are not captured yet",
                category=CONTEXT_MANAGER,
            )
        tx.output.guards.add(CallSource(amp_state), guards.CONSTANT_MATCH, before)
        tx.output.amp_blocks += 1
        return ConstantVariable(None)

    def exit(self, tx) -> VariableTracker:
        tx.output.amp_blocks -= 1
        return ConstantVariable(None)


class NullContextVariable(VariableTracker):
    """``contextlib.nullcontext(value)``, made in the frame: what library code puts where a
    context manager is optional (``ctx = rng_tracker() if parallel else nullcontext()``).
    Entering gives ``value``, and neither end does anything."""

    def __init__(self, enter_result: VariableTracker):
        super().__init__(None)
        self.enter_result = enter_result

    def describe(self) -> str:
        return "contextlib.nullcontext()"

    def reconstruct(self, cg) -> None:
        # a break with it alive (before or inside its block): a new one is the same
        cg.extend(compat.load_callable_const(contextlib.nullcontext))
        self.enter_result.reconstruct(cg)
        cg.extend(compat.call(1))

    def enter(self, tx) -> VariableTracker:
        return self.enter_result

    def exit(self, tx) -> VariableTracker:
        return ConstantVariable(None)


def make_null_context(args, kwargs) -> NullContextVariable:
    if len(args) + len(kwargs) > 1 or (kwargs and "enter_result" not in kwargs):
        raise Unsupported("nullcontext() takes one argument, enter_result", category=RAISES)
    value = args[0] if args else kwargs.get("enter_result", ConstantVariable(None))
    return NullContextVariable(value)


class ContextExitVariable(VariableTracker):
    """The ``__exit__`` a ``with`` block calls on its normal way out."""

    def __init__(self, ctx: VariableTracker):
        super().__init__(None)
        self.ctx = ctx

    def describe(self) -> str:
        return f"__exit__ of {self.ctx.describe()}"

    def call_function(self, tx, args, kwargs):
        if (
            kwargs
            or len(args) != 3
            or not all(a.is_python_constant() and a.as_python_constant() is None for a in args)
        ):
            raise Unsupported(f"{self.describe()} called with an exception", category=RAISES)
        return self.ctx.exit(tx)


def make_auto_cast(fn: Any, args, kwargs) -> AmpContextVariable:
    consts_ok = all(a.is_python_constant() for a in args) and all(
        v.is_python_constant() for v in kwargs.values()
    )
    if not consts_ok:
        raise Unsupported(
            "auto_cast() with arguments that are not constants", category=CONTEXT_MANAGER
        )
    return AmpContextVariable(
        fn,
        [a.as_python_constant() for a in args],
        {k: v.as_python_constant() for k, v in kwargs.items()},
    )


def enter_context(tx, mgr: VariableTracker) -> Tuple[VariableTracker, VariableTracker]:
    """``(the __exit__ to call at the end, what __enter__ returned)`` for ``with mgr:``."""
    from .functions import UserMethodVariable
    from .objects import UserObjectVariable

    if isinstance(mgr, (GradModeVariable, AmpContextVariable, NullContextVariable)):
        entered = mgr.enter(tx)
        return ContextExitVariable(mgr), entered
    held = getattr(mgr, "value", None)
    if type(held) in _GRAD_CLASSES:
        # an instance made outside the frame: no_grad/enable_grad set their mode on enter
        mode = _GRAD_CLASSES[type(held)]
        if mode is None:
            raise Unsupported(
                "a set_grad_enabled() made outside the frame (its mode is set)",
                category=CONTEXT_MANAGER,
            )
        var = GradModeVariable(mode, applied_on_init=False)
        return ContextExitVariable(var), var.enter(tx)
    if isinstance(mgr, UserObjectVariable):
        cls = type(mgr.value)
        enter = inspect.getattr_static(cls, "__enter__", None)
        exit_ = inspect.getattr_static(cls, "__exit__", None)
        if inspect.isfunction(enter) and inspect.isfunction(exit_):
            entered = tx.inline_function(enter, [mgr], {}, fn_source=None)
            return UserMethodVariable(exit_, mgr), entered
    raise Unsupported(f"`with` on {mgr.describe()} is not captured yet", category=CONTEXT_MANAGER)


def is_auto_cast(fn: Any) -> bool:
    return _is_auto_cast(fn)
