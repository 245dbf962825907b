"""Ints and floats that change from call to call (automatic dynamic numbers): the first
capture bakes a number in as a constant; once a call brings another value, it becomes an
input of the graph, so one capture serves every value (a backend registered with
``number_inputs=True``: paddle). Python uses of it (a branch, ``range``, an index) guard
what they rely on. Every backend must give eager's results for every value."""

from __future__ import annotations

import warnings

import numpy as np
import paddle
import pytest

import jit_core

from .helpers import assert_same


def counter_in_math(x, n):
    # a loop whose body breaks: its body function gets the counter as an argument
    for i in range(n):
        x = x * 2 + i
        if x.mean() > 100:
            x = x / 100
    return x


def branch_on_parity(x, k):
    if k % 2 == 0:
        return x + k
    return x * k - 1


def size_from_int(x, n):
    z = paddle.zeros([n + 1, x.shape[0]]) + x
    return z, z.shape[0] * 2


def reduce_over_axis(x, axis):
    return x.sum(axis=axis) * 2, paddle.roll(x, shifts=axis + 1, axis=0)


def index_and_range(x, i):
    y = x[i] * 2
    for _ in range(i):
        y = y + 1
    return y


def returned_and_stored(x, n, box):
    box.append(n * 3)
    return x * n, n + 1, n


def flag_is_not_an_int(x, flag):
    return x + 1 if flag else x - 1


CASES = [
    (counter_in_math, lambda: (paddle.rand([4]),), [3, 12, 5, 12, 0]),
    (branch_on_parity, lambda: (paddle.rand([3]),), [0, 1, 2, 3, 4, 7, 8]),
    (size_from_int, lambda: (paddle.rand([3]),), [0, 1, 2, 5, 2]),
    (reduce_over_axis, lambda: (paddle.rand([3, 4]),), [0, 1, 0, 1, -1]),
    (index_and_range, lambda: (paddle.rand([5, 2]),), [0, 1, 3, 4, 2]),
    (flag_is_not_an_int, lambda: (paddle.rand([3]),), [True, False, True]),
]


@pytest.mark.parametrize("fn,make,values", CASES, ids=[c[0].__name__ for c in CASES])
def test_every_value_gives_eagers_result(fn, make, values, backend):
    paddle.seed(5)
    args = make()
    fast = jit_core.optimize(fn, backend=backend)
    with warnings.catch_warnings():
        # a backend without int inputs may reach the recompile limit: eager from then on
        warnings.filterwarnings("ignore", message=".*recompile limit", category=RuntimeWarning)
        for v in values:
            assert_same(fast(*args, v), fn(*args, v))


def test_state_written_back_with_the_values_of_the_call(backend):
    x = paddle.rand([3])
    fast = jit_core.optimize(returned_and_stored, backend=backend)
    for n in (1, 2, 5, 9):
        mine, theirs = [], []
        assert_same(fast(x, n, mine), returned_and_stored(x, n, theirs))
        assert mine == theirs == [n * 3]


def test_a_loop_counter_is_one_capture_on_paddle():
    x = paddle.rand([4])
    fast = jit_core.optimize(counter_in_math)
    assert_same(fast(x, 20), counter_in_math(x, 20))
    stats = fast.jit_stats
    assert not stats.eager_frames, stats
    body = [k for k in stats.entries if "loop_body" in k and "resume" not in k]
    # the counter's first value, then one graph that reads it
    assert [stats.entries[k] for k in body] == [2], stats
    notes = [n for notes in stats.dynamic_shapes.values() for n in notes]
    assert any("is an input: its value changed from 0 to 1" in n for n in notes), notes
    # the same call again: every iteration hits the cache
    before = stats.captures
    assert_same(fast(x, 20), counter_in_math(x, 20))
    assert fast.jit_stats.captures == before
    # another length: range(n) needs its value, so the frame before the loop is captured
    # again; the body still has its two entries
    assert_same(fast(x, 15), counter_in_math(x, 15))
    assert [fast.jit_stats.entries[k] for k in body] == [2]


def test_a_branch_on_an_int_guards_the_relation_not_the_value():
    x = paddle.rand([3])
    fast = jit_core.optimize(branch_on_parity)
    for k in range(10):
        assert_same(fast(x, k), branch_on_parity(x, k))
    # 0 as a constant, then k as an input once per parity
    assert fast.jit_stats.captures == 3, fast.jit_stats
    report = jit_core.explain(fast, x, 4)
    assert "% 2" in str(report), str(report)


def test_dynamic_false_keeps_every_value_a_capture():
    x = paddle.rand([3])
    fast = jit_core.optimize(branch_on_parity, dynamic=False)
    for k in range(4):
        assert_same(fast(x, k), branch_on_parity(x, k))
    assert fast.jit_stats.captures == 4


class EnumeratedBlocks(paddle.nn.Layer):
    """Twelve layers in an ``enumerate`` loop whose body breaks and reads the index."""

    def __init__(self):
        super().__init__()
        self.blocks = paddle.nn.LayerList([paddle.nn.Linear(4, 4) for _ in range(12)])

    def forward(self, x):
        for i, block in enumerate(self.blocks):
            x = block(x) * (i + 1) / 12
            if x.mean() > 0:
                x = x * 0.9 - i
        return x


def test_an_enumerate_loop_over_twelve_layers_stays_compiled(backend):
    # each layer pins its own body entry (L['___loop_item'][1] is the layer): entries per
    # layer count against the limit only for that layer, as for a plain loop over layers
    paddle.seed(9)
    net = EnumeratedBlocks()
    x = paddle.rand([2, 4])
    fast = jit_core.optimize(net, backend=backend)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*recompile limit", category=RuntimeWarning)
        for _ in range(2):
            assert_same(fast(x), net(x))
    if _takes_numbers(backend):
        assert not fast.jit_stats.eager_frames, fast.jit_stats


def _takes_numbers(backend: str) -> bool:
    return jit_core.backends()[backend].number_inputs


STEP = 0


def bump_and_scale(x):
    global STEP
    STEP += 1
    y = x * STEP
    if y.sum() > 0:
        y = y + STEP
    return y


def test_a_global_counter_is_computed_not_pinned(backend):
    global STEP
    x = paddle.rand([3])
    STEP = 0
    expected = [bump_and_scale(x) for _ in range(12)]
    assert STEP == 12
    STEP = 0
    fast = jit_core.optimize(bump_and_scale, backend=backend)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*recompile limit", category=RuntimeWarning)
        got = [fast(x) for _ in range(12)]
    assert STEP == 12
    assert_same(got, expected)
    if _takes_numbers(backend):
        # STEP += 1 is written back as G['STEP'] + 1, not as a pinned constant
        assert not fast.jit_stats.eager_frames, fast.jit_stats
        assert fast.jit_stats.captures < 8, fast.jit_stats


def size_returned(x):
    return x * 2, x.shape[0] + 1


def test_a_dynamic_size_returned_is_computed_per_call():
    fast = jit_core.optimize(size_returned)
    for n in (2, 3, 4, 5, 6):
        x = paddle.rand([n, 3])
        assert_same(fast(x), size_returned(x))
    # 2, then 3 makes dimension 0 dynamic; the size returned does not pin it
    assert fast.jit_stats.captures == 2, fast.jit_stats


def integrate(x, n, dt):
    # a time step: t = i * dt is a float computed from two inputs, passed to the resume
    # function after the break as a float local
    for i in range(n):
        t = i * dt
        x = x + paddle.sin(x * t) / (i + 1)
        if x.mean() > 10:
            x = x / 10
        x = x - t / n
    return x


def test_floats_computed_from_a_counter_are_inputs_too(backend):
    x = paddle.rand([4])
    fast = jit_core.optimize(integrate, backend=backend)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*recompile limit", category=RuntimeWarning)
        for n, dt in ((12, 0.1), (12, 0.1), (7, 0.25), (20, 0.1)):
            assert_same(fast(x, n, dt), integrate(x, n, dt))
    if _takes_numbers(backend):
        assert not fast.jit_stats.eager_frames, fast.jit_stats
        notes = [n for notes in fast.jit_stats.dynamic_shapes.values() for n in notes]
        assert any(n.startswith("the float L['t'] is an input") for n in notes), notes


def divide_by_full(x, t):
    return x / paddle.full([2], t)


def test_a_float_guard_tells_zero_from_minus_zero(backend):
    # 0.0 == -0.0: a guard on the value alone served -0.0 with the graph of 0.0, and
    # x / full([2], -0.0) came out +inf instead of -inf
    # (paddle2onnx writes full(-0.0) as 0.0: the export's check refuses that model, and
    # fallback=True runs that graph on paddle, with a warning)
    options = {} if backend == "paddle" else {"fallback": True}
    x = paddle.ones([2])
    fast = jit_core.optimize(divide_by_full, backend=backend, dynamic=False, **options)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*paddle backend", category=RuntimeWarning)
        for t in (0.0, -0.0, 0.0, 2.5):
            assert_same(fast(x, t), divide_by_full(x, t))
        assert float(fast(x, -0.0)[0]) == float("-inf")


def divide_by_second(x, t):
    return x / paddle.full([2], t[1])


def divide_by_largest(x, s):
    return x / paddle.full([2], max(s))


def divide_by_largest_pair(x, s):
    return x / paddle.full([2], max(s)[1])


def divide_by_imaginary_part(x, c):
    return x / paddle.full([2], c.imag)


def divide_by_first_key(x, d):
    return x / paddle.full([2], list(d)[0])


@pytest.mark.parametrize(
    "fn, zero, minus_zero",
    [
        (divide_by_second, (1.0, 0.0), (1.0, -0.0)),
        # a tuple's items are guarded one by one, as floats; a frozenset, a complex, a
        # dict's keys and a NumPy float are each guarded whole
        (divide_by_largest, frozenset({-1.0, 0.0}), frozenset({-1.0, -0.0})),
        (divide_by_largest_pair, frozenset({(2.0, 0.0)}), frozenset({(2.0, -0.0)})),
        (divide_by_imaginary_part, complex(1.0, 0.0), complex(1.0, -0.0)),
        (divide_by_first_key, {0.0: "a"}, {-0.0: "a"}),
        (divide_by_full, np.float64(0.0), np.float64(-0.0)),
    ],
    ids=["tuple", "frozenset", "nested", "complex", "dict-key", "numpy"],
)
def test_a_guard_on_a_value_holding_a_zero_tells_it_from_minus_zero(backend, fn, zero, minus_zero):
    # frozenset({0.0}) == frozenset({-0.0}): a guard comparing the whole value with ==
    # served -0.0 with the graph that bakes 0.0 in (fallback=True: as above)
    options = {} if backend == "paddle" else {"fallback": True}
    x = paddle.ones([2])
    fast = jit_core.optimize(fn, backend=backend, dynamic=False, **options)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*paddle backend", category=RuntimeWarning)
        for value in (zero, minus_zero, zero):
            assert_same(fast(x, value), fn(x, value))
        assert float(fast(x, minus_zero)[0]) == float("-inf")


@pytest.mark.parametrize(
    "fn, make",
    [
        (divide_by_full, lambda: float("nan")),
        (divide_by_second, lambda: (1.0, float("nan"))),
        (divide_by_largest, lambda: frozenset({float("nan")})),
        (divide_by_full, lambda: np.float64(0.5)),
    ],
    ids=["nan", "tuple-nan", "frozenset-nan", "numpy"],
)
def test_a_constant_guard_holds_for_the_value_it_was_captured_at(backend, fn, make):
    # nan != nan: a guard comparing with == failed on every call, and each call captured
    # again until the recompile limit sent the function to eager (a NumPy float's guard
    # wrote its repr, np.float64(0.5) with NumPy 2, a name the guard does not know)
    # (paddle2onnx aborts on full(nan), with its log in the warning: fallback=True)
    options = {} if backend == "paddle" else {"fallback": True}
    x = paddle.ones([2])
    fast = jit_core.optimize(fn, backend=backend, dynamic=False, **options)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="(?s).*paddle backend", category=RuntimeWarning)
        for _ in range(3):
            value = make()
            assert_same(fast(x, value), fn(x, value), atol=0.0)
    assert fast.jit_stats.captures == 1, fast.jit_stats
