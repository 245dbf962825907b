"""Models that break their graph, per call, in one run: eager Paddle, Paddle's SOT
(`paddle.jit.to_static(net, full_graph=False)`) and jit_core's `optimize(net)`.

    python bench/control_flow.py [--repeat N]

Each model is the conformance zoo's (conformance/test_control_flow.py) with a larger
hidden size: a branch on a tensor's value, a print in forward, a break inside a nested
sublayer. Every call after the first takes the cache: jit_core runs its graphs and the
Python between them (the branch, the print, the resume functions).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import warnings

warnings.filterwarnings("ignore")

import paddle  # noqa: E402
from _timing import per_call_us, sot_of  # noqa: E402

import jit_core  # noqa: E402

HIDDEN = 256


class Branch(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.stem = paddle.nn.Linear(HIDDEN, HIDDEN)
        self.up = paddle.nn.Linear(HIDDEN, HIDDEN)
        self.down = paddle.nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        h = paddle.nn.functional.relu(self.stem(x))
        if h.mean() > 0:
            return paddle.nn.functional.relu(self.up(h)) * 2
        return paddle.tanh(self.down(h))


class Printing(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.a = paddle.nn.Linear(HIDDEN, HIDDEN)
        self.b = paddle.nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        h = paddle.nn.functional.gelu(self.a(x))
        print("hidden", h.shape)
        return self.b(h) + x


class Inner(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:
            h = h * 2
        return paddle.tanh(h)


class Nested(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.pre = paddle.nn.Linear(HIDDEN, HIDDEN)
        self.inner = Inner()
        self.post = paddle.nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        return self.post(self.inner(paddle.nn.functional.relu(self.pre(x))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    py = "{}.{}".format(*sys.version_info[:2])
    print(f"Python {py}, paddle {paddle.__version__}, batch 8 x {HIDDEN}, eval(), no_grad")
    print()
    print("| model | graphs / breaks | eager | Paddle SOT | jit_core | jit_core / eager |")
    print("|---|---|---|---|---|---|")
    x = paddle.rand([8, HIDDEN])
    with paddle.no_grad():
        for make in (Branch, Printing, Nested):
            paddle.seed(0)
            net = make()
            net.eval()
            sot = sot_of(net)
            fast = jit_core.optimize(net)
            with contextlib.redirect_stdout(io.StringIO()):
                expected = net(x)
                for fn in (sot, fast):
                    got = fn(x)
                    assert paddle.allclose(got, expected, rtol=1e-5, atol=1e-5).item()
                report = jit_core.explain(jit_core.optimize(net), x)
            eager_us, sot_us, jit_us = per_call_us([net, sot, fast], (x,), args.repeat, quiet=True)
            counts = f"{report.graph_count} / {report.break_count}"
            print(
                f"| {make.__name__} | {counts} | {eager_us:.0f} us | {sot_us:.0f} us "
                f"| {jit_us:.0f} us | {jit_us / eager_us:.2f} |"
            )


if __name__ == "__main__":
    main()
