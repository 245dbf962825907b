"""stack family: stack shuffles (ROT_*/DUP_* before 3.11, COPY/SWAP after), POP_TOP,
NOP, RESUME and EXTENDED_ARG, beside one graph."""

from __future__ import annotations

import paddle
import pytest

import jit_core
from jit_opcodes.coverage import covers_cases

from ..helpers import assert_same


def swaps(x, a=1, b=2, c=3):
    a, b = b, a
    a, b, c = c, b, a
    d = {"n": 1}
    d["n"] += a  # DUP_TOP_TWO (3.8-3.10), COPY (3.11+)
    ok = 0 < a < 5  # DUP_TOP + ROT_THREE (3.8-3.10), SWAP + COPY (3.11+)
    x * 0  # an expression statement: POP_TOP
    return x * (a + 10 * b + 100 * c + d["n"]) + ok


def nops_and_resume(x, flag=True):
    if flag:
        pass  # a NOP where the compiler keeps line numbers (3.10+)
    return x * 2


#: a branch longer than 255 code units: its jump needs EXTENDED_ARG on every version
LONG_BRANCH = (
    "def long_branch(x, flag=True):\n"
    "    k = 0\n"
    "    if flag:\n" + "        k = k + 1\n" * 100 + "    return x * k\n"
)
_namespace: dict = {}
exec(compile(LONG_BRANCH, __file__, "exec"), _namespace)
long_branch = _namespace["long_branch"]

CASES = [
    (swaps, ("ROT_TWO|SWAP", "ROT_THREE|SWAP", "DUP_TOP|COPY", "DUP_TOP_TWO|COPY", "POP_TOP")),
    (nops_and_resume, ("NOP|RETURN_VALUE", "RESUME|RETURN_VALUE")),
    (long_branch, ("EXTENDED_ARG",)),
]


@covers_cases(CASES)
@pytest.mark.parametrize("fn", [fn for fn, _ in CASES], ids=lambda fn: fn.__name__)
def test_stack_work_beside_one_graph(fn, backend):
    x = paddle.rand([3])
    report = jit_core.explain(jit_core.optimize(fn, backend=backend), x)
    assert report.graph_count == 1 and report.break_count == 0, str(report)
    assert_same(report.result, fn(x))
