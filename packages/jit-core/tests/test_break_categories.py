"""Every break has a stable category (``jit_core.errors.CATEGORIES``, like TorchDynamo's
``gb_type``): one representative function per category, checked through explain()."""

from __future__ import annotations

import threading
import time

import paddle
import pytest

import jit_core
from jit_core import errors
from jit_core.errors import GraphBreakError, Unsupported

COUNTER = 0


class Box:
    # no __dict__: a store on it is a side effect the capture leaves to Python (one on a
    # plain object is written back after the graph instead)
    __slots__ = ("value",)


class Computed:
    def __getattr__(self, name):
        return 3


def tensor_branch(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def data_leaves_graph(x):
    return x.tolist()


def io_call(x):
    print("io_call prints")
    return x + 1


def global_store(x):
    global COUNTER
    COUNTER = 1
    return x + 1


def attribute_store(x, box):
    box.value = 1
    return x + 1


def inplace_on_input(x, y):
    x.add_(y)
    return x * 2


def untraced_call(x):
    return x + time.time()


def class_statement(x):
    class Local:
        pass

    return x + 1


class _Custom(Exception):
    """(the capture raises only built-in exceptions itself)"""


def raises(x, flag):
    try:
        if flag:
            raise _Custom
    except _Custom:
        pass
    return x + 1


def generator(x):
    yield x + 1


def unknown_context_manager(x, lock):
    with lock:
        y = x + 1
    return y


def dynamic_attribute(x, obj):
    return x + obj.anything


def returns_a_map(x):
    return map(abs, [x + 1])


def long_tensor_loop(x):
    out = x[0]
    for row in x:
        out = out + row
    return out


def _t(*shape):
    return paddle.ones(list(shape))


CASES = [
    (tensor_branch, lambda: (_t(3),), errors.TENSOR_BRANCH),
    (data_leaves_graph, lambda: (_t(3),), errors.DATA_LEAVES_GRAPH),
    (io_call, lambda: (_t(3),), errors.IO_CALL),
    (global_store, lambda: (_t(3),), errors.SIDE_EFFECT),
    (attribute_store, lambda: (_t(3), Box()), errors.SIDE_EFFECT),
    (inplace_on_input, lambda: (_t(3), _t(3)), errors.INPLACE_OUTSIDE),
    (untraced_call, lambda: (_t(3),), errors.UNTRACED_CALL),
    (class_statement, lambda: (_t(3),), errors.UNSUPPORTED_OPCODE),
    (raises, lambda: (_t(3), True), errors.RAISES),
    (generator, lambda: (_t(3),), errors.GENERATOR),
    (unknown_context_manager, lambda: (_t(3), threading.Lock()), errors.CONTEXT_MANAGER),
    (dynamic_attribute, lambda: (_t(3), Computed()), errors.DYNAMIC_VALUE),
    (returns_a_map, lambda: (_t(3),), errors.RECONSTRUCT),
    (long_tensor_loop, lambda: (_t(100, 2),), errors.LIMIT),
]


@pytest.mark.parametrize("fn, make, category", CASES, ids=[c[0].__name__ for c in CASES])
def test_first_break_has_the_category(fn, make, category, capsys):
    report = jit_core.explain(jit_core.optimize(fn), *make())
    capsys.readouterr()
    assert report.break_count >= 1, str(report)
    assert report.breaks[0].category == category, str(report)
    assert f"[{category}]" in str(report.breaks[0])
    assert report.breaks[0].category in errors.CATEGORIES


def test_categories_are_distinct_strings():
    assert len(set(errors.CATEGORIES)) == len(errors.CATEGORIES)
    assert all(isinstance(c, str) and c == c.lower() for c in errors.CATEGORIES)


def test_unsupported_defaults_to_the_generic_category():
    assert Unsupported("something").category == errors.UNSUPPORTED
    assert Unsupported("x", category=errors.LIMIT).category == errors.LIMIT


def test_category_survives_the_rewording_of_a_reason():
    e = Unsupported("print writes output", category=errors.IO_CALL)
    assert e.could_not_break("no room").category == errors.IO_CALL


def keeps_a_map(x):
    m = map(abs, [1, -2])
    print("a side effect")
    return x + sum(m)


def test_a_break_that_could_not_be_placed_keeps_the_category_of_its_cause():
    report = jit_core.explain(keeps_a_map, _t(2))
    brk = report.breaks[0]
    # the map object, live across the print, cannot be rebuilt after the graph: the
    # frame runs eagerly, for the reason that stopped the capture (output)
    assert not brk.graph_break and "could not break there" in brk.reason, str(report)
    assert brk.category == errors.IO_CALL


def test_full_graph_error_carries_the_category():
    fast = jit_core.optimize(tensor_branch, full_graph=True)
    with pytest.raises(GraphBreakError) as info:
        fast(_t(3))
    assert info.value.category == errors.TENSOR_BRANCH


def test_eager_frames_and_graph_breaks_both_carry_it(capsys):
    report = jit_core.explain(io_call, _t(3))
    capsys.readouterr()
    assert report.breaks[0].graph_break and report.breaks[0].category == errors.IO_CALL
    # an eager frame (generators run eagerly as a whole)
    report = jit_core.explain(jit_core.optimize(generator), _t(3))
    assert not report.breaks[0].graph_break
    assert report.breaks[0].category == errors.GENERATOR
