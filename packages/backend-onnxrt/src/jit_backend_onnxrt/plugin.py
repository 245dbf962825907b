"""Registers the backend through jit-core's hook, like any plugin."""

from __future__ import annotations

from jit_core import hookimpl


@hookimpl
def jit_register_backends(register):
    from .backend import compile_graph

    register(
        "onnxrt",
        compile_graph,
        description="ONNX Runtime (CPU by default), exported with paddle2onnx",
        inference_only=True,
        # the exported model keeps the graph's dynamic dimensions (jit_core.onnx.export)
        dynamic_shapes=True,
    )
