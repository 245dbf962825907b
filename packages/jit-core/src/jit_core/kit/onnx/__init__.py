"""The ONNX export that every ONNX-based backend shares (``pip install 'jit-core[onnx]'``).

Graphs are lowered to ONNX directly (``direct``, with the lowerings of ``lowerings`` and of
plugins); a graph with a call none serves goes through a static program and paddle2onnx
(``export``) where that is installed, and runs on the paddle backend where it is not
(paddle2onnx 2.x has no wheels for Python 3.13). Nothing here imports paddle2onnx or onnx
until an export is asked for; ``unavailable_reason()`` says from their metadata whether an
export can run at all (the ONNX-based backends register as unavailable with that reason).
"""

from .check import (
    check_against_paddle,
    exporter_name,
    graph_operators,
    input_free_outputs,
    output_difference,
    restored_shapes,
    run_on_paddle,
)
from .direct import (
    MissingLowering,
    data_dependent_sizes,
    exporter_fingerprint,
    refuse_runtime_checks,
    runtime_checks,
)
from .export import (
    DEFAULT_OPSET,
    EXPORT_REVISION,
    OnnxExportError,
    export_onnx,
    exporter_versions,
    installed_version,
    paddle2onnx_missing,
    require,
    save_static,
    unavailable_reason,
)
from .keys import ExportKeys
from .parameters import lift_parameters, live_tensors

__all__ = [
    "DEFAULT_OPSET",
    "EXPORT_REVISION",
    "ExportKeys",
    "MissingLowering",
    "OnnxExportError",
    "check_against_paddle",
    "data_dependent_sizes",
    "export_onnx",
    "exporter_fingerprint",
    "exporter_versions",
    "exporter_name",
    "graph_operators",
    "input_free_outputs",
    "installed_version",
    "lift_parameters",
    "live_tensors",
    "output_difference",
    "paddle2onnx_missing",
    "require",
    "restored_shapes",
    "refuse_runtime_checks",
    "run_on_paddle",
    "runtime_checks",
    "save_static",
    "unavailable_reason",
]
