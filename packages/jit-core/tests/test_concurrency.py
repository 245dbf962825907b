"""The frame cache under concurrent first use (the races themselves, made to happen)."""

from __future__ import annotations

import threading

import paddle

import jit_core
from jit_core.runtime import eval_frame


def callee(x):
    return x * 2


def seen_by_the_hook(x):
    return x + 1


def test_two_threads_meeting_a_code_first_share_one_cache(monkeypatch):
    # Thread A is made to stop inside the creation of a code's cache (before it is
    # stored) while thread B asks for the cache of the same code. B must wait and get A's
    # cache: before, B made a second one, and A's entries went to a cache that B had
    # replaced (the capture was done twice).
    fast = jit_core.optimize(callee)
    ctx = fast._ctx
    code = seen_by_the_hook.__code__  # a callee, not the target
    got = {}
    real = eval_frame._keep_hooking

    def in_thread_b():
        got["b"] = ctx.cache_for(code)

    def keep_hooking_with_b_racing(c):
        if c is code and "b_started" not in got:
            got["b_started"] = True
            b = threading.Thread(target=in_thread_b)
            b.start()
            # B runs meanwhile (to the end, where nothing stops it); not asserted on:
            # the assertion below holds however the two threads interleave
            b.join(0.5)
            got["thread"] = b
        real(c)

    monkeypatch.setattr(eval_frame, "_keep_hooking", keep_hooking_with_b_racing)
    got["a"] = ctx.cache_for(code)
    got["thread"].join()
    assert got["b"] is got["a"]
    assert ctx.cache[code] is got["a"]
    monkeypatch.undo()
    assert (fast(paddle.ones([2])).numpy() == 2).all()
