"""Entering a target frame ourselves: ``CompileContext.run`` calls the optimized function
or layer's ``forward`` with the guards of its cache run on the bound arguments, and the
matching entry's code as a function of its own, instead of going through Paddle's frame
hook. It skips the C shim's per-frame work on every cache hit, and on 3.11+ it is the only
way into a code with an exception table, which the shim never hands to the hook."""

from __future__ import annotations

import inspect
import types
import weakref
from typing import Any, Callable, Dict, Optional, cast

import paddle
from paddle.framework import core as _core
from paddle.nn.layer import layers as _layers

from ..bytecode import compat
from . import profiling
from .frame_cache import EAGER_PAST_LIMIT_SEEING_CACHES, RUN_ORIGINAL, FrameResult

#: Paddle's PEP 523 hook setter (it returns the previous callback), for the whole runtime
set_eval_frame = _core.set_eval_frame

#: each layer class's ``forward``, held weakly too: the function reaches its class (its
#: globals, a closure), so as a plain value it kept the key, a class made at run time and
#: its whole module, alive for good (test_memory)
_forwards: weakref.WeakKeyDictionary[type, weakref.ref] = weakref.WeakKeyDictionary()


def forward_of(cls: type) -> Any:
    """The ``forward`` a layer class defines (looked up once per class)."""
    ref = _forwards.get(cls)
    forward = ref() if ref is not None else None
    if forward is None:
        forward = inspect.getattr_static(cls, "forward", None)
        try:
            _forwards[cls] = weakref.ref(forward)
        except TypeError:  # None, or no weak references to it: looked up at each call
            pass
    return forward


def layer_call_is_forward(layer: paddle.nn.Layer) -> bool:
    """Whether ``layer(*args)`` is exactly its class's ``forward(layer, *args)``: no
    ``forward`` set on the instance, and the conditions Layer.__call__ checks itself (no
    hook, no lazy build pending, plain dygraph, no profiler), with the functions of the
    module that defines it."""
    built = type(layer)._build_once is paddle.nn.Layer._build_once or getattr(layer, "_built", True)
    return (
        "forward" not in layer.__dict__
        and not layer._forward_pre_hooks
        and not layer._forward_post_hooks
        and built
        and _layers.in_dygraph_mode()
        and not _layers.in_to_static_mode()
        and not _layers.in_profiler_mode()
    )


class DirectEntry:
    """The direct-entry half of ``CompileContext`` (a mixin: it reads the caches, the
    target codes and the hooks of the compile context it is part of)."""

    # what it reads of the compile context it is part of
    cache: Dict[types.CodeType, Any]
    direct_codes: Any
    callback: Callable[..., Any]
    limit_callback: Callable[..., Any]
    _limit_floor: int
    _positional_codes: Any
    _signatures: Dict[types.CodeType, inspect.Signature]
    _entry_functions: Dict[types.CodeType, Callable[..., Any]]
    _callback: Callable[..., Any]
    _past_limit: Callable[..., Any]
    cache_for: Callable[[types.CodeType], Any]
    run_eagerly: Callable[..., None]
    trials: Any

    def run(self, fn: Callable, args, kwargs) -> Any:
        """Call ``fn`` with the JIT on. The target frame is entered directly when possible
        (``direct_entry``); anything it calls is seen through the frame hook."""
        direct = self.direct_entry(fn)
        if direct is not None:
            func, lead = direct
            return self.run_direct(func, lead + tuple(args) if lead else args, kwargs)
        prev = set_eval_frame(self.callback)
        try:
            return fn(*args, **kwargs)
        finally:
            set_eval_frame(prev)

    def direct_entry(self, fn: Callable):
        """``(function, leading args)`` when ``fn`` starts a target frame that we can enter
        ourselves; else None and the frame hook has to find it.

        Entering directly skips the C shim's per-frame work (locals dict, frame proxy, a
        new function per call) on every cache hit, and on 3.11+ it is the only way into a
        code with an exception table, which the shim never hands to the hook."""
        if isinstance(fn, paddle.nn.Layer):
            forward = forward_of(type(fn))
            code = getattr(forward, "__code__", None)
            if code not in self.direct_codes:
                return None
            if not layer_call_is_forward(fn):  # Layer.__call__'s own code must run
                if compat.hook_skips(code) and "forward" not in fn.__dict__:
                    self._note_invisible(
                        cast(types.CodeType, code),  # one of direct_codes
                        "Layer.__call__ has to run its own code (forward hooks, a pending "
                        "lazy build, static or profiler mode)",
                    )
                return None
            return forward, (fn,)
        func = getattr(fn, "__func__", fn)
        if not isinstance(func, types.FunctionType) or func.__code__ not in self.direct_codes:
            return None
        # a bound method (its __func__ is another object); no check on this per-call path
        lead = (fn.__self__,) if func is not fn else ()  # type: ignore[attr-defined]
        return func, lead

    def _note_invisible(self, code: types.CodeType, why: str) -> None:
        if self.cache_for(code).eager_reason is None:
            self.run_eagerly(
                code,
                "runs eagerly: on Python 3.11+ the frame hook does not see code with an "
                f"exception table (try, with, inlined comprehension), and {why}",
            )

    def run_direct(
        self,
        func: types.FunctionType,
        args: tuple,
        kwargs: dict,
        unmatched: Optional[dict] = None,
    ) -> Any:
        """Run a target function as the hook would: guards, then the transformed code of
        the entry that matches, or a capture on a miss. ``unmatched``: the frame's locals,
        when the caller ran every guard of the cache on them already and none passed."""
        code = func.__code__
        cache = self.cache.get(code)
        hot = cache.hot if cache is not None else ()
        if hot is None:  # runs eagerly for good: its callees still go through the hook
            prev = set_eval_frame(self.callback)
            try:
                return func(*args, **kwargs)
            finally:
                set_eval_frame(prev)
        f_locals = unmatched if unmatched is not None else self._bind(func, code, args, kwargs)
        if f_locals is None:
            return func(*args, **kwargs)  # the same TypeError the call itself raises
        f_globals = func.__globals__
        result = None
        if cache is not None:
            if unmatched is None:
                result = cache.match(f_locals, f_globals)
            if result is None and len(cache.entries) >= self._limit_floor:
                result = self._past_limit(code, cache, f_locals, f_globals)
                if result is not None:
                    prev = set_eval_frame(self._eager_hook(result))
                    try:
                        return func(*args, **kwargs)
                    finally:
                        set_eval_frame(prev)
        if result is not None:
            entry_code = result.code
            if entry_code is None:  # an entry kept eager (profitability)
                prev = set_eval_frame(self.trials.kept_eager_hook(code, self.callback))
                try:
                    return func(*args, **kwargs)
                finally:
                    set_eval_frame(prev)
            fn = self._entry_function(func, entry_code)
            prev = set_eval_frame(None)
            try:
                trials = self.trials.pending
                if trials and entry_code in trials:
                    return self.trials.run(entry_code, func, fn, args, kwargs, f_locals, f_globals)
                if profiling.ACTIVE is not None:
                    return profiling.ACTIVE.run_entry(entry_code, fn, args, kwargs, cache)
                return fn(*args, **kwargs)
            finally:
                set_eval_frame(prev)
        frame = compat.EntryFrame(code, f_locals, f_globals, func.__closure__)
        prev = set_eval_frame(None)
        try:
            result = self._callback(frame)
            if result.code is None:
                set_eval_frame(self._eager_hook(result))
                return func(*args, **kwargs)
            fn = self._entry_function(func, result.code)
            if profiling.ACTIVE is not None:
                return profiling.ACTIVE.run_entry(result.code, fn, args, kwargs, cache)
            return fn(*args, **kwargs)
        finally:
            set_eval_frame(prev)

    def _eager_hook(self, result: FrameResult):
        """The hook under which ``run_direct`` runs the original code for ``result``."""
        if result is RUN_ORIGINAL:
            return self.callback
        if result is EAGER_PAST_LIMIT_SEEING_CACHES:
            return self.limit_callback
        return None if result.disable_eval_frame else self.callback

    def _bind(self, func: types.FunctionType, code: types.CodeType, args, kwargs):
        """The frame's locals at entry (arguments and free variables), or None when the
        call itself would raise TypeError."""
        nargs = code.co_argcount
        if not kwargs and code in self._positional_codes and len(args) == nargs:
            f_locals = dict(zip(code.co_varnames, args))
        elif (
            not kwargs
            and code in self._positional_codes
            and 0 < nargs - len(args) <= len(func.__defaults__ or ())
        ):
            # trailing arguments left to their defaults (forward(x, steps=4) called as
            # forward(x)): inspect's binding costs more than the rest of a cache hit
            missing = nargs - len(args)
            # __defaults__ holds at least `missing` items (the condition above)
            f_locals = dict(zip(code.co_varnames, args + func.__defaults__[-missing:]))  # type: ignore[index]
        else:
            sig = self._signatures.get(code)
            if sig is None:
                sig = self._signatures[code] = _code_signature(func)
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError:
                return None
            bound.apply_defaults()
            f_locals = dict(bound.arguments)
        if code.co_freevars:
            self._add_free_vars(func, code, f_locals)
        return f_locals

    @staticmethod
    def _add_free_vars(func: types.FunctionType, code: types.CodeType, f_locals: dict) -> None:
        for name, cell in zip(code.co_freevars, func.__closure__ or ()):
            try:
                f_locals[name] = cell.cell_contents
            except ValueError:  # an empty cell is not a local yet
                pass

    def dispatched_function(
        self, func: types.FunctionType, code: Optional[types.CodeType]
    ) -> Optional[Callable]:
        """The function a generated dispatcher may call for an entry's code: None for an
        entry on trial (``profitability``), which only ``run_direct`` serves; for an entry
        kept eager (no code), the original function where it runs with the hook off."""
        if code is None:
            hook = self.trials.kept_eager_hook(func.__code__, self.callback)
            return func if hook is None else None
        if code in self.trials.pending:
            return None
        return self._entry_function(func, code)

    def _entry_function(self, func: types.FunctionType, code: types.CodeType) -> Callable:
        fn = self._entry_functions.get(code)
        if fn is None or fn.__closure__ is not func.__closure__:
            fn = types.FunctionType(
                code, func.__globals__, func.__name__, func.__defaults__, func.__closure__
            )
            fn.__kwdefaults__ = func.__kwdefaults__
            self._entry_functions[code] = fn
        return fn


def _code_signature(func: types.FunctionType) -> inspect.Signature:
    """The parameters of ``func``'s own code. ``inspect.signature`` would give those of
    what a decorator says it wraps (``functools.wraps`` sets ``__wrapped__``, some set
    ``__signature__``): Paddle 3.3's ``Conv2D.forward`` is ``wrapper(*args, **kwargs)``
    that claims ``(self, x)``, and the frame's locals are ``args`` and ``kwargs``."""
    plain = types.FunctionType(
        func.__code__, func.__globals__, func.__name__, func.__defaults__, func.__closure__
    )
    plain.__kwdefaults__ = func.__kwdefaults__
    return inspect.signature(plain)


__all__ = ["DirectEntry", "forward_of", "layer_call_is_forward"]
