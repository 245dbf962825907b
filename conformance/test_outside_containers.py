"""Lists and dicts from outside the frame (arguments, globals, attributes, defaults) that
the captured code mutates: the mutation is no graph break. The capture keeps the new
contents and the generated code writes them into the very object after the graph (at the
return, or before the instruction of a graph break), so everything after sees what eager
Paddle leaves: the same object, the same items in the same order, the same tensors.

Each test runs eagerly and compiled on fresh copies of the containers and compares
results, containers and graph/break counts.
"""

from __future__ import annotations

import copy
import io
from contextlib import redirect_stdout

import paddle
import pytest

import jit_core

from .helpers import assert_same


def _t(*shape):
    return paddle.rand(list(shape))


def _fresh(value):
    """A copy of ``value`` whose lists and dicts, nested ones too, are new objects holding
    the same items (the same tensor objects, as the caller's containers would)."""
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_fresh(v) for v in value)
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    return value


def _agree(fn, args, backend, graphs_breaks=(1, 0), calls=3):
    """``fn`` compiled leaves the same result and the same containers as eager, on fresh
    copies of ``args`` each call (the later calls take the cache); its capture makes
    ``graphs_breaks``."""
    report = jit_core.explain(fn, *_fresh(args))
    assert (report.graph_count, report.break_count) == graphs_breaks, str(report)
    fast = jit_core.optimize(fn, backend=backend)
    captures = []
    for _ in range(calls):
        eager_args, jit_args = _fresh(args), _fresh(args)
        expected = fn(*eager_args)
        got = fast(*jit_args)
        assert_same(got, expected)
        assert_same(jit_args, eager_args)
        captures.append(fast.jit_stats.captures)
    assert captures[1:] == captures[:-1], fast.jit_stats  # the later calls hit the cache
    assert not fast.jit_stats.eager_frames, fast.jit_stats
    return fast


# ---------------------------------------------------------------- lists


def list_methods(x, items, names):
    y = x * 2
    items.append(y)
    items.extend([y + 1, 3])
    items.insert(0, y - 1)
    last = items.pop()
    items[0] = items[0] * 10
    del items[-1]
    names.remove("b")
    names.insert(names.index("c"), "z")
    names += ["d"]
    return paddle.stack(items[:2]).sum() + last + names.count("a")


def test_list_methods_on_an_argument(backend):
    _agree(list_methods, (_t(3), [_t(3)], ["a", "b", "c"]), backend)


def sort_by_size(xs, x):
    xs.sort(key=lambda t: t.shape[0])
    xs.reverse()
    return x + xs[0].sum()


def test_sort_and_reverse_an_argument_list(backend):
    # the caller's list is reordered in place, its items the caller's own tensors
    xs = [_t(3), _t(1), _t(2)]
    fast = _agree(sort_by_size, (xs, _t(2)), backend)
    mine = list(xs)
    fast(mine, _t(2))
    assert [id(t) for t in mine] == [id(t) for t in sorted(xs, key=lambda t: -t.shape[0])]


def clear_then_fill(x, out):
    out.clear()
    for k in range(3):
        out.append(x * k)
    return len(out)


def test_clear_then_refill(backend):
    _agree(clear_then_fill, (_t(2), [_t(2), _t(2)]), backend)


def keep_first(xs, x):
    first = xs[0]  # read before the list changes: the caller's first tensor
    xs.insert(0, x * 3)
    return first + xs[0]


def test_an_item_read_before_an_insert_is_the_old_item(backend):
    _agree(keep_first, ([_t(2), _t(2)], _t(2)), backend)


def returns_the_list(x, acc):
    acc.append(x + 1)
    return acc, acc[-1] * 2


def test_the_mutated_list_returned_is_the_callers_object(backend):
    fast = _agree(returns_the_list, (_t(2), []), backend)
    mine: list = []
    got, _ = fast(_t(2), mine)
    assert got is mine and len(mine) == 1


# ---------------------------------------------------------------- dicts


def dict_methods(x, table):
    table["sum"] = x.sum()
    table.update(b=x * 2, a=x + 1)
    old = table.pop("old")
    table.setdefault("new", old)
    del table["a"]
    return table["b"] + table["sum"]


def test_dict_methods_on_an_argument(backend):
    # the keys end in eager's order (assert_same compares key order)
    _agree(dict_methods, (_t(3), {"a": 1, "old": 2.0}), backend)


def nested(x, cfg):
    cfg["hist"].append(x.mean())
    cfg["steps"] = len(cfg["hist"])
    return x * cfg["steps"]


def test_a_list_inside_a_dict(backend):
    _agree(nested, (_t(3), {"hist": [], "steps": 0}), backend, calls=1)


# ---------------------------------------------------------------- globals and attributes

HISTORY: list = []


def log_to_global(x):
    y = x.exp()
    HISTORY.append(y)
    return y + len(HISTORY)


def test_a_global_list(backend):
    HISTORY.clear()
    expected = [log_to_global(x) for x in (paddle.ones([2]), paddle.zeros([2]))]
    eager_history = list(HISTORY)
    HISTORY.clear()
    report = jit_core.explain(log_to_global, paddle.ones([2]))
    assert (report.graph_count, report.break_count) == (1, 0), str(report)
    HISTORY.clear()
    fast = jit_core.optimize(log_to_global, backend=backend)
    got = [fast(x) for x in (paddle.ones([2]), paddle.zeros([2]))]
    assert_same(got, expected)
    assert_same(HISTORY, eager_history)


class Recorder(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(3, 3)
        self.seen: list = []
        self.stats: dict = {}

    def forward(self, x):
        h = self.fc(x)
        self.seen.append(h)
        self.stats["mean"] = h.mean()
        return paddle.nn.functional.relu(h)


def test_a_layer_keeps_its_history(backend):
    paddle.seed(3)
    net = Recorder()
    net.eval()
    twin = copy.deepcopy(net)
    x = _t(2, 3)
    report = jit_core.explain(copy.deepcopy(net), x)
    assert (report.graph_count, report.break_count) == (1, 0), str(report)
    fast = jit_core.optimize(twin, backend=backend)
    for _ in range(2):
        assert_same(fast(x), net(x))
    assert_same(twin.seen, net.seen)
    assert_same(twin.stats, net.stats)


# ---------------------------------------------------------------- at a graph break


def append_then_print(x, acc):
    acc.append(x * 2)
    print(len(acc), acc[-1].shape)  # a graph break: it must see the appended item
    acc.append(x * 3)
    return paddle.stack(acc).sum()


def test_a_break_sees_what_was_appended_before_it(backend):
    x = _t(2)
    eager_acc, jit_acc = [], []
    with redirect_stdout(io.StringIO()) as eager_out:
        expected = append_then_print(x, eager_acc)
    fast = jit_core.optimize(append_then_print, backend=backend)
    with redirect_stdout(io.StringIO()) as jit_out:
        got = fast(x, jit_acc)
    assert jit_out.getvalue() == eager_out.getvalue()
    assert_same(got, expected)
    assert_same(jit_acc, eager_acc)
    with redirect_stdout(io.StringIO()):
        report = jit_core.explain(append_then_print, x, [])
    assert (report.graph_count, report.break_count) == (2, 1), str(report)


def collect_in_loop(x, outs):
    for _ in range(3):
        x = x * 1.5
        outs.append(x)
        if x.mean() > 1:  # a break in every iteration: the body is its own function
            x = x - 1
    return x


def test_a_loop_body_that_breaks_appends_to_an_outside_list(backend):
    # the body function only appends to the list: its length is not guarded, so one
    # capture of the body serves every iteration (it was one per length)
    x = paddle.full([2], 0.5)
    _agree(collect_in_loop, (x, []), backend, graphs_breaks=(4, 2), calls=2)
    fast = jit_core.optimize(collect_in_loop, backend=backend)
    fast(x, [])
    bodies = {k: n for k, n in fast.jit_stats.entries.items() if "loop_body" in k}
    assert bodies and all(n == 1 for n in bodies.values()), fast.jit_stats


# ---------------------------------------------------------------- one object, two paths


def two_lists(a, b, x):
    a.append(x)
    return len(b)


def test_two_arguments_that_are_one_list(backend):
    # captured with two lists, called with one list twice (and the other way round): the
    # append must show through the other argument as in eager
    x = _t(2)
    fast = jit_core.optimize(two_lists, backend=backend)
    assert fast([], [], x) == two_lists([], [], x)
    shared: list = []
    assert fast(shared, shared, x) == 1 == len(shared)
    again: list = []
    assert fast(again, again, x) == 1
    assert fast([], [1, 2], x) == 2


def alias_through_attribute(holder, items, x):
    items.append(x)
    return len(holder.items)


class Holder:
    def __init__(self, items):
        self.items = items


def test_one_list_reached_by_two_paths(backend):
    x = _t(2)
    fast = jit_core.optimize(alias_through_attribute, backend=backend)
    shared: list = []
    assert fast(Holder(shared), shared, x) == 1  # eager: the same list
    other: list = []
    assert fast(Holder([]), other, x) == 0  # now two lists
    assert len(other) == 1
    shared2: list = []
    assert fast(Holder(shared2), shared2, x) == 1


# ---------------------------------------------------------------- what still breaks


def sort_by_value(xs):
    xs.sort(key=lambda t: float(t.sum()))  # the keys need tensor values
    return xs[0] * 2


def test_a_mutation_that_needs_tensor_values_still_breaks(backend):
    xs = [paddle.full([2], 3.0), paddle.full([2], 1.0)]
    fast = jit_core.optimize(sort_by_value, backend=backend)
    mine, theirs = list(xs), list(xs)
    assert_same(fast(mine), sort_by_value(theirs))
    assert [id(t) for t in mine] == [id(t) for t in theirs]


def test_capture_refuses_a_function_that_mutates_an_argument():
    with pytest.raises(jit_core.CaptureError, match="side effect"):
        jit_core.capture(returns_the_list, _t(2), [])


STEPS: list = []


def steps(n):
    for i in range(n):
        STEPS.append(i)  # seen by the consumer between two of its steps
        yield i


def consume_step_by_step(x):
    seen = []
    for i in steps(3):
        seen.append(len(STEPS))
        x = x + i
    return x, seen


def test_a_generator_mutating_an_outside_list_interleaves_as_in_eager(backend):
    x = _t(2)
    STEPS.clear()
    expected = consume_step_by_step(x)
    STEPS.clear()
    got = jit_core.optimize(consume_step_by_step, backend=backend)(x)
    assert_same(got, expected)
    assert STEPS == [0, 1, 2]
