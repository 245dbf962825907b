"""A graph break inside a ``try`` or ``with`` block: the frame's graph holds what comes
before the block, and the block runs in Python with its handlers (the resumed frame
enters it), so an exception raised inside is handled exactly as in eager Paddle.
Before, the whole frame ran eagerly."""

from __future__ import annotations

import paddle

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
