"""closures family: cells and free variables of functions defined inside the captured code
(MAKE_CELL, COPY_FREE_VARS, LOAD_CLOSURE, LOAD_DEREF, STORE_DEREF, DELETE_DEREF) and
MAKE_FUNCTION with each of its flags: the inner functions are inlined into one graph."""

from __future__ import annotations

import paddle
import pytest

import jit_core
from jit_opcodes.coverage import covers_cases

from ..helpers import assert_same


def closure_read(x, k=3):
    scale = k * 2

    def inner(t):
        return t * scale

    return inner(x) + inner(x + 1)


def closure_write(x):
    total = 0

    def add(v):
        nonlocal total
        total += v

    add(2)
    add(3)
    scale = 1
    scale = scale + total  # STORE_DEREF in the outer function too
    return x * scale, total


def closure_delete(x):
    s = 2

    def times(t):
        return t * s  # noqa: F821  (ruff misreads the later `del s`)

    y = times(x)
    del s
    return y


def function_flags(x):
    def scaled(t, k=2, *, bias=1.0) -> paddle.Tensor:  # defaults, kwdefaults, annotations
        return t * k + bias

    offset = 0.5
    shift = lambda t: t + offset  # noqa: E731  (a closure made by a lambda)
    return scaled(x) + scaled(x, 3, bias=0.5) + shift(x)


CASES = [
    (
        closure_read,
        ("MAKE_CELL|LOAD_CLOSURE", "COPY_FREE_VARS|LOAD_DEREF", "LOAD_CLOSURE", "LOAD_DEREF"),
    ),
    (closure_write, ("STORE_DEREF", "LOAD_DEREF", "MAKE_CELL|LOAD_CLOSURE")),
    (closure_delete, ("DELETE_DEREF",)),
    (function_flags, ("MAKE_FUNCTION", "LOAD_CLOSURE", "SET_FUNCTION_ATTRIBUTE")),
]


@covers_cases(CASES)
@pytest.mark.parametrize("fn", [fn for fn, _ in CASES], ids=lambda fn: fn.__name__)
def test_closures_inlined_into_one_graph(fn, backend):
    x = paddle.rand([3])
    report = jit_core.explain(jit_core.optimize(fn, backend=backend), x)
    assert report.graph_count == 1 and report.break_count == 0, str(report)
    assert_same(report.result, fn(x))
    fast = jit_core.optimize(fn, backend=backend)
    assert_same(fast(x), fn(x))
    assert_same(fast(x), fn(x))
    assert fast.jit_stats.captures == 1


def test_make_function_flags_are_all_exercised():
    import dis

    # (3.13 sets each attribute with a SET_FUNCTION_ATTRIBUTE of its own)
    setters = ("MAKE_FUNCTION", "SET_FUNCTION_ATTRIBUTE")
    flags = [i.arg for i in dis.get_instructions(function_flags) if i.opname in setters]
    seen = 0
    for f in flags:
        seen |= f or 0
    # defaults, keyword-only defaults, annotations, closure
    assert seen & 0x0F == 0x0F, flags
