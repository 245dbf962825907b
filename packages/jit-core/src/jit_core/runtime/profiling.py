"""What the JIT did at run time, graph by graph: ``jit_core.profile()``.

While a ``Profile`` is active (``ACTIVE``), the runtime reports to it: each compile (its
phases: capture, passes, backend build, code generation; the first run of what it built),
each call of a cache entry it enters (``run_direct``: timed, its own time apart from the
entries it calls, a resume function's for one), each hit the frame hook served (counted:
the interpreter runs that code, not us), each recompile with the guard that failed, and
each frame that runs eagerly. Optimized objects take the general path while it is active
(``api._set_call``): the inlined call of a cache hit has no graph to time.

With no profile active the runtime pays one ``is None`` test on the general path and on
the hook's hit, nothing on the inlined hit.

A profile is a table (``str(profile)``), a JSON document (``to_json``) and a Chrome trace
(``chrome_trace``: one span per optimized call, graph call and compile, in the Trace
Event Format that ``chrome://tracing`` and Perfetto read).
"""

from __future__ import annotations

import atexit
import json
import os
import statistics
import threading
import time
import types
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Tuple

#: the profile the runtime reports to, or None
ACTIVE: Optional[Profile] = None

#: ``JIT_PROFILE=path``: profile the whole program and write ``path`` (JSON), the Chrome
#: trace next to it (``.trace.json``) and the table (``.txt``) at exit
ENV_VAR = "JIT_PROFILE"

#: the spans a trace keeps (a long training loop would otherwise grow it without end);
#: the counts and times go on past it
MAX_EVENTS = 200_000
#: the call times kept per graph for its median (the first ones; the total counts all)
MAX_SAMPLES = 10_000
#: compile phases, in the order they happen
PHASES = ("capture", "passes", "backend", "codegen", "first run")


class GraphProfile:
    """One cache entry: its graph (or the frame's code without one), how often it ran and
    for how long, and what compiling it cost."""

    def __init__(self, label: str, frame: str, location: str, backend: Optional[str], ops: int):
        self.label = label
        self.frame = frame
        self.location = location
        self.backend = backend
        self.ops = ops
        #: calls timed through run_direct (its own time: what it called is not in it)
        self.calls = 0
        self.seconds = 0.0
        self.samples: List[float] = []
        #: hits the frame hook served, which the interpreter ran (not timed)
        self.hook_hits = 0
        #: phase -> seconds, for the compile that made it (``PHASES``)
        self.compile: Dict[str, float] = {}
        #: the break its code ends with, if any
        self.graph_break: Optional[str] = None
        #: its next run is the first after its capture (timed as a compile phase)
        self.first_pending = False
        #: compile seconds spent while the profile was active
        self.compiled_here = 0.0

    @property
    def median_us(self) -> Optional[float]:
        return statistics.median(self.samples) * 1e6 if self.samples else None

    def to_json(self) -> Dict[str, Any]:
        median = self.median_us
        return {
            "graph": self.label,
            "frame": self.frame,
            "location": self.location,
            "backend": self.backend,
            "ops": self.ops,
            "calls": self.calls,
            "hook_hits": self.hook_hits,
            "total_ms": round(self.seconds * 1e3, 4),
            "median_us": None if median is None else round(median, 3),
            "compile_ms": {k: round(v * 1e3, 3) for k, v in self.compile.items()},
            "graph_break": self.graph_break,
        }


class Profile:
    """What the runtime reported while this profile was active. ``jit_core.profile()``
    makes one; read it after the ``with`` block (or at any time)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.stopped: Optional[float] = None
        self.graphs: Dict[types.CodeType, GraphProfile] = {}
        #: optimized object -> [calls, seconds]
        self.objects: Dict[str, List[float]] = {}
        #: (frame, the guard that failed) -> recompiles
        self.recompiles: Counter = Counter()
        #: (frame, location, why) -> breaks taken (calls of entries that end with one)
        self.breaks: Counter = Counter()
        #: (frame, why) -> frames set to run eagerly while it was active
        self.eager: Counter = Counter()
        #: Chrome trace events (``MAX_EVENTS`` at most)
        self.events: List[Dict[str, Any]] = []
        self.dropped_events = 0
        self._local = threading.local()
        self._pid = os.getpid()

    # ------------------------------------------------------------------ from the runtime
    def captured(self, entry: Any, number: int, seconds: float) -> None:
        """A capture made ``entry`` (the ``number``-th of its frame) in ``seconds``."""
        g = self._add(entry, number)
        g.first_pending = True
        g.compiled_here = seconds
        phases = {f"{k} ms": v * 1e3 for k, v in g.compile.items()}
        self._span(f"compile {g.label}", "compile", self._now() - seconds, seconds, phases)

    def _add(self, entry: Any, number: int) -> GraphProfile:
        code = entry.original
        frame = code.co_name
        location = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"
        g = GraphProfile(
            f"{frame}#{number} ({location})", frame, location, entry.backend, entry.op_count
        )
        g.compile = dict(entry.compile_times)
        if entry.graph_break is not None:
            g.graph_break = entry.graph_break.describe()
        # the code a hit runs, and its variant for a frame reached through the hook (the
        # first call's, among others)
        self.graphs[entry.code] = self.graphs[entry.result.hooked.code] = g
        first = entry.first_result
        if first is not None:  # (the call that captured it: its results from the capture)
            self.graphs[first.code] = self.graphs[first.hooked.code] = g
        return g

    def _known(self, code: types.CodeType, cache: Any) -> Optional[GraphProfile]:
        """The graph of the entry of ``cache`` whose code is ``code``: one captured
        before the profile began is added (with its compile's phases, no first run)."""
        for number, entry in enumerate(list(cache.entries) if cache is not None else (), 1):
            if code is entry.code or code is entry.result.hooked.code:
                return self._add(entry, number)
        return None

    def recompiled(self, code: types.CodeType, failed: Any) -> None:
        self.recompiles[(_frame_name(code), str(failed))] += 1

    def ran_eagerly(self, code: types.CodeType, why: str) -> None:
        self.eager[(_frame_name(code), why)] += 1

    def hook_hit(self, code: types.CodeType, cache: Any) -> None:
        g = self.graphs.get(code)
        if g is None:
            g = self._known(code, cache)
        if g is not None:
            g.hook_hits += 1
            self._took_break(g)

    def run_entry(
        self, code: types.CodeType, fn: Callable, args: tuple, kwargs: dict, cache: Any
    ) -> Any:
        """``fn(*args, **kwargs)``, the code of the cache entry ``code`` of ``cache``,
        timed. The first run after its capture counts as a call and as the compile's last
        phase; its time is not among the calls'."""
        g = self.graphs.get(code)
        if g is None:
            g = self._known(code, cache)
        first = False
        if g is not None and g.first_pending:
            first, g.first_pending = True, False
        stack = self._stack()
        stack.append(0.0)
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            total = time.perf_counter() - start
            own = total - stack.pop()
            if stack:
                stack[-1] += total
            if g is not None:
                g.calls += 1
                if first:
                    # what the backend's first run checks and warms up is the compile's
                    g.compile["first run"] = own
                    g.compiled_here += own
                else:
                    g.seconds += own
                    if len(g.samples) < MAX_SAMPLES:
                        g.samples.append(own)
                self._took_break(g)
                name = g.label if not first else f"first run {g.label}"
                self._span(name, "graph", start - self.started, total, {"own_us": own * 1e6})

    def call(self, name: str, run: Callable[[], Any]) -> Any:
        """``run()``, a call of the optimized object ``name``, timed as a whole."""
        start = time.perf_counter()
        try:
            return run()
        finally:
            total = time.perf_counter() - start
            counts = self.objects.setdefault(name, [0, 0.0])
            counts[0] += 1
            counts[1] += total
            self._span(name, "call", start - self.started, total, None)

    # ------------------------------------------------------------------ results
    def to_json(self) -> Dict[str, Any]:
        """The profile as a JSON-serialisable dict."""
        end = self.stopped if self.stopped is not None else time.perf_counter()
        return {
            "seconds": round(end - self.started, 6),
            "calls": [
                {"object": name, "calls": int(n), "total_ms": round(s * 1e3, 4)}
                for name, (n, s) in sorted(self.objects.items(), key=lambda kv: -kv[1][1])
            ],
            "graphs": [g.to_json() for g in self._by_time()],
            "recompiles": [
                {"frame": frame, "guard_failed": failed, "count": n}
                for (frame, failed), n in self.recompiles.most_common()
            ],
            "graph_breaks": [
                {"frame": frame, "location": location, "reason": why, "taken": n}
                for (frame, location, why), n in self.breaks.most_common()
            ],
            "eager_frames": [
                {"frame": frame, "reason": why, "count": n}
                for (frame, why), n in self.eager.most_common()
            ],
        }

    def chrome_trace(self) -> Dict[str, Any]:
        """The spans in the Trace Event Format (``chrome://tracing``, Perfetto)."""
        meta = {
            "name": "process_name",
            "ph": "M",
            "pid": self._pid,
            "tid": 0,
            "args": {"name": "jit_core"},
        }
        return {
            "traceEvents": [meta, *self.events],
            "displayTimeUnit": "ms",
            "otherData": {"dropped_events": self.dropped_events},
        }

    def save(self, path: str) -> List[str]:
        """Write the JSON (``path``), the Chrome trace (``.trace.json``) and the table
        (``.txt``) next to each other; the paths written."""
        stem = path[: -len(".json")] if path.endswith(".json") else path
        written = [f"{stem}.json", f"{stem}.trace.json", f"{stem}.txt"]
        contents = [self.to_json(), self.chrome_trace(), str(self)]
        for out, content in zip(written, contents):
            with open(out, "w", encoding="utf-8") as f:
                if isinstance(content, str):
                    f.write(content)
                else:
                    json.dump(content, f, indent=1)
        return written

    def __str__(self) -> str:
        data = self.to_json()
        lines = [
            f"jit_core profile: {len(data['graphs'])} graph(s), "
            f"{sum(int(n) for n, _ in self.objects.values())} optimized call(s), "
            f"{data['seconds'] * 1e3:.1f} ms in all"
        ]
        if self.objects:
            lines += ["", f"{'optimized calls':<40} {'calls':>6} {'total ms':>9}"]
            for row in data["calls"]:
                name = row["object"][:40]
                lines.append(f"{name:<40} {row['calls']:>6} {row['total_ms']:>9.2f}")
        header = (
            f"{'graph':<40} {'backend':<8} {'ops':>4} {'calls':>6} {'total ms':>9} "
            f"{'median us':>10}  compile ms ({' / '.join(PHASES)})"
        )
        lines += ["", header]
        for g in data["graphs"]:
            median = "-" if g["median_us"] is None else f"{g['median_us']:.1f}"
            phases = " / ".join(
                "-" if p not in g["compile_ms"] else f"{g['compile_ms'][p]:.1f}" for p in PHASES
            )
            calls = str(g["calls"]) + (f"+{g['hook_hits']}h" if g["hook_hits"] else "")
            lines.append(
                f"{g['graph'][:40]:<40} {str(g['backend'] or '-')[:8]:<8} {g['ops']:>4} "
                f"{calls:>6} {g['total_ms']:>9.2f} {median:>10}  {phases}"
            )
        for title, rows, fmt in (
            ("recompiles", data["recompiles"], "{frame}: x{count}: guard failed: {guard_failed}"),
            (
                "graph breaks taken",
                data["graph_breaks"],
                "{frame} ({location}): x{taken}: {reason}",
            ),
            ("frames run eagerly", data["eager_frames"], "{frame}: {reason}"),
        ):
            if rows:
                lines += ["", f"{title}:"] + ["  " + fmt.format(**row) for row in rows]
        if any(g["hook_hits"] for g in data["graphs"]):
            lines += ["", "(+Nh: hits the frame hook served, counted but not timed)"]
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------ helpers
    def _by_time(self) -> List[GraphProfile]:
        unique = {id(g): g for g in self.graphs.values()}
        return sorted(
            unique.values(),
            key=lambda g: -(g.seconds + g.compiled_here),
        )

    def _stack(self) -> List[float]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _took_break(self, g: GraphProfile) -> None:
        if g.graph_break is not None:
            self.breaks[(g.frame, g.location, g.graph_break)] += 1

    def _now(self) -> float:
        return time.perf_counter() - self.started

    def _span(self, name: str, cat: str, start: float, seconds: float, args) -> None:
        if len(self.events) >= MAX_EVENTS:
            self.dropped_events += 1
            return
        event: Dict[str, Any] = {
            "name": name,
            "cat": cat,
            "ph": "X",
            "ts": round(start * 1e6, 3),
            "dur": round(seconds * 1e6, 3),
            "pid": self._pid,
            "tid": threading.get_ident() & 0x7FFFFFFF,
        }
        if args:
            event["args"] = {k: round(v, 3) if isinstance(v, float) else v for k, v in args.items()}
        self.events.append(event)


def _frame_name(code: types.CodeType) -> str:
    return f"{code.co_name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


#: what turns optimized objects' calls to the general path and back (``api._set_call``
#: registers it: the runtime does not import the facade)
_on_change: List[Callable[[], None]] = []


def start() -> Profile:
    """Make a profile the active one (raises if one is)."""
    global ACTIVE
    if ACTIVE is not None:
        raise RuntimeError("jit_core.profile(): a profile is active already (they do not nest)")
    ACTIVE = Profile()
    for changed in _on_change:
        changed()
    return ACTIVE


def stop() -> Optional[Profile]:
    global ACTIVE
    done, ACTIVE = ACTIVE, None
    if done is not None:
        done.stopped = time.perf_counter()
    for changed in _on_change:
        changed()
    return done


def profile_from_env() -> Optional[Tuple[Profile, str]]:
    """``JIT_PROFILE=path``: a profile of the whole program, saved at exit."""
    path = os.environ.get(ENV_VAR)
    if not path or ACTIVE is not None:
        return None
    whole = start()

    def save() -> None:
        stop()
        whole.save(path)

    atexit.register(save)
    return whole, path


__all__ = ["ACTIVE", "ENV_VAR", "GraphProfile", "PHASES", "Profile", "start", "stop"]
