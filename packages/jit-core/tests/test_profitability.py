"""Profitability: an entry that runs slower than its frame's original code is dropped for
it after a bounded trial, the verdict comes back from the compile cache in a new process,
and every call of the trial gives eager's results."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import paddle
import pytest

import jit_core
from jit_core.runtime import profitability


class SlowBackend:
    """Runs the graph's own code, then waits: a backend that loses to eager."""

    def __init__(self, delay: float):
        self.delay = delay
        self.runs = 0

    @jit_core.hookimpl
    def jit_register_backends(self, register):
        def compile_fn(graph_module, example_inputs, **options):
            def run(*args):
                self.runs += 1
                time.sleep(self.delay)
                return graph_module.forward(*args)

            return run

        register("slow", compile_fn, description="the graph's code, then a wait")


@pytest.fixture
def slow(install_plugin, tmp_path, monkeypatch):
    monkeypatch.setenv("JIT_CORE_CACHE_DIR", str(tmp_path / "cache"))
    return install_plugin(SlowBackend(0.002), "slow-test")


#: calls that always settle a trial (its warm-up, then MAX_ROUNDS rounds)
TRIAL_CALLS = 2 * (profitability.WARMUP + profitability.MAX_ROUNDS) + 2


def f(x):
    return paddle.nn.functional.relu(x) * 2 + 1


def _notes(fast):
    return [e.backend_note or "" for c in fast._ctx.cache.values() for e in c.entries]


def _settle(fast, *args):
    calls = 0
    while not any("kept" in n for n in _notes(fast)):
        fast(*args)
        calls += 1
        assert calls <= TRIAL_CALLS, "the trial never settled"


def test_a_small_frame_slower_than_eager_runs_eagerly_for_good(slow):
    fast = jit_core.optimize(f, backend="slow", profitability=True)
    x = paddle.randn([4, 3])
    _settle(fast, x)
    (note,) = _notes(fast)
    assert note.startswith("kept eager: compiled ") and " us, eager " in note
    # the optimized object calls the original now: no guard, no graph
    assert type(type(fast).__dict__["__call__"]).__name__ == "_RunOriginal"
    runs = slow.runs
    for dtype in ("float32", "float64"):
        y = paddle.randn([4, 3], dtype=dtype)
        np.testing.assert_array_equal(fast(y).numpy(), f(y).numpy())
    assert slow.runs == runs and fast.jit_stats.compiled == 1
    (reason,) = fast.jit_stats.eager_frames.values()
    assert "runs eagerly for good (profitability)" in reason
    # explain() captures afresh, and applies the verdict the compile cache keeps
    assert "kept eager (from the compile cache)" in str(jit_core.explain(fast, x))
    # reset() forgets the verdict's effect
    fast.reset()
    assert "__call__" not in type(fast).__dict__


def big(x, w):
    for _ in range(4):
        x = paddle.tanh(x @ w)
    return x


def test_a_larger_frame_keeps_its_guard_and_recaptures_other_inputs(slow):
    slow.delay = 0.02
    fast = jit_core.optimize(big, backend="slow", profitability=True)
    x, w = paddle.randn([128, 256]), paddle.randn([256, 256]) / 16
    _settle(fast, x, w)
    (note,) = _notes(fast)
    assert note.startswith("kept eager: compiled "), note
    runs = slow.runs
    for _ in range(3):
        np.testing.assert_allclose(fast(x, w).numpy(), big(x, w).numpy(), rtol=1e-6)
    assert slow.runs == runs  # the calls its guard matches run the original
    # a call its guard does not match is captured again
    y = paddle.randn([64, 256])
    np.testing.assert_allclose(fast(y, w).numpy(), big(y, w).numpy(), rtol=1e-6)
    assert fast.jit_stats.captures == 2


def test_the_verdict_comes_back_from_the_compile_cache_in_a_new_process(tmp_path):
    script = textwrap.dedent(
        """
        import sys, time
        import paddle, jit_core
        from jit_core import plugins

        class Slow:
            runs = 0

            @jit_core.hookimpl
            def jit_register_backends(self, register):
                def compile_fn(gm, example_inputs, **options):
                    def run(*args):
                        Slow.runs += 1
                        time.sleep(0.002)
                        return gm.forward(*args)
                    return run
                register("slow", compile_fn)

        plugins.register_plugin(Slow(), name="slow")

        def f(x):
            return paddle.nn.functional.relu(x) * 2 + 1

        fast = jit_core.optimize(f, backend="slow", profitability=True)
        x = paddle.ones([4, 3])
        for _ in range(int(sys.argv[1])):
            fast(x)
        notes = [e.backend_note for c in fast._ctx.cache.values() for e in c.entries]
        print(Slow.runs, notes)
        """
    )
    env = dict(os.environ, JIT_CORE_CACHE_DIR=str(tmp_path / "cache"), PYTHONWARNINGS="ignore")

    def run(calls: int) -> str:
        out = subprocess.run(
            [sys.executable, "-c", script, str(calls)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip().splitlines()[-1]

    first = run(TRIAL_CALLS)
    assert "kept eager: compiled" in first and "from the compile cache" not in first
    again = run(10)
    # applied at the capture: the slow build never runs
    assert again.startswith("0 ") and "kept eager (from the compile cache)" in again


def test_off_by_default_except_under_auto():
    fast = jit_core.optimize(f)
    fast(paddle.randn([2, 3]))
    assert not fast._ctx.profitable and not fast._ctx.trials.pending
    auto = jit_core.optimize(f, backend="auto")
    assert auto._ctx.profitable
    with pytest.raises(TypeError, match="profitability must be None, True or False"):
        jit_core.optimize(f, profitability="yes")


def test_a_verdict_reads_like_the_numbers_it_holds():
    v = profitability.Verdict("eager", 12.14, 9.81, 8)
    assert v.describe() == "kept eager: compiled 12.1 us, eager 9.8 us a call (median of 8 each)"
    back = profitability.Verdict.from_bytes(v.to_bytes())
    assert back is not None and back.from_cache and back.kept == "eager"
    assert profitability.Verdict.from_bytes(b"not json") is None
    assert profitability.Verdict.from_bytes(b'{"kept": "maybe"}') is None
