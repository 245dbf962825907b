"""The control-flow model zoo: layers whose Python control flow depends on tensor values,
or that call what cannot be captured, compile into several graphs joined by plain Python
(graph breaks with resume functions). For each model: the exact numbers of graphs and
breaks, every path exercised with inputs that take it, outputs equal to eager Paddle, and
a second call with the same guards that captures nothing."""

from __future__ import annotations

import sys
from typing import NamedTuple

import paddle
import pytest

import jit_core

from .helpers import assert_same

paddle.set_default_dtype("float32")


def _linear(i, o):
    return paddle.nn.Linear(i, o)


class BranchOnValue(paddle.nn.Layer):
    """An ``if`` on a tensor's mean picks one of two sublayers."""

    def __init__(self):
        super().__init__()
        self.stem, self.up, self.down = _linear(4, 4), _linear(4, 4), _linear(4, 4)

    def forward(self, x):
        h = self.stem(x)
        if h.mean() > 0:
            out = paddle.nn.functional.relu(self.up(h))
        else:
            out = paddle.tanh(self.down(h))
        return out * 2


class EarlyReturn(paddle.nn.Layer):
    """A ``return`` in the middle, taken when a tensor says so."""

    def __init__(self):
        super().__init__()
        self.a, self.b = _linear(4, 4), _linear(4, 4)

    def forward(self, x):
        h = self.a(x)
        if h.sum() < 0:
            return h
        return self.b(h) + 1


#: graphs of WhileDataDependent: before the loop, and after it where the code after the
#: loop is not copied into it at its ``break`` (3.10, 3.12 and 3.13 copy it)
_AFTER_LOOP = 1 if sys.version_info[:2] in ((3, 10), (3, 12), (3, 13)) else 2


class WhileDataDependent(paddle.nn.Layer):
    """A ``while`` loop whose exit depends on tensor values and that counts its steps: the
    graph breaks before the loop, and the loop runs in Python. Its body is a function
    captured on its own where the backend takes the counter as a graph input; elsewhere
    it runs eagerly (a Python counter would make every iteration a new capture)."""

    def __init__(self):
        super().__init__()
        self.a = _linear(4, 4)

    def forward(self, x, limit: float = 4.0):
        h = paddle.abs(self.a(x)) + 0.1
        steps = 0
        while True:
            if h.sum() >= limit:
                break
            h = h * 2
            steps += 1
        return h + steps


class PrintInForward(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.a, self.b = _linear(4, 4), _linear(4, 2)

    def forward(self, x):
        h = self.a(x)
        print("hidden shape:", h.shape)
        return self.b(h)


class NumpyRoundTrip(paddle.nn.Layer):
    """The hidden state goes through NumPy and comes back as a tensor: one graph."""

    def __init__(self):
        super().__init__()
        self.a, self.b = _linear(4, 4), _linear(4, 3)

    def forward(self, x):
        h = self.a(x)
        arr = h.numpy()
        y = paddle.to_tensor(arr * 2) + h
        return self.b(y)


class Inner(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = _linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        print("inner mean sign:", bool(h.mean() > 0))
        return h * 3


class NestedBreak(paddle.nn.Layer):
    """The graph breaks inside a nested sublayer: the outer frame breaks at the call site
    and the sublayer's frame is captured (and broken) on its own."""

    def __init__(self):
        super().__init__()
        self.pre, self.inner, self.post = _linear(4, 4), Inner(), _linear(4, 2)

    def forward(self, x):
        return self.post(self.inner(self.pre(x)))


class ItemTripCount(paddle.nn.Layer):
    """A loop whose trip count comes from ``.item()``: the loop after the break is
    unrolled into the resumed graph (a new count captures again)."""

    def __init__(self):
        super().__init__()
        self.a = _linear(4, 4)

    def forward(self, x, n):
        h = self.a(x)
        count = int(n.sum().item())
        for _ in range(count):
            h = paddle.tanh(self.a(h))
        return h


class Strict(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = _linear(4, 4)

    def forward(self, x):
        if x.shape[-1] != 4:
            raise ValueError(f"Strict wants 4 features, got {x.shape[-1]}")
        return self.fc(x)


class TryAroundLayer(paddle.nn.Layer):
    """try/except around a layer call: captured whole while nothing raises; when the
    sublayer raises (a ValueError whose message the shapes decide), the capture takes the
    error to the handler, as eager code catches it: one graph still."""

    def __init__(self):
        super().__init__()
        self.strict, self.fallback = Strict(), _linear(6, 4)

    def forward(self, x):
        try:
            h = self.strict(x)
        except ValueError:
            h = self.fallback(x)
        return h * 2


def _pos():
    return paddle.full([2, 4], 0.5)


def _neg():
    return paddle.full([2, 4], -0.5)


#: (model, [(input set, graphs, breaks)]): explain() of one call with that input set
#: reports that many graphs and breaks (an eager frame counts as a break)
class ByNumbers(NamedTuple):
    """A count that depends on whether the backend takes Python numbers as graph
    inputs."""

    inputs: int
    constants: int


ZOO = [
    (BranchOnValue, [((_pos(),), 2, 1), ((_neg(),), 2, 1)]),
    (EarlyReturn, [((_pos(),), 2, 1), ((_neg(),), 2, 1)]),
    # the break before the loop, and the loop's frame that runs eagerly
    # with number inputs: before the loop, the body and its resume functions (the first
    # iteration, and the second that takes ``steps`` as an input), after the loop; else
    # the loop runs eagerly (it counts ``steps``), and the code after the loop is captured
    # too where it is not copied into the loop (``_AFTER_LOOP``)
    (
        WhileDataDependent,
        [
            ((_pos(), 1.0), ByNumbers(3, _AFTER_LOOP), 2),
            ((_pos(), 40.0), ByNumbers(5, _AFTER_LOOP), 2),
        ],
    ),
    (PrintInForward, [((_pos(),), 2, 1)]),
    # numpy arithmetic on the array runs eagerly in the frame after the break
    (NumpyRoundTrip, [((_pos(),), 1, 0)]),
    # outer: before and after the call; inner: before the branch, between it and the
    # print, after the print
    (NestedBreak, [((_pos(),), 5, 3), ((_neg(),), 5, 3)]),
    (
        ItemTripCount,
        [((_pos(), paddle.to_tensor([1.0])), 2, 1), ((_pos(), paddle.to_tensor([3.0])), 2, 1)],
    ),
    # nothing raises: one graph; the sublayer raises: the capture takes the ValueError
    # to the handler, which calls the fallback layer: one graph too
    (TryAroundLayer, [((_pos(),), 1, 0), ((paddle.full([2, 6], 0.5),), 1, 0)]),
]


@pytest.mark.parametrize("make, paths", ZOO, ids=[z[0].__name__ for z in ZOO])
def test_model_zoo(make, paths, backend, capsys):
    paddle.seed(7)
    net = make()
    net.eval()
    fast = jit_core.optimize(net, backend=backend)
    for args, graphs, breaks in paths:
        if isinstance(graphs, ByNumbers):
            graphs = graphs[0 if jit_core.backends()[backend].number_inputs else 1]
        expected = net(*args)
        eager_out = capsys.readouterr().out

        report = jit_core.explain(jit_core.optimize(net, backend=backend), *args)
        assert capsys.readouterr().out == eager_out  # printed exactly as eager prints
        assert (report.graph_count, report.break_count) == (graphs, breaks), str(report)
        assert_same(report.result, expected)
        for brk in report.breaks:
            path, line = brk.location.rsplit(":", 1)
            assert path.endswith("test_control_flow.py") and int(line) > 0, str(brk)
            assert brk.instruction, str(brk)

        assert_same(fast(*args), expected)
        captured = fast.jit_stats.captures
        assert_same(fast(*args), expected)
        assert fast.jit_stats.captures == captured, "the second call captured again"
        assert capsys.readouterr().out == eager_out * 2
