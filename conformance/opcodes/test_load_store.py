"""load_store family: attribute loads through super() (LOAD_SUPER_ATTR on 3.12; a call of
the builtin super before), captured into one graph with eager results."""

from __future__ import annotations

import paddle
import pytest

import jit_core
from jit_core import errors
from jit_opcodes.coverage import covers, covers_cases

from ..helpers import assert_same


class Base(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)

    def forward(self, x):
        return paddle.tanh(self.fc(x))


class ZeroArgSuper(Base):
    def forward(self, x):
        return super().forward(x) * 2


class TwoArgSuper(Base):
    def forward(self, x):
        return super().forward(x) + 1


class ScaledLinear(paddle.nn.Linear):
    """A subclass of a Paddle layer whose forward calls Paddle's."""

    def forward(self, x):
        return super().forward(x) * 0.5


@covers_cases(
    (cls.forward, ("LOAD_SUPER_ATTR", "LOAD_GLOBAL"))
    for cls in (ZeroArgSuper, TwoArgSuper, ScaledLinear)
)
@pytest.mark.parametrize(
    "make",
    [ZeroArgSuper, TwoArgSuper, lambda: ScaledLinear(4, 3)],
    ids=["zero-arg", "two-arg", "paddle-parent"],
)
def test_super_attribute_is_one_graph(make, backend):
    paddle.seed(3)
    net = make()
    net.eval()
    x = paddle.randn([2, 4])
    report = jit_core.explain(jit_core.optimize(net, backend=backend), x)
    assert report.graph_count == 1 and report.break_count == 0, str(report)
    assert_same(report.result, net(x))
    fast = jit_core.optimize(net, backend=backend)
    assert_same(fast(x), net(x))
    assert_same(fast(x), net(x))
    assert fast.jit_stats.captures == 1


def locals_and_attributes(x, scale=2.0):
    n = x.shape[0]
    tmp = x * scale
    y = tmp.sum(axis=0)  # LOAD_METHOD before 3.12, LOAD_ATTR with the method bit on 3.12
    del tmp
    for i in range(n):
        last = i
    # `last` may be unbound here (an empty loop): LOAD_FAST_CHECK on 3.12
    evens = [i * 2 for i in range(n)]  # 3.12 inlines it: LOAD_FAST_AND_CLEAR saves `i`
    first, second = last, n  # 3.13: one STORE_FAST_STORE_FAST for both
    return y * first + sum(evens) + second


@covers(
    locals_and_attributes,
    "LOAD_FAST",
    "STORE_FAST",
    "DELETE_FAST",
    "LOAD_CONST",
    "LOAD_ATTR",
    "LOAD_METHOD|LOAD_ATTR",
    "LOAD_FAST_CHECK",
    "LOAD_FAST_AND_CLEAR",
    "LOAD_FAST_LOAD_FAST",
    "STORE_FAST_LOAD_FAST",
    "STORE_FAST_STORE_FAST",
)
def test_locals_and_attributes_in_one_graph(backend):
    x = paddle.rand([3, 2])
    report = jit_core.explain(jit_core.optimize(locals_and_attributes, backend=backend), x)
    assert report.graph_count == 1 and report.break_count == 0, str(report)
    assert_same(report.result, locals_and_attributes(x))


CALLS = 0


def count_calls(x):
    global CALLS
    CALLS += 1
    return x * CALLS


def scratch_global(x):
    global SCRATCH
    SCRATCH = x.shape[0]
    y = x * SCRATCH
    del SCRATCH
    return y


@covers(count_calls, "STORE_GLOBAL")
@covers(scratch_global, "STORE_GLOBAL", "DELETE_GLOBAL")
@pytest.mark.parametrize("fn", [count_calls, scratch_global])
def test_global_stores_break_the_graph_with_the_same_effects(fn, backend):
    global CALLS
    x = paddle.rand([2])
    CALLS = 0
    expected = [fn(x), fn(x)]
    after_eager = (CALLS, "SCRATCH" in globals())
    CALLS = 0
    fast = jit_core.optimize(fn, backend=backend)
    assert_same([fast(x), fast(x)], expected)
    assert (CALLS, "SCRATCH" in globals()) == after_eager
    assert fast.jit_stats.eager_frames == {}
    CALLS = 0
    report = jit_core.explain(fn, x, backend=backend)
    assert report.breaks and all(b.graph_break for b in report.breaks), str(report)
    assert all(b.category == errors.SIDE_EFFECT for b in report.breaks), str(report)


class Record:
    def __init__(self):
        self.scratch = 0


def store_and_delete_attributes(x, rec):
    rec.last = x * 2
    del rec.scratch
    return rec.last + 1


@covers(store_and_delete_attributes, "STORE_ATTR", "DELETE_ATTR")
def test_attribute_stores_are_set_after_the_graph_and_deletes_break(backend):
    x = paddle.rand([2])
    eager_rec, rec = Record(), Record()
    expected = store_and_delete_attributes(x, eager_rec)
    report = jit_core.explain(
        jit_core.optimize(store_and_delete_attributes, backend=backend), x, rec
    )
    # the store is set after the graph before the del (the del reads what it left);
    # the del breaks; the graph after reads the stored tensor back from the object
    assert report.graph_count == 2 and report.break_count == 1, str(report)
    assert "L['rec'].last = tensor" in str(report.graphs[0].written_back), str(report)
    assert all(b.graph_break for b in report.breaks), str(report)
    assert all(b.category == errors.SIDE_EFFECT for b in report.breaks), str(report)
    assert_same(report.result, expected)
    assert_same(rec.last, eager_rec.last)
    assert vars(rec).keys() == vars(eager_rec).keys() == {"last"}
