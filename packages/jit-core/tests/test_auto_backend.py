"""``backend="auto"``: the fastest backend that agrees with paddle wins, per graph; one
that disagrees never does; the choice comes back from the compile cache in a fresh
process. Stand-in backends make "clearly faster" certain: one hands back what it computed
on the capture's inputs at once, one sleeps before computing."""

from __future__ import annotations

import operator
import os
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import jit_core
from jit_core.auto_backend import compile_auto, repeatable, take_choice
from jit_core.fx import Graph, GraphModule


def chain(x, y):
    # enough small ops that the graph costs paddle tens of microseconds per call
    h = x * y
    for _ in range(20):
        h = paddle.tanh(h) + 0.5
    return h


class StandIns:
    """``quick``: computes once, then returns that result (right on the capture's inputs,
    and orders of magnitude faster); ``slow``: right, 2 ms slower per call; ``wrong``: as
    fast as ``quick``, off by 1%."""

    def __init__(self):
        self.compiled = []

    @jit_core.hookimpl
    def jit_register_backends(self, register):
        def quick(gm, example_inputs, **options):
            self.compiled.append("quick")
            kept = gm.forward(*example_inputs)
            return lambda *args: kept

        def slow(gm, example_inputs, **options):
            self.compiled.append("slow")

            def run(*args):
                time.sleep(0.002)
                return gm.forward(*args)

            return run

        def wrong(gm, example_inputs, **options):
            self.compiled.append("wrong")
            kept = tuple(t * 1.01 for t in gm.forward(*example_inputs))
            return lambda *args: kept

        register("quick", quick, description="stand-in", inference_only=True)
        register("slow", slow, description="stand-in", inference_only=True)
        register("wrong", wrong, description="stand-in", inference_only=True)


@pytest.fixture
def stand_ins(tmp_path, monkeypatch, install_plugin):
    monkeypatch.setenv("JIT_CORE_CACHE_DIR", str(tmp_path / "cache"))
    return install_plugin(StandIns(), "auto-stand-ins")


def inputs():
    return paddle.rand([8, 16]), paddle.rand([8, 16])


def test_auto_is_installed_and_lists_itself():
    found = jit_core.backends()
    assert "auto" in found and found["auto"].plugin == "auto"
    assert not found["auto"].auto_candidate  # it never tries itself


def test_the_clearly_fastest_backend_wins(stand_ins):
    x, y = inputs()
    with paddle.no_grad():
        fast = jit_core.optimize(chain, backend="auto", candidates=["slow", "quick"])
        report = jit_core.explain(fast, x, y)
    (graph,) = report.graphs
    assert graph.backend.startswith("auto (chose quick:"), graph.backend
    # every candidate was timed, paddle included, fastest first
    assert "quick" in graph.backend and "paddle" in graph.backend and "slow" in graph.backend
    order = [graph.backend.index(f"{b} ") for b in ("quick", "paddle", "slow")]
    assert order == sorted(order), graph.backend
    np.testing.assert_allclose(report.result.numpy(), chain(x, y).numpy(), rtol=1e-6)


def test_paddle_wins_over_a_slower_backend(stand_ins):
    x, y = inputs()
    with paddle.no_grad():
        fast = jit_core.optimize(chain, backend="auto", candidates=["slow"])
        np.testing.assert_allclose(fast(x, y).numpy(), chain(x, y).numpy(), rtol=1e-6)
        x2, y2 = inputs()  # a cache hit runs paddle's kernels on new values
        np.testing.assert_allclose(fast(x2, y2).numpy(), chain(x2, y2).numpy(), rtol=1e-6)
        (graph,) = jit_core.explain(fast, x, y).graphs
    assert graph.backend.startswith("auto (chose paddle"), graph.backend


def test_a_backend_that_disagrees_with_paddle_is_never_chosen(stand_ins):
    x, y = inputs()
    with paddle.no_grad():
        fast = jit_core.optimize(chain, backend="auto", candidates=["wrong", "slow"])
        report = jit_core.explain(fast, x, y)
    (graph,) = report.graphs
    assert graph.backend.startswith("auto (chose paddle"), graph.backend
    assert "wrong: disagrees with paddle: output 0 differs" in graph.backend
    assert "wrong" in stand_ins.compiled


def test_an_update_in_place_of_a_value_the_graph_made_is_timed_like_any(stand_ins):
    def bump(x):
        h = x * 2
        h.add_(paddle.ones_like(h))  # stays in the graph: h is the graph's own
        return h

    x = paddle.zeros([4])
    with paddle.no_grad():
        fast = jit_core.optimize(bump, backend="auto", candidates=["slow"])
        np.testing.assert_array_equal(fast(x).numpy(), np.ones(4, "float32"))
        (graph,) = jit_core.explain(fast, x).graphs
    np.testing.assert_array_equal(x.numpy(), np.zeros(4, "float32"))
    assert "add_" in graph.code and graph.backend.startswith("auto (chose paddle"), graph
    assert "slow" in stand_ins.compiled


def test_a_graph_that_updates_what_outlives_it_is_never_run_twice(stand_ins):
    # hand-built: the capture breaks the graph before an update of its inputs, so this
    # is what a graph that did hold one would look like
    g = Graph()
    x = g.placeholder("x")
    g.call_method("add_", (x, 1.0))
    g.output(g.call_function(operator.mul, (x, 2.0)))
    x.meta["mutated"] = True
    gm = GraphModule({}, g)
    assert repeatable(gm) == "it updates x in place"
    t = paddle.zeros([3])
    fn = compile_auto(gm, [t], candidates=["quick", "slow"])
    np.testing.assert_array_equal(t.numpy(), np.zeros(3, "float32"))  # never ran
    assert fn == gm.forward and stand_ins.compiled == []
    choice = take_choice()
    assert choice.backend == "paddle" and "quick: not tried: it updates x in place" in (
        choice.describe()
    )


def test_repeatable_graphs():
    g = Graph()
    x = g.placeholder("x")
    g.output(g.call_function(paddle.nn.functional.dropout, (x,), {"p": 0.5}))
    assert "draws random numbers" in repeatable(GraphModule({}, g))
    g = Graph()
    x = g.placeholder("x")
    h = g.call_function(operator.mul, (x, 2.0))
    g.call_method("add_", (h, 1.0))
    g.output(h)
    assert repeatable(GraphModule({}, g)) == ""


def test_a_graph_that_needs_gradients_goes_to_paddle_without_a_warning(stand_ins):
    x = paddle.rand([8, 16])
    x.stop_gradient = False
    y = paddle.rand([8, 16])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fast = jit_core.optimize(chain, backend="auto", candidates=["quick"])
        report = jit_core.explain(fast, x, y)
    (graph,) = report.graphs
    assert graph.backend.startswith("paddle (auto: gradients are on"), graph.backend
    assert stand_ins.compiled == []


def test_unknown_candidates_are_named():
    with pytest.raises(jit_core.errors.JitError, match="unknown candidate 'nope'.*installed"):
        with paddle.no_grad():
            jit_core.optimize(chain, backend="auto", candidates=["nope"])(*inputs())


SCRIPT = """
import warnings
warnings.filterwarnings("ignore")
import paddle, jit_core
from jit_core import plugins
sys_path = {path!r}
import sys
sys.path.insert(0, sys_path)
from test_auto_backend import StandIns, chain
standins = StandIns()
plugins.register_plugin(standins, name="auto-stand-ins")
paddle.seed(0)
x, y = paddle.rand([8, 16]), paddle.rand([8, 16])
with paddle.no_grad():
    fast = jit_core.optimize(chain, backend="auto", candidates=["slow", "quick"])
    report = jit_core.explain(fast, x, y)
print("BACKEND", report.graphs[0].backend)
print("COMPILED", sorted(standins.compiled))
"""


def test_the_choice_comes_back_from_the_compile_cache_in_a_fresh_process(tmp_path):
    env = dict(os.environ, JIT_CORE_CACHE_DIR=str(tmp_path / "cache"), GLOG_minloglevel="2")
    script = textwrap.dedent(SCRIPT.format(path=os.path.dirname(__file__)))

    def run():
        proc = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
        return lines["BACKEND"], lines["COMPILED"]

    first, compiled = run()
    assert first.startswith("auto (chose quick:") and "(from the compile cache)" not in first
    assert compiled == "['quick', 'slow']"
    second, compiled = run()
    assert second.startswith("auto (chose quick (from the compile cache):"), second
    # the timings are the first process's; only the chosen backend was built (and checked)
    assert second.split(": ", 1)[1] == first.split(": ", 1)[1]
    assert compiled == "['quick']"


def test_a_single_candidate_is_not_timed(stand_ins):
    x, y = inputs()
    with paddle.no_grad():
        fast = jit_core.optimize(chain, backend="auto", candidates=["paddle"])
        np.testing.assert_allclose(fast(x, y).numpy(), chain(x, y).numpy(), rtol=1e-6)
        choice_line = jit_core.explain(fast, x, y).graphs[0].backend
    assert choice_line.startswith("auto (chose paddle"), choice_line
    assert "paddle: the only candidate left, not timed" in choice_line


def skip_some(x):
    # a loop over a Python counter whose body breaks: the counter is a number input
    acc = x * 0
    for step in range(5):
        scaled = x + step
        if scaled.min() > 3:
            break
        acc = acc + scaled * step
    return acc


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_a_number_input_is_no_tensor_to_the_inference_checks(grad):
    """The loop counter becomes a number input of the loop body's graph. Deciding whether
    that graph may leave paddle asked Paddle whether the number required gradients (an
    internal error: the body ran eagerly) and whether an output was a view of it (Paddle
    read the int as a tensor: the process crashed)."""
    x = paddle.to_tensor([0.1, 0.2, 0.3, 0.9])
    opt = jit_core.optimize(skip_some, backend="auto")
    with paddle.set_grad_enabled(grad):
        for _ in range(2):
            np.testing.assert_allclose(opt(x).numpy(), skip_some(x).numpy(), rtol=1e-6)
    assert not opt.jit_stats.eager_frames


def mlp(x, w1, w2):
    return F.linear(F.gelu(F.linear(x, w1)), w2)


def test_paddle_is_timed_as_the_paddle_backend_builds_it(stand_ins):
    """auto's paddle candidate is the paddle backend's build (API calls lowered to their
    kernels), not the graph code as captured: that is what runs once paddle is chosen."""
    x, w1, w2 = paddle.rand([4, 32]), paddle.rand([32, 32]), paddle.rand([32, 8])
    with paddle.no_grad():
        fast = jit_core.optimize(mlp, backend="auto", candidates=["slow"])
        np.testing.assert_allclose(fast(x, w1, w2).numpy(), mlp(x, w1, w2).numpy(), rtol=1e-6)
        (graph,) = jit_core.explain(fast, x, w1, w2).graphs
    assert graph.backend.startswith("auto (chose paddle"), graph.backend
    assert "run their kernels directly (gelu, linear x2)" in graph.backend, graph.backend
    assert "_C_ops_linear(" in graph.kernel_code


def test_a_choice_is_kept_only_for_the_code_that_made_it(monkeypatch):
    """The compile cache keys a choice by the sources of jit_core and of each candidate
    as well as their versions: a development tree's change (a faster paddle backend)
    chooses again rather than reusing what older code measured."""
    from jit_core import auto_backend

    g = Graph()
    x = g.placeholder("x")
    g.output((g.call_function(F.relu, (x,)),))
    gm = GraphModule({}, g)
    args = [paddle.rand([3])]
    before = auto_backend._cache_key(gm, args, ["paddle"])
    assert auto_backend._cache_key(gm, args, ["paddle"]) == before
    monkeypatch.setattr(auto_backend, "_fingerprints", {"jit_core": "changed"})
    assert auto_backend._cache_key(gm, args, ["paddle"]) != before
