"""The paddle backend's choice of executor for a training step's forward
(``jit_core.paddle_modes``): measured, checked against eager, cached, and without a trace
on the model (statistics, gradients, the random stream).

The timings the choice reads are set by each test (``timed``): what is checked is what it
does with them, not how fast this machine is."""

from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import jit_core
from jit_core import paddle_backend, paddle_modes

pytestmark = pytest.mark.autograd


class Net(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 8)
        self.bn = paddle.nn.BatchNorm1D(8)
        self.out = paddle.nn.Linear(8, 2)

    def forward(self, x):
        return self.out(F.dropout(F.relu(self.bn(self.fc(x))), 0.5, training=True))


@pytest.fixture
def timed(monkeypatch):
    """``timed(eager=ms, static=ms)``: what the trial rounds measure (the runs still run:
    their results and gradients are compared). No graph counts as kernel-bound."""
    monkeypatch.setattr(paddle_modes, "SAVED_PER_OP_US", 1e9)

    def set_times(eager: float, static: float) -> None:
        def fake(runs, example_inputs, wrt):
            for run in runs.values():
                paddle_modes._forward_backward(run, example_inputs, wrt)
            return {"eager": eager / 1e3, "static": static / 1e3}

        monkeypatch.setattr(paddle_modes, "_time", fake)

    return set_times


@pytest.fixture
def graph():
    paddle.seed(0)
    net = Net()
    x = paddle.randn([6, 4])
    gm = jit_core.capture(net, x)
    gm.meta["runs_backward"] = True
    return net, gm, x


def eager_build(gm, x):
    return lambda: paddle_backend.compile_graph(gm, [x], mode="eager")


def static_build(gm):
    return lambda: paddle_backend.compile_graph(gm, [], mode="static")


def test_static_is_chosen_where_it_is_faster(graph, timed):
    _, gm, x = graph
    timed(eager=2.0, static=1.5)
    chosen = paddle_modes.choose(gm, [x], eager_build(gm, x), static_build(gm), False)
    assert chosen.mode == "static", chosen.describe()
    assert chosen.describe() == (
        "static mode (forward and backward: static 1.50 ms, eager 2.00 ms)"
    )


@pytest.mark.parametrize("static_ms", [2.5, 1.99])
def test_eager_stays_where_static_is_not_faster_by_the_margin(graph, timed, static_ms):
    _, gm, x = graph
    timed(eager=2.0, static=static_ms)
    chosen = paddle_modes.choose(gm, [x], eager_build(gm, x), static_build(gm), False)
    assert chosen.mode == "eager", chosen.describe()


def test_a_static_build_that_disagrees_is_never_chosen(graph, timed):
    _, gm, x = graph
    timed(eager=2.0, static=1.0)
    run = paddle_backend.compile_graph(gm, [x], mode="static")

    def wrong():
        return lambda *args: tuple(o * 1.5 for o in run(*args))

    chosen = paddle_modes.choose(gm, [x], eager_build(gm, x), wrong, False)
    assert chosen.mode == "eager" and "static disagrees with eager" in chosen.why


def test_a_static_build_that_fails_is_never_chosen(graph, timed):
    _, gm, x = graph
    timed(eager=2.0, static=1.0)

    def broken():
        raise RuntimeError("no such operator in PIR")

    chosen = paddle_modes.choose(gm, [x], eager_build(gm, x), broken, False)
    assert chosen.mode == "eager"
    assert chosen.why == "static failed: RuntimeError: no such operator in PIR"


def test_a_kernel_bound_graph_is_not_timed(graph, monkeypatch):
    _, gm, x = graph
    # the forward and backward the static executor could save the least of
    monkeypatch.setattr(paddle_modes, "SAVED_PER_OP_US", 0.0)
    built = []
    chosen = paddle_modes.choose(gm, [x], eager_build(gm, x), lambda: built.append(1), False)
    assert chosen.mode == "eager" and chosen.why.startswith("kernel-bound: 5 operators")
    assert built == []  # no static build was made


def test_the_trials_leave_the_model_and_the_stream_as_they_were(graph, timed):
    net, gm, x = graph
    net(x).sum().backward()  # a gradient to keep (accumulation)
    grads = [p.grad.numpy().copy() for p in net.parameters() if p.grad is not None]
    stats = [net.bn._mean.numpy().copy(), net.bn._variance.numpy().copy()]
    paddle.seed(5)
    want = paddle.rand([4]).numpy()
    paddle.seed(5)
    timed(eager=2.0, static=1.0)
    paddle_modes.choose(gm, [x], eager_build(gm, x), static_build(gm), False)
    np.testing.assert_array_equal(paddle.rand([4]).numpy(), want)
    now = [p.grad.numpy() for p in net.parameters() if p.grad is not None]
    assert len(now) == len(grads)
    for a, b in zip(now, grads):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(net.bn._mean.numpy(), stats[0])
    np.testing.assert_array_equal(net.bn._variance.numpy(), stats[1])


def test_the_choice_is_kept_in_the_compile_cache(graph, timed, tmp_path, monkeypatch):
    monkeypatch.setenv("JIT_CORE_CACHE_DIR", str(tmp_path))
    _, gm, x = graph
    timed(eager=2.0, static=1.0)
    first = paddle_modes.choose(gm, [x], eager_build(gm, x), static_build(gm))
    assert first.mode == "static"
    eager_builds = []

    def counted():
        eager_builds.append(1)
        return eager_build(gm, x)()

    again = paddle_modes.choose(gm, [x], counted, static_build(gm))
    assert again.mode == "static" and again.why.endswith("from the compile cache")
    assert eager_builds == []  # nothing measured: the eager build was not even made


def test_only_a_step_forward_is_timed(graph):
    """A graph whose backward runs elsewhere (or nowhere: inference that forgot no_grad)
    runs eagerly, untimed; so does a step's forward under no_grad."""
    _, gm, x = graph
    gm.meta["runs_backward"] = False
    assert not paddle_modes.is_training_forward(gm, [x])
    gm.meta["runs_backward"] = True
    assert paddle_modes.is_training_forward(gm, [x])
    with paddle.no_grad():
        assert not paddle_modes.is_training_forward(gm, [x])


def test_a_step_on_the_static_executor_trains_as_eager(timed, monkeypatch, tmp_path):
    """The whole path: ``optimize(step)`` whose forward the choice gives to the static
    executor, against the same step run eagerly."""
    monkeypatch.setenv("JIT_CORE_CACHE_DIR", str(tmp_path))
    timed(eager=2.0, static=1.0)

    def build():
        paddle.seed(1)
        net = Net()
        opt = paddle.optimizer.AdamW(0.01, parameters=net.parameters())

        def step(x):
            loss = net(x).mean()
            loss.backward()
            opt.step()
            opt.clear_grad()
            return loss

        return net, step

    net_e, step_e = build()
    net_j, step_j = build()
    fast = jit_core.optimize(step_j)
    for i in range(4):
        x = paddle.randn([6, 4])
        paddle.seed(i)
        want = step_e(x)
        paddle.seed(i)
        np.testing.assert_allclose(fast(x).numpy(), want.numpy(), rtol=1e-5)
    for a, b in zip(net_j.state_dict().values(), net_e.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    backend = jit_core.explain(fast, paddle.randn([6, 4])).graphs[0].backend
    assert "static mode" in backend, backend
