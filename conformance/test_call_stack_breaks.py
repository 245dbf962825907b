"""A graph break inside a call's arguments: the outer callable, and the NULL or ``self``
CPython keeps next to it, wait on the stack while the inner call runs in Python, and the
resume function must put them back exactly as the calling convention of the running
Python lays them out (3.11/3.12: NULL below the callable; 3.13: above it, where CALL
reads anything but a NULL as ``self`` and CALL_FUNCTION_EX ignores the slot). A method
bound to a tensor waits there too, and is read again as that tensor's method."""

from __future__ import annotations

import paddle
import pytest

import jit_core

from .helpers import assert_same


def printing_double(x):
    print("inner")  # breaks the graph inside the call
    return x * 2


def add3(a, b, c):
    return a + b + c


def module_function(x):
    return paddle.add(x, printing_double(x) + 1)


def star_args(x):
    return add3(*[x, printing_double(x), x])  # CALL_FUNCTION_EX


def method_of_a_tensor(x):
    return x.add(printing_double(x)).sum()  # the method form: LOAD_ATTR's NULL or self


def keyword_arguments(x, axis=0):
    return paddle.concat([x, printing_double(x)], axis=axis)  # CALL_KW on 3.13


def builtin_with_start(x):
    return sum([printing_double(x), x], paddle.zeros([3]))


CASES = [module_function, star_args, method_of_a_tensor, keyword_arguments, builtin_with_start]


@pytest.mark.parametrize("fn", CASES, ids=lambda fn: fn.__name__)
def test_a_break_inside_call_arguments_resumes_the_outer_call(fn, backend, capsys):
    x = paddle.rand([3])
    expected = fn(x)
    eager_out = capsys.readouterr().out
    report = jit_core.explain(jit_core.optimize(fn, backend=backend), x)
    assert capsys.readouterr().out == eager_out
    assert_same(report.result, expected)
    # the frame up to the inner call, the inner function before and after its print,
    # and the rest of the frame with the outer call
    assert (report.graph_count, report.break_count) == (4, 2), str(report)
    # new values through the same entries: the stack held a method bound to the first
    # call's tensor (``x.add``), which a capture once kept as a constant of its graph
    fast = jit_core.optimize(fn, backend=backend)
    for _ in range(3):
        x = paddle.rand([3])
        assert_same(fast(x), fn(x))
    assert fast.jit_stats.captures == 4


class Settings:
    """A user object whose method breaks the graph (it prints), called with its arguments
    unpacked: CALL_FUNCTION_EX on every Python, with the bound method as the callable."""

    def __init__(self):
        self.total = 0

    def update(self, a=1, b=2):
        print(f"update {a} {b}")
        self.total = a + b
        return self.total


def method_with_keywords(x, settings, options):
    return x * settings.update(**options)


def method_with_star_args(x, settings, args):
    return x + settings.update(*args)


@pytest.mark.parametrize(
    "fn, unpacked",
    [(method_with_keywords, {"a": 3, "b": 4}), (method_with_star_args, (5, 6))],
    ids=["keywords", "star_args"],
)
def test_a_method_called_with_unpacked_arguments_breaks_as_a_call(fn, unpacked, backend, capsys):
    # (it raised "missing 1 required positional argument: 'self'": the method was called
    # as its function with the object left out of the unpacked arguments)
    x = paddle.rand([3])
    settings = Settings()
    expected = fn(x, settings, unpacked)
    eager_out = capsys.readouterr().out
    mine = Settings()
    report = jit_core.explain(jit_core.optimize(fn, backend=backend), x, mine, unpacked)
    assert capsys.readouterr().out == eager_out
    assert_same(report.result, expected)
    assert mine.total == settings.total == 7 + 4 * isinstance(unpacked, tuple)
    # the frame up to the call; the method before its print and after it (its store on
    # the object is set after that graph); the rest of the frame
    assert (report.graph_count, report.break_count) == (4, 2), str(report)
    assert "L['self'].total = " in str(report)
    fast = jit_core.optimize(fn, backend=backend)
    for _ in range(3):
        x = paddle.rand([3])
        assert_same(fast(x, Settings(), unpacked), fn(x, Settings(), unpacked))
    assert not fast.jit_stats.eager_frames
