"""Guards and the cache: what makes a call reuse a graph, and what makes it recompile."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import paddle
import pytest

import jit_core
from jit_core.errors import GraphBreakError
from jit_core.eval_frame import set_eval_frame

SCALE = 2.0


def add_mul(x, y):
    return x + y * 2


def uses_global(x):
    return x * SCALE


def with_python_arg(x, n):
    return x * n


def same(a, b):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def hook_is_off() -> bool:
    prev = set_eval_frame(None)
    set_eval_frame(prev)
    return prev is None


def test_hit_then_one_recompile_per_new_shape_or_dtype():
    fast = jit_core.optimize(add_mul)
    x, y = paddle.rand([2, 3]), paddle.rand([2, 3])
    same(fast(x, y), add_mul(x, y))
    same(fast(y, x), add_mul(y, x))
    assert fast.jit_stats.captures == 1
    a, b = paddle.rand([4, 3]), paddle.rand([4, 3])
    same(fast(a, b), add_mul(a, b))
    assert fast.jit_stats.captures == 2
    c, d = a.astype("float64"), b.astype("float64")
    out = fast(c, d)
    assert out.dtype == paddle.float64
    same(out, add_mul(c, d))
    assert fast.jit_stats.captures == 3
    fast(x, y), fast(a, b), fast(c, d)
    assert fast.jit_stats.captures == 3


def test_a_changed_global_recompiles():
    global SCALE
    fast = jit_core.optimize(uses_global)
    x = paddle.rand([3])
    same(fast(x), x * 2.0)
    try:
        SCALE = 5.0
        same(fast(x), x * 5.0)
    finally:
        SCALE = 2.0
    assert fast.jit_stats.captures == 2
    same(fast(x), x * 2.0)
    assert fast.jit_stats.captures == 2


def test_python_values_are_guarded_and_limit_warns_once():
    fast = jit_core.optimize(with_python_arg, recompile_limit=2)
    x = paddle.rand([3])
    same(fast(x, 2), x * 2)
    same(fast(x, 3), x * 3)
    assert fast.jit_stats.captures == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        same(fast(x, 4), x * 4)
        same(fast(x, 5), x * 5)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1, messages
    assert "recompile limit (2)" in messages[0] and "L['n']" in messages[0]
    reason = fast.jit_stats.eager_frames["with_python_arg"]
    assert "guard that kept failing" in reason and "L['n']" in reason
    same(fast(x, 2), x * 2)  # eager for good now, still right


def test_guards_are_readable_code():
    report = jit_core.explain(add_mul, paddle.rand([2, 3]), paddle.rand([2, 3]))
    guard = report.guards[0]
    assert guard.startswith("def guard_add_mul_")
    assert ".shape == [2, 3]" in guard and "stop_gradient is True" in guard
    compile(guard.split("\n#")[0], "<guard>", "exec")


def branchy(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def test_full_graph_raises_with_reason_and_location():
    fast = jit_core.optimize(branchy, full_graph=True)
    with pytest.raises(GraphBreakError) as err:
        fast(paddle.rand([3]))
    text = str(err.value)
    assert "branch" in text
    assert f"test_cache_and_guards.py:{branchy.__code__.co_firstlineno + 1}" in text
    assert hook_is_off()


def raises(x):
    if x.shape[0] > 0:
        raise KeyError("boom")
    return x


def test_hook_is_restored_after_errors():
    fast = jit_core.optimize(raises)
    for _ in range(2):
        with pytest.raises(KeyError, match="boom"):
            fast(paddle.rand([3]))
        assert hook_is_off()


def test_threads_do_not_corrupt_each_other():
    fast = jit_core.optimize(add_mul)
    errors = []

    def worker(rows):
        try:
            for _ in range(20):
                x, y = paddle.rand([rows, 3]), paddle.rand([rows, 3])
                same(fast(x, y), add_mul(x, y))
            assert hook_is_off()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in (1, 2, 3, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert fast.jit_stats.entries == {"add_mul": 4}


class Moded(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(3, 3)

    def forward(self, x):
        if self.training:
            return self.fc(x) * 2
        return self.fc(x) * 3


def test_mode_change_never_reuses_the_other_graph_and_sublayer_swap_recompiles():
    net = Moded()
    fast = jit_core.optimize(net)
    x = paddle.rand([2, 3])
    same(fast(x), net.fc(x) * 2)
    fast.eval()
    assert not net.training
    same(fast(x), net.fc(x) * 3)
    fast.train()
    same(fast(x), net.fc(x) * 2)
    assert fast.jit_stats.captures == 2

    net.fc = paddle.nn.Linear(3, 3)
    same(fast(x), net.fc(x) * 2)
    assert fast.jit_stats.captures == 3


def test_reset_forgets_compiled_frames():
    fast = jit_core.optimize(add_mul)
    x = paddle.rand([2])
    fast(x, x)
    fast.reset()
    assert fast.jit_stats.captures == 0
    same(fast(x, x), add_mul(x, x))
    assert fast.jit_stats.captures == 1


inner_fast = jit_core.optimize(add_mul)


def outer(x, y):
    print("an eager frame around an optimized call")  # makes outer run eagerly
    return inner_fast(x, y) * 2


def test_nested_optimize_keeps_each_context_to_its_own_frames(capsys):
    x, y = paddle.rand([2, 3]), paddle.rand([2, 3])
    inner_fast(x, y)  # compiled before the outer context exists
    fast_outer = jit_core.optimize(outer)
    for _ in range(2):
        same(fast_outer(x, y), add_mul(x, y) * 2)
    assert inner_fast.jit_stats.captures == 1
    # the outer context saw only its own frame: not the inner transformed code
    assert set(fast_outer.jit_stats.eager_frames) == {"outer"}
    assert fast_outer.jit_stats.entries == {}
