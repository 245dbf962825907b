"""TensorRT's engine builds run in a worker process, so that a crash of TensorRT cannot
end the program.

TensorRT's ONNX parser and builder are native code that can abort on a graph (an
assertion, an uncaught C++ exception), which in the user's process ends the program.
Here it ends the worker, and ``build`` raises ``TensorRTError`` naming the step and the
signal; the graph falls back like any other TensorRT refuses. The worker, started at
the first build and kept, makes a CUDA context of its own; the engine comes back as
bytes, which this process deserializes as it would one from the compile cache.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import tempfile
from typing import Any, Callable, Dict, Optional, Tuple

from jit_core.workers import Worker, WorkerDied, child_argv, serve

from .lowering import TensorRTError
from .options import BuilderSettings
from .profiles import Profile

WORKER = Worker(child_argv("jit_backend_tensorrt.build_worker:main"), "TensorRT build")
atexit.register(WORKER.close)


def build(
    trt,
    onnx_model: bytes,
    settings: BuilderSettings,
    profile: Profile,
    timing_cache: Optional[bytes] = None,
) -> Tuple[bytes, Optional[bytes]]:
    """``lowering.build_engine`` in the worker (``trt`` is the worker's own import):
    the same results and errors, and ``TensorRTError`` where the worker died."""
    with tempfile.TemporaryDirectory(prefix="jit_trt_") as folder:
        paths = {
            name: os.path.join(folder, name)
            for name in ("model.onnx", "timings.in", "engine", "timings.out")
        }
        _write(paths["model.onnx"], onnx_model)
        _write(paths["timings.in"], timing_cache)
        request = {
            "paths": paths,
            "timings": timing_cache is not None,
            "settings": dataclasses.asdict(settings),
            "profile": {name: [list(s) for s in shapes] for name, shapes in profile.items()},
        }
        try:
            reply = WORKER.request(request)
        except WorkerDied as e:
            raise TensorRTError(f"TensorRT's build worker ended during {e.step}: {e.how}") from None
        if "error" in reply:
            raise TensorRTError(reply["error"])
        return _read(paths["engine"], True), _read(paths["timings.out"], reply["timings"])


def _write(path: str, data: Optional[bytes]) -> None:
    if data is not None:
        with open(path, "wb") as f:
            f.write(data)


def _read(path: str, present: bool) -> Optional[bytes]:
    if not present:
        return None
    with open(path, "rb") as f:
        return f.read()


# -- the child's end --


def _handle(request: Dict[str, Any], step: Callable[[str], None]) -> Dict[str, Any]:
    import tensorrt as trt

    from .lowering import build_engine

    paths = request["paths"]
    model = _read(paths["model.onnx"], True)
    timings = _read(paths["timings.in"], request["timings"])
    settings = BuilderSettings(**request["settings"])
    profile = {name: tuple(tuple(s) for s in shapes) for name, shapes in request["profile"].items()}
    step("the engine build")
    try:
        engine, new_timings = build_engine(trt, model, settings, profile, timings)
    except TensorRTError as e:
        return {"error": str(e)}
    except Exception as e:  # noqa: BLE001 - raised again in the parent as TensorRTError
        return {"error": f"TensorRT's builder raised {type(e).__name__}: {e}"}
    _write(paths["engine"], engine)
    _write(paths["timings.out"], new_timings)
    return {"timings": new_timings is not None}


def main() -> None:
    import tensorrt  # noqa: F401 - before the ready line: the first build does not wait

    serve(_handle, {})
