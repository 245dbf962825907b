"""Profitability (``optimize(..., profitability=True)``, ``auto``'s default) on every
backend: while a new entry is timed against its frame's original code, the calls run
each by turns, and every one gives eager's results, random stream and side effects;
the trial ends with a verdict ``explain()`` shows."""

from __future__ import annotations

import numpy as np
import paddle

import jit_core
from jit_core.runtime import profitability

#: calls that always settle a trial
TRIAL_CALLS = 2 * (profitability.WARMUP + profitability.MAX_ROUNDS) + 2


class Box:
    calls = 0


def noisy(x, box):
    box.calls += 1
    y = paddle.nn.functional.dropout(x * 2, p=0.5, training=True)
    return y + paddle.rand(x.shape)


def plain(x):
    return paddle.nn.functional.relu(x) * 2 + x.mean()


def test_every_call_of_a_trial_gives_eagers_results_and_effects(backend):
    fast = jit_core.optimize(noisy, backend=backend, profitability=True)
    x = paddle.randn([8, 4])
    box_e, box_j = Box(), Box()
    for call in range(TRIAL_CALLS):
        paddle.seed(call)
        want = noisy(x, box_e)
        after_e = paddle.rand([3]).numpy()
        paddle.seed(call)
        got = fast(x, box_j)
        after_j = paddle.rand([3]).numpy()
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(after_j, after_e)
    assert box_j.calls == box_e.calls == TRIAL_CALLS
    assert fast.jit_stats.on_trial == 0


def test_a_trial_ends_with_a_verdict_explain_shows(backend, tmp_path, monkeypatch):
    monkeypatch.setenv("JIT_CORE_CACHE_DIR", str(tmp_path / "cache"))
    fast = jit_core.optimize(plain, backend=backend, profitability=True)
    x = paddle.randn([16, 8])
    with paddle.no_grad():
        for _ in range(TRIAL_CALLS):
            np.testing.assert_allclose(fast(x).numpy(), plain(x).numpy(), rtol=1e-5, atol=1e-6)
        assert fast.jit_stats.on_trial == 0
        report = str(jit_core.explain(fast, x))
    # kept compiled or eager, whichever was faster here: either way, said with the times
    assert "kept compiled (from the compile cache): compiled" in report or (
        "kept eager (from the compile cache): compiled" in report
    ), report
