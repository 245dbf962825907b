"""Each new ONNX model is first loaded and run by ONNX Runtime in a worker process.

ONNX Runtime can end the process it runs in: an uncaught C++ exception aborts it
(``std::length_error`` from ``vector::reserve`` on two public GraphNet samples), 1.19's
optimizer dies of SIGFPE on VGG11 with a dynamic batch. In the user's process that ends
the program, not just a graph. So a model this process has not loaded before goes to a
worker (``_load_child``) first: it loads it with the graph optimizations asked for, which
writes the optimized model, loads that as this process then does (optimizations off, so
that the optimizing is not paid twice), and runs it on the inputs this process will run
it on while it builds: the capture's, and for a model with dynamic dimensions the other
sizes it is checked at. This process loads its own session while the worker runs. A
worker that dies becomes an ``OrtAborted`` error naming the signal, what ONNX Runtime
printed and the node it names, if it names one; the graph falls back like any that ONNX
Runtime refuses, and the verdict is kept in the compile cache so that the next process
does not try again.

Later calls, at the shapes run here or at new ones, run in this process: a run at each
new shape would cost writing every parameter to the worker, on every call of a model
whose sizes keep changing (a growing KV cache).

The worker is started when the backend compiles its first graph, while that graph is
exported, so that its start (about 0.1 s: ``import onnxruntime``) is not waited for.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from jit_core.workers import Worker, WorkerDied

#: feeds (inputs and parameters) up to this size go to the worker for its trial runs, where
#: they are written to a memory file system (about 0.4 ms a MB); a larger model is only
#: loaded there, and its first run is this process's
TRIAL_RUN_MAX_BYTES = 1 << 30
#: the same where they would be written to a disk
DISK_TRIAL_RUN_MAX_BYTES = 256 << 20


#: the worker's code
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_load_child.py")


class OrtAborted(Exception):
    """ONNX Runtime ended the worker process while it loaded or ran a model."""

    def __init__(self, step: str, how: str, stderr: str = "", run: Optional[int] = None):
        super().__init__(step, how)
        #: "loading" or "running"
        self.step = step
        #: the signal or exit code, and what ONNX Runtime printed
        self.how = how
        #: the end of what the worker printed
        self.stderr = stderr
        #: which of the request's runs it died in (0: the capture's inputs)
        self.run = run

    @property
    def node(self) -> str:
        """The node ONNX Runtime named in what it printed before it died, or ""."""
        return named_node(self.stderr)


def named_node(text: str) -> str:
    """The last node ONNX Runtime names in ``text`` (its log lines and error messages
    name a node as "running Gather node. Name:'x'" or "Node (x) Op (Gather)"), as
    "'x' (Gather)"; "" where it names none."""
    found = ""
    for match in re.finditer(
        r"running (\S+) node\. Name:'([^']*)'|Node \(([^)]*)\) Op \(([^)]*)\)", text
    ):
        if match.group(2) is not None:
            found = f"'{match.group(2)}' ({match.group(1)})"
        else:
            found = f"'{match.group(3)}' ({match.group(4)})"
    return found


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

    def load(self, request: Dict, on_run: Optional[Callable[[], None]] = None) -> Dict:
        """Send one request; its reply. ``on_run()`` is called as the worker starts its
        first run (the model loaded). Raises ``OrtAborted`` where the worker died."""
        started = []

        def step(name: str) -> None:
            if name.startswith("running") and not started and on_run is not None:
                started.append(True)
                on_run()

        try:
            return self.request(request, step)
        except WorkerDied as e:
            if e.step.startswith("running"):
                run = int(e.step.split()[-1]) if e.step.split()[-1].isdigit() else 0
                raise OrtAborted("running", e.how, e.stderr, run) from None
            raise OrtAborted("loading", e.how, e.stderr) from None


def feed_bytes(runs: Sequence[Sequence[Tuple[str, Any]]], live: Dict) -> List[int]:
    """The bytes of the parameters, then of each run's inputs (Paddle tensors or arrays)."""

    def size(value) -> int:
        if isinstance(value, np.ndarray):
            return value.nbytes
        return int(np.prod(value.shape, dtype=np.int64)) * value.element_size()

    return [sum(size(v) for v in live.values())] + [sum(size(v) for _, v in r) for r in runs]


def trial_feeds(
    folder: str, runs: Sequence[Sequence[Tuple[str, Any]]], live: Dict, limit: int
) -> Optional[Dict]:
    """Write what the worker's trial runs feed to ``folder``, one ``.npy`` file per array
    (the worker maps them, where reading an ``.npz`` copied ResNet18's 45 MB of
    parameters in 80 ms): the parameters the model reads, by name, and each run's inputs
    (name, Paddle tensor or array). The request's fields; runs past ``limit`` bytes in
    all are left out, and None where even the first is."""
    import paddle

    sizes = feed_bytes(runs, live)
    total = sizes[0]
    kept = 0
    for size in sizes[1:]:
        if total + size > limit:
            break
        total += size
        kept += 1
    if not kept:
        return None
    files = iter(range(1 << 30))

    def write(value) -> str:
        path = os.path.join(folder, f"a{next(files)}.npy")
        if isinstance(value, paddle.Tensor):
            value = value.detach().numpy()
        np.save(path, np.ascontiguousarray(value))
        return path

    def tensors(pairs):
        return [
            [name, write(value)]
            for name, value in pairs
            if isinstance(value, (paddle.Tensor, np.ndarray))
        ]

    return {"params": tensors(live.items()), "runs": [tensors(r) for r in runs[:kept]]}


WORKER = FirstLoads()
atexit.register(WORKER.close)
