"""The ONNX export that every ONNX-based backend shares (``pip install 'jit-core[onnx]'``).

Nothing here imports paddle2onnx or onnx until an export is asked for.
"""

from .check import check_against_paddle, graph_operators, restored_shapes, run_on_paddle
from .export import (
    DEFAULT_OPSET,
    EXPORT_REVISION,
    OnnxExportError,
    export_onnx,
    require,
    save_static,
)
from .parameters import lift_parameters, live_tensors

__all__ = [
    "DEFAULT_OPSET",
    "EXPORT_REVISION",
    "OnnxExportError",
    "check_against_paddle",
    "export_onnx",
    "graph_operators",
    "lift_parameters",
    "live_tensors",
    "require",
    "restored_shapes",
    "run_on_paddle",
    "save_static",
]
