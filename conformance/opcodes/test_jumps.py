"""jumps family: branches, loops, short-circuit values and both returns on Python values,
beside one graph (3.11's backward conditional jumps included)."""

from __future__ import annotations

import paddle
import pytest

import jit_core
from jit_opcodes.coverage import covers, covers_cases

from ..helpers import assert_same


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


def loops_on_python_values(x, items=(1, 2, 3), nxt={1: 2, 2: None}):  # noqa: B006
    # on 3.11 a loop's condition at its bottom jumps backward: POP_JUMP_BACKWARD_IF_*
    pending = list(items)
    while pending:
        pending.pop()
    done = 0
    while not done:
        done = 1
    cur = 1
    while cur is not None:
        cur = nxt.get(cur)
    extra = None
    while extra is None:
        extra = 4
    return x * (done + extra + len(pending))


def returns_and_nots(x, flag=False):
    ok = not flag  # UNARY_NOT as a value, not a jump
    if flag:
        return x * ok
    return 0  # RETURN_CONST on 3.12


CASES = [
    (
        loops_on_python_values,
        (
            "POP_JUMP_BACKWARD_IF_TRUE|POP_JUMP_IF_TRUE",
            "POP_JUMP_BACKWARD_IF_FALSE|POP_JUMP_IF_FALSE",
            "POP_JUMP_BACKWARD_IF_NONE|POP_JUMP_IF_NONE|IS_OP",
            "POP_JUMP_BACKWARD_IF_NOT_NONE|POP_JUMP_IF_NOT_NONE|IS_OP",
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
            "TO_BOOL",
        ),
    ),
]


@covers_cases(CASES)
@pytest.mark.parametrize("fn", [fn for fn, _ in CASES], ids=lambda fn: fn.__name__)
def test_python_control_flow_beside_one_graph(fn, backend):
    x = paddle.rand([3])
    report = jit_core.explain(jit_core.optimize(fn, backend=backend), x)
    assert report.graph_count == 1 and report.break_count == 0, str(report)
    assert_same(report.result, fn(x))


@covers(returns_and_nots, "RETURN_VALUE", "RETURN_CONST", "UNARY_NOT")
@pytest.mark.parametrize("flag", [True, False])
def test_both_returns(flag, backend):
    x = paddle.rand([3])
    report = jit_core.explain(jit_core.optimize(returns_and_nots, backend=backend), x, flag)
    assert report.break_count == 0, str(report)
    # the path that returns a tensor holds one graph; the other has no tensor work
    assert report.graph_count == 1 and ("no graph" in report.graphs[0].code) == (not flag)
    assert_same(report.result, returns_and_nots(x, flag))
