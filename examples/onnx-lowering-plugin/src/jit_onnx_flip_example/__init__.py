"""An ONNX lowering plugin: ``paddle.flip`` as one ``Slice`` with negative steps."""

from __future__ import annotations

import paddle

from jit_core import hookimpl

__version__ = "0.2.0"

#: ONNX's Slice clamps this end to "before the first element" of a backward walk
_BEFORE_START = -(2**63)


def flip(ex, a):
    """``ex`` is jit-core's ``jit_core.kit.onnx.direct.Exporter``; ``a`` the call's arguments
    by name (``x``, ``axis``)."""
    axis = a["axis"]
    axes = [axis] if isinstance(axis, int) else axis
    if not isinstance(axes, (list, tuple)) or not all(isinstance(d, int) for d in axes):
        ex.decline("axes that are not constants")
    rank = ex.rank(a["x"])
    axes = sorted({d % rank for d in axes}) if rank else []
    if not axes:
        return ex.op("Identity", [ex.input(a["x"])])
    n = len(axes)
    return ex.op(
        "Slice",
        [
            ex.input(a["x"]),
            ex.ints([-1] * n),
            ex.ints([_BEFORE_START] * n),
            ex.ints(axes),
            ex.ints([-1] * n),
        ],
    )


@hookimpl
def jit_register_onnx_lowerings(register):
    register(paddle.flip, flip)
    register("Tensor.flip", flip)
