"""MetaSchedule tuning under a budget, with a database that outlives the process.

A Relax module splits into tasks (one per distinct fused kernel: ResNet18 has 19). Each is
tuned on its own, so that progress can be reported per task and a time budget can stop
between tasks. Records go to one JSON database per target and TVM version, under the
compile cache (``<cache>/tvm/tuning/<target key>/``): any later process, and any other
model with a kernel of the same shape, starts from them. With a remote cache, machines
pool their best records (``shared_records``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field
from typing import Iterator, List, Optional

from jit_core.cache.disk import DiskCache

from . import shared_records
from .intrinsics import import_tensor_intrinsics
from .layouts import channels_last, check_layout, fold_constant_permutes
from .target import target_key

log = logging.getLogger("jit_core.tuning")

_CACHE = DiskCache("tvm")
#: kernels with fewer floating-point operations keep their sampled schedule: tuning a
#: reshape costs seconds and gains nothing
MIN_FLOPS = 100_000
#: candidates measured between two updates of the cost model: in rounds of 16 the search
#: learns within a kernel's budget (in one round of 64 the first 64 are picked blind)
TRIALS_PER_ROUND = 16
#: how candidates are measured: each of ``MEASURE_REPEATS`` runs starts with the kernel's
#: weights and outputs flushed from the CPU caches (its input stays: in a model, the
#: previous kernel just wrote it). MetaSchedule's default runs a kernel over and over for
#: 100 ms, so its weights sit in the caches, which they never do inside a model whose
#: weights outgrow them: ResNet18's kernels ran 20-40% slower in the model than those
#: measurements said, and a search that ranks candidates on warm caches favours the
#: schedules that suffer most (Winograd 7x7x512: 2.7 ms warm, 4.2 ms cold).
MEASURE_REPEATS = 10
#: part of the database's folder name: records measured another way do not compare
MEASUREMENT = "cold-weights"
#: searches of one kernel before it is left to a sampled schedule (see ``tune``)
SEARCH_ATTEMPTS = 3
#: a schedule is tried on another kernel when at most this many of the blocks it names
#: are missing there (the extra addition of a residual block)
MAX_MISSING_BLOCKS = 1


@dataclass
class TuningReport:
    """What one call of ``tune`` did."""

    tasks: int = 0
    #: tasks too small to be worth tuning (reshapes, tiny reductions): sampled schedules
    small: int = 0
    #: tasks that already had a record and were left alone
    reused: int = 0
    tuned: List[str] = field(default_factory=list)
    #: tasks left without a record because the time budget ran out
    skipped: List[str] = field(default_factory=list)
    #: tasks whose search MetaSchedule broke off with an error (what it measured is kept)
    failed: List[str] = field(default_factory=list)
    #: schedules of one kernel measured and recorded on another (see ``_adopt_schedules``)
    adopted: int = 0
    trials: int = 0
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return not self.skipped


def database_dir(target) -> str:
    return os.path.join(_CACHE.directory, "tuning", f"{target_key(target)}-{MEASUREMENT}")


def open_database(target):
    from tvm.s_tir import meta_schedule as ms

    folder = database_dir(target)
    os.makedirs(folder, exist_ok=True)
    return ms.database.JSONDatabase(work_dir=folder)


def best_records(target):
    """An in-memory database with the best record of each kernel on disk.

    ``JSONDatabase`` parses the schedule trace of every record when it opens (ResNet18
    after 128 trials per kernel: 2,900 records, 20 s); building needs only each kernel's
    winner, so the files are read as plain JSON and only the winners are parsed (1 s).
    The result is kept until the files change: a build asks twice (``tune`` for what is
    missing, ``apply_records``), and a process building many graphs asks for each."""
    from tvm.s_tir import meta_schedule as ms

    folder = database_dir(target)
    # what other machines tuned (with a remote cache): merged once per process
    shared_records.pull(folder)
    stamp = (folder, _stamp(folder, _WORKLOADS), _stamp(folder, _RECORDS))
    if _best_records_kept.get("stamp") == stamp:
        return _best_records_kept["database"]
    database = ms.database.MemoryDatabase()
    workloads = _json_lines(os.path.join(folder, _WORKLOADS))
    best = {}
    for line in _json_lines(os.path.join(folder, _RECORDS)):
        try:
            index, record = int(line[0]), line[1]
            seconds = [float(s) for s in record[1] or ()]
        except (TypeError, ValueError, IndexError):
            continue
        if seconds and 0 <= index < len(workloads):
            mean = sum(seconds) / len(seconds)
            if index not in best or mean < best[index][0]:
                best[index] = (mean, record)
    for index, (_, record) in best.items():
        workload = database.commit_workload(ms.database.Workload.from_json(workloads[index]).mod)
        database.commit_tuning_record(ms.database.TuningRecord.from_json(record, workload))
    _best_records_kept.update(stamp=stamp, database=database)
    return database


_WORKLOADS = "database_workload.json"
_RECORDS = "database_tuning_record.json"
#: the last ``best_records`` result and the file stamps it was read at
_best_records_kept: dict = {}


def _stamp(folder: str, name: str):
    """When and how long the file was last written; None if it does not exist."""
    try:
        info = os.stat(os.path.join(folder, name))
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


def _json_lines(path: str) -> list:
    """The lines of a JSON-lines file that parse; a line another process is still
    writing is left out."""
    import json

    if not os.path.exists(path):
        return []
    lines = []
    with open(path) as f:
        for line in f:
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue
    return lines


def prepare(mod, target, layout: str = "NHWC", winograd: bool = True):
    """The Relax module in the form tasks are extracted from and records applied to.

    With ``layout="NHWC"`` convolutions (and the pooling and elementwise ops around them)
    are computed channels last (``layouts.channels_last``), the weights a frozen graph holds
    as constants are transposed with NumPy, and with ``winograd`` its 3x3 stride-1
    convolutions become Winograd convolutions (``winograd.rewrite``). Kernel arguments that
    are constants are marked layout-free: MetaSchedule may then store them in the layout
    its schedule reads best (``RewriteLayout``), and ``apply_records`` computes that layout
    at compile time."""
    import tvm
    from tvm import relax

    from . import winograd as winograd_

    check_layout(layout)
    if layout == "NHWC":
        mod = fold_constant_permutes(channels_last(mod))
        if winograd:
            mod, _ = winograd_.rewrite(mod)
    with target:
        return tvm.transform.Sequential(
            [
                relax.transform.DecomposeOpsForInference(),
                relax.transform.CanonicalizeBindings(),
                relax.pipeline.zero_pipeline(),
                relax.transform.AttachAttrLayoutFreeBuffers(),
            ]
        )(mod)


def extract_tasks(mod, target) -> list:
    from tvm.s_tir import meta_schedule as ms

    return list(ms.relax_integration.extract_tasks(mod, target))


def has_record(database, task, target) -> bool:
    return database.query_tuning_record(task.dispatched[0], target, task.task_name) is not None


@contextlib.contextmanager
def tuning_environment(target) -> Iterator[None]:
    """MetaSchedule with TVM's import of its tensor intrinsics skipped where the target
    cannot use them, and made where it can without its 14 s of stack scans (``intrinsics``:
    else MetaSchedule's first ``TuneContext`` imports them itself); its console logging
    turned down (the per-task progress is ours; its own logs go to a temporary folder)."""
    name = "tvm.s_tir.tensor_intrin"
    stub = None
    if name not in sys.modules:
        if _may_tensorize(target):
            import_tensor_intrinsics()
        else:
            stub = sys.modules[name] = types.ModuleType(name)
    quiet = logging.getLogger("tvm.s_tir.meta_schedule")
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        yield
    finally:
        quiet.setLevel(level)
        if stub is not None and sys.modules.get(name) is stub:
            del sys.modules[name]


def _may_tensorize(target) -> bool:
    """Whether MetaSchedule's rules for this target use tensor intrinsics: on x86 only
    with AVX-512 (VNNI, AMX); anything but x86 is assumed to."""
    triple = str(target.attrs.get("mtriple", "x86_64"))
    if not triple.startswith(("x86_64", "i386", "i686")):
        return True
    try:
        from tvm.target import codegen

        return bool(codegen.llvm_cpu_has_features(["avx512f"], target))
    except Exception:  # noqa: BLE001 - unknown: take the slow, safe way
        return True


def tune(
    mod,
    target,
    *,
    trials_per_task: int,
    seconds: Optional[float] = None,
    only_missing: bool = True,
    label: str = "graph",
) -> TuningReport:
    """Tune the tasks of ``mod`` (already ``prepare``d) with MetaSchedule's evolutionary
    search, ``trials_per_task`` measured candidates each; stop between tasks once
    ``seconds`` have passed. With ``only_missing`` a task that has a record is skipped."""
    if trials_per_task < 1:
        raise ValueError(f"trials_per_task must be at least 1, got {trials_per_task!r}")
    from tvm.s_tir import meta_schedule as ms

    from . import _ms_build

    start = time.perf_counter()
    tasks = extract_tasks(mod, target)
    report = TuningReport(tasks=len(tasks))
    worth = [t for t in tasks if _flops(t) >= MIN_FLOPS]
    report.small = len(tasks) - len(worth)
    known = best_records(target) if only_missing else None
    todo = [t for t in worth if not (known is not None and has_record(known, t, target))]
    report.reused = len(worth) - len(todo)
    if not todo:
        log.info("%s: all %d kernels worth tuning have records", label, len(worth))
        return report
    log.info(
        "%s: tuning %d of %d kernels, %d trials each%s (records: %s)",
        label,
        len(todo),
        len(tasks),
        trials_per_task,
        f", at most {seconds:.0f} s" if seconds else "",
        database_dir(target),
    )
    # the whole database: tuning adds to it, and the search starts from its best records
    database = open_database(target)
    # one cost model for all the kernels of this call: what it learnt measuring one
    # convolution ranks the candidates of the next from its first trial
    cost_model = ms.cost_model.CostModel.create(
        "xgb" if _has("xgboost") else "random",
        num_tuning_cores=os.cpu_count() or 1,
        tree_method="auto",
    )
    with tuning_environment(target), tempfile.TemporaryDirectory(prefix="jit_tvm_") as logs:
        # one builder and runner for every task: each starts worker processes
        builder = ms.builder.LocalBuilder(f_build=_ms_build.build)
        runner = ms.runner.LocalRunner(
            evaluator_config=ms.runner.EvaluatorConfig(
                number=1, repeat=MEASURE_REPEATS, min_repeat_ms=0, enable_cpu_cache_flush=True
            )
        )
        for i, task in enumerate(todo):
            elapsed = time.perf_counter() - start
            if seconds is not None and elapsed >= seconds:
                report.skipped = [t.task_name for t in todo[i:]]
                log.info(
                    "%s: time budget of %.0f s used; %d kernels stay untuned",
                    label,
                    seconds,
                    len(report.skipped),
                )
                break
            # the best schedules of kernels alike give the search a measured start (ResNet18,
            # 128 trials each: one convolution with two epilogues ended 1.6x apart)
            report.adopted += _adopt_schedules(ms, task, worth, target, database, builder, runner)
            failure = ""
            for attempt in range(SEARCH_ATTEMPTS):
                failure = _search(
                    ms, task, target, trials_per_task, builder, runner, database, cost_model, logs
                )
                if not failure:
                    break
                log.info(
                    "%s: %s: search %d broke off (%s)", label, task.task_name, attempt + 1, failure
                )
            if failure:
                report.failed.append(task.task_name)
            report.tuned.append(task.task_name)
            report.trials += trials_per_task
            best = database.query_tuning_record(task.dispatched[0], target, task.task_name)
            best_us = _mean_us(best)
            log.info(
                "%s: [%d/%d] %s: best %s (%.0f s so far)%s",
                label,
                i + 1,
                len(todo),
                task.task_name,
                f"{best_us:.0f} us" if best_us is not None else "no valid candidate",
                time.perf_counter() - start,
                f"; the search stopped early: {failure}" if failure else "",
            )
        # and the kernels tuned first try what their twins found afterwards
        tuned = [t for t in todo if t.task_name in report.tuned]
        for i, task in enumerate(tuned[:-1]):
            report.adopted += _adopt_schedules(
                ms, task, tuned[i + 1 :], target, database, builder, runner
            )
    report.seconds = time.perf_counter() - start
    if report.tuned or report.adopted:
        shared_records.push(database_dir(target))
    return report


def _adopt_schedules(ms, task, sources, target, database, builder, runner) -> int:
    """Measure on ``task`` the best schedule of each kernel of ``sources`` whose schedule
    applies to it, and record what runs; returns how many were recorded.

    A schedule names the blocks it transforms, and its tile sizes must divide the loops:
    only kernels with the same stages pass: one convolution followed by a bias and a ReLU
    and the same convolution followed by a residual addition too (the instructions on a
    block ``task`` lacks are left out), or Winograd convolutions of other sizes whose tiles
    fit. After 128 trials per kernel of ResNet18 this made seven kernels 10-40% faster
    (a 28x28 Winograd convolution 2.1 -> 1.2 ms): 33.9 -> 30.9 ms per image."""
    from tvm import s_tir

    mod = task.dispatched[0]
    names = _block_names(mod)
    postprocs = None
    candidates = []
    for source in sources:
        if source is task:
            continue
        record = database.query_tuning_record(source.dispatched[0], target, source.task_name)
        trace = None if record is None else _without_missing_blocks(record.trace, names)
        if trace is None:
            continue
        sch = s_tir.Schedule(mod)
        try:
            trace.apply_to_schedule(sch, remove_postproc=True)
            sch.enter_postproc()
            if postprocs is None:
                postprocs = _postprocs(ms, mod, target)
            if all(p.apply(sch) for p in postprocs):
                candidates.append(sch)
        except Exception:  # noqa: BLE001 - a schedule that does not fit this kernel
            continue
    if not candidates:
        return 0
    builds = builder.build([ms.builder.BuilderInput(sch.mod, target) for sch in candidates])
    runs = []
    for sch, built in zip(candidates, builds):
        if built.error_msg is None:
            args = ms.arg_info.ArgInfo.from_entry_func(sch.mod, remove_preproc=True)
            runs.append((sch, args, ms.runner.RunnerInput(built.artifact_path, "cpu", args)))
    results = [f.result() for f in runner.run([r[2] for r in runs])] if runs else []
    workload = database.commit_workload(mod)
    recorded = 0
    for (sch, args, _), result in zip(runs, results):
        if result.error_msg is None and result.run_secs:
            database.commit_tuning_record(
                ms.database.TuningRecord(
                    sch.trace, workload, [float(t) for t in result.run_secs], target, args
                )
            )
            recorded += 1
    return recorded


def _postprocs(ms, mod, target) -> list:
    context = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply")
    return list(context.space_generator.postprocs)


def _block_names(mod) -> set:
    return set(re.findall(r'T\.sblock\("([A-Za-z0-9_]+)"\)', mod["main"].script()))


def _without_missing_blocks(trace, names: set):
    """``trace`` without the instructions that reach blocks not in ``names`` (and without
    those that use what they made); None if more than ``MAX_MISSING_BLOCKS`` are missing:
    what is left of a pooling's schedule on a convolution is no start for its search."""
    from tvm.s_tir.schedule import Trace

    missing = [
        inst
        for inst in trace.insts
        if inst.kind.name == "GetSBlock" and str(inst.attrs[0]) not in names
    ]
    if len(missing) > MAX_MISSING_BLOCKS:
        return None
    dead = set()
    kept = []
    decisions = {}
    for inst in trace.insts:
        lost = any(inst.same_as(m) for m in missing)
        if lost or any(_is_rv(i) and i in dead for i in inst.inputs):
            dead.update(inst.outputs)
            continue
        kept.append(inst)
        decision = trace.get_decision(inst)
        if decision is not None:
            decisions[inst] = decision
    return Trace(kept, decisions) if kept else None


def _is_rv(value) -> bool:
    from tvm.s_tir.schedule import LoopRV, SBlockRV

    return isinstance(value, (LoopRV, SBlockRV))


def _search(ms, task, target, trials, builder, runner, database, cost_model, logs) -> str:
    """One evolutionary search of ``task``; returns why it broke off, or "".

    MetaSchedule's search sometimes mutates a multi-stage kernel (Winograd) into a trace
    that no longer applies and raises ("The block no longer exists in the IRModule") instead
    of dropping that candidate. What it measured until then is in the database; the next
    attempt draws other random numbers (the seed is random each time)."""
    context = ms.TuneContext(
        mod=task.dispatched[0],
        target=target,
        space_generator="post-order-apply",
        search_strategy=ms.search_strategy.EvolutionarySearch(
            population_size=_population(min(trials, TRIALS_PER_ROUND))
        ),
        task_name=task.task_name,
        num_threads="physical",
        logger=logging.getLogger("tvm.s_tir.meta_schedule.jit_core"),
    )
    try:
        ms.tune_tasks(
            tasks=[context],
            task_weights=[1.0],
            work_dir=logs,
            max_trials_global=trials,
            max_trials_per_task=trials,
            num_trials_per_iter=min(trials, TRIALS_PER_ROUND),
            builder=builder,
            runner=runner,
            database=database,
            cost_model=cost_model,
        )
    except Exception as e:  # noqa: BLE001 - TVM raises its own error types
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        return lines[-1][:200] if lines else type(e).__name__
    return ""


def _population(trials: int) -> int:
    """The evolutionary search's population: MetaSchedule's 512 costs ~30 s of search per
    kernel on two cores whatever the budget; a few dozen measured trials are served as well
    by a smaller one."""
    return max(64, min(512, 8 * trials))


def _flops(task) -> float:
    from tvm.s_tir.analysis import estimate_tir_flops

    try:
        return float(estimate_tir_flops(task.dispatched[0]))
    except Exception:  # noqa: BLE001 - an unanalysable kernel: tune it
        return float("inf")


def _mean_us(record) -> Optional[float]:
    if record is None or not record.run_secs:
        return None
    secs = [float(s) for s in record.run_secs]
    return sum(secs) / len(secs) * 1e6


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def apply_records(mod, target):
    """``mod`` with every kernel that has a record scheduled by it; the others are left
    for ``schedules.sample_unscheduled``."""
    from tvm import relax

    with target, tuning_environment(target), best_records(target):
        return relax.transform.MetaScheduleApplyDatabase()(mod)


__all__ = [
    "TuningReport",
    "apply_records",
    "best_records",
    "database_dir",
    "extract_tasks",
    "open_database",
    "prepare",
    "tune",
    "tuning_environment",
]
