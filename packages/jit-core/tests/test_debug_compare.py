"""debug.compare(): a wrong pass, a wrong lowering, eager's own float32 error and a correct
graph, each told apart from the numbers it measures."""

from __future__ import annotations

import json
import operator

import numpy as np
import paddle
import pytest

import jit_core
from jit_core import debug
from jit_core.passes import graph_pass, replace_pattern
from jit_core.plugins import register_plugin, unregister_plugin


def _times_two_becomes_three():
    @graph_pass("times_three", default=False)
    def times_three(gm, ctx):
        """A wrong rewrite: x * 2 -> x * 3."""
        return len(replace_pattern(gm, lambda x: x * 2, lambda x: x * 3))

    return times_three


def test_correct_graph_is_within_tolerance_with_its_numbers():
    def f(x, w):
        return paddle.tanh(paddle.matmul(x, w)) * 2 + 1

    paddle.seed(0)
    x, w = paddle.rand([4, 8]), paddle.rand([8, 3])
    report = debug.compare(f, x, w)
    assert report.ok and len(report.graphs) == 1
    g = report.graphs[0]
    assert g.verdict == "ok" and g.culprit is None and g.compile_error is None
    (out,) = g.outputs
    assert out.dtype == "float32" and out.shape == [4, 3]
    # float32 against float64: rounding-sized, measured, not zero by construction
    assert 0 < out.eager_error < 1e-6
    assert out.compiled_error is not None and out.compiled_error <= out.tolerance
    ref = np.tanh(x.numpy().astype("float64") @ w.numpy().astype("float64")) * 2 + 1
    assert out.reference_max == pytest.approx(np.abs(ref).max(), rel=1e-12)
    np.testing.assert_allclose(report.result.numpy(), f(x, w).numpy(), rtol=1e-6)
    text = str(report)
    assert "Graph 1: f (" in text and ": ok" in text and "compiled error" in text
    data = json.loads(json.dumps(report.to_json()))
    assert data["ok"] is True and data["graphs"][0]["outputs"][0]["ok"] is True


def test_a_wrong_pass_is_named():
    bad = _times_two_becomes_three()

    def f(x):
        return paddle.tanh(x) * 2 + x

    x = paddle.rand([3, 5])
    report = debug.compare(f, x, passes=["cse", bad, "dce"])
    assert not report.ok
    g = report.graphs[0]
    assert g.passes == ["cse", "times_three", "dce"]
    assert g.verdict == "over tolerance: pass times_three"
    assert g.culprit is not None and g.culprit.kind == "pass"
    assert g.culprit.name == "times_three"
    (out,) = g.outputs
    # tanh(x) in (0, 0.77) for x in [0, 1): x * 3 instead of x * 2 is far off
    assert out.compiled_error > 0.1 > out.tolerance
    assert "Culprit: pass 'times_three'" in str(report)
    assert json.loads(json.dumps(report.to_json()))["graphs"][0]["culprit"]["name"] == (
        "times_three"
    )


def test_a_wrong_plugin_pass_in_the_default_pipeline_is_named():
    bad = _times_two_becomes_three()

    class Plugin:
        @jit_core.hookimpl
        def jit_register_passes(self, register):
            register(type(bad)(**{**bad.__dict__, "default": True, "name": "times_three_plugin"}))

    register_plugin(Plugin(), name="test-debug-compare-pass")
    try:
        report = debug.compare(lambda x: paddle.exp(x) * 2, paddle.rand([4]))
    finally:
        unregister_plugin("test-debug-compare-pass")
    g = report.graphs[0]
    assert "times_three_plugin" in g.passes and len(g.passes) > 1
    assert g.culprit is not None and (g.culprit.kind, g.culprit.name) == (
        "pass",
        "times_three_plugin",
    )


def test_eager_float32_rounding_is_not_blamed_on_the_jit():
    def f(x):
        # float32 keeps ~3 decimals of x next to 1e4: eager itself is far from float64
        return paddle.log(paddle.exp((x + 1e4) - 1e4) + 1.0)

    paddle.seed(1)
    x = paddle.rand([1000])
    report = debug.compare(f, x)
    g = report.graphs[0]
    (out,) = g.outputs
    assert out.eager_error > 10 * report.rtol  # eager's own float32 error, measured
    assert out.compiled_error is not None and out.compiled_error > report.rtol
    assert out.compiled_error <= report.eager_factor * out.eager_error == out.tolerance
    assert report.ok and g.culprit is None
    assert g.verdict.startswith("ok: eager's own error"), str(report)
    assert "the JIT is not to blame" in str(report)


def test_eager_own_error_verdict_when_compiled_differs_from_eager():
    # a tolerance finer than float32's own error: the compiled graph differs from eager's
    # float32 (it sums in another order, or equals it), eager is as far from float64
    def f(x):
        return paddle.log(paddle.exp(x * 10.0) + 1.0).sum()

    paddle.seed(1)
    x = paddle.rand([200000]) * 4.0 + 1.0
    report = debug.compare(f, x, rtol=1e-12)
    g = report.graphs[0]
    (out,) = g.outputs
    assert out.eager_error > 1e-12
    assert g.verdict.startswith("ok: eager's own error"), str(report)


def _wrong_mul_for_float64(orig):
    def lower(ex, a):
        result = orig(ex, a)
        if ex.dtype(a["x"]) == "float64":
            # wrong only for float64 operands: x * y + x
            return ex.op("Add", [result, ex.input(a["x"], "float64")])
        return result

    return lower


def test_a_lowering_wrong_for_one_dtype_is_named():
    pytest.importorskip("onnxruntime", reason="the onnxrt backend needs onnxruntime")
    if "onnxrt" not in jit_core.backends():
        pytest.skip("the onnxrt backend (jit-backend-onnxrt) is not installed")
    from jit_core.kit.onnx.direct import lowerings

    orig = lowerings()[operator.mul]

    class Plugin:
        @jit_core.hookimpl
        def jit_register_onnx_lowerings(self, register):
            register(operator.mul, _wrong_mul_for_float64(orig))

    def f(x):
        y = x * x  # float32: lowered right
        z = y.astype("float64")
        w = z * z  # float64: lowered wrong
        return w.astype("float32") + 1.0

    x = paddle.rand([2, 3]) + 0.5
    register_plugin(Plugin(), name="test-debug-compare-lowering")
    try:
        # the test's lowering is in force
        assert lowerings()[operator.mul].__module__ == __name__
        report = debug.compare(f, x, backend="onnxrt", cache=False)
    finally:
        unregister_plugin("test-debug-compare-lowering")
    # the registry is as it was: jit-core's own lowering again
    assert lowerings()[operator.mul].__module__ == orig.__module__ != __name__
    g = report.graphs[0]
    assert not g.ok, str(report)
    culprit = g.culprit
    assert culprit is not None and culprit.kind == "node", str(report)
    assert culprit.op == "call_function operator.mul"
    assert culprit.input_dtypes == ["float64", "float64"]
    assert culprit.location is not None and culprit.location.endswith(
        str(f.__code__.co_firstlineno + 3)
    )
    assert culprit.source_line == "w = z * z  # float64: lowered wrong"
    assert "Culprit: node" in str(report) and "operator.mul" in str(report)


def test_compare_accepts_what_optimize_returned_and_refuses_unknown_passes():
    def f(x):
        return x * 2

    fast = jit_core.optimize(f, passes=())
    report = debug.compare(fast, paddle.rand([3]))
    assert report.ok and report.graphs[0].passes == []
    with pytest.raises(jit_core.passes.PassError):
        debug.compare(f, paddle.rand([3]), disable_passes=["no_such_pass"])
