"""The cache-hit dispatcher (``jit_core.runtime.fast_dispatch``): every entry's guard inlined on
the call's arguments, in the cache's order; a miss still captures, a guard that raises
has failed, and parameters named like the guard's own names do not confuse it."""

from __future__ import annotations

import paddle
import pytest

import jit_core
from jit_core.runtime.fast_dispatch import _rewrite


def cache_of(opt):
    func, code, cache = opt._fast
    return cache


CALLS = []


def counted(x, scale):
    CALLS.append(1)  # runs at each capture only (a global: a closure takes no fast path)
    return x * scale + 1


def test_entries_are_chosen_by_their_guards():
    calls, f = CALLS, counted

    opt = jit_core.optimize(f, dynamic=False)
    a, b = paddle.rand([2, 3]), paddle.rand([4])
    c = paddle.rand([2, 3], dtype="float64")
    for x, s in [(a, 2.0), (b, 2.0), (c, 2.0), (a, 3.0)]:
        assert paddle.allclose(opt(x, s), f(x, s)).item()
    captures = len(calls) - 4  # f itself ran four times above
    for x, s in [(a, 2.0), (b, 2.0), (c, 2.0), (a, 3.0)] * 3:
        assert paddle.equal_all(opt(x, s), x * s + 1).item()
    assert len(calls) - 4 - 12 == captures  # every later call was a hit
    hot, _, dispatch = cache_of(opt).dispatch
    assert dispatch is not None and hot is cache_of(opt).hot
    assert dispatch.source.count("return ___fn") == len(cache_of(opt).entries)


def test_a_miss_after_hits_captures_again():
    def f(x):
        return x + 1

    opt = jit_core.optimize(f, dynamic=False)
    opt(paddle.rand([3]))
    opt(paddle.rand([3]))
    before = cache_of(opt).dispatch
    x = paddle.rand([5])
    assert paddle.equal_all(opt(x), x + 1).item()
    assert len(cache_of(opt).entries) == 2
    opt(x)
    assert cache_of(opt).dispatch is not before  # rebuilt for the new entry


def test_a_guard_that_raises_has_failed():
    class Box:
        def __init__(self, v):
            self.v = v

    def f(box, x):
        return x * box.v

    opt = jit_core.optimize(f)
    x = paddle.rand([3])
    assert paddle.equal_all(opt(Box(2.0), x), x * 2.0).item()
    opt(Box(2.0), x)
    empty = Box(2.0)
    del empty.v  # the guard's box.v raises: not a match, and eager's error comes out
    with pytest.raises(AttributeError):
        opt(empty, x)


def test_parameters_named_like_the_guards_names():
    G = 3.0  # noqa: F841 - a global of the same name must not be read either

    def f(L, G, ___G):
        return L * G + ___G

    opt = jit_core.optimize(f)
    x, y = paddle.rand([2]), paddle.rand([2])
    for _ in range(3):
        assert paddle.equal_all(opt(x, 2.0, y), x * 2.0 + y).item()
    assert cache_of(opt).dispatch[2] is not None


def test_rewrite_reads_only_arguments_by_name():
    args = {"x": "___a0", "G": "___a1"}
    out = _rewrite("L['x'].shape == [2]", args, {})
    assert out.replace(" ", "") == "___a0.shape==[2]"
    out = _rewrite("G['paddle'] is ___o0 and L['G'] > 1", args, {"___o0": "___e0_o0"})
    assert "___G" in out and "___a1" in out and "___e0_o0" in out and "L[" not in out
    assert _rewrite("len(L) == 2", args, {}) is None  # reads L as a whole
    assert _rewrite("L['y'] is None", args, {}) is None  # not an argument
    assert "x.L" in _rewrite("x.L is None", args, {}).replace(" ", "")  # an attribute L
