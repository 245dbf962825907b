"""Threads: optimized callables called from many threads at once.

One optimized model shared by 8 threads whose first calls race (one cache, one capture
per guard set), and a model per thread; results always those of eager Paddle, every
thread finishes. The frame hook is per thread: a thread that did not call the optimized
callable runs its code eagerly, even while another thread is inside a call.
"""

from __future__ import annotations

import sys
import threading
from typing import Callable, List

import numpy as np
import paddle
import pytest
from paddle.framework import core

import jit_core

from .helpers import assert_same

THREADS = 8
#: a deadlock guard only: nothing is asserted about how long the threads take
JOIN_S = 300


@pytest.fixture(autouse=True)
def _switch_often():
    # switch threads every few bytecodes instead of every 5 ms: the races (two first
    # calls of one frame, a capture next to a cache hit) happen on every run, not by luck
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(old)


def run_threads(work: Callable[[int], None], n: int = THREADS) -> None:
    """``work(i)`` in ``n`` threads that start together; re-raises the first failure."""
    barrier = threading.Barrier(n)
    errors: List[BaseException] = []

    def main(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as e:  # noqa: BLE001 - reported in the main thread
            errors.append(e)

    threads = [threading.Thread(target=main, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    assert not [t.name for t in threads if t.is_alive()], "threads did not finish (deadlock)"
    if errors:
        raise errors[0]


def hook_is_off() -> bool:
    prev = core.set_eval_frame(None)
    if prev is not None:
        core.set_eval_frame(prev)
    return prev is None


class Block(paddle.nn.Layer):
    """Its forward breaks the graph (``float`` of a tensor): seen through the hook when the
    model calls it, captured on its own, with a resume function."""

    def __init__(self, width: int):
        super().__init__()
        self.fc = paddle.nn.Linear(width, width)

    def forward(self, x):
        y = self.fc(x)
        shift = float(y.mean())
        return y - shift


class Model(paddle.nn.Layer):
    def __init__(self, width: int = 8):
        super().__init__()
        self.inp = paddle.nn.Linear(width, width)
        self.block = Block(width)
        self.out = paddle.nn.Linear(width, 4)

    def forward(self, x):
        h = paddle.nn.functional.relu(self.inp(x))
        if h.sum() > 0:  # a tensor decides a branch: a break with two resume functions
            h = h * 2
        h = self.block(h)
        return self.out(h)


def batches(width: int = 8) -> List[paddle.Tensor]:
    # two batch sizes (two guard sets) and both branch outcomes
    return [
        paddle.rand([2, width]),
        -paddle.rand([2, width]) - 1,
        paddle.rand([3, width]),
        -paddle.rand([3, width]) - 1,
    ]


def test_one_model_eight_threads_first_calls_racing(backend):
    paddle.seed(1)
    model = Model()
    model.eval()
    xs = batches()
    expected = [model(x) for x in xs]

    # the captures one thread makes, alone, on a twin of the model. dynamic=True: what
    # automatic dynamic shapes and numbers learn depends on the order of the calls (the
    # batch size and Block's float `shift` changing in one call or in two), which racing
    # threads do not keep; with every size and number dynamic from the start, the
    # captures are one per frame and branch whatever the order
    alone = jit_core.optimize(model, backend=backend, dynamic=True)
    for x in xs:
        alone(x)
    single = alone.jit_stats

    fast = jit_core.optimize(model, backend=backend, dynamic=True)

    def work(i: int) -> None:
        for r in range(6):
            k = (i + r) % len(xs)
            assert_same(fast(xs[k]), expected[k])
        assert hook_is_off()

    run_threads(work)
    stats = fast.jit_stats
    # one capture per frame and guard set, however many threads raced to make it
    assert stats.entries == single.entries
    assert stats.captures == single.captures
    assert stats.compiled == single.compiled
    assert not stats.eager_frames


def test_a_model_per_thread(backend):
    paddle.seed(2)
    models = [Model(4 + i) for i in range(THREADS)]
    for m in models:
        m.eval()
    inputs = [batches(4 + i) for i in range(THREADS)]
    expected = [[m(x) for x in xs] for m, xs in zip(models, inputs)]
    # what one thread alone captures for a model: every model has the same frames and
    # as many guard sets (dynamic=True: the counts do not depend on when the batch size
    # and the block's float became dynamic, as in the test above)
    alone = jit_core.optimize(models[0], backend=backend, dynamic=True)
    for x in inputs[0]:
        alone(x)
    single = alone.jit_stats.entries
    fast = [jit_core.optimize(m, backend=backend, dynamic=True) for m in models]

    def work(i: int) -> None:
        for _ in range(3):
            for x, e in zip(inputs[i], expected[i]):
                assert_same(fast[i](x), e)

    run_threads(work)
    assert [f.jit_stats.entries for f in fast] == [single] * THREADS
    assert all(f.jit_stats.captures == alone.jit_stats.captures for f in fast)


def scale_then_break(x, y):
    z = x * 2 + y
    if z.mean() > 0:
        return z - 1
    return z + 1


def test_one_function_called_with_reset_in_between(backend):
    # reset() from one thread while others call: entries vanish and are captured again,
    # never half-made
    fast = jit_core.optimize(scale_then_break, backend=backend)
    xs = [(paddle.rand([4, 4]), paddle.rand([4, 4])), (-paddle.rand([4, 4]), -paddle.rand([4, 4]))]
    expected = [scale_then_break(*a) for a in xs]

    def work(i: int) -> None:
        for r in range(10):
            if i == 0 and r % 3 == 0:
                fast.reset()
            k = (i + r) % 2
            assert_same(fast(*xs[k]), expected[k])

    run_threads(work)
    assert not fast.jit_stats.eager_frames


def helper(x):
    return x * 3 - 1


def probe_seen(x):
    y = x * 3
    shift = float(y.sum())  # a break: a frame the hook sees gets an entry of its own
    return y - shift


def probe_unseen(x):
    y = x * 3
    shift = float(y.sum())
    return y - shift


def test_a_thread_that_did_not_call_the_optimized_callable_runs_eagerly(backend):
    """The hook is per thread: while one thread is inside an optimized call, a frame that
    another thread runs is not captured, and a thread that the optimized code starts runs
    eagerly too."""
    inside = threading.Event()
    go_on = threading.Event()
    results = {}

    def in_started_thread(x):
        results["started"] = probe_unseen(x)

    def optimized(x):
        y = x + 1
        inside.set()  # calls the JIT does not trace: they run with this thread's hook on
        go_on.wait()
        t = threading.Thread(target=in_started_thread, args=(y,))
        t.start()
        t.join()
        return probe_seen(y)

    fast = jit_core.optimize(optimized, backend=backend)
    x = paddle.rand([3])
    worker = threading.Thread(target=lambda: results.setdefault("out", fast(x)), daemon=True)
    worker.start()
    assert inside.wait(JOIN_S)
    # the worker is inside the optimized call with its hook on; this thread's call is
    # plain eager
    assert_same(probe_unseen(x), probe_seen(x))
    go_on.set()
    worker.join(JOIN_S)
    assert not worker.is_alive()
    expected = probe_seen(x + 1)
    assert_same(results["out"], expected)
    assert_same(results["started"], expected)
    seen = set(fast.jit_stats.entries) | set(fast.jit_stats.eager_frames)
    # the control: what the optimized frame calls in its own thread is captured
    assert [k for k in seen if k.startswith("probe_seen ")]
    # neither the main thread's call nor the started thread's was
    assert not [k for k in seen if "probe_unseen" in k or "in_started_thread" in k]
    assert hook_is_off()


def test_threads_see_their_own_hook_state():
    # set in one thread, the hook is not set in another
    seen = []

    def other():
        seen.append(hook_is_off())

    prev = core.set_eval_frame(None)
    try:
        fast = jit_core.optimize(helper)
        fast(paddle.ones([2]))
        assert hook_is_off()
    finally:
        core.set_eval_frame(prev)
    t = threading.Thread(target=other)
    t.start()
    t.join(JOIN_S)
    assert seen == [True]
    np.testing.assert_allclose(fast(paddle.ones([2])).numpy(), [2.0, 2.0])
