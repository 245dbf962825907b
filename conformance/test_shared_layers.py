"""Instances of one layer class share their graphs.

A block whose forward breaks is a frame of its own, captured per ``self``. Once a second
instance of the class reaches that code, the next capture serves every instance: it
guards the type of ``self`` and what it reads through it, and takes the parameters and
buffers as graph inputs (``ShapePolicy.shares_layer``). Instances that differ in what the
capture read (a size, a flag), or whose Paddle layers cannot be inlined, stay bound to
their own graphs. Every case must give eager Paddle's results, state and gradients.
"""

from __future__ import annotations

import copy
import gc
import warnings

import paddle
import pytest

import jit_core

from .helpers import assert_same
from .test_real_programs import CANNOT_COMPILE

nn = paddle.nn


class Block(nn.Layer):
    def __init__(self, width: int = 8, inner=None):
        super().__init__()
        self.fc = nn.Linear(8, width)
        self.norm = nn.LayerNorm(width)
        self.inner = inner if inner is not None else nn.ReLU()

    def forward(self, x):
        y = self.inner(self.norm(self.fc(x)))
        if y.mean() > 0:  # a break: each block's forward is a frame of its own
            y = y * 0.5
        return y[:, :8] + x


class Stack(nn.Layer):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = nn.LayerList(blocks)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def _entries(fast, name: str) -> int:
    stats = fast.jit_stats.entries
    return sum(n for key, n in stats.items() if key.split(" ")[0].endswith(name))


def test_twelve_blocks_of_one_class_share_one_graph(backend):
    paddle.seed(1)
    net = Stack([Block() for _ in range(12)])
    net.eval()
    fast = jit_core.optimize(net, backend=backend)
    for _ in range(3):
        x = paddle.randn([4, 8])
        assert_same(fast(x), net(x))
    # the first block's own entry, and the one every other block shares (was one each)
    assert _entries(fast, "Block.forward") == 2, fast.jit_stats
    assert fast.jit_stats.eager_frames == {}
    notes = [n for v in fast.jit_stats.dynamic_shapes.values() for n in v]
    assert any("shared by every Block" in n for n in notes), notes


class ConvBlock(nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(4, 4, 3, padding=1)
        self.bn = nn.BatchNorm2D(4)

    def forward(self, x):
        y = nn.functional.relu(self.bn(self.conv(x)))
        if y.mean() > 10:
            y = y * 0.5
        return x + y


def test_conv_and_batch_norm_blocks_share_one_graph_in_eval(backend):
    # Conv2D.forward asks x.is_dist(), BatchNorm2D.forward stores its _data_format back:
    # both were refused in a shared capture, which left every conv block bound
    paddle.seed(5)
    net = Stack([ConvBlock() for _ in range(6)])
    net.eval()
    for block in net.blocks:  # running statistics of their own
        block.bn._mean.set_value(paddle.rand([4]))
        block.bn._variance.set_value(paddle.rand([4]) + 0.5)
    fast = jit_core.optimize(net, backend=backend)
    for _ in range(2):
        x = paddle.randn([2, 4, 6, 6])
        assert_same(fast(x), net(x))
    assert _entries(fast, "ConvBlock.forward") == 2, fast.jit_stats
    assert fast.jit_stats.eager_frames == {}


def test_a_function_of_a_layer_serves_every_instance_and_frees_them(backend):
    def run(block, x):
        return block(x) * 2

    fast = jit_core.optimize(run, backend=backend)
    x = paddle.randn([4, 8])
    for seed in range(10):
        paddle.seed(seed)
        block = Block()
        block.eval()
        assert_same(fast(block, x), run(block, x))
    # what is left: the entry every instance shares (the first instance's own went with
    # it); bound to each instance, that was two captures per instance. A Paddle layer
    # sits in reference cycles: it goes when the cycle collector runs (on 3.13 a test run
    # alone may end before it does)
    del block
    gc.collect()
    assert _entries(fast, "Block.forward") == 1, fast.jit_stats
    assert _entries(fast, "run") == 1, fast.jit_stats
    assert fast.jit_stats.compiled < 10, fast.jit_stats


def test_instances_that_differ_keep_graphs_of_their_own(backend):
    # ten widths: a shared capture cannot serve the next width, so captures stay bound to
    # their instances, and each has its own budget under the recompile limit (8)
    paddle.seed(2)
    net = Stack([Block(width=8 + i) for i in range(10)])
    net.eval()
    fast = jit_core.optimize(net, backend=backend)
    for _ in range(2):
        x = paddle.randn([4, 8])
        assert_same(fast(x), net(x))
    assert fast.jit_stats.eager_frames == {}
    notes = [n for v in fast.jit_stats.dynamic_shapes.values() for n in v]
    assert any("bound to their layer instances" in n for n in notes), notes


@pytest.mark.parametrize(
    "inner",
    [
        lambda: nn.LSTM(8, 8),
        lambda: nn.MultiHeadAttention(8, 2),
        lambda: nn.Dropout(0.5),
        lambda: nn.BatchNorm1D(8),
        lambda: nn.Embedding(10, 8),
        lambda: nn.Sequential(nn.Conv2D(3, 3, 1), nn.BatchNorm2D(3)),
    ],
    ids=["lstm", "attention", "dropout", "batch_norm", "embedding", "conv_batch_norm"],
)
def test_paddle_layers_in_a_shared_block_train_as_eager(inner, backend):
    # inlined (or, where they cannot be, the capture bound to its instances): outputs,
    # running statistics and gradients of every block as eager Paddle's
    class Inner(nn.Layer):
        def __init__(self):
            super().__init__()
            self.inner = inner()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            if isinstance(self.inner, nn.Embedding):
                y = self.inner((x.abs() * 3).astype("int64") % 10).mean(-1)
            elif isinstance(self.inner, nn.BatchNorm1D):
                y = self.inner(x.reshape([-1, 8]))
            elif isinstance(self.inner, nn.Sequential):
                y = self.inner(x.unsqueeze(-1)).squeeze(-1)
            else:
                y = self.inner(x)
            if isinstance(y, tuple):
                y = y[0]
            if y.mean() > 100:
                y = y * 2
            return self.fc(y)

    paddle.seed(3)
    blocks = [Inner() for _ in range(4)]
    twins = copy.deepcopy(blocks)
    for b in blocks + twins:
        b.train()
    x = paddle.randn([2, 3, 8])

    def run(block, x):
        return block(x).square().sum()

    # a backend that documents it cannot compile LSTM runs that graph on paddle
    lstm = any(isinstance(b.inner, nn.LSTM) for b in blocks) and backend in CANNOT_COMPILE
    fast = jit_core.optimize(run, backend=backend, **({"fallback": True} if lstm else {}))
    for block, twin in zip(blocks, twins):
        paddle.seed(4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the fallback's
            got = fast(block, x)
        paddle.seed(4)
        want = run(twin, x)
        assert_same(got, want)
        got.backward()
        want.backward()
        for (name, a), (_, b) in zip(block.state_dict().items(), twin.state_dict().items()):
            assert_same(a, b), name
        for a, b in zip(block.parameters(), twin.parameters()):
            if b.grad is None:
                assert a.grad is None
            else:
                assert_same(a.grad, b.grad)
    assert fast.jit_stats.eager_frames == {}


@pytest.mark.parametrize("options", [{"share_layers": False}, {"freeze": True}])
def test_unshared_and_frozen_captures_stay_bound_to_their_instances(options, backend):
    # frozen parameters are folded into each instance's graph: no graph serves two
    paddle.seed(5)
    net = Stack([Block() for _ in range(4)])
    net.eval()
    fast = jit_core.optimize(net, backend=backend, **options)
    with paddle.no_grad():
        for _ in range(2):
            x = paddle.randn([4, 8])
            assert_same(fast(x), net(x))
    assert _entries(fast, "Block.forward") == 4, fast.jit_stats
