"""matching family (3.10+): ``match`` statements on values whose type and contents are
known at capture (shapes, config dicts, tuples, objects) follow their branch inside one
graph. 3.8 and 3.9 have no ``match`` statement (the tests say so and skip)."""

from __future__ import annotations

import sys

import paddle
import pytest

import jit_core
from jit_core import errors
from jit_opcodes.coverage import covers_cases

from ..helpers import assert_same

MATCH_SYNTAX = sys.version_info >= (3, 10)
pytestmark = pytest.mark.skipif(not MATCH_SYNTAX, reason="match statements are Python 3.10+ syntax")

if MATCH_SYNTAX:
    from . import match_cases

    CASES = [
        (match_cases.sequence_pattern, ("MATCH_SEQUENCE", "GET_LEN")),
        (
            match_cases.mapping_pattern,
            ("MATCH_MAPPING", "MATCH_KEYS", "COPY_DICT_WITHOUT_KEYS|DICT_UPDATE"),
        ),
        (match_cases.many_captures, ("MATCH_MAPPING", "ROT_N")),
        (match_cases.class_pattern, ("MATCH_CLASS",)),
        (match_cases.literal_and_guard, ("COMPARE_OP",)),
    ]
else:
    CASES = []


@covers_cases(CASES)
@pytest.mark.parametrize("fn", [fn for fn, _ in CASES], ids=[fn.__name__ for fn, _ in CASES])
def test_match_statement_in_one_graph(fn, backend):
    for shape in ([2, 3], [2, 3, 4, 5]):
        x = paddle.rand(shape)
        report = jit_core.explain(jit_core.optimize(fn, backend=backend), x)
        assert report.graph_count == 1 and report.break_count == 0, str(report)
        assert_same(report.result, fn(x))


def test_matching_a_tensor_value_breaks_the_graph():
    x = paddle.rand([2, 3])
    for t in (paddle.zeros([1]), paddle.ones([1])):
        report = jit_core.explain(match_cases.tensor_value_pattern, x, t)
        # the comparison's graph, the break at the branch, the case that runs
        assert report.graph_count == 2 and report.break_count == 1, str(report)
        assert report.breaks[0].graph_break
        assert report.breaks[0].category == errors.TENSOR_BRANCH
        assert_same(report.result, match_cases.tensor_value_pattern(x, t))
