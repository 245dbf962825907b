"""Containers made in the frame and mutated there, map/filter, and generator expressions
consumed in the frame: each is one graph with no break, and equals eager Paddle.

A list or dict made in the frame is the capture's own: its methods (sort, remove, insert,
popitem, update...) change the tracker. ``map``/``filter`` and generator expressions are
iterators whose items come from running code: that code runs when the iterator is
consumed (as CPython runs it), all at once for ``tuple(...)``/unpacking/``sum(...)``,
and, for a ``for`` loop or ``next()``, only when it has no side effects that could
interleave with the loop's. A generator whose body cannot be captured runs its frame
eagerly with the reason.
"""

from __future__ import annotations

import paddle
import paddle.nn.functional as F
import pytest

import jit_core

from .helpers import assert_same


def _t(*shape):
    return paddle.rand(list(shape))


def double(t):
    return t * 2


# ---------------------------------------------------------------- lists made in the frame


def list_methods(x):
    items = [3, 1, 2]
    items.sort()
    items.remove(2)
    items.insert(0, 5)
    items.reverse()
    last = items.pop()
    n = len(items)
    items.clear()
    return x * n + last, items


def list_sort_key(x, y):
    ts = [x, y[:2], y]
    ts.sort(key=lambda t: t.shape[0])
    ts.sort(key=lambda t: -t.shape[0], reverse=False)
    return ts[0] + 1, sorted([x, y], key=lambda t: t.shape[0], reverse=True)[0]


def list_slices(x):
    items = [x, x + 1, x + 2, x + 3]
    items[1:2] = [x * 10, x * 20]
    del items[0]
    del items[1:3]
    items[0] = items[0] - 1
    items += [x]
    items.extend((x, x))
    return items, [1, 3].index(3)


def list_misc(x):
    items = [x, 2, 3]
    items.append(4)
    k = [2, 3, 2].count(2)
    m = items.copy()
    m.remove(x)
    first = items.pop(0)
    return first * k, m, items


# ---------------------------------------------------------------- dicts made in the frame


def dict_methods(x):
    d = {"a": x, "b": x + 1}
    d.update({"c": x * 2})
    d.update(e=x * 3)
    d.update([("f", x * 4)])
    d.setdefault("g", x * 5)
    d.setdefault("a", x * 6)
    p = d.pop("b")
    q = d.pop("zz", x * 7)
    k, v = d.popitem()
    e = d.copy()
    got = d.get("a"), d.get("nope", 3)
    d.clear()
    return p, q, k, v, e, got, d


def dict_fromkeys(x):
    d = dict.fromkeys(["a", "b"], x)
    c = dict.fromkeys(("u", "v"))
    return d, c, list(d.items())


# ---------------------------------------------------------------- map and filter


def map_lambda(x, y):
    a, b = map(lambda t: t + 1, (x, y))
    return a, b, list(map(double, [x, y])), tuple(map(F.relu, [x - 0.5, y]))


def map_builtin(x):
    dims = list(map(int, ["1", "2"]))
    sizes = tuple(map(len, [[1], [1, 2]]))
    pairs = list(map(lambda a, b: a * b, [x, x], [2, 3]))
    return x.reshape([-1]).shape[0] * sum(dims) + sum(sizes), pairs


def filter_calls(x):
    evens = list(filter(lambda i: i % 2 == 0, range(6)))
    kept = list(filter(None, [0, 1, 2]))
    ts = [t for t in filter(lambda t: t.shape[0] > 1, [x, x[:1]])]
    return x * len(evens) + sum(kept), ts


def map_in_loop(x, y):
    total = x
    for t in map(paddle.tanh, [x, y]):
        total = total + t
    return total


# ---------------------------------------------------------------- generator expressions


def genexpr_unpack(q, k, v):
    q, k, v = (t.transpose([0, 2, 1, 3]) for t in (q, k, v))
    return paddle.matmul(q, k, transpose_y=True) + v.sum()


def genexpr_sum(x):
    return sum(x * i for i in range(3))


def genexpr_tuple_list(x, y):
    ts = (x, y)
    return tuple(double(t) for t in ts), list(t + 1 for t in ts if t.shape[0] > 1)


def genexpr_constants(x):
    flags = [1, 0, 3]
    a = any(f > 2 for f in flags)
    b = all(f >= 0 for f in flags)
    name = "".join(str(i) for i in range(3))
    n = max(len(s) for s in ["ab", "c"])
    return x * (a + b + n), name, sorted(i * -1 for i in flags), set(i % 2 for i in flags)


def genexpr_zip_enumerate(x, y):
    out = dict((i, t * 2) for i, t in enumerate([x, y]))
    pairs = list(zip((t + 1 for t in [x, y]), range(2)))
    return out, pairs, dict(zip("ab", (t.mean() for t in (x, y))))


def genexpr_for_loop(x, y):
    total = x
    for t in (F.relu(t) for t in (x, y)):
        total = total + t
    return total


def genexpr_next(x, y):
    it = (t * 3 for t in (x, y))
    first = next(it)
    rest = list(it)
    return first, rest, next(iter([]), x)


def genexpr_closure(x):
    scale = 3
    g = (x * scale + i for i in range(2))
    scale = 4  # the generator reads the cell when it runs, as CPython does
    return tuple(g)


def user_generator_function(x):
    def halves(t):
        yield t[:2]
        yield t[2:]

    a, b = halves(x)
    return a + b


CASES = [
    (list_methods, lambda: ((_t(3),), {})),
    (list_sort_key, lambda: ((_t(2), _t(3)), {})),
    (list_slices, lambda: ((_t(3),), {})),
    (list_misc, lambda: ((_t(3),), {})),
    (dict_methods, lambda: ((_t(3),), {})),
    (dict_fromkeys, lambda: ((_t(3),), {})),
    (map_lambda, lambda: ((_t(3), _t(3)), {})),
    (map_builtin, lambda: ((_t(2, 3),), {})),
    (filter_calls, lambda: ((_t(3),), {})),
    (map_in_loop, lambda: ((_t(3), _t(3)), {})),
    (genexpr_unpack, lambda: ((_t(2, 3, 2, 4), _t(2, 3, 2, 4), _t(2, 3, 2, 4)), {})),
    (genexpr_sum, lambda: ((_t(3),), {})),
    (genexpr_tuple_list, lambda: ((_t(3), _t(1)), {})),
    (genexpr_constants, lambda: ((_t(3),), {})),
    (genexpr_zip_enumerate, lambda: ((_t(3), _t(3)), {})),
    (genexpr_for_loop, lambda: ((_t(3), _t(3)), {})),
    (genexpr_next, lambda: ((_t(3), _t(3)), {})),
    (genexpr_closure, lambda: ((_t(3),), {})),
    (user_generator_function, lambda: ((_t(4),), {})),
]


@pytest.mark.parametrize("fn,make", CASES, ids=[fn.__name__ for fn, _ in CASES])
def test_one_graph_equal_to_eager(fn, make, backend):
    args, kwargs = make()
    report = jit_core.explain(jit_core.optimize(fn, backend=backend), *args, **kwargs)
    assert (report.graph_count, report.break_count) == (1, 0), str(report)
    assert_same(report.result, fn(*args, **kwargs))
    fast = jit_core.optimize(fn, backend=backend)
    for _ in range(2):  # the capture, then a cache hit with new values
        args, kwargs = make()
        assert_same(fast(*args, **kwargs), fn(*args, **kwargs))
    assert fast.jit_stats.captures == 1 and not fast.jit_stats.eager_frames


# ---------------------------------------------------------------- what stays eager


def genexpr_that_prints(x):
    return tuple(print(t) or t * 2 for t in (x, x + 1))


def loop_interleaves_with_generator(x):
    seen = []
    total = x
    for t in (seen.append(i) or x * i for i in range(3)):
        total = total + t * len(seen)  # eager: 1, 2, 3 items seen at each step
    return total


def genexpr_raises(x):
    return tuple(t / 0 for t in (1, 2)), x


def generator_in_no_grad(x):
    def gen(t):
        with paddle.no_grad():
            yield t * 2

    out = x
    for t in gen(x):
        out = out * t
    return out


EAGER = [
    (genexpr_that_prints, "print writes output"),
    (loop_interleaves_with_generator, "step by step"),
    (generator_in_no_grad, "step by step"),
]


@pytest.mark.parametrize("fn,reason", EAGER, ids=[fn.__name__ for fn, _ in EAGER])
def test_generators_that_cannot_be_captured_run_eagerly(fn, reason, backend):
    x = _t(3)
    x.stop_gradient = False
    report = jit_core.explain(jit_core.optimize(fn, backend=backend), x)
    assert report.graph_count == 0, str(report)
    assert any(reason in b.reason for b in report.breaks), str(report)
    assert_same(report.result, fn(x))


def test_a_generator_that_raises_runs_eagerly_and_raises(backend):
    fast = jit_core.optimize(genexpr_raises, backend=backend)
    with pytest.raises(ZeroDivisionError):
        fast(_t(3))
    reasons = list(fast.jit_stats.eager_frames.values())
    assert reasons and "ZeroDivisionError" in reasons[0], reasons
