"""TVM's builds run in a worker process, so that a crash of TVM cannot end the program.

TVM's ONNX importer, ONNX's shape inference (which the importer and the folds before it
run) and LLVM can die of a signal on a graph: SIGFPE in shape inference on a vision
model with a dynamic batch, an LLVM assertion's abort. In the user's process that ends
the program; here it ends the worker, and ``build`` raises ``TvmCompileError`` naming the
step and the signal, so the graph falls back like any other TVM refuses. The worker is
started when the backend exports its first graph (its imports, Paddle's and TVM's, about
4.5 s, overlap the export) and kept for every later build; tuning's progress lines are
logged by this process as they come. The child's end is ``main`` below.
"""

from __future__ import annotations

import atexit
import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Tuple

from jit_core.errors import StaticShapesOnly
from jit_core.workers import Worker, WorkerDied, child_argv, serve

from .library import COUNTS, BuildSpec, TvmCompileError, build_library

WORKER = Worker(child_argv("jit_backend_tvm.build_worker:main"), "TVM build")
atexit.register(WORKER.close)

#: errors the worker reports by name and this process raises again
_ERRORS = {"TvmCompileError": TvmCompileError, "StaticShapesOnly": StaticShapesOnly}


def build(
    model,
    shapes: Dict[str, List[Any]],
    dtypes: Dict[str, str],
    spec: BuildSpec,
    step: Callable[[str], None],
) -> Tuple[bytes, bool, Dict[str, int]]:
    """``library.build_library`` in the worker: the same results and errors, and
    ``TvmCompileError`` where the worker died."""
    with tempfile.TemporaryDirectory(prefix="jit_tvm_") as folder:
        path = os.path.join(folder, "model.onnx")
        out = os.path.join(folder, "graph.so")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        request = {
            "model": path,
            "shapes": shapes,
            "dtypes": dtypes,
            "spec": spec.to_json(),
            "out": out,
            "remote": _remote(),
        }
        try:
            reply = WORKER.request(request)
        except WorkerDied as e:
            step(e.step)
            raise TvmCompileError(f"TVM's build worker ended during {e.step}: {e.how}") from None
        step(reply.get("failed_at", ""))
        if "error" in reply:
            raise _ERRORS.get(reply["error"], TvmCompileError)(reply["message"])
        with open(out, "rb") as f:
            return f.read(), reply["complete"], reply["counts"]


def _remote() -> Optional[List[Any]]:
    """This process's remote cache tier, as the worker sets it (tuning records are pooled
    through it): the worker does not see a ``set_remote_cache`` call made here."""
    from jit_core.cache.remote import remote_tier

    tier = remote_tier()
    return None if tier is None else [tier.url, tier.trust_unsigned]


# -- the child's end --

#: the remote tier the worker was last told of
_remote_set: List[Any] = ["unset"]


def _handle(request: Dict[str, Any], step: Callable[[str], None]) -> Dict[str, Any]:
    import onnx

    last = [""]

    def at(name: str) -> None:
        last[0] = name
        step(name)

    try:
        if request["remote"] != _remote_set[0]:
            from jit_core.cache.remote import set_remote_cache

            url, trust = request["remote"] or (None, None)
            set_remote_cache(url, trust_unsigned=trust)
            _remote_set[0] = request["remote"]
        model = onnx.load(request["model"])
        spec = BuildSpec(**request["spec"])
        library, complete, counts = build_library(
            model, request["shapes"], request["dtypes"], spec, at
        )
        with open(request["out"], "wb") as f:
            f.write(library)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which raises it
        name = type(e).__name__
        message = str(e) if name in _ERRORS else f"{name}: {e}"
        return {"error": name, "message": message, "failed_at": last[0]}
    return {"complete": complete, "counts": {k: counts.get(k, 0) for k in COUNTS}}


def main() -> None:
    import onnx  # noqa: F401 - imported before the first request, like TVM's importer
    import tvm
    from tvm.relax.frontend import onnx as _  # noqa: F401

    serve(_handle, {"tvm": tvm.__version__})
