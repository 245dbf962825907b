"""Whether TensorRT can build and run engines here, and if not, exactly why.

``probe()`` gathers the facts (cheap ones first: ``tensorrt`` is imported only where Paddle
has a CUDA device to run its engines on, and the ONNX export's packages are only looked up
in their metadata); ``unavailable_reason()`` turns them into the message
``optimize(..., backend="tensorrt")`` raises. The two are apart so that tests can check the
message of every cause on a machine that has none of them.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import List, Optional, Tuple

#: the TensorRT major versions this backend is written against and has run on
#: (``execute_async_v3``, ``set_tensor_address``, ``set_memory_pool_limit``, explicit batch
#: by default); a new major version changes the API, so it is refused until it is tested.
#: The ``trt`` extra in pyproject.toml pins the same range.
MIN_TENSORRT = 10
MAX_TENSORRT = 10
SUPPORTED = (
    f"TensorRT {MIN_TENSORRT}.x"
    if MIN_TENSORRT == MAX_TENSORRT
    else (f"TensorRT {MIN_TENSORRT}.x to {MAX_TENSORRT}.x")
)
REQUIREMENT = f"tensorrt>={MIN_TENSORRT},<{MAX_TENSORRT + 1}"
INSTALL = f"pip install 'jit-backend-tensorrt[trt]' (or pip install '{REQUIREMENT}')"
#: TensorRT's runtime-only Python modules: they deserialize and run engines, never build
RUNTIME_ONLY_MODULES = ("tensorrt_lean", "tensorrt_dispatch")


@dataclass(frozen=True)
class Environment:
    #: ``tensorrt`` can be found by the import system
    tensorrt_found: bool
    #: why importing it failed (its own message), or None
    import_error: Optional[str] = None
    #: ``tensorrt.__version__`` where it imported
    tensorrt_version: Optional[str] = None
    #: it has ``Builder`` (a runtime-only build of the module does not)
    has_builder: bool = True
    #: the runtime-only modules that are installed (``tensorrt_lean``...)
    runtime_only: Tuple[str, ...] = ()
    #: ``paddle.is_compiled_with_cuda()``
    paddle_cuda: bool = False
    paddle_version: str = ""
    #: CUDA devices Paddle sees
    cuda_devices: int = 0
    #: why the shared ONNX export cannot run (``jit_core.kit.onnx.unavailable_reason()``: no
    #: onnx, or paddle2onnx asked for and missing); empty when it can
    export_unavailable: str = ""


def _major(version: str) -> Optional[int]:
    try:
        return int(version.split(".")[0])
    except ValueError:
        return None


def unavailable_reason(env: Environment) -> str:
    """Every reason this environment cannot build and run TensorRT engines, joined by
    "; " (each names the missing piece and how to get it); empty when it can."""
    reasons: List[str] = []
    if not env.tensorrt_found:
        if env.runtime_only:
            reasons.append(
                f"only TensorRT's runtime ({', '.join(env.runtime_only)}) is installed, which "
                f"runs engines but cannot build them; for the builder: {INSTALL}"
            )
        else:
            reasons.append(f"TensorRT is not installed (no module 'tensorrt'): {INSTALL}")
    elif env.import_error is not None:
        reasons.append(
            f"the 'tensorrt' module is installed but cannot be imported ({env.import_error}); "
            "reinstall it: pip install --force-reinstall tensorrt"
        )
    elif not env.has_builder:
        reasons.append(
            f"the installed 'tensorrt' module ({env.tensorrt_version}) is a runtime-only "
            f"build without trt.Builder, which cannot build engines; for the builder: {INSTALL}"
        )
    elif env.tensorrt_version is not None:
        major = _major(env.tensorrt_version)
        if major is None or not MIN_TENSORRT <= major <= MAX_TENSORRT:
            reasons.append(
                f"TensorRT {env.tensorrt_version} is installed; this backend supports "
                f"{SUPPORTED} only: pip install '{REQUIREMENT}'"
            )
    if not env.paddle_cuda:
        reasons.append(
            f"Paddle {env.paddle_version} is built without CUDA "
            "(paddle.is_compiled_with_cuda() is False), and TensorRT runs on Paddle's GPU "
            "tensors: install a CUDA build of Paddle (paddlepaddle-gpu)"
        )
    elif env.cuda_devices < 1:
        reasons.append(
            "Paddle sees no CUDA device (paddle.device.cuda.device_count() is 0): check the "
            "NVIDIA driver (nvidia-smi) and CUDA_VISIBLE_DEVICES"
        )
    if env.export_unavailable:
        # engines are built from the shared ONNX export
        reasons.append(env.export_unavailable)
    return "; ".join(reasons)


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _export_unavailable() -> str:
    from jit_core.kit.onnx import unavailable_reason as export_unavailable

    return export_unavailable()


def probe() -> Environment:
    """The facts of this process's environment."""
    import paddle

    paddle_cuda = bool(paddle.is_compiled_with_cuda())
    devices = 0
    if paddle_cuda:
        try:
            devices = int(paddle.device.cuda.device_count())
        except Exception:  # noqa: BLE001 - a broken driver counts as no device
            devices = 0
    found = _found("tensorrt")
    runtime_only = tuple(m for m in RUNTIME_ONLY_MODULES if _found(m))
    env = Environment(
        tensorrt_found=found,
        runtime_only=runtime_only,
        paddle_cuda=paddle_cuda,
        paddle_version=paddle.__version__,
        cuda_devices=devices,
        export_unavailable=_export_unavailable(),
    )
    if not found or devices < 1:
        # importing TensorRT loads its CUDA libraries: not worth it where nothing can run
        return env
    try:
        trt = importlib.import_module("tensorrt")
    except Exception as e:  # noqa: BLE001 - missing shared libraries raise OSError too
        return _replace(env, import_error=f"{type(e).__name__}: {e}")
    return _replace(
        env,
        tensorrt_version=str(getattr(trt, "__version__", "unknown")),
        has_builder=hasattr(trt, "Builder") and hasattr(trt, "OnnxParser"),
    )


def _replace(env: Environment, **changes) -> Environment:
    import dataclasses

    return dataclasses.replace(env, **changes)
