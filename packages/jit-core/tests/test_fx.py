"""The graph IR built by hand: nodes, bookkeeping, GraphModule, generated code, interpreter."""

from __future__ import annotations

import ast
import operator

import numpy as np
import paddle
import pytest

from jit_core.fx import Graph, GraphModule, Interpreter, Node, map_arg


class TinyRoot(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.lin = paddle.nn.Linear(4, 4)
        self.bias2 = self.create_parameter(
            [4], default_initializer=paddle.nn.initializer.Constant(0.5)
        )


def six_kinds_graph():
    """x -> lin (module) -> + bias2 (get_attr, function) -> .tanh() (method) -> output."""
    g = Graph()
    x = g.placeholder("x")
    h = g.call_module("lin", (x,))
    b = g.get_attr("bias2")
    s = g.call_function(operator.add, (h, b))
    t = g.call_method("tanh", (s,))
    out = g.output(t)
    return g, (x, h, b, s, t, out)


def eager_reference(root, x):
    return paddle.tanh(root.lin(x) + root.bias2)


@pytest.fixture
def root():
    paddle.seed(7)
    return TinyRoot()


@pytest.fixture
def x():
    paddle.seed(11)
    return paddle.randn([4, 4])


def test_all_six_node_kinds_in_order():
    g, nodes = six_kinds_graph()
    assert [n.op for n in g.nodes] == [
        "placeholder",
        "call_module",
        "get_attr",
        "call_function",
        "call_method",
        "output",
    ]
    assert list(g) == list(nodes)
    assert [n.target for n in g.nodes][:3] == ["x", "lin", "bias2"]
    assert g.nodes[3].target is operator.add
    assert g.nodes[4].target == "tanh"
    g.lint()  # a well-formed graph passes its own checks


def test_unknown_node_kind_rejected():
    g = Graph()
    with pytest.raises(ValueError, match="unknown node kind"):
        g.create_node("call_everything", "x")


def test_names_are_unique_identifiers():
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.mul, (x, 2))
    b = g.call_function(operator.mul, (a, 3))
    c = g.call_function(operator.mul, (b, 4))
    g.output(c)
    names = [n.name for n in g.nodes]
    assert len(set(names)) == len(names)
    assert all(n.isidentifier() for n in names)
    # a builtin's name never shadows the builtin in generated code
    s = Graph()
    y = s.placeholder("y")
    m = s.call_function(max, (y, 0))
    s.output(m)
    assert s.nodes[1].name != "max"


def test_users_and_args_bookkeeping():
    g, (x, h, b, s, t, out) = six_kinds_graph()
    assert list(x.users) == [h]
    assert set(s.all_input_nodes) == {h, b}
    assert list(h.users) == [s] and list(b.users) == [s]
    assert list(t.users) == [out]
    assert out.users == {}

    # rewriting args moves the node between users lists
    s.args = (h, h)
    assert s not in b.users
    assert s.all_input_nodes == [h]  # deduplicated
    assert b.users == {}

    s.update_arg(1, b)
    assert s.args == (h, b)
    assert s in b.users

    # kwargs count as uses too
    k = g.call_function(paddle.clip, (x,), {"min": b})
    assert k in b.users and k in x.users
    k.kwargs = {}
    assert k not in b.users


def test_replace_all_uses_with_and_erase_node():
    g = Graph()
    x = g.placeholder("x")
    a = g.call_function(operator.mul, (x, 2))
    r = g.call_function(paddle.nn.functional.relu, (a,))
    n = g.call_function(operator.add, (a, r))
    g.output(n)

    with g.inserting_after(a):
        a2 = g.call_function(operator.add, (x, x))
    assert g.nodes.index(a2) == g.nodes.index(a) + 1

    changed = a.replace_all_uses_with(a2)
    assert set(changed) == {r, n}
    assert a.users == {}
    assert r.args == (a2,) and n.args == (a2, r)
    assert set(a2.users) == {r, n}

    # a node still in use cannot be erased
    with pytest.raises(RuntimeError, match="still used"):
        g.erase_node(a2)
    g.erase_node(a)
    assert a not in g.nodes
    assert x.users.keys() == {a2}  # a no longer counts as a user of x
    g.lint()

    gm = GraphModule({}, g)
    v = paddle.to_tensor([-1.0, 2.0])
    np.testing.assert_allclose(gm(v).numpy(), (v + v + paddle.nn.functional.relu(v + v)).numpy())


def test_lint_catches_use_before_definition():
    g = Graph()
    x = g.placeholder("x")
    out = g.output(x)
    with g.inserting_before(out):
        late = g.call_function(operator.neg, (x,))
    with g.inserting_before(late):
        g.call_function(operator.abs, (late,))  # uses `late` before it is defined
    with pytest.raises(RuntimeError, match="before it is defined"):
        g.lint()


def test_map_arg_reaches_nested_nodes():
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y")
    nested = (x, [1, {"k": y}], slice(x, None, None))
    seen = []
    out = map_arg(nested, lambda n: (seen.append(n.name), n.name.upper())[1])
    assert seen == ["x", "y", "x"]
    assert out == ("X", [1, {"k": "Y"}], slice("X", None, None))
    assert isinstance(x, Node)


def test_graph_module_matches_eager(root, x):
    g, _ = six_kinds_graph()
    gm = GraphModule(root, g)
    assert isinstance(gm, paddle.nn.Layer)
    np.testing.assert_allclose(
        gm(x).numpy(), eager_reference(root, x).numpy(), rtol=1e-6, atol=1e-6
    )
    # forward is also callable directly (the JIT's fast path)
    np.testing.assert_allclose(gm.forward(x).numpy(), gm(x).numpy())


def test_graph_module_shares_parameters_with_root(root, x):
    g, _ = six_kinds_graph()
    gm = GraphModule(root, g)
    before = gm(x).numpy()

    # the GraphModule holds the root's parameter objects, not copies
    assert gm.lin is root.lin
    assert gm.bias2 is root.bias2
    gm_params = {id(p) for p in gm.parameters()}
    assert gm_params == {id(p) for p in root.parameters()}

    root.lin.weight.set_value(paddle.zeros([4, 4]))
    root.bias2.set_value(paddle.full([4], 1.0))
    after = gm(x).numpy()
    assert not np.allclose(before, after)
    # with a zero weight the output is tanh(lin.bias + 1) for every row
    expected = np.tanh(root.lin.bias.numpy() + 1.0)
    np.testing.assert_allclose(after, np.broadcast_to(expected, (4, 4)), rtol=1e-6)


def test_graph_module_from_dict_root(x):
    w = paddle.full([4], 3.0)
    g = Graph()
    inp = g.placeholder("inp")
    wn = g.get_attr("w")
    g.output(g.call_function(operator.mul, (inp, wn)))
    gm = GraphModule({"w": w}, g)
    np.testing.assert_allclose(gm(x).numpy(), (x * 3.0).numpy())


def test_dotted_targets(x):
    class Outer(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.inner = TinyRoot()

    paddle.seed(3)
    outer = Outer()
    g = Graph()
    inp = g.placeholder("x")
    h = g.call_module("inner.lin", (inp,))
    b = g.get_attr("inner.bias2")
    g.output(g.call_function(operator.sub, (h, b)))
    gm = GraphModule(outer, g)
    assert "self.inner.lin(x)" in gm.code
    assert "self.inner.bias2" in gm.code
    np.testing.assert_allclose(
        gm(x).numpy(), (outer.inner.lin(x) - outer.inner.bias2).numpy(), rtol=1e-6
    )


def test_generated_code_reads_like_code(root):
    g, _ = six_kinds_graph()
    gm = GraphModule(root, g)
    code = gm.code
    ast.parse(code)  # valid Python
    assert code.startswith("def forward(self, x):")
    assert "self.lin(x)" in code
    assert "self.bias2" in code
    assert " + " in code  # operator.add is written infix
    assert ".tanh()" in code  # a method call
    assert "return " in code
    assert "operator" not in code and "<built-in" not in code
    readable = gm.print_readable()
    assert readable.startswith("class ")
    assert "    def forward(self, x):" in readable


def test_generated_code_names_paddle_functions():
    g = Graph()
    a = g.placeholder("a")
    b = g.placeholder("b")
    mm = g.call_function(paddle.matmul, (a, b), {"transpose_y": True})
    r = g.call_function(paddle.nn.functional.relu, (mm,))
    idx = g.call_function(operator.getitem, (r, (slice(None, 2), 0)))
    neg = g.call_function(operator.neg, (idx,))
    g.output(neg)
    gm = GraphModule({}, g)
    code = gm.code
    ast.parse(code)
    assert "def forward(self, a, b):" in code
    # each value named after the operation that made it
    assert "matmul = paddle_matmul(a, b, transpose_y=True)" in code
    assert "relu = F_relu(matmul)" in code
    assert "getitem = relu[:2, 0]" in code  # getitem written as a subscript
    assert "neg = -getitem" in code  # prefix negation
    # what runs stores each result over the value it consumed for the last time (a here)
    run = gm.run_code
    ast.parse(run)
    assert "a = paddle_matmul(a, b, transpose_y=True)" in run
    assert "a = F_relu(a)" in run and "a = a[:2, 0]" in run and "a = -a" in run

    p = paddle.to_tensor(np.arange(16, dtype="float32").reshape(4, 4))
    q = paddle.to_tensor(np.eye(4, dtype="float32")) * 0.5
    ref = -paddle.nn.functional.relu(paddle.matmul(p, q, transpose_y=True))[:2, 0]
    np.testing.assert_allclose(gm(p, q).numpy(), ref.numpy())


def test_generated_code_binds_each_operator_once_and_never_shadows_a_value():
    g = Graph()
    # an input named as the bound name of paddle.exp would be: the binding moves aside
    x = g.placeholder("paddle_exp")
    e = g.call_function(paddle.exp, (x,))
    r = g.call_function(paddle.nn.functional.relu, (e,))
    r2 = g.call_function(paddle.nn.functional.relu, (r,))
    g.output(r2)
    gm = GraphModule({}, g)
    code, bound = gm.code, gm.code_globals()
    assert "paddle_exp_ = " not in code and "= paddle_exp_(paddle_exp)" in code, code
    assert bound["paddle_exp_"] is paddle.exp and bound["F_relu"] is paddle.nn.functional.relu
    # one binding for both calls, and no dotted lookup left in the body
    assert code.count("F_relu(") == 2 and "paddle.nn" not in code, code
    t = paddle.to_tensor([-1.0, 0.5])
    np.testing.assert_allclose(gm(t).numpy(), paddle.nn.functional.relu(paddle.exp(t)).numpy())


def test_generated_code_frees_values_after_their_last_use():
    g = Graph()
    a, b = g.placeholder("a"), g.placeholder("b")
    s = g.call_function(operator.add, (a, b))
    m = g.call_function(operator.mul, (s, a))
    g.call_function(paddle.exp, (m,))  # kept (say, for an effect): freed at once
    out = g.call_function(operator.sub, (m, 1.0))
    g.output((out, b))
    gm = GraphModule({}, g)
    # what a person reads: each value deleted right after its last use (torch.fx's way);
    # one handed out (b) is never freed
    assert gm.code == (
        "def forward(self, a, b):\n"
        "    add = a + b\n"  # a and b are read again
        "    mul = add * a\n"  # the last use of add and of a
        "    del add, a\n"
        "    exp = paddle_exp(mul)\n"  # used by nothing: freed at once
        "    del exp\n"
        "    sub = mul - 1.0\n"
        "    del mul\n"
        "    return (sub, b)\n"
    ), gm.code
    # what runs: a value read for the last time as a first argument is stored over (freed
    # as the store happens, as eager code's `y = f(y)` does), saving a del per op
    assert gm.run_code == (
        "def forward(self, a, b):\n"
        "    add = a + b\n"
        "    add = add * a\n"
        "    del a\n"
        "    exp = paddle_exp(add)\n"
        "    del exp\n"
        "    add = add - 1.0\n"
        "    return (add, b)\n"
    ), gm.run_code
    out_value = GraphModule({}, g)(paddle.to_tensor([1.0, 2.0]), paddle.to_tensor([3.0]))
    np.testing.assert_allclose(out_value[0].numpy(), [3.0, 9.0])  # (a + b) * a - 1


def test_str_of_graph_lists_nodes():
    g, _ = six_kinds_graph()
    text = str(g)
    assert text.startswith("graph():")
    assert "%x : placeholder[target=x]" in text
    assert "call_module[target=lin]" in text
    assert "call_method[target=tanh]" in text
    assert "return %tanh" in text


def test_print_tabular(capsys):
    g, nodes = six_kinds_graph()
    returned = g.print_tabular()
    printed = capsys.readouterr().out
    assert printed.rstrip("\n") == returned
    lines = printed.strip().splitlines()
    header = lines[0].split()
    assert header == ["opcode", "name", "target", "args", "kwargs"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    body = lines[2:]
    assert len(body) == len(nodes)
    assert [line.split()[0] for line in body] == [n.op for n in nodes]
    assert body[3].split()[2] == "add"  # the function's name, not its repr
    assert "(lin, bias2)" in body[3]


def test_interpreter_matches_graph_module(root, x):
    g, _ = six_kinds_graph()
    gm = GraphModule(root, g)
    got = Interpreter(gm).run(x)
    np.testing.assert_allclose(got.numpy(), gm(x).numpy(), rtol=1e-6, atol=1e-7)


def test_interpreter_can_be_subclassed_to_observe_nodes(root, x):
    g, _ = six_kinds_graph()
    gm = GraphModule(root, g)
    seen = []

    class Recording(Interpreter):
        def run_node(self, node):
            seen.append(node.op)
            return super().run_node(node)

    out = Recording(gm).run(x)
    assert seen == [n.op for n in g.nodes]
    np.testing.assert_allclose(out.numpy(), gm(x).numpy(), rtol=1e-6)


def test_eliminate_dead_code_removes_unused_node(x):
    g = Graph()
    a = g.placeholder("a")
    dead = g.call_function(paddle.exp, (a,))
    live = g.call_function(operator.mul, (a, 2.0))
    g.output(live)
    gm_before = GraphModule({}, g)
    assert "exp" in gm_before.code

    assert g.eliminate_dead_code() is True
    assert dead not in g.nodes
    assert a.users.keys() == {live}
    assert [n.op for n in g.nodes] == ["placeholder", "call_function", "output"]
    assert g.eliminate_dead_code() is False  # nothing left to remove

    gm = GraphModule({}, g)
    assert "exp" not in gm.code
    np.testing.assert_allclose(gm(x).numpy(), (x * 2.0).numpy())


def test_eliminate_dead_code_keeps_inplace_and_placeholders():
    g = Graph()
    a = g.placeholder("a")
    unused_input = g.placeholder("unused")
    inplace = g.call_method("add_", (a, a))  # result unused but it mutates `a`
    g.output(a)
    g.eliminate_dead_code()
    assert inplace in g.nodes
    assert unused_input in g.nodes


def test_setting_graph_recompiles(root, x):
    g, (xn, h, b, s, t, out) = six_kinds_graph()
    gm = GraphModule(root, g)
    # swap tanh for sigmoid, then regenerate
    with g.inserting_after(t):
        sig = g.call_method("sigmoid", (s,))
    t.replace_all_uses_with(sig)
    g.erase_node(t)
    gm.graph = g
    assert ".sigmoid()" in gm.code and "tanh" not in gm.code
    ref = paddle.nn.functional.sigmoid(root.lin(x) + root.bias2)
    np.testing.assert_allclose(gm(x).numpy(), ref.numpy(), rtol=1e-6)


def test_find_nodes_and_node_copy():
    g, (xn, h, b, s, t, out) = six_kinds_graph()
    assert g.find_nodes(op="call_method") == [t]
    assert g.find_nodes(op="call_function", target=operator.add) == [s]
    assert g.find_nodes(op="call_function", target=operator.mul) == []

    g2 = Graph()
    env = {}
    for n in g.nodes:
        if n.op == "output":
            g2.output(map_arg(n.args[0], env.__getitem__))
        else:
            env[n] = g2.node_copy(n, env.__getitem__)
    assert [n.op for n in g2.nodes] == [n.op for n in g.nodes]
    assert all(n.graph is g2 for n in g2.nodes)
    g2.lint()


def test_a_static_program_error_keeps_its_cause_and_the_users_line():
    from jit_core.kit.onnx.export import _static_error

    # the shape of what paddle.jit.to_static raises: a code listing, then the cause
    text = (
        "In transformed code:\n\n"
        '    File "<jit_core.fx.Graph_f_1_export_3>", line 2, in forward\n'
        "        def forward(self, mask, x):\n"
        "            expand = mask.expand([4, 6])  # model.py:4: m = mask.expand([4, 6])\n"
        "            ~~~~~~~~~~~~~~~~~~~~~~~~~~~~ <--- HERE\n"
        "            del mask\n\n"
        '    File "paddle/tensor/manipulation.py", line 5252, in expand\n'
        "\traise ValueError(\n\n"
        "    ValueError: When the data type of input 'x' for expand is bool, you must ...\n"
    )
    assert _static_error(ValueError(text)) == (
        "ValueError: When the data type of input 'x' for expand is bool, you must ... "
        "(at model.py:4: m = mask.expand([4, 6]))"
    )
    assert _static_error(RuntimeError("no listing here")) == "RuntimeError: no listing here"
