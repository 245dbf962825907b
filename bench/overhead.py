"""Per-call overhead on a cache hit, and first-call capture time, in one run.

    python bench/overhead.py [--repeat N]

Rows: eager Paddle, Paddle's SOT (`paddle.jit.to_static(f, full_graph=False)`) and
jit_core's `optimize(f)` for f(x, y) = x + y * 2 on [8, 16] tensors, and for a layer;
then how the cost of a hit grows with the number of inputs (1, 8, 64) and ops (1, 50,
500), against the target of 2 us plus 0.1 us per input above eager; then the first
call of ResNet18 (capture + build + run) for SOT and jit_core.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import paddle  # noqa: E402
from _timing import per_call_us  # noqa: E402

import jit_core  # noqa: E402
from jit_core.runtime import native  # noqa: E402


def f(x, y):
    return x + y * 2


def chain_of(inputs: int, ops: int):
    """``f(x0, ..., x{inputs-1})``: the inputs summed, then elementwise ops with Python
    scalars up to ``ops`` in all, on [8, 16] tensors (each op costs eager ~1.3 us)."""
    names = [f"x{i}" for i in range(inputs)]
    lines = [f"def f({', '.join(names)}):", "    y = x0"]
    lines += [f"    y = y + {n}" for n in names[1:]]
    lines += [f"    y = y {'*' if j % 2 else '+'} 1.5" for j in range(ops - (inputs - 1))]
    lines.append("    return y")
    scope: dict = {}
    exec("\n".join(lines), scope)
    return scope["f"]


#: (inputs, ops) of the rows of the scaling table
SCALING = [(1, 1), (8, 8), (64, 64), (1, 50), (1, 500)]


def target_us(inputs: int) -> float:
    """The target for the cost of a cache hit above eager."""
    return 2.0 + 0.1 * inputs


def scaling_table(repeat: int) -> None:
    print()
    print("cache-hit cost by inputs and ops ([8, 16] float32; above eager, in us)")
    print(
        f"{'inputs':>6s} {'ops':>5s} {'eager':>9s} {'SOT':>9s} {'jit_core':>9s}"
        f" {'SOT above':>10s} {'jit above':>10s} {'target':>7s}"
    )
    for inputs, ops in SCALING:
        f = chain_of(inputs, ops)
        xs = tuple(paddle.rand([8, 16]) for _ in range(inputs))
        sot = paddle.jit.to_static(f, full_graph=False)
        jit = jit_core.optimize(f)
        n = max(20, repeat // ops)
        eager, s, j = per_call_us([f, sot, jit], xs, n, rounds=21, warmup=50)
        print(
            f"{inputs:6d} {ops:5d} {eager:9.2f} {s:9.2f} {j:9.2f}"
            f" {s - eager:10.2f} {j - eager:10.2f} {target_us(inputs):7.1f}"
        )


def first_call_ms(make, x) -> float:
    fn = make()
    start = time.perf_counter()
    fn(x)
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--skip-resnet", action="store_true")
    args = parser.parse_args()

    x, y = paddle.rand([8, 16]), paddle.rand([8, 16])
    sot = paddle.jit.to_static(f, full_graph=False)
    jit = jit_core.optimize(f)
    names = ["eager", "paddle.jit.to_static (SOT)", "jit_core.optimize"]
    rows = list(zip(names, per_call_us([f, sot, jit], (x, y), args.repeat, rounds=15, warmup=200)))
    eager = rows[0][1]
    print(f"python {sys.version.split()[0]}, paddle {paddle.__version__}")
    print(f"compiled tensor check of guards: {native.status()}")
    print("cache-hit cost per call, f(x, y) = x + y * 2, [8, 16] float32")
    print(f"{'':30s} {'us/call':>10s} {'above eager':>12s}")
    for name, us in rows:
        print(f"{name:30s} {us:10.2f} {us - eager:12.2f}")

    # the same for a layer: OptimizedLayer has to check what Layer.__call__ checks
    layer = paddle.nn.Linear(16, 16)
    layer.eval()
    xl = paddle.rand([4, 16])
    sot_layer = paddle.jit.to_static(paddle.nn.Linear(16, 16), full_graph=False)
    sot_layer.eval()
    rows = list(
        zip(
            names,
            per_call_us(
                [layer, sot_layer, jit_core.optimize(layer)],
                (xl,),
                args.repeat,
                rounds=15,
                warmup=200,
            ),
        )
    )
    eager = rows[0][1]
    print()
    print("cache-hit cost per call, paddle.nn.Linear(16, 16) on [4, 16] float32")
    print(f"{'':30s} {'us/call':>10s} {'above eager':>12s}")
    for name, us in rows:
        print(f"{name:30s} {us:10.2f} {us - eager:12.2f}")

    scaling_table(args.repeat)

    if args.skip_resnet:
        return
    from paddle.vision.models import resnet18

    paddle.seed(0)
    xr = paddle.rand([1, 3, 224, 224])

    def make_net():
        net = resnet18(pretrained=False)
        net.eval()
        return net

    rows = [
        ("eager (first call)", first_call_ms(make_net, xr)),
        (
            "paddle.jit.to_static (SOT)",
            first_call_ms(lambda: paddle.jit.to_static(make_net(), full_graph=False), xr),
        ),
        ("jit_core.optimize", first_call_ms(lambda: jit_core.optimize(make_net()), xr)),
    ]
    print()
    print("first call of ResNet18, batch 1, 3x224x224 (capture + build + run)")
    print(f"{'':30s} {'ms':>10s}")
    for name, ms in rows:
        print(f"{name:30s} {ms:10.1f}")


if __name__ == "__main__":
    main()
