"""The paddle backend lowers API calls to the kernels their wrappers call
(``jit_core.kernel_calls``): every rule gives eager's values bit for bit, on each
configuration its wrapper normalizes; gradients match; what a rule cannot take, and
graphs that cannot be checked by running them twice, run as captured."""

from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import jit_core
from jit_core import kernel_calls

pytestmark = pytest.mark.skipif(
    bool(kernel_calls.why_not_lowered()), reason=kernel_calls.why_not_lowered() or "-"
)


def rand(*shape):
    return paddle.rand(list(shape))


def backend_line(fn, *args) -> str:
    out = jit_core.explain(fn, *args)
    assert out.graph_count == 1, str(out)
    return out.graphs[0].backend


def assert_bitwise(got, expected):
    got = got if isinstance(got, (tuple, list)) else [got]
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_array_equal(g.numpy(), e.numpy())


def check_lowered(fn, args, api: str):
    """``fn`` lowered (``api`` named in explain) and equal to eager bit for bit."""
    line = backend_line(fn, *args)
    assert "run their kernels directly" in line and api in line, line
    expected = fn(*args)
    opt = jit_core.optimize(fn)
    assert_bitwise(opt(*args), expected)
    assert_bitwise(opt(*args), expected)  # the cache hit runs the lowered code too


CONV = [
    dict(),
    dict(stride=2, padding=1),
    dict(padding="SAME"),
    dict(padding="VALID", dilation=2),
    dict(padding=[1, 2]),
    dict(padding=[1, 0, 2, 1]),
    dict(groups=2),
    dict(bias=False),
]


@pytest.mark.parametrize("kw", CONV, ids=[str(k) for k in CONV])
@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_conv2d(kw, data_format):
    kw = dict(kw)
    bias = rand(6) if kw.pop("bias", True) else None
    groups = kw.get("groups", 1)
    x = rand(2, 4, 9, 9) if data_format == "NCHW" else rand(2, 9, 9, 4)
    w = rand(6, 4 // groups, 3, 3)

    def f(x, w, b):
        return F.relu(F.conv2d(x, w, b, data_format=data_format, **kw))

    check_lowered(f, [x, w, bias], "conv2d")


@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_depthwise_conv2d(data_format, with_bias):
    x = rand(1, 8, 10, 10) if data_format == "NCHW" else rand(1, 10, 10, 8)
    w, b = rand(8, 1, 3, 3), rand(8) if with_bias else None

    def f(x, w, b):
        return F.conv2d(x, w, b, padding=1, groups=8, data_format=data_format)

    check_lowered(f, [x, w, b], "conv2d")


@pytest.mark.parametrize("with_bias", [True, False])
def test_linear(with_bias):
    def f(x, w, b):
        return F.linear(x, w, b) * 2

    check_lowered(f, [rand(3, 5, 8), rand(8, 4), rand(4) if with_bias else None], "linear")


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(use_global_stats=True, epsilon=1e-3),
        dict(data_format="NHWC"),
        dict(affine=False),
    ],
    ids=str,
)
def test_batch_norm_inference(kw):
    kw = dict(kw)
    affine = kw.pop("affine", True)
    x = rand(2, 3, 4, 5) if kw.get("data_format") != "NHWC" else rand(2, 4, 5, 3)
    m, v = rand(3), rand(3) + 0.5
    wb = (rand(3), rand(3)) if affine else (None, None)

    def f(x, m, v, w, b):
        return F.batch_norm(x, m, v, w, b, training=False, **kw)

    check_lowered(f, [x, m, v, *wb], "batch_norm")


def test_batch_norm_that_updates_statistics_is_never_lowered():
    """A training batch norm moves its running statistics: it stays as captured (its
    neighbours are lowered), and the statistics move as eager's, once per call."""
    x, m, v = rand(4, 3), paddle.zeros([3]), paddle.ones([3])

    def f(x, m, v):
        return F.relu(F.batch_norm(x, m, v, training=True))

    line = backend_line(f, x, m.clone(), v.clone())
    assert "(relu)" in line and "batch_norm" not in line, line
    m2, v2 = m.clone(), v.clone()
    opt = jit_core.optimize(f)
    for _ in range(3):
        assert_bitwise(opt(x, m, v), f(x, m2, v2))
        assert_bitwise([m, v], [m2, v2])


@pytest.mark.parametrize("normalized", [6, [6], [5, 6]], ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(normalized, affine):
    size = int(np.prod(normalized))  # the kernel takes flat scale and bias
    wb = (rand(size), rand(size)) if affine else (None, None)

    def f(x, w, b):
        return F.layer_norm(x, normalized, w, b, 1e-5)

    check_lowered(f, [rand(2, 5, 6), *wb], "layer_norm")


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(axis):
    check_lowered(lambda x: F.softmax(x, axis=axis), [rand(3, 4, 5)], "softmax")


POOL = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=[2, 3], padding="SAME"),
    dict(kernel_size=2, data_format="NHWC"),
]


@pytest.mark.parametrize("kw", POOL, ids=str)
def test_max_pool2d(kw):
    check_lowered(lambda x: F.max_pool2d(x, **kw), [rand(2, 3, 9, 9)], "max_pool2d")


@pytest.mark.parametrize("kw", POOL + [dict(kernel_size=3, padding=1, exclusive=False)], ids=str)
def test_avg_pool2d(kw):
    check_lowered(lambda x: F.avg_pool2d(x, **kw), [rand(2, 3, 9, 9)], "avg_pool2d")


@pytest.mark.parametrize(
    "size,data_format", [(1, "NCHW"), (3, "NCHW"), ([None, 2], "NCHW"), ((2, 4), "NHWC")], ids=str
)
def test_adaptive_avg_pool2d(size, data_format):
    def f(x):
        return F.adaptive_avg_pool2d(x, output_size=size, data_format=data_format)

    check_lowered(f, [rand(2, 8, 8, 8)], "adaptive_avg_pool2d")


@pytest.mark.parametrize("start,stop", [(0, -1), (1, -1), (1, 2), (-2, -1)])
def test_flatten(start, stop):
    check_lowered(lambda x: paddle.flatten(x, start, stop) + 1, [rand(2, 3, 4, 5)], "flatten")


@pytest.mark.parametrize(
    "fn,api",
    [
        (F.relu, "relu"),
        (F.sigmoid, "sigmoid"),
        (F.gelu, "gelu"),
        (lambda x: F.gelu(x, approximate=True), "gelu"),
        (F.silu, "silu"),
    ],
    ids=["relu", "sigmoid", "gelu", "gelu_tanh", "silu"],
)
def test_activations(fn, api):
    check_lowered(lambda x: fn(x) * 3, [rand(4, 7) - 0.5], api)


def test_gradients_match_eager():
    """Lowered kernels record the same autograd graph as the wrappers do."""
    paddle.seed(0)
    conv = paddle.nn.Conv2D(3, 4, 3, padding=1)
    fc = paddle.nn.Linear(4 * 6 * 6, 5)
    m, v = rand(4), rand(4) + 0.5

    def f(x, cw, cb, fw, fb):
        y = F.conv2d(x, cw, cb, padding=1)
        y = F.batch_norm(y, m, v, training=False)
        y = F.max_pool2d(F.relu(y), 2)
        y = F.linear(paddle.flatten(y, 1), fw, fb)
        return F.softmax(y, axis=-1)

    x = rand(2, 3, 12, 12)

    def grads(fn):
        params = [p.detach().clone() for p in (conv.weight, conv.bias, fc.weight, fc.bias)]
        for p in params:
            p.stop_gradient = False
        out = fn(x, *params)
        (out * paddle.arange(5, dtype="float32")).sum().backward()
        return [out] + [p.grad for p in params]

    opt = jit_core.optimize(f)
    grads(opt)  # the capture
    assert_bitwise(grads(opt), grads(f))
    assert "run their kernels directly" in backend_line(
        f, x, conv.weight, conv.bias, fc.weight, fc.bias
    )


def test_what_no_rule_takes_runs_as_captured():
    """A graph value where the wrapper wants a constant, or an alias keyword, is left to
    the wrapper (and eager's errors stay eager's)."""

    def f(x, k):
        return F.softmax(x, axis=k) + F.relu(x)

    x = rand(3, 4)
    opt = jit_core.optimize(f)
    for k in (0, 1, 0, 1):  # k changes: it becomes an input of the graph
        assert_bitwise(opt(x, k), f(x, k))
    line = jit_core.explain(opt, x, 0).graphs[0].backend
    assert "relu" in line and "softmax" not in line, line

    def g(x, w):
        return F.conv2d(x, w, groups=3)  # 4 channels in 3 groups: eager's ValueError

    with pytest.raises(ValueError, match="groups"):
        g(rand(1, 4, 5, 5), rand(3, 1, 3, 3))
    with pytest.raises(ValueError, match="groups"):
        jit_core.optimize(g)(rand(1, 4, 5, 5), rand(3, 1, 3, 3))


def test_random_numbers_stay_eagers():
    """The check of a lowered call runs on made-up inputs: Paddle's generator is not
    touched, so a graph's random numbers are eager's for the same seed."""

    def f(x):
        return F.dropout(F.relu(x), 0.5)

    x = rand(8, 8)
    line = backend_line(f, x)
    assert "(relu)" in line, line
    opt = jit_core.optimize(f)
    for seed in (1, 2):
        paddle.seed(seed)
        expected = f(x)
        paddle.seed(seed)
        assert_bitwise(opt(x), expected)


def test_a_wrong_rule_is_caught_by_the_check(monkeypatch):
    """Each lowered call is compared with the API call before it is used: a rule that
    computes something else leaves the call as captured, and explain() says so."""

    def wrong_relu(a, emit, sizes_static):
        return emit("assign", a["x"])  # the same as relu wherever x >= 0

    monkeypatch.setitem(kernel_calls._RULES, F.relu, wrong_relu)

    def f(x):
        return F.relu(x) + 1

    line = backend_line(f, rand(3, 3))
    assert "relu as captured: its kernels' values differ" in line, line
    assert "run their kernels directly" not in line
    x = rand(3, 3)
    assert_bitwise(jit_core.optimize(f)(x), f(x))


def test_kernels_option_off_and_dump(tmp_path):
    def f(x, w):
        return F.linear(x, w)

    x, w = rand(2, 3), rand(3, 4)
    off = jit_core.optimize(f, kernels=False)
    assert_bitwise(off(x, w), f(x, w))
    out = jit_core.explain(off, x, w)
    assert out.graphs[0].kernel_code is None and "kernels directly" not in out.graphs[0].backend
    out = jit_core.explain(f, x, w)
    assert "_C_ops_linear(" in out.graphs[0].kernel_code
    assert "Kernel code" in str(out)
    written = out.dump(str(tmp_path))
    assert any(p.endswith(".kernels.py") for p in written)


def test_dynamic_sizes_keep_size_dependent_rules_off():
    """With a dynamic batch, rules that read sizes are not used, the others are, and every
    size gives eager's values."""

    def f(x, w, cw):
        y = F.conv2d(x, cw, padding=1)
        return F.linear(paddle.flatten(y, 1), w)

    w, cw = rand(2 * 4 * 4, 3), rand(2, 3, 3, 3)
    opt = jit_core.optimize(f, dynamic=True)
    for n in (1, 3, 5):
        x = rand(n, 3, 4, 4)
        assert_bitwise(opt(x, w, cw), f(x, w, cw))


def layer_zoo():
    paddle.seed(0)
    return paddle.nn.Sequential(
        paddle.nn.Conv2D(3, 8, 3, padding=1),
        paddle.nn.BatchNorm2D(8),
        paddle.nn.ReLU(),
        paddle.nn.Conv2D(8, 8, 3, padding="SAME", groups=8),  # depthwise
        paddle.nn.Conv2D(8, 8, 1, stride=2, bias_attr=False),
        paddle.nn.Sigmoid(),
        paddle.nn.MaxPool2D(2, ceil_mode=True),
        paddle.nn.AvgPool2D(2, padding=1, exclusive=False),
        paddle.nn.AdaptiveAvgPool2D(1),
        paddle.nn.Flatten(),
        paddle.nn.LayerNorm(8),
        paddle.nn.Linear(8, 6),
        paddle.nn.BatchNorm1D(6),
        paddle.nn.GELU(approximate=True),
        paddle.nn.Linear(6, 4, bias_attr=False),
        paddle.nn.Softmax(axis=0),
    )


LAYERS = (
    "AdaptiveAvgPool2D, AvgPool2D, BatchNorm1D, BatchNorm2D, Conv2D x3, Flatten, GELU, "
    "LayerNorm, Linear x2, MaxPool2D, ReLU, Sigmoid, Softmax"
)


def test_paddles_layers_run_their_kernels_directly():
    """A layer call becomes the kernel calls its forward makes: eager's values bit for
    bit, every layer of the zoo lowered."""
    net = layer_zoo()
    net.eval()
    x = rand(2, 3, 13, 13)
    line = backend_line(net, x)
    assert f"16 API calls run their kernels directly ({LAYERS})" in line, line
    opt = jit_core.optimize(net)
    with paddle.no_grad():
        for _ in range(2):
            assert_bitwise(opt(x), net(x))


def test_layers_in_training_give_eagers_gradients_and_statistics():
    """In training the batch norms stay layer calls (they update their statistics, once
    per call as in eager); the other layers are lowered and their parameters get eager's
    gradients, read through the layer at each call."""
    net, twin = layer_zoo(), layer_zoo()
    twin.set_state_dict(net.state_dict())
    net.train()
    twin.train()
    fresh = layer_zoo()
    fresh.train()  # (returns None on Paddle 3.0)
    line = backend_line(fresh, rand(2, 3, 13, 13))
    assert "BatchNorm" not in line and "Conv2D x3" in line, line
    opt = jit_core.optimize(net)
    for _ in range(3):
        x = rand(2, 3, 13, 13)
        out, expected = opt(x), twin(x)
        assert_bitwise(out, expected)
        out.sum().backward()
        expected.sum().backward()
        for p, q in zip(net.parameters(), twin.parameters()):
            if q.grad is None:  # the running statistics: no gradient in eager either
                assert p.grad is None
            else:
                assert_bitwise(p.grad, q.grad)
        assert_bitwise(net[1]._mean, twin[1]._mean)
        net.clear_gradients()
        twin.clear_gradients()


def test_a_layers_parameter_replaced_later_is_the_one_used():
    net = paddle.nn.Sequential(paddle.nn.Linear(4, 3), paddle.nn.ReLU())
    opt = jit_core.optimize(net)
    x = rand(2, 4)
    assert_bitwise(opt(x), net(x))
    net[0].weight = paddle.create_parameter([4, 3], "float32")
    net[0].weight.set_value(rand(4, 3))
    assert_bitwise(opt(x), net(x))


def test_a_large_call_is_left_as_captured():
    """The check of a lowered call runs it twice; for a call whose kernel dwarfs its
    wrapper that buys nothing, and it is not lowered; nor is a graph whose time is its
    large kernels (explain says why)."""

    def f(x, w):
        return F.relu(F.conv2d(x, w, padding=1))

    x, w = rand(1, 64, 64, 64), rand(64, 64, 3, 3)
    out = jit_core.explain(f, x, w)
    line = out.graphs[0].backend
    # (here the graph is its convolution: its relu would not pay for its check either)
    assert "its large kernels are its time" in line, line
    assert out.graphs[0].kernel_code is None
    assert_bitwise(jit_core.optimize(f)(x, w), f(x, w))

    def g(x, w, y):  # a large convolution beside enough small work to lower
        small = y
        for _ in range(40):
            small = F.relu(F.softmax(small, axis=-1) - 0.1)
        return F.conv2d(x, w, padding=1), small

    line = backend_line(g, x, w, rand(4, 4))
    assert "conv2d as captured: large calls" in line and "relu x40" in line, line
