"""Graphs of every size through `jit-eval`: speedup over eager Paddle per backend.

    python bench/graphs.py [--backends paddle,onnxrt,auto,sot] [--trials N] [--keep DIR]

The samples are conformance/graphs (GraphNet format, made by
conformance/graphs/make_graphs.py) and graphs generated here with `jit_core.extract()`,
from one op to a few hundred and from about 10 us to a few hundred ms eager: elementwise
chains, convolution nets (the largest a 12-block depthwise net like PP-LCNet's), MLPs and
attention blocks. Every backend of a sample runs in `jit-eval`'s worker, against eager
Paddle in the same process, as a user's `jit-eval` would (`--trials` timed calls each,
median). tvm, where installed and named, builds with sampled schedules (no tuning: that
takes minutes per graph).

Printed: eager time and speedup (eager time / compiled time) per graph and backend, the
geomean per backend, then the targets: the paddle backend at >= 0.97x geomean
with no graph over 1 ms below 0.95x; auto >= 0.97x on every graph over 50 us and at least
the best single backend's geomean.
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
import warnings

warnings.filterwarnings("ignore")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import paddle  # noqa: E402
import paddle.nn.functional as F  # noqa: E402
from paddle import nn  # noqa: E402

import jit_core  # noqa: E402

CONFORMANCE_GRAPHS = os.path.join(ROOT, "conformance", "graphs")


class Chain(nn.Layer):
    """``ops`` elementwise ops on one input, alternating a few kinds."""

    def __init__(self, ops: int):
        super().__init__()
        self.ops = ops

    def forward(self, x):
        for i in range(self.ops):
            k = i % 4
            if k == 0:
                x = x * 1.01
            elif k == 1:
                x = paddle.tanh(x)
            elif k == 2:
                x = x + 0.5
            else:
                x = F.relu(x)
        return x


class ConvNet(nn.Layer):
    """Depthwise-separable blocks (conv, batch norm, hardswish), as PP-LCNet's."""

    def __init__(self, blocks: int, ch: int):
        super().__init__()
        layers = []
        for _ in range(blocks):
            layers += [
                nn.Conv2D(ch, ch, 3, padding=1, groups=ch),
                nn.BatchNorm2D(ch),
                nn.Hardswish(),
                nn.Conv2D(ch, ch, 1),
                nn.BatchNorm2D(ch),
                nn.Hardswish(),
            ]
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


class Mlp(nn.Layer):
    def __init__(self, width: int, depth: int):
        super().__init__()
        self.layers = nn.LayerList([nn.Linear(width, width) for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = F.gelu(layer(x))
        return x


class Attention(nn.Layer):
    """Pre-norm encoder layers: multi-head self-attention and a GELU feed-forward, written
    out with Paddle's functional ops (its TransformerEncoderLayer stays one leaf call)."""

    def __init__(self, dim: int, heads: int, layers: int):
        super().__init__()
        self.heads = heads
        self.norms = nn.LayerList([nn.LayerNorm(dim) for _ in range(2 * layers)])
        self.qkv = nn.LayerList([nn.Linear(dim, 3 * dim) for _ in range(layers)])
        self.proj = nn.LayerList([nn.Linear(dim, dim) for _ in range(layers)])
        self.ff1 = nn.LayerList([nn.Linear(dim, 4 * dim) for _ in range(layers)])
        self.ff2 = nn.LayerList([nn.Linear(4 * dim, dim) for _ in range(layers)])

    def forward(self, x):
        b, n, dim = x.shape
        d = dim // self.heads
        for i in range(len(self.qkv)):
            q, k, v = paddle.split(self.qkv[i](self.norms[2 * i](x)), 3, axis=-1)
            q, k, v = [t.reshape([b, n, self.heads, d]).transpose([0, 2, 1, 3]) for t in (q, k, v)]
            att = F.softmax(paddle.matmul(q, k, transpose_y=True) / (d**0.5), axis=-1)
            ctx = paddle.matmul(att, v).transpose([0, 2, 1, 3]).reshape([b, n, dim])
            x = x + self.proj[i](ctx)
            x = x + self.ff2[i](F.gelu(self.ff1[i](self.norms[2 * i + 1](x))))
        return x


def generated():
    """(name, layer, inputs), from a few microseconds to a few hundred milliseconds."""
    paddle.seed(35)
    return [
        ("chain_1", Chain(1), (paddle.rand([16, 16]),)),
        ("chain_10", Chain(10), (paddle.rand([16, 16]),)),
        ("chain_100", Chain(100), (paddle.rand([64, 64]),)),
        ("chain_300", Chain(300), (paddle.rand([64, 64]),)),
        ("chain_40_large", Chain(40), (paddle.rand([512, 1024]),)),
        ("mlp_small", Mlp(32, 3), (paddle.rand([4, 32]),)),
        ("mlp_large", Mlp(1024, 6), (paddle.rand([64, 1024]),)),
        ("conv_small", ConvNet(2, 8), (paddle.rand([1, 8, 32, 32]),)),
        ("conv_lcnet_like", ConvNet(12, 32), (paddle.rand([1, 32, 192, 192]),)),
        ("attention_small", Attention(32, 2, 1), (paddle.rand([2, 16, 32]),)),
        ("attention_large", Attention(256, 8, 4), (paddle.rand([4, 128, 256]),)),
    ]


def write_samples(folder: str) -> None:
    for name, layer, args in generated():
        layer.eval()
        with paddle.no_grad():
            jit_core.extract(layer, *args, out=folder, name=name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    installed = jit_core.backends()
    default = [b for b in ("paddle", "onnxrt", "auto") if not installed[b].unavailable]
    parser.add_argument("--backends", default=",".join(default + ["sot"]))
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--keep", metavar="DIR", help="write the samples and the JSON here")
    args = parser.parse_args()

    work = args.keep or tempfile.mkdtemp(prefix="jit-bench-graphs-")
    samples = os.path.join(work, "generated")
    shutil.rmtree(samples, ignore_errors=True)
    os.makedirs(samples)
    write_samples(samples)
    report = os.path.join(work, "graphs.json")
    env = dict(os.environ, GLOG_minloglevel="2", JIT_TVM_TUNE="off")
    cmd = [sys.executable, "-m", "jit_eval", "--backend", args.backends]
    cmd += ["--trials", str(args.trials), "--json", report, CONFORMANCE_GRAPHS, samples]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(report) as f:
        evaluated = json.load(f)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)

    backends = args.backends.split(",")
    # per graph: eager's time (the median over the backends' runs) and each backend's
    # speedup, or the kind of error it met
    eager_runs: dict = {}
    cells: dict = {}
    for r in evaluated["results"]:
        name = os.path.relpath(r["sample"], ROOT).replace("conformance/graphs/", "")
        name = name.split("generated/")[-1]
        if r.get("eager_ms"):
            eager_runs.setdefault(name, []).append(r["eager_ms"])
        cells.setdefault(name, {})[r["backend"]] = r.get("speedup") or r["error"]["kind"]
    eager_of = {n: statistics.median(eager_runs.get(n, [0.0])) for n in cells}
    means = {b: evaluated["summary"][b]["geomean_speedup"] for b in backends}

    def speed(name, b):
        s = cells[name].get(b)
        return s if isinstance(s, float) else 0.0

    print(f"python {sys.version.split()[0]}, paddle {paddle.__version__}; {args.trials} trials")
    print(f"{'graph':34s} {'eager':>10s} " + " ".join(f"{b:>8s}" for b in backends))
    for name in sorted(cells, key=eager_of.get):
        eager = eager_of[name]
        shown = f"{eager * 1000:8.1f} us" if eager < 1 else f"{eager:8.1f} ms"
        row = [
            f"{s:7.2f}x" if isinstance(s, float) else f"{str(s)[:8]:>8s}"
            for s in (cells[name].get(b) for b in backends)
        ]
        print(f"{name:34s} {shown:>10s} " + " ".join(row))
    print(
        f"{'geomean':34s} {'':>10s} "
        + " ".join(f"{m:7.2f}x" if m else f"{'-':>8s}" for m in means.values())
    )

    print()
    if "paddle" in backends:
        slow = [n for n in cells if eager_of[n] > 1.0 and speed(n, "paddle") < 0.95]
        ok = (means["paddle"] or 0) >= 0.97 and not slow
        print(
            f"paddle: geomean {means['paddle'] or 0:.2f}x (target >= 0.97); graphs over 1 ms below "
            f"0.95x: {', '.join(slow) or 'none'} -> {'met' if ok else 'NOT met'}"
        )
    if "auto" in backends:
        slow = [n for n in cells if eager_of[n] > 0.05 and speed(n, "auto") < 0.97]
        singles = [b for b in backends if b not in ("auto", "sot")]
        best = max(singles, key=lambda b: means[b] or 0) if singles else None
        auto, top = means["auto"] or 0, (means[best] or 0) if best else 0
        ok = not slow and auto >= top
        print(
            f"auto: graphs over 50 us below 0.97x: {', '.join(slow) or 'none'}; geomean "
            f"{auto:.2f}x against the best single backend's ({best}) {top:.2f}x "
            f"-> {'met' if ok else 'NOT met'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
