"""A training step, compiled: time per step against eager Paddle and Paddle's SOT.

    python bench/training.py [--models encoder,mlp,resnet18] [--optimizers sgd,adamw]
                             [--rounds N] [--steps N]

The step is ``loss = loss_fn(net(x)); loss.backward(); opt.step(); opt.clear_grad()``.
Per model and optimizer, in one process, from the same initial weights:

- eager: the step as it is;
- paddle: ``jit_core.optimize(step)`` on the default backend (the whole step is one graph;
  the paddle backend times its eager and static executors on the step's forward and keeps
  the faster: ``jit_core.paddle_modes``);
- auto: ``jit_core.optimize(step, backend="auto")``;
- sot: the step over ``paddle.jit.to_static(net)``, the way Paddle documents it.

Printed per row: eager's milliseconds per step and each variant's speedup (eager's time
per step over the variant's, medians of interleaved rounds: above 1 is faster), each
variant's first step (capture and compile included), and whether the loss after
``--steps`` steps (each from ``paddle.seed``) equals eager's: ``=`` bit for bit, ``~``
within rtol 1e-5, ``x`` not.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import numpy as np  # noqa: E402
import paddle  # noqa: E402
import paddle.nn.functional as F  # noqa: E402
from _timing import per_call_us  # noqa: E402

import jit_core  # noqa: E402


class Encoder(paddle.nn.Layer):
    """A 2-layer Transformer encoder, d=64 (dropout 0.1, as Paddle's default)."""

    def __init__(self):
        super().__init__()
        layer = paddle.nn.TransformerEncoderLayer(64, 4, 128)
        self.encoder = paddle.nn.TransformerEncoder(layer, 2)
        self.head = paddle.nn.Linear(64, 8)

    def forward(self, x):
        return self.head(self.encoder(x))


def mlp():
    return paddle.nn.Sequential(
        paddle.nn.Linear(256, 512), paddle.nn.ReLU(), paddle.nn.Linear(512, 10)
    )


def resnet18():
    from paddle.vision.models import resnet18 as make

    return make(num_classes=10)


#: name -> (make the model, make one batch of inputs and labels, the loss)
MODELS = {
    "encoder": (
        Encoder,
        lambda: (paddle.randn([8, 32, 64]), paddle.randint(0, 8, [8, 32, 1])),
        lambda out, y: F.cross_entropy(out, y),
    ),
    "mlp": (
        mlp,
        lambda: (paddle.randn([64, 256]), paddle.randint(0, 10, [64, 1])),
        lambda out, y: F.cross_entropy(out, y),
    ),
    "resnet18": (
        resnet18,
        lambda: (paddle.randn([8, 3, 64, 64]), paddle.randint(0, 10, [8, 1])),
        lambda out, y: F.cross_entropy(out, y),
    ),
}
OPTIMIZERS = {
    "sgd": lambda params: paddle.optimizer.SGD(0.01, parameters=params),
    "adamw": lambda params: paddle.optimizer.AdamW(1e-3, parameters=params, weight_decay=0.01),
}
VARIANTS = ("eager", "paddle", "auto", "sot")


def make_step(net, opt, loss_fn):
    def step(x, y):
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        return loss

    return step


def variant(kind: str, model, optimizer: str, loss_fn):
    """The step of ``kind`` over its own copy of ``model``."""
    net = copy.deepcopy(model)
    net.train()
    forward = paddle.jit.to_static(net, full_graph=False) if kind == "sot" else net
    step = make_step(forward, OPTIMIZERS[optimizer](net.parameters()), loss_fn)
    if kind in ("paddle", "auto"):
        return jit_core.optimize(step, backend=kind)
    return step


def losses(fn, batches, seed: int):
    out = []
    for i, (x, y) in enumerate(batches):
        paddle.seed(seed + i)
        out.append(float(fn(x, y)))
    return out


def row(name: str, optimizer: str, rounds: int, steps: int) -> dict:
    make, data, loss_fn = MODELS[name]
    return compare(make, data, loss_fn, optimizer, rounds, steps)


def compare(make, data, loss_fn, optimizer: str, rounds: int, steps: int) -> dict:
    """Each variant's time per step (``us``), first step (``first_ms``) and loss after
    ``steps`` steps (``final``), for the model ``make()`` makes, on batches ``data()``
    makes (inputs and labels), with the loss ``loss_fn(output, labels)``."""
    paddle.seed(0)
    model = make()
    batches = [data() for _ in range(steps)]
    # the loss after `steps` steps, each variant from the same weights and seeds; the
    # first step of a compiled variant is its capture and compile
    final, first_ms = {}, {}
    for kind in VARIANTS:
        fn = variant(kind, model, optimizer, loss_fn)
        paddle.seed(1000)
        start = time.perf_counter()
        fn(*batches[0])
        first_ms[kind] = (time.perf_counter() - start) * 1e3
        final[kind] = losses(fn, batches[1:], 1)[-1]
    # time per step: fresh copies, interleaved rounds
    fns = [variant(kind, model, optimizer, loss_fn) for kind in VARIANTS]
    x, y = batches[0]
    eager_probe = per_call_us([fns[0]], (x, y), repeat=1, rounds=1, warmup=1)[0]
    repeat = max(1, int(200_000 / max(eager_probe, 1.0)))  # about 0.2 s per round
    us = per_call_us(fns, (x, y), repeat=repeat, rounds=rounds, warmup=2)
    return {"us": dict(zip(VARIANTS, us)), "first_ms": first_ms, "final": final}


def same(a: float, b: float) -> str:
    if a == b:
        return "="
    return "~" if np.isclose(a, b, rtol=1e-5, atol=0.0) else "x"


def header(width: int = 10) -> str:
    head = f"{'model':{width}s} {'opt':6s} {'eager ms':>9s}"
    head += "".join(f" {k:>7s}" for k in VARIANTS[1:])
    return head + "   first step ms (" + "/".join(VARIANTS) + ")   loss after steps"


def line(name: str, optimizer: str, r: dict, width: int = 10) -> str:
    eager = r["us"]["eager"]
    text = f"{name:{width}s} {optimizer:6s} {eager / 1e3:9.2f}"
    text += "".join(f" {eager / r['us'][k]:6.2f}x" for k in VARIANTS[1:])
    text += "   " + "/".join(f"{r['first_ms'][k]:.0f}" for k in VARIANTS)
    marks = " ".join(f"{k}{same(r['final'][k], r['final']['eager'])}" for k in VARIANTS[1:])
    return text + f"   {r['final']['eager']:.6f} ({marks})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="encoder,mlp,resnet18")
    parser.add_argument("--optimizers", default="sgd,adamw")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    print(
        f"paddle {paddle.__version__}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cores; speedup = eager's time per step / the variant's"
    )
    print(header())
    for name in args.models.split(","):
        for optimizer in args.optimizers.split(","):
            print(line(name, optimizer, row(name, optimizer, args.rounds, args.steps)), flush=True)


if __name__ == "__main__":
    main()
