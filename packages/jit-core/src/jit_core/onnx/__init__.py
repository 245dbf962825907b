"""The ONNX export that every ONNX-based backend shares (``pip install 'jit-core[onnx]'``).

Nothing here imports paddle2onnx or onnx until an export is asked for.
"""

from .export import DEFAULT_OPSET, OnnxExportError, export_onnx, require, save_static

__all__ = ["DEFAULT_OPSET", "OnnxExportError", "export_onnx", "require", "save_static"]
