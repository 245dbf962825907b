"""A resume function takes the live locals as arguments in an order of its own, so every
local access of the original code lands on another slot there. 3.13 packs two local
indexes of 4 bits into one instruction (``b01 + q`` is one LOAD_FAST_LOAD_FAST); moved to
slot 16, such a pair once read other locals."""

from __future__ import annotations

import paddle

import jit_core

from .helpers import assert_same


def sixteen_live_locals(x):
    b01, b02, b03, b04, b05, b06, b07 = x + 1, x + 2, x + 3, x + 4, x + 5, x + 6, x + 7
    b08, b09, b10, b11, b12, b13, b14 = x + 8, x + 9, x + 10, x + 11, x + 12, x + 13, x + 14
    q = x * 100
    a1, a2 = x - 1, x - 2  # sorted first among the resume function's arguments: q is 16th
    if x.sum() > 0:  # breaks the graph: the rest is a resume function
        y = b01 + q
    else:
        y = b02 + q
    rest = (b03, b04, b05, b06, b07, b08, b09, b10, b11, b12, b13, b14)
    return y, a1, a2, rest


def test_every_local_of_a_resume_function_is_read_from_its_own_slot(backend):
    fast = jit_core.optimize(sixteen_live_locals, backend=backend)
    for sign in (1.0, -1.0, 1.0):
        x = paddle.rand([3]) * sign
        assert_same(fast(x), sixteen_live_locals(x))
    report = jit_core.explain(jit_core.optimize(sixteen_live_locals, backend=backend), x)
    assert (report.graph_count, report.break_count) == (2, 1), str(report)
