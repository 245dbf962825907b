"""The real-program zoo per call, in one run: eager Paddle, Paddle's SOT
(`paddle.jit.to_static(net, full_graph=False)`) and jit_core's `optimize(net)` on the
paddle and onnxrt backends.

    python bench/real_models.py [--repeat N] [--backends paddle,onnxrt]

The models are the conformance suite's (conformance/test_real_programs.py,
conformance/test_loops.py, conformance/test_contexts.py): recurrent classifiers (one
graph each now), a masked attention encoder, a UNet, a branch inside a loop (a loop body
function), a decode loop with a KV cache, a teacher branch under `no_grad`, twelve blocks
of one class whose forward breaks and six Conv2D/BatchNorm2D blocks that do
(conformance/test_shared_layers.py: the blocks share their captures; a second table
shows their first call bound to each instance and shared).
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
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import paddle  # noqa: E402
from _timing import per_call_us, sot_of  # noqa: E402

import jit_core  # noqa: E402
from conformance.test_contexts import Teacher  # noqa: E402
from conformance.test_loops import BranchInLoop, TinyDecoder  # noqa: E402
from conformance.test_real_programs import MaskedEncoder, RnnClassifier, TinyUNet  # noqa: E402
from conformance.test_shared_layers import Block, ConvBlock, Stack  # noqa: E402


def _models():
    """(name, make the layer, make its inputs)."""
    return [
        (
            "LSTM classifier",
            lambda: RnnClassifier("lstm"),
            lambda: (paddle.randint(0, 50, [4, 12]),),
        ),
        ("GRU classifier", lambda: RnnClassifier("gru"), lambda: (paddle.randint(0, 50, [4, 12]),)),
        (
            "masked encoder",
            MaskedEncoder,
            lambda: (paddle.rand([4, 12, 16]), paddle.ones([4, 12], dtype="float32")),
        ),
        ("UNet", TinyUNet, lambda: (paddle.rand([1, 1, 32, 32]),)),
        ("branch in a loop", BranchInLoop, lambda: (paddle.rand([8, 4]),)),
        (
            "decode loop, KV cache",
            TinyDecoder,
            lambda: (paddle.to_tensor([[3, 5], [7, 1]], dtype="int64"),),
        ),
        ("no_grad teacher", Teacher, lambda: (paddle.rand([8, 4]),)),
        ("twelve blocks, each breaking", _twelve_blocks, lambda: (paddle.rand([4, 8]),)),
        ("six conv blocks, each breaking", _conv_blocks, lambda: (paddle.rand([2, 4, 16, 16]),)),
    ]


def _twelve_blocks():
    return Stack([Block() for _ in range(12)])


def _conv_blocks():
    """Conv2D, BatchNorm2D and a branch on a tensor, six times."""
    return Stack([ConvBlock() for _ in range(6)])


def _first_calls(backends) -> None:
    """What sharing captures between instances saves: the first call and the cache
    entries of the blocks' forward, bound to each instance and shared."""
    print()
    print("blocks of one class, each forward breaking: the first call (capture and build)")
    print("and the cache entries of the block's forward")
    print()
    print("| model | runs on | first call | forward entries |")
    print("|---|---|---|---|")
    cases = [
        ("twelve blocks", _twelve_blocks, paddle.rand([4, 8]), "Block.forward"),
        ("six conv blocks", _conv_blocks, paddle.rand([2, 4, 16, 16]), "ConvBlock.forward"),
    ]
    for name, make, x, forward in cases:
        for b in backends:
            for share in (False, True):
                paddle.seed(0)
                net = make()
                net.eval()
                fast = jit_core.optimize(net, backend=b, share_layers=share)
                start = time.perf_counter()
                fast(x)
                ms = (time.perf_counter() - start) * 1e3
                n = sum(c for k, c in fast.jit_stats.entries.items() if k.startswith(forward))
                print(f"| {name} | jit_core {b}, share_layers={share} | {ms:.0f} ms | {n} |")


def _same(got, expected) -> bool:
    if isinstance(expected, (tuple, list)):
        return all(_same(g, e) for g, e in zip(got, expected))
    if isinstance(expected, paddle.Tensor):
        return bool(paddle.allclose(got.astype("float64"), expected.astype("float64"), 1e-4, 1e-4))
    return got == expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--backends", default="paddle,onnxrt")
    args = parser.parse_args()
    installed = jit_core.backends()
    # installed and runnable here (onnxrt is n/a on 3.13: paddle2onnx 2.x has no wheels)
    backends = [
        b for b in args.backends.split(",") if b in installed and not installed[b].unavailable
    ]
    py = "{}.{}".format(*sys.version_info[:2])
    print(f"Python {py}, paddle {paddle.__version__}, eval(), no_grad; per call, after the first")
    print()
    head = " | ".join(f"jit_core {b}" for b in backends)
    print(f"| model | graphs / breaks | eager | Paddle SOT | {head} |")
    print("|---|---|---|---|" + "---|" * len(backends))
    with paddle.no_grad():
        for name, make, inputs in _models():
            paddle.seed(0)
            net = make()
            net.eval()
            x = inputs()
            sot = sot_of(net)
            fast = [jit_core.optimize(net, backend=b) for b in backends]
            with contextlib.redirect_stdout(io.StringIO()):
                expected = net(*x)
                for fn in [sot, *fast]:
                    if not _same(fn(*x), expected):
                        raise SystemExit(f"{name}: a result differs from eager Paddle")
                report = jit_core.explain(net, *x)
            times = per_call_us([net, sot, *fast], x, args.repeat, rounds=7, warmup=10, quiet=True)
            eager_us = times[0]
            cells = " | ".join(f"{t:.0f} us ({t / eager_us:.2f}x)" for t in times[2:])
            print(
                f"| {name} | {report.graph_count} / {report.break_count} | {eager_us:.0f} us "
                f"| {times[1]:.0f} us | {cells} |"
            )
        _first_calls(backends)


if __name__ == "__main__":
    main()
