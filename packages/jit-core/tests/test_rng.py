"""``jit_core.rng.preserved()``: what runs inside it leaves every generator as it found it,
the named states of Paddle's model-parallel RNG tracker included."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

from jit_core import rng


def test_the_cpu_stream_is_put_back():
    paddle.seed(7)
    want = paddle.rand([6]).numpy()
    paddle.seed(7)
    with rng.preserved():
        paddle.rand([100])
        paddle.nn.functional.dropout(paddle.ones([50]), 0.5)
    np.testing.assert_array_equal(paddle.rand([6]).numpy(), want)


def test_it_is_put_back_when_the_block_raises():
    paddle.seed(8)
    want = paddle.randn([3]).numpy()
    paddle.seed(8)
    with pytest.raises(RuntimeError), rng.preserved():
        paddle.randn([10])
        raise RuntimeError("a failed build")
    np.testing.assert_array_equal(paddle.randn([3]).numpy(), want)


def test_the_states_of_the_model_parallel_tracker_are_put_back(monkeypatch):
    mpu = pytest.importorskip("paddle.distributed.fleet.layers.mpu.random")
    tracker = mpu.RNGStatesTracker()
    monkeypatch.setattr(mpu, "RNG_STATE_TRACKER", tracker)
    paddle.seed(9)
    tracker.add("model_parallel_rng", 1234)

    def draws():
        with tracker.rng_state("model_parallel_rng"):
            inside = paddle.rand([4]).numpy()
        return inside, paddle.rand([4]).numpy()

    before = paddle.get_rng_state()
    states = tracker.get_states_tracker()
    want = draws()
    paddle.set_rng_state(before)
    tracker.set_states_tracker(states)
    with rng.preserved():
        draws()
        with tracker.rng_state("model_parallel_rng"):
            paddle.rand([40])
    got = draws()
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_draws_end_where_only_the_followed_operations_drew():
    paddle.seed(9)
    draws = rng.Draws()
    draws.before()
    paddle.rand([5])
    draws.after("rand node")
    draws.before()
    paddle.nn.functional.dropout(paddle.ones([8]), 0.5)
    draws.after("dropout node")
    end = draws.end()
    assert end is not None and draws.nodes == ["rand node", "dropout node"]
    want = paddle.rand([4]).numpy()
    end.restore()
    np.testing.assert_array_equal(paddle.rand([4]).numpy(), want)


@pytest.mark.parametrize("where", ["between two draws", "after the last"])
def test_draws_know_nothing_where_something_else_drew(where):
    draws = rng.Draws()
    draws.before()
    paddle.rand([5])
    draws.after("rand node")
    paddle.randn([2])  # (not followed: a layer made in the frame, a retried inline)
    if where == "between two draws":
        draws.before()
        paddle.rand([5])
        draws.after("second rand node")
    assert draws.end() is None
