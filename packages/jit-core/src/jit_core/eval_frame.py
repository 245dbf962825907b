"""The frame hook: a cache of compiled frames behind guards, and the capture on a miss.

``CompileContext`` is what one ``optimize()`` call owns: its backend, options, and a cache
per code object. Its ``callback`` is installed with Paddle's PEP 523 hook
(``paddle.framework.core.set_eval_frame``) only while an optimized callable runs, and
only in the thread that runs it.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import threading
import types
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set

import paddle
from paddle.framework import core as _core
from paddle.nn.layer import layers as _layers

from . import _compat, plugins
from .codegen import breaks as graph_breaks
from .codegen import loops
from .codegen import resume as resume_codes
from .codegen.frame import GENERATED_CODES, build_code, disassemble, graph_outputs
from .config import Options
from .errors import (
    GENERATOR,
    INTERNAL,
    LIMIT,
    BackendCompileError,
    GraphBreakError,
    Unsupported,
)
from .executor.output_graph import OutputGraph, may_share_memory
from .executor.translator import Translator, root_locals
from .fx import GraphModule
from .guards import ID_MATCH, CompiledGuard
from .logs import breaks_log, bytecode_log, graphs_log, guards_log, recompiles_log
from .passes.effects import is_random, target_name
from .passes.manager import PassContext, PassManager, PassRecord
from .passes.manager import op_count as op_count_of
from .skipfiles import is_skipped_file
from .sources import LocalSource

set_eval_frame = _core.set_eval_frame

# Paddle's C shim has two memories of its own, both process-wide (eval_frame_tools.cc):
# - a code whose frames got "run the original, keep hooking" ten times is marked "without
#   graph" and from then on runs with the hook *off* for its whole call tree; after ten
#   calls of any layer, ``Layer.__call__`` would hide every ``forward`` below it;
# - once ``paddle.jit.sot`` is imported (``to_static`` does it), files under paddle/ are
#   never handed to the hook, which would hide targets such as ``paddle.vision`` models.
# ``_keep_hooking`` marks a code "with graph" so the hook keeps seeing its callees, and
# ``_never_skip`` exempts our targets from the file-prefix rule.
_keep_hooking_codes = getattr(_core, "sot_setup_codes_with_graph", None)
_never_skip_codes = getattr(_core, "eval_frame_no_skip_codes", None)


def _keep_hooking(code: types.CodeType) -> None:
    if _keep_hooking_codes is not None:
        _keep_hooking_codes((code,))


def _never_skip(codes) -> None:
    if _never_skip_codes is not None and codes:
        _never_skip_codes(tuple(codes))


def _identifier(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name).strip("_") or "code"


def _location(code: types.CodeType) -> str:
    return f"{code.co_filename}:{code.co_firstlineno}"


def _key(name: str, code: types.CodeType) -> str:
    return f"{name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def frame_key(code: types.CodeType, func: Optional[types.FunctionType] = None) -> str:
    """How reports name a code object: qualified name, file name and first line, e.g.
    ``Net.forward (model.py:12)`` (``Net.forward`` and ``Block.forward`` are both
    ``forward`` to ``co_name``). ``func``, a function running ``code``, saves a search
    on 3.8-3.10."""
    return _key(_compat.code_qualname(code, func), code)


def frame_keys(codes) -> Dict[types.CodeType, str]:
    """``frame_key`` of several codes at once (one search on 3.8-3.10)."""
    return {code: _key(name, code) for code, name in _compat.code_qualnames(codes).items()}


_forwards: weakref.WeakKeyDictionary[type, Any] = weakref.WeakKeyDictionary()


def forward_of(cls: type) -> Any:
    """The ``forward`` a layer class defines (looked up once per class)."""
    forward = _forwards.get(cls)
    if forward is None:
        forward = _forwards[cls] = inspect.getattr_static(cls, "forward", None)
    return forward


def layer_call_is_forward(layer: paddle.nn.Layer) -> bool:
    """Whether ``layer(*args)`` is exactly ``layer.forward(*args)``: the conditions
    Layer.__call__ checks itself (no hook, no lazy build pending, plain dygraph, no
    profiler), with the functions of the module that defines it."""
    built = type(layer)._build_once is paddle.nn.Layer._build_once or getattr(layer, "_built", True)
    return (
        not layer._forward_pre_hooks
        and not layer._forward_post_hooks
        and built
        and _layers.in_dygraph_mode()
        and not _layers.in_to_static_mode()
        and not _layers.in_profiler_mode()
    )


class FrameResult:
    """What the hook hands back to Paddle's C shim for one frame."""

    __slots__ = ("code", "disable_eval_frame", "hooked")

    def __init__(
        self,
        code: Optional[types.CodeType],
        disable_eval_frame: bool,
        hooked: Optional[FrameResult] = None,
    ):
        self.code = code
        self.disable_eval_frame = disable_eval_frame
        #: what to hand Paddle's shim itself (the hook); ``run_direct`` runs ``code``
        self.hooked = hooked if hooked is not None else self


class _Rearm:
    """Called by the code of a frame that breaks its graph just before it returns, when
    Paddle's shim runs that code (the frame was reached through the hook).

    The shim runs replaced code with its callback set to None and afterwards puts back
    only the callback: it assumes its frame-evaluation function is still installed. A
    break in that code turns the hook on for the call and back off, and turning it off
    uninstalls the function; on return every later frame of the caller would go unseen
    (an eager loop over sublayers that break captured only the first). Turning the hook on
    again here reinstalls it; the shim then puts its own callback back over ours."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: CompileContext):
        self.ctx = ctx

    def __call__(self) -> None:
        set_eval_frame(self.ctx.callback)


#: generator, coroutine, iterable coroutine, async generator
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x100 | 0x200
_CO_OPTIMIZED = 0x1

#: run the original code and keep watching the frames it calls
RUN_ORIGINAL = FrameResult(None, False)
#: past the recompile limit, a call that matches no entry runs its original code with
#: the hook off: nothing it calls has a cache of its own that could serve it
EAGER_PAST_LIMIT = FrameResult(None, True)
#: the same, when other frames have entries: through ``CompileContext.run_direct`` the
#: call runs under ``_limit_callback`` (those frames hit their caches, nothing new is
#: captured); seen by the hook, it is ``RUN_ORIGINAL``
EAGER_PAST_LIMIT_SEEING_CACHES = FrameResult(None, False)

#: what the recompile limit counts by (TorchDynamo's rule): an entry whose guard pins a
#: local by identity (``L['self'] is ___o1``) counts only against calls where that local is
#: the same object. Only ``self`` and locals that hold layers (a layer passed in, a loop's
#: item over a ``LayerList``) are counted so: they live as long as the model, while a
#: function made per call would, pinned by its guard, never count against any limit.
_SELF = "self"
_UNBOUND = object()


def _pinned_locals(guards) -> tuple:
    """``((name, object), ...)`` for the identity-matched locals the limit counts by."""
    found = []
    for g in guards:
        if g.kind == ID_MATCH and isinstance(g.source, LocalSource):
            name = g.source.local_name
            if name == _SELF or isinstance(g.value, paddle.nn.Layer):
                found.append((name, g.value))
    return tuple(sorted(found, key=lambda item: item[0]))


@dataclass
class CacheEntry:
    guard: CompiledGuard
    code: types.CodeType
    graph_module: Optional[GraphModule]
    compiled: Optional[Callable]
    #: prebuilt so that a cache hit allocates nothing
    result: FrameResult
    original: types.CodeType
    op_count: int
    #: what each graph pass did to this entry's graph
    pass_records: List[PassRecord] = field(default_factory=list)
    #: the backend that compiled the graph, and why it is not the one asked for
    backend: Optional[str] = None
    backend_note: Optional[str] = None
    #: the graph break this entry's code ends with (reason, location, instruction), and
    #: the resume functions it calls
    graph_break: Optional[Unsupported] = None
    resumes: List[types.CodeType] = field(default_factory=list)
    #: ``((name, object), ...)``: the locals the guard identity-matches (``self``, layers;
    #: see ``_pinned_locals``); the recompile limit counts this entry only for calls
    #: where each is the same object. Empty: it counts for every call
    owner: tuple = ()


@dataclass
class Traced:
    """The result of the symbolic executor on one frame, before the backend sees it."""

    number: int
    output: OutputGraph
    ret: Any
    tensors: list
    graph_module: Optional[GraphModule] = None
    #: where each graph input comes from, and its example value, in placeholder order
    sources: list = field(default_factory=list)
    examples: list = field(default_factory=list)
    pass_records: List[PassRecord] = field(default_factory=list)
    #: set when the capture stopped at a graph break
    point: Optional[graph_breaks.BreakPoint] = None


class CodeCache:
    """The cache entries of one code object, and whether it is left alone."""

    __slots__ = (
        "entries",
        "eager_reason",
        "skipped",
        "hot",
        "limit_reason",
        "limits_hit",
        "_per_owner",
    )

    def __init__(self):
        self.entries: List[CacheEntry] = []
        #: why this code runs eagerly for good (it cannot be captured)
        self.eager_reason: Optional[str] = None
        self.skipped = False
        #: what the hook's fast path reads: (guard function, result) pairs, or None when
        #: the frame runs its original code
        self.hot: Optional[tuple] = ()
        #: why calls that match no entry run eagerly (the last recompile limit reached),
        #: and the limits reached so far (each is warned about once)
        self.limit_reason: Optional[str] = None
        self.limits_hit: Set[str] = set()
        #: ``((name, id), ...)`` of an entry's ``owner`` -> how many entries have it; the
        #: objects live as long as the entries that hold them, so their ids stay theirs
        self._per_owner: Dict[tuple, int] = {}

    def add(self, entry: CacheEntry) -> None:
        self.entries.append(entry)
        self.hot = tuple((e.guard.fn, e.result) for e in self.entries)
        key = tuple((name, id(obj)) for name, obj in entry.owner)
        self._per_owner[key] = self._per_owner.get(key, 0) + 1

    def match(self, L: dict, G: dict) -> Optional[FrameResult]:
        """The result of the first entry whose guard passes, or None.

        (The hook and ``api._cache_hit`` loop over ``hot`` inline: they run on every call.)
        """
        for entry in self.entries:
            if entry.guard(L, G):
                return entry.result
        return None

    def run_eagerly(self, reason: str) -> None:
        self.eager_reason = reason
        self.hot = None

    def count_for(self, L) -> int:
        """The entries that count against the recompile limit for a call with locals
        ``L``: those whose pinned locals are the same objects here, and those that pin
        none."""
        n = 0
        for key, count in self._per_owner.items():
            if all(id(L.get(name, _UNBOUND)) == oid for name, oid in key):
                n += count
        return n

    def clear(self) -> None:
        self.entries = []
        self.eager_reason = None
        self.hot = ()
        self.limit_reason = None
        self.limits_hit = set()
        self._per_owner = {}


@dataclass
class CaptureEvent:
    """One capture attempt, kept for ``explain()``."""

    code_name: str
    location: str
    compiled: bool
    entry: Optional[CacheEntry] = None
    reason: Optional[str] = None
    break_location: Optional[str] = None
    instruction: Optional[str] = None
    #: a graph break inside a compiled frame (not a capture of its own)
    graph_break: bool = False
    #: the resume functions a graph break calls: (name, disassembly)
    resumes: List[tuple] = field(default_factory=list)
    #: a recompile limit reached (not a capture): calls that match no entry run eagerly
    recompile_limit: bool = False
    #: ``frame_key`` of the code
    key: Optional[str] = None
    #: the kind of break (one of ``errors.CATEGORIES``), for a frame that does not compile
    category: Optional[str] = None


class _HookedCall:
    """Runs the call that broke a graph with the frame hook on, so that the callee (a
    sublayer whose forward breaks, a helper that prints) is captured on its own."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: CompileContext):
        self.ctx = ctx

    def __call__(self, fn, args, kwargs):
        prev = set_eval_frame(self.ctx.callback)
        try:
            return fn(*args, **kwargs)
        finally:
            set_eval_frame(prev)


class _ResumeCall:
    """Runs a resume function through the cache, like a target called by the user."""

    __slots__ = ("ctx", "fn")

    def __init__(self, ctx: CompileContext, fn: types.FunctionType):
        self.ctx = ctx
        self.fn = fn

    def __call__(self, stack: tuple, local_values: tuple, closure: Optional[tuple] = None):
        fn = self.fn
        if closure is not None:  # the frame's own cells, for a code with free variables
            fn = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, None, closure)
        return self.ctx.run_direct(fn, stack + local_values, {})


def _empty_closure(code: types.CodeType) -> Optional[tuple]:
    """Cells to make a function of ``code`` with; the calls pass the frame's real ones."""
    return tuple(types.CellType() for _ in code.co_freevars) if code.co_freevars else None


class _LoopCall:
    """Runs a ``for`` loop whose body breaks the graph: the loop in Python, the body as
    its own function through the cache (captured, guarded and broken on its own), and
    the rest of the frame after the loop as a resume function (``codegen.loops``)."""

    __slots__ = ("ctx", "code", "plan", "body", "live", "f_globals", "_after")

    def __init__(self, ctx, code, plan, body, live, f_globals):
        self.ctx = ctx
        self.code = code
        self.plan = plan
        self.body = body
        self.live = live
        self.f_globals = f_globals
        #: where the loop left -> the locals live there (a liveness analysis each)
        self._after: Dict[int, tuple] = {}

    def __call__(self, stack: tuple, local_values: tuple, closure: Optional[tuple] = None):
        ctx, plan, body = self.ctx, self.plan, self.body
        if closure is not None:  # the frame's own cells, for a code with free variables
            body = types.FunctionType(body.__code__, body.__globals__, body.__name__, None, closure)
        below, iterator = stack[:-1], stack[-1]
        known = dict(zip(self.live, local_values))
        values = tuple(known.get(n, loops.UNBOUND) for n in plan.names)
        target = plan.exhausted
        for item in iterator:
            kind, payload, out = ctx.run_direct(body, (item,) + values, {})
            if kind == loops.RETURN:
                return payload
            values = out
            if kind == loops.BREAK:
                target = payload
                break
        bound = {n: v for n, v in zip(plan.names, values) if v is not loops.UNBOUND}
        after = self._after.get(target)
        if after is None:
            after = self._after[target] = tuple(
                sorted(resume_codes.live_locals(self.code, [target]))
            )
        live = [n for n in after if n in bound]
        rest = ctx._resume_call(self.code, target, len(below), live, self.f_globals)
        return rest(below, tuple(bound[n] for n in live), closure)


@contextlib.contextmanager
def _preserve_rng():
    # The capture runs each op once on example values; random ops must not advance the
    # generator the user sees, or results would differ from eager with the same seed.
    state = paddle.get_rng_state()
    try:
        yield
    finally:
        paddle.set_rng_state(state)


def _needs_training_backend(gm, traced: Traced, grad_on: bool) -> Optional[str]:
    """Why ``gm`` cannot run on an inference-only backend, or None."""
    if grad_on:
        wants = [i for i, x in enumerate(traced.examples) if not x.stop_gradient]
        if wants:
            return f"gradients are on and input {traced.sources[wants[0]].name()} requires them"
        params = [n for n, p in gm.named_parameters() if not p.stop_gradient]
        if params:
            return f"gradients are on and parameter {params[0]} requires them"
    for node in gm.graph.nodes:
        if node.op == "call_module" and getattr(gm, node.target).training:
            return f"layer {node.target} is in training mode"
        if node.op in ("call_function", "call_method") and is_random(node):
            return f"{target_name(node)} draws random numbers"
    return _aliased_output(gm, traced)


def _aliased_output(gm, traced: Traced) -> Optional[str]:
    """Why the outputs of ``gm`` must be Paddle's own tensors: one is a view of an input,
    a parameter or another output. An inference backend hands back new tensors, so an
    in-place update after the graph (eager, past a break; or the caller's) would not
    reach what eager Paddle's view shares memory with."""
    outs = [t.example for t in traced.tensors]
    if not outs:
        return None
    held = [(traced.sources[i].name(), x) for i, x in enumerate(traced.examples)]
    held += [(f"parameter {n}", p) for n, p in gm.named_parameters()]
    held += [(f"buffer {n}", b) for n, b in gm.named_buffers()]
    for i, out in enumerate(outs):
        for name, t in held:
            if may_share_memory(out, t):
                return f"graph output {i} is a view of {name}"
        for j in range(i):
            if may_share_memory(out, outs[j]):
                return f"graph outputs {j} and {i} share memory (one is a view of the other)"
    return None


class CompileContext:
    def __init__(self, options: Options, targets: Set[types.CodeType]):
        self.options = options
        self.backend = plugins.get_backend(options.backend)
        self.passes = PassManager.from_options(
            options.passes, options.disable_passes, options.debug
        )
        self.targets = set(targets)
        self.cache: Dict[types.CodeType, CodeCache] = {}
        self.events: List[CaptureEvent] = []
        self._lock = threading.RLock()
        self._counter = 0
        self.callback = self._callback  # bound once: a new bound method each call costs
        #: targets that ``run`` enters itself (all but generators, which must start
        #: through CPython's own call to become generator objects)
        self.direct_codes = {c for c in self.targets if not c.co_flags & _GENERATOR_FLAGS}
        #: targets whose arguments bind by position alone: the cheap way to build locals
        self._positional_codes = {
            c for c in self.direct_codes if not c.co_flags & 0x0C and not c.co_kwonlyargcount
        }
        _never_skip(self.targets)
        self._mark_generator_targets()
        self._signatures: Dict[types.CodeType, inspect.Signature] = {}
        self._warned_training = False
        self._entry_functions: Dict[types.CodeType, Callable] = {}
        self._hooked_call = _HookedCall(self)
        self._rearm = _Rearm(self)
        #: (code, offset, stack size, live locals) -> the resume callable
        self._resumes: Dict[tuple, Any] = {}
        #: (code, loop head) -> the code of the loop's body function (codegen.loops)
        self._loop_bodies: Dict[tuple, types.CodeType] = {}
        #: resume code -> the code it resumes, followed back to one that is no resume
        self._resume_roots: Dict[types.CodeType, types.CodeType] = {}
        #: the roots (``_resume_roots``) of the codes with cache entries that are not
        #: targets: frames of callees, captured on their own, that a frame may call
        self._callee_roots: Set[types.CodeType] = set()
        #: no limit can be reached with fewer entries than this
        self._limit_floor = min(options.recompile_limit, options.accumulated_recompile_limit)
        self.limit_callback = self._limit_callback

    # ------------------------------------------------------------------ the hook
    def _callback(self, frame) -> FrameResult:
        # the hot path of every call: keep it to dict lookups and the guards
        cache = self.cache.get(frame.f_code)
        if cache is None:
            cache = self._new_cache(frame.f_code)
        hot = cache.hot
        if hot is None:
            return RUN_ORIGINAL
        if hot:
            L = frame.f_locals
            G = frame.f_globals
            for guard, result in hot:
                try:
                    if guard(L, G):
                        return result.hooked
                except Exception:  # noqa: BLE001 - a guard that cannot run has failed
                    pass
            if len(hot) >= self._limit_floor:
                result = self._past_limit(frame.f_code, cache, L, G)
                if result is not None:
                    return result.hooked
        return self._miss(frame, frame.f_code, cache).hooked

    def _limit_callback(self, frame) -> FrameResult:
        """The hook while a frame past its recompile limit runs eagerly through
        ``run_direct``: frames that have entries of their own go through their cache (and
        recompile, as usual); every other frame runs as it is, without a capture."""
        cache = self.cache.get(frame.f_code)
        if cache is None:
            cache = self._new_cache(frame.f_code)  # keeps Paddle's shim hooking it
        if cache.entries:
            return self._callback(frame)
        return RUN_ORIGINAL  # keeps this hook on for what it calls

    def _mark_generator_targets(self) -> None:
        # the shim never shows us generator frames: say up front that they run eagerly
        for code in self.targets:
            if code.co_flags & _GENERATOR_FLAGS:
                self.cache.pop(code, None)
                self._new_cache(code)

    def cache_for(self, code: types.CodeType) -> CodeCache:
        """The cache of ``code``, made now if it has none yet."""
        cache = self.cache.get(code)
        return cache if cache is not None else self._new_cache(code)

    def _new_cache(self, code: types.CodeType) -> CodeCache:
        _keep_hooking(code)
        cache = CodeCache()
        if code not in self.targets and (
            is_skipped_file(code.co_filename)
            or code in GENERATED_CODES
            # module and class bodies (no CO_OPTIMIZED): not functions, nothing to capture
            or not code.co_flags & _CO_OPTIMIZED
        ):
            cache.skipped = True
            cache.hot = None
        elif code.co_flags & _GENERATOR_FLAGS:
            reason = "generators and coroutines run eagerly"
            cache.run_eagerly(reason)
            self.events.append(
                CaptureEvent(code.co_name, _location(code), False, None, reason, category=GENERATOR)
            )
        self.cache[code] = cache
        return cache

    def _miss(self, frame, code: types.CodeType, cache: CodeCache) -> FrameResult:
        with self._lock:
            L = frame.f_locals
            G = frame.f_globals
            result = cache.match(L, G)  # another thread may have compiled it meanwhile
            if result is not None:
                return result
            if cache.entries:
                result = self._past_limit(code, cache, L, G)
                if result is not None:
                    return result
                failed = cache.entries[-1].guard.first_failure(L, G)
                recompiles_log.info(
                    "recompiling %s (%s:%d): guard failed: %s",
                    code.co_name,
                    code.co_filename,
                    code.co_firstlineno,
                    failed,
                )
            location = _location(code)
            try:
                entry = self._capture(frame, code)
            except Unsupported as e:
                reason = e.describe()
                if self.options.full_graph:
                    raise GraphBreakError(e.reason, e.location, e.instruction, e.category) from None
                cache.run_eagerly(reason)
                self.events.append(
                    CaptureEvent(
                        code.co_name,
                        location,
                        False,
                        None,
                        e.reason,
                        e.location,
                        e.instruction,
                        category=e.category,
                    )
                )
                breaks_log.info("%s runs eagerly: %s", code.co_name, reason)
                return RUN_ORIGINAL
            except BackendCompileError:
                raise
            except Exception as e:  # noqa: BLE001
                # A bug of ours must never reach the user's program: the frame runs
                # eagerly (which raises the user's own error, if it is one) and we say so.
                reason = f"internal error during capture: {type(e).__name__}: {e}"
                if self.options.full_graph:
                    raise GraphBreakError(reason, location, None, INTERNAL) from e
                cache.run_eagerly(reason)
                self.events.append(
                    CaptureEvent(code.co_name, location, False, None, reason, category=INTERNAL)
                )
                breaks_log.warning("%s runs eagerly: %s", code.co_name, reason, exc_info=True)
                warnings.warn(
                    f"jit_core: {code.co_name} ({location}) runs eagerly: {reason}",
                    RuntimeWarning,
                    stacklevel=2,
                )
                return RUN_ORIGINAL
            cache.add(entry)
            root = self._resume_roots.get(code, code)
            if root not in self.targets:
                self._callee_roots.add(root)
            self.events.append(CaptureEvent(code.co_name, location, True, entry))
            brk = entry.graph_break
            if brk is not None:
                self.events.append(
                    CaptureEvent(
                        code.co_name,
                        location,
                        False,
                        None,
                        brk.reason,
                        brk.location,
                        brk.instruction,
                        graph_break=True,
                        resumes=[resume_codes.describe_resume(c) for c in entry.resumes],
                        category=brk.category,
                    )
                )
                breaks_log.info("graph break in %s: %s", code.co_name, brk.describe())
            return entry.result

    # ------------------------------------------------------------------ the limits
    def _past_limit(self, code: types.CodeType, cache: CodeCache, L, G) -> Optional[FrameResult]:
        """For a call that matched no entry: None when it may be captured, else how it
        runs eagerly (its entries stay and keep serving the calls they match).

        The limits, TorchDynamo's: ``recompile_limit`` entries for this call's ``self``
        (entries bound to another instance do not count, so twelve instances of one
        block class each get their own), ``accumulated_recompile_limit`` in all."""
        entries = cache.entries
        n = len(entries)
        opts = self.options
        if n >= opts.accumulated_recompile_limit:
            kind, limit, mine = "accumulated_recompile_limit", opts.accumulated_recompile_limit, n
        else:
            mine = cache.count_for(L)
            if mine < opts.recompile_limit:
                return None
            kind, limit = "recompile_limit", opts.recompile_limit
        if kind not in cache.limits_hit:
            with self._lock:
                if kind not in cache.limits_hit:
                    self._reach_limit(code, cache, kind, limit, mine, L, G)
        return self._eager_result(code)

    def _reach_limit(self, code, cache: CodeCache, kind: str, limit: int, mine: int, L, G):
        """Say once per code and limit that calls matching no entry now run eagerly."""
        if kind == "accumulated_recompile_limit":
            reason = (
                f"accumulated recompile limit ({limit}) reached: {mine} entries for all "
                "instances together; calls that match none of them run eagerly"
            )
        else:
            own = [
                e
                for e in cache.entries
                if all(L.get(name, _UNBOUND) is obj for name, obj in e.owner)
            ]
            try:
                failed = own[-1].guard.first_failure(L, G) if own else None
            except Exception:  # noqa: BLE001 - only for the message
                failed = None
            names = sorted({name for e in own for name, _ in e.owner})
            whose = ""
            if names:
                whose = " for " + ", ".join(f"{n} ({type(L[n]).__name__})" for n in names)
            reason = (
                f"recompile limit ({limit}) reached{whose}; the guard that kept failing: "
                f"{failed}; calls that match none of its {mine} entries run eagerly"
            )
        cache.limits_hit.add(kind)
        cache.limit_reason = reason
        key = frame_key(code)
        self.events.append(
            CaptureEvent(
                code.co_name,
                _location(code),
                False,
                None,
                reason,
                recompile_limit=True,
                key=key,
                category=LIMIT,
            )
        )
        recompiles_log.info("%s: %s", key, reason)
        warnings.warn(
            f"jit_core: {key} now runs eagerly when no cache entry matches: {reason}",
            RuntimeWarning,
            stacklevel=2,
        )

    def _eager_result(self, code: types.CodeType) -> FrameResult:
        """How a call past the limit runs: with the hook off (plain eager, the cheapest),
        unless callees captured on their own frames (not this frame, its resume
        functions, or the optimized function itself) have entries that the call may
        reach: then they keep serving it (``EAGER_PAST_LIMIT_SEEING_CACHES``)."""
        roots = self._callee_roots
        if len(roots) > 1 or (roots and self._resume_roots.get(code, code) not in roots):
            return EAGER_PAST_LIMIT_SEEING_CACHES
        return EAGER_PAST_LIMIT

    # ------------------------------------------------------------------ capture
    def trace(
        self,
        frame,
        code: types.CodeType,
        stop: Optional[Unsupported] = None,
        where: Optional[graph_breaks.Where] = None,
        inputs_as_outputs: bool = False,
    ) -> Traced:
        """Run the symbolic executor over ``frame`` and the graph passes over its graph.

        Raises ``Unsupported`` when the frame cannot be captured. With ``stop`` (what
        stopped an earlier capture of the same frame), the capture ends just before the
        instruction where that happened, or before the loop around it (``where``): the
        graph of a frame that breaks there. ``inputs_as_outputs`` (``capture()``): the
        graph returns every tensor the frame returns, its inputs too."""
        output = OutputGraph()
        f_globals = frame.f_globals
        with _preserve_rng():
            tx = Translator(code, f_globals, output, f_globals)
            root_locals(code, _compat.frame_locals(frame), tx)
            point = None
            before_loop = where is not None and where.before_loop is not None
            if before_loop:
                tx.stop_at_offset = where.before_loop
            elif stop is not None:
                tx.stop_at_step = stop.root_step
            ret = tx.run()
            tensors: list = []
            if tx.stopped:
                inst = tx.instructions[tx.ip]
                if not before_loop and inst.offset != stop.root_instruction.offset:
                    raise Unsupported(
                        "the capture did not stop where it broke before", category=INTERNAL
                    )
                point = graph_breaks.break_point(tx, inst, before_loop)
                tensors = graph_breaks.tensors_to_rebuild(code, point)
            else:
                tensors = graph_outputs(code, ret, inputs_as_outputs)
            self._counter += 1
            n = self._counter
            traced = Traced(n, output, ret, tensors, point=point)
            if tensors:
                output.set_outputs(tensors)
                gm = GraphModule(output.root, output.graph, class_name=f"Graph_{code.co_name}_{n}")
                placeholders = [nd for nd in output.graph.nodes if nd.op == "placeholder"]
                by_node = {nd: (s, ex) for s, nd, ex in output.inputs}
                traced.graph_module = gm
                # backends that bake parameters into what they build may do so only then
                gm.meta["frozen"] = self.options.freeze
                traced.sources = [by_node[nd][0] for nd in placeholders]
                traced.examples = [by_node[nd][1] for nd in placeholders]
                ctx = PassContext(traced.examples, facts=self._facts())
                traced.pass_records = self.passes.run(gm, ctx)
                if "no_grad" in ctx.relied_on:
                    # a pass used that gradients were off: they must be off on a hit too
                    output.guards.grad_enabled = False
        return traced

    def _facts(self) -> Set[str]:
        facts = set()
        if self.options.freeze:
            facts.add("frozen")
        if not paddle.is_grad_enabled():
            facts.add("no_grad")
        return facts

    def _capture(self, frame, code: types.CodeType) -> CacheEntry:
        stop = None
        try:
            traced = self.trace(frame, code)
        except Unsupported as e:
            where = self._where_to_break(code, e)
            if not isinstance(where, graph_breaks.Where):
                if where:
                    e.reason = f"{e.reason}; {where}"
                raise
            stop = e
            try:
                traced = self.trace(frame, code, stop=e, where=where)
            except Unsupported as again:
                raise e.could_not_break(again.reason) from None
            if where.before_loop is not None and traced.graph_module is None:
                if where.kind == "block":
                    # nothing to capture before the block: the frame runs as it is
                    e.reason = f"{e.reason}; {graph_breaks.IN_BLOCK}"
                    raise e
                plan = loops.plan_loop(code, where.before_loop)
                if not isinstance(plan, loops.LoopPlan):
                    # nothing to capture before a loop that cannot be outlined
                    e.reason = f"{e.reason}; {graph_breaks.IN_LOOP} ({plan})"
                    raise e
        gm, n = traced.graph_module, traced.number
        compiled = None
        op_count = 0
        backend, backend_note = self.backend, None
        if gm is not None:
            op_count = op_count_of(gm.graph)
            if backend.inference_only:
                backend, backend_note = self._inference_backend(gm, traced)
            options = self.options.backend_options if backend is self.backend else {}
            try:
                compiled = backend.compile(gm, traced.examples, **options)
            except Unsupported:
                raise
            except Exception as e:
                raise BackendCompileError(
                    f"backend {backend.name!r} failed to compile the graph of "
                    f"{code.co_name}: {type(e).__name__}: {e}"
                ) from e
            graphs_log.info("graph of %s:\n%s", code.co_name, gm.code)
        resumes: List[types.CodeType] = []
        if stop is None:
            new_code = build_code(code, compiled, traced.sources, traced.tensors, traced.ret)
        else:
            loop_body: List[str] = []

            def make_resume(offset: int, nstack: int, live) -> Callable:
                if (
                    traced.point.before_loop
                    and where.kind == "loop"
                    and offset == traced.point.next_offset
                ):
                    loop = self._loop_call(code, offset, nstack, live, frame.f_globals)
                    if loop is not None:
                        resumes.append(loop.body.__code__)
                        loop_body.append(loop.body.__code__.co_name)
                        return loop
                call = self._resume_call(code, offset, nstack, live, frame.f_globals)
                resumes.append(call.fn.__code__)
                return call

            try:
                new_code, hooked_code = (
                    graph_breaks.build_break_code(
                        code,
                        compiled,
                        traced.sources,
                        traced.tensors,
                        traced.point,
                        self._hooked_call,
                        make_resume,
                        rearm=rearm,
                    )
                    for rearm in (None, self._rearm)
                )
            except Unsupported as again:
                raise stop.could_not_break(again.reason) from None
            stop.move_to_root()
            if traced.point.before_loop and loop_body:
                stop.reason = (
                    f"{stop.reason} (in a loop: the loop runs in Python and its body is "
                    f"captured as {loop_body[0]}, once per item)"
                )
            elif traced.point.before_loop and where.kind == "block":
                stop.reason = (
                    f"{stop.reason} (in a try or with block: the graph breaks before the "
                    "block, which runs in Python with its handlers)"
                )
            elif traced.point.before_loop:
                stop.reason = f"{stop.reason} (in a loop: the graph breaks before the loop)"
        result = FrameResult(new_code, True)
        if stop is not None:
            result.hooked = FrameResult(hooked_code, True)
            resumes = list(dict.fromkeys(resumes))  # both codes asked for them
        guard = traced.output.guards.build(f"guard_{_identifier(code.co_name)}_{n}")
        owner = _pinned_locals(traced.output.guards)
        guards_log.info("%s", guard.readable())
        if bytecode_log.isEnabledFor(10):
            bytecode_log.debug(
                "original %s:\n%s\ntransformed:\n%s",
                code.co_name,
                disassemble(code),
                disassemble(new_code),
            )
        return CacheEntry(
            guard=guard,
            code=new_code,
            graph_module=gm,
            compiled=compiled,
            result=result,
            original=code,
            op_count=op_count,
            pass_records=traced.pass_records,
            backend=backend.name if gm is not None else None,
            backend_note=backend_note,
            graph_break=stop,
            resumes=resumes,
            owner=owner,
        )

    def _where_to_break(self, code: types.CodeType, e: Unsupported):
        """A ``graph_breaks.Where`` when the graph can break for ``e`` in ``code``; else
        why not ("" when there is nothing to add to the reason)."""
        if self.options.full_graph or e.root_instruction is None:
            return ""
        # (a resumed frame that starts at the loop captures nothing before it, and so
        # runs eagerly rather than break before the loop again: see _capture)
        return graph_breaks.where_to_break(code, e.root_instruction)

    def _loop_call(self, code, head: int, nstack: int, live, f_globals) -> Optional[_LoopCall]:
        """The driver of the ``for`` loop at ``head`` of ``code`` whose body is captured as
        a function of its own (``codegen.loops``), or None when the loop cannot be."""
        key = ("loop", code, head, nstack, tuple(live))
        call = self._resumes.get(key)
        if call is not None:
            return call
        plan = loops.plan_loop(code, head)
        if isinstance(plan, loops.LoopPlan) and nstack != 1:
            # the body function starts with the iterator alone below the item
            plan = f"{nstack - 1} values below the loop's iterator"
        if not isinstance(plan, loops.LoopPlan):
            breaks_log.info("the loop at %s:%d runs eagerly: %s", code.co_name, head, plan)
            return None
        body_code = self._loop_bodies.get((code, head))
        if body_code is None:
            body_code = self._loop_bodies[(code, head)] = loops.build_body_code(code, plan)
            self.targets.add(body_code)
            self._resume_roots[body_code] = self._resume_roots.get(code, code)
            self.direct_codes.add(body_code)
            self._positional_codes.add(body_code)
            _never_skip([body_code])
        body = types.FunctionType(
            body_code, f_globals, body_code.co_name, None, _empty_closure(body_code)
        )
        call = self._resumes[key] = _LoopCall(self, code, plan, body, tuple(live), f_globals)
        return call

    def _resume_call(self, code, offset: int, nstack: int, live, f_globals) -> _ResumeCall:
        key = (code, offset, nstack, tuple(live))
        call = self._resumes.get(key)
        if call is None:
            resume_code = resume_codes.build_resume_code(code, offset, nstack, live)
            fn = types.FunctionType(
                resume_code, f_globals, resume_code.co_name, None, _empty_closure(resume_code)
            )
            self.targets.add(resume_code)
            self._resume_roots[resume_code] = self._resume_roots.get(code, code)
            self.direct_codes.add(resume_code)
            self._positional_codes.add(resume_code)
            _never_skip([resume_code])
            call = self._resumes[key] = _ResumeCall(self, fn)
        return call

    def _inference_backend(self, gm, traced: Traced):
        """The backend for a graph when the chosen one is for inference only (computes no
        gradients, keeps no layer state, has its own random numbers): the paddle backend
        when the graph needs any of that, else the chosen one. The entry is only valid in
        the gradient mode it was captured in (layer modes are guarded anyway)."""
        grad_on = paddle.is_grad_enabled()
        traced.output.guards.grad_enabled = grad_on
        why = _needs_training_backend(gm, traced, grad_on)
        if why is None:
            return self.backend, None
        note = (
            f"runs on the paddle backend: {why}, which {self.backend.name!r} cannot do "
            "(it is for inference: eval() under paddle.no_grad())"
        )
        if not self._warned_training:
            self._warned_training = True
            warnings.warn(f"jit_core: a graph {note}", RuntimeWarning, stacklevel=3)
        return plugins.get_backend("paddle"), note

    # ------------------------------------------------------------------ running
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
                if _compat.hook_skips(code):
                    self._note_invisible(
                        code,
                        "Layer.__call__ has to run its own code (forward hooks, a pending "
                        "lazy build, static or profiler mode)",
                    )
                return None
            return forward, (fn,)
        func = getattr(fn, "__func__", fn)
        if not isinstance(func, types.FunctionType) or func.__code__ not in self.direct_codes:
            return None
        lead = (fn.__self__,) if func is not fn else ()
        return func, lead

    def _note_invisible(self, code: types.CodeType, why: str) -> None:
        cache = self.cache_for(code)
        if cache.eager_reason is None:
            reason = (
                "runs eagerly: on Python 3.11+ the frame hook does not see code with an "
                f"exception table (try, with, inlined comprehension), and {why}"
            )
            cache.run_eagerly(reason)
            self.events.append(
                CaptureEvent(code.co_name, _location(code), False, None, reason, category=LIMIT)
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
            fn = self._entry_function(func, result.code)
            prev = set_eval_frame(None)
            try:
                return fn(*args, **kwargs)
            finally:
                set_eval_frame(prev)
        frame = _compat.EntryFrame(code, f_locals, f_globals)
        prev = set_eval_frame(None)
        try:
            result = self._callback(frame)
            if result.code is None:
                set_eval_frame(self._eager_hook(result))
                return func(*args, **kwargs)
            return self._entry_function(func, result.code)(*args, **kwargs)
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
            f_locals = dict(zip(code.co_varnames, args + func.__defaults__[-missing:]))
        else:
            sig = self._signatures.get(code)
            if sig is None:
                sig = self._signatures[code] = inspect.signature(func)
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

    def _entry_function(self, func: types.FunctionType, code: types.CodeType) -> Callable:
        fn = self._entry_functions.get(code)
        if fn is None or fn.__closure__ is not func.__closure__:
            fn = types.FunctionType(
                code, func.__globals__, func.__name__, func.__defaults__, func.__closure__
            )
            fn.__kwdefaults__ = func.__kwdefaults__
            self._entry_functions[code] = fn
        return fn

    def reset(self) -> None:
        with self._lock:
            # the targets' caches are emptied in place: optimized objects hold them
            kept = {code: self.cache[code] for code in self.targets if code in self.cache}
            for cache in kept.values():
                cache.clear()
            self._callee_roots.clear()
            self.cache.clear()
            self.cache.update(kept)
            self.events.clear()
            self._entry_functions.clear()
            self._mark_generator_targets()
