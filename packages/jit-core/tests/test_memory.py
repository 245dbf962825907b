"""Memory: what the JIT keeps after calls, ``reset()`` and dropping what was optimized.

The counts are exact where the JIT owns the objects (its contexts, cache entries, guards,
graphs must all be gone) and bounded where Paddle itself keeps a little per layer or per
hook (measured against eager Paddle doing the same rounds). No timings.
"""

from __future__ import annotations

import collections
import gc
import linecache
import sys
import weakref

import numpy as np
import paddle
import pytest

import jit_core
from jit_core.fx import GraphModule
from jit_core.runtime.eval_frame import CompileContext
from jit_core.runtime.guards import CompiledGuard

ROUNDS = 200
#: rounds that make a new layer each (Paddle's own layer construction is the slow part)
DROP_ROUNDS = 60

#: the JIT's own objects: after the optimized object is dropped none may be left
JIT_TYPES = (CompileContext, GraphModule, CompiledGuard)


class Net(paddle.nn.Layer):
    def __init__(self, width: int = 8):
        super().__init__()
        self.l1 = paddle.nn.Linear(width, width)
        self.l2 = paddle.nn.Linear(width, width)

    def forward(self, x):
        return self.l2(paddle.nn.functional.relu(self.l1(x))) + 1


class Breaking(Net):
    """A graph break (a tensor decides a branch): resume functions, hooked calls."""

    def forward(self, x):
        y = self.l1(x)
        if y.sum() > 0:
            y = y * 2
        return self.l2(y) + 1


class Looping(Net):
    """A loop whose body breaks: the body is a function of its own, run by a LoopCall."""

    def forward(self, x):
        for layer in [self.l1, self.l2]:
            x = layer(x)
            print_free = float(x.mean())  # noqa: F841 - .item()-like: a break in the body
        return x


def breaking_fn(x, y):
    z = x * 2 + y
    if z.mean() > 0:
        return z - 1
    return z + 1


def settle() -> None:
    # weakref callbacks and finalizers free more on a second pass
    for _ in range(3):
        gc.collect()


def live(types) -> collections.Counter:
    settle()
    return collections.Counter(type(o).__name__ for o in gc.get_objects() if isinstance(o, types))


def inputs(width: int = 8):
    return paddle.rand([2, width]), -paddle.rand([2, width])


@pytest.mark.parametrize("cls", [Net, Breaking, Looping], ids=lambda c: c.__name__)
def test_a_dropped_optimized_layer_and_its_inputs_are_collected(cls):
    # Paddle's set_eval_frame keeps a reference to every callback it hands back, and the
    # generated code (invisible to the gc) held the context through its constants: both
    # kept every optimized layer alive for good
    kept = live(JIT_TYPES)  # what other tests' optimized objects hold
    net = cls()
    net.eval()
    fast = jit_core.optimize(net)
    x, neg = inputs()
    expected = [net(x).numpy(), net(neg).numpy()]
    np.testing.assert_allclose(fast(x).numpy(), expected[0], rtol=1e-6)
    np.testing.assert_allclose(fast(neg).numpy(), expected[1], rtol=1e-6)
    assert fast.jit_stats.compiled >= 1
    refs = [weakref.ref(o) for o in (net, fast, fast._ctx, x, neg, net.l1.weight)]
    del net, fast, x, neg
    settle()
    assert [r() for r in refs] == [None] * len(refs)
    assert not live(JIT_TYPES) - kept


def test_a_dropped_optimized_function_frees_its_cache():
    kept = live(JIT_TYPES)
    fast = jit_core.optimize(breaking_fn)
    a, b = inputs()
    fast(a, b)
    fast(-a, b)
    assert fast.jit_stats.compiled >= 2
    refs = [weakref.ref(o) for o in (fast, fast._ctx, a, b)]
    del fast, a, b
    settle()
    assert [r() for r in refs] == [None] * len(refs)
    assert not live(JIT_TYPES) - kept


def call_layer(net, x):
    return net(x) * 2


@pytest.mark.parametrize("cls", [Net, Breaking, Looping], ids=lambda c: c.__name__)
def test_a_layer_passed_in_is_collected_while_the_optimized_function_lives(cls):
    # the guard (``L['net'] is ___o0``) and the recompile limit's owner held the layer,
    # the entry's graph held its sublayers: every layer ever passed in stayed alive.
    # (Looping: its loop body's graphs hold the sublayers they call; they go with it)
    fast = jit_core.optimize(call_layer)
    x, neg = inputs()
    steady = None
    for i in range(4):
        net = cls()
        net.eval()
        expected = [call_layer(net, x).numpy(), call_layer(net, neg).numpy()]
        np.testing.assert_allclose(fast(net, x).numpy(), expected[0], rtol=1e-6)
        np.testing.assert_allclose(fast(net, neg).numpy(), expected[1], rtol=1e-6)
        refs = [weakref.ref(o) for o in (net, net.l1, net.l1.weight)]
        del net
        settle()
        assert [r() for r in refs] == [None] * len(refs)
        # the entries that checked that layer went with their graphs and guards; what
        # is left (the code after a break, which never saw the layer) serves the next
        entries = [e for c in fast._ctx.cache.values() for e in c.entries]
        assert not any(e.owner for e in entries)
        # the second layer is another instance of the first's class: the captures from
        # then on serve every instance (``ShapePolicy.shares_layer``) and stay
        now = live(JIT_TYPES)
        if i == 1:
            steady = now
        elif i > 1:
            assert now == steady
    assert fast.jit_stats.compiled >= 2


def test_an_entry_for_a_dead_layer_never_matches_a_new_one_at_its_address():
    fast = jit_core.optimize(call_layer)
    x = paddle.rand([2, 8])
    for width_scale in (1.0, 2.0, 3.0):
        net = Net()
        net.eval()
        for p in net.parameters():
            p.set_value(p * width_scale)
        np.testing.assert_allclose(fast(net, x).numpy(), call_layer(net, x).numpy(), rtol=1e-6)
        del net
        settle()


_MADE = """
import paddle


class Made(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.l1 = paddle.nn.Linear(8, 8)

    def forward(self, x):
        y = self.l1(x)
        if y.sum() > 0:
            y = y * 2
        return y + 1
"""


def test_a_layer_class_made_at_run_time_goes_with_its_module():
    # forward_of kept each class's forward as the value of a dict weak on the class only:
    # the function's globals hold the class, so class, module and code stayed for good
    ns: dict = {}
    exec(compile(_MADE, "<test_memory: a layer class made at run time>", "exec"), ns)
    net = ns["Made"]()
    fast = jit_core.optimize(net)
    x, neg = inputs()
    np.testing.assert_allclose(fast(x).numpy(), net(x).numpy(), rtol=1e-6)
    np.testing.assert_allclose(fast(neg).numpy(), net(neg).numpy(), rtol=1e-6)
    refs = [weakref.ref(o) for o in (ns["Made"], ns["Made"].forward, net, fast)]
    del ns, net, fast
    settle()
    assert [r() for r in refs] == [None] * len(refs)


def test_the_first_call_inputs_are_not_kept_by_a_graph_break():
    # the cache entry keeps the break for explain(); its traceback held the capture's
    # frames, and with them the example inputs of the first call
    net = Breaking()
    fast = jit_core.optimize(net)
    x = paddle.rand([2, 8])
    ref = weakref.ref(x)
    fast(x)
    del x
    settle()
    assert ref() is None
    assert fast.jit_stats.entries  # the entries are still there, and hold no input


def test_rounds_of_calls_and_reset_do_not_grow():
    kept = live(JIT_TYPES)
    net = Breaking()
    fast = jit_core.optimize(net)
    x, neg = inputs()

    def round_():
        fast(x)
        fast(neg)
        fast.reset()

    for _ in range(5):  # warm: Paddle's and Python's own caches fill once
        round_()
    settle()
    objects = len(gc.get_objects())
    sources = len(linecache.cache)
    for _ in range(ROUNDS):
        round_()
    settle()
    # every capture registers the source of its guards and graphs in linecache: the
    # entries go with the functions now
    assert len(linecache.cache) == sources
    # a few objects of Python's own caches may come and go; a leak is several per round
    assert len(gc.get_objects()) - objects < ROUNDS // 10
    assert live(JIT_TYPES)["CompileContext"] == kept["CompileContext"] + 1


def _optimize_and_drop(width: int) -> None:
    net = Breaking(width)
    fast = jit_core.optimize(net)
    x, neg = inputs(width)
    fast(x)
    fast(neg)


def _eager_and_drop(width: int) -> None:
    net = Breaking(width)
    x, neg = inputs(width)
    net(x)
    net(neg)


def _growth(step, rounds: int) -> collections.Counter:
    for _ in range(5):
        step()
    before = live(object)
    for _ in range(rounds):
        step()
    return live(object) - before


def test_rounds_of_optimize_and_drop_keep_nothing_but_a_hook_each():
    kept = live(JIT_TYPES + (Breaking,))
    eager = _growth(lambda: _eager_and_drop(8), DROP_ROUNDS)
    jit = _growth(lambda: _optimize_and_drop(8), DROP_ROUNDS)
    # what eager Paddle keeps per layer it makes, the JIT may keep too; past that only
    # the hook object (and its weak reference) that Paddle's set_eval_frame never lets go
    extra = jit - eager
    extra.pop("_Hook", None)
    extra.pop(weakref.ReferenceType.__name__, None)
    assert sum(extra.values()) < DROP_ROUNDS // 10, extra.most_common(8)
    assert jit["_Hook"] <= DROP_ROUNDS
    assert not live(JIT_TYPES + (Breaking,)) - kept


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def _pin_mmap_threshold() -> None:
    """glibc maps blocks above its threshold and unmaps them when freed, but raises the
    threshold to the size of every such block freed: after another test in this worker
    freed a 10 MB buffer, 4 MiB weights come from the heap, whose pages stay (and the
    RSS grows with fragmentation, not with a leak). Pinning it keeps them mapped."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD: 1 MiB, fixed
    except (OSError, AttributeError):  # not glibc: its own rules
        pass


def test_rss_does_not_grow_over_optimize_and_drop_rounds():
    # 1024x1024 float32 weights, two per layer: 8 MiB a round, 160 MiB in all, if layers leaked. (Blocks
    # this large are mapped and unmapped whole, so the allocator's high-water mark of
    # small blocks does not show as growth.)
    _pin_mmap_threshold()
    width = 1024
    for _ in range(5):
        _optimize_and_drop(width)
    settle()
    before = _rss()
    for _ in range(20):
        _optimize_and_drop(width)
    settle()
    assert _rss() - before < 16 * 2**20
