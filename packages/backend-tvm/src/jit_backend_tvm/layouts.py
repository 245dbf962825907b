"""The data layout of convolutions, and the constants a layout change leaves behind.

ONNX convolutions are NCHW. Channels last (NHWC) puts the channels in the innermost loop,
which vectorizes: MetaSchedule finds far faster schedules there for the same number of
trials (ResNet18's 64-channel 3x3 convolution: 3.0 ms after 64 trials against 4.8 ms in
NCHW, measured on this project's 2-core machine).
"""

from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger("jit_core.tuning")

#: activation layouts ``channels_last`` can give convolutions: ONNX's own, or channels last
LAYOUTS = ("NHWC", "NCHW")


def check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")


def channels_last(mod):
    """``mod`` with its convolutions in NHWC (weights OHWI); pooling, elementwise ops and
    reductions follow the layout of their input. Where TVM's layout conversion fails the
    graph stays in NCHW: slower kernels, the same results."""
    from tvm import relax

    if not calls(mod, "relax.nn.conv2d"):
        # TVM's ConvertLayout died with std::bad_alloc on a graph of slicing alone; a
        # graph without a convolution has nothing to gain from it anyway
        return mod
    if calls(mod, "relax.nn.conv2d_transpose"):
        # ConvertLayout hands a transposed convolution NHWC data with its IOHW kernel, a
        # pair TVM 0.27 has no lowering for ("CodeGenVM cannot emit this Relax operator")
        log.info("convolutions stay in NCHW: the graph has a transposed convolution")
        return mod
    try:
        return relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "OHWI"]})(mod)
    except Exception as e:  # noqa: BLE001 - TVM raises its own error types
        log.info("convolutions stay in NCHW: TVM's ConvertLayout failed (%s)", e)
        return mod


def fold_constant_permutes(mod):
    """``mod`` with each ``permute_dims`` of a constant replaced by the permuted constant.

    The layout conversion transposes every weight of a frozen graph to OHWI. TVM's
    ``FoldConstant`` would evaluate those transposes by compiling a kernel per weight shape
    (ResNet18: 3.6 s of its build, densenet121: 12 s); NumPy does it at once."""
    import tvm
    from tvm import relax
    from tvm.relax.expr_functor import PyExprMutator, mutator

    permute = tvm.ir.Op.get("relax.permute_dims")

    @mutator
    class Folder(PyExprMutator):
        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)
            if call.op == permute and isinstance(call.args[0], tvm.ir.expr.Constant):
                axes = call.attrs.axes
                value = call.args[0].value.numpy()
                value = value.transpose(None if axes is None else [int(a) for a in axes])
                return relax.const(np.ascontiguousarray(value))
            return call

    return apply_mutator(mod, Folder(mod))


def apply_mutator(mod, mutator):
    """``mod`` with every Relax function rewritten by ``mutator`` (a ``PyExprMutator``
    made for ``mod``)."""
    from tvm import relax

    for gv, func in mod.functions_items():
        if isinstance(func, relax.Function):
            mutator.builder_.update_func(gv, mutator.visit_expr(func))
    return mutator.builder_.get()


def calls(mod, op_name: str) -> bool:
    """Whether a Relax function of ``mod`` calls the operator ``op_name``."""
    import tvm
    from tvm import relax

    found = []

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            if expr.op.name == op_name:
                found.append(expr)

    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func.body, visit)
    return bool(found)


__all__ = [
    "LAYOUTS",
    "apply_mutator",
    "calls",
    "channels_last",
    "check_layout",
    "fold_constant_permutes",
]
