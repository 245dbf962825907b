"""Context managers inside captured code: gradient mode, ``auto_cast`` and plain-Python
context managers are modelled, not reasons to run the frame eagerly.

Gradient mode is checked where it matters: with gradients on, values, ``stop_gradient``
flags and the gradients a backward pass computes must be those of eager Paddle.
"""

from __future__ import annotations

import copy

import paddle
import pytest

import jit_core
from jit_core import errors

from .helpers import assert_same


class Teacher(paddle.nn.Layer):
    """A student layer with a frozen teacher branch computed under ``no_grad``."""

    def __init__(self):
        super().__init__()
        self.student = paddle.nn.Linear(4, 4)
        self.teacher = paddle.nn.Linear(4, 4)

    def forward(self, x):
        with paddle.no_grad():
            target = paddle.tanh(self.teacher(x))
            flag = paddle.is_grad_enabled()
        with paddle.set_grad_enabled(False):
            scale = (x * x).mean()
        out = self.student(x)
        with paddle.amp.auto_cast(enable=False):
            out = out * 2
        return ((out - target) ** 2).mean() * scale, target, flag


class Scaled:
    """A user context manager in plain Python."""

    def __init__(self, factor):
        self.factor = factor

    def __enter__(self):
        return self.factor

    def __exit__(self, *exc):
        return False


SCALED = Scaled(3.0)


def user_context(x):
    with SCALED as k:
        y = x * k
    return y + 1


def nested_no_grad(x):
    with paddle.no_grad():
        with paddle.no_grad():
            y = x * 2
        z = y + 1
    return z * x


def enable_inside_no_grad(x):
    with paddle.no_grad():
        with paddle.enable_grad():
            y = x * 2
    return y


def _grads(layer):
    return [p.grad for p in layer.parameters()]


@pytest.mark.autograd
def test_no_grad_block_with_gradients_on_matches_eager(backend):
    paddle.seed(11)
    eager_net = Teacher()
    net = copy.deepcopy(eager_net)
    x = paddle.rand([3, 4])
    report = jit_core.explain(copy.deepcopy(eager_net), x)
    assert (report.graph_count, report.break_count) == (1, 0), str(report)

    fast = jit_core.optimize(net, backend=backend)
    loss, target, flag = fast(x)
    eager_loss, eager_target, eager_flag = eager_net(x)
    assert_same(loss, eager_loss)
    assert_same(target, eager_target)
    assert flag is eager_flag is False
    assert target.stop_gradient == eager_target.stop_gradient is True
    assert loss.stop_gradient == eager_loss.stop_gradient is False
    loss.backward()
    eager_loss.backward()
    assert_same(_grads(net.student), _grads(eager_net.student))
    assert net.teacher.weight.grad is None and eager_net.teacher.weight.grad is None


def test_no_grad_block_under_no_grad_is_one_graph(backend):
    paddle.seed(12)
    net = Teacher()
    net.eval()
    x = paddle.rand([3, 4])
    with paddle.no_grad():
        fast = jit_core.optimize(net, backend=backend)
        assert_same(fast(x), net(x))
        assert_same(fast(x), net(x))
        assert fast.jit_stats.compiled == 1


@pytest.mark.autograd
def test_a_graph_captured_with_gradients_off_is_not_used_with_them_on(backend):
    x = paddle.rand([3])
    x.stop_gradient = False
    fast = jit_core.optimize(nested_no_grad, backend=backend)
    with paddle.no_grad():
        assert_same(fast(x), nested_no_grad(x))
    got, expected = fast(x), nested_no_grad(x)
    assert_same(got, expected)
    assert got.stop_gradient == expected.stop_gradient is False
    got.sum().backward()
    grad = x.grad.numpy().copy()
    x.clear_gradient()
    expected.sum().backward()
    assert (grad == x.grad.numpy()).all()


def test_user_context_manager_is_inlined(backend):
    x = paddle.rand([3])
    report = jit_core.explain(user_context, x)
    assert (report.graph_count, report.break_count) == (1, 0), str(report)
    assert_same(jit_core.optimize(user_context, backend=backend)(x), user_context(x))


@pytest.mark.autograd
def test_enable_grad_inside_no_grad_runs_eagerly_with_the_reason(backend):
    x = paddle.rand([3])
    x.stop_gradient = False
    report = jit_core.explain(enable_inside_no_grad, x)
    assert report.graph_count == 0 and report.break_count == 1, str(report)
    assert report.breaks[0].category == errors.CONTEXT_MANAGER
    got = jit_core.optimize(enable_inside_no_grad, backend=backend)(x)
    assert_same(got, enable_inside_no_grad(x))
    assert got.stop_gradient is False


def made_in_frame_flags(x):
    y = x * 2
    return y.stop_gradient, y.is_leaf


@pytest.mark.autograd
def test_stop_gradient_of_a_tensor_made_in_the_frame_is_eagers(backend):
    fast = jit_core.optimize(made_in_frame_flags, backend=backend)
    tracked = paddle.rand([2])
    tracked.stop_gradient = False
    plain = paddle.rand([2])
    for x in (plain, tracked, plain):
        assert fast(x) == made_in_frame_flags(x)
        with paddle.no_grad():
            assert fast(x) == made_in_frame_flags(x)
