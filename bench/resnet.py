"""ResNet18 inference, batch 1, on CPU: backends and graph passes, in one run.

    python bench/resnet.py [--backend all|paddle|onnxrt|tvm|tensorrt] [--rounds N]
                           [--size 224] [--skip-first-call] [--tvm-trials N]
                           [--tvm-tune auto|always]

``--backend NAME`` keeps eager Paddle, the onnxrt rows with ``freeze=True`` and the raw
ONNX Runtime session as the peers, and that backend's rows. Rows: eager Paddle, ``paddle.jit.to_static``, and ``jit_core.optimize`` on every installed
backend that this script knows (``paddle``; ``onnxrt`` when jit-backend-onnxrt is
installed) with passes off, the default passes, and the default passes with
``freeze=True`` (BatchNorm and constant folding; onnxrt then bakes the parameters into
the model); with onnxrt, also a raw ONNX Runtime session on the same exported model.
Everything runs under ``paddle.no_grad()`` in ``eval()`` mode. Columns: operations in the
captured graph, median latency, speed-up against eager, largest difference from eager.
The rows' runs are interleaved so that drift of the machine hits all of them alike; two
untimed calls start each block, as the previous row's thread pool is still spinning.

With tvm (Python 3.10+, jit-backend-tvm installed), frozen: the build without tuning
(``tune="off"``: every kernel on a schedule sampled from MetaSchedule's search space), and
the tuned build: every kernel without a record in the on-disk
MetaSchedule database is tuned first with ``--tvm-trials`` measured candidates (default 16;
the table says how many kernels were tuned now, how long it took, and how many records
were reused from earlier runs, which add up across runs; ``--tvm-tune always`` tunes every
kernel again, adding ``--tvm-trials`` on top of the records).

Then, for the paddle backend (the baseline) and per ONNX backend, the first call of a
fresh process: cold (empty compile cache: the
export runs; tvm builds with sampled schedules) and warm (the model or library comes from
the on-disk cache; for tvm the tuned library); for tvm also "records": an empty compile
cache that holds only the tuning database, so the tuned build is compiled from the records
without tuning.

``--backend tensorrt`` is a GPU run of its own (``tensorrt_main``): eager Paddle and
``paddle.jit.to_static`` on the GPU against ``jit_core.optimize(backend="tensorrt")`` with
live parameters, frozen, and frozen with ``fp16=True``, each call synchronized with the
GPU; then the first call of a fresh process, cold and warm. Where TensorRT cannot run it
exits with the reason; ``--backend all`` (CPU) prints that reason as a note.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import paddle  # noqa: E402
from paddle.vision.models import resnet18  # noqa: E402

import jit_core  # noqa: E402

VARIANTS = (
    ("passes off", dict(passes=False)),
    ("default passes", {}),
    ("default + freeze", dict(freeze=True)),
)


def median_ms(fns, x, rounds: int, inner: int = 3) -> list:
    with paddle.no_grad():
        for fn in fns:
            for _ in range(3):
                fn(x)
        samples = [[] for _ in fns]
        for _ in range(rounds):
            for i, fn in enumerate(fns):
                # untimed: the previous row's runtime leaves its thread pool spinning for a
                # while (OpenMP in Paddle, ORT's own), which would be billed to this row
                fn(x)
                fn(x)
                start = time.perf_counter()
                for _ in range(inner):
                    fn(x)
                samples[i].append((time.perf_counter() - start) / inner * 1e3)
    return [statistics.median(s) for s in samples]


FIRST_CALL = """
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import paddle, jit_core
from paddle.vision.models import resnet18
paddle.seed(0)
net = resnet18(); net.eval()
x = paddle.rand([1, 3, SIZE, SIZE])
fast = jit_core.optimize(net, backend=BACKEND, freeze=True, **OPTIONS)
with paddle.no_grad():
    start = time.perf_counter()
    fast(x)
    print(json.dumps(time.perf_counter() - start))
"""


def first_call_s(backend: str, size: int, cache: str, **options) -> float:
    code = FIRST_CALL.replace("SIZE", str(size)).replace("BACKEND", repr(backend))
    code = code.replace("OPTIONS", repr(options))
    env = dict(os.environ, JIT_CORE_CACHE_DIR=cache, GLOG_minloglevel="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def raw_ort_session(net, x):
    """An ONNX Runtime session on the model jit_core exports for the frozen graph, as the
    onnxrt backend asks for it (its relus fused, the model's NaN check among the outputs,
    read here as the backend reads them)."""
    import onnxruntime as ort

    from jit_core.kit.onnx import export_onnx

    with paddle.no_grad():
        gm = jit_core.capture(net, x, passes=None, freeze=True)
    model = export_onnx(gm, [x], acts_on_checks=True).SerializeToString()
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name

    def run(t):
        return sess.run(None, {name: t.numpy()})

    diff = float(np.abs(run(x)[0] - net(x).numpy()).max())
    return run, diff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--skip-first-call", action="store_true")
    parser.add_argument("--tvm-tune", default="auto", choices=["auto", "always"])
    parser.add_argument(
        "--backend", default="all", choices=["all", "paddle", "onnxrt", "tvm", "tensorrt"]
    )
    parser.add_argument("--tvm-trials", type=int, default=16, help="MetaSchedule trials per kernel")
    args, _ = parser.parse_known_args()  # ./dev bench hands every script the same args
    if args.backend == "tensorrt":
        tensorrt_main(args)
        return

    paddle.seed(0)
    net = resnet18()
    net.eval()
    x = paddle.rand([1, 3, args.size, args.size])
    with paddle.no_grad():
        expected = net(x).numpy()

    rows = [("eager Paddle", "-", net), ("paddle.jit.to_static", "-", None)]
    static = paddle.jit.to_static(resnet18(), full_graph=True)
    static.set_state_dict(net.state_dict())
    static.eval()
    rows[1] = ("paddle.jit.to_static", "-", static)
    installed = jit_core.backends()
    only = None if args.backend == "all" else args.backend
    for backend in ("paddle", "onnxrt"):
        # onnxrt is the peer of every other backend
        peers = (None, backend, "tvm") if backend == "onnxrt" else (None, backend)
        # (onnxrt is n/a on 3.13: paddle2onnx 2.x has no wheels there)
        if backend not in installed or installed[backend].unavailable or only not in peers:
            continue
        for label, options in VARIANTS:
            if only == "tvm" and not options.get("freeze"):
                continue
            fast = jit_core.optimize(net, backend=backend, **options)
            with paddle.no_grad():
                report = jit_core.explain(fast, x)
                diff = float(np.abs(fast(x).numpy() - expected).max())
            assert report.graph_count == 1 and report.break_count == 0, str(report)
            rows.append((f"jit_core {backend}, {label}", str(report.op_count), fast, diff))
        if backend == "onnxrt":
            run, diff = raw_ort_session(net, x)
            rows.append(("raw onnxruntime session (frozen model)", "-", run, diff))

    tvm_notes = []
    if _tvm_runs(installed) and only in (None, "tvm"):
        rows.extend(tvm_rows(net, x, expected, args.tvm_trials, args.tvm_tune, tvm_notes))

    times = median_ms([r[2] for r in rows], x, args.rounds)
    eager = times[0]
    print(f"ResNet18, batch 1, {args.size}x{args.size}, CPU, no_grad, {args.rounds} rounds")
    print(f"Paddle {paddle.__version__}, jit_core {jit_core.__version__}")
    head = f"{'':40} {'graph ops':>9} {'median ms':>10} {'vs eager':>9} {'max |diff|':>11}"
    print(head)
    print("-" * len(head))
    for row, ms in zip(rows, times):
        diff = f"{row[3]:.1e}" if len(row) > 3 else "-"
        print(f"{row[0]:40} {row[1]:>9} {ms:10.1f} {eager / ms:8.2f}x {diff:>11}")
    for note in tvm_notes:
        print(note)
    if "tensorrt" in installed and only is None:
        why = installed["tensorrt"].unavailable
        print(
            "tensorrt: GPU only, see bench/resnet.py --backend tensorrt"
            + (f" (n/a here: {why})" if why else "")
        )

    onnx_backends = [
        b
        for b in ("onnxrt", "tvm")
        if b in installed and not installed[b].unavailable and only in (None, b)
    ]
    if args.skip_first_call or not onnx_backends:
        return
    print()
    print("First call in a fresh process, freeze=True (capture + compile + run):")
    print(f"{'':12} {'cold s':>8} {'warm s':>8} {'warm/cold':>10} {'records s':>10}")
    # the baseline the ONNX backends' first call is held to: the paddle backend's (it
    # keeps nothing in the compile cache, so cold and warm differ by noise alone)
    with tempfile.TemporaryDirectory(prefix="jit_bench_cache_") as cache:
        cold = first_call_s("paddle", args.size, cache)
        warm = first_call_s("paddle", args.size, cache)
    print(f"{'paddle':12} {cold:8.2f} {warm:8.2f} {warm / cold:9.0%} {'-':>10}")
    for backend in onnx_backends:
        if backend == "tvm":
            cold, warm, records = tvm_first_calls(args.size)
        else:
            with tempfile.TemporaryDirectory(prefix="jit_bench_cache_") as cache:
                cold = first_call_s(backend, args.size, cache)
                warm = first_call_s(backend, args.size, cache)
            records = None
        shown = "-" if records is None else f"{records:.2f}"
        print(f"{backend:12} {cold:8.2f} {warm:8.2f} {warm / cold:9.0%} {shown:>10}")


def tvm_first_calls(size: int):
    """cold: an empty cache, sampled schedules (export + compile); records: an empty
    cache holding only this machine's tuning database (export + apply the records +
    compile, no tuning); warm: that cache again (the tuned library is loaded)."""
    from jit_backend_tvm import database_dir, make_target

    with tempfile.TemporaryDirectory(prefix="jit_bench_cache_") as cache:
        cold = first_call_s("tvm", size, cache, tune="off")
    with tempfile.TemporaryDirectory(prefix="jit_bench_cache_") as cache:
        folder = database_dir(make_target())
        shutil.copytree(folder, os.path.join(cache, os.path.relpath(folder, _cache_root())))
        records = first_call_s("tvm", size, cache, tune="auto")
        warm = first_call_s("tvm", size, cache, tune="auto")
    return cold, warm, records


def _cache_root() -> str:
    from jit_core.cache.disk import cache_root

    return cache_root()


def _tvm_runs(installed) -> bool:
    return "tvm" in installed and not installed["tvm"].unavailable


def tvm_rows(net, x, expected, trials: int, tune: str, notes: list) -> list:
    """The build without tuning (sampled schedules) and the tuned build (tuning what the
    database lacks first)."""
    from jit_backend_tvm import stats

    rows = []
    with paddle.no_grad():
        fast = jit_core.optimize(net, backend="tvm", freeze=True, tune="off")
        diff = float(np.abs(fast(x).numpy() - expected).max())
        rows.append(("jit_core tvm, frozen, sampled (no tuning)", "-", fast, diff))

        before, reused, hits = stats["tuned_tasks"], stats["reused_tasks"], stats["cache_hits"]
        fast = jit_core.optimize(net, backend="tvm", freeze=True, tune=tune, trials_per_task=trials)
        start = time.perf_counter()
        diff = float(np.abs(fast(x).numpy() - expected).max())
        spent = time.perf_counter() - start
        tuned = stats["tuned_tasks"] - before
        reused = stats["reused_tasks"] - reused
        cached = stats["cache_hits"] > hits
        rows.append(("jit_core tvm, frozen, tuned", "-", fast, diff))
    if cached:
        notes.append(
            f"tvm tuned build (tune={tune!r}): the library an earlier run built from the tuning "
            f"database came from the compile cache (first call {spent:.1f} s); clear "
            "~/.cache/jit_core/tvm (keeping its tuning/ folder) to build it from the records"
        )
    else:
        notes.append(
            f"tvm tuned build (tune={tune!r}): {trials} MetaSchedule trials per kernel; {tuned} "
            f"kernels tuned in this run (first call {spent:.0f} s, tuning included), {reused} "
            "kernels' records came from the on-disk database of earlier runs"
        )
    return rows


def tensorrt_main(args) -> None:
    """ResNet18 on the GPU: eager Paddle and to_static against TensorRT engines."""
    installed = jit_core.backends()
    if "tensorrt" not in installed:
        sys.exit(
            "bench/resnet.py --backend tensorrt: jit-backend-tensorrt is not installed: "
            "pip install 'jit-backend-tensorrt[trt]'"
        )
    why = installed["tensorrt"].unavailable
    if why:
        sys.exit(f"bench/resnet.py --backend tensorrt: the backend cannot run here: {why}")
    paddle.device.set_device("gpu")
    paddle.seed(0)
    net = resnet18()
    net.eval()
    x = paddle.rand([1, 3, args.size, args.size])
    with paddle.no_grad():
        expected = net(x).numpy()
    static = paddle.jit.to_static(resnet18(), full_graph=True)
    static.set_state_dict(net.state_dict())
    static.eval()
    rows = [("eager Paddle (GPU)", net, None), ("paddle.jit.to_static (GPU)", static, None)]
    variants = (
        ("live parameters", {}),
        ("frozen", dict(freeze=True)),
        ("frozen, fp16", dict(freeze=True, fp16=True)),
    )
    for label, options in variants:
        fast = jit_core.optimize(net, backend="tensorrt", **options)
        start = time.perf_counter()
        with paddle.no_grad():
            diff = float(np.abs(fast(x).numpy() - expected).max())
        build = time.perf_counter() - start
        rows.append((f"jit_core tensorrt, {label} (build {build:.0f} s)", fast, diff))

    def synchronized(fn):
        def run(t):
            out = fn(t)
            paddle.device.synchronize()
            return out

        return run

    times = median_ms([synchronized(r[1]) for r in rows], x, args.rounds)
    import tensorrt

    print(f"ResNet18, batch 1, {args.size}x{args.size}, GPU, no_grad, {args.rounds} rounds")
    print(
        f"Paddle {paddle.__version__}, TensorRT {tensorrt.__version__}, "
        f"{paddle.device.cuda.get_device_name()}, jit_core {jit_core.__version__}"
    )
    head = f"{'':48} {'median ms':>10} {'vs eager':>9} {'max |diff|':>11}"
    print(head)
    print("-" * len(head))
    for (name, _, diff), ms in zip(rows, times):
        shown = "-" if diff is None else f"{diff:.1e}"
        print(f"{name:48} {ms:10.2f} {times[0] / ms:8.2f}x {shown:>11}")
    if args.skip_first_call:
        return
    print()
    print("First call in a fresh process, freeze=True (capture + build + run):")
    with tempfile.TemporaryDirectory(prefix="jit_bench_cache_") as cache:
        cold = first_call_s("tensorrt", args.size, cache)
        warm = first_call_s("tensorrt", args.size, cache)
    print(f"tensorrt     cold {cold:8.2f} s   warm {warm:8.2f} s   warm/cold {warm / cold:.0%}")


if __name__ == "__main__":
    main()
