"""imports family: ``import`` and ``from ... import`` inside the captured function
(IMPORT_NAME, IMPORT_FROM) give the module objects, and the work on them stays in one graph."""

from __future__ import annotations

import paddle

import jit_core
from jit_opcodes.coverage import covers

from ..helpers import assert_same


def imports_inside(x):
    import math

    import paddle.nn.functional
    from paddle.nn import functional as F

    return F.relu(x) * math.pi + paddle.nn.functional.sigmoid(x)


@covers(imports_inside, "IMPORT_NAME", "IMPORT_FROM")
def test_imports_inside_the_function_in_one_graph(backend):
    x = paddle.randn([4])
    report = jit_core.explain(jit_core.optimize(imports_inside, backend=backend), x)
    assert report.graph_count == 1 and report.break_count == 0, str(report)
    assert_same(report.result, imports_inside(x))
