"""The backend's options, checked the way backend-onnxrt checks its own: a wrong type or
value raises ``TypeError``/``ValueError`` naming the option, before anything is built."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from jit_core.kit.onnx import DEFAULT_OPSET

#: how close an engine's float results must be to eager Paddle's (``rtol`` plus
#: ``scaled_atol`` times the largest magnitude of the result): TF32 is switched off, so
#: what is left is the order in which GPU kernels sum. With ``fp16=True`` the engine
#: computes in half precision and the check allows for it.
RTOL = 1e-3
SCALED_ATOL = 1e-4
FP16_RTOL = 1e-2
FP16_SCALED_ATOL = 1e-2


@dataclass(frozen=True)
class BuilderSettings:
    fp16: bool = False
    tf32: bool = False
    #: TensorRT's workspace memory pool limit; None leaves TensorRT's default (the GPU's
    #: memory)
    workspace_bytes: Optional[int] = None
    #: keep TensorRT's timing cache in the compile cache, so that later builds on this GPU
    #: skip the kernel timing already done
    timing_cache: bool = True
    opset: int = DEFAULT_OPSET
    cache: bool = True
    fallback: bool = False
    #: build engines in a worker process (``build_worker``), where a crash of TensorRT
    #: costs the graph, not the program
    isolate: bool = True

    def key(self) -> Tuple[Any, ...]:
        """What of the settings shapes the engine (part of its cache key)."""
        return ("fp16", self.fp16, "tf32", self.tf32, "workspace", self.workspace_bytes)

    @property
    def tolerance(self) -> Tuple[float, float]:
        return (FP16_RTOL, FP16_SCALED_ATOL) if self.fp16 else (RTOL, SCALED_ATOL)


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def builder_settings(
    *,
    fp16: bool = False,
    int8: bool = False,
    tf32: bool = False,
    workspace_bytes: Optional[int] = None,
    timing_cache: bool = True,
    opset: int = DEFAULT_OPSET,
    cache: bool = True,
    fallback: bool = False,
    isolate: bool = True,
) -> BuilderSettings:
    """The checked settings of ``compile_graph``'s options."""
    for name, value in (
        ("fp16", fp16),
        ("int8", int8),
        ("tf32", tf32),
        ("timing_cache", timing_cache),
        ("cache", cache),
        ("fallback", fallback),
        ("isolate", isolate),
    ):
        _flag(name, value)
    if int8:
        raise ValueError(
            "int8=True is not supported: INT8 engines need a calibration data set or a "
            "quantized (Q/DQ) model, which this backend does not make; use fp16=True"
        )
    if workspace_bytes is not None and (
        not isinstance(workspace_bytes, int)
        or isinstance(workspace_bytes, bool)
        or workspace_bytes <= 0
    ):
        raise ValueError(
            f"workspace_bytes must be a positive int (bytes) or None, got {workspace_bytes!r}"
        )
    if not isinstance(opset, int) or isinstance(opset, bool) or opset < 7:
        raise ValueError(f"opset must be an ONNX opset number (an int, 7 or more), got {opset!r}")
    return BuilderSettings(
        fp16=fp16,
        tf32=tf32,
        workspace_bytes=workspace_bytes,
        timing_cache=timing_cache,
        opset=opset,
        cache=cache,
        fallback=fallback,
        isolate=isolate,
    )
