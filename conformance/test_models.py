"""Whole models captured into exactly one graph, on every backend.

Random-initialised models in ``eval()`` mode: one graph, no break, outputs equal to eager,
a cache hit on the second call, one recompile for a new input shape.
"""

from __future__ import annotations

import paddle
import pytest
from paddle.vision import models

import jit_core
from jit_core.api import frame_key
from jit_core.bytecode import compat

from .helpers import assert_same


class MLP(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.body = paddle.nn.Sequential(
            paddle.nn.Linear(32, 64),
            paddle.nn.BatchNorm1D(64),
            paddle.nn.ReLU(),
            paddle.nn.Linear(64, 64),
            paddle.nn.GELU(),
        )
        self.head = paddle.nn.Linear(64, 10)

    def forward(self, x):
        return paddle.nn.functional.log_softmax(self.head(self.body(x) + 1.0), axis=-1)


class Containers(paddle.nn.Layer):
    """Sequential, LayerList, LayerDict and a bare parameter, nested."""

    def __init__(self):
        super().__init__()
        self.seq = paddle.nn.Sequential(
            paddle.nn.Linear(16, 32), paddle.nn.ReLU(), paddle.nn.Linear(32, 16)
        )
        self.blocks = paddle.nn.LayerList([paddle.nn.Linear(16, 16) for _ in range(3)])
        self.heads = paddle.nn.LayerDict(
            {"a": paddle.nn.Linear(16, 8), "b": paddle.nn.Linear(16, 8)}
        )
        self.w = self.create_parameter([8, 8])

    def forward(self, x):
        h = self.seq(x) + x
        for i, block in enumerate(self.blocks):
            h = paddle.nn.functional.silu(block(h)) * (i + 1)
        outs = [self.heads[k](h) for k in sorted(self.heads.keys())]
        return paddle.matmul(outs[0] + outs[1], self.w)


#: name -> (factory, input shape); images are small so that the models stay quick on CPU
MODELS = {
    "resnet18": (models.resnet18, [1, 3, 64, 64]),
    "resnet50": (models.resnet50, [1, 3, 64, 64]),
    "mobilenet_v2": (models.mobilenet_v2, [1, 3, 64, 64]),
    "vgg11": (lambda: models.vgg11(num_classes=10), [1, 3, 32, 32]),
    "mlp": (MLP, [4, 32]),
    "containers": (Containers, [4, 16]),
}


def make(name: str) -> paddle.nn.Layer:
    paddle.seed(2024)
    net = MODELS[name][0]()
    net.eval()
    return net


def example(name: str, batch: int = 0) -> paddle.Tensor:
    shape = list(MODELS[name][1])
    if batch:
        shape[0] = batch
    return paddle.randn(shape)


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    return request.param, make(request.param)


def test_one_graph_no_break_equal_to_eager(model, backend):
    name, net = model
    x = example(name)
    report = jit_core.explain(net, x, backend=backend)
    assert report.graph_count == 1, str(report)
    assert report.break_count == 0, str(report)
    assert report.op_count > 5
    with paddle.no_grad():
        assert_same(report.result, net(x))


def test_cache_hit_and_one_recompile_per_shape(model, backend):
    name, net = model
    fast = jit_core.optimize(net, backend=backend)
    x = example(name)
    expected = net(x)
    assert_same(fast(x), expected)
    assert fast.jit_stats.captures == 1
    assert_same(fast(x), expected)
    y = example(name)  # new values, same shape
    assert_same(fast(y), net(y))
    assert fast.jit_stats.captures == 1, "same shapes must hit the cache"

    x2 = example(name, batch=2)
    assert_same(fast(x2), net(x2))
    assert fast.jit_stats.captures == 2, "a new input shape recompiles once"
    assert_same(fast(x2), net(x2))
    assert_same(fast(x), expected)
    stats = fast.jit_stats
    assert stats.captures == 2 and stats.compiled == 2 and not stats.eager_frames


@pytest.mark.autograd
@pytest.mark.parametrize("name", ["mlp", "resnet18"])
def test_train_and_eval_modes_never_share_a_graph(name, backend):
    eager, net = make(name), make(name)
    fast = jit_core.optimize(net, backend=backend)
    x = example(name, batch=4)
    assert_same(fast(x), eager(x))

    eager.train()
    fast.train()
    assert net.training and all(layer.training for layer in net.sublayers())
    out, expected = fast(x), eager(x)
    assert_same(out, expected, rtol=1e-4, atol=1e-5)
    assert fast.jit_stats.captures == 2, "train() must not reuse the eval() graph"
    # the training step itself: gradients and updated batch-norm statistics match eager
    out.mean().backward()
    expected.mean().backward()
    for (pname, p), (_, q) in zip(net.named_parameters(), eager.named_parameters()):
        assert (p.grad is None) == (q.grad is None), pname
        if q.grad is not None:
            assert_same(p.grad, q.grad, rtol=1e-3, atol=1e-5)
    # running statistics (buffers, or stop_gradient parameters in Paddle) moved exactly once
    state, expected_state = net.state_dict(), eager.state_dict()
    assert list(state) == list(expected_state)
    for key in expected_state:
        assert_same(state[key], expected_state[key], rtol=1e-4, atol=1e-5)

    fast.eval()
    eager.eval()
    assert_same(fast(x), eager(x), rtol=1e-4, atol=1e-5)
    assert fast.jit_stats.captures == 2, "back in eval(), the first graph is reused"


def test_parameters_stay_shared_with_the_layer(backend):
    net = make("mlp")
    fast = jit_core.optimize(net, backend=backend)
    assert list(fast.state_dict().keys()) == list(net.state_dict().keys())
    assert [id(p) for p in fast.parameters()] == [id(p) for p in net.parameters()]
    x = example("mlp")
    before = fast(x)

    state = {k: v * 0.5 for k, v in net.state_dict().items()}
    fast.set_state_dict(state)
    after = fast(x)
    assert_same(after, net(x))
    assert not bool(paddle.allclose(before, after)), "new weights must change the output"
    assert fast.jit_stats.captures == 1, "new parameter values need no recompile"


class BranchyBlocks(paddle.nn.Layer):
    """A forward with a comprehension and try/finally: on 3.11+ its code has an exception
    table, which Paddle's frame hook never shows us (jit_core enters it itself)."""

    def __init__(self):
        super().__init__()
        self.blocks = paddle.nn.LayerList([paddle.nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x, scale=1.0):
        outs = [paddle.tanh(block(x)) for block in self.blocks]
        try:
            y = paddle.add_n(outs) * scale
        finally:
            scale = None
        return y


def test_forward_with_exception_table_is_captured(backend):
    paddle.seed(7)
    net = BranchyBlocks()
    fast = jit_core.optimize(net, backend=backend)
    x = paddle.randn([2, 8])
    assert_same(fast(x), net(x))
    assert_same(fast(x, scale=0.5), net(x, scale=0.5))
    stats = fast.jit_stats
    assert stats.compiled == 2 and not stats.eager_frames, stats
    assert_same(fast(x), net(x))
    assert fast.jit_stats.captures == 2
    report = jit_core.explain(net, x, backend=backend)
    assert report.graph_count == 1 and report.break_count == 0, str(report)


def test_forward_hooks_run_as_in_eager(backend):
    paddle.seed(3)
    plain, hooked = BranchyBlocks(), BranchyBlocks()
    hooked.set_state_dict(plain.state_dict())
    hooked.register_forward_pre_hook(lambda layer, inputs: (inputs[0] * 2,))
    hooked.register_forward_post_hook(lambda layer, inputs, out: out + 1)
    fast = jit_core.optimize(hooked, backend=backend)
    x = paddle.randn([2, 8])
    assert_same(fast(x), plain(x * 2) + 1)
    assert_same(fast(x), plain(x * 2) + 1)
    stats = fast.jit_stats
    if compat.hook_skips(BranchyBlocks.forward.__code__):
        # 3.11+: Layer.__call__ must run the hooks, and the frame hook cannot see this
        # forward (it has an exception table): it runs eagerly and says why
        assert "forward hooks" in stats.eager_frames[frame_key(BranchyBlocks.forward)]
    else:
        # the hooks are user code too, each captured on its own frame
        assert stats.entries[frame_key(BranchyBlocks.forward)] == 1, stats
        assert not stats.eager_frames, stats
