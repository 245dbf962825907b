"""Training steps: forward, ``loss.backward()``, the optimizer's update and
``clear_grad()`` in one graph (the calls after the forward are its training calls), with
exactly eager Paddle's losses, gradients, parameters, optimizer state, BatchNorm
statistics and dropout masks, step after step.

Every graph that needs gradients runs on the paddle backend whichever backend is asked
for (the others are for inference), so each test runs on every backend all the same: the
choice must hold there too.
"""

from __future__ import annotations

import copy

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import jit_core

from .helpers import assert_same

pytestmark = pytest.mark.autograd


class Net(paddle.nn.Layer):
    """Linear, BatchNorm (training statistics), dropout, Linear."""

    def __init__(self, dropout=0.2):
        super().__init__()
        self.fc1 = paddle.nn.Linear(8, 16)
        self.bn = paddle.nn.BatchNorm1D(16)
        self.fc2 = paddle.nn.Linear(16, 3)
        self.p = dropout

    def forward(self, x):
        h = F.relu(self.bn(self.fc1(x)))
        return self.fc2(F.dropout(h, self.p, training=self.training))


def sgd(params):
    return paddle.optimizer.SGD(0.1, parameters=params), None


def momentum(params):
    clip = paddle.nn.ClipGradByGlobalNorm(0.5)
    opt = paddle.optimizer.Momentum(0.1, parameters=params, weight_decay=0.01, grad_clip=clip)
    return opt, None


def adam(params):
    sched = paddle.optimizer.lr.StepDecay(0.01, step_size=2, gamma=0.5)
    return paddle.optimizer.Adam(sched, parameters=params), sched


def adamw(params):
    sched = paddle.optimizer.lr.LinearWarmup(0.01, warmup_steps=3, start_lr=0.0, end_lr=0.01)
    opt = paddle.optimizer.AdamW(sched, parameters=params, weight_decay=0.1)
    return opt, sched


OPTIMIZERS = {"sgd": sgd, "momentum": momentum, "adam": adam, "adamw": adamw}


def make(setup, seed=0, **net_args):
    paddle.seed(seed)
    net = Net(**net_args)
    opt, sched = setup(net.parameters())

    def step(x, y):
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        if sched is not None:
            sched.step()
        return loss

    return net, opt, step


def batches(n=5):
    paddle.seed(99)
    return [(paddle.randn([6, 8]), paddle.randint(0, 3, [6, 1])) for _ in range(n)]


def state_of(net, opt):
    """Everything a step changes: parameters, BatchNorm statistics, optimizer state."""
    tensors = dict(net.state_dict())
    # (the optimizer names its state after Paddle's per-process tensor names: by order)
    found = [v for v in opt.state_dict().values() if isinstance(v, paddle.Tensor)]
    for i, value in enumerate(found):
        tensors[f"optimizer state {i}"] = value
    return tensors


def assert_same_state(a, b):
    assert list(a) == list(b)
    for k in a:
        np.testing.assert_array_equal(a[k].numpy(), b[k].numpy(), err_msg=k)


def run_both(eager_step, fast_step, data, seed=10):
    """Each batch through both steps from the same seed: the losses, bit for bit."""
    for i, (x, y) in enumerate(data):
        paddle.seed(seed + i)
        want = eager_step(x, y)
        paddle.seed(seed + i)
        got = fast_step(x, y)
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=f"step {i}")


def counts(fast, *args):
    report = jit_core.explain(fast, *args)
    return report, (report.graph_count, report.break_count, len(fast.jit_stats.eager_frames))


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_a_step_is_one_graph_and_matches_eager(optimizer, backend):
    net_e, opt_e, step_e = make(OPTIMIZERS[optimizer])
    net_j, opt_j, step_j = make(OPTIMIZERS[optimizer])
    fast = jit_core.optimize(step_j, backend=backend)
    run_both(step_e, fast, batches())
    assert_same_state(state_of(net_j, opt_j), state_of(net_e, opt_e))
    assert fast.jit_stats.eager_frames == {}, fast.jit_stats
    assert fast.jit_stats.captures == 1, fast.jit_stats
    x, y = batches(1)[0]
    report, seen = counts(jit_core.optimize(make(OPTIMIZERS[optimizer])[2]), x, y)
    assert seen == (1, 0, 0), str(report)
    calls = report.graphs[0].training_calls
    kind = type(opt_j).__name__
    assert calls[:3] == ["cross_entropy.backward()", f"{kind}.step()", f"{kind}.clear_grad()"]


def test_the_eager_mode_is_eager_bit_for_bit(backend):
    """``mode="eager"``: the step's forward on the lowered kernel calls."""
    net_e, opt_e, step_e = make(adamw)
    net_j, opt_j, step_j = make(adamw)
    fast = jit_core.optimize(step_j, backend="paddle", mode="eager")
    run_both(step_e, fast, batches())
    assert_same_state(state_of(net_j, opt_j), state_of(net_e, opt_e))


def test_the_static_mode_trains_as_eager_does(backend):
    """``mode="static"``: forward and backward as Paddle's static programs."""
    net_e, opt_e, step_e = make(sgd)
    net_j, opt_j, step_j = make(sgd)
    fast = jit_core.optimize(step_j, backend="paddle", mode="static")
    for i, (x, y) in enumerate(batches()):
        paddle.seed(10 + i)
        want = step_e(x, y)
        paddle.seed(10 + i)
        assert_same(fast(x, y), want)
    for (k, a), b in zip(state_of(net_j, opt_j).items(), state_of(net_e, opt_e).values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


def test_gradients_of_a_backward_in_the_graph(backend):
    """No optimizer: the graph's backward writes every parameter's gradient as eager's,
    accumulating into what is there (``retain_graph`` keeps the graph for a second)."""
    net_e, net_j = Net(dropout=0.0), None
    net_j = copy.deepcopy(net_e)

    def grads(net):
        def f(x, y):
            loss = F.cross_entropy(net(x), y)
            loss.backward(retain_graph=True)
            (loss * 2).backward()
            return loss

        return f

    fast = jit_core.optimize(grads(net_j), backend=backend)
    for x, y in batches(3):  # the gradients add up over the three calls
        assert_same(fast(x, y), grads(net_e)(x, y))
    for (name, p), q in zip(net_e.named_parameters(), net_j.parameters()):
        if p.grad is None:
            assert q.grad is None, name
        else:
            np.testing.assert_array_equal(q.grad.numpy(), p.grad.numpy(), err_msg=name)


def test_a_hook_on_a_parameter_runs_in_the_graphs_backward(backend):
    paddle.seed(1)
    net = paddle.nn.Linear(4, 2)
    seen = []
    net.weight.register_hook(lambda g: seen.append(float(g.abs().sum())) or g * 0.5)

    def f(x):
        loss = net(x).sum()
        loss.backward()
        return loss

    fast = jit_core.optimize(f, backend=backend)
    x = paddle.ones([3, 4])
    fast(x)
    assert len(seen) == 1 and seen[0] > 0
    np.testing.assert_allclose(net.weight.grad.numpy(), np.full([4, 2], 1.5), rtol=1e-6)


def test_clear_grad_and_accumulation_over_micro_batches(backend):
    """Gradients summed over two micro-batches, an update every second call; the
    optimizer's ``clear_grad(set_to_zero=False)`` and a layer's ``clear_gradients()``."""

    def build():
        paddle.seed(3)
        net = Net(dropout=0.0)
        opt = paddle.optimizer.SGD(0.05, parameters=net.parameters())

        def step(x, y, i):
            loss = F.cross_entropy(net(x), y) / 2
            loss.backward()
            if i % 2 == 1:
                opt.step()
                if i % 4 == 1:
                    opt.clear_grad(set_to_zero=False)
                else:
                    net.clear_gradients()
            return loss

        return net, opt, step

    net_e, opt_e, step_e = build()
    net_j, opt_j, step_j = build()
    fast = jit_core.optimize(step_j, backend=backend)
    for i, (x, y) in enumerate(batches(8)):
        np.testing.assert_array_equal(fast(x, y, i).numpy(), step_e(x, y, i).numpy())
    assert_same_state(state_of(net_j, opt_j), state_of(net_e, opt_e))
    assert fast.jit_stats.eager_frames == {}, fast.jit_stats


# (on the CPU, auto_cast and GradScaler say they do nothing: the step is the same)
@pytest.mark.filterwarnings("ignore:.*can only be enabled on CUDAPlace:UserWarning")
def test_amp_with_a_grad_scaler(backend):
    def build():
        paddle.seed(4)
        net = Net(dropout=0.0)
        opt = paddle.optimizer.AdamW(0.01, parameters=net.parameters())
        scaler = paddle.amp.GradScaler(init_loss_scaling=1024)

        def step(x, y):
            with paddle.amp.auto_cast(level="O1"):
                loss = F.cross_entropy(net(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.clear_grad()
            return loss

        return net, opt, step

    net_e, opt_e, step_e = build()
    net_j, opt_j, step_j = build()
    fast = jit_core.optimize(step_j, backend=backend)
    run_both(step_e, fast, batches(4))
    assert_same_state(state_of(net_j, opt_j), state_of(net_e, opt_e))
    x, y = batches(1)[0]
    report, seen = counts(jit_core.optimize(build()[2]), x, y)
    assert seen == (1, 0, 0), str(report)
    assert report.graphs[0].training_calls[:2] == [
        "GradScaler.scale()",
        "GradScaler.scale().backward()",
    ]


def test_dropout_masks_and_batch_norm_statistics_step_after_step(backend):
    """Training mode, no seeding between the steps: the masks follow the stream as
    eager's do, and the statistics as eager's."""
    net_e, opt_e, step_e = make(sgd, dropout=0.5)
    net_j, opt_j, step_j = make(sgd, dropout=0.5)
    fast = jit_core.optimize(step_j, backend=backend)
    data = batches(4)
    paddle.seed(21)
    want = [step_e(x, y).numpy() for x, y in data]
    paddle.seed(21)
    got = [fast(x, y).numpy() for x, y in data]
    np.testing.assert_array_equal(np.array(got), np.array(want))
    np.testing.assert_array_equal(net_j.bn._mean.numpy(), net_e.bn._mean.numpy())
    np.testing.assert_array_equal(net_j.bn._variance.numpy(), net_e.bn._variance.numpy())


def test_no_grad_inside_the_step(backend):
    def build():
        net, opt, step = make(sgd, seed=5, dropout=0.0)

        def full(x, y):
            loss = step(x, y)
            with paddle.no_grad():
                accuracy = (net(x).argmax(-1, keepdim=True) == y).astype("float32").mean()
            return loss, accuracy

        return net, opt, full

    net_e, opt_e, step_e = build()
    net_j, opt_j, step_j = build()
    fast = jit_core.optimize(step_j, backend=backend)
    for x, y in batches(3):
        assert_same(fast(x, y), step_e(x, y))
    assert_same_state(state_of(net_j, opt_j), state_of(net_e, opt_e))


def test_what_the_step_changed_is_read_after_the_graph(backend):
    """The learning rate after the scheduler's step, and the loss as a number: read after
    the graph's training calls (a break there), as eager reads them."""

    def build():
        net, opt, step = make(adam, seed=6, dropout=0.0)

        def logged(x, y):
            loss = step(x, y)
            return loss.item(), opt.get_lr()

        return net, opt, logged

    net_e, opt_e, step_e = build()
    net_j, opt_j, step_j = build()
    fast = jit_core.optimize(step_j, backend=backend)
    for x, y in batches(5):
        assert fast(x, y) == step_e(x, y)
    assert_same_state(state_of(net_j, opt_j), state_of(net_e, opt_e))


def test_a_replaced_layer_recompiles(backend):
    """A parameter of another shape, or another layer, is not updated through a graph
    that holds the old one: the step is captured again."""
    net_e, opt_e, step_e = make(sgd, seed=7, dropout=0.0)
    net_j, opt_j, step_j = make(sgd, seed=7, dropout=0.0)
    fast = jit_core.optimize(step_j, backend=backend)
    data = batches(4)
    run_both(step_e, fast, data[:2])
    for net in (net_e, net_j):
        paddle.seed(8)
        net.fc2 = paddle.nn.Linear(16, 3)
    opt_e._parameter_list = list(net_e.parameters())
    opt_j._parameter_list = list(net_j.parameters())
    run_both(step_e, fast, data[2:])
    assert_same_state(state_of(net_j, opt_j), state_of(net_e, opt_e))
    assert fast.jit_stats.captures == 2, fast.jit_stats


def test_an_operation_after_the_update_breaks_the_graph(backend):
    """What follows the training calls reads the updated parameters: a graph of its own."""

    def build():
        net, opt, step = make(sgd, seed=9, dropout=0.0)

        def twice(x, y):
            loss = step(x, y)
            return loss, net(x)  # the updated model

        return net, opt, twice

    net_e, opt_e, step_e = build()
    net_j, opt_j, step_j = build()
    fast = jit_core.optimize(step_j, backend=backend)
    for x, y in batches(3):
        assert_same(fast(x, y), step_e(x, y))
    x, y = batches(1)[0]
    report, seen = counts(jit_core.optimize(build()[2]), x, y)
    # the break is inside net's forward (its first operation): the step's graph with its
    # training calls, net's forward as a frame of its own, and the rest of `twice`
    assert seen == (3, 1, 0), str(report)
    assert "after SGD.clear_grad()" in report.breaks[0].reason, str(report)


# ------------------------------------------------------------------ autograd's flags


class Gated(paddle.nn.Layer):
    """Reads what eager autograd says of its tensors to choose a path, as PaddleNLP's
    encoders do before each layer (``has_gradient = not output.stop_gradient``)."""

    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)
        self.emb = paddle.nn.Embedding(10, 4)

    def forward(self, x, ids):
        h = self.fc(x)
        flags = [
            h.stop_gradient,  # a parameter needs a gradient: False
            h.argmax(-1).stop_gradient,  # not differentiable: True
            h.detach().stop_gradient,
            (x * 2).stop_gradient,  # the input alone decides
            h.is_leaf,
        ]
        with paddle.no_grad():
            flags.append((h * 2).stop_gradient)
        y = h * 2 if not h.stop_gradient else h - 1
        return y + self.emb(ids).sum(), flags


def test_stop_gradient_of_a_tensor_the_graph_made_is_eagers(backend):
    net = Gated()
    fast = jit_core.optimize(net, backend=backend)
    x, ids = paddle.rand([2, 4]), paddle.to_tensor([1, 2])
    for needs in (False, True):
        x.stop_gradient = not needs
        assert_same(fast(x, ids), net(x, ids))
    report, seen = counts(jit_core.optimize(Gated()), x, ids)
    assert seen == (1, 0, 0), str(report)


def test_a_frozen_parameter_is_seen(backend):
    """The flags answered for a parameter that needs a gradient are guarded: frozen, the
    code is captured again and reads True."""
    net = Gated()
    fast = jit_core.optimize(net, backend=backend)
    x, ids = paddle.rand([2, 4]), paddle.to_tensor([1, 2])
    assert fast(x, ids)[1][0] is False
    net.fc.weight.stop_gradient = True
    net.fc.bias.stop_gradient = True
    assert_same(fast(x, ids), net(x, ids))
    assert fast(x, ids)[1][0] is True
    assert fast.jit_stats.captures == 2, fast.jit_stats


def test_capture_refuses_a_step_it_would_hold_only_half_of():
    """``jit_core.capture()`` returns a graph of tensor work: a step's training calls are
    not in it, so it is refused rather than returned without them."""
    net, opt, step = make(sgd, dropout=0.0)
    x, y = batches(1)[0]
    with pytest.raises(jit_core.CaptureError, match=r"what SGD.step\(\) changes"):
        jit_core.capture(step, x, y)
    assert all(p.grad is None for p in net.parameters())  # nothing ran for real
