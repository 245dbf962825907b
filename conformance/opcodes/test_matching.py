"""matching family (3.10+): ``match`` statements on values whose type and contents are
known at capture (shapes, config dicts, tuples, objects) follow their branch inside one
graph. 3.8 and 3.9 have no ``match`` statement (the tests say so and skip)."""

from __future__ import annotations

import sys

import paddle
import pytest

import jit_core

from ..helpers import assert_same
from .coverage import assert_covers

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 10), reason="match statements are Python 3.10+ syntax"
)

CASES = [
    ("sequence_pattern", ("MATCH_SEQUENCE", "GET_LEN")),
    ("mapping_pattern", ("MATCH_MAPPING", "MATCH_KEYS", "COPY_DICT_WITHOUT_KEYS|DICT_UPDATE")),
    ("class_pattern", ("MATCH_CLASS",)),
    ("literal_and_guard", ("COMPARE_OP",)),
]


@pytest.mark.parametrize("name, opnames", CASES, ids=[c[0] for c in CASES])
def test_match_statement_in_one_graph(name, opnames, backend):
    from . import match_cases

    fn = getattr(match_cases, name)
    assert_covers(fn, *opnames)
    for shape in ([2, 3], [2, 3, 4, 5]):
        x = paddle.rand(shape)
        report = jit_core.explain(jit_core.optimize(fn, backend=backend), x)
        assert report.graph_count == 1 and report.break_count == 0, str(report)
        assert_same(report.result, fn(x))


def test_matching_a_tensor_value_runs_eagerly():
    from . import match_cases

    x = paddle.rand([2, 3])
    for t in (paddle.zeros([1]), paddle.ones([1])):
        report = jit_core.explain(match_cases.tensor_value_pattern, x, t)
        assert report.graph_count == 0 and report.break_count == 1, str(report)
        assert_same(report.result, match_cases.tensor_value_pattern(x, t))
