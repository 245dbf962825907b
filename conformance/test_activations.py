"""Activations with attributes: every result equals eager Paddle, captured as one graph.

ONNX-based backends once exported some of them wrongly without a word:
``gelu(x, approximate=True)`` as exact GELU (up to 4.7e-4 off), ``leaky_relu`` with another
slope, ``hardtanh`` with the default bounds, ``log_sigmoid`` as ``log(sigmoid(x))``. Each is
checked as a function call and as a sublayer (a module call in the graph).
"""

from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import jit_core

from .helpers import assert_same


def _inputs():
    # |x| between 1 and 3 is where tanh-approximated GELU is furthest from exact GELU; the
    # largest |value| stays small, so a backend's tolerance scaled by it stays tight
    return paddle.linspace(-3.0, 3.0, 120).reshape([4, 30])


def gelu_tanh(x):
    return F.gelu(x, approximate=True)


def gelu_tanh_positional(x):
    return F.gelu(x, True)


def gelu_exact(x):
    return F.gelu(x)


def silu(x):
    return F.silu(x)


def swish(x):
    return F.swish(x)


def hardswish(x):
    return F.hardswish(x)


def mish(x):
    return F.mish(x)


def softplus_default(x):
    return F.softplus(x)


def softplus_beta_threshold(x):
    return F.softplus(x, beta=2.0, threshold=5.0)


def softplus_wide(x):
    return F.softplus(x * 20.0)


def leaky_relu_default(x):
    return F.leaky_relu(x)


def leaky_relu_slope(x):
    return F.leaky_relu(x, 0.2)


def elu_alpha(x):
    return F.elu(x, alpha=0.5)


def celu_alpha(x):
    return F.celu(x, alpha=2.0)


def selu_custom(x):
    return F.selu(x, scale=1.2, alpha=1.5)


def hardsigmoid_custom(x):
    return F.hardsigmoid(x, slope=0.25, offset=0.4)


def hardtanh_default(x):
    return F.hardtanh(x)


def hardtanh_bounds(x):
    return F.hardtanh(x, min=-0.5, max=2.0)


def log_sigmoid(x):
    return F.log_sigmoid(x)


def log_sigmoid_wide(x):
    return F.log_sigmoid(x * 20.0)


FUNCTIONS = [
    gelu_tanh,
    gelu_tanh_positional,
    gelu_exact,
    silu,
    swish,
    hardswish,
    mish,
    softplus_default,
    softplus_beta_threshold,
    softplus_wide,
    leaky_relu_default,
    leaky_relu_slope,
    elu_alpha,
    celu_alpha,
    selu_custom,
    hardsigmoid_custom,
    hardtanh_default,
    hardtanh_bounds,
    log_sigmoid,
    log_sigmoid_wide,
]


@pytest.mark.parametrize("fn", FUNCTIONS, ids=[f.__name__ for f in FUNCTIONS])
def test_activation_function_equals_eager_in_one_graph(fn, backend):
    x = _inputs()
    fast = jit_core.optimize(fn, backend=backend)
    assert_same(fast(x), fn(x))
    stats = fast.jit_stats
    assert stats.compiled == 1 and not stats.eager_frames, stats


class Activation(paddle.nn.Layer):
    """``2 * act(x)`` with the activation a sublayer, kept under a name of its own (each
    case is its own graph code)."""

    def __init__(self, name, act):
        super().__init__()
        self._act_name = name
        setattr(self, name, act)
        self.eval()

    def forward(self, x):
        return getattr(self, self._act_name)(x) * 2.0


LAYERS = {
    "GELU_tanh": lambda: paddle.nn.GELU(approximate=True),
    "GELU_exact": lambda: paddle.nn.GELU(),
    "LeakyReLU_slope": lambda: paddle.nn.LeakyReLU(0.3),
    "Softplus_beta_threshold": lambda: paddle.nn.Softplus(0.5, 3.0),
    "CELU_alpha": lambda: paddle.nn.CELU(0.7),
    "ELU_alpha": lambda: paddle.nn.ELU(2.0),
    "Hardtanh_bounds": lambda: paddle.nn.Hardtanh(-0.3, 0.6),
    "LogSigmoid": lambda: paddle.nn.LogSigmoid(),
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_activation_layer_equals_eager_in_one_graph(name, backend):
    net = Activation(name.lower(), LAYERS[name]())
    x = _inputs()
    fast = jit_core.optimize(net, backend=backend)
    assert_same(fast(x), net(x))
    stats = fast.jit_stats
    assert stats.compiled == 1 and not stats.eager_frames, stats


def test_an_activation_layer_is_a_module_call_in_the_graph():
    gm = jit_core.capture(Activation("gelu_tanh", paddle.nn.GELU(approximate=True)), _inputs())
    calls = [(n.op, n.target) for n in gm.graph.nodes if n.op.startswith("call")]
    assert calls[0] == ("call_module", "gelu_tanh"), calls


def _non_finite_inputs():
    # Paddle's relu is ``x > 0 ? x : 0``: NaN, -inf and -0.0 all become 0.0, where ONNX's
    # Relu keeps the NaN (and the sign of zero): every output here is finite in eager Paddle
    x = _inputs().numpy()
    x[0, :6] = [np.nan, -np.inf, -0.0, np.nan, -3.0, np.nan]
    return paddle.to_tensor(x)


def relu_function(x):
    return F.relu(x) * 2.0


def relu_in_place(x):
    y = x * 1.0
    F.relu_(y)
    return y - 1.0


class ConvRelu(paddle.nn.Layer):
    """A NaN in the image spreads through the first convolution; the ReLU after it turns
    every NaN back into 0, so eager Paddle's output has none."""

    def __init__(self):
        super().__init__()
        self.conv = paddle.nn.Conv2D(2, 4, 3, padding=1)
        self.relu = paddle.nn.ReLU()
        self.head = paddle.nn.Conv2D(4, 2, 1)

    def forward(self, x):
        return self.head(self.relu(self.conv(x)))


RELUS = [relu_function, relu_in_place]


@pytest.mark.parametrize("fn", RELUS, ids=[f.__name__ for f in RELUS])
def test_relu_of_nan_and_negative_zero_is_zero_as_in_eager(fn, backend):
    x = _non_finite_inputs()
    expected = fn(x)
    assert np.isfinite(expected.numpy()).all()
    fast = jit_core.optimize(fn, backend=backend)
    fast(_inputs())  # compiled (and checked) on finite values, as a model would be
    assert_same(fast(x), expected)
    assert fast.jit_stats.compiled == 1


def test_relu_after_a_convolution_zeroes_the_nans_it_spreads(backend):
    paddle.seed(5)
    net = ConvRelu()
    net.eval()
    image = paddle.rand([1, 2, 8, 8])
    bad = image.numpy()
    bad[0, 0, 3, 3] = np.nan
    bad[0, 1, 5, 1] = np.nan
    bad = paddle.to_tensor(bad)
    with paddle.no_grad():
        expected = net(bad)
        assert np.isfinite(expected.numpy()).all()
        fast = jit_core.optimize(net, backend=backend)
        fast(image)
        assert_same(fast(bad), expected)
