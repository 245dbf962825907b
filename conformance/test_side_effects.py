"""Side effects in captured code happen exactly once, in order, where eager Paddle makes
them: attribute stores on ``self``, list and dict mutations of outside objects, global
stores, and in-place tensor operations. Attribute and global stores are graph breaks (the
store runs in CPython between two graphs); mutations of outside lists and dicts are
written back after the graph (``test_outside_containers``)."""

from __future__ import annotations

import copy

import paddle
import pytest

import jit_core

from .helpers import assert_same

TOTAL = 0
LOG: list = []


class Stateful(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(3, 3)
        self.calls = 0
        self.history: list = []
        self.cache: dict = {}

    def forward(self, x):
        global TOTAL
        h = self.fc(x)
        self.calls += 1
        self.history.append(self.calls)
        self.cache["last"] = self.calls
        TOTAL += 1
        LOG.append(("forward", self.calls))
        return h * self.calls


def test_layer_state_and_globals_change_as_in_eager(backend):
    global TOTAL
    paddle.seed(1)
    eager_net = Stateful()
    eager_net.eval()
    net = copy.deepcopy(eager_net)
    x = paddle.rand([2, 3])

    TOTAL = 0
    LOG.clear()
    expected = [eager_net(x) for _ in range(3)]
    eager_state = (TOTAL, list(LOG))

    TOTAL = 0
    LOG.clear()
    fast = jit_core.optimize(net, backend=backend)
    got = [fast(x) for _ in range(3)]
    assert_same(got, expected)
    assert (TOTAL, LOG) == eager_state
    assert (net.calls, net.history, net.cache) == (3, [1, 2, 3], {"last": 3})
    assert fast.jit_stats.eager_frames == {}

    report = jit_core.explain(jit_core.optimize(copy.deepcopy(eager_net), backend=backend), x)
    kinds = [b.instruction.split()[0] for b in report.breaks]
    # the global store is a break; the attribute store, the list append and the dict
    # store are written back after the graph before it
    assert kinds == ["STORE_GLOBAL"], str(report)
    assert "L['self'].calls = constant 4: set after the graph" in str(report)
    assert all(b.graph_break for b in report.breaks), str(report)


def inplace_ops(x, y):
    z = x * 2
    x.add_(y)
    x[0] = 1.0
    return z + x


def container_mutations(x, items, table):
    items.append(x * 2)
    items.extend([1, 2])
    first = items.pop(0)
    table["sum"] = x.sum()
    del table["old"]
    return x + len(items) + first


@pytest.mark.parametrize(
    "fn, make",
    [
        (inplace_ops, lambda: (paddle.rand([3]), paddle.rand([3]))),
        (container_mutations, lambda: (paddle.rand([3]), [5.0], {"old": 1})),
    ],
    ids=["inplace_ops", "container_mutations"],
)
def test_mutated_arguments_equal_eager(fn, make, backend):
    paddle.seed(2)
    args = make()

    def fresh():
        return [a.clone() if isinstance(a, paddle.Tensor) else copy.copy(a) for a in args]

    fast = jit_core.optimize(fn, backend=backend)
    for _ in range(2):
        eager_args, jit_args = fresh(), fresh()
        expected = fn(*eager_args)
        assert_same(fast(*jit_args), expected)
        assert_same(jit_args, eager_args)  # every argument mutated exactly as in eager
    assert fast.jit_stats.eager_frames == {}


class Scaler:
    def __init__(self, k):
        self.k = k
        self.calls: list = []

    def apply(self, x):
        self.calls.append(self.k)
        return x * self.k


def run_callback(x, callback):
    return callback(x) + 1


def test_a_bound_method_passed_in_keeps_its_object_and_its_effects(backend):
    # the object behind a bound method is guarded and its list is the real one: another
    # object with another factor must not reuse the first capture, and every call's
    # append must land on the right object
    x = paddle.ones([3])
    two, three = Scaler(2.0), Scaler(3.0)
    fast = jit_core.optimize(run_callback, backend=backend)
    assert_same(fast(x, two.apply), x * 2 + 1)
    assert_same(fast(x, three.apply), x * 3 + 1)
    assert_same(fast(x, two.apply), x * 2 + 1)
    assert (two.calls, three.calls) == ([2.0, 2.0], [3.0])


class Memo:
    def remember(self, x, seen=[]):  # noqa: B006  (the mutable default is the point)
        seen.append(1)
        return x * len(seen)


MEMO = Memo()


def call_remember(x):
    # a method: its function is reached through the object, its default without a path
    return MEMO.remember(x) + 0


def test_a_mutable_default_reached_through_a_method_is_mutated_once_per_call(backend):
    seen = Memo.remember.__defaults__[0]
    seen.clear()
    x = paddle.ones([2])
    expected = [call_remember(x) for _ in range(2)]
    seen.clear()
    fast = jit_core.optimize(call_remember, backend=backend)
    assert_same([fast(x) for _ in range(2)], expected)
    assert seen == [1, 1]


class Normalizing(paddle.nn.Layer):
    """Writes back a setting it holds, as BatchNorm2D does with its ``_data_format``."""

    def __init__(self, layout: str = "NCHW"):
        super().__init__()
        self.fc = paddle.nn.Linear(3, 3)
        self.layout = layout

    def forward(self, x):
        if self.layout in ("NCHW", "NC"):
            self.layout = "NCHW"
        return self.fc(x) * 2


def test_a_store_of_the_value_an_attribute_holds_is_no_graph_break(backend):
    net = Normalizing()
    fast = jit_core.optimize(net, backend=backend)
    x = paddle.rand([2, 3])
    report = jit_core.explain(jit_core.optimize(net, backend=backend), x)
    assert (report.graph_count, report.break_count) == (1, 0), str(report)
    assert_same(fast(x), net(x))
    # "NC" is stored over: a real store, which breaks the graph and happens as in eager
    net.layout = "NC"
    assert_same(fast(x), net(x))
    assert net.layout == "NCHW"
    net.layout = "NC"
    twin = copy.deepcopy(net)
    assert_same(fast(x), twin(x))
    assert net.layout == twin.layout == "NCHW"
