"""The first call of a large graph: eager Paddle, jit_core and SOT, in one process.

    python bench/first_call.py [SAMPLE_DIR] [--backend paddle] [--no-sot] [--grad]

SAMPLE_DIR is a GraphNet-format sample (a folder with ``model.py``,
``weight_meta.py``, ``input_meta.py``), for instance one of GraphNet's PaddleX samples;
without one, ``conformance/graphs/tiny_vision`` (a small convolution net).
Its module is built once and copied (``jit_eval.runner.ModuleCopies``), so that every side
runs the same weights on the same inputs, under ``paddle.no_grad()`` unless ``--grad``.
Rows: eager Paddle's first and second call, jit_core's first call (capture, passes, the
backend's build and, where the capture's results are not served, a first run of the graph)
and second call, and the same two calls under ``paddle.jit.to_static(full_graph=False)``
(SOT). Then jit_core's profile of its first call: the time of each compile phase.

The figure to read is jit_core's first call against eager's (the target: at most 1.3x);
a large graph's eager calls vary by 10-20% from call to call on a loaded machine, so both
eager calls are shown.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import paddle  # noqa: E402

import jit_core  # noqa: E402
from jit_core.graphnet.samples import load_sample  # noqa: E402
from jit_eval.runner import ModuleCopies  # noqa: E402


def _timed(fn, kwargs) -> float:
    started = time.perf_counter()
    fn(**kwargs)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "sample",
        metavar="SAMPLE_DIR",
        nargs="?",
        default=os.path.join(ROOT, "conformance", "graphs", "tiny_vision"),
    )
    parser.add_argument("--backend", default="paddle")
    parser.add_argument("--no-sot", action="store_true", help="leave SOT's rows out")
    parser.add_argument("--grad", action="store_true", help="call with gradients on")
    args = parser.parse_args()

    sample = load_sample(args.sample)
    copies = ModuleCopies(sample, 0)
    inputs = sample.make_inputs(0)
    print(f"{sample.name}: first calls, {'gradients on' if args.grad else 'paddle.no_grad()'}")
    print(f"{'':40} {'ms':>10} {'x eager call 1':>15}", flush=True)
    eager_first = None

    def row(name: str, fn) -> None:
        nonlocal eager_first
        seconds = _timed(fn, inputs)
        eager_first = eager_first or seconds
        print(f"{name:40} {seconds * 1e3:10.1f} {seconds / eager_first:15.2f}", flush=True)

    with paddle.set_grad_enabled(args.grad):
        eager = copies.copy()
        row("eager, call 1", eager)
        row("eager, call 2", eager)
        fast = jit_core.optimize(copies.copy(), backend=args.backend)
        with jit_core.profile() as profile:
            row(f"jit_core ({args.backend}), first call", fast)
        row(f"jit_core ({args.backend}), call 2", fast)
        if not args.no_sot:
            sot = paddle.jit.to_static(copies.copy(), full_graph=False)
            try:
                row("SOT, first call", sot)
                row("SOT, call 2", sot)
            except Exception as e:  # noqa: BLE001 - SOT's own failure is a row of the table
                print(f"{'SOT':40} failed: {type(e).__name__}: {str(e).splitlines()[0]}")
    print()
    print(profile)


if __name__ == "__main__":
    main()
