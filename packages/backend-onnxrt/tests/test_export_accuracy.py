"""What the onnxrt backend computes is what eager Paddle computes: activations whose
attributes paddle2onnx 2.1 drops or misreads are spelt out before the export, and the check
after each export refuses a model outside the documented tolerance."""

from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest
from jit_backend_onnxrt.backend import RTOL, OnnxRuntimeError, OrtGraph, validate

import jit_core
from jit_core.cache.disk import ENV_VAR
from jit_core.kit.onnx import check_against_paddle, unavailable_reason

#: where the ONNX export cannot run (onnx missing), the check's own tests run without one
WHY_NOT = unavailable_reason()
needs_export = pytest.mark.skipif(
    bool(WHY_NOT), reason=f"the ONNX export cannot run here: {WHY_NOT}"
)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "cache"))
    return tmp_path / "cache"


def inputs():
    # |x| between 1 and 4 is where tanh-approximated GELU is furthest from exact GELU; below
    # -7, log(sigmoid(x)) loses digits
    return paddle.linspace(-9.0, 9.0, 120).reshape([4, 30])


def on_onnxrt(fn, x):
    fast = jit_core.optimize(fn, backend="onnxrt")
    with paddle.no_grad():
        out = fast(x)
    (entry,) = [e for c in fast._ctx.cache.values() for e in c.entries]
    assert isinstance(entry.built, OrtGraph), "ran on ONNX Runtime, not on a fallback"
    return out


def max_diff(a, b) -> float:
    return float(np.max(np.abs(a.numpy().astype(np.float64) - b.numpy().astype(np.float64))))


class Wrapped(paddle.nn.Layer):
    """A layer whose activation is a sublayer: the graph calls it as ``call_module``."""

    def __init__(self, act):
        super().__init__()
        self.act = act
        self.eval()  # inference: a layer in training mode runs on the paddle backend

    def forward(self, x):
        return self.act(x) * 2.0


@needs_export
def test_gelu_approximate_equals_eager():
    # paddle2onnx 2.1 exports it as exact GELU: up to 4.7e-4 away, and the old check let it
    # through
    x = inputs()
    assert max_diff(F.gelu(x, approximate=True), F.gelu(x)) > 4e-4  # what was lost
    for fn in (
        lambda t: F.gelu(t, approximate=True),
        lambda t: F.gelu(t, True),
        Wrapped(paddle.nn.GELU(approximate=True)).act,
        Wrapped(paddle.nn.GELU(approximate=True)),
    ):
        assert max_diff(on_onnxrt(fn, x), fn(x)) < 1e-5


def test_the_gelu_layer_is_a_call_module_in_the_graph():
    gm = jit_core.capture(Wrapped(paddle.nn.GELU(approximate=True)), inputs())
    assert [n.op for n in gm.graph.nodes if n.op.startswith("call")][0] == "call_module"


@needs_export
@pytest.mark.parametrize(
    "fn",
    [
        lambda t: F.leaky_relu(t),
        lambda t: F.leaky_relu(t, 0.2),
        Wrapped(paddle.nn.LeakyReLU(0.3)),
        lambda t: F.hardtanh(t, -0.5, 2.0),
        Wrapped(paddle.nn.Hardtanh(-0.3, 0.6)),
        lambda t: F.softplus(t),
        lambda t: F.softplus(t * 20.0),
        lambda t: F.softplus(t, beta=2.0, threshold=5.0),
        Wrapped(paddle.nn.Softplus(0.5, 3.0)),
        lambda t: F.celu(t, 2.0),
        Wrapped(paddle.nn.CELU(0.7)),
        lambda t: F.log_sigmoid(t),
        lambda t: F.log_sigmoid(t * 20.0),
        Wrapped(paddle.nn.LogSigmoid()),
    ],
    ids=[
        "leaky_relu",
        "leaky_relu_slope",
        "LeakyReLU",
        "hardtanh_bounds",
        "Hardtanh",
        "softplus",
        "softplus_wide",
        "softplus_beta_threshold",
        "Softplus",
        "celu",
        "CELU",
        "log_sigmoid",
        "log_sigmoid_wide",
        "LogSigmoid",
    ],
)
def test_activations_paddle2onnx_gets_wrong_equal_eager(fn):
    # each was refused (a wrong slope or bounds, an abort, log(sigmoid(x)) = -inf) or lost
    # precision (log_sigmoid: 5e-5) before it was spelt out
    x = inputs()
    got, expected = on_onnxrt(fn, x), fn(x)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


def perturbed(gm, relative):
    def run(*args):
        return tuple(t * (1.0 + relative) for t in gm.forward(*args))

    return run


def test_the_check_refuses_what_the_documented_tolerance_does_not_allow():
    x = inputs()
    gm = jit_core.capture(lambda t: F.gelu(t) * 3.0, x)
    # 5e-4 relative: what gelu(approximate=True) exported as exact GELU is off by
    with pytest.raises(OnnxRuntimeError, match="differs from Paddle's result"):
        validate(perturbed(gm, 5e-4), gm, [x])
    # rounding well inside the documented tolerance passes
    validate(perturbed(gm, RTOL / 4), gm, [x])


def test_the_check_takes_its_tolerance_from_the_caller():
    x = inputs()
    gm = jit_core.capture(lambda t: t * 3.0 - 1.0, x)
    run = perturbed(gm, 5e-4)
    check_against_paddle(run, gm, [x], RuntimeError, "test", rtol=1e-3, scaled_atol=0.0)
    with pytest.raises(RuntimeError, match=r"allowed: rtol 0.0001 \+ 0.00056"):
        check_against_paddle(run, gm, [x], RuntimeError, "test", rtol=1e-4, scaled_atol=2e-5)
    # the absolute part scales with the largest magnitude of Paddle's result
    check_against_paddle(run, gm, [x], RuntimeError, "test", rtol=0.0, scaled_atol=1e-3)
