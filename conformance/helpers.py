"""Comparison helpers shared by the conformance tests."""

from __future__ import annotations

import numpy as np
import paddle


def assert_same(actual, expected, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Structural equality; tensors compared with ``allclose`` and with the same dtype."""
    if isinstance(expected, paddle.Tensor):
        assert isinstance(actual, paddle.Tensor), f"expected a Tensor, got {type(actual)}"
        assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
        assert list(actual.shape) == list(expected.shape), (actual.shape, expected.shape)
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=rtol, atol=atol)
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
