"""ResNet18 inference, batch 1, on CPU: the effect of the graph passes, in one run.

    python bench/resnet.py [--rounds N] [--size 224]

Rows: eager Paddle, ``paddle.jit.to_static``, and ``jit_core.optimize`` on every installed
backend that this script knows (``paddle``; ``onnxrt`` when jit-backend-onnxrt is
installed) with passes off, the default passes, and the default passes with
``freeze=True`` (BatchNorm and constant folding). Everything runs under
``paddle.no_grad()`` in ``eval()`` mode, the setting the inference passes need. Columns:
operations in the captured graph, median latency, and speed-up against eager. The rows'
runs are interleaved so that drift of the machine hits all of them alike.
"""

from __future__ import annotations

import argparse
import statistics
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
                start = time.perf_counter()
                for _ in range(inner):
                    fn(x)
                samples[i].append((time.perf_counter() - start) / inner * 1e3)
    return [statistics.median(s) for s in samples]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--size", type=int, default=224)
    args, _ = parser.parse_known_args()  # ./dev bench hands every script the same args

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
    for backend in ("paddle", "onnxrt"):
        if backend not in installed:
            continue
        for label, options in VARIANTS:
            fast = jit_core.optimize(net, backend=backend, **options)
            with paddle.no_grad():
                report = jit_core.explain(fast, x)
                diff = float(np.abs(fast(x).numpy() - expected).max())
            assert report.graph_count == 1 and report.break_count == 0, str(report)
            rows.append((f"jit_core {backend}, {label}", str(report.op_count), fast, diff))

    times = median_ms([r[2] for r in rows], x, args.rounds)
    eager = times[0]
    print(f"ResNet18, batch 1, {args.size}x{args.size}, CPU, no_grad, {args.rounds} rounds")
    print(f"Paddle {paddle.__version__}, jit_core {jit_core.__version__}")
    head = f"{'':36} {'graph ops':>9} {'median ms':>10} {'vs eager':>9} {'max |diff|':>11}"
    print(head)
    print("-" * len(head))
    for row, ms in zip(rows, times):
        diff = f"{row[3]:.1e}" if len(row) > 3 else "-"
        print(f"{row[0]:36} {row[1]:>9} {ms:10.1f} {eager / ms:8.2f}x {diff:>11}")


if __name__ == "__main__":
    main()
