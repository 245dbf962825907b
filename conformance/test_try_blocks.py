"""A graph break inside a ``try`` or ``with`` block: the frame's graph holds what comes
before the block, and the block runs in Python with its handlers (the resumed frame
enters it), so an exception raised inside is handled exactly as in eager Paddle.
Before, the whole frame ran eagerly."""

from __future__ import annotations

import paddle
import pytest

import jit_core

from .helpers import assert_same

LOG: list = []


def risky(t):
    LOG.append("risky")
    if t.sum() > 1e9:  # never: but the capture cannot know
        raise RuntimeError("too large")
    raise ValueError("always")


def try_with_print(x):
    y = paddle.tanh(x) * 2
    try:
        z = y + 1
        print("in the try block")
        z = z * 3
    except ValueError:
        z = y
    finally:
        y = y - 1
    return z + y


def try_catching_a_call(x):
    y = paddle.exp(x) * 0.5
    try:
        risky(y)
        y = y * 100  # skipped: risky raised
    except ValueError:
        y = y + 1
    return y * 2


class Noisy:
    def __enter__(self):
        LOG.append("enter")
        print("entering")
        return 2.0

    def __exit__(self, *exc):
        LOG.append("exit")
        return False


NOISY = Noisy()


def with_a_manager_that_breaks(x):
    y = x * 3
    with NOISY as k:
        y = y * k
    return y - 1


def _check(fn, x, capsys):
    LOG.clear()
    expected = fn(x)
    eager = (capsys.readouterr().out, list(LOG))
    fast = jit_core.optimize(fn)
    for _ in range(2):
        LOG.clear()
        assert_same(fast(x), expected)
        assert (capsys.readouterr().out, list(LOG)) == eager
    report = jit_core.explain(fn, x)
    capsys.readouterr()
    first = report.breaks[0]
    assert first.graph_break and "try or with block" in first.reason, str(report)
    assert report.graph_count >= 1 and report.graphs[0].op_count >= 1, str(report)
    return fast


def test_a_break_in_a_try_block_keeps_the_graph_before_it(capsys):
    _check(try_with_print, paddle.rand([3]), capsys)


def test_an_exception_in_the_block_is_handled_as_in_eager(capsys):
    _check(try_catching_a_call, paddle.rand([3]), capsys)


def test_a_with_block_whose_manager_breaks(capsys):
    _check(with_a_manager_that_breaks, paddle.rand([3]), capsys)


def test_on_every_backend(backend, capsys):
    x = paddle.rand([3])
    for fn in (try_with_print, try_catching_a_call, with_a_manager_that_breaks):
        expected = fn(x)
        assert_same(jit_core.optimize(fn, backend=backend)(x), expected)
    capsys.readouterr()


# ------------------------------------- exceptions the frame raises and catches itself


def raises_a_class_it_catches(x):
    y = x * 2
    try:
        if y.shape[0] > 1:
            raise ValueError
        y = y * 10  # skipped: the raise is taken on every call these shapes reach
    except ValueError:
        y = y - 1
    return y + 1


def reads_the_arguments_of_what_it_raised(x):
    y = paddle.tanh(x)
    try:
        if len(y.shape) == 1:
            raise ValueError("rank one", 3)
    except (KeyError, ValueError) as e:
        y = y * len(e.args[0]) - e.args[1]
    return y


def _check_rank(t):
    if t.shape[-1] < 2:
        raise IndexError(f"last dimension {t.shape[-1]} is too small")
    return t * 2


def catches_what_a_callee_raised(x):
    y = x + 1
    try:
        y = _check_rank(y[:, :1])
    except IndexError:
        y = y.sum(axis=1)
    return y * 3


def raises_what_no_clause_takes(x):
    y = x * 2
    try:
        if y.shape[0] > 1:
            raise KeyError("k")
    except ValueError:
        y = y - 1
    return y


def _counts(fn, x):
    report = jit_core.explain(fn, x)
    return (report.graph_count, report.break_count), report


def test_an_exception_the_frame_raises_and_catches_stays_in_the_graph(backend):
    """``raise E(...)`` of a built-in exception made from constants is taken to the handler
    that catches it, as CPython would, in the frame or a caller's: one graph, no break."""
    for fn, x in (
        (raises_a_class_it_catches, paddle.rand([3])),
        (reads_the_arguments_of_what_it_raised, paddle.rand([4])),
        (catches_what_a_callee_raised, paddle.rand([2, 5])),
    ):
        found, report = _counts(fn, x)
        assert found == (1, 0), str(report)
        fast = jit_core.optimize(fn, backend=backend)
        for _ in range(2):
            assert_same(fast(x), fn(x))


def test_an_exception_no_clause_takes_leaves_the_frame_as_in_eager(backend):
    x = paddle.rand([3])
    fast = jit_core.optimize(raises_what_no_clause_takes, backend=backend)
    for _ in range(2):
        with pytest.raises(KeyError, match="k"):
            fast(x)
    assert fast.jit_stats.compiled >= 1
