"""Dynamic shapes, in one run: the cost of a call at a size never seen before, and the
steady state over mixed sizes, for eager Paddle, Paddle's SOT
(`paddle.jit.to_static(net, full_graph=False)`) and jit_core's `optimize(net)` with
automatic dynamic shapes, against a static compile (`dynamic=False`) of one size.

    python bench/dynamic.py [--repeat N] [--backends paddle,onnxrt]

Per model and backend:
- "new size": milliseconds of the first call at each of several sizes never seen before
  (median), after the model was called at two sizes (automatic dynamic shapes made the
  changing dimensions dynamic on the second); "captures" counts every capture made;
- "mixed": microseconds per call over a cycle of sizes already seen;
- "one size": microseconds per call at one of those sizes of the dynamic compile and of
  a `dynamic=False` compile of that size, measured together: the dynamic one should be
  within 1.1x of the static one. On onnxrt a size called often gets a session of fixed
  shapes (the `specialize` option); the dynamic session alone (`specialize=0`) is
  measured with them, as "one session".
Runners are measured interleaved, so that drift of the machine hits them alike.
`eval()`, under `paddle.no_grad()`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import paddle  # noqa: E402
from _timing import per_call_us, sot_of  # noqa: E402

import jit_core  # noqa: E402
from conformance.test_dynamic_shapes import MLP, Encoder  # noqa: E402


def _mlp_inputs(b: int, _s: int):
    return (paddle.randn([b, 8]),)


def _encoder_inputs(b: int, s: int):
    return (paddle.randint(0, 50, [b, s]), paddle.ones([b, s], "int64"))


#: (name, make, make inputs for (batch, length), warm-up sizes, new sizes, mixed sizes)
MODELS = [
    (
        "MLP, batch",
        MLP,
        _mlp_inputs,
        [(4, 0), (6, 0)],
        [(b, 0) for b in (9, 13, 21, 33, 47)],
        [(b, 0) for b in (4, 6, 9, 13)],
    ),
    (
        "encoder, batch x length",
        Encoder,
        _encoder_inputs,
        [(2, 5), (3, 7)],
        [(4, 9), (5, 11), (6, 6), (7, 13), (3, 15)],
        [(2, 5), (3, 7), (4, 9), (5, 11)],
    ),
]


def _ms(fn, x) -> float:
    start = time.perf_counter()
    fn(*x)
    return (time.perf_counter() - start) * 1e3


def _cycle(fn, inputs):
    def run():
        for x in inputs:
            fn(*x)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--backends", default="paddle,onnxrt")
    args = parser.parse_args()
    installed = jit_core.backends()
    # installed and runnable here (onnxrt is n/a on 3.13: paddle2onnx 2.x has no wheels)
    backends = [
        b for b in args.backends.split(",") if b in installed and not installed[b].unavailable
    ]
    py = "{}.{}".format(*sys.version_info[:2])
    print(f"Python {py}, paddle {paddle.__version__}, eval(), no_grad")
    print()
    print(
        "| model | runs on | new size (ms) | captures | mixed sizes (us/call) "
        "| one size: dynamic / static compile (us/call) |"
    )
    print("|---|---|---|---|---|---|")
    with paddle.no_grad():
        for name, make, inputs, warm, new, mixed in MODELS:
            paddle.seed(0)
            net = make()
            net.eval()
            runners = [("eager", net), ("Paddle SOT", sot_of(net))]
            runners += [(f"jit_core {b}", jit_core.optimize(net, backend=b)) for b in backends]
            new_ms = {}
            for label, fn in runners:
                for size in warm:
                    fn(*inputs(*size))
                new_ms[label] = statistics.median(_ms(fn, inputs(*size)) for size in new)
            mixed_inputs = [inputs(*s) for s in mixed]
            # every runner in one interleaved measurement: drift hits them alike
            cycles = [_cycle(fn, mixed_inputs) for _, fn in runners]
            mixed_us = per_call_us(cycles, (), args.repeat, rounds=7, warmup=3)
            one = inputs(*mixed[-1])
            for (label, fn), cycle_us in zip(runners, mixed_us):
                captures = getattr(fn, "jit_stats", None)
                compare = "-"
                if captures is not None:
                    backend = label.split()[1]
                    static = jit_core.optimize(net, backend=backend, dynamic=False)
                    compared = [fn, static]
                    if backend == "onnxrt":
                        alone = jit_core.optimize(net, backend=backend, specialize=0)
                        for size in mixed:
                            alone(*inputs(*size))
                        compared.append(alone)
                    us = per_call_us(compared, one, args.repeat * 4, rounds=7)
                    compare = f"{us[0]:.0f} / {us[1]:.0f} ({us[0] / us[1]:.2f}x)"
                    if len(us) > 2:
                        compare += f"; one session {us[2]:.0f} ({us[2] / us[1]:.2f}x)"
                print(
                    f"| {name} | {label} | {new_ms[label]:.1f} | "
                    f"{captures.captures if captures is not None else '-'} | "
                    f"{cycle_us / len(mixed_inputs):.0f} | {compare} |"
                )


if __name__ == "__main__":
    main()
