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
from jit_backend_onnxrt import backend as ort_backend


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


class ConvRelu(paddle.nn.Layer):
    """A convolution, a batch norm and a residual, each followed by a relu (what ONNX
    Runtime fuses), and a relu of something else."""

    def __init__(self):
        super().__init__()
        self.conv = paddle.nn.Conv2D(3, 4, 3, padding=1)
        self.bn = paddle.nn.BatchNorm2D(4)
        self.conv2 = paddle.nn.Conv2D(4, 4, 1)

    def forward(self, x, y):
        a = paddle.nn.functional.relu(self.bn(self.conv(x)))
        b = paddle.nn.functional.relu(self.conv2(a) + a)
        return b, paddle.nn.functional.relu(y * 2.0)


def test_a_convolutions_relu_is_fused_and_checked_for_nan():
    paddle.seed(0)
    net = ConvRelu()
    net.eval()
    x, y = paddle.rand([1, 3, 72, 72]) - 0.5, paddle.to_tensor([-0.0, 1.0, float("nan")])
    with paddle.no_grad():
        compiled = jit_core.optimize(net, backend="onnxrt")
        got = compiled(x, y)
        # the relu of y * 2 is exact (Where): NaN and -0.0 give 0.0 there without a check
        np.testing.assert_array_equal(np.signbit(got[1].numpy()), [False, False, False])
        np.testing.assert_allclose(got[0].numpy(), net(x, y)[0].numpy(), rtol=1e-5, atol=1e-6)
        before = ort_backend.stats["checks_failed"]
        bad = x.clone()
        bad[0, 1, 2, 2] = float("nan")
        same(compiled(bad, y), net(bad, y))  # Paddle's relu turned the NaN into 0
        assert ort_backend.stats["checks_failed"] == before + 1


def test_relus_the_backend_fuses_are_onnx_relus(capture):
    from jit_core.kit.onnx.direct import export_direct

    net = ConvRelu()
    net.eval()
    gm, example = capture(net, paddle.rand([1, 3, 72, 72]), paddle.rand([3]))
    checked = export_direct(gm, example, 17, acts_on_checks=True)
    plain = export_direct(gm, example, 17)
    ops = [n.op_type for n in checked.graph.node]
    assert ops.count("Relu") == 2 and ops.count("Where") == 1  # y * 2's relu stays exact
    assert [n.op_type for n in plain.graph.node].count("Relu") == 0
    assert len(checked.graph.output) == len(plain.graph.output) + 1  # one NaN check
    # a small convolution keeps the exact relu: the pass the fusion saves is not worth a
    # check (and the unbound outputs it costs)
    gm, example = capture(net, paddle.rand([1, 3, 8, 8]), paddle.rand([3]))
    small = export_direct(gm, example, 17, acts_on_checks=True)
    assert [n.op_type for n in small.graph.node].count("Relu") == 0
    assert len(small.graph.output) == len(plain.graph.output)


def test_sessions_of_fixed_shapes_check_alike():
    paddle.seed(1)
    net = ConvRelu()
    net.eval()
    y = paddle.rand([3])
    with paddle.no_grad():
        compiled = jit_core.optimize(net, backend="onnxrt")
        for batch in (1, 2, 3, 3, 3, 3):  # dynamic from the second size; 3 gets its own session
            x = paddle.rand([batch, 3, 72, 72])
            np.testing.assert_allclose(
                compiled(x, y)[0].numpy(), net(x, y)[0].numpy(), rtol=1e-5, atol=1e-6
            )
        before = ort_backend.stats["checks_failed"]
        bad = paddle.rand([3, 3, 72, 72])
        bad[2, 0, 1, 1] = float("nan")
        same(compiled(bad, y), net(bad, y))
        assert ort_backend.stats["checks_failed"] == before + 1
