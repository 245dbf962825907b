"""The build function MetaSchedule's builder workers run for each candidate schedule.

It is TVM's default build minus ``import tvm.s_tir.tensor_intrin``: that import parses
hundreds of TVMScript intrinsics through ``inspect.stack()`` and takes 35-40 s, longer than
the builder's 30 s timeout, so with the default every candidate of a fresh worker pool (one
per batch) failed to build. The intrinsics serve tensorized schedules (VNNI, AMX, GPU
tensor cores), which the float32 CPU rules used here never pick. This module imports TVM
only: workers unpickle it by reference, and must not pay for Paddle.
"""

from __future__ import annotations


def build(mod, target, _params):
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)
