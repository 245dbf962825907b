"""``optimize()``: wrap a function or a ``paddle.nn.Layer`` so its frames are captured."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set

import paddle

from . import plugins
from .config import CONTROLS, Options, check_backend_options
from .logs import guards_log
from .runtime import fast_dispatch, profiling
from .runtime.direct_entry import forward_of, layer_call_is_forward, set_eval_frame
from .runtime.eval_frame import CompileContext, frame_keys
from .runtime.eval_frame import frame_key as _code_key


def _target_codes(fn: Callable) -> Set[types.CodeType]:
    if isinstance(fn, paddle.nn.Layer):
        code = getattr(forward_of(type(fn)), "__code__", None)
        return {code} if code is not None else set()
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    code = getattr(fn, "__code__", None)
    return {code} if code is not None else set()


def frame_key(fn: Any) -> str:
    """The key of a frame in ``JitStats.entries`` and ``JitStats.eager_frames``: the
    qualified name with file name and first line, e.g. ``Net.forward (model.py:12)``.

    ``fn`` is a code object, a function, a method, or a layer (its ``forward``)."""
    if isinstance(fn, types.CodeType):
        return _code_key(fn)
    if isinstance(fn, paddle.nn.Layer):
        fn = forward_of(type(fn))
    func = inspect.unwrap(getattr(fn, "__func__", fn))
    return _code_key(func.__code__, func)


@dataclass
class JitStats:
    """What the JIT did so far for one optimized object. Frames are named by
    ``frame_key``: ``Net.forward (model.py:12)``."""

    #: capture attempts (a cache miss that ran the symbolic executor)
    captures: int
    #: captures that produced a cache entry
    compiled: int
    #: frames that run eagerly, with their reasons: for good (they cannot be captured), or
    #: past a recompile limit (calls that match none of their entries)
    eager_frames: Dict[str, str]
    #: cache entries per frame
    entries: Dict[str, int]
    #: per frame, the dimensions automatic dynamic shapes made dynamic and why, and why
    #: its shapes stay static where they do (``jit_core.shapes``)
    dynamic_shapes: Dict[str, List[str]] = field(default_factory=dict)
    #: entries being timed against their frame's original code (``profitability``),
    #: those the calls so far reached: a benchmark runs calls until none is left before
    #: it times any
    on_trial: int = 0


def _stats(ctx: CompileContext) -> JitStats:
    caches = [
        (code, c)
        for code, c in list(ctx.cache.items())
        if c.entries or c.eager_reason or c.limit_reason
    ]
    keys = frame_keys(code for code, _ in caches)
    eager: Dict[str, str] = {}
    entries: Dict[str, int] = {}
    shapes: Dict[str, List[str]] = {}
    for code, c in caches:
        key = keys[code]
        notes = list(c.dynamic_notes)
        if c.static_reason:
            notes.append(f"every dimension static: {c.static_reason}")
        if notes:
            shapes[key] = notes
        reason = c.eager_reason or c.limit_reason
        if reason:
            eager[key] = reason
        if c.entries:
            entries[key] = len(c.entries)
    compiled = sum(1 for e in ctx.events if e.compiled)
    captures = sum(1 for e in ctx.events if not e.graph_break and not e.recompile_limit)
    return JitStats(captures, compiled, eager, entries, shapes, ctx.trials.in_progress())


_MISS = object()


class _NoCache:
    """The cache of an optimized object that takes no dispatcher (``_fast`` is None)."""

    hot = ()
    dispatch = None


def _cache_hit(ctx: CompileContext, fast: tuple, args: tuple, front: tuple = (None, None)) -> Any:
    """The cache-hit path of ``CompileContext.run_direct`` for a plain positional call of a
    target without free variables: the result of the matching entry; when every guard
    failed, what ``run_direct`` does with the locals built here (a capture, or the
    eager run past the recompile limit); ``_MISS`` when the call must take the general
    path.

    It runs on every call, so it is kept to a dict, the guards and one call. The hook is
    left as it is (normally off): the transformed code only calls the compiled graph, and
    an enclosing hook, if any, leaves generated and Paddle frames alone. ``front``:
    ``(optimized object, its layer or None)``, which takes the generated call
    (``_install_call``) when the dispatcher is built."""
    func, code, cache = fast
    hot = cache.hot
    if hot and len(args) == code.co_argcount:
        dispatch = _dispatcher_of(ctx, fast, hot, front)
        if dispatch is not None:
            out = dispatch(args)
            return _MISS if out is fast_dispatch.GENERAL else out
        f_locals = dict(zip(code.co_varnames, args))
        for guard, result in hot:
            try:
                ok = guard(f_locals, func.__globals__)
            except Exception:  # noqa: BLE001 - a guard that cannot run has failed
                ok = False
            if ok:
                # (entries on trial, and those kept eager, take the general path)
                fn = ctx._entry_functions.get(result.code) if not ctx.trials.pending else None
                return _MISS if fn is None else fn(*args)
        # every guard ran on these locals and failed: run_direct need not run them again
        return ctx.run_direct(func, args, {}, f_locals)
    return _MISS


def _dispatcher_of(
    ctx: CompileContext, fast: tuple, hot: tuple, front: tuple = (None, None)
) -> Optional[Callable]:
    """The generated dispatcher of ``fast``'s cache for its entries ``hot`` (built once
    for them), or None where their guards cannot be inlined."""
    func, code, cache = fast
    built = cache.dispatch
    if built is None or built[0] is not hot or built[1] is not func:
        dispatch = _dispatcher(ctx, func, code, cache, hot)
        if dispatch is not None and front[0] is not None:
            _install_call(ctx, fast, hot, *front)
        # what the callers check before they call it directly: the number of arguments
        # and their names (keywords in this order bind as positional arguments; None for
        # a positional-only one, which no keyword names)
        n = code.co_argcount if dispatch is not None else -1
        posonly = code.co_posonlyargcount
        names = (None,) * posonly + code.co_varnames[posonly : max(n, 0)]
        built = cache.dispatch = (hot, func, dispatch, n, names)
    return built[2]


def _dispatcher(ctx: CompileContext, func, code, cache, hot: tuple) -> Optional[Callable]:
    """The generated dispatcher for the entries behind ``hot``, or None (the loop in
    ``_cache_hit`` then runs the guards one by one)."""
    entries = list(cache.entries)
    if len(entries) != len(hot) or any(e.guard.fn is not g for e, (g, _) in zip(entries, hot)):
        return None  # changed under us (another thread): the next call builds it

    return fast_dispatch.build(
        func,
        code,
        entries,
        lambda entry_code: ctx.dispatched_function(func, entry_code),
        _miss_of(ctx, func, code),
    )


def _miss_of(ctx: CompileContext, func, code) -> Callable[[tuple], Any]:
    """What a generated dispatcher calls when every guard failed: ``run_direct``, which
    need not run them again."""
    # weakly: the frame hook's callback, which may outlive the context, holds its caches
    # until the context dies (eval_frame._Hook); through a dispatcher holding the
    # context, the context, its graphs and the layers they hold would never die
    ctx_ref = weakref.ref(ctx)

    def miss(args: tuple) -> Any:
        live = ctx_ref()
        assert live is not None  # called only through the optimized object, which holds it
        return live.run_direct(func, args, {}, dict(zip(code.co_varnames, args)))

    return miss


#: every optimized object alive: ``set_stance("force_eager")`` gives each one's class a
#: ``__call__`` that runs the original (no per-call check on the hot path)
_LIVE: weakref.WeakSet[Any] = weakref.WeakSet()


class _RunOriginal(staticmethod):
    """The ``__call__`` of an optimized object under ``set_stance("force_eager")``, and
    of one whose frames all lost to eager (``profitability``): its original function or
    layer itself, as a static method of the object's own class, so that a call reaches
    it with no Python frame between (a frame that forwarded the arguments cost 0.3 us
    a call, which a frame kept eager for being a few percent slower cannot afford)."""


def _run_original(obj: Any) -> _RunOriginal:
    d = obj.__dict__
    return _RunOriginal(d.get("_orig_fn") or d["_orig_layer"])


def _profiled_call(self, *args, **kwargs):
    """The ``__call__`` of an optimized object while a profile is active
    (``jit_core.profile()``): the general path, whose cache entries the profile times
    one by one, the call timed as a whole around them."""
    d = self.__dict__
    target = d.get("_orig_fn") or d["_orig_layer"]
    ctx = d["_ctx"]
    active = profiling.ACTIVE
    if active is None:  # (stopped by another thread meanwhile)
        return ctx.run(target, args, kwargs)
    return active.call(_object_name(target), lambda: ctx.run(target, args, kwargs))


def _object_name(target: Any) -> str:
    if isinstance(target, paddle.nn.Layer):
        return type(target).__name__
    return getattr(target, "__qualname__", None) or repr(target)


def _set_by_control(call: Any) -> bool:
    """Whether ``call`` is the ``__call__`` an optimized object's own class got from a
    control, in place of the class's own (or the generated one of ``_install_call``)."""
    return type(call) is _RunOriginal or call is _profiled_call


def _set_call(obj: Any) -> None:
    """Give ``obj``'s own class the ``__call__`` the controls ask for: the original under
    ``set_stance("force_eager")``, the profiled general path while a profile is active,
    else the class's own, which builds the generated call of the next hit again."""
    own = type(obj)
    ctx = obj.__dict__["_ctx"]
    if CONTROLS.stance == "force_eager":
        own.__call__ = _run_original(obj)
    elif profiling.ACTIVE is not None:
        own.__call__ = _profiled_call
    elif ctx.user_targets and ctx.trials.eager_for_good >= ctx.user_targets:
        # every frame it enters lost to its original by little (profitability)
        own.__call__ = _run_original(obj)
    elif _set_by_control(own.__dict__.get("__call__")):
        del own.__call__
        for cache in ctx.cache.values():
            cache.dispatch = None


def _register(obj: Any) -> None:
    _LIVE.add(obj)
    ref = weakref.ref(obj)
    obj.__dict__["_ctx"].trials.on_eager_for_good.append(lambda: _set_call_of(ref))
    if CONTROLS.stance == "force_eager" or profiling.ACTIVE is not None:
        _set_call(obj)


def _set_call_of(ref: weakref.ref) -> None:
    obj = ref()
    if obj is not None:
        _set_call(obj)


def apply_controls() -> None:
    """What ``set_stance`` and ``jit_core.profile()`` do to the optimized objects alive
    (the other stances are read where a call would capture)."""
    for obj in list(_LIVE):
        _set_call(obj)


profiling._on_change.append(apply_controls)


def _own_class(cls: type) -> type:
    """A subclass of ``cls`` for one optimized object: the call generated for its
    entries becomes that class's ``__call__`` (``_install_call``)."""
    cls = cls.__dict__.get("_own_class_of", cls)  # (copy.copy makes one of an own class)
    attrs = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "_own_class_of": cls}
    return type(cls.__name__, (cls,), attrs)


def _install_call(ctx: CompileContext, fast: tuple, hot: tuple, owner: Any, layer: Any) -> None:
    """Make the call ``fast_dispatch.build_call`` generates for the entries ``hot`` the
    ``__call__`` of ``owner``'s own class, until the entries change: then the class's
    own ``__call__`` serves again, and builds the next one.

    Python finds ``__call__`` on the type, so a call of the optimized object runs the
    generated function as its first and only Python frame; a cache hit runs the guards
    and the graph's operators there, as deep as the user's eager call would."""
    func, code, cache = fast
    own = type(owner)
    base = own._own_class_of
    own_ref = weakref.ref(own)

    def take_back() -> None:
        cache.on_change = None
        cls = own_ref()
        # (a control's call stays: it does not depend on the entries)
        if cls is not None and not _set_by_control(cls.__dict__.get("__call__", _profiled_call)):
            del cls.__call__

    take_back()
    call: Any = fast_dispatch.build_call(
        func,
        code,
        list(cache.entries),
        lambda entry_code: ctx.dispatched_function(func, entry_code),
        _miss_of(ctx, func, code),
        base.__call__,
        cache,
        hot,
        None if layer is None else (layer, layer_call_is_forward),
    )
    if call is not None:
        own.__call__ = call
        cache.on_change = take_back
        guards_log.info(
            "%s: the call a cache hit runs, for %d cache %s:\n%s",
            _code_key(code, func),
            len(hot),
            "entry" if len(hot) == 1 else "entries",
            call.source,
        )


def _positional(code: types.CodeType, args: tuple, kwargs: dict) -> Optional[tuple]:
    """``args`` and ``kwargs`` as the positional arguments they bind, when they name every
    parameter of ``code`` exactly once (``model(**inputs)``, as GraphNet calls a sample);
    else None, and the call takes the general path (defaults, ``*args``, errors)."""
    if not kwargs:
        return args
    n, k = code.co_argcount, len(args)
    if k + len(kwargs) != n or k < code.co_posonlyargcount:
        return None
    names = code.co_varnames[k:n]
    if tuple(kwargs) == names:  # in the parameters' order: no lookup by name
        return args + tuple(kwargs.values())
    try:
        return args + tuple([kwargs[name] for name in names])
    except KeyError:
        return None


def _fast_path(ctx: CompileContext, func: Any) -> Optional[tuple]:
    """``(function, code, cache)`` when calls of ``func`` can take ``_cache_hit``."""
    code = getattr(func, "__code__", None)
    if code is not None and code in ctx._positional_codes and not code.co_freevars:
        return (func, code, ctx.cache_for(code))
    return None


class OptimizedFunction:
    """A function whose frames run through the JIT. Call it like the original."""

    def __new__(cls, *args: Any, **kwargs: Any) -> OptimizedFunction:
        return object.__new__(_own_class(cls))

    def __init__(self, fn: Callable, options: Options):
        self._orig_fn = fn
        self._options = options
        self._ctx = CompileContext(options, _target_codes(fn))
        self._callback = self._ctx.callback
        #: (function, leading args) when the target frame is entered without the hook
        self._direct = self._ctx.direct_entry(fn)
        #: (function, code, its cache) when plain positional calls can take _cache_hit
        self._fast = None
        if self._direct is not None and not self._direct[1]:
            self._fast = _fast_path(self._ctx, self._direct[0])
        #: the cache whose dispatcher a positional call goes straight into
        self._cache = self._fast[2] if self._fast is not None else _NoCache
        functools.update_wrapper(self, fn)
        _register(self)

    def __call__(self, *args, **kwargs):
        cache = self._cache
        built = cache.dispatch
        # while the cache holds the entries its dispatcher was built for (by _cache_hit,
        # for this function), a call that binds its arguments in order goes straight
        # into it: positional ones, then keywords naming the rest in order
        # (``model(**inputs)``, as jit-eval and GraphNet call a sample)
        if (
            built is not None
            and built[0] is cache.hot
            and len(args) + len(kwargs) == built[3]
            and (not kwargs or tuple(kwargs) == built[4][len(args) :])
        ):
            out = built[2]((*args, *kwargs.values()) if kwargs else args)
            if out is not fast_dispatch.GENERAL:
                return out
        else:
            fast = self._fast
            if fast is not None:
                bound = _positional(fast[1], args, kwargs) if kwargs else args
                if bound is not None:
                    out = _cache_hit(self._ctx, fast, bound, (self, None))
                    if out is not _MISS:
                        return out
        direct = self._direct
        if direct is not None:
            func, lead = direct
            return self._ctx.run_direct(func, lead + args if lead else args, kwargs)
        # the same as CompileContext.run, inlined: this is on every call's path
        prev = set_eval_frame(self._callback)
        try:
            return self._orig_fn(*args, **kwargs)
        finally:
            set_eval_frame(prev)

    def __get__(self, obj, objtype=None):
        # used as a method decorator: bind like a function would
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def reset(self) -> None:
        """Forget every compiled frame; the next call captures again."""
        self._ctx.reset()

    @property
    def jit_stats(self) -> JitStats:
        return _stats(self._ctx)

    def __repr__(self) -> str:
        return f"<optimized {getattr(self._orig_fn, '__qualname__', self._orig_fn)} backend={self._options.backend!r}>"


class OptimizedLayer:
    """Calls like the layer it wraps; everything else (parameters, ``state_dict``,
    ``train()``/``eval()``, attributes) is the layer's own. A mode change never reuses a
    graph captured in the other mode: every layer's ``training`` flag is guarded."""

    def __new__(cls, *args: Any, **kwargs: Any) -> OptimizedLayer:
        return object.__new__(_own_class(cls))

    def __init__(self, layer: paddle.nn.Layer, options: Options):
        object.__setattr__(self, "_orig_layer", layer)
        object.__setattr__(self, "_options", options)
        ctx = CompileContext(options, _target_codes(layer))
        object.__setattr__(self, "_ctx", ctx)
        forward = forward_of(type(layer))
        #: (forward, code, its cache) when plain positional calls can take _cache_hit
        fast = _fast_path(ctx, forward) if isinstance(forward, types.FunctionType) else None
        object.__setattr__(self, "_fast", fast)
        object.__setattr__(self, "_fast_type", type(layer))
        _register(self)

    def __call__(self, *args, **kwargs):
        layer = self._orig_layer
        fast = self._fast
        if fast is not None and type(layer) is self._fast_type and layer_call_is_forward(layer):
            cache = fast[2]
            built = cache.dispatch
            # as OptimizedFunction's: the layer is the dispatcher's first argument
            if (
                built is not None
                and built[0] is cache.hot
                and len(args) + len(kwargs) + 1 == built[3]
                and (not kwargs or tuple(kwargs) == built[4][len(args) + 1 :])
            ):
                out = built[2]((layer, *args, *kwargs.values()) if kwargs else (layer, *args))
                if out is not fast_dispatch.GENERAL:
                    return out
            else:
                bound = _positional(fast[1], (layer, *args), kwargs)
                if bound is not None:
                    out = _cache_hit(self._ctx, fast, bound, (self, layer))
                    if out is not _MISS:
                        return out
        return self._ctx.run(layer, args, kwargs)

    def forward(self, *args, **kwargs):
        return self(*args, **kwargs)

    def train(self, mode: bool = True) -> OptimizedLayer:
        self._orig_layer.train() if mode else self._orig_layer.eval()
        return self

    def eval(self) -> OptimizedLayer:
        self._orig_layer.eval()
        return self

    def reset(self) -> None:
        self._ctx.reset()

    @property
    def jit_stats(self) -> JitStats:
        return _stats(self._ctx)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._orig_layer, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._orig_layer, name, value)

    def __repr__(self) -> str:
        return f"Optimized({self._orig_layer!r}, backend={self._options.backend!r})"


def optimize(
    fn_or_layer: Optional[Callable] = None,
    *,
    backend: str = "paddle",
    full_graph: bool = False,
    **options: Any,
):
    """Compile ``fn_or_layer`` with the JIT; use directly or as a decorator.

    ``backend`` names an installed backend plugin (an unknown name raises an error listing
    the installed ones). ``full_graph=True`` (or ``error_on_graph_break=True``) raises
    ``GraphBreakError`` instead of breaking the graph or running a frame eagerly. ``recompile_limit`` (default 8) caps the cache entries per code object
    and ``self`` (or layer held by a local), ``accumulated_recompile_limit`` (default 64)
    those per code object in all: past either, a call that matches no entry runs eagerly
    (the entries keep serving the calls they match).

    Graph passes run before the backend: ``passes=None`` (the default pipeline), a list of
    pass names, or ``False``; ``disable_passes=["cse", ...]`` turns some off;
    ``freeze=True`` promises that parameters and buffers do not change, which lets the
    inference passes (BatchNorm folding, constant folding) run on graphs captured under
    ``paddle.no_grad()`` (call ``reset()`` after changing the parameters of a frozen
    model); ``debug=True`` lints the graph after every pass. ``dynamic`` (dynamic shapes,
    see ``jit_core.shapes``): ``None`` makes a dimension dynamic once a change of its size
    causes a recompile, ``True`` makes every dimension dynamic from the start, ``False``
    none. ``share_layers`` (default True): once another instance of a layer's class reaches
    a frame captured for one (twelve blocks of a class whose forward breaks), the next
    capture serves every instance, with their parameters as graph inputs; ``False`` (and
    ``freeze=True``) keeps each capture bound to its instances. Every other keyword goes
    to the backend. A backend that is installed but cannot
    run here raises ``BackendUnavailableError`` with the reason; with ``fallback=True`` (an
    option the backend takes) everything runs on the ``paddle`` backend instead, with one
    warning.
    """
    opts = Options.from_kwargs(backend, full_graph, options)
    opts = _unless_unavailable(opts)
    check_backend_options(plugins.get_backend(opts.backend), opts.backend_options)
    if fn_or_layer is None:
        return lambda f: _wrap(f, opts)
    return _wrap(fn_or_layer, opts)


def _unless_unavailable(opts: Options) -> Options:
    """The options to use: ``opts``, or the paddle backend's where the backend asked for
    cannot run here and ``fallback=True`` asks to run anyway (one warning says why)."""
    found = plugins.backends().get(opts.backend)
    if found is None or not found.unavailable or opts.backend_options.get("fallback") is not True:
        return opts
    check_backend_options(found, opts.backend_options)
    warnings.warn(
        f"jit_core: backend {opts.backend!r} cannot run here: {found.unavailable}. "
        "Everything runs on the paddle backend (fallback=True).",
        RuntimeWarning,
        stacklevel=3,
    )
    return dataclasses.replace(opts, backend="paddle", backend_options={})


def _wrap(fn_or_layer: Callable, opts: Options):
    if isinstance(fn_or_layer, paddle.nn.Layer):
        return OptimizedLayer(fn_or_layer, opts)
    if isinstance(fn_or_layer, (OptimizedFunction, OptimizedLayer)):
        raise TypeError(f"{fn_or_layer!r} is already optimized")
    if not callable(fn_or_layer):
        raise TypeError(
            f"optimize() takes a function or a paddle.nn.Layer, got {type(fn_or_layer).__name__}"
        )
    return OptimizedFunction(fn_or_layer, opts)
