"""The demo: a small function, ResNet18 and a training step through jit_core on the
default backend.

Run it with `./dev demo` (`./dev demo -- --backend onnxrt [--freeze]` for another
installed backend). It prints what was captured (graph and break counts, the generated
graph code) and the time per call against eager Paddle. Inference-only backends (onnxrt)
run under `paddle.no_grad()`; `--freeze` lets the inference passes fold BatchNorm and
bakes the parameters into what the backend builds.
"""

from __future__ import annotations

import argparse
import contextlib
import time
import warnings

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import paddle  # noqa: E402
from paddle.vision.models import resnet18  # noqa: E402

import jit_core  # noqa: E402


def per_call(fn, *args, repeat: int) -> float:
    fn(*args)
    start = time.perf_counter()
    for _ in range(repeat):
        fn(*args)
    return (time.perf_counter() - start) / repeat


def section(title: str) -> None:
    print()
    print("=" * 72)
    print(title)
    print("=" * 72)


def small_function(backend: str, freeze: bool) -> None:
    def f(x, y):
        z = x + y * 2
        return paddle.nn.functional.relu(z).mean(axis=-1)

    x, y = paddle.rand([8, 16]), paddle.rand([8, 16])
    fast = jit_core.optimize(f, backend=backend, freeze=freeze)
    np.testing.assert_allclose(fast(x, y).numpy(), f(x, y).numpy(), rtol=1e-6)
    report = jit_core.explain(fast, x, y)
    section("f(x, y) = relu(x + y * 2).mean(-1)")
    print(f"graphs: {report.graph_count}   breaks: {report.break_count}   ops: {report.op_count}")
    print("generated graph code:")
    print(report.graph_code[0])
    print("guard:")
    print(report.guards[0])
    eager = per_call(f, x, y, repeat=2000)
    jit = per_call(fast, x, y, repeat=2000)
    print(f"per call: eager {eager * 1e6:.1f} us   jit_core {jit * 1e6:.1f} us")


class Gate(paddle.nn.Layer):
    """A layer whose forward branches on a tensor's value: the graph breaks there."""

    def __init__(self):
        super().__init__()
        self.stem = paddle.nn.Linear(16, 16)
        self.up = paddle.nn.Linear(16, 16)
        self.down = paddle.nn.Linear(16, 16)

    def forward(self, x):
        h = self.stem(x)
        if h.mean() > 0:
            return paddle.nn.functional.relu(self.up(h))
        return paddle.tanh(self.down(h))


def graph_break(backend: str, freeze: bool) -> None:
    paddle.seed(0)
    net = Gate()
    net.eval()
    fast = jit_core.optimize(net, backend=backend, freeze=freeze)
    section("a branch on a tensor's value: two graphs joined by Python")
    for sign in (1.0, -1.0):
        x = paddle.full([4, 16], sign)
        np.testing.assert_allclose(fast(x).numpy(), net(x).numpy(), rtol=1e-5, atol=1e-5)
        report = jit_core.explain(fast, x)
        print(f"input sign {sign:+.0f}: graphs {report.graph_count}, breaks {report.break_count}")
        for brk in report.breaks:
            print(f"  {brk}")
    print(f"captures after both paths: {fast.jit_stats.captures} (each path once, then hits)")
    # what ran how often and for how long, graph by graph (also: JIT_PROFILE=path)
    with jit_core.profile() as prof:
        for i in range(20):
            fast(paddle.full([4, 16], 1.0 if i % 4 else -1.0))
    (forward,) = [g for g in prof.to_json()["graphs"] if g["frame"] == "forward"]
    assert forward["calls"] == 20, forward
    print("jit_core.profile() of 20 more calls:")
    print(str(prof).rstrip())


def resnet(backend: str, freeze: bool) -> None:
    paddle.seed(0)
    net = resnet18(pretrained=False)
    net.eval()
    x = paddle.rand([1, 3, 224, 224])
    fast = jit_core.optimize(net, backend=backend, freeze=freeze)
    start = time.perf_counter()
    y = fast(x)
    first = time.perf_counter() - start
    expected = net(x)
    tol = 1e-5 if backend == "paddle" and not freeze else 2e-4  # other kernels round otherwise
    np.testing.assert_allclose(y.numpy(), expected.numpy(), rtol=tol, atol=tol)
    report = jit_core.explain(fast, x)
    section(f"ResNet18, batch 1, 3x224x224, random weights, eval(), backend={backend!r}")
    print(f"graphs: {report.graph_count}   breaks: {report.break_count}   ops: {report.op_count}")
    code = report.graph_code[0].splitlines()
    print(f"generated graph code (first 25 of {len(code)} lines):")
    print("\n".join(code[:25]))
    print("    ...")
    eager = per_call(net, x, repeat=10)
    jit = per_call(fast, x, repeat=10)
    print(f"first call (capture + compile + run): {first * 1e3:.0f} ms")
    print(f"per call: eager {eager * 1e3:.1f} ms   jit_core {jit * 1e3:.1f} ms")


def training_step() -> None:
    """A whole training step, one graph: forward, backward, the optimizer's update."""

    def build():
        paddle.seed(0)
        layer = paddle.nn.TransformerEncoderLayer(64, 4, 128)
        net = paddle.nn.TransformerEncoder(layer, 2)
        opt = paddle.optimizer.AdamW(1e-3, parameters=net.parameters())

        def step(x):
            loss = net(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.clear_grad()
            return loss

        return step

    eager, fast = build(), jit_core.optimize(build())
    batches = [paddle.randn([8, 32, 64]) for _ in range(5)]
    for i, x in enumerate(batches):
        paddle.seed(i)  # dropout draws the same masks eagerly and compiled
        want = eager(x)
        paddle.seed(i)
        assert float(fast(x)) == float(want), "a step's loss differs from eager's"
    report = jit_core.explain(fast, batches[0])
    section("a training step of a 2-layer Transformer encoder (AdamW), optimize(step)")
    print(f"graphs: {report.graph_count}   breaks: {report.break_count}")
    print("training calls after the graph:", "; ".join(report.graphs[0].training_calls))
    print("executor:", report.graphs[0].backend)
    print("losses of 5 steps: eager's, bit for bit")
    x = batches[0]
    print(
        f"per step: eager {per_call(eager, x, repeat=20) * 1e3:.1f} ms   "
        f"jit_core {per_call(fast, x, repeat=20) * 1e3:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="paddle", help="an installed backend")
    parser.add_argument("--freeze", action="store_true", help="optimize(..., freeze=True)")
    args = parser.parse_args()
    installed = jit_core.backends()
    print(f"paddle {paddle.__version__}, jit_core {jit_core.__version__}")
    print("installed backends:", ", ".join(sorted(installed)))
    if args.backend not in installed:
        parser.error(f"backend {args.backend!r} is not installed; installed: {sorted(installed)}")
    inference = installed[args.backend].inference_only or args.freeze
    with paddle.no_grad() if inference else contextlib.nullcontext():
        small_function(args.backend, args.freeze)
        graph_break(args.backend, args.freeze)
        resnet(args.backend, args.freeze)
    if not inference:  # training runs on the paddle backend
        training_step()


if __name__ == "__main__":
    main()
