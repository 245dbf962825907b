"""capture(), replace_pattern, the pass manager and each built-in pass: the graph before
and after, and results equal to eager Paddle."""

from __future__ import annotations

import operator

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import jit_core
from jit_core.passes import GraphPass, PassError, PassManager, graph_pass, replace_pattern
from jit_core.passes.rewrite import PatternError
from jit_core.plugins import register_plugin


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol)


def targets(gm, op=None):
    return [
        n.target if isinstance(n.target, str) else n.target.__name__.lstrip("_")
        for n in gm.graph.nodes
        if n.op in ("call_function", "call_method", "call_module") and (op is None or n.op == op)
    ]


# ------------------------------------------------------------------ capture


def test_capture_returns_the_graph_and_installs_nothing():
    def f(x, y):
        return paddle.tanh(x) * y + 1

    x, y = paddle.rand([3, 4]), paddle.rand([3, 4])
    gm = jit_core.capture(f, x, y)
    assert targets(gm) == ["tanh", "mul", "add"]
    assert gm.meta["input_sources"] == ["L['x']", "L['y']"]
    assert gm.meta["passes"] == []
    close(gm(x, y)[0], f(x, y))
    assert "paddle_tanh(x)" in gm.code


def test_capture_of_a_layer_shares_its_parameters():
    lin = paddle.nn.Linear(4, 2)
    x = paddle.rand([3, 4])
    gm = jit_core.capture(lin, x)
    assert targets(gm) == ["linear"]  # the target layer itself is inlined
    with paddle.no_grad():
        lin.weight.set_value(lin.weight * 2)
    close(gm(x)[0], lin(x))


def test_capture_names_what_breaks_it():
    def f(x):
        if x.sum() > 0:
            return x + 1
        return x - 1

    with pytest.raises(jit_core.CaptureError, match="cannot capture .*f into one graph"):
        jit_core.capture(f, paddle.rand([2]))


def test_capture_without_tensor_work_says_so():
    with pytest.raises(jit_core.CaptureError, match="no tensor"):
        jit_core.capture(lambda a: a + 1, 3)


def test_capture_rejects_arguments_that_do_not_fit():
    def f(x):
        return x + 1

    with pytest.raises(jit_core.CaptureError, match="signature"):
        jit_core.capture(f, paddle.rand([2]), paddle.rand([2]))


# ------------------------------------------------------------------ replace_pattern


def test_replace_pattern_follows_data_flow_not_names():
    def f(a, c):
        u = paddle.exp(a) + c  # matches: exp(x) + y
        v = paddle.exp(c) * a  # does not: mul
        return u + v

    def pattern(x, y):
        return paddle.exp(x) + y

    def replacement(x, y):
        return paddle.add(paddle.exp(x), y) * 1.0

    a, c = paddle.rand([2, 3]), paddle.rand([2, 3])
    gm = jit_core.capture(f, a, c)
    matches = replace_pattern(gm, pattern, replacement)
    assert len(matches) == 1
    m = matches[0]
    assert m.anchor.name == "add"
    assert [n.name for n in m.inputs] == ["a", "c"]
    assert {p.name: g.name for p, g in m.nodes_map.items()} == {
        "add": "add",
        "exp": "exp",
        "x": "a",
        "y": "c",
    }
    assert targets(gm) == ["exp", "add", "mul", "exp", "mul", "add"]
    gm.graph.lint()
    close(gm(a, c)[0], f(a, c))


def test_replace_pattern_replaces_every_non_overlapping_match():
    def f(x):
        return F.relu(F.relu(x) + 1) + 1

    def pattern(x):
        return F.relu(x) + 1

    def replacement(x):
        return F.relu6(x) + 1

    x = paddle.randn([8]) * 10
    gm = jit_core.capture(f, x)
    matches = replace_pattern(gm, pattern, replacement)
    assert len(matches) == 2
    assert targets(gm) == ["relu6", "add", "relu6", "add"]
    expected = F.relu6(F.relu6(x) + 1) + 1
    close(gm(x)[0], expected)


def test_a_match_whose_inner_value_is_used_elsewhere_is_not_replaced():
    def f(x):
        e = paddle.exp(x)
        return e + 1, e  # exp is needed outside the pattern

    def pattern(x):
        return paddle.exp(x) + 1

    x = paddle.rand([3])
    gm = jit_core.capture(f, x)
    assert replace_pattern(gm, pattern, lambda x: paddle.exp(x) + 2) == []
    close(gm(x)[0], paddle.exp(x) + 1)


def test_literals_match_exactly_unless_ignored():
    def f(x):
        return x * 2 + x * 3

    def pattern(x):
        return x * 2

    def replacement(x):
        return x + x

    x = paddle.rand([4])
    gm = jit_core.capture(f, x)
    assert len(replace_pattern(gm, pattern, replacement)) == 1
    close(gm(x)[0], f(x))

    gm = jit_core.capture(f, x)
    matches = replace_pattern(gm, pattern, lambda x: x * 7, ignore_literals=True)
    assert len(matches) == 2
    close(gm(x)[0], x * 14)


def test_filters_can_reject_matches():
    def f(x, y):
        return paddle.matmul(x, y) + 1, paddle.matmul(y, x) + 1

    def pattern(a, b):
        return paddle.matmul(a, b) + 1

    def only_x_first(m):
        return m.inputs[0].name == "x"

    x, y = paddle.rand([3, 3]), paddle.rand([3, 3])
    gm = jit_core.capture(f, x, y)
    matches = replace_pattern(
        gm, pattern, lambda a, b: paddle.matmul(a, b) + 2, filters=[only_x_first]
    )
    assert [m.inputs[0].name for m in matches] == ["x"]
    out = gm(x, y)
    close(out[0], paddle.matmul(x, y) + 2)
    close(out[1], paddle.matmul(y, x) + 1)


def test_patterns_with_example_inputs_and_clear_errors():
    conv_x, conv_w = paddle.rand([1, 2, 5, 5]), paddle.rand([3, 2, 3, 3])

    def f(x, w):
        return F.relu(F.conv2d(x, w))

    def pattern(x, w):
        return F.relu(F.conv2d(x, w))

    gm = jit_core.capture(f, conv_x, conv_w)
    with pytest.raises(PatternError, match="example_inputs"):
        replace_pattern(gm, pattern, pattern)  # [2, 2] defaults do not fit conv2d
    matches = replace_pattern(
        gm,
        pattern,
        lambda x, w: F.relu(F.conv2d(x, w, padding=0)),
        example_inputs=(conv_x, conv_w),
    )
    assert len(matches) == 1
    close(gm(conv_x, conv_w)[0], f(conv_x, conv_w))

    with pytest.raises(PatternError, match="same ones"):
        replace_pattern(gm, lambda x: x + 1, lambda x, y: x + y)
    with pytest.raises(PatternError, match="returns 2 values"):
        replace_pattern(gm, lambda x: (x + 1, x + 2), lambda x: x)
    with pytest.raises(PatternError, match="returns one of its arguments"):
        replace_pattern(gm, lambda x: x, lambda x: x + 0)


# ------------------------------------------------------------------ the built-in passes


def test_cse_merges_pure_repeats_and_keeps_random_and_inplace_calls():
    def f(x):
        a = paddle.tanh(x) + 1
        b = paddle.tanh(x) + 1
        d1 = F.dropout(x, 0.5)
        d2 = F.dropout(x, 0.5)
        return a * b + d1 + d2

    x = paddle.rand([64])
    gm = jit_core.capture(f, x)
    assert targets(gm).count("tanh") == 2
    PassManager.from_options(["cse"]).run(gm, _ctx(x))
    assert targets(gm).count("tanh") == 1
    assert targets(gm).count("dropout") == 2
    t = paddle.tanh(x) + 1
    paddle.seed(3)
    out = gm(x)[0]
    paddle.seed(3)
    close(out, f(x))
    assert not np.allclose((t * t).numpy(), out.numpy())  # dropout really ran twice


def test_dce_removes_unused_work_but_not_training_layers():
    class M(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.bn = paddle.nn.BatchNorm1D(4)

        def forward(self, x):
            unused = paddle.exp(x) * 2  # noqa: F841 - dead on purpose
            self.bn(x)  # updates statistics in training mode
            return x + 1

    m = M()
    x = paddle.rand([8, 4])
    gm = jit_core.capture(m, x)
    assert targets(gm) == ["exp", "mul", "bn", "add"]
    PassManager.from_options(["dce"]).run(gm, _ctx(x))
    assert targets(gm) == ["bn", "add"]
    m.eval()
    gm = jit_core.capture(m, x)
    PassManager.from_options(["dce"]).run(gm, _ctx(x))
    assert targets(gm) == ["add"]


def _ctx(*examples, facts=()):
    from jit_core.passes import PassContext

    return PassContext(list(examples), facts=set(facts))


class ConvBN(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = paddle.nn.Conv2D(3, 8, 3, padding=1, bias_attr=False)
        self.bn = paddle.nn.BatchNorm2D(8)
        self.conv2 = paddle.nn.Conv2D(8, 8, 3, stride=2, groups=2)
        self.bn2 = paddle.nn.BatchNorm2D(8)
        self.fc = paddle.nn.Linear(8, 6)
        self.bn3 = paddle.nn.BatchNorm1D(6)

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x)))
        y = self.bn2(self.conv2(y)).mean(axis=[2, 3])
        return self.bn3(self.fc(y))


def _trained_stats(m):
    # non-trivial running statistics, as in a trained model
    m.train()
    for _ in range(3):
        m(paddle.randn([4, 3, 9, 9]) * 3 + 1)
    m.eval()


def test_bn_fold_folds_into_conv_and_linear_in_frozen_inference():
    paddle.seed(0)
    m = ConvBN()
    _trained_stats(m)
    x = paddle.rand([2, 3, 9, 9])
    with paddle.no_grad():
        gm = jit_core.capture(m, x, passes=["bn_fold", "dce"], freeze=True)
        expected = m(x)
    assert targets(gm) == ["conv2d", "relu", "conv2d", "mean", "linear"]
    record = gm.meta["passes"][0]
    assert (record.name, record.rewrites, record.ops_before, record.ops_after) == (
        "bn_fold",
        3,
        8,
        5,
    )
    close(gm(x)[0], expected, 1e-4)


def test_inference_passes_are_skipped_without_freeze_or_with_gradients_on():
    m = ConvBN()
    m.eval()
    x = paddle.rand([2, 3, 9, 9])
    gm = jit_core.capture(m, x, passes=["bn_fold", "constant_fold"], freeze=True)
    assert [r.ran for r in gm.meta["passes"]] == [False, False]
    assert "gradients are on" in gm.meta["passes"][0].skipped_because
    with paddle.no_grad():
        gm = jit_core.capture(m, x, passes=["bn_fold"])
    assert "freeze=True" in gm.meta["passes"][0].skipped_because
    assert targets(gm).count("bn") == 1


def test_constant_fold_computes_parameter_only_subgraphs_once():
    class M(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.w = self.create_parameter([4, 4])
            self.s = self.create_parameter([4])

        def forward(self, x):
            return paddle.matmul(x, self.w.t() * paddle.exp(self.s)) + paddle.ones([4])

    m = M()
    x = paddle.rand([2, 4])
    with paddle.no_grad():
        expected = m(x)
        gm = jit_core.capture(m, x, passes=["constant_fold", "dce"], freeze=True)
    assert targets(gm) == ["matmul", "add"]
    assert gm.meta["passes"][0].rewrites == 4  # t, exp, mul and ones: not the matmul
    close(gm(x)[0], expected)


def test_fusion_maps_matmul_bias_to_linear_and_x_sigmoid_to_silu():
    class M(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.w = self.create_parameter([8, 5])
            self.b = self.create_parameter([5], is_bias=True)
            self.b2 = self.create_parameter([3, 5], is_bias=True)

        def forward(self, x):
            h = paddle.matmul(x, self.w) + self.b
            h = h * F.sigmoid(h)
            # a 2-D bias is not a linear bias: the filter leaves it alone
            return x @ self.w + self.b2, h

    m = M()
    x = paddle.rand([3, 8])
    gm = jit_core.capture(m, x, passes=["fuse_patterns"])
    assert targets(gm) == ["linear", "silu", "matmul", "add"]
    assert gm.meta["passes"][0].rewrites == 2
    for a, e in zip(gm(x), m(x)[::-1][::-1]):
        close(a, e)


# ------------------------------------------------------------------ manager and plugins


def test_default_pipeline_order_and_disabling_by_name():
    names = PassManager.from_options().names
    assert names == ["cse", "bn_fold", "constant_fold", "fuse_patterns", "dce"]
    assert PassManager.from_options(disable=["cse", "dce"]).names == [
        "bn_fold",
        "constant_fold",
        "fuse_patterns",
    ]
    with pytest.raises(PassError, match="unknown graph pass 'nope'; registered passes: bn_fold"):
        PassManager.from_options(["nope"])
    with pytest.raises(PassError, match="cannot disable unknown graph pass"):
        jit_core.optimize(lambda x: x, disable_passes=["nope"])


def test_optimize_passes_option_and_explain_report():
    def f(x):
        return paddle.tanh(x) + paddle.tanh(x)

    x = paddle.rand([4])
    report = jit_core.explain(jit_core.optimize(f), x)
    assert report.op_count == 2
    assert report.graphs[0].passes[0].startswith("cse: 1 rewrite, ops 3 -> 2")
    assert "Passes:\n    cse: 1 rewrite" in str(report)
    report = jit_core.explain(jit_core.optimize(f, passes=False), x)
    assert report.op_count == 3 and report.graphs[0].passes == []
    report = jit_core.explain(jit_core.optimize(f, disable_passes=["cse"]), x)
    assert report.op_count == 3
    close(jit_core.optimize(f)(x), f(x))


def test_debug_mode_names_the_pass_that_breaks_the_graph():
    @graph_pass("breaker", default=False)
    def breaker(gm, ctx):
        node = [n for n in gm.graph.nodes if n.op == "call_function"][0]
        node.args = (node.next,) + tuple(node.args[1:])  # uses a later node
        return 1

    def f(x):
        return paddle.exp(x) + 1

    gm = jit_core.capture(f, paddle.rand([2]))
    with pytest.raises(PassError, match="graph pass 'breaker' left an invalid graph"):
        PassManager([breaker], debug=True).run(gm, _ctx(paddle.rand([2])))


def test_outside_plugin_adds_a_pass_through_the_hook():
    calls = []

    @graph_pass("tanh_to_sigmoid_ish", order=60, default=False)
    def rewrite_tanh(gm, ctx):
        calls.append(gm)
        n = 0
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target is paddle.tanh:
                node.target = F.tanhshrink
                n += 1
        return n

    class Plugin:
        @jit_core.hookimpl
        def jit_register_passes(self, register):
            register(rewrite_tanh)

    register_plugin(Plugin(), name="test-passes-plugin")
    try:
        assert "tanh_to_sigmoid_ish" in jit_core.graph_passes()
        assert "tanh_to_sigmoid_ish" not in PassManager.from_options().names

        def f(x):
            return paddle.tanh(x)

        x = paddle.rand([4])
        fast = jit_core.optimize(f, passes=["tanh_to_sigmoid_ish"])
        close(fast(x), F.tanhshrink(x))
        assert len(calls) == 1
    finally:
        from jit_core import plugins

        plugins.get_plugin_manager().unregister(name="test-passes-plugin")
        plugins._passes = None


def test_a_pass_must_declare_known_requirements():
    with pytest.raises(PassError, match="unknown requirements"):
        GraphPass("x", lambda gm, ctx: 0, requires=frozenset({"fast"}))


def test_shapes_are_recomputed_for_a_pass_that_needs_them():
    seen = []

    @graph_pass("reads_shapes", requires=("shapes",), default=False)
    def reads(gm, ctx):
        seen.extend(n.meta.get("shape") for n in gm.graph.nodes if n.op == "call_function")
        return 0

    @graph_pass("forgets_shapes", preserves=(), default=False)
    def forgets(gm, ctx):
        for n in gm.graph.nodes:
            n.meta.pop("shape", None)
        return 0

    x = paddle.rand([3, 5])
    gm = jit_core.capture(lambda x: paddle.sum(x, axis=0) * 2, x)
    PassManager([forgets, reads]).run(gm, _ctx(x))
    assert seen == [[5], [5]]


def test_frozen_model_recaptures_when_gradients_are_turned_on():
    paddle.seed(1)
    m = ConvBN()
    _trained_stats(m)
    x = paddle.rand([2, 3, 9, 9])
    fast = jit_core.optimize(m, freeze=True)
    with paddle.no_grad():
        close(fast(x), m(x), 1e-4)
        close(fast(x), m(x), 1e-4)
    assert fast.jit_stats.captures == 1
    x.stop_gradient = False
    out = fast(x)  # gradients on: no folding, the gradient reaches the input
    assert fast.jit_stats.captures == 2
    out.sum().backward()
    assert x.grad is not None and float(x.grad.abs().sum()) > 0


def test_operator_fallback_targets_are_left_alone():
    # nodes whose target is an operator the pass does not know stay as they are
    def f(x):
        return operator.neg(x) * 2

    x = paddle.rand([3])
    gm = jit_core.capture(f, x, passes=None)
    close(gm(x)[0], f(x))


def test_random_operations_are_told_apart_by_whole_words():
    from jit_core.fx import Graph
    from jit_core.passes.effects import is_pure, is_random

    g = Graph()
    x = g.placeholder("x")
    random = [F.dropout, F.alpha_dropout, paddle.rand, paddle.randint_like, paddle.normal]
    deterministic = [F.normalize, F.grid_sample, F.channel_shuffle, F.batch_norm, paddle.lgamma]
    assert all(is_random(g.call_function(fn, (x,))) for fn in random)
    assert not any(is_random(g.call_function(fn, (x,))) for fn in deterministic)
    assert is_random(g.call_method("uniform_", (x,)))
    # a dropout that is not on draws nothing: training=False (by keyword or position), p=0
    off = [
        g.call_function(F.dropout, (x, 0.1), {"training": False}),
        g.call_function(F.dropout, (x, 0.1, None, False)),
        g.call_function(F.dropout, (x,), {"p": 0.0}),
        g.call_function(F.dropout2d, (x, 0.5, False)),
        g.call_function(F.alpha_dropout, (x,), {"p": 0.2, "training": False}),
    ]
    assert not any(is_random(n) for n in off)
    on = [
        g.call_function(F.dropout, (x, 0.1), {"training": True}),
        g.call_function(F.dropout2d, (x, 0.5, x)),  # a training flag the graph computes
        g.call_function(F.dropout, (x,), {"bogus": 1}),  # arguments it does not take
    ]
    assert all(is_random(n) for n in on)
    assert not is_pure(g.call_method("add_", (x, 1)))  # in place
    assert is_pure(g.call_method("add", (x, 1)))
