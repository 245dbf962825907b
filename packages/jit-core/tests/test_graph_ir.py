"""jit_core.fx: the graph IR, its generated code, and the interpreter."""

from __future__ import annotations

import operator

import numpy as np
import paddle
import pytest

from jit_core.fx import Graph, GraphModule, Interpreter


class Root(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 3)
        self.scale = self.create_parameter(
            [3], default_initializer=paddle.nn.initializer.Constant(2.0)
        )


def build_graph():
    """x -> fc -> * scale -> relu (function) -> .sum(axis=-1) (method) -> output."""
    g = Graph()
    x = g.placeholder("x")
    h = g.call_module("fc", (x,))
    s = g.get_attr("scale")
    m = g.call_function(operator.mul, (h, s))
    r = g.call_function(paddle.nn.functional.relu, (m,))
    out = g.call_method("sum", (r,), {"axis": -1})
    g.output((out, r))
    return g


def test_all_six_node_kinds_and_bookkeeping():
    g = build_graph()
    kinds = [n.op for n in g.nodes]
    assert kinds == [
        "placeholder", "call_module", "get_attr", "call_function", "call_function",
        "call_method", "output",
    ]  # fmt: skip
    x, fc, scale, mul, relu, total, out = g.nodes
    assert list(x.users) == [fc]
    assert set(relu.users) == {total, out}
    assert mul.all_input_nodes == [fc, scale]
    g.lint()
    with pytest.raises(ValueError, match="unknown node kind"):
        g.create_node("call_everything", "x")


def test_generated_code_reads_like_code():
    gm = GraphModule(Root(), build_graph())
    code = gm.code
    assert "def forward(self, x):" in code
    assert "self.fc(x)" in code
    assert "self.scale" in code
    assert "paddle.nn.functional.relu(" in code
    assert ".sum(axis=-1)" in code
    compile(code, "<test>", "exec")  # valid Python


def test_parameters_stay_shared_with_the_root():
    root = Root()
    gm = GraphModule(root, build_graph())
    assert gm.fc is root.fc
    x = paddle.rand([2, 4])
    before = gm(x)[0]
    expected = paddle.nn.functional.relu(root.fc(x) * root.scale).sum(axis=-1)
    np.testing.assert_allclose(before.numpy(), expected.numpy(), rtol=1e-6)
    root.scale.set_value(paddle.full([3], 5.0))
    after = gm(x)[0]
    np.testing.assert_allclose(after.numpy(), (before * 2.5).numpy(), rtol=1e-5)


def test_interpreter_matches_generated_forward():
    gm = GraphModule(Root(), build_graph())
    x = paddle.rand([5, 4])
    a, b = gm(x), Interpreter(gm).run(x)
    for u, v in zip(a, b):
        np.testing.assert_allclose(u.numpy(), v.numpy(), rtol=1e-6)


def test_print_tabular(capsys):
    g = build_graph()
    text = g.print_tabular()
    printed = capsys.readouterr().out
    assert printed.strip() == text.strip()
    header = text.splitlines()[0].split()
    assert header == ["opcode", "name", "target", "args", "kwargs"]
    assert any(line.startswith("call_module") and "fc" in line for line in text.splitlines())


def test_dead_code_elimination_and_rewrites():
    g = Graph()
    x = g.placeholder("x")
    unused = g.call_function(operator.add, (x, 1))
    y = g.call_function(operator.mul, (x, 2))
    g.output((y,))
    assert g.eliminate_dead_code() is True
    assert unused not in g.nodes and y in g.nodes
    assert g.eliminate_dead_code() is False

    # replace x * 2 by x + x
    with g.inserting_after(y):
        z = g.call_function(operator.add, (x, x))
    replaced = y.replace_all_uses_with(z)
    assert [n.op for n in replaced] == ["output"]
    g.erase_node(y)
    g.lint()
    gm = GraphModule({}, g)
    t = paddle.to_tensor([1.0, 2.0])
    np.testing.assert_allclose(gm(t)[0].numpy(), [2.0, 4.0])
    with pytest.raises(RuntimeError):
        g.erase_node(x)  # still used
