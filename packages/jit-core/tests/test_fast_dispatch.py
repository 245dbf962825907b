"""The cache-hit dispatcher (``jit_core.runtime.fast_dispatch``): every entry's guard inlined on
the call's arguments, in the cache's order; a miss still captures, a guard that raises
has failed, and parameters named like the guard's own names do not confuse it."""

from __future__ import annotations

import logging

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
    assert _rewrite("L['x'].shape == [2]", args, {}) == "___a0.shape == [2]"
    out = _rewrite("G['paddle'] is ___o0 and L['G'] > 1", args, {"___o0": "___e0_o0"})
    assert out == "___G['paddle'] is ___e0_o0 and ___a1 > 1"  # the text as it was
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
    assert seen == []  # every argument by keyword: looked up by name, in any order
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        opt(x, z=y)  # the function's own error
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        opt(z=y, x=x)
    z = paddle.rand([5])
    assert paddle.equal_all(opt(z, z), z * z + 1).item()  # a miss: captured by the dispatcher
    assert len(cache_of(opt).entries) == 2
    seen.clear()
    assert paddle.equal_all(opt(z, z), z * z + 1).item()
    assert seen == [1]  # the entries changed: _cache_hit built the dispatcher again
    assert paddle.equal_all(opt(x, y), x * y + 1).item()
    assert seen == [1]


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
    assert seen == []  # by name, in any order
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


# ----------------------------------------------------- the optimized object's own call


def own_call(opt):
    """The call generated for ``opt``'s entries, or None while its class's serves."""
    return type(opt).__dict__.get("__call__")


def test_a_hit_runs_the_graph_in_the_objects_own_call():
    def f(x, y):
        return paddle.exp(x) * y + 1

    opt, other = jit_core.optimize(f), jit_core.optimize(f)
    assert isinstance(opt, jit_core.api.OptimizedFunction)
    assert type(opt) is not type(other)  # a class of its own each
    x, y = paddle.rand([3]), paddle.rand([3])
    assert own_call(opt) is None
    opt(x, y)  # captures
    opt(x, y)  # builds the dispatcher and the call
    call = own_call(opt)
    assert call is not None and call.__name__ == "f"
    # the graph's operators are the call's own lines: no entry or graph called
    assert "___g0_paddle_exp(___a0)" in call.source
    assert "___fn0" not in call.source and "___graph0" not in call.source
    for args in [(x, y), (x,), ()]:
        kwargs = dict(zip("xy"[len(args) :], (x, y)[len(args) :]))
        assert paddle.equal_all(opt(*args, **kwargs), f(x, y)).item()
    assert own_call(other) is None
    with pytest.raises(TypeError, match="f\\(\\) missing 1 required positional argument"):
        opt(x)  # the function's own error, as eager raises it
    assert own_call(opt) is call


def test_the_call_is_logged_on_the_guards_channel(caplog):
    def f(x):
        return paddle.sin(x) + 1

    opt = jit_core.optimize(f)
    x = paddle.rand([3])
    with caplog.at_level(logging.INFO, logger="jit_core.guards"):
        opt(x)
        opt(x)
    logged = [
        r.getMessage() for r in caplog.records if "the call a cache hit runs" in r.getMessage()
    ]
    assert len(logged) == 1
    assert "for 1 cache entry:" in logged[0] and own_call(opt).source in logged[0]


def test_the_call_is_taken_back_when_the_entries_change():
    def f(x):
        return x * 2

    opt = jit_core.optimize(f, dynamic=False)
    a, b = paddle.rand([3]), paddle.rand([5])
    opt(a)
    opt(a)
    first = own_call(opt)
    assert first is not None
    assert paddle.equal_all(opt(b), b * 2).item()  # a miss: a new entry
    assert own_call(opt) is None  # the old call knows one entry only
    opt(b)
    second = own_call(opt)
    assert second is not None and second is not first
    assert second.source.count("___ok = True") == 2
    for t in (a, b):
        assert paddle.equal_all(opt(t), t * 2).item()
    opt.reset()
    assert own_call(opt) is None
    assert paddle.equal_all(opt(a), a * 2).item()


def test_entries_that_do_more_than_return_a_graph_output_are_called():
    def f(x, y):
        return x * y, y  # a tuple, and an input as it is

    opt = jit_core.optimize(f)
    x, y = paddle.rand([3]), paddle.rand([3])
    opt(x, y)
    opt(x, y)
    call = own_call(opt)
    assert call is not None and "return ___fn0(*___p)" in call.source
    out, same = opt(x, y)
    assert paddle.equal_all(out, x * y).item() and same is y


def test_a_layers_own_call_runs_its_hooks_and_modes_as_eager():
    class Net(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = paddle.nn.Linear(4, 4)
            self.drop = paddle.nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(paddle.nn.functional.relu(self.fc(x)))

    net = Net()
    net.eval()
    opt = jit_core.optimize(net)
    x = paddle.rand([2, 4])
    opt(x)
    opt(x)
    call = own_call(opt)
    assert call is not None and "___g0__C_ops_linear" in call.source
    assert paddle.allclose(opt(x), net(x)).item()
    assert paddle.allclose(opt.forward(x), net(x)).item()
    seen = []
    handle = net.register_forward_pre_hook(lambda layer, args: seen.append(1))
    opt(x)  # the hook runs: Layer.__call__, as eager
    assert seen == [1]
    handle.remove()
    net.train()  # the mode is guarded: captured again, dropout on
    paddle.seed(1)
    out = opt(x)
    paddle.seed(1)
    assert paddle.allclose(out, net(x)).item()
    net.eval()
    assert paddle.allclose(opt(x), net(x)).item()


def test_an_outside_backends_graph_is_called_without_its_entry(install_plugin):
    runs = []

    class Counting:
        @jit_core.hookimpl
        def jit_register_backends(self, register):
            def compile_fn(gm, example_inputs, **options):
                def run(*args):
                    runs.append(1)
                    return gm.forward(*args)

                return run

            register("counting-call", compile_fn, description="counts its runs")

    install_plugin(Counting(), "counting-call-test")

    def f(x):
        return paddle.tanh(x) - 1

    opt = jit_core.optimize(f, backend="counting-call")
    x = paddle.rand([3])
    opt(x)
    opt(x)
    call = own_call(opt)
    assert call is not None and "return ___graph0(___a0)[0]" in call.source
    before = len(runs)
    assert paddle.equal_all(opt(x), paddle.tanh(x) - 1).item()
    assert len(runs) == before + 1


def test_a_positional_only_parameter_is_named_by_no_keyword():
    scope: dict = {}
    exec("def f(x, /, y):\n    return x + y\n", {"paddle": paddle}, scope)
    f = scope["f"]
    opt = jit_core.optimize(f)
    x, y = paddle.rand([3]), paddle.rand([3])
    opt(x, y)
    opt(x, y)
    assert own_call(opt) is not None
    assert paddle.equal_all(opt(x, y=y), x + y).item()
    with pytest.raises(TypeError, match="positional-only"):
        opt(x=x, y=y)


def test_inline_forward_renames_variables_only():
    from jit_core.fx.inline import _renamed

    src = "    y = f(x, x=x, s='x y')\n    z = y.x + x\n    return (z, y)\n"
    out = _renamed(src, {"x": "___a0", "y": "___l_y", "f": "___g_f", "z": "___l_z"})
    assert out == (
        "    ___l_y = ___g_f(___a0, x=___a0, s='x y')\n"
        "    ___l_z = ___l_y.x + ___a0\n"
        "    return (___l_z, ___l_y)\n"
    )
