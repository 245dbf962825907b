"""A value the capture only passes through is not guarded.

A loop body function hands every local back to its loop (``codegen.loops``); a resume
function of the body that never reads a local only returns it. Guarding it would make a
new capture each time its shape or value changes, for a graph that does not depend on it.
"""

from __future__ import annotations

import contextlib
import io

import paddle

import jit_core

from .helpers import assert_same


def grows(x, n):
    hist = x
    for i in range(n):
        hist = paddle.concat([hist, x])  # a new shape each iteration
        print(i)  # a break: what follows is a resume function of the body
        x = x * 2  # ...which passes hist through without reading it
    return x, hist


def test_a_local_only_passed_through_adds_no_guard(backend):
    fast = jit_core.optimize(grows, backend=backend, dynamic=False)
    x = paddle.ones([2])
    with contextlib.redirect_stdout(io.StringIO()):
        got, expected = fast(x, 6), grows(x, 6)
    assert_same(got, expected)
    entries = fast.jit_stats.entries
    body = [k for k in entries if "loop_body" in k and "resume" not in k]
    after_print = [k for k in entries if "loop_body" in k and "resume" in k]
    # the body reads hist (concat): one entry per shape; the code after print does not
    assert [entries[k] for k in body] == [6], entries
    assert [entries[k] for k in after_print] == [1], entries
