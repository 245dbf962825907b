"""The example lowering plugin is found through its entry point and exports flip."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

import jit_core

ort = pytest.importorskip("onnxruntime")


def test_installed_plugin_is_listed_and_serves_flip():
    import jit_onnx_flip_example

    from jit_core.kit.onnx.direct import lowerings

    version = jit_onnx_flip_example.__version__  # the metadata's, which the listing reads
    assert ("flip_example", "jit-onnx-flip-example", version) in jit_core.list_plugins()
    assert lowerings()[paddle.flip].__module__ == "jit_onnx_flip_example"


@pytest.mark.parametrize("axis", [0, -1, [0, 1], (2, 0)])
def test_flip_is_exported_directly_and_equals_eager(axis):
    from jit_core.kit.onnx import DEFAULT_OPSET
    from jit_core.kit.onnx.direct import export_direct

    def f(x):
        return paddle.flip(x, axis) * 2 + x.flip(1)

    values = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-30, -7.0, 3.5] * 3
    x = paddle.to_tensor(np.array(values, dtype="float32").reshape([2, 3, 4]))
    gm = jit_core.capture(f, x)
    model = export_direct(gm, [x], DEFAULT_OPSET)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    np.testing.assert_array_equal(got, f(x).numpy())


def test_on_the_onnxrt_backend_nothing_goes_through_paddle2onnx():
    x = paddle.rand([2, 5])
    with paddle.no_grad():
        report = jit_core.explain(lambda t: paddle.flip(t, 1) + 1, x, backend="onnxrt")
    assert report.graphs[0].backend == "onnxrt"
    np.testing.assert_array_equal(report.result.numpy(), (paddle.flip(x, 1) + 1).numpy())
