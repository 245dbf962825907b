"""containers family: sets built during the capture (BUILD_SET, SET_ADD, SET_UPDATE, and
3.8's BUILD_SET_UNPACK), used for sizes, membership and iteration beside tensor work, and
returned as new sets like the eager code returns."""

from __future__ import annotations

import paddle
import pytest

import jit_core

from ..helpers import assert_same
from .coverage import assert_covers


def set_literal(x, a=1, b=2):
    s = {a, b, 3}
    s.add(4)
    s.discard(1)
    return x * len(s), s


def set_comprehension(x, names=("conv", "bn", "conv")):
    seen = {n.upper() for n in names}
    return x + len(seen), sorted(seen)


def set_unpacking(x, a=1):
    s = {*[a, 2], *(3,)}
    t = set([1, 2]) | {5}
    scale = 2.0 if 2 in s else 3.0
    return x * scale + len(t - s), s == {1, 2, 3}, t


def frozenset_membership(x, mode="train"):
    # `in` with a constant set literal compiles to a frozenset constant
    if mode in {"train", "eval"}:
        return x + 1
    return x - 1


CASES = [
    (set_literal, ("BUILD_SET",)),
    (set_comprehension, ("BUILD_SET", "SET_ADD")),
    (set_unpacking, ("BUILD_SET_UNPACK", "SET_UPDATE")),
    (frozenset_membership, ("CONTAINS_OP|COMPARE_OP",)),
]


@pytest.mark.parametrize("fn, opnames", CASES, ids=[c[0].__name__ for c in CASES])
def test_sets_stay_beside_one_graph(fn, opnames, backend):
    assert_covers(fn, *opnames)
    x = paddle.rand([3])
    report = jit_core.explain(jit_core.optimize(fn, backend=backend), x)
    assert report.graph_count == 1 and report.break_count == 0, str(report)
    expected = fn(x)
    assert_same(report.result, expected)
    fast = jit_core.optimize(fn, backend=backend)
    first = fast(x)
    assert_same(first, expected)
    again = fast(x)
    assert fast.jit_stats.captures == 1
    if isinstance(expected, tuple) and isinstance(expected[-1], set):
        # a new set each call, as the original code makes one
        assert again[-1] is not first[-1]
        first[-1].add("mutated")
        assert_same(fast(x)[-1], expected[-1])


def test_a_set_of_tensors_runs_eagerly_with_the_reason():
    def f(x, y):
        return len({x, y}) * x

    x = paddle.rand([2])
    report = jit_core.explain(f, x, x)
    assert report.graph_count == 0 and report.break_count == 1
    assert "a set holding" in report.breaks[0].reason
    assert_same(jit_core.optimize(f)(x, x), f(x, x))
