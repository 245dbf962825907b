"""Guards and the compiled-frame cache, observed through ``jit_core.optimize``."""

from __future__ import annotations

import logging
import threading
import warnings

import numpy as np
import paddle
import pytest
from paddle.framework import core

import jit_core
from jit_core import errors
from jit_core.api import frame_key
from jit_core.errors import GraphBreakError
from jit_core.runtime import native

SCALE = 2.0


def scaled(x):
    return x * SCALE + 1


def hook_is_off() -> bool:
    """True when no frame hook is installed in this thread (and leaves none installed)."""
    prev = core.set_eval_frame(None)
    if prev is not None:  # put it back so a failure does not break later tests
        core.set_eval_frame(prev)
    return prev is None


def close(a, b):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


@pytest.fixture(autouse=True)
def _no_hook_leak():
    assert hook_is_off()
    yield
    assert hook_is_off(), "a test left the frame hook installed"


def test_cache_hit_on_second_call():
    def f(x, y):
        return paddle.matmul(x, y) + x

    of = jit_core.optimize(f)
    x, y = paddle.randn([4, 4]), paddle.randn([4, 4])
    close(of(x, y), f(x, y))
    assert of.jit_stats.captures == 1
    assert of.jit_stats.compiled == 1
    x2, y2 = paddle.randn([4, 4]), paddle.randn([4, 4])
    close(of(x2, y2), f(x2, y2))  # new values, same specs: the same entry
    close(of(x, y), f(x, y))
    assert of.jit_stats.captures == 1
    assert of.jit_stats.entries == {frame_key(f): 1}
    assert of.jit_stats.eager_frames == {}


def test_new_shape_recompiles_once():
    def f(x):
        return paddle.nn.functional.relu(x).sum(axis=0)

    of = jit_core.optimize(f)
    a = paddle.randn([4, 4])
    b = paddle.randn([2, 3])
    close(of(a), f(a))
    close(of(b), f(b))
    assert of.jit_stats.captures == 2
    # both entries stay usable: no further capture when the shapes come back
    for t in (a, b, a, b):
        close(of(t), f(t))
    assert of.jit_stats.captures == 2
    assert of.jit_stats.entries == {frame_key(f): 2}


def test_new_dtype_recompiles():
    def f(x):
        return x * 3 - 1

    of = jit_core.optimize(f)
    a32 = paddle.ones([4, 4], dtype="float32")
    a64 = paddle.ones([4, 4], dtype="float64")
    out32 = of(a32)
    out64 = of(a64)
    assert of.jit_stats.captures == 2
    assert out32.dtype == paddle.float32
    assert out64.dtype == paddle.float64
    close(out64, f(a64))
    of(a32)
    of(a64)
    assert of.jit_stats.captures == 2


def test_shape_guard_sees_every_shape_change_of_the_same_tensor():
    # the shape is compared against a one-element probe of the captured shape
    # (Tensor.is_same_shape): an in-place reshape of the very tensor that was checked
    # last, an empty tensor and a 0-d one must each miss and give eager's result
    def f(x):
        return x.sum(axis=-1) if x.ndim else x * 2

    of = jit_core.optimize(f, dynamic=False)
    x = paddle.arange(12, dtype="float32").reshape([3, 4])
    close(of(x), f(x))
    x.reshape_([4, 3])
    close(of(x), f(x))
    assert of.jit_stats.captures == 2
    for t in (paddle.zeros([0, 4]), paddle.to_tensor(3.0), paddle.ones([1, 1])):
        close(of(t), f(t))
    assert of.jit_stats.captures == 5
    x.reshape_([3, 4])
    close(of(x), f(x))  # back to the first entry
    assert of.jit_stats.captures == 5


def test_guard_names_the_shape_probe(monkeypatch):
    # the Python checks, where the compiled one is off or cannot be built
    monkeypatch.setenv(native.ENABLE_ENV, "0")
    out = jit_core.explain(scaled, paddle.ones([4, 4]))
    guard = out.guards[0]
    assert ".is_same_shape(___shape_" in guard  # Paddle 3.0 to 3.3 all make the probe
    assert "a tensor of shape [4, 4] (only its shape is compared)" in guard


def test_stop_gradient_change_recompiles():
    def f(x):
        return x * x

    of = jit_core.optimize(f)
    a = paddle.ones([4])
    of(a)
    b = paddle.ones([4])
    b.stop_gradient = False
    y = of(b)
    assert of.jit_stats.captures == 2
    y.sum().backward()
    close(b.grad, 2 * b.detach())


def test_changing_a_global_recompiles_with_correct_result():
    global SCALE
    of = jit_core.optimize(scaled)
    x = paddle.full([4, 4], 3.0)
    old = SCALE
    try:
        close(of(x), x * 2.0 + 1)
        SCALE = 5.0
        close(of(x), x * 5.0 + 1)
        assert of.jit_stats.captures == 2
        SCALE = 2.0
        close(of(x), x * 2.0 + 1)  # the first entry again
        assert of.jit_stats.captures == 2
    finally:
        SCALE = old


def test_int_argument_change_recompiles_with_correct_result():
    def f(x, n):
        return x * n + n

    of = jit_core.optimize(f)
    x = paddle.full([4, 4], 2.0)
    close(of(x, 3), x * 3 + 3)
    close(of(x, 3), x * 3 + 3)
    assert of.jit_stats.captures == 1
    close(of(x, 4), x * 4 + 4)
    assert of.jit_stats.captures == 2
    # 3.0 == 3, but an int tensor times a float is a float: the int entry must not run
    xi = paddle.to_tensor([1, 2, 3, 4])
    assert of(xi, 3).dtype == f(xi, 3).dtype
    before = of.jit_stats.captures
    out = of(xi, 3.0)
    assert of.jit_stats.captures == before + 1
    assert out.dtype == f(xi, 3.0).dtype
    close(out, f(xi, 3.0))


def test_recompile_log_names_failing_guard(caplog):
    def f(x, n):
        return x + n

    of = jit_core.optimize(f)
    x = paddle.ones([4])
    with caplog.at_level(logging.INFO, logger="jit_core.recompiles"):
        of(x, 1)
        assert not [r for r in caplog.records if r.name == "jit_core.recompiles"]
        of(x, 2)
    msgs = [r.getMessage() for r in caplog.records if r.name == "jit_core.recompiles"]
    assert len(msgs) == 2
    assert "recompiling f" in msgs[0]
    assert "L['n'] == 1" in msgs[0]
    # automatic dynamic ints: the next capture reads n as an input
    assert "the int L['n'] is an input: its value changed from 1 to 2" in msgs[1]


def test_recompile_limit_falls_back_to_eager_with_warning():
    def f(x, n):
        return x * n

    # dynamic=False: every value of n is a capture of its own (not an input of one graph)
    of = jit_core.optimize(f, recompile_limit=2, dynamic=False)
    x = paddle.full([4, 4], 1.5)
    close(of(x, 1), x * 1)
    close(of(x, 2), x * 2)
    assert of.jit_stats.captures == 2
    with pytest.warns(RuntimeWarning) as record:
        out = of(x, 3)
    close(out, x * 3)
    msgs = [str(w.message) for w in record if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1
    assert "recompile limit (2)" in msgs[0]
    assert "f (" in msgs[0] and "runs eagerly" in msgs[0]
    assert "L['n']" in msgs[0]  # the guard that failed
    reason = of.jit_stats.eager_frames[frame_key(f)]
    assert "recompile limit (2)" in reason and "L['n']" in reason

    # from now on: eager, correct, quiet, and no more captures
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (4, 5, 1, 2):
            close(of(x, n), x * n)
    assert of.jit_stats.captures == 2


def test_recompile_limit_must_be_positive():
    with pytest.raises(ValueError, match="recompile_limit"):
        jit_core.optimize(lambda x: x, recompile_limit=0)


def test_guard_is_readable_code():
    out = jit_core.explain(scaled, paddle.ones([4, 4]))
    assert len(out.guards) == 1
    guard = out.guards[0]
    assert isinstance(guard, str)
    assert "def guard_" in guard
    assert "L['x']" in guard
    # the shape it was captured with, as the compiled check or the Python one reads it
    assert ("(4, 4)" if native.tensor_is() else "[4, 4]") in guard
    assert "G['SCALE']" in guard
    close(out.result, paddle.ones([4, 4]) * SCALE + 1)


def test_full_graph_with_data_dependent_branch_raises():
    def branchy(x):
        if x.sum() > 0:
            return x + 1
        return x - 1

    of = jit_core.optimize(branchy, full_graph=True)
    with pytest.raises(GraphBreakError) as info:
        of(paddle.ones([4]))
    err = info.value
    msg = str(err)
    assert "full_graph=True" in msg
    assert err.category == errors.TENSOR_BRANCH
    assert err.reason in msg
    expected_line = branchy.__code__.co_firstlineno + 1
    assert err.location == f"{__file__}:{expected_line}"
    assert f"{__file__}:{expected_line}" in msg
    assert isinstance(err, jit_core.JitError)


def test_data_dependent_branch_without_full_graph_breaks_the_graph():
    def branchy(x):
        if x.sum() > 0:
            return x + 1
        return x - 1

    of = jit_core.optimize(branchy)
    pos, neg = paddle.ones([4]), -paddle.ones([4])
    close(of(pos), pos + 1)
    close(of(neg), neg - 1)
    assert of.jit_stats.eager_frames == {}
    # the condition's graph, then one resume function per branch, each captured once
    entries = of.jit_stats.entries
    assert entries[frame_key(branchy)] == 1 and len(entries) == 3, entries
    assert all(n == frame_key(branchy) or n.startswith("branchy__resume_at_") for n in entries)
    assert set(entries.values()) == {1}
    report = jit_core.explain(branchy, pos)
    assert report.break_count == 1 and report.breaks[0].graph_break
    assert report.breaks[0].category == errors.TENSOR_BRANCH


def test_threads_with_different_shapes():
    def f(x):
        return paddle.nn.functional.relu(x) * 2 + 1

    of = jit_core.optimize(f, dynamic=False)  # one entry per shape
    shapes = [[2, 3], [4, 4], [3, 1], [1, 4]] * 3
    errors = []
    hooks_left = []
    barrier = threading.Barrier(len(shapes))

    def work(shape):
        try:
            barrier.wait(timeout=30)
            for _ in range(4):
                x = paddle.randn(shape)
                np.testing.assert_allclose(
                    of(x).numpy(), (paddle.nn.functional.relu(x) * 2 + 1).numpy(), rtol=1e-6
                )
            hooks_left.append(not hook_is_off())
        except BaseException as e:  # noqa: BLE001 - reported in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in shapes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert hooks_left == [False] * len(shapes)
    # one entry per distinct shape, never a duplicate from a race
    assert of.jit_stats.entries == {frame_key(f): 4}
    assert of.jit_stats.captures == 4

    # the hook is not left installed here either: a plain function is not captured
    def plain(x):
        return x + 1

    assert hook_is_off()
    before = of.jit_stats.captures
    plain(paddle.ones([4]))
    assert of.jit_stats.captures == before


def test_hook_restored_after_exception_in_optimized_function():
    def raises(x):
        y = x + 1
        raise ValueError(f"boom {int(y.shape[0])}")

    of = jit_core.optimize(raises)
    with pytest.raises(ValueError, match="boom 4"):
        of(paddle.ones([4]))
    assert hook_is_off()
    with pytest.raises(ValueError, match="boom"):  # the eager path, second time round
        of(paddle.ones([4]))
    assert hook_is_off()


def test_hook_restored_after_exception_in_compiled_callee():
    def helper(x, n):
        if n < 0:
            raise KeyError("negative")
        return x * n

    def outer(x, n):
        return helper(x, n) + 1

    of = jit_core.optimize(outer)
    close(of(paddle.ones([4]), 2), paddle.ones([4]) * 2 + 1)
    assert hook_is_off()
    with pytest.raises(KeyError, match="negative"):
        of(paddle.ones([4]), -1)
    assert hook_is_off()
    close(of(paddle.ones([4]), 3), paddle.ones([4]) * 3 + 1)


class ModeNet(paddle.nn.Layer):
    def forward(self, x):
        if self.training:
            return x * 2
        else:
            return x * 3


def test_layer_train_and_eval_never_share_a_graph():
    net = jit_core.optimize(ModeNet())
    x = paddle.ones([4, 4])
    close(net(x), x * 2)
    net.eval()
    close(net(x), x * 3)
    net.train()
    close(net(x), x * 2)
    # switching the wrapped layer directly is seen too
    net._orig_layer.eval()
    close(net(x), x * 3)
    assert net.jit_stats.captures == 2
    assert net.jit_stats.entries == {frame_key(ModeNet.forward): 2}


def test_eval_first_then_train():
    layer = ModeNet()
    layer.eval()
    net = jit_core.optimize(layer)
    x = paddle.ones([4])
    close(net(x), x * 3)
    layer.train()
    close(net(x), x * 2)


class Holder(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)

    def forward(self, x):
        return paddle.nn.functional.relu(self.fc(x))


def test_swapping_a_sublayer_recompiles():
    paddle.seed(1)
    net = jit_core.optimize(Holder())
    x = paddle.randn([4, 4])
    first = net(x)
    close(first, paddle.nn.functional.relu(net.fc(x)))
    assert net.jit_stats.captures == 1

    old_fc = net.fc
    net.fc = paddle.nn.Linear(4, 4)  # goes through to the layer
    assert net._orig_layer.fc is not old_fc
    second = net(x)
    close(second, paddle.nn.functional.relu(net.fc(x)))
    assert not np.allclose(first.numpy(), second.numpy())
    assert net.jit_stats.captures == 2


def test_parameter_update_needs_no_recompile():
    paddle.seed(2)
    net = jit_core.optimize(Holder())
    x = paddle.randn([4, 4])
    net(x)
    net.fc.weight.set_value(paddle.eye(4))
    net.fc.bias.set_value(paddle.zeros([4]))
    close(net(x), paddle.nn.functional.relu(x))
    assert net.jit_stats.captures == 1


def test_reset_forgets_entries():
    def f(x):
        return x - 2

    of = jit_core.optimize(f)
    of(paddle.ones([4]))
    assert of.jit_stats.entries == {frame_key(f): 1}
    of.reset()
    assert of.jit_stats.entries == {}
    assert of.jit_stats.captures == 0
    close(of(paddle.ones([4])), paddle.ones([4]) - 2)
    assert of.jit_stats.captures == 1


def _add_mul(x, y):
    return x + y * 2


_inner = jit_core.optimize(_add_mul)


def _outer(x, y):
    print("a graph break around an optimized call")  # breaks _outer's graph
    return _inner(x, y) * 2


def test_nested_optimize_keeps_each_context_to_its_own_frames(capsys):
    # the inner transformed code keeps _add_mul's file name: the outer hook must still
    # recognise it as generated, not as user code to capture
    x, y = paddle.rand([2, 3]), paddle.rand([2, 3])
    _inner(x, y)
    fast_outer = jit_core.optimize(_outer)
    for _ in range(2):
        close(fast_outer(x, y), _add_mul(x, y) * 2)
    assert _inner.jit_stats.captures == 1
    # _outer breaks at print and at the call of _inner (not traced: another optimize);
    # none of the frames it captured is _inner's code
    assert fast_outer.jit_stats.eager_frames == {}
    assert all(name.startswith("_outer") for name in fast_outer.jit_stats.entries)
    assert len(fast_outer.jit_stats.entries) == 3


def test_which_pinned_expressions_pin_a_number_input_for_good():
    # a loop driver runs a counter loop whole once a capture pins the counter for good
    # (each value a capture); a pin of i % 3 is a few captures, which serve every i
    import operator

    from jit_core import shapes
    from jit_core.sources import LocalSource

    i = ("value", LocalSource("i"))
    three = shapes.const(3)
    for expr in (i, ("neg", i), ("op", operator.add, i, three), ("op", max, i, three)):
        assert [s.name() for s in shapes.pinned_for_good(expr)] == ["L['i']"], expr
    for expr in (("op", operator.mod, i, three), ("op", min, i, three)):
        assert list(shapes.pinned_for_good(expr)) == [], expr
    assert list(shapes.pinned_for_good(("op", operator.lt, i, three))) == []


def test_a_query_of_paddle_state_runs_once_per_check():
    """The expected place (GraphNet samples pass it to ``_C_ops.full``) is asked at every
    call by the guard: once, not once per comparison of its answer."""

    def f(x):
        place = paddle.framework._current_expected_place()
        return paddle._C_ops.add(x, paddle._C_ops.full([2], 1.0, paddle.float32, place))

    x = paddle.rand([2])
    report = jit_core.explain(f, x)
    np.testing.assert_allclose(report.result.numpy(), (x + 1).numpy())
    (guard,) = report.guards
    names = [
        line.split("=")[0].strip("# ").strip()
        for line in guard.splitlines()
        if line.startswith("#") and "_current_expected_place" in line
    ]
    assert len(names) == 1, guard
    assert guard.count(f"{names[0]}()") == 1, guard
    # and the answer is still checked: another place would be another capture
    fast = jit_core.optimize(f)
    fast(x)
    assert fast(x) is not None and fast.jit_stats.captures == 1


def test_the_expected_place_is_compared_by_identity_first():
    """A Place's == costs 0.6 us (pybind): the guard asks whether the query handed out the
    object seen at capture, and only compares an equal one that is another object."""

    def f(x):
        place = paddle.framework._current_expected_place()
        return paddle._C_ops.add(x, paddle._C_ops.full([2], 1.0, paddle.float32, place))

    x = paddle.rand([2])
    (guard,) = jit_core.explain(f, x).guards
    (check,) = [line for line in guard.splitlines() if ":= ___" in line and " is ___" in line]
    assert " == " in check.split(" or ", 1)[1], check
    fast = jit_core.optimize(f)
    fast(x)
    seen = paddle.framework._current_expected_place()
    before = paddle.get_device()
    paddle.set_device("cpu")  # an equal Place (on Paddle 3.3), another object
    try:
        now = paddle.framework._current_expected_place()
        assert now is not seen
        np.testing.assert_allclose(fast(x).numpy(), (x + 1).numpy())
    finally:
        paddle.set_device(before)
    # (Paddle 3.0's CPUPlace has no ==: another object is another place there)
    assert fast.jit_stats.captures == (1 if now == seen else 2), fast.jit_stats


def test_keyword_calls_take_the_cache_hit_path_and_bind_as_eager():
    """``model(**inputs)`` (how GraphNet calls a sample) binds its keywords to positions
    on the cheap path; whatever it cannot bind that way takes the general one."""

    class Net(paddle.nn.Layer):
        def forward(self, a, b):
            return a * 2 - b

    def f(a, b, /, c):
        return a + b * c

    net = Net()
    fast_net, fast_f = jit_core.optimize(net), jit_core.optimize(f)
    a, b, c = paddle.rand([3]), paddle.rand([3]), paddle.rand([3])
    for call in (lambda: fast_net(a, b), lambda: fast_net(b=b, a=a), lambda: fast_net(a, b=b)):
        np.testing.assert_allclose(call().numpy(), net(a, b).numpy())
    np.testing.assert_allclose(fast_f(a, b, c=c).numpy(), f(a, b, c=c).numpy())
    np.testing.assert_allclose(fast_f(a, b, c).numpy(), f(a, b, c).numpy())
    assert fast_net.jit_stats.captures == 1 and fast_f.jit_stats.captures == 1
    # errors are eager's own
    for bad in (lambda: fast_net(a, c=b), lambda: fast_net(a, b, a=a)):
        with pytest.raises(TypeError):
            bad()
    with pytest.raises(TypeError, match="positional"):
        fast_f(a, b=b, c=c)


def test_a_sublayer_is_read_through_its_dict_where_the_interpreter_reads_it_slowly():
    """A layer's attribute read takes ``Layer.__getattr__``'s slot unless the
    interpreter specializes it (3.13; 3.12 unless the dict is split): there the guard
    reads the sublayer's instance dict instead, after one check of its class."""
    from jit_core.bytecode import compat

    net = paddle.nn.Sequential(paddle.nn.Linear(4, 4), paddle.nn.ReLU())
    net.eval()
    x = paddle.rand([2, 4])
    report = jit_core.explain(net, x)
    close(report.result, net(x))
    (guard,) = report.guards
    (name,) = [
        line.split("=")[0].strip("# ").strip()
        for line in guard.splitlines()
        if line.startswith("#") and "= Linear(" in line
    ]
    through_dict = f"= {name}.__dict__" in guard
    assert through_dict is not compat.attribute_reads_specialized(vars(net[0])), guard
    assert (f"type({name}) is " in guard) is through_dict, guard
    assert (f"{name}._forward_pre_hooks" in guard) is not through_dict, guard
    # either way the guard sees a hook added later
    fast = jit_core.optimize(net)
    fast(x)
    net[0].register_forward_post_hook(lambda layer, inputs, out: out * 2)
    close(fast(x), net(x))
    assert fast.jit_stats.captures > 1  # the first entry no longer served
