"""The call that captures a graph on the paddle backend returns what the capture's own
eager run of the graph's operations computed, where that is exactly what the graph
computes, instead of running the graph a second time (``convert_frame.FirstFromCapture``)."""

from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import jit_core
from jit_core import rng
from jit_core.passes import graph_pass
from jit_core.plugins import register_plugin, unregister_plugin
from jit_core.runtime import convert_frame


@graph_pass("test_tanh_as_tanh", order=60, default=False)
def _tanh_as_tanh(gm, ctx):
    """A plugin's pass that rewrites (to the same function: the values stay comparable)."""
    n = 0
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is paddle.tanh:
            node.target = paddle.tanh
            n += 1
    return n


class _Plugin:
    @jit_core.hookimpl
    def jit_register_passes(self, register):
        register(_tanh_as_tanh)


@pytest.fixture(autouse=True)
def _plugin_pass():
    register_plugin(_Plugin(), name="test-first-call-pass")
    yield
    unregister_plugin("test-first-call-pass")


@pytest.fixture
def served(monkeypatch):
    """Per first call of a captured graph: whether it returned the capture's results
    (the suites run with it off: conftest.py)."""
    monkeypatch.setattr(convert_frame, "FIRST_CALL_FROM_CAPTURE", True)
    seen = []
    real = convert_frame.FirstFromCapture.__call__

    def spy(self, *args):
        outputs = self.outputs
        got = real(self, *args)
        seen.append(outputs is not None and got is outputs)
        return got

    monkeypatch.setattr(convert_frame.FirstFromCapture, "__call__", spy)
    return seen


class Net(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = paddle.nn.Conv2D(3, 4, 3)
        self.bn = paddle.nn.BatchNorm2D(4)
        self.drop = paddle.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(F.relu(self.bn(self.conv(x)))).mean(axis=[2, 3])


def _assert_bitwise(a, b):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_an_inference_call_returns_the_captures_results_once(served):
    paddle.seed(0)
    net = Net()
    net.eval()
    x, y = paddle.rand([2, 3, 8, 8]), paddle.rand([2, 3, 8, 8])
    fast = jit_core.optimize(net)
    with paddle.no_grad():
        _assert_bitwise(fast(x), net(x))
        _assert_bitwise(fast(x), net(x))
        _assert_bitwise(fast(y), net(y))
    assert served == [True]
    assert fast.jit_stats.captures == 1


def _random_graph(x):
    y = F.dropout(x * 2, 0.5)
    z = paddle._C_ops.dropout(y + 1, None, 0.3, False, "upscale_in_train", 0, False)
    if isinstance(z, (tuple, list)):  # (Paddle 3.0 returns the mask too)
        z = z[0]
    return z.sum(axis=1) + paddle.rand([4])


def _random_with_a_break(x):
    y = F.dropout(x, 0.5) + paddle.randn([4, 4])
    print("", end="")  # a graph break: a graph before it, another in the resume function
    return F.dropout(y, 0.5) * paddle.rand([4])


@pytest.mark.parametrize(
    "fn, graphs",
    [(_random_graph, 1), (_random_with_a_break, 2)],
    ids=["one graph", "a graph break"],
)
def test_a_random_graph_returns_the_captures_draws_and_moves_the_stream_as_eager(
    fn, graphs, served
):
    """The capture ran each random operation of the graph once, from the state the call
    came with: those are eager's draws, and the stream goes on from where they ended."""
    x = paddle.ones([4, 4])
    with paddle.no_grad():
        paddle.seed(11)
        want = [fn(x) for _ in range(3)] + [paddle.rand([6])]
        fast = jit_core.optimize(fn)
        paddle.seed(11)
        got = [fast(x) for _ in range(3)] + [paddle.rand([6])]
    for a, b in zip(got, want):
        _assert_bitwise(a, b)
    assert served == [True] * graphs
    assert fast.jit_stats.captures == graphs


def test_a_random_graph_runs_where_something_else_drew_during_its_capture(served, monkeypatch):
    """Where the generators moved otherwise than through the graph's random operations
    (``rng.Draws.end()`` is None), the capture's draws are not eager's: the graph runs."""
    monkeypatch.setattr(rng.Draws, "end", lambda self: None)
    x = paddle.ones([4, 4])
    with paddle.no_grad():
        paddle.seed(12)
        want = [_random_graph(x) for _ in range(2)] + [paddle.rand([6])]
        fast = jit_core.optimize(_random_graph)
        paddle.seed(12)
        got = [fast(x) for _ in range(2)] + [paddle.rand([6])]
    for a, b in zip(got, want):
        _assert_bitwise(a, b)
    assert served == []


@pytest.mark.parametrize(
    "case",
    [
        "training mode (dropout draws)",
        "gradients",
        "in-place update",
        "a view of an input",
        "a plugin's pass",
    ],
)
def test_a_first_call_runs_the_graph_where_the_capture_could_differ(case, served):
    paddle.seed(0)
    net = Net()
    net.eval()
    x = paddle.rand([2, 3, 8, 8])

    def inplace(t):
        y = t * 2
        y.add_(paddle.ones_like(y))
        return y

    def view(t):
        return t.reshape([-1]) * 1, t.reshape([-1])

    if case == "training mode (dropout draws)":
        net.train()
        fn, grad = net, False
    elif case == "gradients":
        fn, grad = net, True
    elif case == "in-place update":
        fn, grad = inplace, False
    elif case == "a view of an input":
        fn, grad = view, False
    else:

        def fn(t):
            return paddle.tanh(t)

        grad = False
    if case == "a plugin's pass":
        fast = jit_core.optimize(fn, passes=["test_tanh_as_tanh"])
    else:
        fast = jit_core.optimize(fn)
    with paddle.set_grad_enabled(grad):
        paddle.seed(5)
        want = fn(x)
        paddle.seed(5)
        got = fast(x)
    for a, b in zip(
        got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]
    ):
        _assert_bitwise(a, b)
    assert served == []
