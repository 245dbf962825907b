"""The frame hook: a cache of compiled frames behind guards, and the capture on a miss.

``CompileContext`` is what one ``optimize()`` call owns: its options, a cache per code
object (``frame_cache``) and a ``FrameCompiler`` (``convert_frame``) that captures a
frame on a miss. Its ``callback`` is installed with Paddle's PEP 523 hook
(``paddle.framework.core.set_eval_frame``) only while an optimized callable runs, and
only in the thread that runs it; ``run_direct`` enters target frames without it. This
module decides what runs: a cache hit, a capture, or the original code (the frame cannot
be captured, or its recompile limits are reached).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import os
import sys
import threading
import time
import types
import warnings
import weakref
from typing import Callable, Dict, FrozenSet, List, Optional, Set

import paddle
from paddle.framework import core as _core

from ..bytecode import compat
from ..bytecode.opcode_info import GENERATOR_FLAGS
from ..codegen.frame import GENERATED_CODES
from ..config import CONTROLS, DISABLED_CODES, Options
from ..errors import (
    GENERATOR,
    INTERNAL,
    LIMIT,
    BackendCompileError,
    GraphBreakError,
    RecompileError,
    Unsupported,
)
from ..logs import breaks_log, recompiles_log
from ..shapes import ShapePolicy
from . import profiling, profitability
from .convert_frame import FrameCompiler
from .direct_entry import DirectEntry
from .frame_cache import (
    EAGER_PAST_LIMIT,
    EAGER_PAST_LIMIT_SEEING_CACHES,
    RUN_ORIGINAL,
    RUN_ORIGINAL_UNHOOKED,
    CacheEntry,
    CaptureEvent,
    CodeCache,
    FrameResult,
    owner_name,
    owner_value,
)
from .frame_calls import HookedCall, Rearm, binds_by_position
from .skipfiles import is_jit_file, is_skipped_file

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


def _gc_callback_codes() -> Set[types.CodeType]:
    """The code objects of the functions in ``gc.callbacks`` (asked once per new code)."""
    codes = set()
    for cb in list(gc.callbacks):
        fn = getattr(cb, "__func__", cb)
        code = getattr(fn, "__code__", None)
        if code is not None:
            codes.add(code)
    return codes


class _WeakHook:
    """The callable handed to ``set_eval_frame`` for a method of a ``CompileContext``: it
    reaches the context through a weak reference.

    Paddle's ``set_eval_frame`` (3.0 and 3.3) keeps one reference to every callback it
    hands back as the previous one and never drops it: a hook that held its context would
    keep the context, its cache, its graphs and the optimized layer alive for good after
    the first call. What stays now is this small object per ``optimize()``; once the
    context is gone it lets every frame run as it is."""

    __slots__ = ("_ctx", "_method")

    def __init__(self, ctx: CompileContext, method: Callable):
        self._ctx = weakref.ref(ctx)
        self._method = method

    def __call__(self, frame) -> FrameResult:
        ctx = self._ctx()
        if ctx is None:
            return RUN_ORIGINAL
        return self._method(ctx, frame)


#: calls of a library code (a skipped file) with no user code below them, after which
#: what it calls runs with the hook off. Every hooked frame costs Paddle's shim a locals
#: dict and a call of the hook (about 5 us on these machines): library code that calls
#: more library code (``Layer.__setattr__``, ``copy.deepcopy``, a ``Layer.__init__``)
#: paid it for every frame below it. The count is per ``optimize()``; user code met
#: below a library code keeps it hooked for good (``_user_code_below``), and
#: ``LIBRARY_BRIDGES`` are hooked from the start. What runs unhooked runs as eager does.
QUIET_AFTER = 10


def _nested_codes(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _nested_codes(const)


def _library_bridges() -> FrozenSet[types.CodeType]:
    """Library code whose callees are user code by design: a layer's call reaching its
    ``forward`` and its hooks, the containers and RNN layers calling the layers and cells
    they hold, and the wrappers Paddle's and contextlib's decorators put around a user's
    function. They are never quieted, however often they first run Paddle's own layers
    and functions."""
    from paddle.base.dygraph import base as dygraph_base
    from paddle.nn.layer import rnn

    roots = [
        paddle.nn.Layer.__call__,
        getattr(paddle.nn.Layer, "_dygraph_call_func", None),
        paddle.nn.Sequential.forward,
        paddle.nn.RNN.forward,
        paddle.nn.BiRNN.forward,
        getattr(rnn, "_rnn_dynamic_graph", None),
        contextlib.ContextDecorator.__call__,
        vars(getattr(dygraph_base, "_DecoratorContextManager", object)).get("__call__"),
    ]
    codes = set()
    for fn in roots:
        code = getattr(fn, "__code__", None)
        if code is not None:
            codes.update(_nested_codes(code))
    return frozenset(codes)


LIBRARY_BRIDGES = _library_bridges()


class _Hook(_WeakHook):
    """``_WeakHook`` for ``CompileContext._callback``, answering the commonest frame itself
    in one call: one whose code runs as it is (Paddle's, Python's own), which a layer's
    call under the hook meets by the hundred, and counts the calls of library code until
    what it calls can run unhooked (``QUIET_AFTER``). It reads the context's cache dict,
    which it lets go when the context dies (``_release``)."""

    __slots__ = ("_cache",)

    def __init__(self, ctx: CompileContext):
        super().__init__(ctx, CompileContext._callback)
        self._cache = ctx.cache
        weakref.finalize(ctx, _Hook._release, self)

    def _release(self) -> None:
        self._cache = {}

    def __call__(self, frame) -> FrameResult:
        cache = self._cache.get(frame.f_code)
        if cache is not None and cache.hot is None:
            calls = cache.library_calls
            if calls is None:
                return RUN_ORIGINAL
            if calls >= QUIET_AFTER:
                return RUN_ORIGINAL_UNHOOKED
            cache.library_calls = calls + 1
            return RUN_ORIGINAL
        ctx = self._ctx()
        if ctx is None:
            return RUN_ORIGINAL
        return ctx._callback(frame)


def _keep_hooking(code: types.CodeType) -> None:
    if _keep_hooking_codes is not None:
        _keep_hooking_codes((code,))


def _never_skip(codes) -> None:
    if _never_skip_codes is not None and codes:
        _never_skip_codes(tuple(codes))


def _asked(options: Options) -> str:
    """What made a graph break an error, for ``GraphBreakError``'s message."""
    if options.full_graph and CONTROLS.error_on_graph_break is not True:
        return "full_graph=True"
    return "jit_core.error_on_graph_break(True)"


def _location(code: types.CodeType) -> str:
    return f"{code.co_filename}:{code.co_firstlineno}"


def _key(name: str, code: types.CodeType) -> str:
    return f"{name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def frame_key(code: types.CodeType, func: Optional[types.FunctionType] = None) -> str:
    """How reports name a code object: qualified name, file name and first line, e.g.
    ``Net.forward (model.py:12)`` (``Net.forward`` and ``Block.forward`` are both
    ``forward`` to ``co_name``). ``func``, a function running ``code``, saves a search
    on 3.8-3.10."""
    return _key(compat.code_qualname(code, func), code)


def frame_keys(codes) -> Dict[types.CodeType, str]:
    """``frame_key`` of several codes at once (one search on 3.8-3.10)."""
    return {code: _key(name, code) for code, name in compat.code_qualnames(codes).items()}


_CO_OPTIMIZED = 0x1


def _forget(ctx_ref, cache_ref, entry_ref) -> None:
    """Drop a cache entry whose guard holds a layer that died (``guards.Liveness``): no
    call can match it again, and its graph would keep the layer's weights."""
    ctx, cache, entry = ctx_ref(), cache_ref(), entry_ref()
    if ctx is None or cache is None or entry is None:
        return
    _drop(ctx, cache, entry)
    # a loop over the layer's sublayers: its body's entries check each sublayer, which
    # their own graphs hold (so their checks never see it die); they go with the layer.
    # Another layer sharing that sublayer captures its body again
    held = {id(v) for v in entry.guard.scope.values() if isinstance(v, paddle.nn.Layer)}
    for code in entry.resumes:
        body = ctx.cache.get(code)
        for other in list(body.entries) if body is not None else ():
            if other.owner and all(id(ref()) in held for _, ref in other.owner):
                _drop(ctx, body, other)


def _drop(ctx: CompileContext, cache: CodeCache, entry: CacheEntry) -> None:
    if not cache.remove(entry):
        return
    for event in ctx.events:
        if event.entry is entry:
            event.entry = None
    for result in (entry.result, entry.result.hooked):
        if result.code is not None:
            ctx._entry_functions.pop(result.code, None)
    recompiles_log.info("%s: an entry dropped: a layer its guard checks is gone", entry.code)


class CompileContext(DirectEntry):
    def __init__(self, options: Options, targets: Set[types.CodeType]):
        self.options = options
        self.targets = set(targets)
        self.cache: Dict[types.CodeType, CodeCache] = {}
        self.events: List[CaptureEvent] = []
        self._lock = threading.RLock()
        #: what ``set_eval_frame`` gets (``_WeakHook``: Paddle never lets it go)
        self.callback = _Hook(self)
        #: targets that ``run`` enters itself (all but generators, which must start
        #: through CPython's own call to become generator objects)
        self.direct_codes = {c for c in self.targets if not c.co_flags & GENERATOR_FLAGS}
        #: the codes the user's optimized object enters (not the resume functions and
        #: loop bodies added to ``targets`` later)
        self.user_targets = frozenset(self.direct_codes)
        #: targets whose arguments bind by position alone: the cheap way to build locals
        self._positional_codes = {c for c in self.direct_codes if binds_by_position(c)}
        _never_skip(self.targets)
        self._mark_generator_targets()
        self._signatures: Dict[types.CodeType, inspect.Signature] = {}
        self._entry_functions: Dict[types.CodeType, Callable] = {}
        #: what the code of a broken frame calls (``frame_calls``)
        self.hooked_call = HookedCall(self)
        self.rearm = Rearm(self)
        #: resume code -> the code it resumes, followed back to one that is no resume
        self._resume_roots: Dict[types.CodeType, types.CodeType] = {}
        #: the roots (``_resume_roots``) of the codes with cache entries that are not
        #: targets: frames of callees, captured on their own, that a frame may call
        self._callee_roots: Set[types.CodeType] = set()
        #: no limit can be reached with fewer entries than this
        self._limit_floor = min(options.recompile_limit, options.accumulated_recompile_limit)
        self.limit_callback = _WeakHook(self, CompileContext._limit_callback)
        self.compiler = FrameCompiler(self, options)
        #: new entries of target frames are timed against the original code
        #: (``profitability``): auto's default, an option elsewhere
        self.profitable = (
            options.profitability
            if options.profitability is not None
            else options.backend == "auto"
        )
        self.trials = profitability.Trials(self, _WeakHook(self, CompileContext._trial_callback))

    def adopt(self, code: types.CodeType, parent: types.CodeType) -> None:
        """A code made for a graph break of ``parent`` (a resume function, a loop's body):
        entered directly, by position, like a target."""
        self.targets.add(code)
        self._resume_roots[code] = self._resume_roots.get(parent, parent)
        self.direct_codes.add(code)
        self._positional_codes.add(code)
        _never_skip([code])

    # ------------------------------------------------------------------ the hook
    def _callback(self, frame) -> FrameResult:
        # the hot path of every call: keep it to dict lookups and the guards
        cache = self.cache.get(frame.f_code)
        if cache is None:
            cache = self._new_cache(frame.f_code)
        if not cache.skipped:
            self._user_code_below(sys._getframe(1))
        hot = cache.hot
        if hot is None:
            return RUN_ORIGINAL
        if hot:
            L = frame.f_locals
            G = frame.f_globals
            for guard, result in hot:
                try:
                    if guard(L, G):
                        if profiling.ACTIVE is not None:
                            profiling.ACTIVE.hook_hit(result.code, cache)
                        return result.hooked
                except Exception:  # noqa: BLE001 - a guard that cannot run has failed
                    pass
            if len(hot) >= self._limit_floor:
                result = self._past_limit(frame.f_code, cache, L, G)
                if result is not None:
                    return result.hooked
        return self._miss(frame, frame.f_code, cache).hooked

    def _user_code_below(self, caller) -> None:
        """The library frames that called a user frame (``caller`` and up to the first
        user frame) keep the hook on for good (``QUIET_AFTER``)."""
        cache_of = self.cache.get
        while caller is not None:
            code = caller.f_code
            cache = cache_of(code)
            if cache is None:
                # a code the hook never saw: the JIT's own frames, and on 3.11+ a code with
                # a try or with, which the shim never hands to the hook
                if not is_skipped_file(code.co_filename):
                    return
            elif not cache.skipped:
                return
            else:
                cache.library_calls = None
            caller = caller.f_back

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
            if code.co_flags & GENERATOR_FLAGS:
                self.cache.pop(code, None)
                self._new_cache(code)

    def cache_for(self, code: types.CodeType) -> CodeCache:
        """The cache of ``code``, made now if it has none yet."""
        cache = self.cache.get(code)
        return cache if cache is not None else self._new_cache(code)

    def _new_cache(self, code: types.CodeType) -> CodeCache:
        with self._lock:
            # threads meeting a code for the first time at once must share one cache:
            # else one's entry lands in a cache the other replaced, and is captured again
            cache = self.cache.get(code)
            if cache is not None:
                return cache
            return self._make_cache(code)

    def _make_cache(self, code: types.CodeType) -> CodeCache:
        _keep_hooking(code)
        cache = CodeCache()
        if code not in self.targets and (
            is_skipped_file(code.co_filename)
            or code in GENERATED_CODES
            # jit_core.disable(fn, recursive=False): fn's own frame runs as it is
            or code in DISABLED_CODES
            # the garbage collector runs its callbacks (a profiler's, Hypothesis's) in
            # whatever thread allocates: inside an optimized call they are not its code
            or code in _gc_callback_codes()
            # module and class bodies (no CO_OPTIMIZED): not functions, nothing to capture
            or not code.co_flags & _CO_OPTIMIZED
        ):
            cache.skipped = True
            cache.hot = None
            if not (
                code in LIBRARY_BRIDGES or code in GENERATED_CODES or is_jit_file(code.co_filename)
            ):
                cache.library_calls = 0
        elif code.co_flags & GENERATOR_FLAGS:
            reason = "generators and coroutines run eagerly"
            cache.run_eagerly(reason)
            self.events.append(CaptureEvent.eager(code, _location(code), reason, GENERATOR))
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
                result = self._before_recompile(code, cache, L, G)
                if result is not None:
                    return result
            location = _location(code)
            policy = ShapePolicy.from_earlier_captures(self.options.dynamic, cache)
            started = time.perf_counter()
            try:
                entry = self.compiler.capture(frame, code, policy)
            except Unsupported as e:
                reason = e.describe()
                if profiling.ACTIVE is not None:
                    profiling.ACTIVE.ran_eagerly(code, reason)
                if CONTROLS.full_graph(self.options):
                    raise GraphBreakError(
                        e.reason, e.location, e.instruction, e.category, _asked(self.options)
                    ) from None
                cache.run_eagerly(reason)
                self.events.append(
                    CaptureEvent.eager(
                        code, location, e.reason, e.category, e.location, e.instruction
                    )
                )
                breaks_log.info("%s runs eagerly: %s", code.co_name, reason)
                return RUN_ORIGINAL
            except BackendCompileError:
                raise
            except Exception as e:
                # A bug of ours must never reach the user's program: the frame runs
                # eagerly (which raises the user's own error, if it is one) and we say so.
                reason = f"internal error during capture: {type(e).__name__}: {e}"
                if CONTROLS.full_graph(self.options):
                    raise GraphBreakError(
                        reason, location, None, INTERNAL, _asked(self.options)
                    ) from e
                cache.run_eagerly(reason)
                if profiling.ACTIVE is not None:
                    profiling.ACTIVE.ran_eagerly(code, reason)
                self.events.append(CaptureEvent.eager(code, location, reason, INTERNAL))
                breaks_log.warning("%s runs eagerly: %s", code.co_name, reason, exc_info=True)
                warnings.warn(
                    f"jit_core: {code.co_name} ({location}) runs eagerly: {reason}",
                    RuntimeWarning,
                    stacklevel=2,
                )
                return RUN_ORIGINAL
            if policy.static_reason is not None and cache.static_reason is None:
                cache.static_reason = policy.static_reason
            if policy.raise_reason is not None and cache.raise_reason is None:
                cache.raise_reason = policy.raise_reason
            if policy.layer_reason is not None and cache.layer_reason is None:
                cache.layer_reason = policy.layer_reason
                cache.dynamic_notes.append(
                    f"captures stay bound to their layer instances: {policy.layer_reason}"
                )
            cache.add(entry)
            if profiling.ACTIVE is not None:
                profiling.ACTIVE.captured(entry, len(cache.entries), time.perf_counter() - started)
            if self.profitable and code not in self._resume_roots:
                self.trials.start(code, cache, entry)
            if entry.pinned_numbers:
                self.cache_for(self.compiler.body_root(code)).pinned_numbers.update(
                    entry.pinned_numbers
                )
            entry.guard.liveness.then = functools.partial(
                _forget, weakref.ref(self), weakref.ref(cache), weakref.ref(entry)
            )
            root = self._resume_roots.get(code, code)
            if root not in self.targets:
                self._callee_roots.add(root)
            self.events.append(CaptureEvent.captured(code, location, entry))
            if entry.graph_break is not None:
                self.events.append(CaptureEvent.graph_break_in(code, location, entry))
                breaks_log.info("graph break in %s: %s", code.co_name, entry.graph_break.describe())
            # (a verdict from the compile cache may have set the frame to run eagerly)
            if cache.hot is None:
                entry.first_result = None  # (it holds this call's inputs and results)
                return RUN_ORIGINAL
            return entry.take_first_result()

    def _before_recompile(
        self, code: types.CodeType, cache: CodeCache, L, G
    ) -> Optional[FrameResult]:
        """For a call that matched none of the entries: how it runs instead of a capture
        (past a limit, under a stance), or None after saying why it recompiles."""
        result = self._past_limit(code, cache, L, G)
        if result is not None:
            return result
        failed = cache.entries[-1].guard.first_failure(L, G)
        stance = CONTROLS.stance
        if stance == "eager_on_recompile":
            return RUN_ORIGINAL  # this call only; the entries stay
        if stance == "fail_on_recompile":
            raise RecompileError(
                f"{code.co_name} ({_location(code)}) would be compiled again (guard "
                f"failed: {failed}); jit_core.set_stance('fail_on_recompile') is in force"
            )
        recompiles_log.info(
            "recompiling %s (%s:%d): guard failed: %s",
            code.co_name,
            code.co_filename,
            code.co_firstlineno,
            failed,
        )
        if profiling.ACTIVE is not None:
            profiling.ACTIVE.recompiled(code, failed)
        if self.options.dynamic is None:
            for note in cache.mark_changed_sizes(L, G):
                recompiles_log.info("%s: %s", code.co_name, note)
        if self.options.share_layers:
            for note in cache.mark_other_instances(L, G):
                recompiles_log.info("%s: %s", code.co_name, note)
        return None

    # ------------------------------------------------------------------ profitability
    def _trial_callback(self, frame) -> FrameResult:
        """The hook while a trial runs a frame's original code (``profitability``): that
        frame runs as it is, the frames it calls as usual."""
        if frame.f_code in self.trials.originals:
            return RUN_ORIGINAL
        return self._callback(frame)

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
                if all(owner_value(L, path) is ref() for path, ref in e.owner)
            ]
            try:
                failed = own[-1].guard.first_failure(L, G) if own else None
            except Exception:  # noqa: BLE001 - only for the message
                failed = None
            paths = sorted({path for e in own for path, _ in e.owner}, key=repr)
            whose = ""
            if paths:
                whose = " for " + ", ".join(
                    f"{owner_name(p)} ({type(owner_value(L, p)).__name__})" for p in paths
                )
            reason = (
                f"recompile limit ({limit}) reached{whose}; the guard that kept failing: "
                f"{failed}; calls that match none of its {mine} entries run eagerly"
            )
            if cache.static_reason:
                reason += f" (its shapes stay static: {cache.static_reason})"
            elif cache.dynamic_notes:
                reason += f" (dynamic shapes: {'; '.join(cache.dynamic_notes)})"
        cache.limits_hit.add(kind)
        cache.limit_reason = reason
        key = frame_key(code)
        self.events.append(CaptureEvent.limit_reached(code, _location(code), reason, key, LIMIT))
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

    def run_eagerly(
        self,
        code: types.CodeType,
        reason: str,
        where: Optional[str] = None,
        instruction: Optional[str] = None,
    ) -> None:
        """From now on ``code`` runs as it is (its callees still through the hook), and
        ``explain()`` says why, at ``where`` (``file:line``) and ``instruction`` if given."""
        self.cache_for(code).run_eagerly(reason)
        self.events.append(
            CaptureEvent.eager(code, _location(code), reason, LIMIT, where, instruction)
        )

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
            self.trials.clear()
            self._mark_generator_targets()
