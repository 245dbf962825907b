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
