"""The callables the generated code of a broken frame calls at run time: the call that
broke the graph (with the hook on, or a captured sublayer through its cache), a resume
function or a loop's body (through the cache, like a target), a loop body's exit, and
the re-arming of Paddle's hook."""

from __future__ import annotations

import types
import weakref
from typing import TYPE_CHECKING, Dict, Optional, Tuple

import paddle

from ..bytecode import flow
from ..codegen import loops
from .direct_entry import forward_of, layer_call_is_forward, set_eval_frame

if TYPE_CHECKING:  # pragma: no cover
    from .eval_frame import CompileContext


class _WeakContext:
    """Holds the ``CompileContext`` weakly. These callables are constants of the code
    objects the cache keeps, and code objects are invisible to the garbage collector: a
    strong reference back to the context would close a cycle (context -> cache entry ->
    code -> constant -> context) that is never collected, keeping the cache, its graphs
    and the optimized layer alive after the user drops them. Code that calls one runs
    inside a call of the context, which keeps it alive meanwhile."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: CompileContext):
        self._ctx = weakref.ref(ctx)

    @property
    def ctx(self) -> CompileContext:
        ctx = self._ctx()
        if ctx is None:  # pragma: no cover - see the class docstring
            raise RuntimeError("jit_core: the optimized callable of this code is gone")
        return ctx


class Rearm(_WeakContext):
    """Called by the code of a frame that breaks its graph just before it returns, when
    Paddle's shim runs that code (the frame was reached through the hook).

    The shim runs replaced code with its callback set to None and afterwards puts back
    only the callback: it assumes its frame-evaluation function is still installed. A
    break in that code turns the hook on for the call and back off, and turning it off
    uninstalls the function; on return every later frame of the caller would go unseen
    (an eager loop over sublayers that break captured only the first). Turning the hook on
    again here reinstalls it; the shim then puts its own callback back over ours."""

    __slots__ = ()

    def __call__(self) -> None:
        set_eval_frame(self.ctx.callback)


class HookedCall(_WeakContext):
    """Runs the call that broke a graph with the frame hook on, so that the callee (a
    sublayer whose forward breaks, a helper that prints) is captured on its own.

    A layer whose class's ``forward`` has cache entries already (captured through the
    hook, on an earlier call) is entered directly, as the optimized layer enters its
    own: the cache's guards, then the entry (``run_direct``), without ``Layer.__call__``
    and the hook's work for each of its Python frames (12 blocks that each break: 659 to
    604 us a call)."""

    __slots__ = ()

    def __call__(self, fn, args, kwargs):
        ctx = self.ctx
        if isinstance(fn, paddle.nn.Layer) and layer_call_is_forward(fn):
            forward = forward_of(type(fn))
            if type(forward) is types.FunctionType:
                code = forward.__code__
                cache = ctx.cache.get(code)
                if cache is not None and cache.hot:
                    if code not in ctx._positional_codes and binds_by_position(code):
                        ctx._positional_codes.add(code)
                    return ctx.run_direct(forward, (fn, *args), kwargs)
        prev = set_eval_frame(ctx.callback)
        try:
            return fn(*args, **kwargs)
        finally:
            set_eval_frame(prev)


def binds_by_position(code: types.CodeType) -> bool:
    """No ``*args``, ``**kwargs`` or keyword-only parameter: the locals of a call by
    position are ``zip(co_varnames, args)`` (``DirectEntry._bind``)."""
    return not code.co_flags & 0x0C and not code.co_kwonlyargcount


class ResumeCall(_WeakContext):
    """Runs a resume function through the cache, like a target called by the user."""

    __slots__ = ("fn",)

    def __init__(self, ctx: CompileContext, fn: types.FunctionType):
        super().__init__(ctx)
        self.fn = fn

    def __call__(self, stack: tuple, local_values: tuple, closure: Optional[tuple] = None):
        fn = self.fn
        if closure is not None:  # the frame's own cells, for a code with free variables
            fn = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, None, closure)
        return self.ctx.run_direct(fn, stack + local_values, {})


class LoopExit:
    """Stands for the resume function of a loop body's break whose way on only leaves the
    body (``loops.exit_at``): returns the exit's ``(kind, payload, locals)`` at once, the
    locals picked from the break's live ones (every name of a body is live at its exits)."""

    __slots__ = ("kind", "payload", "order")

    def __init__(self, exit: loops.Exit, live):
        self.kind = exit.kind
        self.payload = exit.payload
        where = {n: i for i, n in enumerate(live)}
        #: the position in the break's live locals of each name the exit hands back
        self.order = tuple(where[n] for n in exit.names)

    def __call__(self, stack: tuple, local_values: tuple, closure: Optional[tuple] = None):
        return self.kind, self.payload, tuple([local_values[i] for i in self.order])


def empty_closure(code: types.CodeType) -> Optional[tuple]:
    """Cells to make a function of ``code`` with; the calls pass the frame's real ones."""
    return tuple(types.CellType() for _ in code.co_freevars) if code.co_freevars else None


class LoopCall(_WeakContext):
    """Runs a ``for`` or ``while`` loop whose body breaks the graph: the loop in Python,
    the body as its own function through the cache (captured, guarded and broken on its
    own), and the rest of the frame after the loop as a resume function
    (``codegen.loops``)."""

    __slots__ = ("code", "plan", "body", "live", "f_globals", "_after", "_whole")

    def __init__(self, ctx, code, plan, body, live, f_globals):
        super().__init__(ctx)
        self.code = code
        self.plan = plan
        self.body = body
        self.live = live
        self.f_globals = f_globals
        #: where the loop left -> the locals live there (a liveness analysis each)
        self._after: Dict[int, tuple] = {}
        #: the loop function that runs a counter loop whole, eagerly (made when needed)
        self._whole: Optional[types.FunctionType] = None

    def __call__(self, stack: tuple, local_values: tuple, closure: Optional[tuple] = None):
        ctx, plan, body = self.ctx, self.plan, self.body
        if closure is not None:  # the frame's own cells, for a code with free variables
            body = types.FunctionType(body.__code__, body.__globals__, body.__name__, None, closure)
        # (values below the loop's own, an enclosing loop's, stay with the driver:
        # plan_loop refuses a body that reaches below them)
        below = stack[: len(stack) - plan.stack_at_head]
        known = dict(zip(self.live, local_values))
        values = tuple(known.get(n, loops.UNBOUND) for n in plan.names)
        target = plan.exhausted
        numbers = loops.carried_numbers(plan, known) if plan.carried else ()
        whole = self._eager_loop(numbers) if numbers else None
        if whole is None:
            seen = len(ctx.events)
            for item in loops.iterations(plan, stack):
                kind, payload, out = ctx.run_direct(body, item + values, {})
                if kind == loops.RETURN:
                    return payload
                values = out
                if kind == loops.BREAK:
                    target = payload
                    break
                if numbers and len(ctx.events) != seen:
                    # a capture in this iteration may have needed a counter's value: the
                    # rest of the loop runs whole (a while loop's head takes the locals)
                    seen = len(ctx.events)
                    whole = self._eager_loop(numbers)
                    if whole is not None:
                        break
        if whole is not None:
            if closure is not None:
                whole = types.FunctionType(
                    whole.__code__, whole.__globals__, whole.__name__, None, closure
                )
            kind, payload, out = ctx.run_direct(whole, values, {})
            if kind == loops.RETURN:
                return payload
            values, target = out, payload  # (it only returns on leaving the loop)
        # a loop nested in another's body: that body reads every name on its way out, the
        # unbound ones as UNBOUND (its resume function must get them all)
        keep_unbound = loops.is_body(self.code)
        bound = {n: v for n, v in zip(plan.names, values) if keep_unbound or v is not loops.UNBOUND}
        after = self._after.get(target)
        if after is None:
            after = self._after[target] = tuple(sorted(flow.live_locals(self.code, [target])))
        live = [n for n in after if n in bound]
        rest = ctx.compiler.resume_call(self.code, target, len(below), live, self.f_globals)
        return rest(below, tuple(bound[n] for n in live), closure)

    def _eager_loop(self, numbers: Tuple[Tuple[str, type], ...]) -> Optional[types.FunctionType]:
        """The loop function that runs this call's ``while`` loop whole and eagerly when
        the loop carries Python ``numbers`` (a counter: ``loops.carried_numbers``) and
        the body's captures cannot take them as graph inputs: a body function would be
        captured again for each value. Else None, and the body function runs per
        iteration (its second capture takes the numbers that changed as inputs, and
        serves every value)."""
        why = self.ctx.compiler.serves_every_value(self.body.__code__, [n for n, _ in numbers])
        if not why:
            return None
        name, kind = numbers[0]
        why = (
            f"the loop runs eagerly: it changes the Python {kind.__name__} {name!r} in every "
            f"iteration, and {why}"
        )
        whole = self._whole
        if whole is None:
            whole = self._whole = self.ctx.compiler.eager_loop(self.code, self.plan, self.f_globals)
        code = whole.__code__
        if self.ctx.cache_for(code).eager_reason is None:  # (again after a reset)
            where, inst = loops.head_where(self.code, self.plan)
            self.ctx.run_eagerly(code, why, where, inst)
        return whole
