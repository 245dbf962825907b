"""Random numbers under ``paddle.seed``: every call of a compiled function draws what eager
Paddle draws, its first call (capture and build included) as much as any later one, and
leaves the generator where eager leaves it.

Every random op Paddle has runs in a graph, on both sides of a graph break, across a
recompile (a new static shape), with dynamic shapes, and in a training-mode layer. What
jit-core runs for itself while it compiles (the capture's example values, guard
self-tests, shape propagation, export checks, a backend's build) must draw nothing from
the user's stream.
"""

from __future__ import annotations

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import jit_core
from jit_core.runtime import convert_frame, native

from .helpers import assert_same

#: each takes ``x`` (float32, rank 2) and returns a float32 tensor of its shape
RANDOM_OPS = {
    "dropout": lambda x: F.dropout(x * 2, p=0.5, training=True) + 1,
    "dropout_downscale": lambda x: F.dropout(x, p=0.3, training=True, mode="downscale_in_infer"),
    "dropout_axis": lambda x: F.dropout(x, p=0.5, axis=1, training=True),
    "dropout2d": lambda x: F.dropout2d(x.unsqueeze([0, 3]), p=0.5, training=True).squeeze([0, 3]),
    "alpha_dropout": lambda x: F.alpha_dropout(x, p=0.5, training=True),
    "rand": lambda x: x + paddle.rand(x.shape),
    "randn": lambda x: x * paddle.randn(x.shape),
    "randint": lambda x: x + paddle.randint(0, 10, x.shape).astype("float32"),
    "uniform": lambda x: x + paddle.uniform(x.shape, min=-1.0, max=1.0),
    "normal": lambda x: x + paddle.normal(0.0, 2.0, x.shape),
    "standard_normal": lambda x: x - paddle.standard_normal(x.shape),
    "bernoulli": lambda x: paddle.bernoulli(F.sigmoid(x)),
    "multinomial": lambda x: (
        x
        + paddle.multinomial(F.softmax(x, axis=-1), x.shape[-1], replacement=True).astype("float32")
    ),
    "randperm": lambda x: x[paddle.randperm(x.shape[0])],
    "uniform_": lambda x: paddle.zeros_like(x).uniform_(-1.0, 1.0) + x,
}


def in_a_graph(op):
    def f(x):
        return op(x) * 2

    return f


def around_a_break(op):
    def f(x):
        y = op(x)
        if y.sum() > -1e9:  # a tensor decides: the graph breaks here
            y = y + op(x)
        return y * 2

    return f


class Noisy(paddle.nn.Layer):
    """A layer in training mode whose forward draws between two Linear layers."""

    def __init__(self, op):
        super().__init__()
        self.op = op
        self.fc1 = paddle.nn.Linear(6, 6)
        self.fc2 = paddle.nn.Linear(6, 6)

    def forward(self, x):
        return self.fc2(self.op(self.fc1(x)))


#: path -> (what to optimize, the optimize() options, the input shapes of its calls)
PATHS = {
    "graph": (in_a_graph, {}, [[4, 6]] * 3),
    "break": (around_a_break, {}, [[4, 6]] * 3),
    # the second shape recompiles the function with static shapes
    "recompile": (in_a_graph, {"dynamic": False}, [[4, 6], [5, 6], [5, 6], [4, 6]]),
    "dynamic": (in_a_graph, {"dynamic": True}, [[4, 6], [5, 6], [7, 6]]),
    "layer": (Noisy, {}, [[4, 6]] * 3),
}


@pytest.fixture(autouse=True)
def a_first_capture_in_a_process(monkeypatch):
    """Each test's first capture is what a new process's first capture is: the compiled
    tensor check of guards loads and tests itself on tensors it makes (one of them a
    parameter, whose initializer would draw)."""
    monkeypatch.setattr(native, "_module", None)
    monkeypatch.setattr(native, "_reason", None)


@pytest.fixture(params=["graph", "capture"], ids=["first-runs-graph", "first-from-capture"])
def first_call(request, monkeypatch):
    """How the call that captures a graph computes its results: by running the compiled
    graph (as the suites run), or, where it can, from the capture's own eager run of the
    graph's operations (``convert_frame.FirstFromCapture``, on by default). Yields, for
    the second, per first call of a graph whether it returned the capture's results."""
    served: list = []
    monkeypatch.setattr(convert_frame, "FIRST_CALL_FROM_CAPTURE", request.param == "capture")
    real = convert_frame.FirstFromCapture.__call__

    def spy(self, *args):
        outputs = self.outputs
        got = real(self, *args)
        served.append(outputs is not None and got is outputs)
        return got

    monkeypatch.setattr(convert_frame.FirstFromCapture, "__call__", spy)
    return served if request.param == "capture" else None


def _check_served(served, backend, stats, op: str, can_serve: bool) -> None:
    """Where the first call of each graph took the capture's draws: every graph's (each
    draws, and a graph that draws runs on the paddle backend whichever was asked for),
    but for an in-place draw (``uniform_``) and a layer whose parameters want gradients."""
    if served is None:
        return
    if can_serve and op != "uniform_":
        assert served == [True] * stats.compiled, (backend, stats)
    else:
        assert served == [], (backend, stats)


def _run(fn, x, seed):
    """``fn(x)`` from ``paddle.seed(seed)``, and the generator's next draw after it."""
    paddle.seed(seed)
    out = fn(x)
    return out, paddle.rand([5]).numpy()


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("op", sorted(RANDOM_OPS))
def test_every_call_draws_what_eager_draws(op, path, backend, first_call):
    make, options, shapes = PATHS[path]
    fn = make(RANDOM_OPS[op])
    fast = jit_core.optimize(fn, backend=backend, **options)
    paddle.seed(0)
    inputs = [paddle.randn(shape) for shape in shapes]
    for call, x in enumerate(inputs):
        want, want_next = _run(fn, x, 100 + call)
        got, got_next = _run(fast, x, 100 + call)
        assert_same(got, want)
        np.testing.assert_array_equal(
            got_next, want_next, err_msg=f"call {call}: the stream after it is not eager's"
        )
    stats = fast.jit_stats
    assert stats.eager_frames == {}, stats
    if path == "recompile":
        assert stats.compiled == 2, stats  # one entry per shape
    elif path == "dynamic":
        assert stats.compiled == 1, stats  # one entry serves every size
    _check_served(first_call, backend, stats, op, path != "layer")


def test_capture_draws_nothing():
    """``jit_core.capture()`` runs the function's ops on its example inputs: the user's
    stream is where it was before."""
    x = paddle.randn([4, 6])
    paddle.seed(5)
    want = paddle.rand([5]).numpy()
    paddle.seed(5)
    gm = jit_core.capture(in_a_graph(RANDOM_OPS["dropout"]), x)
    np.testing.assert_array_equal(paddle.rand([5]).numpy(), want)
    paddle.seed(6)
    want = in_a_graph(RANDOM_OPS["dropout"])(x)
    paddle.seed(6)
    assert_same(gm(x)[0], want)  # the graph draws what the function draws


def dropped_then_raises(op):
    def f(x):
        op(x)  # nothing reads the value: only the generator sees the draw
        raise ValueError("after the draw")  # the graph breaks before the raise

    return f


def dropped_then_returns(op):
    def f(x):
        op(x)
        return len(x.shape)

    return f


@pytest.mark.parametrize("make", [dropped_then_raises, dropped_then_returns])
@pytest.mark.parametrize("op", sorted(RANDOM_OPS))
def test_a_draw_nothing_reads_still_draws(op, make, backend, first_call):
    """A graph none of whose values are live (the frame raises, or returns a number)
    still runs where it draws: the generator moves as eager's does."""
    fn = make(RANDOM_OPS[op])
    fast = jit_core.optimize(fn, backend=backend)
    x = paddle.randn([4, 6])
    for call in range(2):
        outcomes = []
        for f in (fn, fast):
            paddle.seed(200 + call)
            try:
                outcome = f(x)
            except ValueError as e:
                outcome = str(e)
            outcomes.append((outcome, paddle.rand([5]).numpy()))
        (want, want_next), (got, got_next) = outcomes
        assert got == want
        np.testing.assert_array_equal(
            got_next, want_next, err_msg=f"call {call}: the stream after it is not eager's"
        )
    _check_served(first_call, backend, fast.jit_stats, op, True)
