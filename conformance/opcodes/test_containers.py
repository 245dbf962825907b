"""containers family: lists, tuples, dicts and sets built, unpacked, indexed, sliced and
formatted during the capture (with each version's opcodes for them: 3.8's BUILD_*_UNPACK,
3.9's LIST_EXTEND/DICT_UPDATE/LIST_TO_TUPLE, 3.12's BINARY_SLICE/STORE_SLICE and
CALL_INTRINSIC_1), beside tensor work in one graph, with eager results."""

from __future__ import annotations

import paddle
import pytest

import jit_core
from jit_opcodes.coverage import covers_cases

from ..helpers import assert_same


def build_and_unpack(x, pair=(1, 2)):
    lst = [1, x.shape[0]]
    tup = (x, 2)
    d = {"a": x, "b": 2}
    k = "c"
    e = {k: 3}
    a, b = pair
    first, *rest = [1, 2, 3]
    merged = {**d, **e}
    joined = [*lst, *rest]
    tjoined = (*lst, *rest)
    squares = [i * i for i in range(3)]
    table = {i: i + 1 for i in range(3)}
    total = sum(squares) + table[2] + first + len(joined) + len(tjoined)
    return tup[0] * a + merged["a"] * b + total, joined, tjoined, table


def subscripts_and_slices(x, n=5):
    items = list(range(n))
    items[0] = 10
    del items[1]
    head = items[:2]
    items[1:2] = [7, 8]
    step = items[::2]
    cfg = {"k": 1}
    cfg["j"] = 2
    del cfg["k"]
    return x[1:3] * sum(head) + x[::2].sum() + sum(step) + cfg["j"], items, cfg


def formatted(x, name="w", k=3):
    label = f"{name}:{k:>3}/{name!r}"
    return x * len(label), label


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
    (
        build_and_unpack,
        (
            "BUILD_LIST",
            "BUILD_TUPLE",
            "BUILD_CONST_KEY_MAP",
            "BUILD_MAP",
            "UNPACK_SEQUENCE",
            "UNPACK_EX",
            "BUILD_MAP_UNPACK|DICT_UPDATE",
            "BUILD_LIST_UNPACK|LIST_EXTEND",
            "BUILD_TUPLE_UNPACK|LIST_TO_TUPLE|CALL_INTRINSIC_1",
            "LIST_APPEND",
            "MAP_ADD",
            "BINARY_SUBSCR",
        ),
    ),
    (
        subscripts_and_slices,
        (
            "STORE_SUBSCR",
            "DELETE_SUBSCR",
            "BINARY_SLICE|BUILD_SLICE",
            "STORE_SLICE|BUILD_SLICE",
            "BUILD_SLICE",
        ),
    ),
    (
        formatted,
        ("FORMAT_VALUE|FORMAT_SIMPLE", "CONVERT_VALUE", "FORMAT_WITH_SPEC", "BUILD_STRING"),
    ),
    (set_literal, ("BUILD_SET",)),
    (set_comprehension, ("BUILD_SET", "SET_ADD")),
    (set_unpacking, ("BUILD_SET_UNPACK", "SET_UPDATE")),
    (frozenset_membership, ("CONTAINS_OP|COMPARE_OP",)),
]


@covers_cases(CASES)
@pytest.mark.parametrize("fn", [fn for fn, _ in CASES], ids=lambda fn: fn.__name__)
def test_containers_stay_beside_one_graph(fn, backend):
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
    if isinstance(expected, tuple) and isinstance(expected[-1], (set, list, dict)):
        # a new container each call, as the original code makes one
        assert again[-1] is not first[-1]
        first[-1].clear()
        assert_same(fast(x)[-1], expected[-1])


def test_a_set_of_tensors_runs_eagerly_with_the_reason():
    def f(x, y):
        return len({x, y}) * x

    x = paddle.rand([2])
    report = jit_core.explain(f, x, x)
    assert report.graph_count == 0 and report.break_count == 1
    assert "a set holding" in report.breaks[0].reason
    assert_same(jit_core.optimize(f)(x, x), f(x, x))
