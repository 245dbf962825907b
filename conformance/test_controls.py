"""The controls of ``jit_core.controls``: ``disable``, ``set_stance`` and
``error_on_graph_break``, as torch.compile's users know them, on every backend, with
exact capture counts."""

from __future__ import annotations

import paddle
import pytest

import jit_core
from jit_core.config import CONTROLS

from .helpers import assert_same


@pytest.fixture(autouse=True)
def default_controls():
    yield
    jit_core.set_stance("default")
    CONTROLS.error_on_graph_break = None


def scaled(x):
    return x * 2 + 1


# ------------------------------------------------------------------ disable


def test_a_disabled_function_breaks_the_graph_and_runs_eagerly(backend):
    ran = []

    @jit_core.disable
    def helper(x):
        ran.append(1)
        return x * 3

    def f(x):
        return helper(x + 1) * 2

    fast = jit_core.optimize(f, backend=backend)
    x = paddle.ones([2])
    assert_same(fast(x), f(x))
    assert len(ran) == 2
    report = jit_core.explain(f, x)
    assert (report.graph_count, report.break_count) == (2, 1), str(report)
    assert report.breaks[0].reason.endswith(".helper is marked jit_core.disable(): it runs eagerly")
    assert report.breaks[0].category == "untraced-call"


def inner(x):
    return x.exp()


def test_recursive_disable_keeps_what_it_calls_out_of_capture_too(backend):
    outer = jit_core.disable(lambda x: inner(x) + 1)
    fast = jit_core.optimize(lambda x: outer(x) * 2, backend=backend)
    fast(paddle.ones([2]))
    assert not any("inner" in key for key in fast.jit_stats.entries), fast.jit_stats


def test_disable_without_recursive_captures_what_the_function_calls(backend):
    def middle(x):
        return inner(x) + 1

    jit_core.disable(middle, recursive=False)
    fast = jit_core.optimize(lambda x: middle(x) * 2, backend=backend)
    x = paddle.ones([2])
    assert_same(fast(x), (x.exp() + 1) * 2)
    keys = list(fast.jit_stats.entries)
    assert any(k.startswith("inner ") for k in keys), keys
    assert not any(k.startswith("middle ") for k in keys), keys


def test_a_disabled_method(backend):
    class Net(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = paddle.nn.Linear(3, 3)

        @jit_core.disable
        def log_stats(self, h):
            return float(h.mean())

        def forward(self, x):
            h = self.fc(x)
            self.last = self.log_stats(h)
            return h * 2

    net = Net()
    x = paddle.ones([2, 3])
    report = jit_core.explain(net, x)
    assert report.breaks[0].reason.endswith("is marked jit_core.disable(): it runs eagerly")
    assert_same(jit_core.optimize(net, backend=backend)(x), net(x))


def test_disable_refuses_what_it_cannot_keep_out(backend):
    with pytest.raises(TypeError, match="Python function or method, got builtin"):
        jit_core.disable(len)
    with pytest.raises(TypeError, match="not what optimize.. returned"):
        jit_core.disable(jit_core.optimize(scaled, backend=backend))


# ------------------------------------------------------------------ set_stance


def test_force_eager_runs_the_original_and_keeps_the_caches(backend):
    fast = jit_core.optimize(scaled, backend=backend)
    x = paddle.ones([2])
    fast(x)
    assert fast.jit_stats.captures == 1
    with jit_core.set_stance("force_eager"):
        for shape in ([3], [4, 4], [5]):
            y = paddle.ones(shape)
            assert_same(fast(y), scaled(y))
        later = jit_core.optimize(
            scaled, backend=backend
        )  # made while it is in force: eager as well
        later(x)
        assert later.jit_stats.captures == 0
    assert fast.jit_stats.captures == 1  # nothing captured meanwhile
    fast(x)  # the cache again: a hit
    assert fast.jit_stats.captures == 1


def test_force_eager_on_a_layer_and_as_a_decorator(backend):
    net = paddle.nn.Linear(3, 2)
    fast = jit_core.optimize(net, backend=backend)

    @jit_core.set_stance("force_eager")
    def evaluate(x):
        return fast(x)

    assert CONTROLS.stance == "default"  # a decorator sets it for the calls only
    x = paddle.ones([4, 3])
    assert_same(evaluate(x), net(x))
    assert fast.jit_stats.captures == 0
    fast(x)
    assert fast.jit_stats.captures == 1


def test_eager_on_recompile_uses_the_entries_and_adds_none(backend):
    fast = jit_core.optimize(scaled, backend=backend, dynamic=False)
    x = paddle.ones([2])
    fast(x)
    jit_core.set_stance("eager_on_recompile")
    y = paddle.ones([3, 3])
    assert_same(fast(y), scaled(y))
    fast(x)
    assert fast.jit_stats.captures == 1
    jit_core.set_stance("default")
    fast(y)
    assert fast.jit_stats.captures == 2


def test_fail_on_recompile_names_the_guard(backend):
    fast = jit_core.optimize(scaled, backend=backend, dynamic=False)
    with jit_core.set_stance("fail_on_recompile"):
        fast(paddle.ones([2]))  # a first capture is no recompile
        fast(paddle.ones([2]))
        with pytest.raises(jit_core.RecompileError, match=r"scaled .* would be compiled again"):
            fast(paddle.ones([3]))
    assert fast.jit_stats.captures == 1


def test_an_unknown_stance_lists_the_known_ones(backend):
    with pytest.raises(ValueError, match="default, force_eager, eager_on_recompile"):
        jit_core.set_stance("eager")


# ------------------------------------------------------------------ error_on_graph_break


def breaks(x):
    y = x + 1
    if y.sum() > 0:  # a tensor decides: a graph break
        y = y * 2
    return y


def test_error_on_graph_break_for_a_block(backend):
    x = paddle.ones([2])
    with jit_core.error_on_graph_break(True):
        with pytest.raises(jit_core.GraphBreakError, match=r"^jit_core.error_on_graph_break"):
            jit_core.optimize(breaks, backend=backend)(x)
    fast = jit_core.optimize(breaks, backend=backend)
    assert_same(fast(x), breaks(x))


def test_error_on_graph_break_as_an_option_of_optimize(backend):
    """``optimize(..., error_on_graph_break=True)``: full_graph=True's strictness, named."""
    x = paddle.ones([2])
    with pytest.raises(jit_core.GraphBreakError, match="a tensor value decides a branch"):
        jit_core.optimize(breaks, backend=backend, error_on_graph_break=True)(x)
    fast = jit_core.optimize(scaled, backend=backend, error_on_graph_break=True)
    assert_same(fast(x), scaled(x))
    assert fast.jit_stats.captures == 1
    with pytest.raises(TypeError, match="error_on_graph_break must be True or False"):
        jit_core.optimize(scaled, error_on_graph_break="yes")


def test_error_on_graph_break_false_overrides_full_graph(backend):
    x = paddle.ones([2])
    with pytest.raises(jit_core.GraphBreakError, match=r"^full_graph=True"):
        jit_core.optimize(breaks, backend=backend, full_graph=True)(x)
    with jit_core.error_on_graph_break(False):
        fast = jit_core.optimize(breaks, backend=backend, full_graph=True)
        assert_same(fast(x), breaks(x))
    with pytest.raises(TypeError, match="True or False"):
        jit_core.error_on_graph_break("yes")
