"""Registers the backend through jit-core's hook, like any plugin.

Where the ONNX export cannot run (onnx missing, or ``JIT_CORE_ONNX_EXPORTER=paddle2onnx``
where paddle2onnx 2.x is not installed) the backend is still listed, with the reason as ``unavailable``: ``optimize`` then raises it at
once, or with ``fallback=True`` runs on the paddle backend with one warning.
"""

from __future__ import annotations

from typing import Optional, Tuple

from jit_core import hookimpl


def unavailable_reason(python: Optional[Tuple[int, int]] = None) -> str:
    """Why the backend cannot run here; empty when it can. Read from the installed
    packages' metadata, nothing imported (``python``: a ``(major, minor)`` pair, for tests)."""
    from jit_core.kit.onnx import unavailable_reason as export_unavailable

    return export_unavailable(python)


@hookimpl
def jit_register_backends(register):
    from .backend import compile_graph

    register(
        "onnxrt",
        compile_graph,
        description="ONNX Runtime (CPU by default), exported to ONNX by jit-core",
        inference_only=True,
        unavailable=unavailable_reason(),
        # the exported model keeps the graph's dynamic dimensions (jit_core.kit.onnx.export)
        dynamic_shapes=True,
    )
