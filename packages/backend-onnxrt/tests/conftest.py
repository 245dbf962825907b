"""Fixtures of the onnxrt backend's tests."""

from __future__ import annotations

import paddle
import pytest

import jit_core


class Recorder:
    """A backend that keeps the graphs it is given and runs them on paddle."""

    def __init__(self):
        self.graphs = []

    @jit_core.hookimpl
    def jit_register_backends(self, register):
        def compile_fn(gm, example_inputs, **options):
            self.graphs.append((gm, list(example_inputs)))
            return gm.forward

        register("direct-export-recorder", compile_fn, description="records graphs")


@pytest.fixture
def capture(install_plugin):
    recorder = install_plugin(Recorder(), "direct-export-recorder")

    def run(fn, *inputs):
        recorder.graphs.clear()
        with paddle.no_grad():
            jit_core.optimize(fn, backend="direct-export-recorder")(*inputs)
        assert len(recorder.graphs) == 1, "expected one graph"
        return recorder.graphs[0]

    return run
