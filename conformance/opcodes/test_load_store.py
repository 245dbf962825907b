"""load_store family: attribute loads through super() (LOAD_SUPER_ATTR on 3.12; a call of
the builtin super before), captured into one graph with eager results."""

from __future__ import annotations

import paddle
import pytest

import jit_core

from ..helpers import assert_same
from .coverage import assert_covers


class Base(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)

    def forward(self, x):
        return paddle.tanh(self.fc(x))


class ZeroArgSuper(Base):
    def forward(self, x):
        return super().forward(x) * 2


class TwoArgSuper(Base):
    def forward(self, x):
        return super().forward(x) + 1


class ScaledLinear(paddle.nn.Linear):
    """A subclass of a Paddle layer whose forward calls Paddle's."""

    def forward(self, x):
        return super().forward(x) * 0.5


@pytest.mark.parametrize(
    "make, opnames",
    [
        (ZeroArgSuper, ("LOAD_SUPER_ATTR", "LOAD_GLOBAL")),
        (TwoArgSuper, ("LOAD_SUPER_ATTR", "LOAD_GLOBAL")),
        (lambda: ScaledLinear(4, 3), ("LOAD_SUPER_ATTR", "LOAD_GLOBAL")),
    ],
    ids=["zero-arg", "two-arg", "paddle-parent"],
)
def test_super_attribute_is_one_graph(make, opnames, backend):
    paddle.seed(3)
    net = make()
    net.eval()
    assert_covers(type(net).forward, *opnames)
    x = paddle.randn([2, 4])
    report = jit_core.explain(jit_core.optimize(net, backend=backend), x)
    assert report.graph_count == 1 and report.break_count == 0, str(report)
    assert_same(report.result, net(x))
    fast = jit_core.optimize(net, backend=backend)
    assert_same(fast(x), net(x))
    assert_same(fast(x), net(x))
    assert fast.jit_stats.captures == 1
