"""Each new ONNX model is first loaded (and run once) by ONNX Runtime in a worker process.

ONNX Runtime can end the process it runs in: an uncaught C++ exception aborts it
(``std::length_error`` from ``vector::reserve`` on two public GraphNet samples), 1.19's
optimizer dies of SIGFPE on VGG11 with a dynamic batch. In the user's process that ends
the program, not just a graph. So a model this process has not loaded before goes to a
worker (``_load_child``) first: it loads it with the graph optimizations asked for, runs
it once on the capture's inputs, and writes the optimized model, which this process then
loads with optimizations off (so the optimizing is not paid twice). A worker that dies
becomes an ``OrtAborted`` error naming the signal and what ONNX Runtime printed; the
graph falls back like any that ONNX Runtime refuses, and the verdict is kept in the
compile cache so that the next process does not try again.

The worker is started when the backend compiles its first graph, while that graph is
exported, so that its start (about 0.1 s: ``import onnxruntime``) is not waited for.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import Dict, List, Optional

import numpy as np

from jit_core.workers import Worker, WorkerDied

#: feeds (inputs and parameters) up to this size go to the worker for its trial run; a
#: larger model is only loaded there (its run would cost writing every weight to disk)
TRIAL_RUN_MAX_BYTES = 256 << 20


#: the worker's code
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_load_child.py")


class OrtAborted(Exception):
    """ONNX Runtime ended the worker process while it loaded or ran a model."""

    def __init__(self, step: str, how: str):
        super().__init__(step, how)
        #: "loading" or "running"
        self.step = step
        #: the signal or exit code, and what ONNX Runtime printed
        self.how = how


class FirstLoads(Worker):
    """The worker process (``jit_core.workers``) and its requests: one model each."""

    #: how the worker is started: the module run as a file, so that it does not import
    #: this package, which imports Paddle (1.2 s, and its signal handlers); tests start a
    #: worker whose ONNX Runtime aborts
    argv: List[str] = [sys.executable, CHILD]

    def __init__(self):
        super().__init__(FirstLoads.argv, "ONNX Runtime first-load")

    @property
    def version(self) -> str:
        """ONNX Runtime's version in the worker (known once it has started)."""
        return self.info.get("version", "")

    def load(self, request: Dict) -> Dict:
        """Send one request; its reply. Raises ``OrtAborted`` where the worker died."""
        try:
            return self.request(request)
        except WorkerDied as e:
            raise OrtAborted("running" if e.step == "running" else "loading", e.how) from None


def scratch_dir(size: int) -> Optional[str]:
    """Where the files the worker reads and writes go: a memory file system where there is
    one with room for them (writing ResNet18's 45 MB model to a disk took up to 0.1 s of
    its 0.6 s first call), else the usual temporary directory (None)."""
    shm = "/dev/shm"
    try:
        room = os.statvfs(shm)
    except (AttributeError, OSError):  # no such directory, or not a POSIX system
        return None
    # the model, the one ONNX Runtime writes, and the feeds, with room to spare
    if room.f_bavail * room.f_frsize < 4 * size + (64 << 20) or not os.access(shm, os.W_OK):
        return None
    return shm


def trial_feeds(folder: str, placeholders: List[str], example_inputs, live: Dict) -> Optional[Dict]:
    """Write what a trial run feeds (every input and parameter the model may read, by
    name) to ``folder``; the request's fields, or None where they are too large."""
    import paddle

    named = []
    total = 0
    for name, value in list(zip(placeholders, example_inputs)) + list(live.items()):
        if not isinstance(value, paddle.Tensor):
            continue
        total += int(np.prod(value.shape, dtype=np.int64)) * value.element_size()
        if total > TRIAL_RUN_MAX_BYTES:
            return None
        named.append((name, value.detach().numpy()))
    path = os.path.join(folder, "feeds.npz")
    np.savez(path, **{f"a{i}": array for i, (_, array) in enumerate(named)})
    return {"feeds": path, "names": [name for name, _ in named]}


WORKER = FirstLoads()
atexit.register(WORKER.close)
