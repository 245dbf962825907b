"""The public API, the plugin manager and the logging channels."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import paddle
import pytest

import jit_core
from jit_core import plugins
from jit_core.errors import BackendCompileError, BackendNotFoundError


def f(x, y):
    return paddle.nn.functional.relu(x - y) * 3


def same(a, b):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


# ------------------------------------------------------------------ optimize()


def test_decorator_forms():
    @jit_core.optimize
    def g(x):
        return x * 2

    @jit_core.optimize(backend="paddle")
    def h(x):
        return x + 2

    x = paddle.rand([3])
    same(g(x), x * 2)
    same(h(x), x + 2)
    assert g.__name__ == "g" and g.jit_stats.compiled == 1 and h.jit_stats.compiled == 1


def test_method_decorator_binds_like_a_function():
    class Scaler:
        def __init__(self, k):
            self.k = k

        @jit_core.optimize
        def apply(self, x):
            return x * self.k

    x = paddle.rand([3])
    same(Scaler(2.0).apply(x), x * 2.0)
    same(Scaler(5.0).apply(x), x * 5.0)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(TypeError, match="function or a paddle.nn.Layer"):
        jit_core.optimize(42)
    fast = jit_core.optimize(f)
    with pytest.raises(TypeError, match="already optimized"):
        jit_core.optimize(fast)
    with pytest.raises(BackendNotFoundError) as err:
        jit_core.optimize(f, backend="nope")
    assert "'nope'" in str(err.value) and "paddle" in str(err.value)
    with pytest.raises(BackendCompileError, match="backend 'paddle'.*unknown options.*turbo"):
        jit_core.optimize(f, turbo=True)(paddle.rand([2]), paddle.rand([2]))


def test_optimized_layer_is_the_layer():
    net = paddle.nn.Sequential(paddle.nn.Linear(4, 4), paddle.nn.ReLU())
    fast = jit_core.optimize(net)
    assert [id(p) for p in fast.parameters()] == [id(p) for p in net.parameters()]
    assert list(fast.state_dict()) == list(net.state_dict())
    fast.tag = "set through the wrapper"
    assert net.tag == "set through the wrapper"
    x = paddle.rand([2, 4])
    same(fast(x), net(x))
    same(fast.forward(x), net(x))
    assert "Optimized(" in repr(fast)


def test_static_mode_of_the_paddle_backend():
    fast = jit_core.optimize(f, mode="static")
    x, y = paddle.rand([2, 3]), paddle.rand([2, 3])
    same(fast(x, y), f(x, y))


# ------------------------------------------------------------------ plugins


class RecordingBackend:
    """A backend plugin registered through the same hook as installed ones."""

    def __init__(self):
        self.compiled = []

    @jit_core.hookimpl
    def jit_register_backends(self, register):
        def compile_graph(gm, example_inputs, **options):
            self.compiled.append((gm.code, [list(t.shape) for t in example_inputs]))
            return gm.forward

        register("recording", compile_graph, description="records what it compiles")


@pytest.fixture
def recording():
    plugin = RecordingBackend()
    plugins.register_plugin(plugin, name="recording-test")
    yield plugin
    plugins.reset_plugins()


def test_installed_plugins_are_listed_with_versions():
    assert "paddle" in jit_core.backends()
    listed = {dist: version for _, dist, version in jit_core.list_plugins()}
    assert listed.get("jit-core") == jit_core.__version__
    assert "jit-opcodes" in listed and listed["jit-opcodes"]
    backend = jit_core.backends()["paddle"]
    assert backend.plugin == "paddle" and backend.description


def test_a_backend_plugin_is_used(recording):
    assert "recording" in jit_core.backends()
    fast = jit_core.optimize(f, backend="recording")
    x, y = paddle.rand([2, 3]), paddle.rand([2, 3])
    same(fast(x, y), f(x, y))
    assert len(recording.compiled) == 1
    code, shapes = recording.compiled[0]
    assert "relu" in code and shapes == [[2, 3], [2, 3]]
    report = jit_core.explain(f, x, y, backend="recording")
    assert report.graph_count == 1 and len(recording.compiled) == 2


def test_reset_plugins_forgets_runtime_registrations(recording):
    assert "recording" in jit_core.backends()
    plugins.reset_plugins()
    assert "recording" not in jit_core.backends()
    assert "paddle" in jit_core.backends()


# ------------------------------------------------------------------ logging


def _run(code: str, **env):
    full_env = dict(os.environ, GLOG_minloglevel="2", **env)
    full_env.pop("JIT_LOGS", None)
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
    )


PROGRAM = """
    import paddle, jit_core
    def f(x):
        return paddle.tanh(x) * 4
    jit_core.optimize(f)(paddle.rand([2]))
    print("done")
"""


def test_logging_channels_from_the_environment():
    quiet = _run(PROGRAM)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.strip() == "done"
    assert "jit_core" not in quiet.stderr and "def forward" not in quiet.stderr

    loud = _run(PROGRAM, JIT_LOGS="graphs,guards")
    assert loud.returncode == 0, loud.stderr
    assert "def forward(self, x):" in loud.stderr and "paddle.tanh(x)" in loud.stderr
    assert "def guard_f_" in loud.stderr


def test_set_logs_from_code(caplog):
    jit_core.set_logs("recompiles")
    try:
        fast = jit_core.optimize(f)
        with caplog.at_level("DEBUG", logger="jit_core"):
            fast(paddle.rand([2]), paddle.rand([2]))
            fast(paddle.rand([3]), paddle.rand([3]))
        assert any("recompiling f" in r.getMessage() for r in caplog.records)
    finally:
        jit_core.set_logs("recompiles", level=30)
    with pytest.raises(ValueError, match="unknown log channel"):
        jit_core.set_logs("everything")


def test_explain_dumps_every_artifact(tmp_path):
    x, y = paddle.rand([2, 3]), paddle.rand([2, 3])
    report = jit_core.explain(f, x, y)
    paths = report.dump(str(tmp_path / "dump"))
    names = sorted(os.path.basename(p) for p in paths)
    assert names == ["01_f.bytecode.txt", "01_f.graph.py", "01_f.guard.py", "explain.txt"]
    graph = (tmp_path / "dump" / "01_f.graph.py").read_text()
    assert "def forward(self, x, y):" in graph and "relu" in graph
    compile(graph, "graph.py", "exec")
    assert "def guard_f_" in (tmp_path / "dump" / "01_f.guard.py").read_text()
    assert "LOAD_CONST" in (tmp_path / "dump" / "01_f.bytecode.txt").read_text()
    assert "Graph count: 1" in (tmp_path / "dump" / "explain.txt").read_text()
