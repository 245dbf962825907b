"""ONNX Runtime backend for jit-core: ``optimize(fn, backend="onnxrt")``."""

from __future__ import annotations

from .backend import OnnxRuntimeError, OrtGraph, compile_graph, stats

__version__ = "0.2.0"

__all__ = ["OnnxRuntimeError", "OrtGraph", "compile_graph", "stats", "__version__"]
