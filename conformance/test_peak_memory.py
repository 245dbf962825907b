"""Peak memory of a compiled call against eager Paddle's, read from Paddle's own
allocator statistics (bytes handed out on the host), never from timings.

Eager code that assigns a local again frees the tensor it held; the code the JIT runs must
free each value after its last use too: a graph that kept every intermediate until it
returned peaked at many times eager's memory, and ran up to 2x slower on large
convolution nets (fresh pages from the allocator, each paid for with page faults).
"""

from __future__ import annotations

import paddle
import pytest

import jit_core

from .helpers import assert_same

_stats = paddle.base.core

#: [1024, 1024] float32: 4 MiB a value, far above what the guards and the calls allocate
SHAPE = [1024, 1024]
MIB = 2**20


def allocated() -> int:
    """Bytes the allocator has handed out on the host now (a C function: a graph break
    when a captured frame calls it)."""
    return _stats.host_memory_stat_current_value("Allocated", 0)


def peak_during(fn, *args) -> int:
    """The most bytes held at once during ``fn(*args)``, above what was held before."""
    _stats.host_memory_stat_reset_peak_value("Allocated", 0)
    before = allocated()
    fn(*args)
    return _stats.host_memory_stat_peak_value("Allocated", 0) - before


def chain(x):
    # ten elementwise ops, each making a new 4 MiB tensor: eager holds two or three at once
    y = paddle.exp(x)
    for _ in range(3):
        y = paddle.tanh(y) * 0.5
        y = y + 1.0
    return paddle.nn.functional.relu(y - 1.0)


def test_a_chain_of_large_ops_peaks_near_eager(backend):
    x = paddle.rand(SHAPE)
    fast = jit_core.optimize(chain, backend=backend)
    with paddle.no_grad():
        assert_same(fast(x), chain(x))  # (the first call captures and compiles)
        assert jit_core.explain(chain, x, backend=backend).graph_count == 1
        eager = peak_during(chain, x)
        compiled = peak_during(fast, x)
    # eager: about three values at once (12 MiB); every intermediate held until the
    # return would be 11 of them
    assert eager <= 4 * 4 * MIB, eager / MIB
    assert compiled <= eager + 4 * MIB, (compiled / MIB, eager / MIB)


def test_the_generated_code_frees_each_value_after_its_last_use():
    (entry,) = jit_core.explain(chain, paddle.rand([4, 4])).graphs
    code = entry.code
    # what a person reads: x is read by the first op only, each intermediate by the op
    # after it, and each is deleted right after that
    lines = [line.strip() for line in code.splitlines()]
    assert lines[1:3] == ["exp = paddle_exp(x)", "del x"], code
    assert all(line.startswith("del ") for line in lines[2:-1:2]), code
    gm = jit_core.capture(chain, paddle.rand([4, 4]))
    # what runs: each result is stored over the value it consumed, which frees that value
    # as eager's `y = ...` does; one local holds a tensor at any time
    lines = [line.strip() for line in gm.run_code.splitlines()]
    assert lines[1] == "x = paddle_exp(x)", gm.run_code
    assert all(line.startswith("x = ") for line in lines[1:-1]), gm.run_code
    assert lines[-1] == "return (x,)", gm.run_code


def consume(t):
    """Reads a tensor's values: a graph break inside, so the call itself runs in Python."""
    return float(t.numpy().mean())


def after_a_break(x):
    # the product is a temporary: once the call returns nothing holds it in eager
    consume(paddle.exp(x) * 2.0)
    return allocated()


@pytest.mark.parametrize("runs", [2])
def test_a_value_consumed_at_a_graph_break_is_not_kept_by_the_frame(backend, runs):
    x = paddle.rand(SHAPE)
    fast = jit_core.optimize(after_a_break, backend=backend)
    with paddle.no_grad():
        for _ in range(runs):  # the first call captures; the second runs the cache
            before = allocated()
            held_eager = after_a_break(x) - before
            before = allocated()
            held = fast(x) - before
    assert jit_core.explain(after_a_break, x, backend=backend).break_count >= 1
    assert held_eager < 2 * MIB, held_eager
    # the graph's outputs, kept in a local of the frame until the resumed rest returned,
    # held the 4 MiB product there
    assert held < 2 * MIB, held / MIB
