"""Lowerings exact only for some data, through the onnxrt backend: the model states the
condition as a run-time check, and a call where it fails is computed by Paddle (which
also raises Paddle's own error where Paddle raises)."""

from __future__ import annotations

import numpy as np
import paddle
import pytest
from paddle import _C_ops

import jit_core

pytest.importorskip("onnxruntime")
from jit_backend_onnxrt import backend as ort_backend  # noqa: E402


def same(got, want):
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def runs(fn, args, failing):
    """Call the compiled ``fn`` on ``args``, then on each of ``failing`` (data that fails
    its check): Paddle's results every time, one failed check per failing call."""
    compiled = jit_core.optimize(fn, backend="onnxrt")
    same(compiled(*args), fn(*args))
    before = ort_backend.stats["checks_failed"]
    for other in failing:
        same(compiled(*other), fn(*other))
    assert ort_backend.stats["checks_failed"] - before == len(failing)
    assert "paddle2onnx" not in str(jit_core.explain(fn, *args, backend="onnxrt"))
    return compiled


def test_topk_with_ties_or_nan_runs_on_paddle():
    def fn(x):
        values, indices = _C_ops.topk(x * 1.0, 3, -1, True, True)
        return values, indices

    distinct = paddle.to_tensor(np.random.default_rng(0).permutation(40).reshape(4, 10) * 0.5)
    distinct = distinct.astype("float32")
    tied = paddle.to_tensor([[5.0, 1, 5, 2, 5, 0, 5, 3, 1, 1]] * 4)  # four equal maxima
    nan = distinct.clone()
    nan[1, 3] = float("nan")
    runs(fn, [distinct], [[tied], [nan]])


def test_topk_smallest_along_an_inner_axis():
    def fn(x):
        return _C_ops.topk(x, 2, 0, False, True)

    x = paddle.to_tensor(np.random.default_rng(1).permutation(30).reshape(6, 5).astype("float32"))
    runs(fn, [x], [])


def test_integer_floor_division_and_remainder_round_toward_minus_infinity():
    def fn(a, b):
        return _C_ops.floor_divide(a, b), _C_ops.remainder(a, b)

    a = paddle.to_tensor([-7, 7, -7, 7, 0, -1, 9, -9])
    b = paddle.to_tensor([2, -2, -2, 2, 3, 5, 3, 4])
    compiled = runs(fn, [a, b], [])
    with pytest.raises(Exception, match="division by zero"):
        # Paddle's error, where ONNX Runtime would have crashed
        compiled(a, paddle.to_tensor([2, 1, 1, 0, 1, 1, 1, 1]))


def test_one_hot_outside_its_classes_raises_as_paddle_does():
    def fn(x):
        return _C_ops.one_hot(x, 5) * 2.0

    compiled = runs(fn, [paddle.to_tensor([0, 4, 2, 2])], [])
    with pytest.raises(Exception, match="one_hot|num_classes|depth|less than"):
        compiled(paddle.to_tensor([0, 5, 2, 2]))


def test_full_with_tensor_reads_its_shape_when_the_model_runs():
    def fn(x, value):
        return _C_ops.full_with_tensor(value, _C_ops.shape64(x), paddle.float32) + x

    runs(fn, [paddle.rand([3, 4]), paddle.to_tensor([2.5])], [])
