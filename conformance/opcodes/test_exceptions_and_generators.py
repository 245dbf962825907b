"""exceptions family and generators: try/except/finally stays capturable while nothing
raises; raising, `with` blocks, generators and coroutines run their frame eagerly with
the reason in explain(), and the results (and exceptions) are eager Paddle's."""

from __future__ import annotations

import asyncio

import paddle
import pytest

import jit_core

from ..helpers import assert_same
from .coverage import assert_covers


def guarded(x, bad=False):
    try:
        if bad:
            raise ValueError
        y = x + 1
    except ValueError:
        y = x - 1
    finally:
        x = None
    return y


def with_block(x, ctx):
    with ctx:
        y = x * 2
    return y


def generator(x):
    yield x + 1
    yield x * 2


async def coroutine(x):
    await asyncio.sleep(0)
    return x + 1


EXCEPTION_OPS = (
    "SETUP_FINALLY|PUSH_EXC_INFO",
    "RAISE_VARARGS",
    "POP_EXCEPT",
    "JUMP_IF_NOT_EXC_MATCH|CHECK_EXC_MATCH|COMPARE_OP",
    "RERAISE|END_FINALLY",
    "POP_BLOCK|NOP|JUMP_FORWARD",
)


def test_try_without_raising_is_one_graph(backend):
    assert_covers(guarded, *EXCEPTION_OPS)
    x = paddle.rand([3])
    report = jit_core.explain(jit_core.optimize(guarded, backend=backend), x)
    assert report.graph_count == 1 and report.break_count == 0, str(report)
    assert_same(report.result, guarded(x))


def test_raising_runs_eagerly_with_the_reason(backend):
    x = paddle.rand([3])
    report = jit_core.explain(jit_core.optimize(guarded, backend=backend), x, True)
    assert report.graph_count == 0 and report.break_count == 1, str(report)
    assert report.breaks[0].reason.startswith("raising"), str(report)
    assert_same(report.result, guarded(x, True))


def test_with_block_runs_eagerly_with_the_reason(backend):
    assert_covers(with_block, "SETUP_WITH|BEFORE_WITH", "WITH_CLEANUP_START|WITH_EXCEPT_START")
    x = paddle.rand([3])
    fast = jit_core.optimize(with_block, backend=backend)
    report = jit_core.explain(fast, x, paddle.no_grad())
    assert report.break_count == 1 and "`with`" in report.breaks[0].reason, str(report)
    assert_same(report.result, with_block(x, paddle.no_grad()))


@pytest.mark.parametrize("fn", [generator, coroutine], ids=["generator", "coroutine"])
def test_generators_and_coroutines_run_eagerly(fn, backend):
    if fn is generator:
        assert_covers(fn, "YIELD_VALUE", "RETURN_GENERATOR|GEN_START|YIELD_VALUE")
    else:
        assert_covers(fn, "GET_AWAITABLE", "YIELD_FROM|SEND", "RETURN_GENERATOR|GET_AWAITABLE")
    x = paddle.rand([3])
    fast = jit_core.optimize(fn, backend=backend)
    if fn is generator:
        assert_same(list(fast(x)), list(fn(x)))
    else:
        assert_same(asyncio.run(fast(x)), asyncio.run(fn(x)))
    assert fast.jit_stats.eager_frames[fn.__name__].startswith("generators and coroutines")
