"""A profile of a short run, its Chrome trace, and the trace drawn as a picture.

    python bench/profile_trace.py [--out DIR] [--warm] [--png docs/_static/profile-trace.png]

Runs a layer whose graph breaks on a tensor's value (a resume function per branch) and a
training step, under ``jit_core.profile()``; writes the profile (``profile.json``), its
trace (``profile.trace.json``, to open in ``chrome://tracing`` or ui.perfetto.dev) and
its table (``profile.txt``) to ``--out``, prints the table, and with ``--png`` draws the
trace's spans on a time axis (needs matplotlib), as the docs show it.
"""

from __future__ import annotations

import argparse
import os
import warnings

warnings.filterwarnings("ignore")

import paddle  # noqa: E402

import jit_core  # noqa: E402


class Gate(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(64, 64)

    def forward(self, x):
        y = self.fc(x)
        if y.mean() > 0:
            return paddle.nn.functional.relu(y)
        return -y


def run(warm: bool) -> jit_core.Profile:
    paddle.seed(0)
    gate = jit_core.optimize(Gate())
    net = paddle.nn.Sequential(paddle.nn.Linear(64, 64), paddle.nn.ReLU(), paddle.nn.Linear(64, 1))
    opt = paddle.optimizer.SGD(learning_rate=0.01, parameters=net.parameters())

    def train_step(x):
        loss = net(x).mean()
        loss.backward()
        opt.step()
        opt.clear_grad()
        return loss

    step = jit_core.optimize(train_step)
    inputs = [paddle.randn([8, 64]) * (1 if i % 3 else -1) for i in range(6)]
    if warm:  # the compiles happen before: the trace shows the steady state
        for x in inputs[:3]:
            gate(x), step(x)
    with jit_core.profile() as prof:
        for x in inputs:
            gate(x)
            step(x)
    return prof


def draw(trace: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spans = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    rows = {"call": 2, "graph": 1, "compile": 0}
    colors = {"call": "#4c72b0", "graph": "#55a868", "compile": "#c44e52"}
    fig, ax = plt.subplots(figsize=(11, 2.6))
    for e in spans:
        ms, width = e["ts"] / 1e3, max(e["dur"] / 1e3, 0.02)
        ax.broken_barh([(ms, width)], (rows[e["cat"]] - 0.4, 0.8), color=colors[e["cat"]])
    ax.set_yticks([0, 1, 2])
    ax.set_yticklabels(["compiles", "graph calls", "optimized calls"])
    ax.set_xlabel("ms since the profile began")
    ax.set_title("jit_core.profile(): a layer whose graph breaks and a training step, 6 calls each")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".", help="where the profile's files go")
    parser.add_argument("--png", help="draw the trace to this image (needs matplotlib)")
    parser.add_argument(
        "--warm", action="store_true", help="compile before the profile (the steady state)"
    )
    args = parser.parse_args()
    prof = run(args.warm)
    os.makedirs(args.out, exist_ok=True)
    written = prof.save(os.path.join(args.out, "profile.json"))
    print(prof)
    print("written:", ", ".join(written))
    if args.png:
        draw(prof.chrome_trace(), args.png)
        print("drawn:", args.png)


if __name__ == "__main__":
    main()
