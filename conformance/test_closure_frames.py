"""Frames with free variables (closures that read the enclosing function's variables)
can break their graph: the resume functions get the frame's own cells, so a variable that
another closure changes during the break is read as eager reads it.

A training step written as a closure is the common case: the forward and the loss are a
graph, and ``loss.backward()``, ``opt.step()`` and ``opt.clear_grad()`` its training calls
(no break).
"""

from __future__ import annotations

import copy

import paddle
import pytest

import jit_core

from .helpers import assert_same


def make_step(model, opt):
    def step(x, y):
        loss = paddle.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.clear_grad()
        return loss

    return step


@pytest.mark.autograd
def test_training_step_as_a_closure_matches_eager(backend):
    paddle.seed(30)
    model = paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.ReLU(), paddle.nn.Linear(8, 4))
    twin = copy.deepcopy(model)
    opt = paddle.optimizer.SGD(0.1, parameters=model.parameters())
    twin_opt = paddle.optimizer.SGD(0.1, parameters=twin.parameters())
    eager = make_step(twin, twin_opt)
    fast = jit_core.optimize(make_step(model, opt), backend=backend)
    for _ in range(3):
        x, y = paddle.rand([2, 4]), paddle.rand([2, 4])
        assert_same(fast(x, y), eager(x, y))
        assert_same([p for p in model.parameters()], [p for p in twin.parameters()])
    stats = fast.jit_stats
    assert stats.eager_frames.get(jit_core.api.frame_key(fast._orig_fn)) is None, stats
    report = jit_core.explain(make_step(copy.deepcopy(model), opt), x, y)
    assert (report.graph_count, report.break_count) == (1, 0), str(report)
    assert report.graphs[0].training_calls == [
        "mse_loss.backward()",
        "SGD.step()",
        "SGD.clear_grad()",
    ], str(report)


def make_counter():
    count = 0

    def bump():
        nonlocal count
        count += 1

    def scaled(x):
        y = x * 2
        bump()  # another closure changes the cell scaled shares with it
        return y * count

    return scaled, lambda: count


def test_a_cell_another_closure_changes_is_read_after_it(backend):
    x = paddle.rand([3])
    scaled, count = make_counter()
    fast = jit_core.optimize(scaled, backend=backend)
    eager, eager_count = make_counter()
    for _ in range(3):
        assert_same(fast(x), eager(x))
        assert count() == eager_count()
    report = jit_core.explain(make_counter()[0], x)
    # bump, inlined, writes the cell of scaled's closure: the capture reads the new count
    # and stores it into the real cell after the graph (no break)
    assert (report.graph_count, report.break_count) == (1, 0), str(report)


def make_printer(scale):
    def show(x):
        y = x * scale
        print("scaled", y.shape)
        return y + scale

    return show


def test_each_closure_instance_reads_its_own_cells(backend, capsys):
    x = paddle.rand([3])
    for scale in (2.0, 3.0):
        fast = jit_core.optimize(make_printer(scale), backend=backend)
        assert_same(fast(x), make_printer(scale)(x))
    assert capsys.readouterr().out.count("scaled") == 4
