"""`while` loops whose body breaks the graph, per call: eager Paddle and jit_core.

    python bench/while_loops.py [--repeat N] [--backend paddle] [--cpu] [--max-len N]

Run it once with each tree on PYTHONPATH to compare two versions of jit_core (the
models are defined here, not imported from the conformance suite, so that any version
runs them): a loop whose test is a tensor, a counter loop whose body branches on a
tensor (with a few tiny ops, and with a layer's work), a greedy decode loop with a KV
cache until an end token. Small tensors: what is measured is mostly the cost around the
ops (guards, graph calls, the loop driver).
Every call after the first takes the cache. `eval()`, under `paddle.no_grad()`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import paddle  # noqa: E402
from _timing import per_call_us  # noqa: E402

import jit_core  # noqa: E402
from conformance.test_loops import WhileDecoder as Decoder  # noqa: E402


def tensor_test(x):
    """About 20 iterations, decided by a tensor."""
    x = x + 1
    while x.mean() < 30:
        x = x * 1.2 + 0.1
    return x - 1


def counter(x, n: int = 20):
    """A Python counter in the test, a branch on a tensor in the body."""
    x = x * 3
    i = 0
    while i < n:
        x = x * 1.01
        if x.mean() > 2:
            x = x - 0.01
        i += 1
    return x + 1


class CounterLayers(paddle.nn.Layer):
    """A counter loop whose body does a layer's work (Linear, gelu, LayerNorm, Linear)."""

    def __init__(self, width: int = 64):
        super().__init__()
        self.a, self.b = paddle.nn.Linear(width, width), paddle.nn.Linear(width, width)
        self.norm = paddle.nn.LayerNorm(width)

    def forward(self, x, n: int = 10):
        i = 0
        while i < n:
            h = self.norm(paddle.nn.functional.gelu(self.a(x)))
            x = x + self.b(h) * 0.1
            if x.mean() > 100:
                x = x * 0.5
            i += 1
        return x


def _cases(max_len: int):
    """(name, the function, its inputs)."""
    paddle.seed(0)
    net = Decoder()
    net.eval()
    layers = CounterLayers()
    layers.eval()
    return [
        ("tensor test, ~20 iterations", tensor_test, (paddle.rand([3]),)),
        ("counter, 20 iterations", counter, (paddle.rand([3]),)),
        ("counter, 10 iterations of layers", layers, (paddle.rand([8, 64]),)),
        (
            f"decode, KV cache, {max_len - 2} steps",
            net,
            (paddle.to_tensor([[3, 5], [7, 1]], dtype="int64"), max_len, -1),
        ),
    ]


def _same(got, expected) -> bool:
    return bool(paddle.allclose(got.astype("float64"), expected.astype("float64"), 1e-5, 1e-5))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--backend", default="paddle")
    parser.add_argument(
        "--cpu", action="store_true", help="CPU time of this process instead of wall time"
    )
    parser.add_argument("--max-len", type=int, default=10, help="of the decode loop")
    args = parser.parse_args()
    clock = time.process_time if args.cpu else time.perf_counter
    py = "{}.{}".format(*sys.version_info[:2])
    where = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(jit_core.__file__))))
    print(f"Python {py}, paddle {paddle.__version__}, jit_core from {where}")
    print("| loop | graphs / breaks | eager | jit_core |")
    print("|---|---|---|---|")
    with paddle.no_grad():
        for name, fn, x in _cases(args.max_len):
            fast = jit_core.optimize(fn, backend=args.backend)
            with contextlib.redirect_stdout(io.StringIO()):
                expected = fn(*x)
                if not _same(fast(*x), expected) or not _same(fast(*x), expected):
                    raise SystemExit(f"{name}: a result differs from eager Paddle")
                report = jit_core.explain(fn, *x)
            eager_us, jit_us = per_call_us(
                [fn, fast], x, args.repeat, rounds=9, warmup=10, clock=clock
            )
            print(
                f"| {name} | {report.graph_count} / {report.break_count} | {eager_us:.0f} us "
                f"| {jit_us:.0f} us ({jit_us / eager_us:.2f}x) |"
            )


if __name__ == "__main__":
    main()
