"""A TVM-built library dying on its first run costs the graph, never the process.

Each scenario runs in a process of its own, whose TVM (and its build worker's) has a
Relax VM whose ``main`` aborts on some runs, as a kernel that LLVM generated from a bad
schedule can: the test's own process would otherwise die with it. The process must
survive, the error name the backend, the step and the signal, and ``fallback=True`` run
the graph on Paddle with Paddle's results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import paddle
import pytest
from jit_backend_tvm import plugin

import jit_core
from jit_core.workers import how_it_ended

WHY_NOT = plugin.unavailable_reason()
pytestmark = [
    pytest.mark.skipif(bool(WHY_NOT), reason=f"the tvm backend cannot run here: {WHY_NOT}"),
    # each scenario starts Python processes that import Paddle and TVM and build: minutes
    pytest.mark.one_python,
]

#: a TVM whose Relax VM's ``main`` aborts where ``TVM_ABORT_MODE`` says, after what a
#: crashing kernel prints: on every run ("every-run"), on runs fed an input of shape
#: [3, 8] ("batch-3")
ABORTING_TVM = r"""
import os, sys
from tvm import relax

_Real = relax.VirtualMachine
_MODE = os.environ.get("TVM_ABORT_MODE", "")


def _dies(args):
    if _MODE == "every-run":
        return True
    if _MODE == "batch-3":
        return any(tuple(getattr(a, "shape", ())) == (3, 8) for a in args)
    return False


class _VM(_Real):
    def __getitem__(self, name):
        found = _Real.__getitem__(self, name)
        if name != "main":
            return found

        def main(*args):
            if _dies(args):
                sys.stderr.write("fused_matmul_add: a fault of the test's making\n")
                sys.stderr.flush()
                os.abort()
            return found(*args)

        return main


relax.VirtualMachine = _VM
"""

#: the build worker, with that TVM
WORKER = (
    ABORTING_TVM
    + """
import runpy
sys.argv = ["jit_core.workers", sys.argv[1]]
runpy.run_module("jit_core.workers", run_name="__main__")
"""
)

#: what each scenario's process starts with: that TVM here and in the worker, a small net,
#: and ``report``, which prints the scenario's findings as its last line
PRELUDE = (
    ABORTING_TVM
    + r"""
import json, warnings
import numpy as np
import paddle
import jit_core
from jit_backend_tvm import build_worker, stats
from jit_core.errors import BackendCompileError

build_worker.WORKER.argv = [
    sys.executable, "-c", os.environ["WORKER_CODE"], build_worker.WORKER.argv[-1]
]


class Net(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(8, 16)
        self.out = paddle.nn.Linear(16, 4)

    def forward(self, x):
        return self.out(paddle.nn.functional.relu(self.fc(x)))


paddle.seed(5)
net = Net()
net.eval()


def same(got, x):
    np.testing.assert_allclose(got.numpy(), net(x).numpy(), rtol=1e-4, atol=1e-5)


def error_of(fast, *args):
    try:
        fast(*args)
    except BackendCompileError as e:
        return str(e)
    raise AssertionError("no BackendCompileError")


def report(**found):
    print(json.dumps(found))
"""
)


def run_scenario(tmp_path, mode: str, body: str) -> dict:
    """Run ``body`` after ``PRELUDE`` in a new process whose TVM aborts as ``mode`` says;
    what it reported. Fails where the process died."""
    env = dict(
        os.environ,
        TVM_ABORT_MODE=mode,
        WORKER_CODE=WORKER,
        JIT_CORE_CACHE_DIR=str(tmp_path / "cache"),
        JIT_TVM_TUNE="off",
        GLOG_minloglevel="2",
        PYTHONWARNINGS="ignore",
    )
    script = PRELUDE + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    if proc.returncode:
        how = how_it_ended(proc.returncode)
        pytest.fail(f"the user's process ended ({how}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_an_abort_on_the_first_run_is_an_error_and_a_fallback(tmp_path):
    found = run_scenario(
        tmp_path,
        "every-run",
        """
        x = paddle.randn([2, 8])
        with paddle.no_grad():
            message = error_of(jit_core.optimize(net, backend="tvm"), x)
            # the verdict is kept with the graph: no build, the same error (a worker that
            # is started now cannot build: it exits)
            build_worker.WORKER.close()
            argv = build_worker.WORKER.argv
            build_worker.WORKER.argv = [sys.executable, "-c", "raise SystemExit(3)"]
            again = error_of(jit_core.optimize(net, backend="tvm"), x)
            build_worker.WORKER.argv = argv
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                fast = jit_core.optimize(net, backend="tvm", fallback=True, cache=False)
                same(fast(x), x)
                same(fast(x), x)
            fallbacks = stats["fallbacks"]
            (graph,) = jit_core.explain(fast, x).graphs
        report(
            message=message,
            again=again,
            warned=[str(w.message) for w in said],
            backend=graph.backend,
            fallbacks=fallbacks,
        )
        """,
    )
    message = found["message"]
    assert message.startswith("backend 'tvm' failed to compile the graph")
    assert "TVM's build worker ended during the first run of the library it built" in message
    assert "on the capture's inputs: it died of SIGABRT" in message
    assert "fused_matmul_add: a fault of the test's making" in message
    assert "the verdict of an earlier process" in found["again"]
    assert "died of SIGABRT" in found["again"] and "its start" not in found["again"]
    assert any("SIGABRT" in w and "runs on the paddle backend" in w for w in found["warned"])
    assert found["backend"].startswith("paddle (runs on the paddle backend: backend 'tvm'")
    assert found["fallbacks"] == 1


def test_a_symbolic_build_runs_first_at_the_captured_sizes(tmp_path):
    # the second shape makes the batch dynamic: the symbolic library dies on its first
    # run, at the capture's batch of 3, in the worker; so does the build for that shape,
    # and that shape runs on Paddle. Batch 2's library still serves batch 2.
    found = run_scenario(
        tmp_path,
        "batch-3",
        """
        fast = jit_core.optimize(net, backend="tvm", symbolic=True, fallback=True)
        with paddle.no_grad():
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                for batch in (2, 3, 3, 2):
                    x = paddle.randn([batch, 8])
                    same(fast(x), x)
        report(
            warned=[str(w.message) for w in said],
            symbolic_failures=stats["symbolic_failures"],
            explained=[g.backend for g in jit_core.explain(fast, paddle.randn([3, 8])).graphs],
        )
        """,
    )
    assert found["symbolic_failures"] == 1
    assert any(
        "first run of the library it built" in w and "SIGABRT" in w for w in found["warned"]
    ), found["warned"]


def test_the_worker_runs_what_it_built_unless_the_feeds_are_too_large(monkeypatch):
    from jit_backend_tvm import build_worker

    requests = []
    real = build_worker.WORKER.request

    def request(req, *args, **kwargs):
        reply = real(req, *args, **kwargs)
        requests.append((req, reply))
        return reply

    monkeypatch.setattr(build_worker.WORKER, "request", request)
    x, w = paddle.rand([4, 8]), paddle.rand([8, 4])
    with paddle.no_grad():
        fast = jit_core.optimize(lambda a, b: a @ b + 1, backend="tvm", tune="off", cache=False)
        np.testing.assert_allclose(fast(x, w).numpy(), (x @ w + 1).numpy(), rtol=1e-5)
        ((req, reply),) = requests
        assert [dtype for _, dtype in req["feeds"]] == ["float32", "float32"]
        assert reply["ran"] is True
        # past the limit only the build happens there, and the first run is this process's
        monkeypatch.setattr(build_worker, "FIRST_RUN_MAX_BYTES", 16)
        monkeypatch.setattr(build_worker, "DISK_FIRST_RUN_MAX_BYTES", 16)
        fast = jit_core.optimize(lambda a, b: a @ b - 1, backend="tvm", tune="off", cache=False)
        np.testing.assert_allclose(fast(x, w).numpy(), (x @ w - 1).numpy(), rtol=1e-5)
        req, reply = requests[1]
        assert "feeds" not in req and "ran" not in reply
