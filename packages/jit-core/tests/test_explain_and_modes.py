"""explain().dump, the paddle backend's static mode, and forgetting runtime plugins."""

from __future__ import annotations

import os

import numpy as np
import paddle
import pytest

import jit_core
from jit_core import plugins


def f(x, y):
    return paddle.nn.functional.relu(x - y) * 3


def same(a, b):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


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
def recording(install_plugin):
    return install_plugin(RecordingBackend(), "recording-test")


def test_static_mode_of_the_paddle_backend():
    fast = jit_core.optimize(f, mode="static")
    x, y = paddle.rand([2, 3]), paddle.rand([2, 3])
    same(fast(x, y), f(x, y))


def test_reset_plugins_forgets_runtime_registrations(recording):
    assert "recording" in jit_core.backends()
    plugins.reset_plugins()
    assert "recording" not in jit_core.backends()
    assert "paddle" in jit_core.backends()


def test_explain_dumps_every_artifact(tmp_path):
    x, y = paddle.rand([2, 3]), paddle.rand([2, 3])
    report = jit_core.explain(f, x, y)
    paths = report.dump(str(tmp_path / "dump"))
    names = sorted(os.path.basename(p) for p in paths)
    assert names == [
        "01_f.bytecode.txt",
        "01_f.graph.py",
        "01_f.guard.py",
        "01_f.kernels.py",  # what the paddle backend runs: F.relu lowered to its kernel
        "explain.txt",
    ]
    kernels = (tmp_path / "dump" / "01_f.kernels.py").read_text()
    assert "_C_ops_relu(" in kernels
    compile(kernels, "kernels.py", "exec")
    graph = (tmp_path / "dump" / "01_f.graph.py").read_text()
    assert "def forward(self, x, y):" in graph and "relu" in graph
    compile(graph, "graph.py", "exec")
    assert "def guard_f_" in (tmp_path / "dump" / "01_f.guard.py").read_text()
    assert "LOAD_CONST" in (tmp_path / "dump" / "01_f.bytecode.txt").read_text()
    assert "Graph count: 1" in (tmp_path / "dump" / "explain.txt").read_text()
