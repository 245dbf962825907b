"""Never slower than eager: a compiled frame is timed against its own original code on the
calls it serves, and the slower one is dropped.

A capture that compiles can still lose: a graph of a few small ops gains nothing from a
backend, while its guards, the entry's call and a backend's session run cost a few
microseconds each. ``backend="auto"`` (and ``optimize(..., profitability=True)`` on any
backend) therefore puts each new cache entry of a target frame on trial: its next calls
alternate between the entry's code and the frame's original code (run as eager Paddle
runs it; both give the same results and effects, which is the JIT's contract), timed
each, the call as a whole (guards and dispatch included). After ``MIN_ROUNDS`` rounds
(more, up to ``MAX_ROUNDS``, until each side has run ``MIN_SECONDS``), the entry stays
compiled unless its median is more than ``MARGIN`` above eager's; then calls its guard
matches run the original code (a frame with no other entry runs eagerly for good, its
guards no longer checked). ``explain()`` says which and why (``kept eager: compiled
12.1 us, eager 9.8 us``).

The verdict is kept in the compile cache (namespace ``profitability``), keyed by the
graph, the frame's code, the backend and the machine: the next process applies it
without a trial. Resume functions and loop bodies are not tried on their own: the frame
they belong to is timed with them.
"""

from __future__ import annotations

import json
import statistics
import time
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Set

from ..cache import disk as compile_cache
from ..logs import breaks_log
from . import fast_dispatch
from .direct_entry import set_eval_frame
from .frame_cache import EAGER_PAST_LIMIT, KEPT_EAGER

#: rounds (a call of each side) before a verdict, at least and at most
MIN_ROUNDS = 8
MAX_ROUNDS = 32
#: calls of each side before the timed rounds (a first run warms caches up)
WARMUP = 1
#: each side's timed calls in all, at least, before a verdict (within MAX_ROUNDS)
MIN_SECONDS = 0.001
#: a compiled call this long settles the trial at once: the JIT's own costs (microseconds)
#: cannot matter, and the backend was timed against Paddle's kernels when it was chosen
LONG_CALL_S = 0.05
#: a frame that loses with its only entry and whose original takes less than this (us)
#: runs eagerly for good, its optimized object calling the original with no guard: a
#: guard check alone can cost what such a frame's graph would gain. A larger one keeps
#: its guard, and a call that matches none is captured again.
FOR_GOOD_US = 200.0
#: how much slower than eager (its median) the compiled code may be and still stay: the
#: noise of medians of a few interleaved calls on a shared machine
MARGIN = 0.03
CACHE_NAMESPACE = "profitability"
#: part of a verdict's key: a change of the rules above, or of what a compiled call costs
#: (the guards' code), makes the verdicts kept under the old ones stale
RULES = "2026-12-07c"


@dataclass
class Verdict:
    """What a trial found for one cache entry."""

    #: "compiled" or "eager"
    kept: str
    compiled_us: float
    #: None where the trial ended on a long call (``LONG_CALL_S``)
    eager_us: Optional[float]
    rounds: int
    #: read from the compile cache (nothing timed in this process)
    from_cache: bool = False

    def describe(self) -> str:
        where = " (from the compile cache)" if self.from_cache else ""
        if self.eager_us is None:
            return (
                f"kept {self.kept}{where}: a call takes {self.compiled_us / 1e3:.1f} ms, where "
                "the JIT's own microseconds do not count (not timed against eager)"
            )
        return (
            f"kept {self.kept}{where}: compiled {self.compiled_us:.1f} us, "
            f"eager {self.eager_us:.1f} us a call (median of {self.rounds} each)"
        )

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "kept": self.kept,
                "compiled_us": self.compiled_us,
                "eager_us": self.eager_us,
                "rounds": self.rounds,
            }
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Optional[Verdict]:
        try:
            d = json.loads(data.decode())
            eager = None if d["eager_us"] is None else float(d["eager_us"])
            verdict = cls(d["kept"], float(d["compiled_us"]), eager, int(d["rounds"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        if verdict.kept not in ("compiled", "eager"):
            return None
        verdict.from_cache = True
        return verdict


class Trial:
    """The calls of one cache entry while it is on trial: ``run`` serves each, by turns
    the entry's code and the original code, and returns a ``Verdict`` with the result of
    the call that settles it."""

    __slots__ = ("compiled", "eager", "calls", "verdict")

    def __init__(self) -> None:
        self.compiled: List[float] = []
        self.eager: List[float] = []
        self.calls = 0
        self.verdict: Optional[Verdict] = None

    def run(self, compiled: Callable[[], Any], eager: Callable[[], Any]) -> Any:
        n = self.calls
        self.calls += 1
        on_compiled = n % 2 == 0
        start = time.perf_counter()
        out = compiled() if on_compiled else eager()
        took = time.perf_counter() - start
        if n >= 2 * WARMUP:
            if on_compiled and took > LONG_CALL_S and not self.eager:
                self.verdict = Verdict("compiled", took * 1e6, None, 1)
                return out
            (self.compiled if on_compiled else self.eager).append(took)
            self._settle()
        return out

    def _settle(self) -> None:
        rounds = min(len(self.compiled), len(self.eager))
        if rounds < MIN_ROUNDS or len(self.compiled) != len(self.eager):
            return
        long_enough = min(sum(self.compiled), sum(self.eager)) >= MIN_SECONDS
        if not long_enough and rounds < MAX_ROUNDS:
            return
        compiled_us = statistics.median(self.compiled) * 1e6
        eager_us = statistics.median(self.eager) * 1e6
        kept = "eager" if compiled_us > eager_us * (1 + MARGIN) else "compiled"
        self.verdict = Verdict(kept, compiled_us, eager_us, rounds)


_store: List[Any] = []


def _verdicts() -> Any:
    if not _store:
        # a hint: a wrong or stale verdict costs speed, never a result
        _store.append(compile_cache.DiskCache(CACHE_NAMESPACE, kind="hint"))
    return _store[0]


def read(key: str) -> Optional[Verdict]:
    """The verdict the compile cache holds under ``key``, if any."""
    data = _verdicts().get(key)
    return Verdict.from_bytes(data) if data is not None else None


def keep(key: str, verdict: Verdict) -> None:
    _verdicts().put(key, verdict.to_bytes())


def _constants(code: Any) -> tuple:
    """``code``'s constants as the same text in every process (a nested code object's
    repr holds its address)."""
    out: List[tuple] = []
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            out.append(("code", c.co_name, c.co_code, _constants(c)))
        else:
            out.append((type(c).__name__, repr(c)))
    return tuple(out)


def cache_key(entry: Any, backend: str) -> Optional[str]:
    """The compile cache's key of ``entry``'s verdict, or None (no graph: nothing to
    time it against)."""
    gm = entry.graph_module
    if gm is None:
        return None
    code = entry.original
    inputs = [
        (n.name, n.meta.get("shape"), n.meta.get("dtype"))
        for n in gm.graph.nodes
        if n.op == "placeholder"
    ]
    extra = (
        CACHE_NAMESPACE,
        RULES,
        (MIN_ROUNDS, MAX_ROUNDS, MIN_SECONDS, MARGIN, FOR_GOOD_US, LONG_CALL_S),
        backend,
        code.co_name,
        code.co_code,
        _constants(code),
        code.co_names,
        inputs,
        entry.graph_break.describe() if entry.graph_break is not None else "",
        compile_cache.machine_fingerprint(),
    )
    return compile_cache.graph_key(gm, [], extra, values=False, tensor_names=False)


def _dispatcher(func, entry: Any, fn: Callable) -> Optional[Callable]:
    """The entry's guards and call as a cache hit runs them (``fast_dispatch``), or None
    where its guards cannot be inlined: what a compiled call costs is timed with its
    guards as they run there, not as the slower general path runs them."""
    return fast_dispatch.build(func, entry.original, [entry], lambda code: fn, _guard_failed(fn))


def _guard_failed(fn: Callable) -> Callable:
    # the guard held on this very call (run_direct matched it): it fails again only if
    # evaluating it is not pure, and the entry's code is still what runs
    return lambda args: fn(*args)


class Trials:
    """The entries of one compile context on trial, and what it does with a verdict.
    ``hook``: the frame hook under which a trial runs a frame's original code (that
    frame as it is, what it calls as usual)."""

    def __init__(self, ctx: Any, hook: Callable) -> None:
        # weakly: the context holds this (and the hook holds it weakly too)
        self._ctx = weakref.ref(ctx)
        self.hook = hook
        #: entry code -> (its trial, the entry, its cache, the verdict's cache key)
        self.pending: Dict[types.CodeType, tuple] = {}
        #: the original codes of the entries on trial
        self.originals: Set[types.CodeType] = set()
        #: target codes that lost to eager with their only entry, by little: they run
        #: eagerly for good, and the optimized objects over them call the original
        self.eager_for_good: Set[types.CodeType] = set()
        #: called when a code joins ``eager_for_good`` (``api`` gives the optimized
        #: object the original's call)
        self.on_eager_for_good: List[Callable[[], None]] = []

    def in_progress(self) -> int:
        """The trials that calls have reached (an entry no later call matched has none)."""
        return sum(1 for trial, *_ in list(self.pending.values()) if trial.calls)

    def clear(self) -> None:
        self.pending.clear()
        self.originals.clear()
        self.eager_for_good.clear()
        for changed in self.on_eager_for_good:
            changed()

    def start(self, code: types.CodeType, cache: Any, entry: Any) -> None:
        """Time ``entry`` against ``code``'s original on its next calls, unless the
        compile cache holds a verdict on it."""
        ctx = self._ctx()
        key = cache_key(entry, ctx.options.backend) if ctx is not None else None
        if key is None:
            return
        verdict = read(key)
        if verdict is not None:
            self._apply(code, cache, entry, verdict)
            return
        self.pending[entry.code] = (Trial(), entry, cache, key)
        self.originals.add(code)
        cache.refresh()  # the fast paths leave an entry on trial to run_direct

    def run(self, entry_code: types.CodeType, func, fn: Callable, args: tuple, kwargs: dict, L, G):
        """A call of an entry on trial: the entry's code ``fn`` or the original ``func``
        by turns, timed; the verdict applied on the call that settles it. The entry's
        side runs its guard on the frame's locals ``L`` and globals ``G`` again: what it
        costs on each call is what the original saves."""
        trial, entry, cache, key = self.pending[entry_code]
        hook = self.kept_eager_hook(entry.original, self.hook)
        dispatch = _dispatcher(func, entry, fn) if not kwargs else None
        if dispatch is not None and len(args) == entry.original.co_argcount:

            def compiled() -> Any:
                return dispatch(args)

        else:
            guard = entry.guard

            def compiled() -> Any:
                guard(L, G)
                return fn(*args, **kwargs)

        def eager() -> Any:
            if hook is None:  # (run_direct turned the hook off already)
                return func(*args, **kwargs)
            prev = set_eval_frame(hook)
            try:
                return func(*args, **kwargs)
            finally:
                set_eval_frame(prev)

        out = trial.run(compiled, eager)
        verdict = trial.verdict
        if verdict is not None and self.pending.pop(entry_code, None) is not None:
            self.originals.discard(entry.original)
            keep(key, verdict)
            self._apply(entry.original, cache, entry, verdict)
        return out

    def kept_eager_hook(self, code: types.CodeType, hook: Callable) -> Optional[Callable]:
        """The hook under which ``code``'s original runs in place of an entry (on trial,
        or kept eager): none when no other frame has entries it may reach, as eager
        Paddle runs it; else ``hook``."""
        ctx = self._ctx()
        if ctx is None or ctx._eager_result(code) is EAGER_PAST_LIMIT:
            return None
        return hook

    def _apply(self, code: types.CodeType, cache: Any, entry: Any, verdict: Verdict) -> None:
        note = verdict.describe()
        entry.backend_note = f"{entry.backend_note}; {note}" if entry.backend_note else note
        breaks_log.info("%s (%s:%d): %s", code.co_name, code.co_filename, code.co_firstlineno, note)
        if verdict.kept == "eager":
            ctx = self._ctx()
            if (
                ctx is not None
                and cache.entries == [entry]
                and code in ctx.user_targets
                and verdict.eager_us is not None
                and verdict.eager_us < FOR_GOOD_US
            ):
                # a small frame, where even the guards cost what the graph could gain:
                # the optimized object calls the original from now on, as eager does
                ctx.run_eagerly(code, f"{note}; it runs eagerly for good (profitability)")
                self.eager_for_good.add(code)
                for changed in self.on_eager_for_good:
                    changed()
                return
            entry.result = KEPT_EAGER
        cache.refresh()


__all__ = ["MARGIN", "Trial", "Trials", "Verdict", "cache_key"]
