"""The direct ONNX exporter (``jit_core.kit.onnx.direct``): each lowering against eager Paddle
on ONNX Runtime, across dtypes and edge values; the paddle2onnx path for what has no
lowering, named in ``explain()``; lowerings added by a plugin."""

from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest
from paddle import _C_ops

import jit_core
from jit_core.kit.onnx import (
    DEFAULT_OPSET,
    exporter_fingerprint,
    paddle2onnx_missing,
    runtime_checks,
)
from jit_core.kit.onnx.direct import MissingLowering, export_direct
from jit_core.kit.onnx.export import EXPORTER_ENV

ort = pytest.importorskip("onnxruntime")
NO_PADDLE2ONNX = paddle2onnx_missing()
#: the tests of the paddle2onnx path (not installable on 3.13, where graphs without a
#: lowering run on the paddle backend instead)
needs_paddle2onnx = pytest.mark.skipif(
    bool(NO_PADDLE2ONNX), reason=f"tests the paddle2onnx path: {NO_PADDLE2ONNX}"
)


def on_ort(gm, inputs):
    model = export_direct(gm, inputs, DEFAULT_OPSET)
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
    except Exception as e:  # ORT's exception types differ between releases
        if "Could not find an implementation" not in str(e):
            raise
        # (1.19 and 1.23 have no float64 Cos: the backend then runs the graph on paddle,
        # test_onnxrt.py's test_a_kernel_onnx_runtime_lacks_sends_the_graph_to_paddle)
        pytest.skip(f"onnxruntime {ort.__version__} has no kernel: {str(e)[-120:]}")
    names = [i.name for i in session.get_inputs()]
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    feeds = {name: inputs[placeholders.index(name)].numpy() for name in names}
    outs = session.run(None, feeds)
    checks = runtime_checks([o.name for o in session.get_outputs()])
    # the model's run-time checks hold for these inputs (else Paddle computes the call)
    assert all(bool(outs[i]) for i in checks), "a run-time check failed"
    return outs[: checks[0]] if checks else outs


def check(capture, fn, *inputs, rtol=1e-5, atol=1e-6):
    gm, example = capture(fn, *inputs)
    got = on_ort(gm, example)
    with paddle.no_grad():
        want = fn(*inputs)
    want = want if isinstance(want, (tuple, list)) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = w.numpy()
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


def edge_values(shape, dtype="float32"):
    """Values with zeros of both signs, NaN, infinities, tiny and large numbers."""
    n = int(np.prod(shape))
    pool = np.array(
        [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.0, -7.0, 1e-30, -1e30, np.nan, np.inf, -np.inf],
        dtype=dtype,
    )
    rng = np.random.RandomState(n)
    values = np.concatenate([pool, rng.randn(max(n - len(pool), 0)).astype(dtype)])[:n]
    return paddle.to_tensor(values.reshape(shape))


# each through a lambda: a graph calls the API, where optimize(F.relu) would capture
# the body of F.relu itself (its _C_ops call)
UNARY = [
    ("relu", lambda x: F.relu(x)),
    ("sigmoid", lambda x: F.sigmoid(x)),
    ("tanh", lambda x: paddle.tanh(x)),
    ("exp", lambda x: paddle.exp(x)),
    ("abs", lambda x: paddle.abs(x)),
    ("neg", lambda x: -x),
    ("relu6", lambda x: F.relu6(x)),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2)),
    ("hardswish", lambda x: F.hardswish(x)),
    ("hardsigmoid", lambda x: F.hardsigmoid(x)),
    ("silu", lambda x: F.silu(x)),
    ("gelu", lambda x: F.gelu(x)),
    ("gelu_tanh", lambda x: F.gelu(x, approximate=True)),
    ("softmax", lambda x: F.softmax(x, axis=1)),
    ("floor", lambda x: paddle.floor(x)),
    ("clip", lambda x: paddle.clip(x, -1.0, 2.0)),
    ("hardtanh", lambda x: F.hardtanh(x, -0.5, 2.0)),
    ("softplus", lambda x: F.softplus(x)),
    ("softplus_beta", lambda x: F.softplus(x, beta=2.0, threshold=5.0)),
    ("celu", lambda x: F.celu(x, 2.0)),
    ("log_sigmoid", lambda x: F.log_sigmoid(x)),
    ("scale", lambda x: paddle.scale(x, 2.0, 0.5)),
    ("scale_bias_first", lambda x: x.scale(3.0, bias=-1.0, bias_after_scale=False)),
    ("rsqrt", lambda x: paddle.rsqrt(x)),
    ("sqrt", lambda x: paddle.sqrt(x)),
    ("log", lambda x: paddle.log(x)),
    ("sin_cos", lambda x: paddle.sin(x) + x.cos()),
    ("ceil_reciprocal", lambda x: paddle.ceil(x) * paddle.reciprocal(x)),
    ("elu", lambda x: F.elu(x, 0.5)),
    ("selu", lambda x: F.selu(x)),
    ("mish", lambda x: F.mish(x)),
    ("swish", lambda x: F.swish(x)),
    ("relu_inplace", lambda x: F.relu_(x * 1.0)),
    ("pos_and_abs", lambda x: abs(+x)),
    ("log2_log10", lambda x: paddle.log2(x) + x.log10()),
    # exact for tiny x too, where log(1 + x) and exp(x) - 1 lose it to rounding
    ("log1p", lambda x: paddle.log1p(x)),
    ("expm1", lambda x: paddle.expm1(x)),
    ("tan_asin_acos_atan", lambda x: paddle.tan(x) + paddle.asin(x) * paddle.acos(x) - x.atan()),
]
if hasattr(paddle.Tensor, "softmax"):  # Paddle 3.3's Tensor.softmax(input, dim)
    UNARY.append(("softmax_method", lambda x: x.softmax(-1)))
# the kernels as GraphNet's samples call them
UNARY += [
    ("c_sin_cos_floor", lambda x: _C_ops.sin(x) + _C_ops.cos(x) * _C_ops.floor(x)),
    ("c_relu6", lambda x: _C_ops.relu6(x)),
    ("c_leaky_relu", lambda x: _C_ops.leaky_relu(x, 0.1)),
    ("c_hardswish", lambda x: _C_ops.hardswish(x)),
    ("c_hardsigmoid", lambda x: _C_ops.hardsigmoid(x, 0.2, 0.5)),
    ("c_swish", lambda x: _C_ops.swish(x)),
    ("c_square", lambda x: _C_ops.square(x)),
    ("c_pow", lambda x: _C_ops.elementwise_pow(x, x * 0.5)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,fn", UNARY, ids=[u[0] for u in UNARY])
def test_unary_lowerings_match_eager_on_edge_values(capture, name, fn, dtype):
    x = edge_values([3, 8], dtype)
    if name == "sqrt" and dtype == "float32":
        # Paddle's float32 kernel takes 8 values at a time approximately (sqrt(inf) is
        # NaN there) and the rest exactly: the lowering is exact
        x = paddle.where(paddle.isinf(x), paddle.full_like(x, 4.0), x)
    if name.startswith("softmax"):
        x = paddle.where(paddle.isfinite(x), x, paddle.zeros_like(x))  # a row of inf is NaN
    if name == "gelu" and dtype == "float64":
        # declined: the graph takes the paddle2onnx path, saying why
        gm, example = capture(fn, x)
        with pytest.raises(MissingLowering, match="Erf is float32 only"):
            export_direct(gm, example, DEFAULT_OPSET)
        return
    check(capture, fn, x, rtol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("shape", [[1, 1], [0, 4], [1, 5, 1]])
def test_lowerings_on_size_one_and_empty_dims(capture, shape):
    def f(x, y):
        return (F.relu(x) * 2.0 + y).reshape([-1]), x.sum(axis=-1, keepdim=True)

    x = edge_values(shape) if 0 not in shape else paddle.zeros(shape)
    check(capture, f, x, paddle.ones(shape))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_arithmetic_with_numbers_and_promotion(capture, dtype):
    def f(x, y):
        return x + y, x - 2, x * y, 3 * x, x / (y + 10), -x, x > 1, x == y

    x = paddle.to_tensor(np.array([[0, -3, 5, 7], [1, 2, -8, 0]]).astype(dtype))
    y = paddle.to_tensor(np.array([[1, 2, 3, 4], [-5, 0, 2, 0]]).astype(dtype))
    check(capture, f, x, y)


def test_shape_ops_reductions_and_matmul(capture):
    def f(x, w):
        h = paddle.matmul(x, w)  # [2, 3, 5]
        t = h.transpose([0, 2, 1]).flatten(1)
        u = paddle.concat([t, t * 2], axis=-1).unsqueeze(0).squeeze(0)
        return (
            u.mean(axis=1),
            paddle.sum(h, axis=[0, 2]),
            h.max(),
            paddle.matmul(x, w.transpose([1, 0]), transpose_y=True),
        )

    x = edge_values([2, 3, 4])
    x = paddle.where(paddle.isfinite(x), x, paddle.zeros_like(x))
    check(capture, f, x, paddle.rand([4, 5]), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_argmax_and_argmin_skip_nan_as_paddle_does(capture, dtype):
    def f(x):
        return (
            x.argmax(axis=1),
            paddle.argmin(x, axis=0, keepdim=True),
            paddle.argmax(x),
            x.argmin(axis=-1, dtype="int32"),
        )

    if dtype == "int32":
        x = paddle.to_tensor([[3, 1, 3], [-2, 7, 7], [0, 0, 0]], dtype=dtype)
    else:
        n, i = np.nan, np.inf
        rows = [[n, -i, 0], [n, n, n], [-i, n, -i], [n, 5, n], [0, n, -1], [i, n, i]]
        x = paddle.to_tensor(np.array(rows, dtype=dtype))
    check(capture, f, x)


@pytest.mark.parametrize(
    "source,target",
    [("float32", "float64"), ("float64", "float32"), ("int32", "float32"), ("bool", "int64"),
     ("float32", "bool"), ("int64", "int32")],
)  # fmt: skip
def test_casts(capture, source, target):
    def f(x):
        return paddle.cast(x, target), x.astype(target), x.cast(target)

    x = (
        edge_values([2, 7])
        if source.startswith("float")
        else paddle.to_tensor([[0, 1, -3], [5, 0, 2]])
    )
    check(capture, f, x.astype(source))


def test_a_float_to_int_cast_is_declined(capture):
    # NaN and values out of range become what each library's C++ makes of them
    gm, example = capture(lambda x: x.astype("int32") + 1, edge_values([2, 7]))
    with pytest.raises(MissingLowering, match="float32 to int32 cast"):
        export_direct(gm, example, DEFAULT_OPSET)


def test_sum_of_ints_is_int64_as_in_paddle(capture):
    check(capture, lambda x: x.sum(), paddle.to_tensor([[1, 2], [3, 4]], dtype="int32"))


class SmallNet(paddle.nn.Layer):
    """Every layer lowering in one net: conv (grouped, padded, strided), batch norm, the
    pools, linear, layer norm, dropout, activations."""

    def __init__(self):
        super().__init__()
        self.conv = paddle.nn.Conv2D(3, 8, 3, stride=2, padding=[1, 2])
        self.bn = paddle.nn.BatchNorm2D(8)
        self.dw = paddle.nn.Conv2D(8, 8, 3, padding=1, groups=8, bias_attr=False)
        self.pool = paddle.nn.MaxPool2D(3, 2, 1)
        self.avg = paddle.nn.AvgPool2D(2, padding=1, exclusive=True)
        self.gap = paddle.nn.AdaptiveAvgPool2D(1)
        self.flat = paddle.nn.Flatten()
        self.fc = paddle.nn.Linear(8, 6)
        self.ln = paddle.nn.LayerNorm(6)
        self.drop = paddle.nn.Dropout(0.3)
        self.act = paddle.nn.Hardswish()
        self.gelu = paddle.nn.GELU()

    def forward(self, x):
        x = self.act(self.bn(self.conv(x)))
        x = self.pool(F.relu6(self.dw(x)))
        x = self.gap(self.avg(x)) + F.adaptive_avg_pool2d(x, 1)
        x = self.drop(self.flat(x))
        return self.gelu(self.ln(self.fc(x)))


def test_adaptive_pooling_of_a_one_by_one_map_is_a_broadcast(capture):
    check(capture, lambda x: F.adaptive_avg_pool2d(x, [7, 5]) * 2, edge_values([2, 3, 1, 1]))


def test_layers_of_a_vision_net(capture):
    paddle.seed(3)
    net = SmallNet()
    for p in net.bn.buffers():
        p.set_value(paddle.rand(p.shape) + 0.5)
    net.eval()
    check(capture, net, paddle.rand([2, 3, 17, 16]), rtol=1e-4, atol=1e-5)


class _LegacyNormNet(paddle.nn.Layer):
    """The layers PaddleClas and PaddleSeg build with: ``nn.BatchNorm`` with an ``act``,
    convolutions with ``padding="SAME"`` or ``"VALID"``, and ``paddle.mm``."""

    def __init__(self, act, padding, stride):
        super().__init__()
        self.conv = paddle.nn.Conv2D(3, 4, 3, stride=stride, padding=padding)
        self.bn = paddle.nn.BatchNorm(4, act=act)
        self.wide = paddle.nn.Conv2D(4, 4, [2, 4], stride=[stride, 1], padding=padding)

    def forward(self, x, w):
        y = self.wide(self.bn(self.conv(x)))
        return paddle.mm(y.flatten(1), w)


@pytest.mark.parametrize("act", [None, "relu", "sigmoid", "tanh", "swish"])
@pytest.mark.parametrize("padding,stride", [("SAME", 1), ("SAME", 2), ("VALID", 2), (1, 3)])
def test_the_layers_of_paddleclas_and_paddleseg(capture, act, padding, stride):
    paddle.seed(5)
    net = _LegacyNormNet(act, padding, stride)
    for p in net.bn.buffers():
        p.set_value(paddle.rand(p.shape) + 0.5)
    net.eval()
    # odd and even sizes: SAME pads the larger half after, as Paddle does
    x = edge_values([2, 3, 11, 10]) if act == "relu" else paddle.rand([2, 3, 11, 10])
    with paddle.no_grad():
        width = net.wide(net.bn(net.conv(x))).flatten(1).shape[1]  # what ``mm`` takes
    check(capture, net, x, paddle.rand([width, 3]), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "shifts,axis", [(1, 0), (-3, 1), ((2, -1), (1, 2)), ((7, 0), (0, -1)), (-9, -2)]
)
def test_roll_along_axes(capture, shifts, axis):
    check(capture, lambda x: paddle.roll(x * 2, shifts, axis), paddle.rand([3, 4, 5]))
    check(capture, lambda x: (x * 2).roll(shifts, axis), paddle.rand([3, 4, 5]))


def test_roll_of_the_flattened_tensor_is_declined(capture):
    gm, example = capture(lambda x: paddle.roll(x * 2, 1), paddle.rand([3, 4]))
    with pytest.raises(MissingLowering, match="no axis"):
        export_direct(gm, example, DEFAULT_OPSET)


@pytest.mark.parametrize(
    "size,kernel,stride,padding", [(9, 2, 1, 0), (9, 3, 2, 0), (10, 2, 2, 1), (6, 3, 1, 1)]
)
@pytest.mark.parametrize("pool", [paddle.nn.MaxPool2D, paddle.nn.AvgPool2D])
def test_pooling_in_ceil_mode_where_it_is_the_floor(capture, pool, size, kernel, stride, padding):
    layer = pool(kernel, stride, padding, ceil_mode=True)
    check(capture, lambda x: layer(x) + 1, paddle.rand([1, 2, size, size]))


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("size,kernel,stride", [(9, 2, 1), (9, 3, 2), (10, 3, 2), (7, 2, 3)])
@pytest.mark.parametrize("pool", [paddle.nn.MaxPool2D, paddle.nn.AvgPool2D])
def test_pooling_with_a_padding_algorithm(capture, pool, padding, size, kernel, stride):
    layer = pool(kernel, stride, padding)
    check(capture, lambda x: layer(x) + 1, paddle.rand([1, 2, size, size + 1]))


def test_pooling_in_ceil_mode_that_adds_a_window_is_declined(capture):
    layer = paddle.nn.MaxPool2D(3, 2, ceil_mode=True)
    gm, example = capture(lambda x: layer(x) + 1, paddle.rand([1, 2, 8, 8]))
    with pytest.raises(MissingLowering, match=r"ceil_mode=True"):
        export_direct(gm, example, DEFAULT_OPSET)


def test_same_padding_with_a_stride_on_a_dynamic_size_is_declined(capture):
    conv = paddle.nn.Conv2D(3, 4, 3, stride=2, padding="SAME")
    gm, example = capture(lambda x: conv(x), paddle.rand([1, 3, 9, 9]))
    next(n for n in gm.graph.nodes if n.op == "placeholder").meta["dynamic_dims"] = [2]
    with pytest.raises(MissingLowering, match="SAME with a stride, on a dynamic size"):
        export_direct(gm, example, DEFAULT_OPSET)


def test_resnet_is_exported_directly(tmp_path, monkeypatch):
    from paddle.vision.models import resnet18

    monkeypatch.setenv("JIT_CORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(EXPORTER_ENV, "direct")
    paddle.seed(0)
    net = resnet18()
    net.eval()
    x = paddle.rand([1, 3, 64, 64])
    with paddle.no_grad():
        out = jit_core.explain(net, x, backend="onnxrt")
        want = net(x)
    assert out.graph_count == 1
    assert out.graphs[0].backend == "onnxrt"  # nothing went through paddle2onnx
    assert out.graphs[0].artifact == "built here (and cached)"
    np.testing.assert_allclose(out.result.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


def test_a_call_without_a_lowering_is_named(capture):
    def f(x):
        return paddle.cumprod(x, dim=0) + 1

    gm, example = capture(f, paddle.rand([3, 4]))
    with pytest.raises(MissingLowering) as info:
        export_direct(gm, example, DEFAULT_OPSET)
    message = str(info.value)
    assert "no ONNX lowering for paddle.tensor.math.cumprod" in message
    assert "test_direct_export.py" in message  # the user's line
    assert info.value.operators == ["paddle.tensor.math.cumprod"]


def test_an_option_a_lowering_declines_is_named(capture):
    gm, example = capture(lambda x: F.max_pool2d(x, 2, ceil_mode=True), paddle.rand([1, 1, 5, 5]))
    with pytest.raises(MissingLowering, match=r"max_pool2d .*\(ceil_mode=True\)"):
        export_direct(gm, example, DEFAULT_OPSET)


@needs_paddle2onnx
def test_without_a_lowering_the_graph_goes_through_paddle2onnx(tmp_path, monkeypatch):
    monkeypatch.setenv("JIT_CORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(EXPORTER_ENV, "direct")

    def f(x):
        return paddle.sign(x) * 2

    x = paddle.rand([3, 4]) - 0.5
    with paddle.no_grad():
        out = jit_core.explain(f, x, backend="onnxrt")
    line = out.graphs[0].backend
    assert line.startswith("onnxrt; exported through paddle2onnx: no ONNX lowering for ")
    assert "sign" in line
    np.testing.assert_allclose(out.result.numpy(), f(x).numpy(), rtol=1e-6)


class SquareLowering:
    @jit_core.hookimpl
    def jit_register_onnx_lowerings(self, register):
        def lower(ex, a):
            x = ex.input(a["x"])
            return ex.op("Mul", [x, x])

        register(paddle.square, lower)


def test_a_plugin_adds_a_lowering_and_changes_the_cache_key(capture, install_plugin, monkeypatch):
    monkeypatch.setenv(EXPORTER_ENV, "direct")
    gm, example = capture(lambda x: paddle.square(x) - x, edge_values([2, 6]))
    with pytest.raises(MissingLowering, match="square"):
        export_direct(gm, example, DEFAULT_OPSET)
    before = exporter_fingerprint()
    install_plugin(SquareLowering(), "square-lowering")
    assert exporter_fingerprint() != before
    check(capture, lambda x: paddle.square(x) - x, edge_values([2, 6]))


def test_live_parameters_stay_live(tmp_path, monkeypatch):
    # freeze=False: the direct export's initializers become inputs fed on every run
    monkeypatch.setenv("JIT_CORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(EXPORTER_ENV, "direct")
    paddle.seed(2)
    net = paddle.nn.Sequential(paddle.nn.Linear(4, 4), paddle.nn.ReLU(), paddle.nn.Linear(4, 2))
    net.eval()
    x = paddle.rand([3, 4])
    opt = jit_core.optimize(net, backend="onnxrt")
    with paddle.no_grad():
        np.testing.assert_allclose(opt(x).numpy(), net(x).numpy(), rtol=1e-5, atol=1e-6)
        net[2].weight.set_value(net[2].weight * -3.0)
        np.testing.assert_allclose(opt(x).numpy(), net(x).numpy(), rtol=1e-5, atol=1e-6)


def test_an_unknown_exporter_is_refused_naming_the_known_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("JIT_CORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(EXPORTER_ENV, "p2o")
    net = paddle.nn.Linear(2, 2)
    net.eval()
    with paddle.no_grad(), pytest.raises(Exception, match="p2o.*direct, paddle2onnx"):
        jit_core.optimize(net, backend="onnxrt")(paddle.ones([1, 2]))


@needs_paddle2onnx
def test_each_exporter_has_cache_entries_of_its_own(tmp_path, monkeypatch):
    # the same graph exported both ways into one cache: the second export is built, not
    # read from what the first exporter wrote
    monkeypatch.setenv("JIT_CORE_CACHE_DIR", str(tmp_path))
    net = paddle.nn.Sequential(paddle.nn.Linear(4, 4), paddle.nn.ReLU())
    net.eval()
    keys = []
    for exporter in ("paddle2onnx", "direct"):
        monkeypatch.setenv(EXPORTER_ENV, exporter)
        keys.append(exporter_fingerprint())
        with paddle.no_grad():
            out = jit_core.explain(net, paddle.ones([2, 4]), backend="onnxrt")
        assert out.graphs[0].artifact == "built here (and cached)"
    assert keys[0] != keys[1]


class BrokenLowering:
    @jit_core.hookimpl
    def jit_register_onnx_lowerings(self, register):
        def lower(ex, a):
            return a["no such argument"]

        register(paddle.cumsum, lower)


def test_a_lowering_that_raises_is_a_missing_lowering_that_says_why(capture, install_plugin):
    install_plugin(BrokenLowering(), "broken-lowering")
    gm, example = capture(lambda x: paddle.cumsum(x, axis=0), paddle.rand([2, 3]))
    with pytest.raises(MissingLowering, match="its lowering raised KeyError"):
        export_direct(gm, example, DEFAULT_OPSET)


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_filled_like_and_where(capture, dtype):
    def g(x):
        return paddle.full_like(x, 3), paddle.where(x > 0, x, paddle.zeros_like(x))

    x = paddle.to_tensor(np.array([[0, -3, 5], [1, 0, -8]]).astype(dtype))
    if dtype != "bool":
        check(capture, g, x)
        return
    check(capture, lambda m: (paddle.zeros_like(m), paddle.ones_like(m)), x)
    # ONNX Runtime has no bool Where: declined, and the graph takes the paddle2onnx path
    gm, example = capture(lambda m: paddle.where(m, m, paddle.ones_like(m)), x)
    with pytest.raises(MissingLowering, match="bool where"):
        export_direct(gm, example, DEFAULT_OPSET)


# -- making, indexing, joining and splitting tensors ------------------------------------------


def test_full_zeros_ones_and_arange(capture):
    def f(x):
        # -0.0 stays -0.0 (paddle2onnx wrote 0.0); ints stay ints
        return (
            x + paddle.full([2, 3], -0.0),
            paddle.full([3], 7, dtype="int32"),
            paddle.zeros([2, 1]) + x[:, :1],
            paddle.ones([3], dtype="int64"),
            paddle.arange(1, 9, 2),
            paddle.full([2, 3], -0.0),
        )

    check(capture, f, edge_values([2, 3]))


def test_to_tensor_of_a_constant(capture):
    # the constants of NumPy code in the graph, in their own dtypes
    def f(x):
        table = np.arange(6, dtype="float64").reshape([2, 3]) / 7
        return (
            x.astype("float64") * paddle.to_tensor(table),
            paddle.to_tensor(np.int32(3)) + paddle.to_tensor([1, 2, 3], dtype="int32"),
            paddle.to_tensor(np.array([True, False, True])),
        )

    check(capture, f, edge_values([2, 3]), rtol=1e-12)


INDEXING = [
    ("int", lambda x: x[1]),
    ("negative_int", lambda x: x[-1]),
    ("slice", lambda x: x[1:3]),
    ("step", lambda x: x[:, ::2]),
    ("negative_step", lambda x: x[::-1, 1:]),
    ("tail", lambda x: x[:, -2:]),
    ("ellipsis_none", lambda x: x[..., None, 1]),
    ("new_axis", lambda x: x[None]),
    ("int_then_slice", lambda x: x[0, 1:-1]),
    ("last_of_vector", lambda x: x[2][-1]),
]


@pytest.mark.parametrize("name,fn", INDEXING, ids=[i[0] for i in INDEXING])
def test_indexing(capture, name, fn):
    check(capture, fn, edge_values([3, 5]))


def _shifted_window_mask(x):
    # Swin's attention mask: regions of a zeros map numbered in place, then compared
    mask = paddle.zeros([1, 6, 6, 1])
    count = 0
    for h in (slice(0, -3), slice(-3, -1), slice(-1, None)):
        for w in (slice(0, -3), slice(-3, -1), slice(-1, None)):
            mask[:, h, w, :] = count
            count += 1
    windows = mask.reshape([-1, 36])
    return x + (windows.unsqueeze(1) - windows.unsqueeze(2))


def _updates_of_a_copy(x):
    y = x.clone()
    y[0] = 7.0
    y[1:, ::2] = -1
    y[..., -1] = x[0, 0]  # a value of one element, read from the graph
    y[2, ::-2] = 0.5
    return y * 2


@pytest.mark.parametrize("fn", [_shifted_window_mask, _updates_of_a_copy])
def test_updates_through_constant_indices_are_a_where(capture, fn):
    x = edge_values([36, 36] if fn is _shifted_window_mask else [3, 4])
    gm, _ = capture(fn, x)
    assert any(getattr(n.target, "__name__", "") == "setitem_" for n in gm.graph.nodes)
    check(capture, fn, x)


def test_an_update_with_a_tensor_of_several_elements_is_declined(capture):
    def f(x):
        y = x.clone()
        y[0] = x[1]
        return y

    gm, example = capture(f, paddle.rand([3, 4]))
    with pytest.raises(MissingLowering, match="an update with a tensor of more than one element"):
        export_direct(gm, example, DEFAULT_OPSET)


def test_adaptive_average_pooling_in_one_dimension(capture):
    pool = paddle.nn.AdaptiveAvgPool1D(1)
    check(
        capture,
        lambda x: (pool(x), F.adaptive_avg_pool1d(x, 4), F.adaptive_avg_pool1d(x, 1)),
        edge_values([2, 3, 8]),
    )


def test_indexing_with_an_integer_tensor_is_a_gather(capture):
    def f(x, ids):
        return x[ids], x[:, ids], paddle.gather(x, ids), paddle.index_select(x, ids, axis=1)

    check(capture, f, edge_values([3, 3]), paddle.to_tensor([2, 0, 2]))


def test_an_index_of_two_dimensions_takes_the_axis_place(capture):
    # LLaMA's rotary tables: cos[position_ids] with position_ids of shape [batch, length]
    def f(x, ids):
        return x[ids], x[:, ids], x[ids, ...]

    ids = paddle.to_tensor([[2, 0, -1], [1, 1, 0]])
    check(capture, f, edge_values([3, 3, 2]), ids)


def test_stack_split_chunk_and_tile(capture):
    def f(x, y):
        a, b = paddle.split(x, [1, -1], axis=1)
        c, d, e = x.chunk(3, axis=-1)
        p, q = paddle.split(y, 2)
        return (
            paddle.stack([x, y], axis=1),
            a * 2,
            b,
            c + d + e,
            p - q,
            paddle.tile(x, [2, 1]),
            x[0].tile([2, 2]),
        )

    check(capture, f, edge_values([2, 3]), paddle.rand([2, 3]))


@pytest.mark.parametrize("padding_idx", [None, 1, -1])
def test_embedding_zeroes_the_padding_rows_as_paddle_does(capture, padding_idx):
    paddle.seed(4)
    layer = paddle.nn.Embedding(6, 3, padding_idx=padding_idx)
    ids = paddle.to_tensor([[0, 1, 5], [1, 1, 2]])
    check(capture, lambda i: layer(i), ids)
    check(capture, lambda i: F.embedding(i, layer.weight, padding_idx=padding_idx), ids)


def test_cumsum_along_an_axis_and_flattened(capture):
    def f(x, n):
        return paddle.cumsum(x, axis=1), x.cumsum(), paddle.cumsum(n, axis=0)

    check(capture, f, paddle.rand([3, 4]), paddle.to_tensor([[1, 2], [3, 4]], dtype="int32"))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
def test_tril_and_triu_with_diagonals(capture, dtype):
    # LLaMA's causal mask: paddle.tril of a bool matrix
    x = (paddle.rand([2, 4, 5]) * 10).astype(dtype)

    def f(x):
        return paddle.tril(x), x.triu(1), paddle.tril(x, -2), paddle.triu(x, diagonal=-1)

    check(capture, f, x)


@pytest.mark.filterwarnings("ignore:(?s).*swiglu")  # (Paddle 3.3 deprecates it)
def test_swiglu_of_two_inputs_and_of_halves(capture):
    import paddle.incubate.nn.functional as incubate

    x, y = edge_values([3, 8]), paddle.randn([3, 8])
    check(capture, lambda x, y: incubate.swiglu(x, y), x, y, rtol=1e-5, atol=1e-6)
    check(capture, lambda x: incubate.swiglu(x), paddle.randn([2, 3, 8]), rtol=1e-5)


def test_softmax_with_a_dtype_casts_first(capture):
    def f(x):
        return F.softmax(x, axis=-1, dtype="float32"), F.softmax(x, 0, dtype="float64")

    check(capture, f, paddle.rand([3, 4]).astype("float64"))


def test_logical_operators_of_bool_tensors(capture):
    # LLaMA combines its padding and causal masks with `&`
    def f(x, y):
        a, b = x > 0.5, y < 0.5
        return a & b, a | b, a ^ b, ~a, paddle.logical_and(a, b), paddle.logical_not(b)

    check(capture, f, paddle.rand([3, 4]), paddle.rand([4]))


def test_any_and_all(capture):
    def f(x):
        m = x > 0.5
        return m.any(), paddle.all(m, axis=1), m.any(axis=[0, 1], keepdim=True)

    check(capture, f, paddle.rand([3, 4]))


def test_a_bool_mask_expands(capture):
    # LLaMA's attention mask: paddle2onnx wrote a bool Expand ONNX Runtime has no kernel for
    def f(mask, scores):
        full = mask[:, None, None, :].expand([2, 1, 4, 4])
        return paddle.where(full, scores, paddle.full_like(scores, -1e9))

    mask = paddle.to_tensor([[True, True, False, True], [True, False, False, False]])
    check(capture, f, mask, paddle.rand([2, 1, 4, 4]))


#: ``out_size``, ``size_tensor``, ``scale_tensor`` and ``data_format`` of an ``*_interp`` kernel
NO_TENSORS = (None, None, None, "NCHW")

INTERPOLATE = [
    ("nearest_scale_2", lambda x: F.interpolate(x, scale_factor=2)),
    ("nearest_int_scale", lambda x: F.interpolate(x, scale_factor=3, mode="nearest")),
    ("nearest_size", lambda x: F.interpolate(x, size=[7, 9])),
    ("bilinear", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear")),
    ("bilinear_size", lambda x: F.interpolate(x, size=[7, 3], mode="bilinear")),
    (
        "bilinear_corners",
        lambda x: F.interpolate(x, size=[8, 9], mode="bilinear", align_corners=True),
    ),
    ("bilinear_mode_1", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_mode=1)),
    ("upsample_layer", paddle.nn.Upsample(scale_factor=2, mode="bilinear")),
    ("nearest_layer", paddle.nn.UpsamplingNearest2D(scale_factor=2)),
    ("bilinear_layer", paddle.nn.UpsamplingBilinear2D(size=[6, 10])),
    # as GraphNet's samples call the kernels
    ("c_nearest_scale", lambda x: _C_ops.nearest_interp(x, *NO_TENSORS, -1, -1, -1, [2.0, 2.0], "nearest", False, 0)),
    ("c_nearest_int_scale", lambda x: _C_ops.nearest_interp(x, *NO_TENSORS, -1, -1, -1, [2, 2], "nearest", False, 1)),
    ("c_bilinear_size", lambda x: _C_ops.bilinear_interp(x, *NO_TENSORS, -1, 7, 9, [], "bilinear", False, 0)),
    ("c_bilinear_scale", lambda x: _C_ops.bilinear_interp(x, *NO_TENSORS, -1, -1, -1, [2.0, 2.0], "bilinear", False, 0)),
    ("c_bilinear_corners", lambda x: _C_ops.bilinear_interp(x, *NO_TENSORS, -1, 8, 9, [], "bilinear", True, 0)),
]  # fmt: skip


@pytest.mark.parametrize("name,fn", INTERPOLATE, ids=[i[0] for i in INTERPOLATE])
def test_interpolate_takes_the_positions_paddle_takes(capture, name, fn):
    # an integer scale factor aborted paddle2onnx ("MUST be ir::FloatAttribute")
    check(capture, fn, paddle.rand([2, 3, 4, 5]), rtol=1e-5, atol=1e-6)


def test_an_inexact_scale_factor_is_declined(capture):
    gm, example = capture(lambda x: F.interpolate(x, scale_factor=1.7), paddle.rand([1, 1, 4, 5]))
    with pytest.raises(MissingLowering, match="does not give the size exactly"):
        export_direct(gm, example, DEFAULT_OPSET)


def test_a_reshape_to_a_shape_tensor_reads_it_when_the_model_runs(capture):
    def f(x, shape):
        return x.reshape(shape) * 2

    check(capture, f, paddle.rand([2, 6]), paddle.to_tensor([3, -1]))


# -- graphs with dynamic dimensions ------------------------------------------------------------


def test_a_dynamic_batch_is_a_symbol_of_the_model(capture):
    from jit_core.kit.onnx.direct import _dynamic_sizes

    paddle.seed(6)
    net = paddle.nn.Sequential(
        paddle.nn.Conv2D(3, 4, 3), paddle.nn.ReLU(), paddle.nn.Flatten(), paddle.nn.Linear(144, 2)
    )
    net.eval()
    gm, example = capture(net, paddle.rand([2, 3, 8, 8]))
    x = next(n for n in gm.graph.nodes if n.op == "placeholder")
    x.meta["dynamic_dims"] = [0]
    dynamic = _dynamic_sizes(gm, example)
    assert dynamic[x] == {0} and all(d == {0} for d in dynamic.values())
    model = export_direct(gm, example, DEFAULT_OPSET)
    (batch,) = [d.dim_param for d in model.graph.input[0].type.tensor_type.shape.dim[:1]]
    assert batch  # a symbol, not a size
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with paddle.no_grad():
        for n in (1, 2, 5):
            xs = paddle.rand([n, 3, 8, 8])
            (got,) = session.run(None, {x.name: xs.numpy()})
            np.testing.assert_allclose(got, net(xs).numpy(), rtol=1e-5, atol=1e-5)


def test_a_size_a_lowering_needs_is_declined_where_it_is_dynamic(capture):
    gm, example = capture(lambda x: x.expand([3, 4, 5]) + 1, paddle.rand([4, 5]))
    x = next(n for n in gm.graph.nodes if n.op == "placeholder")
    x.meta["dynamic_dims"] = [0]
    with pytest.raises(MissingLowering, match="dynamic"):
        export_direct(gm, example, DEFAULT_OPSET)


# -- programs written against _C_ops (GraphNet's samples) ---------------------------------------


def _c_ops_programs():
    import importlib

    return importlib.import_module("conformance.test_c_ops_programs")


#: the programs with a call no lowering serves, and that call
NOT_LOWERED = {
    "conv_bn": "batch_norm",  # it returns the reserve space
    "data_dependent": "nonzero",
    "batch_norm_training": "batch_norm",
    "functional_batch_norm_training": "batch_norm",
}


@pytest.mark.parametrize("name", sorted(_c_ops_programs().PROGRAMS))
def test_c_ops_programs_are_exported_directly(capture, name):
    programs = _c_ops_programs()
    fn, args = programs._fresh(programs.PROGRAMS[name])
    gm, example = capture(fn, *args)
    if name in NOT_LOWERED:
        with pytest.raises(MissingLowering, match=NOT_LOWERED[name]):
            export_direct(gm, example, DEFAULT_OPSET)
        return
    got = on_ort(gm, example)
    with paddle.no_grad():
        want = [v for v in gm.forward(*example)]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


def test_c_ops_batch_norm_with_running_statistics(capture):
    x = edge_values([2, 3, 4, 4])
    mean, var = paddle.to_tensor([0.5, -1.0, 0.0]), paddle.to_tensor([1.0, 0.25, 4.0])
    w, b = paddle.to_tensor([1.5, -1.0, 0.0]), paddle.to_tensor([0.1, 0.0, -2.0])

    def f(x, mean, var, w, b):
        # is_test, then use_global_stats in a program traced in training mode
        y, mean_out, var_out, *_ = _C_ops.batch_norm(
            x, mean, var, w, b, True, 0.9, 1e-5, "NCHW", False, False
        )
        z = _C_ops.batch_norm(y, mean, var, w, b, False, 0.9, 1e-3, "NCHW", True, False)[0]
        return z, mean_out * 1.0, var_out * 1.0

    check(capture, f, x, mean, var, w, b, rtol=1e-5, atol=1e-5)


def test_c_ops_that_make_and_join_tensors(capture):
    def f(x, y):
        a, b, c = _C_ops.split_with_num(x, 3, 1)
        gx, gy = _C_ops.meshgrid([x[0], y])
        value = _C_ops.assign_value_(
            paddle.zeros([2]), [2], paddle.float32, [1.5, -0.0], paddle.CPUPlace()
        )
        return _C_ops.add_n([a, b, c]), gx * gy, x[:, :2] + value

    check(capture, f, edge_values([3, 6]), paddle.rand([4]))


def test_a_batch_norm_result_its_lowering_does_not_compute_is_declined(capture):
    def f(x, mean, var):
        outs = _C_ops.batch_norm(x, mean, var, None, None, True, 0.9, 1e-5, "NCHW", False, False)
        return outs[0] + 1.0, outs[3]

    gm, example = capture(f, paddle.rand([2, 3, 4]), paddle.zeros([3]), paddle.ones([3]))
    with pytest.raises(MissingLowering, match="result 3 of .*does not compute"):
        export_direct(gm, example, DEFAULT_OPSET)


def test_a_0_d_value_stays_0_d(capture):
    # constants were written 1-D, which made a 0-D result [1]
    check(capture, lambda x: F.relu(x) * 2.0 + paddle.full([], 0.5), paddle.to_tensor(-1.5))


def test_each_onnx_node_names_its_graph_node_and_the_users_line(capture):
    def f(x):
        return F.relu(x) * 2

    gm, example = capture(f, paddle.rand([2, 3]))
    model = export_direct(gm, example, DEFAULT_OPSET)
    relu = [n for n in model.graph.node if n.name.startswith("relu__")]
    assert relu and all("test_direct_export.py:" in n.doc_string for n in relu)


def test_paddle_shape_of_an_input(capture):
    # ERNIE's position ids: paddle.arange(paddle.shape(ids)[1])
    def f(x):
        return paddle.shape(x), paddle.shape(x)[1] * 2

    check(capture, f, paddle.rand([3, 5]))


def test_exact_gelu_is_one_kernel_after_onnx_runtime_optimizes_it(capture, tmp_path):
    """ONNX Runtime fuses the exact GELU only when its operations come in its order
    (BERT's feed-forward: 4% of a call)."""
    import collections

    import onnx

    gm, example = capture(lambda x: F.gelu(x) * 2, paddle.randn([4, 8]))
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    model = export_direct(gm, example, DEFAULT_OPSET).SerializeToString()
    ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    ops = collections.Counter(
        n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node
    )
    assert ops["Gelu"] == 1 and "Erf" not in ops, ops


# -- sizes the model reads: one model for every length ----------------------------------------

TABLE = paddle.rand([16, 4])


def decode_step(x, past):
    """LLaMA's decode step, in short: a mask, positions, rows of a table and shapes made
    from the cache's length, which grows by one a step."""
    n = past.shape[1]
    mask = paddle.ones([1, n + 1], dtype="bool").astype("float32")
    pos = paddle.arange(n, n + 1, dtype="int64").astype("float32")
    kv = paddle.concat([past, x], axis=1)
    rows = TABLE[: n + 1]  # a slice bound the model computes
    shift = (n - 8) // 3  # negative for a short cache: Python's floor, not truncation
    wide = mask.expand([2, n + 1])
    flat = kv.reshape([1, (n + 1) * 4])
    return kv.sum(-1) * mask + pos + shift, rows, wide, flat


def test_sizes_of_a_dynamic_dimension_make_one_model_for_every_length():
    x, past = paddle.rand([1, 1, 4]), paddle.rand([1, 5, 4])
    jit_core.mark_dynamic(past, 1)
    gm = jit_core.capture(decode_step, x, past)
    values = {"L['x']": x, "L['past']": past, "G['TABLE']": TABLE}
    example = [values[s] for s in gm.meta["input_sources"]]
    model = export_direct(gm, example, DEFAULT_OPSET)  # no size pinned: no MissingLowering
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    for length in (1, 5, 9, 15):
        values.update({"L['x']": paddle.rand([1, 1, 4]), "L['past']": paddle.rand([1, length, 4])})
        feeds = {
            name: values[source].numpy()
            for name, source in zip(placeholders, gm.meta["input_sources"])
        }
        got = session.run(None, feeds)
        with paddle.no_grad():
            want = decode_step(values["L['x']"], values["L['past']"])
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == tuple(w.shape), (length, g.shape, w.shape)
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)
