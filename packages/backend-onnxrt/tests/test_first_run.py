"""ONNX Runtime dying on a model's first run costs the graph, never the process.

Each scenario runs in a process of its own, whose ONNX Runtime (and its first-load
worker's) aborts on some runs as an uncaught C++ exception does: the test's own process
would otherwise die with it. The process must survive, the error name the backend, the
signal and the node ONNX Runtime named, and ``fallback=True`` (and ``backend="auto"``) run
the graph on Paddle with Paddle's results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from jit_backend_onnxrt import plugin

from jit_core.workers import how_it_ended

WHY_NOT = plugin.unavailable_reason()
pytestmark = [
    pytest.mark.skipif(bool(WHY_NOT), reason=f"the onnxrt backend cannot run here: {WHY_NOT}"),
    # each scenario starts Python processes that import Paddle and ONNX Runtime; how a
    # worker's death is told and survived is the same on every Python
    pytest.mark.one_python,
]

#: an ONNX Runtime whose ``run`` aborts where ``ORT_ABORT_MODE`` says, with what ONNX
#: Runtime prints when a kernel's C++ exception escapes: every run ("every-run"), runs of
#: a session loaded with optimizations off ("unoptimized": the optimized model, as the
#: backend loads it), runs fed an input of shape [4, 8] ("batch-4"), runs of a session whose input
#: has the fixed shape [5, 8] ("fixed-batch-5")
ABORTING_RUNTIME = r"""
import os, sys
import onnxruntime

_Real = onnxruntime.InferenceSession
_MODE = os.environ.get("ORT_ABORT_MODE", "")


def _abort():
    sys.stderr.write(
        "[E:onnxruntime:, sequential_executor.cc:516 ExecuteKernel] Non-zero status code "
        "returned while running Gather node. Name:'gather_7' Status Message: bad index\n"
        "terminate called after throwing an instance of 'std::length_error'\n"
        "  what():  vector::reserve\n"
    )
    sys.stderr.flush()
    os.abort()


class _Session(_Real):
    def _dies(self, feeds):
        if _MODE == "every-run":
            return True
        if _MODE == "unoptimized":
            level = self.get_session_options().graph_optimization_level
            return level == onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        if _MODE == "batch-4":
            return any(list(getattr(v, "shape", ())) == [4, 8] for v in feeds.values())
        if _MODE == "fixed-batch-5":
            return self.get_inputs()[0].shape == [5, 8]
        return False

    def run(self, output_names, input_feed, run_options=None):
        if self._dies(input_feed):
            _abort()
        return _Real.run(self, output_names, input_feed, run_options)

    def run_with_iobinding(self, iobinding, run_options=None):
        if _MODE in ("every-run", "unoptimized", "fixed-batch-5") and self._dies({}):
            _abort()
        return _Real.run_with_iobinding(self, iobinding, run_options)


onnxruntime.InferenceSession = _Session
"""

#: the first-load worker, with that runtime
WORKER = ABORTING_RUNTIME + "\nimport runpy\nrunpy.run_path(sys.argv[1], run_name='__main__')\n"

#: what each scenario's process starts with: that runtime here and in the worker, a small
#: net, and ``report``, which prints the scenario's findings as its last line
PRELUDE = (
    ABORTING_RUNTIME
    + r"""
import json, warnings
import numpy as np
import paddle
import jit_core
from jit_backend_onnxrt import backend, first_load
from jit_core.errors import BackendCompileError

first_load.WORKER.argv = [sys.executable, "-c", os.environ["WORKER_CODE"], first_load.CHILD]


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
    """Run ``body`` after ``PRELUDE`` in a new process whose ONNX Runtime aborts as
    ``mode`` says; what it reported. Fails where the process died."""
    env = dict(
        os.environ,
        ORT_ABORT_MODE=mode,
        WORKER_CODE=WORKER,
        JIT_CORE_CACHE_DIR=str(tmp_path / "cache"),
        GLOG_minloglevel="2",
        PYTHONWARNINGS="ignore",
    )
    script = PRELUDE + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
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
            message = error_of(jit_core.optimize(net, backend="onnxrt"), x)
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                fast = jit_core.optimize(net, backend="onnxrt", fallback=True)
                same(fast(x), x)
                same(fast(x), x)
            (graph,) = jit_core.explain(fast, x).graphs
            auto = jit_core.optimize(net, backend="auto")
            same(auto(x), x)
            (chosen,) = jit_core.explain(auto, x).graphs
            # the verdict is kept with the model: no export, no worker, the same error
            first_load.WORKER.argv = [sys.executable, "-c", "raise SystemExit(3)"]
            exports = backend.stats["exports"]
            again = error_of(jit_core.optimize(net, backend="onnxrt"), x)
        report(
            message=message,
            warned=[str(w.message) for w in said],
            backend=graph.backend,
            auto=chosen.backend,
            again=again,
            exported=backend.stats["exports"] - exports,
        )
        """,
    )
    message = found["message"]
    assert message.startswith("backend 'onnxrt' failed to compile the graph")
    assert "died running the exported graph on the capture's inputs in a worker" in message
    assert "SIGABRT" in message and "what():  vector::reserve" in message
    assert "the last node it named: 'gather_7' (Gather)" in message
    assert "fallback=True" in message
    assert any("SIGABRT" in w and "runs on the paddle backend" in w for w in found["warned"])
    assert found["backend"].startswith("paddle (runs on the paddle backend: backend 'onnxrt'")
    assert not found["auto"].startswith("onnxrt")
    assert "the verdict of an earlier process" in found["again"]
    assert "died running the exported graph" in found["again"]
    assert found["exported"] == 0


def test_the_run_in_the_worker_is_the_run_of_the_model_this_process_loads(tmp_path):
    # this process loads the optimized model with optimizations off: a run that dies
    # only there must die in the worker first
    found = run_scenario(
        tmp_path,
        "unoptimized",
        """
        x = paddle.randn([3, 8])
        with paddle.no_grad():
            message = error_of(jit_core.optimize(net, backend="onnxrt"), x)
            fast = jit_core.optimize(net, backend="onnxrt", fallback=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                same(fast(x), x)
        report(message=message)
        """,
    )
    assert "died running the exported graph on the capture's inputs" in found["message"]
    assert "SIGABRT" in found["message"]


def test_an_abort_at_another_size_builds_per_shape(tmp_path):
    # a model with a dynamic batch is checked at a batch one larger than the capture's:
    # that run is the worker's too, and one that dies there makes the graph build per
    # input shape, each of which the worker runs first
    found = run_scenario(
        tmp_path,
        "batch-4",
        """
        from jit_core.kit.shape_dispatch import PerShape

        fast = jit_core.optimize(net, backend="onnxrt")
        with paddle.no_grad():
            for batch in (2, 3, 3):
                x = paddle.randn([batch, 8])
                same(fast(x), x)
            per_shape = [e.built for c in fast._ctx.cache.values() for e in c.entries][-1]
            described = per_shape.describe() if isinstance(per_shape, PerShape) else ""
            x = paddle.randn([4, 8])
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                same(fast(x), x)  # its build dies in the worker: Paddle's kernels
        report(
            per_shape=isinstance(per_shape, PerShape),
            described=described,
            warned=[str(w.message) for w in said],
        )
        """,
    )
    assert found["per_shape"]
    assert "died running the exported graph at another input size" in found["described"]
    assert "[[4, 8]]" in found["described"]
    (warned,) = [w for w in found["warned"] if "could not build" in w]
    assert "input shapes [(4, 8)]" in warned and "they run on Paddle's kernels" in warned
    assert "died running the exported graph on the capture's inputs" in warned


def test_a_session_of_fixed_shapes_that_dies_keeps_the_dynamic_one(tmp_path):
    found = run_scenario(
        tmp_path,
        "fixed-batch-5",
        """
        fast = jit_core.optimize(net, backend="onnxrt")
        with paddle.no_grad():
            for batch in (2, 3, 5, 5, 5, 5, 5):
                x = paddle.randn([batch, 8])
                same(fast(x), x)
            built = [e.built for c in fast._ctx.cache.values() for e in c.entries][-1]
        report(fixed={str(k): v is not None for k, v in built.specializer.graphs.items()})
        """,
    )
    assert found["fixed"] == {"((5, 8),)": False}


def test_a_load_here_that_fails_while_the_worker_runs_leaves_the_worker_in_step(monkeypatch):
    # this process loads its session while the worker runs the model: an error there is
    # raised once the worker has answered, and the next model's request reads its own
    # reply
    import numpy as np
    import paddle
    from jit_backend_onnxrt import backend

    import jit_core
    from jit_core.errors import BackendCompileError

    real = backend._session
    calls = []

    def session(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise backend.OnnxRuntimeError("refused here")
        return real(*args, **kwargs)

    monkeypatch.setattr(backend, "_session", session)
    x = paddle.rand([3, 5])
    with paddle.no_grad():
        with pytest.raises(BackendCompileError, match="refused here"):
            jit_core.optimize(lambda t: paddle.tanh(t) * 3, backend="onnxrt", cache=False)(x)
        got = jit_core.optimize(lambda t: paddle.sin(t) - 1, backend="onnxrt", cache=False)(x)
    np.testing.assert_allclose(got.numpy(), (paddle.sin(x) - 1).numpy(), rtol=1e-6)
    assert len(calls) == 2
