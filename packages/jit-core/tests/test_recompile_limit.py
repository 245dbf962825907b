"""The recompile limit and what it leaves behind: entries that keep serving their calls,
eager runs that capture nothing new, a limit per ``self``, a total cap, and the names
that ``jit_stats`` and ``explain()`` give the frames."""

from __future__ import annotations

import os
import warnings

import numpy as np
import paddle
import pytest
from paddle.framework import core

import jit_core
from jit_core.api import frame_key
from jit_core.bytecode import compat

THIS_FILE = os.path.basename(__file__)


def close(a, b):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def hook_is_off() -> bool:
    prev = core.set_eval_frame(None)
    if prev is not None:
        core.set_eval_frame(prev)
    return prev is None


@pytest.fixture(autouse=True)
def _no_hook_leak():
    assert hook_is_off()
    yield
    assert hook_is_off(), "a test left the frame hook installed"


class CountingBackend:
    """The paddle backend, counting how often each compiled graph runs."""

    def __init__(self):
        self.runs = {}  # graph class name -> runs

    @jit_core.hookimpl
    def jit_register_backends(self, register):
        def compile_fn(graph_module, example_inputs, **options):
            name = type(graph_module).__name__

            def run(*args):
                self.runs[name] = self.runs.get(name, 0) + 1
                return graph_module.forward(*args)

            return run

        register("counting", compile_fn, description="counts graph runs")

    def total(self, prefix: str = "") -> int:
        return sum(n for name, n in self.runs.items() if name.startswith(prefix))


@pytest.fixture
def counting(install_plugin):
    return install_plugin(CountingBackend(), "counting-test")


def limit_warnings(record, key=None):
    """The recompile-limit warnings in ``record`` (of the frame ``key``, if given)."""
    msgs = [str(w.message) for w in record]
    return [
        m for m in msgs if "runs eagerly when no cache entry" in m and (key is None or key in m)
    ]


# ------------------------------------------------------------ entries kept past the limit


def test_entries_kept_after_the_limit_still_serve_their_calls(counting):
    def f(x):
        return paddle.nn.functional.relu(x) * 2 + 1

    of = jit_core.optimize(f, backend="counting", recompile_limit=2, dynamic=False)
    xs = [paddle.randn([n, 3]) for n in (1, 2, 3, 4)]
    close(of(xs[0]), f(xs[0]))
    close(of(xs[1]), f(xs[1]))
    assert of.jit_stats.captures == 2 and counting.total() == 2
    with pytest.warns(RuntimeWarning) as record:
        close(of(xs[2]), f(xs[2]))  # past the limit: eager, one warning
    msgs = limit_warnings(record)
    assert len(msgs) == 1 and "recompile limit (2)" in msgs[0], msgs
    assert counting.total() == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # quiet from now on
        for _ in range(3):
            for x in xs:
                close(of(x), f(x))
    # the two compiled shapes ran their graphs each time; the others ran eagerly
    assert counting.total() == 2 + 3 * 2
    stats = of.jit_stats
    assert stats.captures == 2 and stats.entries == {frame_key(f): 2}
    assert "recompile limit (2)" in stats.eager_frames[frame_key(f)]


class Block(paddle.nn.Layer):
    def __init__(self, width=8):
        super().__init__()
        self.fc = paddle.nn.Linear(width, width)

    def forward(self, x):
        return paddle.nn.functional.relu(self.fc(x)) + x


class Tower(paddle.nn.Layer):
    """A whole-graph forward whose sublayers are user code: inlined when captured."""

    def __init__(self):
        super().__init__()
        self.blocks = paddle.nn.LayerList([Block(), Block()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def test_past_the_limit_the_callees_are_not_captured():
    paddle.seed(0)
    net = Tower()
    fast = jit_core.optimize(net, recompile_limit=2, dynamic=False)
    xs = [paddle.randn([1, n, 8]) for n in range(1, 6)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for _ in range(2):
            for x in xs:
                close(fast(x), net(x))
    stats = fast.jit_stats
    # one capture per compiled length; Block.forward never got a cache of its own
    assert stats.captures == 2, stats
    assert stats.entries == {frame_key(Tower.forward): 2}, stats
    assert list(stats.eager_frames) == [frame_key(Tower.forward)]


def helper(x):
    return x * 3


class Breaks(paddle.nn.Layer):
    """A sublayer whose forward breaks: the caller breaks at the call, and this frame is
    captured on its own."""

    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x)
        print("breaks", y.shape[0])  # a graph break
        return y * 2


class Outer(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.inner = Breaks()

    def forward(self, x, n):
        y = helper(x) * n
        return self.inner(y)


def test_past_the_limit_callees_with_caches_of_their_own_keep_them(counting, capsys):
    paddle.seed(1)
    net = Outer()
    fast = jit_core.optimize(net, backend="counting", recompile_limit=2, dynamic=False)
    x = paddle.randn([4, 8])
    close(fast(x, 1), net(x, 1))
    close(fast(x, 2), net(x, 2))
    captured = fast.jit_stats.captures
    inner_key = frame_key(Breaks.forward)
    assert fast.jit_stats.entries[inner_key] == 1
    inner_runs = counting.total("Graph_forward")
    with pytest.warns(RuntimeWarning) as record:
        close(fast(x, 3), net(x, 3))  # Outer.forward is past its limit: eager
    assert len(limit_warnings(record)) == 1
    for n in (3, 4, 5):
        close(fast(x, n), net(x, n))
    stats = fast.jit_stats
    # nothing new was captured (helper ran as it is), and Breaks.forward kept its graphs
    assert stats.captures == captured, stats
    assert frame_key(helper) not in stats.entries
    assert stats.entries[inner_key] == 1
    assert counting.total("Graph_forward") > inner_runs + 3
    capsys.readouterr()


# ------------------------------------------------------------------ the limit per self


class Stack(paddle.nn.Layer):
    """Instances of one block class called in a loop that breaks (``.tolist()``): each
    block is captured apart from the others, on its own ``Block.forward`` frame (or on a
    frame for the loop's body, which pins the block it is given), one entry per block."""

    def __init__(self, n=12):
        super().__init__()
        self.blocks = paddle.nn.LayerList([Block() for _ in range(n)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
            x.tolist()
        return x


def per_block_frames(stats, n: int) -> list:
    """The keys of the frames that hold one entry per block (``n`` of them)."""
    keys = [k for k, count in stats.entries.items() if count == n]
    assert keys, stats
    return keys


@pytest.mark.parametrize("share", [True, False], ids=["shared", "bound"])
def test_twelve_instances_of_one_block_do_not_go_eager(share):
    paddle.seed(2)
    net = Stack()
    fast = jit_core.optimize(net, share_layers=share)
    x = paddle.randn([2, 8])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(2):
            close(fast(x), net(x))
    assert limit_warnings(record) == []
    stats = fast.jit_stats
    assert not [r for r in stats.eager_frames.values() if "recompile limit" in r], stats
    # shared: the first block's entry and the one the other eleven share; bound: one each
    per_block_frames(stats, 2 if share else 12)
    captures = stats.captures
    close(fast(x), net(x))
    assert fast.jit_stats.captures == captures


def test_the_limit_counts_per_self_and_the_total_caps_them_all():
    paddle.seed(3)
    net = Stack(n=3)
    fast = jit_core.optimize(
        net, recompile_limit=2, accumulated_recompile_limit=5, share_layers=False
    )
    xs = [paddle.randn([n, 8]) for n in (1, 2, 3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        close(fast(xs[0]), net(xs[0]))
    keys = per_block_frames(fast.jit_stats, 3)
    with pytest.warns(RuntimeWarning) as record:
        close(fast(xs[1]), net(xs[1]))
    # two shapes for each of three blocks: six entries would be needed, five are allowed
    capped = [key for key in keys if limit_warnings(record, key)]
    assert capped, [str(w.message) for w in record]
    for key in capped:
        msgs = limit_warnings(record, key)
        assert len(msgs) == 1 and "accumulated recompile limit (5)" in msgs[0], msgs
        assert fast.jit_stats.entries[key] == 5
        assert "accumulated recompile limit (5)" in fast.jit_stats.eager_frames[key]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        close(fast(xs[2]), net(xs[2]))
    for key in capped:
        assert limit_warnings(record, key) == []  # the total cap was announced already
    for x in xs:
        close(fast(x), net(x))
    assert all(fast.jit_stats.entries[key] <= 5 for key in keys), fast.jit_stats


def test_each_self_reaches_its_own_limit():
    paddle.seed(4)
    net = Stack(n=2)
    fast = jit_core.optimize(net, recompile_limit=1, share_layers=False)
    xs = [paddle.randn([n, 8]) for n in (1, 2)]
    close(fast(xs[0]), net(xs[0]))  # each block: one entry, its limit
    keys = per_block_frames(fast.jit_stats, 2)
    with pytest.warns(RuntimeWarning) as record:
        close(fast(xs[1]), net(xs[1]))
    limited = [key for key in keys if limit_warnings(record, key)]
    assert limited, [str(w.message) for w in record]
    for key in limited:
        msgs = limit_warnings(record, key)
        # one warning, for the first block's entries, naming the local holding the block
        assert len(msgs) == 1 and "recompile limit (1) reached for " in msgs[0], msgs
        assert " (Block)" in msgs[0], msgs
        assert fast.jit_stats.entries[key] == 2  # the second block was not held back
    for x in xs:
        close(fast(x), net(x))


def test_the_limit_counts_per_layer_passed_in():
    # a layer argument pinned by identity counts like self: one entry per layer here
    def apply(layer, x):
        y = layer(x)
        y.tolist()  # a break: apply is no single graph, but each part is cached
        return y * 2

    paddle.seed(5)
    layers = [paddle.nn.Linear(8, 8) for _ in range(4)]
    fast = jit_core.optimize(apply, recompile_limit=2, share_layers=False)
    x = paddle.randn([2, 8])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(2):
            for layer in layers:
                close(fast(layer, x), apply(layer, x))
    assert limit_warnings(record, frame_key(apply)) == []
    assert fast.jit_stats.entries[frame_key(apply)] == 4


def test_accumulated_recompile_limit_must_be_positive():
    with pytest.raises(ValueError, match="accumulated_recompile_limit"):
        jit_core.optimize(lambda x: x, accumulated_recompile_limit=0)


# ------------------------------------------------------------------ names and explain


def test_stats_keys_tell_two_classes_forwards_apart(capsys):
    net = Outer()
    fast = jit_core.optimize(net)
    x = paddle.randn([4, 8])
    close(fast(x, 2), net(x, 2))
    entries = fast.jit_stats.entries
    outer, inner = frame_key(Outer.forward), frame_key(Breaks.forward)
    assert outer != inner
    assert outer == f"Outer.forward ({THIS_FILE}:{Outer.forward.__code__.co_firstlineno})"
    assert inner == f"Breaks.forward ({THIS_FILE}:{Breaks.forward.__code__.co_firstlineno})"
    assert entries[outer] == 1 and entries[inner] == 1, entries
    assert frame_key(net) == outer and frame_key(Outer.forward.__code__) == outer
    capsys.readouterr()


def test_qualified_names_on_every_python():
    def local(x):
        return x

    code = local.__code__
    want = "test_qualified_names_on_every_python.<locals>.local"
    assert compat.code_qualname(code) == want
    assert compat.code_qualnames([code, Block.forward.__code__]) == {
        code: want,
        Block.forward.__code__: "Block.forward",
    }


def shapes_one_by_one(a, b, c, d):
    # each call breaks the graph here: the helper is captured on its own frame
    return [
        helper_of_many_shapes(a),
        helper_of_many_shapes(b),
        helper_of_many_shapes(c),
        helper_of_many_shapes(d),
    ]


def helper_of_many_shapes(x):
    y = x * 2
    y.tolist()  # a break: the caller cannot inline this function
    return y + 1


def test_explain_lists_the_frames_past_the_limit():
    xs = [paddle.randn([n]) for n in (1, 2, 3, 4)]
    fast = jit_core.optimize(shapes_one_by_one, recompile_limit=2, dynamic=False)
    with pytest.warns(RuntimeWarning):
        report = jit_core.explain(fast, *xs)
    for got, x in zip(report.result, xs):
        close(got, x * 2 + 1)
    key = frame_key(helper_of_many_shapes)
    limits = {r.frame: r.reason for r in report.recompile_limits}
    assert "recompile limit (2)" in limits[key], report.recompile_limits
    text = str(report)
    assert "Recompile limit reached by" in text
    assert key in text
