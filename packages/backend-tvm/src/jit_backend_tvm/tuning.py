"""MetaSchedule tuning under a budget, with a database that outlives the process.

A Relax module splits into tasks (one per distinct fused kernel: ResNet18 has 19). Each is
tuned on its own, so that progress can be reported per task and a time budget can stop
between tasks. Records go to one JSON database per target and TVM version, under the
compile cache (``<cache>/tvm/tuning/<target key>/``): any later process, and any other
model with a kernel of the same shape, starts from them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field
from typing import Iterator, List, Optional

from jit_core.compile_cache import DiskCache

from .target import target_key

log = logging.getLogger("jit_core.tuning")

_CACHE = DiskCache("tvm")
#: kernels with fewer floating-point operations run on default schedules: tuning a
#: reshape costs seconds and gains nothing
MIN_FLOPS = 100_000


@dataclass
class TuningReport:
    """What one call of ``tune`` did."""

    tasks: int = 0
    #: tasks too small to be worth tuning (reshapes, tiny reductions): default schedules
    small: int = 0
    #: tasks that already had a record and were left alone
    reused: int = 0
    tuned: List[str] = field(default_factory=list)
    #: tasks left without a record because the time budget ran out
    skipped: List[str] = field(default_factory=list)
    trials: int = 0
    seconds: float = 0.0

    @property
    def complete(self) -> bool:
        return not self.skipped


def database_dir(target) -> str:
    return os.path.join(_CACHE.directory, "tuning", target_key(target))


def open_database(target):
    from tvm.s_tir import meta_schedule as ms

    folder = database_dir(target)
    os.makedirs(folder, exist_ok=True)
    return ms.database.JSONDatabase(work_dir=folder)


def prepare(mod, target):
    """The Relax module in the form tasks are extracted from and records applied to.

    Kernel arguments that are constants (the weights of a frozen graph) are marked
    layout-free: MetaSchedule may then store them in the layout its schedule reads best
    (``RewriteLayout``), and ``apply_records`` computes that layout at compile time."""
    import tvm
    from tvm import relax

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
def _tuning_environment(target) -> Iterator[None]:
    """MetaSchedule with TVM's import of its tensor intrinsics skipped (35-40 s, see
    ``_ms_build``) where the target cannot use them, and its console logging turned down
    (the per-task progress is ours; its own logs go to a temporary folder)."""
    name = "tvm.s_tir.tensor_intrin"
    stub = None
    if name not in sys.modules and not _may_tensorize(target):
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
    database = open_database(target)
    tasks = extract_tasks(mod, target)
    report = TuningReport(tasks=len(tasks))
    worth = [t for t in tasks if _flops(t) >= MIN_FLOPS]
    report.small = len(tasks) - len(worth)
    todo = [t for t in worth if not (only_missing and has_record(database, t, target))]
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
    cost_model = "xgb" if _has("xgboost") else "random"
    with _tuning_environment(target), tempfile.TemporaryDirectory(prefix="jit_tvm_") as logs:
        # one builder and runner for every task: each starts worker processes
        builder = ms.builder.LocalBuilder(f_build=_ms_build.build)
        runner = ms.runner.LocalRunner()
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
            context = ms.TuneContext(
                mod=task.dispatched[0],
                target=target,
                space_generator="post-order-apply",
                search_strategy=ms.search_strategy.EvolutionarySearch(
                    population_size=_population(trials_per_task)
                ),
                task_name=task.task_name,
                num_threads="physical",
                logger=logging.getLogger("tvm.s_tir.meta_schedule.jit_core"),
            )
            ms.tune_tasks(
                tasks=[context],
                task_weights=[1.0],
                work_dir=logs,
                max_trials_global=trials_per_task,
                max_trials_per_task=trials_per_task,
                num_trials_per_iter=min(trials_per_task, 64),
                builder=builder,
                runner=runner,
                database=database,
                cost_model=cost_model,
            )
            report.tuned.append(task.task_name)
            report.trials += trials_per_task
            best = database.query_tuning_record(task.dispatched[0], target, task.task_name)
            best_us = _mean_us(best)
            log.info(
                "%s: [%d/%d] %s: best %s (%.0f s so far)",
                label,
                i + 1,
                len(todo),
                task.task_name,
                f"{best_us:.0f} us" if best_us is not None else "no valid candidate",
                time.perf_counter() - start,
            )
    report.seconds = time.perf_counter() - start
    return report


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
    """``mod`` with every kernel that has a record scheduled by it (the others keep TVM's
    default, unscheduled code), and the weight layouts those schedules chose computed
    from the constants now, once, instead of in every call."""
    import tvm
    from tvm import relax

    if not os.path.exists(os.path.join(database_dir(target), "database_workload.json")):
        return mod
    with target, _tuning_environment(target), open_database(target):
        return tvm.transform.Sequential(
            [
                relax.transform.MetaScheduleApplyDatabase(),
                relax.transform.SplitLayoutRewritePreproc(),
                relax.transform.FoldConstant(),
            ]
        )(mod)


__all__ = [
    "TuningReport",
    "apply_records",
    "database_dir",
    "extract_tasks",
    "open_database",
    "prepare",
    "tune",
]
