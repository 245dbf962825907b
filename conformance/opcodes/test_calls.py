"""calls family: every calling convention of 3.8 to 3.13 (CALL_FUNCTION/_KW/CALL_METHOD;
3.11's PRECALL/CALL/KW_NAMES/PUSH_NULL; 3.13's CALL_KW and the NULL after the callable;
CALL_FUNCTION_EX with the unpacking opcodes that build its arguments) into one graph; a
class statement runs its frame eagerly."""

from __future__ import annotations

import paddle
import pytest

import jit_core
from jit_core import errors
from jit_opcodes.coverage import covers, covers_cases

from ..helpers import assert_same


def helper(t, k=1, *rest, scale=1.0, **extra):
    return t * k * scale + len(rest) + len(extra)


def positional_and_keywords(x):
    a = helper(x)
    b = helper(x, 2, scale=0.5)
    c = x.mean()  # without keywords: LOAD_METHOD + CALL_METHOD before 3.12
    d = paddle.add(x, y=a)
    local = helper
    e = local(x, 3)  # a callable that is neither a global nor an attribute: PUSH_NULL
    return a + b + c + d + e


def star_calls(x):
    args = (x, 3)
    kw = {"scale": 2.0}
    d = helper(*args, **kw)
    e = helper(*args, *(1, 2), **kw, **{"p": 1})  # several * and ** in one call
    f = helper(x, *[4, 5])
    g = (lambda t: t + 1)(x)
    return d + e + f + g


CASES = [
    (
        positional_and_keywords,
        (
            "CALL_FUNCTION|CALL",
            "CALL_FUNCTION_KW|KW_NAMES|CALL_KW",
            "CALL_METHOD|CALL",
            "LOAD_METHOD|LOAD_ATTR",
            "PRECALL",
            "PUSH_NULL",
        ),
    ),
    (
        star_calls,
        (
            "CALL_FUNCTION_EX",
            "BUILD_TUPLE_UNPACK_WITH_CALL|LIST_EXTEND",
            "BUILD_MAP_UNPACK_WITH_CALL|DICT_MERGE",
            "LIST_TO_TUPLE|CALL_INTRINSIC_1|BUILD_TUPLE_UNPACK_WITH_CALL",
            "MAKE_FUNCTION",
        ),
    ),
]


@covers_cases(CASES)
@pytest.mark.parametrize("fn", [fn for fn, _ in CASES], ids=lambda fn: fn.__name__)
def test_calls_in_one_graph(fn, backend):
    x = paddle.rand([3])
    report = jit_core.explain(jit_core.optimize(fn, backend=backend), x)
    assert report.graph_count == 1 and report.break_count == 0, str(report)
    assert_same(report.result, fn(x))


def defines_a_class(x):
    class Box:
        k = 2

    return x * Box.k


@covers(defines_a_class, "LOAD_BUILD_CLASS")
def test_class_statement_runs_eagerly_with_the_reason(backend):
    x = paddle.rand([3])
    report = jit_core.explain(jit_core.optimize(defines_a_class, backend=backend), x)
    assert report.graph_count == 0 and report.break_count == 1, str(report)
    assert report.breaks[0].category == errors.UNSUPPORTED_OPCODE, str(report)
    assert_same(report.result, defines_a_class(x))
