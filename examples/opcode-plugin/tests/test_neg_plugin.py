"""The example opcode plugin is found through its entry point and its handler runs."""

from __future__ import annotations

import dis

import jit_opcode_neg_example
import numpy as np
import paddle

import jit_core
from jit_core.plugins import opcode_handlers


def f(x, k):
    return -x * 2 + (-k)


def test_installed_plugin_is_listed_and_owns_the_opcode():
    version = jit_opcode_neg_example.__version__  # the metadata's, which the listing reads
    assert ("neg_example", "jit-opcode-neg-example", version) in jit_core.list_plugins()
    assert opcode_handlers()["UNARY_NEGATIVE"].plugin == "neg_example"


def test_its_handler_runs_and_results_equal_eager():
    assert "UNARY_NEGATIVE" in {i.opname for i in dis.get_instructions(f)}
    x = paddle.rand([3, 4])
    before = jit_opcode_neg_example.calls
    report = jit_core.explain(f, x, 3)
    assert jit_opcode_neg_example.calls == before + 2  # -x and -k
    assert report.graph_count == 1 and report.break_count == 0
    assert "paddle_neg(x)" in report.graph_code[0]
    np.testing.assert_allclose(report.result.numpy(), f(x, 3).numpy())
