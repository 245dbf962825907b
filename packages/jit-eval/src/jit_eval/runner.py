"""Run samples on backends, each sample in a worker process of its own.

The worker builds the sample's module once (under ``paddle.seed``), runs a copy of it
eagerly for the reference outputs, then per backend: compiles another copy (the first
call, timed), compares the outputs at every tolerance level, and times eager and compiled
calls interleaved. The number of timed calls and the time limit of a backend follow the
eager call's measured time (``plan_limits``), which the worker reports to the parent
before the backends run. It sends one result per backend as soon as it has it, so a crash
or a hang costs the backends not yet done on that sample, never the run: the parent kills
a worker past the time limit and goes on.
"""

from __future__ import annotations

import copy
import logging
import math
import multiprocessing
import os
import statistics
import time
import traceback
from dataclasses import dataclass, field, replace
from multiprocessing.connection import wait
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from jit_core.graphnet.samples import SampleError

from . import scores

log = logging.getLogger("jit_eval")

#: the error kinds of a result (``result["error"]["kind"]``)
BAD_SAMPLE = "bad_sample"
EAGER_ERROR = "eager_error"
CAPTURE_ERROR = "capture_error"
BACKEND_COMPILE_ERROR = "backend_compile_error"
RUN_ERROR = "run_error"
WRONG_RESULT = "wrong_result"
TIMEOUT = "timeout"
CRASH = "crash"

#: seconds a new worker may take to import Paddle and report, at least (the time limit
#: is for the sample, not for a slow start on a busy machine)
STARTUP_GRACE = 120.0

#: the peer that is not ours: Paddle's own SOT
SOT = "sot"

#: the share of a backend's configured time limit its timed calls (warmup and trials, eager
#: and compiled) are planned to fill; the rest is for the compile and the first call
TIMED_SHARE = 0.5
#: what the compile and the first compiled call may cost, in eager calls (the capture's
#: example run, a backend's checks and timing runs, the first run itself)
FIRST_CALL_COST = 4
#: how far past its planned time a backend may run before it is stopped, where the plan
#: needs more than the configured limit
LIMIT_MARGIN = 2.0

# GraphNet's (rtol, atol) table is tried for every dtype at every level, as its logs do
_GRAPHNET_LOG_LEVELS = tuple(range(-10, 6))
_GRAPHNET_DTYPES = ("float16", "bfloat16", "float32", "float64")


@dataclass
class EvalConfig:
    backends: Sequence[str] = ("paddle",)
    tolerances: Sequence[int] = scores.DEFAULT_TOLERANCES
    warmup: int = 3
    trials: int = 10
    seed: int = 0
    #: seconds a worker may spend on one step (loading and the eager run, or one backend)
    timeout: float = 300.0
    jobs: int = 1
    #: the folder the sample paths were found under, for readable names
    roots: Sequence[str] = field(default_factory=tuple)
    #: run ``jit_core.debug.compare`` on a sample whose compiled values are not close
    #: (``--triage``): the result's ``triage``, and the culprit in its error message
    triage: bool = False


def _new_result(sample: str, name: str, backend: str) -> Dict[str, Any]:
    return {
        "sample": sample,
        "name": name,
        "backend": backend,
        "status": scores.CORRECT,
        "error": None,
        "compile_s": None,
        #: medians of the timed calls, and GraphNet's statistics of them
        "eager_ms": None,
        "compiled_ms": None,
        "eager_stats": None,
        "compiled_stats": None,
        "speedup": None,
        "graphs": None,
        "breaks": None,
        "eager_frames": None,
        #: graphs that ran on another backend than the one asked for, and why
        "fallbacks": [],
        "correct_at": {},
        "outputs": None,
        "graphnet": None,
        #: the warmup and trials run, the time limit applied, the eager call's measured
        #: time they follow, and why where they differ from the configured ones
        "limits": None,
    }


def configured_limits(cfg: EvalConfig) -> Dict[str, Any]:
    """The limits of a result for which no eager call was measured."""
    return {
        "warmup": cfg.warmup,
        "trials": cfg.trials,
        "timeout": cfg.timeout,
        "eager_s": None,
        "scaled": False,
        "why": None,
    }


def plan_limits(cfg: EvalConfig, eager_s: float) -> Dict[str, Any]:
    """The warmup, trials and per-backend time limit for a sample whose eager call takes
    ``eager_s`` seconds: as configured while the timed calls fit in ``TIMED_SHARE`` of the
    configured limit, else fewer calls (warmup first, at least one trial), and a limit
    that covers the compile, the first call and those calls with ``LIMIT_MARGIN``, never
    below the configured one."""
    warmup, trials = cfg.warmup, cfg.trials
    if eager_s > 0:
        # a round is one eager and one compiled call
        rounds = int(cfg.timeout * TIMED_SHARE // (2 * eager_s))
        if rounds < warmup + trials:
            warmup = min(warmup, rounds // 4)
            trials = max(1, min(trials, rounds - warmup))
    needed = LIMIT_MARGIN * eager_s * (FIRST_CALL_COST + 2 * (warmup + trials))
    timeout = max(cfg.timeout, math.ceil(needed * 10) / 10)
    changes = []
    if (warmup, trials) != (cfg.warmup, cfg.trials):
        changes.append(
            f"warmup {warmup} and trials {trials} (configured {cfg.warmup} and {cfg.trials})"
        )
    if timeout != cfg.timeout:
        changes.append(f"a {timeout:g} s limit (configured {cfg.timeout:g} s)")
    why = f"its eager call took {eager_s:.3g} s: " + ", ".join(changes) if changes else None
    return {
        "warmup": warmup,
        "trials": trials,
        "timeout": timeout,
        "eager_s": eager_s,
        "scaled": bool(changes),
        "why": why,
    }


def _fail(result: Dict[str, Any], status: str, kind: str, message: str) -> Dict[str, Any]:
    result["status"] = status
    result["error"] = {"kind": kind, "message": message}
    return result


def _describe(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) < 2000 else text[:2000] + " ..."


def _flat_outputs(out: Any) -> List[Any]:
    import paddle

    if isinstance(out, paddle.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        flat: List[Any] = []
        for o in out:
            flat.extend(_flat_outputs(o))
        return flat
    if isinstance(out, dict):
        flat = []
        for k in sorted(out):
            flat.extend(_flat_outputs(out[k]))
        return flat
    return []


def _to_numpy(tensors: List[Any]):
    arrays, dtypes, shapes = [], [], []
    for t in tensors:
        dtype = str(t.dtype).replace("paddle.", "")
        if dtype == "bfloat16":
            t = t.astype("float32")
        arrays.append(t.numpy())
        dtypes.append(dtype)
        shapes.append(list(t.shape))
    return arrays, dtypes, shapes


def _sync() -> None:
    import paddle

    if paddle.device.get_device().startswith("gpu"):
        paddle.device.synchronize()


def _timed(fn: Callable, kwargs: Dict[str, Any]) -> float:
    _sync()
    start = time.perf_counter()
    fn(**kwargs)
    _sync()
    return (time.perf_counter() - start) * 1000.0


def _compare(result, expected, compiled_out, cfg: EvalConfig) -> None:
    exp, exp_dtypes, exp_shapes = expected
    got, got_dtypes, got_shapes = _to_numpy(_flat_outputs(compiled_out))
    result["outputs"] = len(exp)
    gn: Dict[str, Any] = {
        "dtypes_eager": exp_dtypes,
        "dtypes_compiled": got_dtypes,
        "shapes_eager": exp_shapes,
        "shapes_compiled": got_shapes,
        "correctness": {},
    }
    result["graphnet"] = gn
    if len(got) != len(exp) or got_shapes != exp_shapes:
        _fail(
            result,
            scores.SHAPE_MISMATCH,
            WRONG_RESULT,
            f"outputs differ in number or shape: eager {exp_shapes}, compiled {got_shapes}",
        )
        return
    if got_dtypes != exp_dtypes:
        _fail(
            result,
            scores.TYPE_MISMATCH,
            WRONG_RESULT,
            f"outputs differ in dtype: eager {exp_dtypes}, compiled {got_dtypes}",
        )
        return
    levels = sorted(set(cfg.tolerances) | ({1} if max(cfg.tolerances) >= 1 else set()))
    # each output compared in one pass for every chain of levels, not once per pair
    rows = [[scores.tolerance_pair(t, d) for t in _GRAPHNET_LOG_LEVELS] for d in _GRAPHNET_DTYPES]
    own: List[int] = []
    row_firsts: Dict[str, List[int]] = {d: [] for d in _GRAPHNET_DTYPES}
    for e, g, dtype in zip(exp, got, exp_dtypes):
        chain = [scores.tolerance_pair(t, dtype) for t in levels]
        firsts = scores.Comparison(e, g).first_closes([chain, *rows])
        own.append(firsts[0])
        for d, first in zip(_GRAPHNET_DTYPES, firsts[1:]):
            row_firsts[d].append(first)
    for i, t in enumerate(levels):
        result["correct_at"][str(t)] = all(i >= first for first in own)
    gn["correctness"]["[equal]"] = [int(scores.close(e, g, 0, 0)) for e, g in zip(exp, got)]
    for i in range(len(_GRAPHNET_LOG_LEVELS)):
        for d, row in zip(_GRAPHNET_DTYPES, rows):
            rtol, atol = row[i]
            key = f"[all_close_atol_{atol:.2E}_rtol_{rtol:.2E}]"
            gn["correctness"][key] = [int(i >= first) for first in row_firsts[d]]
    loosest = str(max(cfg.tolerances))
    if not result["correct_at"][loosest]:
        worst = max(
            (float(abs(e.astype("float64") - g.astype("float64")).max()) if e.size else 0.0)
            for e, g in zip(exp, got)
        )
        result["error"] = {
            "kind": WRONG_RESULT,
            "message": f"not close at tolerance level {loosest} (largest difference {worst:.3g})",
        }


def _jit_facts(result: Dict[str, Any], compiled, backend: str) -> None:
    """Graphs, breaks and eager frames as ``explain()`` counts them, and the graphs that a
    fallback gave to the paddle backend (read after the first run: that run is when an
    outside backend's graph is checked)."""
    events = compiled._ctx.events
    result["graphs"] = sum(1 for ev in events if ev.compiled)
    result["breaks"] = sum(1 for ev in events if not ev.compiled and ev.graph_break)
    result["eager_frames"] = len(compiled.jit_stats.eager_frames)
    for ev in events:
        entry = ev.entry if ev.compiled else None
        if entry is not None and entry.backend is not None and entry.backend != backend:
            note = f" ({entry.backend_note})" if entry.backend_note else ""
            result["fallbacks"].append(f"{ev.code_name}: ran on {entry.backend}{note}")


def _layer_tensors(layer) -> Dict[str, Any]:
    named = dict(layer.named_parameters())
    named.update((k, v) for k, v in layer.named_buffers() if v is not None)
    return named


class ModuleCopies:
    """A sample's module, built once under ``paddle.seed(seed)`` and never run, and copies
    of it: every module a worker runs (the reference, each backend's eager and compiled
    one) is a copy, so that a sample whose ``GraphModule.__init__`` draws its own weights
    is compared and timed with the weights the reference ran with, and a layer whose state
    changes as it runs (BatchNorm's running statistics in training mode) starts every
    copy alike."""

    def __init__(self, sample, seed: int):
        import paddle

        self.sample, self.seed = sample, seed
        paddle.seed(seed)
        self.module = sample.load_module()
        self._deep = True

    def copy(self):
        """A copy with the same parameters, buffers and attributes: a deep copy, or where
        the module cannot be deep-copied (it holds a lock, a handle), a module built again
        under the same seed with every parameter and buffer set from the original."""
        import paddle

        if self._deep:
            try:
                return copy.deepcopy(self.module)
            except Exception as e:  # noqa: BLE001 - whatever deepcopy cannot copy
                log.debug("%s: deepcopy failed (%s), building copies anew", self.sample.name, e)
                self._deep = False
        paddle.seed(self.seed)
        other = self.sample.load_module()
        mine, theirs = _layer_tensors(self.module), _layer_tensors(other)
        differ = sorted(
            set(mine) ^ set(theirs)
            | {k for k in set(mine) & set(theirs) if mine[k].shape != theirs[k].shape}
        )
        if differ:
            raise SampleError(
                self.sample.path,
                "GraphModule() builds other parameters or buffers each time it is called "
                f"({', '.join(differ[:5])}), and the module cannot be deep-copied",
            )
        try:
            with paddle.no_grad():
                for name, tensor in mine.items():
                    theirs[name].set_value(tensor)
        except Exception as e:  # noqa: BLE001 - a dtype or place the copy cannot take
            raise SampleError(
                self.sample.path, f"cannot copy the weights of GraphModule(): {_describe(e)}"
            ) from None
        return other


def _run_backend(
    copies: ModuleCopies,
    backend: str,
    kwargs,
    expected,
    cfg: EvalConfig,
    limits: Dict[str, Any],
) -> Dict[str, Any]:
    import paddle

    import jit_core
    from jit_core.errors import BackendCompileError, JitError

    sample = copies.sample
    result = _new_result(sample.path, sample.name, backend)
    result["limits"] = limits
    eager = copies.copy()
    model = copies.copy()
    if backend == SOT:
        compiled = paddle.jit.to_static(model, full_graph=False)
    else:
        compiled = jit_core.optimize(model, backend=backend, dynamic=False)
    # the untimed calls (the first; the warmup and the settling) are profiled: what the
    # JIT did, graph by graph (jit_core.profile); the timed calls are not, as profiling
    # takes the general path
    first_profile, warm_profile = _Profiled(backend != SOT), _Profiled(backend != SOT)
    # the first call draws what the reference drew: jit-core keeps its own draws at
    # capture and compile time out of the user's stream
    paddle.seed(cfg.seed)
    start = time.perf_counter()
    try:
        with first_profile:
            out = compiled(**kwargs)
            _sync()
    except BackendCompileError as e:
        return _fail(result, scores.COMPILE_FAIL, BACKEND_COMPILE_ERROR, _describe(e))
    except JitError as e:
        return _fail(result, scores.COMPILE_FAIL, CAPTURE_ERROR, _describe(e))
    except Exception as e:  # noqa: BLE001 - the backend's error is the result
        if backend == SOT:
            # SOT translates on the first call: its errors there are compile errors
            return _fail(result, scores.COMPILE_FAIL, BACKEND_COMPILE_ERROR, _describe(e))
        return _fail(result, scores.RUNTIME_FAIL, RUN_ERROR, _describe(e))
    finally:
        result["compile_s"] = time.perf_counter() - start
    _compare(result, expected, out, cfg)
    if backend != SOT and result["error"] is None:
        # the first call may return the capture's own eager run of the graph (the paddle
        # backend's FirstFromCapture): the compiled graph answers the second
        paddle.seed(cfg.seed)
        try:
            again = compiled(**kwargs)
            _sync()
        except Exception as e:  # noqa: BLE001 - the backend's error is the result
            return _fail(
                result, scores.RUNTIME_FAIL, RUN_ERROR, "a second call raised " + _describe(e)
            )
        _compare(result, expected, again, cfg)
    if backend != SOT:
        _jit_facts(result, compiled, backend)
        error = result["error"]
        if cfg.triage and error is not None and error["kind"] == WRONG_RESULT:
            _triage(result, copies.copy(), backend, kwargs)
    if result["status"] != scores.CORRECT:
        return result
    try:
        with warm_profile:
            for _ in range(limits["warmup"]):
                eager(**kwargs)
                compiled(**kwargs)
            if backend != SOT:
                result["settle_calls"] = _settle(compiled, kwargs)
        if first_profile.data is not None and warm_profile.data is not None:
            result["profile"] = {"first_call": first_profile.data, "warmup": warm_profile.data}
        eager_ms: List[float] = []
        compiled_ms: List[float] = []
        for i in range(limits["trials"]):
            # alternate which goes first, so that neither always runs on a warmer cache
            if i % 2:
                compiled_ms.append(_timed(compiled, kwargs))
                eager_ms.append(_timed(eager, kwargs))
            else:
                eager_ms.append(_timed(eager, kwargs))
                compiled_ms.append(_timed(compiled, kwargs))
    except Exception as e:  # noqa: BLE001
        return _fail(result, scores.RUNTIME_FAIL, RUN_ERROR, "a timed call raised " + _describe(e))
    if eager_ms:
        result["eager_ms"] = statistics.median(eager_ms)
        result["compiled_ms"] = statistics.median(compiled_ms)
        result["eager_stats"] = scores.timing_stats(eager_ms)
        result["compiled_stats"] = scores.timing_stats(compiled_ms)
        if result["compiled_ms"] > 0:
            result["speedup"] = result["eager_ms"] / result["compiled_ms"]
    return result


def _triage(result: Dict[str, Any], model, backend: str, kwargs: Dict[str, Any]) -> None:
    """``--triage``: each graph of the sample against eager float32 and float64
    (``jit_core.debug.compare``), and the pass or node to blame where one is over
    tolerance; its report is the result's ``triage``, its verdict joins the error."""
    import jit_core.debug

    names = list(kwargs)

    def call(*values):
        # (the sample's inputs by position: each is then one input of the graph)
        return model(**dict(zip(names, values)))

    try:
        report = jit_core.debug.compare(call, *kwargs.values(), backend=backend, dynamic=False)
    except Exception as e:  # noqa: BLE001 - a failed triage is reported, the result stands
        result["triage"] = {"error": _describe(e)}
        result["error"]["message"] += f"; triage failed: {_describe(e)}"
        return
    result["triage"] = report.to_json()
    culprits = [f"graph {i}: {g.culprit}" for i, g in enumerate(report.graphs, 1) if g.culprit]
    bad = [g for g in report.graphs if not g.ok]
    if culprits:
        verdict = culprits[0]
    elif bad:
        verdict = f"{len(bad)} graph(s) {bad[0].verdict}, no single pass or node to blame"
    else:
        verdict = (
            "every graph within tolerance of a float64 reference (max(rtol, "
            f"{report.eager_factor:g} x eager float32's own error)): the difference is rounding"
        )
    result["error"]["message"] += f"; triage: {verdict}"


#: the most calls made to settle trials (``JitStats.on_trial``): a trial takes at most 68
SETTLE_CALLS = 200


class _Profiled:
    """Profiles the block it is entered for; ``data`` is the profile's JSON (without a
    trace). Off for SOT, and where a profile is active already (the user's
    ``JIT_PROFILE``)."""

    def __init__(self, on: bool):
        self.on = on
        self.data: Optional[Dict[str, Any]] = None
        self._profile: Any = None
        self._context: Any = None

    def __enter__(self) -> None:
        if not self.on:
            return
        import jit_core

        self._context = jit_core.profile()
        try:
            self._profile = self._context.__enter__()
        except RuntimeError:  # one is active: the user's own
            self.on, self._context = False, None

    def __exit__(self, *exc: Any) -> None:
        if self._context is not None:
            self._context.__exit__(*exc)
            self._context = None
            self.data = self._profile.to_json()


def _settle(compiled, kwargs: Dict[str, Any]) -> int:
    """Call ``compiled`` until no entry of it is on trial against eager code (``auto``
    times each new entry against the frame's original code on its first calls): the
    timed calls then run what the JIT kept. Returns the calls made."""
    calls = 0
    while compiled.jit_stats.on_trial and calls < SETTLE_CALLS:
        compiled(**kwargs)
        calls += 1
    return calls


def run_sample_in_process(path: str, name: str, cfg: EvalConfig, send: Callable) -> None:
    """What a worker does for one sample; ``send(message)`` reports each step and result:
    ``("phase", step)``, ``("limits", plan_limits(...))`` once the eager call is timed
    (before the backends run), ``("result", result)``."""
    from jit_core.graphnet.samples import check_signature, load_sample

    limits = configured_limits(cfg)

    def report(result: Dict[str, Any]) -> None:
        if result["limits"] is None:
            result["limits"] = limits
        send(("result", result))

    send(("phase", "load"))
    try:
        sample = load_sample(path)
        sample.name = name
        copies = ModuleCopies(sample, cfg.seed)
        check_signature(sample, copies.module)
        reference = copies.copy()
        kwargs = sample.make_inputs(cfg.seed)
    except SampleError as e:
        for backend in cfg.backends:
            report(_fail(_new_result(path, name, backend), "eager_fail", BAD_SAMPLE, str(e)))
        return
    import paddle

    send(("phase", "eager"))
    try:
        # samples are inference graphs (GraphNet's are): no gradients, as for a user's
        # eval() under no_grad(), which is also what inference-only backends compile
        with paddle.no_grad():
            # reseeded before each compared call: a sample that draws random numbers
            # (dropout in training mode) draws the same ones eagerly and compiled
            paddle.seed(cfg.seed)
            _sync()
            start = time.perf_counter()
            out = reference(**kwargs)
            _sync()
            eager_s = time.perf_counter() - start
            expected = _to_numpy(_flat_outputs(out))
            limits = plan_limits(cfg, eager_s)
            if limits["scaled"] and eager_s < cfg.timeout / 10:
                # a first call pays once for what later calls do not (kernel loading,
                # allocation, autotuning): a second one says whether the sample is slow
                eager_s = min(eager_s, _timed(reference, kwargs) / 1000.0)
                limits = plan_limits(cfg, eager_s)
    except Exception as e:  # noqa: BLE001
        message = f"the eager run raised {_describe(e)}"
        for backend in cfg.backends:
            report(_fail(_new_result(path, name, backend), "eager_fail", EAGER_ERROR, message))
        return
    del reference, out
    # before the slow steps: the parent enforces the limit
    send(("limits", limits))
    for backend in cfg.backends:
        send(("phase", backend))
        try:
            with paddle.no_grad():
                result = _run_backend(copies, backend, kwargs, expected, cfg, limits)
        except Exception as e:  # noqa: BLE001 - never lose the other backends
            result = _fail(
                _new_result(path, name, backend),
                scores.RUNTIME_FAIL,
                RUN_ERROR,
                _describe(e) + "\n" + traceback.format_exc(limit=5),
            )
        report(result)


def _worker_main(conn, path: str, name: str, cfg: EvalConfig) -> None:
    os.environ.setdefault("GLOG_minloglevel", "2")
    try:
        run_sample_in_process(path, name, cfg, conn.send)
        conn.send(("done", None))
    finally:
        conn.close()


@dataclass
class _Worker:
    path: str
    name: str
    process: Any
    conn: Any
    deadline: float
    #: the run's settings, with the one backend this worker runs
    cfg: Any = None
    #: seconds without a message before it is stopped, and the worker's plan of its
    #: limits once it has sent one
    limit: float = 0.0
    limits: Optional[Dict[str, Any]] = None
    phase: str = "start"
    results: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    done: bool = False


def _lost(worker: _Worker, cfg: EvalConfig, kind: str, why: str) -> List[Dict[str, Any]]:
    """Results for the backends a dead or killed worker did not report."""
    out = []
    for backend in cfg.backends:
        if backend in worker.results:
            continue
        result = _new_result(worker.path, worker.name, backend)
        if worker.phase in ("start", "load", "eager"):
            status, message = (
                scores.EAGER_FAIL,
                f"{why} while loading or running the sample eagerly",
            )
        elif worker.phase == backend:
            status, message = scores.RUNTIME_FAIL, f"{why} while running it on {backend}"
        else:
            status, message = scores.RUNTIME_FAIL, f"not run: {why} on an earlier backend"
        result["limits"] = worker.limits or configured_limits(cfg)
        out.append(_fail(result, status, kind, message))
    return out


def _context():
    """Workers come from a fork server that has imported Paddle and jit_core once: each
    is still a process of its own, without paying Paddle's import per sample. Where there
    is no fork server (not POSIX), each worker is spawned."""
    try:
        ctx = multiprocessing.get_context("forkserver")
    except ValueError:
        return multiprocessing.get_context("spawn")
    ctx.set_forkserver_preload(["jit_eval.runner"])
    return ctx


#: ``on_sample(done, total, name, results)``: a sample has every backend's result
OnSample = Callable[[int, int, str, List[Dict[str, Any]]], None]
#: ``on_result(result)``: one result arrived
OnResult = Callable[[Dict[str, Any]], None]
#: results of an earlier run, by (sample path, backend)
Done = Dict[Tuple[str, str], Dict[str, Any]]


class Results:
    """The results of a run as they arrive, by sample and backend: ``on_result`` for each,
    ``on_sample`` as each sample has all of its backends (the earlier run's ``done`` are
    in from the start). Shared by the local runner and ``cluster``."""

    def __init__(
        self,
        paths: Sequence[str],
        names: Sequence[str],
        backends: Sequence[str],
        on_sample: Optional[OnSample] = None,
        on_result: Optional[OnResult] = None,
        done: Optional[Done] = None,
    ):
        self.paths, self.backends = list(paths), list(backends)
        self.names = dict(zip(paths, names))
        self._on_sample, self._on_result = on_sample, on_result
        self._by_sample: Dict[str, Dict[str, Dict[str, Any]]] = {p: {} for p in paths}
        self._complete: List[str] = []
        for (path, backend), result in (done or {}).items():
            if path in self._by_sample and backend in self.backends:
                self._by_sample[path][backend] = result
        for path in self.paths:
            self._sample_done(path)

    def todo(self) -> List[Tuple[str, str, str]]:
        """(path, name, backend) of every result still to get, samples in order."""
        return [
            (path, self.names[path], backend)
            for path in self.paths
            for backend in self.backends
            if backend not in self._by_sample[path]
        ]

    def add(self, result: Dict[str, Any]) -> None:
        self._by_sample[result["sample"]][result["backend"]] = result
        if self._on_result is not None:
            self._on_result(result)
        self._sample_done(result["sample"])

    def ordered(self) -> List[Dict[str, Any]]:
        return [self._by_sample[p][b] for p in self.paths for b in self.backends]

    def _sample_done(self, path: str) -> None:
        mine = self._by_sample[path]
        if path not in self._complete and len(mine) == len(self.backends):
            self._complete.append(path)
            if self._on_sample is not None:
                results = [mine[b] for b in self.backends]
                self._on_sample(len(self._complete), len(self.paths), self.names[path], results)


def run(
    paths: Sequence[str],
    names: Sequence[str],
    cfg: EvalConfig,
    on_sample: Optional[OnSample] = None,
    on_result: Optional[OnResult] = None,
    done: Optional[Done] = None,
) -> List[Dict[str, Any]]:
    """Run every sample on every backend of ``cfg``: each (sample, backend) in a worker
    process of its own, ``cfg.jobs`` at a time, so that a backend that crashes or hangs
    costs exactly that result. ``on_result(result)`` is called as each result arrives,
    ``on_sample(done, total, name, results)`` as each sample has all of its; ``done``
    holds results of an earlier run by ``(sample path, backend)``, not run again. The
    results come back in the order of ``paths``, backends in the order of ``cfg``."""
    ctx = _context()
    results = Results(paths, names, cfg.backends, on_sample, on_result, done)
    pending = results.todo()
    running: List[_Worker] = []

    def start(path: str, name: str, backend: str) -> None:
        parent, child = ctx.Pipe(duplex=False)
        one = replace(cfg, backends=[backend])
        process = ctx.Process(target=_worker_main, args=(child, path, name, one), daemon=True)
        process.start()
        child.close()
        grace = max(cfg.timeout, STARTUP_GRACE)
        deadline = time.monotonic() + grace
        running.append(_Worker(path, name, process, parent, deadline, one, cfg.timeout))

    def finish(worker: _Worker, lost: List[Dict[str, Any]]) -> None:
        running.remove(worker)
        worker.conn.close()
        got = dict(worker.results)
        for r in lost:
            got[r["backend"]] = r
        for backend in worker.cfg.backends:
            got[backend]["sample"] = worker.path
            results.add(got[backend])

    while pending or running:
        while pending and len(running) < max(1, cfg.jobs):
            start(*pending.pop(0))
        now = time.monotonic()
        timeout = max(0.0, min(w.deadline for w in running) - now)
        ready = wait([w.conn for w in running] + [w.process.sentinel for w in running], timeout)
        for worker in list(running):
            # whether it was alive before its messages are read: a worker that sends its
            # last results and exits between ``wait`` and here has them in the pipe still
            alive = worker.process.is_alive()
            if worker.conn in ready or not alive:
                _read_messages(worker)
            if worker.done:
                worker.process.join(5)
                finish(worker, [])
            elif not alive:
                code = worker.process.exitcode
                why = f"the worker died (exit code {code})"
                if code is not None and code < 0:
                    why = f"the worker was killed by signal {-code}"
                finish(worker, _lost(worker, worker.cfg, CRASH, why))
            elif time.monotonic() > worker.deadline:
                worker.process.kill()
                worker.process.join(5)
                why = f"no progress within the {worker.limit:g} s limit"
                if worker.limit != cfg.timeout and worker.limits is not None:
                    why += (
                        f" (configured {cfg.timeout:g} s, raised for its "
                        f"{worker.limits['eager_s']:.3g} s eager call)"
                    )
                finish(worker, _lost(worker, worker.cfg, TIMEOUT, why))
    return results.ordered()


def _read_messages(worker: _Worker) -> None:
    """Everything the worker has sent so far (progress, results, done)."""
    try:
        while worker.conn.poll():
            kind, value = worker.conn.recv()
            if kind == "limits":
                worker.limits, worker.limit = value, value["timeout"]
            worker.deadline = time.monotonic() + worker.limit
            if kind == "phase":
                worker.phase = value
            elif kind == "result":
                worker.results[value["backend"]] = value
            elif kind == "done":
                worker.done = True
    except (EOFError, OSError):
        pass


__all__ = [
    "EvalConfig",
    "ModuleCopies",
    "plan_limits",
    "run",
    "run_sample_in_process",
    "SOT",
]
