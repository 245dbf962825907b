"""Registers the backend through jit-core's hook, like any plugin.

Where TensorRT cannot run (not installed, runtime-only, no CUDA device, Paddle without
CUDA) the backend is still listed, with the reason as ``unavailable``: ``optimize`` then
raises it at once, or with ``fallback=True`` runs on the paddle backend with one warning.
"""

from __future__ import annotations

from jit_core import hookimpl


@hookimpl
def jit_register_backends(register):
    from .backend import compile_graph
    from .environment import probe, unavailable_reason

    register(
        "tensorrt",
        compile_graph,
        description="NVIDIA TensorRT engines on the current GPU, exported to ONNX by jit-core",
        inference_only=True,
        unavailable=unavailable_reason(probe()),
        # engines are built with an optimization profile over the dynamic dimensions
        dynamic_shapes=True,
    )
