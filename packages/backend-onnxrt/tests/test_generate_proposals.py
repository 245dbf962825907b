"""``generate_proposals`` lowered directly (``jit_core.kit.onnx.lowerings_detection``): the
region proposals of Faster R-CNN's RPN, an operation paddle2onnx cannot convert. Its
results' sizes follow the data, and its model is exact only where scores of equal value
cannot change what Paddle returns: a run-time check the backend acts on."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

import jit_core
from jit_core.errors import GraphDeclined
from jit_core.kit.onnx import DEFAULT_OPSET, refuse_runtime_checks, runtime_checks
from jit_core.kit.onnx.direct import MissingLowering, export_direct

pytest.importorskip("onnxruntime")
from jit_backend_onnxrt import backend as ort_backend

N, A, H, W = 2, 3, 6, 5


def anchors_and_variances(dtype="float32"):
    ys, xs = np.meshgrid(np.arange(H) * 16.0, np.arange(W) * 16.0, indexing="ij")
    boxes = [np.stack([xs - s, ys - s, xs + s, ys + s], -1) for s in (8, 16, 32)]
    anchors = paddle.to_tensor(np.stack(boxes, 2).astype(dtype))  # [H, W, A, 4]
    variances = paddle.to_tensor(np.full([H, W, A, 4], 0.5, dtype))
    return anchors, variances


def inputs(seed, dtype="float32", tied=False):
    rng = np.random.default_rng(seed)
    if tied:
        # sigmoid scores saturate: many equal values
        scores = np.round(rng.random([N, A, H, W]) * 4) / 4
    else:
        # distinct scores
        scores = rng.permutation(N * A * H * W).reshape([N, A, H, W]) / (N * A * H * W)
    deltas = rng.standard_normal([N, 4 * A, H, W]) * 0.5
    image = np.array([[96.0, 80.0], [70.0, 64.0]])
    return [paddle.to_tensor(a.astype(dtype)) for a in (scores, deltas, image)]


def proposals(pre, post, threshold, min_size=0.1, pixel_offset=True):
    def fn(scores, deltas, image, anchors, variances):
        rois, probs, num = paddle._C_ops.generate_proposals(
            scores, deltas, image, anchors, variances, pre, post, threshold, min_size, 1.0,
            pixel_offset,
        )  # fmt: skip
        # sizes downstream follow the number of proposals kept
        return rois * 2.0, probs.reshape([-1]), num, rois[:, 2:] - rois[:, :2]

    return fn


def assert_same(got, want, rtol):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=rtol)


@pytest.mark.parametrize(
    "dtype,pre,post,threshold,pixel_offset",
    [
        ("float32", 40, 30, 0.5, True),
        ("float32", 1000, 1000, 0.7, False),  # no cut: every box is a candidate
        ("float32", 30, -1, 0.3, True),  # post_nms_top_n <= 0: every box kept
        ("float64", 40, 30, 0.5, True),
    ],
)
def test_generate_proposals_is_paddles_on_new_data(dtype, pre, post, threshold, pixel_offset):
    fn = proposals(pre, post, threshold, pixel_offset=pixel_offset)
    anchors, variances = anchors_and_variances(dtype)
    compiled = jit_core.optimize(fn, backend="onnxrt")
    failed = ort_backend.stats["checks_failed"]
    counts = set()
    for seed in range(5):
        args = [*inputs(seed, dtype), anchors, variances]
        want = fn(*args)
        assert_same(compiled(*args), want, 1e-5)
        counts.add(tuple(want[2].numpy()))
    assert ort_backend.stats["checks_failed"] == failed, "distinct scores pass the checks"
    assert len(counts) > 1, "the seeds should keep different numbers of proposals"
    report = str(jit_core.explain(fn, *args, backend="onnxrt"))
    assert "Backend: onnxrt" in report and "paddle2onnx" not in report


def test_the_paddle_vision_api_is_lowered_too():
    def fn(scores, deltas, image, anchors, variances):
        rois, probs, num = paddle.vision.ops.generate_proposals(
            scores, deltas, image, anchors, variances, pre_nms_top_n=50, post_nms_top_n=10,
            return_rois_num=True,
        )  # fmt: skip
        return rois + 1.0, probs, num

    args = [*inputs(3), *anchors_and_variances()]
    assert_same(jit_core.optimize(fn, backend="onnxrt")(*args), fn(*args), 1e-5)
    report = str(jit_core.explain(fn, *args, backend="onnxrt"))
    assert "Backend: onnxrt" in report and "paddle2onnx" not in report


@pytest.mark.parametrize("pre", [40, 1000], ids=["tie-at-the-cut", "ties-among-those-kept"])
def test_equal_scores_run_on_paddle_after_the_check_fails(pre):
    fn = proposals(pre, 30, 0.5)
    anchors, variances = anchors_and_variances()
    compiled = jit_core.optimize(fn, backend="onnxrt")
    args = [*inputs(0), anchors, variances]
    assert_same(compiled(*args), fn(*args), 1e-5)
    failed = ort_backend.stats["checks_failed"]
    for seed in range(ort_backend.CHECK_FAILURES_LIMIT + 2):
        tied = [*inputs(seed, tied=True), anchors, variances]
        # the results are Paddle's, whatever order its C++ library gave equal scores
        assert_same(compiled(*tied), fn(*tied), 0)
    assert ort_backend.stats["checks_failed"] - failed == ort_backend.CHECK_FAILURES_LIMIT
    assert_same(compiled(*args), fn(*args), 0)  # now on Paddle alone


def test_no_box_left_gives_one_box_of_zeros():
    fn = proposals(40, 12, 0.5, min_size=500.0)
    args = [*inputs(1), *anchors_and_variances()]
    want = fn(*args)
    assert list(want[2].numpy()) == [1, 1] and float(want[0].abs().sum()) == 0
    assert_same(jit_core.optimize(fn, backend="onnxrt")(*args), want, 0)


def test_the_model_states_its_checks_and_backends_that_ignore_them_refuse_it(capture):
    gm, example = capture(proposals(40, 12, 0.5), *inputs(0), *anchors_and_variances())
    model = export_direct(gm, example, DEFAULT_OPSET)
    names = [o.name for o in model.graph.output]
    assert len(runtime_checks(names)) == 2 * N  # per image: NaN and cut, suppression
    assert runtime_checks(names)[0] == 4  # after the graph's four outputs
    with pytest.raises(
        GraphDeclined, match="run-time checks hold .generate_proposals.*tvm does not act"
    ):
        refuse_runtime_checks(model, "tvm")


def test_an_adaptive_threshold_is_declined_with_its_reason(capture):
    def fn(scores, deltas, image, anchors, variances):
        return paddle._C_ops.generate_proposals(
            scores, deltas, image, anchors, variances, 40, 12, 0.7, 0.1, 0.9, True
        )

    gm, example = capture(fn, *inputs(0), *anchors_and_variances())
    with pytest.raises(MissingLowering, match="eta < 1"):
        export_direct(gm, example, DEFAULT_OPSET)


def test_prior_box_is_a_constant_of_the_shapes(capture):
    def fn(feature, image):
        boxes, variances = paddle._C_ops.prior_box(
            feature, image, [16.0, 24.0], [], [1.0], [0.1, 0.1, 0.2, 0.2], False, False,
            8.0, 8.0, 0.5, False,
        )  # fmt: skip
        return boxes.reshape([-1, 4]) * 2.0, variances

    feature, image = paddle.rand([1, 8, 4, 5]), paddle.rand([1, 3, 32, 40])
    assert_same(jit_core.optimize(fn, backend="onnxrt")(feature, image), fn(feature, image), 0)
    gm, example = capture(fn, feature, image)
    export_direct(gm, example, DEFAULT_OPSET)  # directly: paddle2onnx cannot convert it
