"""Comparison helpers shared by the conformance tests."""

from __future__ import annotations

import numpy as np
import paddle

from jit_core.kit.onnx import paddle2onnx_missing

#: whether graphs without an ONNX lowering reach the ONNX-based backends, exported by
#: paddle2onnx; where it is missing (Python 3.13) they run on the paddle backend, so what
#: a backend cannot compile of paddle2onnx's models is not met there
THROUGH_PADDLE2ONNX = not paddle2onnx_missing()

#: what each backend documents about float results that differ from eager Paddle's: a
#: looser relative tolerance, and an absolute one relative to the largest |value|
#: (a runtime with other convolution algorithms rounds differently; TVM's schedules sum a
#: convolution in their own tiled order, which drifts most on deep networks: up to 6e-5 of
#: the largest |value| on wide_resnet50_2 with its plain loop nests; TensorRT's GPU kernels,
#: TF32 off, as jit_backend_tensorrt.options.RTOL and SCALED_ATOL, never measured here)
BACKEND_TOLERANCE = {"onnxrt": (1e-4, 2e-5), "tvm": (1e-4, 1e-4), "tensorrt": (1e-3, 1e-4)}
_tolerance = {"rtol": 0.0, "scaled_atol": 0.0}


def use_backend_tolerance(backend: str) -> None:
    rtol, scaled = BACKEND_TOLERANCE.get(backend, (0.0, 0.0))
    _tolerance.update(rtol=rtol, scaled_atol=scaled)


def assert_same(actual, expected, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Structural equality; tensors compared with ``allclose`` and with the same dtype."""
    if isinstance(expected, paddle.Tensor):
        assert isinstance(actual, paddle.Tensor), f"expected a Tensor, got {type(actual)}"
        assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
        assert list(actual.shape) == list(expected.shape), (actual.shape, expected.shape)
        e = expected.numpy()
        if _tolerance["rtol"] and e.dtype.kind == "f" and e.size:
            rtol = max(rtol, _tolerance["rtol"])
            atol = max(atol, _tolerance["scaled_atol"] * float(np.max(np.abs(e))))
        np.testing.assert_allclose(actual.numpy(), e, rtol=rtol, atol=atol)
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected), (type(actual), type(expected))
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e, rtol, atol)
    elif isinstance(expected, dict):
        assert type(actual) is type(expected)
        assert list(actual.keys()) == list(expected.keys())
        for k in expected:
            assert_same(actual[k], expected[k], rtol, atol)
    else:
        assert type(actual) is type(expected) and actual == expected, (actual, expected)
