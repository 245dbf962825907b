"""stack and jumps families: stack shuffles (ROT_*/DUP_* before 3.11, COPY/SWAP after),
branches, loops and short-circuit values on Python values, beside one graph."""

from __future__ import annotations

import paddle
import pytest

import jit_core

from ..helpers import assert_same
from .coverage import assert_covers


def swaps(x, a=1, b=2, c=3):
    a, b = b, a
    a, b, c = c, b, a
    d = {"n": 1}
    d["n"] += a  # DUP_TOP_TWO (3.8-3.10), COPY (3.11+)
    ok = 0 < a < 5  # DUP_TOP + ROT_THREE (3.8-3.10), SWAP + COPY (3.11+)
    x * 0  # an expression statement: POP_TOP
    return x * (a + 10 * b + 100 * c + d["n"]) + ok


def branches_and_loops(x, n=3, opt=None, flags=(True, False)):
    total = 0
    for i in range(n):  # GET_ITER, FOR_ITER, JUMP_ABSOLUTE / JUMP_BACKWARD, END_FOR
        if i % 2:
            continue
        total += i
    while n > 0:  # a loop on a Python value
        n -= 1
    if opt is None:
        x = x + 1
    if opt is not None:
        x = x - 1
    if not flags[1]:  # POP_JUMP_IF_TRUE
        total += 1
    scale = 2 if total > 1 else 3  # JUMP_FORWARD over the else
    first = flags[0] and flags[1]  # JUMP_IF_FALSE_OR_POP (3.8-3.11)
    second = flags[1] or flags[0]  # JUMP_IF_TRUE_OR_POP (3.8-3.11)
    return x * total * scale + first + second


CASES = [
    (
        swaps,
        (
            "ROT_TWO|SWAP",
            "ROT_THREE|SWAP",
            "DUP_TOP|COPY",
            "DUP_TOP_TWO|COPY",
            "POP_TOP",
        ),
    ),
    (
        branches_and_loops,
        (
            "GET_ITER",
            "FOR_ITER",
            "JUMP_ABSOLUTE|JUMP_BACKWARD",
            "END_FOR",
            "JUMP_FORWARD",
            "POP_JUMP_IF_FALSE|POP_JUMP_FORWARD_IF_FALSE",
            "POP_JUMP_IF_TRUE|POP_JUMP_FORWARD_IF_TRUE|POP_JUMP_BACKWARD_IF_TRUE",
            "POP_JUMP_IF_NONE|POP_JUMP_FORWARD_IF_NONE|IS_OP",
            "POP_JUMP_IF_NOT_NONE|POP_JUMP_FORWARD_IF_NOT_NONE|IS_OP",
            "JUMP_IF_FALSE_OR_POP|COPY",
            "JUMP_IF_TRUE_OR_POP|COPY",
        ),
    ),
]


@pytest.mark.parametrize("fn, opnames", CASES, ids=[c[0].__name__ for c in CASES])
def test_python_control_beside_one_graph(fn, opnames, backend):
    assert_covers(fn, *opnames)
    x = paddle.rand([3])
    report = jit_core.explain(jit_core.optimize(fn, backend=backend), x)
    assert report.graph_count == 1 and report.break_count == 0, str(report)
    assert_same(report.result, fn(x))
