"""TVM's builds, and the first run of what they build, happen in a worker process, so that
a crash of TVM cannot end the program.

TVM's ONNX importer, ONNX's shape inference (which the importer and the folds before it
run) and LLVM can die of a signal on a graph: SIGFPE in shape inference on a vision
model with a dynamic batch, an LLVM assertion's abort. So can the kernels LLVM
generated, when they first run (a schedule that reads out of bounds segfaults). In the
user's process that ends the program; here it ends the worker, and ``build`` raises
``WorkerDeath`` (a ``TvmCompileError``) naming the step and the signal, so the graph
falls back like any other TVM refuses.

After the build the worker loads the library as this process then does (a Relax VM
over ``tvm.runtime.load_module``) and runs ``main`` once on what this process's check
runs it on: the capture's inputs (at the capture's sizes for a symbolic build) and the
live parameters, which this process writes beforehand, one ``.npy`` file each, to a
memory file system where there is room. Feeds larger than ``FIRST_RUN_MAX_BYTES``
(``DISK_FIRST_RUN_MAX_BYTES`` where they would go to a disk) are not written: the
worker only builds, and the first run is this process's. Later runs, at other sizes
too, are this process's: the library ran once without dying.

The worker is started when the backend exports its first graph (its imports, Paddle's
and TVM's, about 4.5 s, overlap the export) and kept for every later build; tuning's
progress lines are logged by this process as they come. The child's end is ``main``
below.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from jit_core.errors import StaticShapesOnly
from jit_core.workers import Worker, WorkerDied, child_argv, scratch_dir, serve

from .intrinsics import import_tensor_intrinsics
from .library import (
    COUNTS,
    SCOPE_NOISE,
    BuildSpec,
    TvmCompileError,
    build_library,
    first_line,
    without_stderr_lines,
)

log = logging.getLogger("jit_core.tvm")

WORKER = Worker(child_argv("jit_backend_tvm.build_worker:main"), "TVM build")
atexit.register(WORKER.close)

#: the step the worker announces as it runs the library it built
FIRST_RUN = "first run"
#: the feeds of the first run (inputs and live parameters) up to this size are written for
#: the worker to a memory file system; a larger graph only builds there, and its first run
#: is this process's
FIRST_RUN_MAX_BYTES = 1 << 30
#: the same where they would be written to a disk
DISK_FIRST_RUN_MAX_BYTES = 256 << 20
#: signals sent from outside (the kernel's OOM killer, a user): a worker that dies of one
#: says nothing of the graph
_FROM_OUTSIDE = ("SIGKILL", "SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")


class WorkerDeath(TvmCompileError):
    """The build worker died while it built a graph's library or first ran it."""

    def __init__(self, message: str, step: str, how: str):
        super().__init__(message)
        #: the step it died in (``FIRST_RUN``: running the library it had built)
        self.step = step
        #: the signal or exit code, and TVM's last words
        self.how = how

    @property
    def lasting(self) -> bool:
        """Whether the next process would meet it again on the same graph: a signal of the
        worker's own making (not one sent from outside, not a failed start)."""
        signal = re.match(r"it died of (SIG[A-Z0-9]+)", self.how)
        return bool(signal) and signal.group(1) not in _FROM_OUTSIDE and self.step != "its start"


#: errors the worker reports by name and this process raises again
_ERRORS = {"TvmCompileError": TvmCompileError, "StaticShapesOnly": StaticShapesOnly}


def build(
    model,
    shapes: Dict[str, List[Any]],
    dtypes: Dict[str, str],
    spec: BuildSpec,
    step: Callable[[str], None],
    feeds: Optional[Sequence[Any]] = None,
) -> Tuple[bytes, bool, Dict[str, int]]:
    """``library.build_library`` in the worker: the same results and errors, and
    ``WorkerDeath`` where the worker died. ``feeds``: the library's arguments in order
    (Paddle tensors or arrays: the capture's inputs and the live parameters), which the
    worker runs it on once before this process does; None, or more than the limits above,
    builds only."""
    data = model.SerializeToString()
    sizes = [_nbytes(t) for t in feeds or ()]
    scratch = scratch_dir(len(data) + sum(sizes))
    limit = FIRST_RUN_MAX_BYTES if scratch else DISK_FIRST_RUN_MAX_BYTES
    with tempfile.TemporaryDirectory(prefix="jit_tvm_", dir=scratch) as folder:
        path = os.path.join(folder, "model.onnx")
        out = os.path.join(folder, "graph.so")
        with open(path, "wb") as f:
            f.write(data)
        request = {
            "model": path,
            "shapes": shapes,
            "dtypes": dtypes,
            "spec": spec.to_json(),
            "out": out,
            "remote": _remote(),
        }
        if feeds is not None and sum(sizes) <= limit:
            request["feeds"] = _write_feeds(folder, feeds, list(dtypes.values()))
        elif feeds is not None:
            log.info(
                "%s: its inputs and parameters (%d MB) exceed the first run's limit in TVM's "
                "build worker: its first run is this process's",
                spec.label,
                sum(sizes) >> 20,
            )
        try:
            reply = WORKER.request(request)
        except WorkerDied as e:
            step(e.step)
            if e.step == FIRST_RUN:
                message = (
                    "TVM's build worker ended during the first run of the library it built, "
                    f"on the capture's inputs: {e.how}"
                )
            else:
                message = f"TVM's build worker ended during {e.step}: {e.how}"
            raise WorkerDeath(message, e.step, e.how) from None
        step(reply.get("failed_at", ""))
        if "error" in reply:
            raise _ERRORS.get(reply["error"], TvmCompileError)(reply["message"])
        if reply.get("run_error"):
            # raised again by this process's own run, which says it in its own words
            log.info(
                "%s: its first run in TVM's build worker raised %s", spec.label, reply["run_error"]
            )
        with open(out, "rb") as f:
            return f.read(), reply["complete"], reply["counts"]


def _nbytes(t) -> int:
    if hasattr(t, "nbytes"):
        return int(t.nbytes)
    n = t.element_size()
    for d in t.shape:
        n *= d
    return n


def _write_feeds(folder: str, feeds: Sequence[Any], dtypes: Sequence[str]) -> List[List[str]]:
    """One ``.npy`` file per argument in ``folder`` (the worker maps them); [path, dtype]
    each: the dtype is TVM's, where NumPy has none of its own (bfloat16 arrives as
    uint16)."""
    import numpy as np

    written = []
    for i, (value, dtype) in enumerate(zip(feeds, dtypes)):
        if not isinstance(value, np.ndarray):
            # a view where DLPack allows it: a copy by .numpy() was half the cost here
            try:
                value = np.from_dlpack(value.detach())
            except Exception:  # noqa: BLE001 - a dtype NumPy lacks (bfloat16), old Paddle
                value = value.detach().numpy()
        path = os.path.join(folder, f"a{i}.npy")
        np.save(path, np.ascontiguousarray(value))
        written.append([path, dtype])
    return written


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
        ran = _first_run(request["out"], request["feeds"], at) if "feeds" in request else {}
    except Exception as e:  # noqa: BLE001 - reported to the parent, which raises it
        name = type(e).__name__
        message = str(e) if name in _ERRORS else f"{name}: {e}"
        return {"error": name, "message": message, "failed_at": last[0]}
    return {"complete": complete, "counts": {k: counts.get(k, 0) for k in COUNTS}, **ran}


def _first_run(library: str, feeds: List[List[str]], step: Callable[[str], None]) -> Dict:
    """Load ``library`` as the parent does and run its ``main`` once on ``feeds``. An
    exception is not the graph's verdict: the parent's own load and run meet it again and
    say it in their words."""
    import tvm
    from tvm import relax

    try:
        step("loading the library")
        with without_stderr_lines(SCOPE_NOISE):
            vm = relax.VirtualMachine(tvm.runtime.load_module(library), tvm.cpu())
        main = vm["main"]
        args = [_mapped(path, dtype) for path, dtype in feeds]
        step(FIRST_RUN)
        main(*args)
    except Exception as e:  # noqa: BLE001 - see above
        return {"ran": False, "run_error": f"{type(e).__name__}: {first_line(e)[:300]}"}
    return {"ran": True}


def _mapped(path: str, dtype: str):
    """The array in ``path`` as a TVM tensor of ``dtype``: over the file's pages where
    DLPack allows (copy-on-write, should a kernel write to an input), else a copy."""
    import numpy as np
    import tvm

    array = np.load(path, mmap_mode="c")
    if array.dtype.name == dtype:
        try:
            return tvm.runtime.from_dlpack(array)
        except Exception:  # noqa: BLE001 - TVM's alignment or layout rules: copy instead
            pass
    return tvm.runtime.empty(array.shape, dtype).copyfrom(array)


def main() -> None:
    import onnx  # noqa: F401 - imported before the first request, like TVM's importer
    import tvm
    from tvm.relax.frontend import onnx as _  # noqa: F401

    import_tensor_intrinsics()
    serve(_handle, {"tvm": tvm.__version__})
