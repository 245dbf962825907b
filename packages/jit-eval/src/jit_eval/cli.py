"""``jit-eval``: evaluate backends on GraphNet-format samples (``python -m jit_eval``)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import List, Optional, Sequence

from jit_core.graphnet.samples import SampleError, find_samples

from . import report, scores
from .runner import SOT, EvalConfig, run


def parse_tolerance(text: str) -> List[int]:
    """``-10..-1`` (a range, both ends included) or one level ``-5``."""
    try:
        if ".." in text:
            lo, hi = (int(x) for x in text.split("..", 1))
        else:
            lo = hi = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--tolerance takes a level like -5 or a range like -10..-1, got {text!r}"
        ) from None
    if lo > hi:
        raise argparse.ArgumentTypeError(f"--tolerance range {text!r} is empty ({lo} > {hi})")
    return list(range(lo, hi + 1))


def _positive(name: str, minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{name} takes an integer >= {minimum}, got {text!r}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jit-eval",
        description=(
            "Evaluate jit_core backends (and Paddle's SOT, as 'sot') on GraphNet-format "
            "computation-graph samples: correctness per tolerance level, speedup over eager "
            "Paddle, and GraphNet's S(t) and ES(t) scores per backend."
        ),
    )
    p.add_argument(
        "samples",
        nargs="+",
        metavar="SAMPLE_DIR",
        help="sample folders, or folders holding samples",
    )
    p.add_argument(
        "--backend",
        default="paddle",
        help="comma-separated backends: installed jit_core backends and 'sot' (default: paddle)",
    )
    p.add_argument(
        "--tolerance",
        type=parse_tolerance,
        default=list(scores.DEFAULT_TOLERANCES),
        help="tolerance levels, a range like -10..5 (the default) or one level",
    )
    p.add_argument(
        "--warmup",
        type=_positive("--warmup", 0),
        default=3,
        help="untimed calls each (default 3; fewer for a sample whose eager call is slow)",
    )
    p.add_argument(
        "--trials",
        type=_positive("--trials", 1),
        default=10,
        help="timed calls each (default 10; fewer for a sample whose eager call is slow)",
    )
    p.add_argument("--seed", type=int, default=0, help="the seed inputs are drawn from (default 0)")
    p.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds a sample may take to load or to run on one backend (default 300; more "
        "for a sample whose eager call needs it)",
    )
    p.add_argument(
        "--jobs", type=_positive("--jobs", 1), default=1, help="samples run at once (default 1)"
    )
    p.add_argument(
        "--json",
        metavar="FILE",
        help="write every result and the summary as JSON ('-': to stdout, the table to "
        "stderr); results go to FILE.partial as they arrive",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="with --json: keep the results of FILE or FILE.partial (an interrupted run) and "
        "run only the samples and backends they lack",
    )
    p.add_argument(
        "--plot", metavar="DIR", help="write S(t)/ES(t) and speedup plots as PNG (needs matplotlib)"
    )
    p.add_argument(
        "--log", metavar="DIR", help="write one GraphNet-form log per backend (<backend>.log)"
    )
    p.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run on a Ray cluster, one task per sample and backend: ray://HOST:PORT, a "
        "cluster's address, or 'auto' for a Ray started here (pip install 'jit-eval[cluster]')",
    )
    p.add_argument(
        "--task-cpus", type=float, default=1.0, help="with --cluster: CPUs per task (default 1)"
    )
    p.add_argument(
        "--task-gpus", type=float, default=0.0, help="with --cluster: GPUs per task (default 0)"
    )
    p.add_argument(
        "--triage",
        action="store_true",
        help="on each sample whose compiled values are not close at the loosest tolerance, "
        "run jit_core.debug.compare and name the pass or node to blame (the result's "
        "'triage' in --json; the culprit joins the error message)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def _check_backends(names: Sequence[str], parser) -> None:
    import jit_core

    installed = jit_core.backends()
    known = list(installed) + [SOT]
    for name in names:
        if name == SOT:
            continue
        if name not in installed:
            parser.error(f"unknown backend {name!r}; installed: {', '.join(known)}")
        if installed[name].unavailable:
            parser.error(f"backend {name!r} cannot run here: {installed[name].unavailable}")


class _Progress:
    """One line per sample on stderr: a bar, the count, the time left at the pace so far
    (counted in sample-backend runs, each a worker of its own), and each backend's
    verdict."""

    def __init__(self, runs: int):
        self.runs, self.done = runs, 0
        self.started = time.monotonic()

    def result(self, result) -> None:
        self.done += 1

    def sample(self, done: int, total: int, name: str, results) -> None:
        left = ""
        if 0 < self.done < self.runs:
            pace = (time.monotonic() - self.started) / self.done
            left = f" (about {_duration(pace * (self.runs - self.done))} left)"
        _progress(done, total, name, results, left)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _progress(done: int, total: int, name: str, results, left: str = "") -> None:
    width = 20
    filled = int(width * done / total)
    parts = []
    for r in results:
        if r["error"] is not None:
            parts.append(f"{r['backend']} {r['error']['kind']}")
        else:
            parts.append(f"{r['backend']} {r['speedup']:.2f}x" if r["speedup"] else r["backend"])
    bar = "#" * filled + "." * (width - filled)
    print(f"[{bar}] {done}/{total}{left} {name}: {', '.join(parts)}", file=sys.stderr, flush=True)
    for r in results:
        if r["error"] is not None:
            first = r["error"]["message"].splitlines()[0] if r["error"]["message"] else ""
            print(f"    {r['backend']}: {r['error']['kind']}: {first}", file=sys.stderr, flush=True)
        for line in r.get("fallbacks") or ():
            print(f"    {r['backend']}: fallback: {line}", file=sys.stderr, flush=True)
        why = (r.get("limits") or {}).get("why")
        if why:
            print(f"    {r['backend']}: limits: {why}", file=sys.stderr, flush=True)


def _parse(parser: argparse.ArgumentParser, argv: Optional[Sequence[str]]):
    """``(args, backends)``, or exit with a usage error naming what is wrong."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # argparse takes "-10..-1" for an option: glue it to --tolerance
    for i, arg in enumerate(argv[:-1]):
        if arg == "--tolerance" and argv[i + 1].startswith("-"):
            argv[i : i + 2] = [f"--tolerance={argv[i + 1]}"]
            break
    args = parser.parse_args(argv)
    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    if not backends:
        parser.error("--backend names no backend")
    if len(set(backends)) != len(backends):
        parser.error(f"--backend names a backend twice: {args.backend}")
    if args.plot:
        from jit_core.errors import MissingDependencyError

        from .plots import require_matplotlib

        try:
            require_matplotlib()
        except MissingDependencyError as e:
            parser.error(str(e))
    _check_backends(backends, parser)
    if args.cluster:
        from .cluster import unavailable_reason

        why = unavailable_reason()
        if why:
            parser.error(f"--cluster is not available: {why}")
    return args, backends


def _names(paths: Sequence[str], roots: Sequence[str]) -> list:
    """Each sample's name: its path below the root it was found in, led by that root's
    own name."""
    names = []
    for path in paths:
        root = next(r for r in roots if os.path.abspath(path).startswith(os.path.abspath(r)))
        rel = os.path.relpath(path, root)
        base = os.path.basename(os.path.abspath(root))
        names.append(base if rel == "." else os.path.join(base, rel))
    return names


def _journal(parser, args, paths: Sequence[str], backends: Sequence[str]):
    """``(journal, results already there)``: the run written as it goes to ``--json``
    FILE, and what ``--resume`` keeps of an earlier one."""
    if args.resume and (not args.json or args.json == "-"):
        parser.error("--resume needs --json FILE (the run to resume)")
    journal, done = None, {}
    if args.json and args.json != "-":
        journal = report.Journal(args.json, {**vars(args), "tolerances": args.tolerance})
        if args.resume:
            try:
                done = journal.earlier(args.json)
            except ValueError as e:
                parser.error(str(e))
            wanted = {(p, b) for p in paths for b in backends}
            done = {k: v for k, v in done.items() if k in wanted}
            if not args.quiet:
                print(f"jit-eval: resuming, {len(done)} results kept", file=sys.stderr)
        journal.start(done)
    return journal, done


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args, backends = _parse(parser, argv)
    try:
        paths = find_samples(args.samples)
    except SampleError as e:
        parser.error(str(e))
    names = _names(paths, args.samples)
    cfg = EvalConfig(
        backends=backends,
        tolerances=args.tolerance,
        warmup=args.warmup,
        trials=args.trials,
        seed=args.seed,
        timeout=args.timeout,
        jobs=args.jobs,
        triage=args.triage,
    )
    if not args.quiet:
        print(
            f"jit-eval: {len(paths)} samples on {', '.join(backends)} "
            f"(warmup {args.warmup}, trials {args.trials}, "
            + (
                f"on the Ray cluster {args.cluster})" if args.cluster else f"{args.jobs} at a time)"
            ),
            file=sys.stderr,
            flush=True,
        )
    to_stdout = args.json == "-"
    journal, done = _journal(parser, args, paths, backends)
    start = time.monotonic()
    progress = None if args.quiet else _Progress(len(paths) * len(backends) - len(done))

    def on_result(result) -> None:
        if journal is not None:
            journal.add(result)
        if progress is not None:
            progress.result(result)

    on_sample = None if progress is None else progress.sample
    if args.cluster:
        from .cluster import ClusterUnreachable, run_on_ray

        try:
            results = run_on_ray(
                args.cluster,
                paths,
                names,
                cfg,
                on_sample,
                on_result=on_result,
                done=done,
                task_cpus=args.task_cpus,
                task_gpus=args.task_gpus,
            )
        except ClusterUnreachable as e:
            parser.error(str(e))
    else:
        results = run(paths, names, cfg, on_sample, on_result=on_result, done=done)
    summary = report.summarize(results, backends, args.tolerance)
    config = {
        "backends": backends,
        "tolerances": args.tolerance,
        "warmup": args.warmup,
        "trials": args.trials,
        "seed": args.seed,
        "timeout": args.timeout,
        "samples": list(args.samples),
        "cluster": args.cluster,
        "triage": args.triage,
        "device": _device(),
        "seconds": round(time.monotonic() - start, 2),
    }
    # with --json - the JSON alone goes to stdout
    print(
        report.format_table(summary, args.tolerance), file=sys.stderr if to_stdout else sys.stdout
    )
    if to_stdout:
        report.write_json(sys.stdout, config, results, summary)
    elif args.json:
        report.write_json(args.json, config, results, summary)
        journal.close()
        print(f"wrote {args.json}", file=sys.stderr)
    if args.log:
        for path in report.write_graphnet_logs(args.log, results, config):
            print(f"wrote {path}", file=sys.stderr)
    if args.plot:
        from .plots import plot_all

        for path in plot_all(args.plot, results, summary, args.tolerance):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _device() -> str:
    import paddle

    return paddle.device.get_device()
