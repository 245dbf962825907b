"""The call that captures a graph on the paddle backend returns what the capture's own
eager run of the graph's operations computed, where that is exactly what the graph
computes, instead of running the graph a second time (``convert_frame.FirstFromCapture``)."""

from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import jit_core
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
