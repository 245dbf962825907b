"""Programs written the way users write them, outside this repo's own idioms: recurrent
classifiers, an attention encoder with a mask, a UNet, straight-line ``_C_ops`` programs
(the form of Paddle's program dumps and GraphNet samples), NumPy constants, build and
device queries, tensor attributes.

For each: the exact number of graphs and graph breaks, and results equal to eager Paddle.
A count that changes is a change of behaviour to look at, not a number to update blindly.
"""

from __future__ import annotations

import numpy as np
import paddle
import pytest

import jit_core
from jit_core.errors import BackendCompileError

from .helpers import THROUGH_PADDLE2ONNX, assert_same

F = paddle.nn.functional


def _counts(fn, *args):
    report = jit_core.explain(fn, *args)
    return report.graph_count, report.break_count, report


# ---------------------------------------------------------------------- models


class RnnClassifier(paddle.nn.Layer):
    """Embedding -> two-layer LSTM/GRU -> last step -> linear. Every Paddle RNN asks
    ``paddle.device.is_compiled_with_rocm()`` and ``in_dynamic_or_pir_mode()`` inside."""

    def __init__(self, cell: str, vocab=50, hidden=16, classes=3):
        super().__init__()
        self.embed = paddle.nn.Embedding(vocab, hidden)
        rnn = {"lstm": paddle.nn.LSTM, "gru": paddle.nn.GRU}[cell]
        self.rnn = rnn(hidden, hidden, num_layers=2, direction="bidirect")
        self.head = paddle.nn.Linear(2 * hidden, classes)

    def forward(self, ids):
        out, _ = self.rnn(self.embed(ids))
        return self.head(out[:, -1])


class MaskedEncoder(paddle.nn.Layer):
    """A BERT-style encoder layer: attention with an additive padding mask, residuals,
    LayerNorm, GELU feed-forward."""

    def __init__(self, d=16, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = paddle.nn.Linear(d, 3 * d)
        self.proj = paddle.nn.Linear(d, d)
        self.norm1 = paddle.nn.LayerNorm(d)
        self.norm2 = paddle.nn.LayerNorm(d)
        self.ff = paddle.nn.Sequential(
            paddle.nn.Linear(d, 4 * d), paddle.nn.GELU(), paddle.nn.Linear(4 * d, d)
        )

    def forward(self, x, mask):
        b, s, d = x.shape
        q, k, v = self.qkv(x).reshape([b, s, 3, self.heads, d // self.heads]).unbind(axis=2)
        q, k, v = [t.transpose([0, 2, 1, 3]) for t in (q, k, v)]
        scores = q @ k.transpose([0, 1, 3, 2]) / (d // self.heads) ** 0.5
        scores = scores + (1.0 - mask[:, None, None, :]) * -1e4
        att = F.softmax(scores, axis=-1) @ v
        h = self.norm1(x + self.proj(att.transpose([0, 2, 1, 3]).reshape([b, s, d])))
        return self.norm2(h + self.ff(h))


class TinyUNet(paddle.nn.Layer):
    def __init__(self, c=4):
        super().__init__()
        self.down1 = paddle.nn.Conv2D(1, c, 3, padding=1)
        self.down2 = paddle.nn.Conv2D(c, 2 * c, 3, padding=1)
        self.up = paddle.nn.Conv2DTranspose(2 * c, c, 2, stride=2)
        self.out = paddle.nn.Conv2D(2 * c, 1, 1)

    def forward(self, x):
        d1 = F.relu(self.down1(x))
        d2 = F.relu(self.down2(F.max_pool2d(d1, 2)))
        u = self.up(d2)
        return self.out(paddle.concat([u, d1], axis=1))


def c_ops_program(x, w):
    """The shape of a dumped Paddle program: ``_C_ops`` calls with places and dtypes."""
    place = paddle.core.CPUPlace()
    ones = paddle._C_ops.full([4], 1.0, paddle.float32, place)
    bias = paddle._C_ops.full([1], 0.5, paddle.float32, paddle.CPUPlace())
    h = paddle._C_ops.matmul(x, w, False, False)
    h = paddle._C_ops.add(h, ones)
    return paddle._C_ops.relu(paddle._C_ops.add(h, bias))


def numpy_constants(x):
    scale = np.float32(0.5)
    table = paddle.to_tensor(np.arange(8, dtype="float32").reshape([2, 4]) / 8)
    if np.float64(scale) > 0.25 and np.ones([3]).sum() == 3:
        x = x * scale
    return x + table * np.float32(2)


THRESHOLD = np.float32(0.25)


def numpy_global(x):
    if THRESHOLD > 0.1:
        return x * THRESHOLD
    return x


def build_and_device_queries(x):
    if paddle.is_compiled_with_cuda() and paddle.device.get_device().startswith("gpu"):
        x = x * 3
    if paddle.device.is_compiled_with_rocm() or paddle.is_compiled_with_xpu():
        x = x - 1
    return x + 1


def tensor_attributes(x, w):
    h = x @ w
    if x.place.is_cpu_place() and not w.persistable and h.place == x.place:
        h = h * 2
    if x.type == w.type == h.type:  # (a dense tensor's VarType, whatever its name)
        h = h + 1
    return h


# ---------------------------------------------------------------------- tests


#: operators a backend documents it cannot compile: the graph is refused with an error
#: naming them, and ``fallback=True`` runs it on the paddle backend (the RNN layers reach
#: TVM through paddle2onnx: without it they run on paddle)
CANNOT_COMPILE = {"tvm": {"lstm": "LSTM", "gru": "GRU"}} if THROUGH_PADDLE2ONNX else {}


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_rnn_classifier_is_one_graph(cell, backend):
    paddle.seed(3)
    net = RnnClassifier(cell)
    net.eval()
    ids = paddle.randint(0, 50, [2, 5])
    graphs, breaks, report = _counts(net, ids)
    assert (graphs, breaks) == (1, 0), str(report)
    missing = CANNOT_COMPILE.get(backend, {}).get(cell)
    options = {}
    if missing:
        with pytest.raises(BackendCompileError, match=missing):
            jit_core.optimize(net, backend=backend)(ids)
        options["fallback"] = True
    fast = jit_core.optimize(net, backend=backend, **options)
    if missing:
        with pytest.warns(RuntimeWarning, match=missing):
            assert_same(fast(ids), net(ids))
    for _ in range(2):
        ids = paddle.randint(0, 50, [2, 5])
        assert_same(fast(ids), net(ids))
    assert fast.jit_stats.compiled == 1


def test_masked_encoder_is_one_graph(backend):
    paddle.seed(4)
    net = MaskedEncoder()
    net.eval()
    x = paddle.rand([2, 5, 16])
    mask = paddle.to_tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype="float32")
    graphs, breaks, report = _counts(net, x, mask)
    assert (graphs, breaks) == (1, 0), str(report)
    assert_same(jit_core.optimize(net, backend=backend)(x, mask), net(x, mask))


def test_unet_is_one_graph(backend):
    paddle.seed(5)
    net = TinyUNet()
    net.eval()
    x = paddle.rand([1, 1, 8, 8])
    graphs, breaks, report = _counts(net, x)
    assert (graphs, breaks) == (1, 0), str(report)
    assert_same(jit_core.optimize(net, backend=backend)(x), net(x))


@pytest.mark.parametrize(
    "fn, make",
    [
        (c_ops_program, lambda: (paddle.rand([2, 3]), paddle.rand([3, 4]))),
        (numpy_constants, lambda: (paddle.rand([2, 4]),)),
        (numpy_global, lambda: (paddle.rand([2, 4]),)),
        (build_and_device_queries, lambda: (paddle.rand([2, 4]),)),
        (tensor_attributes, lambda: (paddle.rand([2, 3]), paddle.rand([3, 4]))),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_value_objects_are_constants_not_breaks(fn, make, backend):
    args = make()
    graphs, breaks, report = _counts(fn, *args)
    assert (graphs, breaks) == (1, 0), str(report)
    fast = jit_core.optimize(fn, backend=backend)
    for _ in range(2):
        args = make()
        assert_same(fast(*args), fn(*args))
    assert fast.jit_stats.compiled == 1


def test_a_changed_numpy_global_is_a_new_graph(backend):
    global THRESHOLD
    x = paddle.rand([2, 4])
    fast = jit_core.optimize(numpy_global, backend=backend)
    old = THRESHOLD
    try:
        assert_same(fast(x), numpy_global(x))
        THRESHOLD = np.float32(0.05)  # now the branch goes the other way
        assert_same(fast(x), numpy_global(x))
        THRESHOLD = np.float64(0.5)  # same value range, another NumPy type
        assert_same(fast(x), numpy_global(x))
    finally:
        THRESHOLD = old
    assert fast.jit_stats.compiled == 3


def test_a_numpy_array_returned_is_new_on_every_call(backend):
    def fn(x):
        return x * 2, np.zeros([2])

    fast = jit_core.optimize(fn, backend=backend)
    _, first = fast(paddle.rand([2]))
    first[0] = 5.0  # the caller owns what it got
    _, second = fast(paddle.rand([2]))
    assert second.tolist() == [0.0, 0.0]


def test_the_name_of_an_input_is_guarded(backend):
    def fn(x):
        if x.name == "special":
            return x * 2
        return x + 1

    fast = jit_core.optimize(fn, backend=backend)
    a = paddle.rand([3])
    b = paddle.rand([3])
    b.name = "special"
    for t in (a, b, a):
        assert_same(fast(t), fn(t))


def test_flags_read_by_the_capture_are_guarded(backend):
    flag = "FLAGS_check_nan_inf"

    def fn(x):
        if paddle.get_flags(flag)[flag]:
            return x * 2
        return x + 1

    fast = jit_core.optimize(fn, backend=backend)
    x = paddle.rand([3])
    old = paddle.get_flags(flag)[flag]
    try:
        paddle.set_flags({flag: False})
        assert_same(fast(x), fn(x))
        paddle.set_flags({flag: True})
        assert_same(fast(x), fn(x))
    finally:
        paddle.set_flags({flag: old})
    assert fast.jit_stats.compiled == 2
