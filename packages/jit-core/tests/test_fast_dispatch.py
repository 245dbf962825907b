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
    hot, _, dispatch, n, names = cache_of(opt).dispatch
    assert dispatch is not None and hot is cache_of(opt).hot and n == 2
    assert names == ("x", "scale")
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


def test_positional_calls_go_straight_into_the_dispatcher(monkeypatch):
    from jit_core import api

    def f(x, y):
        return x * y + 1

    opt = jit_core.optimize(f)
    x, y = paddle.rand([3]), paddle.rand([3])
    opt(x, y)
    opt(x, y)  # the dispatcher is built for the cache's one entry
    seen = []
    real = api._cache_hit
    monkeypatch.setattr(api, "_cache_hit", lambda *a: seen.append(1) or real(*a))
    for _ in range(3):
        assert paddle.equal_all(opt(x, y), x * y + 1).item()
    assert seen == []  # one identity check, then the dispatcher itself
    # keywords naming the rest of the parameters in order bind as positional arguments
    assert paddle.equal_all(opt(x, y=y), x * y + 1).item()
    assert paddle.equal_all(opt(x=x, y=y), x * y + 1).item()
    assert seen == []
    assert paddle.equal_all(opt(y=y, x=x), x * y + 1).item()
    assert seen == [1]  # in another order: bound by name first, by _cache_hit
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        opt(x, z=y)  # the function's own error
    z = paddle.rand([5])
    assert paddle.equal_all(opt(z, z), z * z + 1).item()  # a miss: captured by the dispatcher
    assert len(cache_of(opt).entries) == 2
    assert paddle.equal_all(opt(z, z), z * z + 1).item()
    assert seen == [1, 1]  # the entries changed: _cache_hit built the dispatcher again
    assert paddle.equal_all(opt(x, y), x * y + 1).item()
    assert seen == [1, 1]


def test_a_layer_called_with_keywords_goes_straight_into_the_dispatcher(monkeypatch):
    from jit_core import api

    class Net(paddle.nn.Layer):
        def forward(self, x, y):
            return x - y

    net = Net()
    opt = jit_core.optimize(net)
    x, y = paddle.rand([3]), paddle.rand([3])
    opt(x, y)
    opt(x, y)
    seen = []
    real = api._cache_hit
    monkeypatch.setattr(api, "_cache_hit", lambda *a: seen.append(1) or real(*a))
    assert paddle.equal_all(opt(x, y), x - y).item()
    assert paddle.equal_all(opt(x=x, y=y), x - y).item()
    assert paddle.equal_all(opt(x, y=y), x - y).item()
    assert seen == []
    assert paddle.equal_all(opt(y=y, x=x), x - y).item()
    assert seen == [1]
    with pytest.raises(TypeError):
        opt(x=x, w=y)  # Layer.__call__ then forward raise as eager does


def test_an_error_of_the_compiled_code_is_the_callers_not_a_failed_guard():
    def f(x, i):
        return paddle.gather(x, i) * 2

    opt = jit_core.optimize(f)
    x, i = paddle.rand([4]), paddle.to_tensor([0, 3])
    for _ in range(3):
        assert paddle.equal_all(opt(x, i), paddle.gather(x, i) * 2).item()
    entries = len(cache_of(opt).entries)
    with pytest.raises(Exception) as eager_error:
        f(x, paddle.to_tensor([0, 9]))
    with pytest.raises(type(eager_error.value)):
        opt(x, paddle.to_tensor([0, 9]))  # the guards pass; the graph's gather raises
    assert len(cache_of(opt).entries) == entries  # raised once, not captured again
