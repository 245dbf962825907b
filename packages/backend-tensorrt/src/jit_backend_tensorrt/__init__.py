"""TensorRT backend for jit-core: ``optimize(fn, backend="tensorrt")`` on NVIDIA GPUs."""

from __future__ import annotations

from .backend import compile_graph, stats
from .environment import Environment, probe, unavailable_reason
from .lowering import TensorRTError
from .runtime import NotOnGpuError, TrtGraph

__version__ = "0.2.0"

__all__ = [
    "Environment",
    "NotOnGpuError",
    "TensorRTError",
    "TrtGraph",
    "compile_graph",
    "probe",
    "stats",
    "unavailable_reason",
    "__version__",
]
