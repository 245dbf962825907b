"""Discrepancies the differential fuzzer found, each shrunk to a plain reproducer.

Each stays ``xfail(strict=True)`` until the core is fixed: the fix turns it into an
XPASS, which fails, and the one who fixed it removes the mark (and its line in
``test_differential.KNOWN_BUGS``). Where a bug shows on some Pythons only, the mark is
conditional on those."""

from __future__ import annotations

import sys

import paddle
import pytest

import jit_core

from ..helpers import assert_same


def _agree(backend, fn, *args):
    expected = fn(*args)
    assert_same(jit_core.optimize(fn, backend=backend)(*args), expected)


def _nested_loops_inner_break(x):
    n = 0
    for _ in range(2):
        for _ in range(2):
            n += int(x.numpy().sum())
    return n


@pytest.mark.xfail(
    sys.version_info >= (3, 9),
    strict=True,
    reason="a graph break in an inner loop makes resume functions of resume functions "
    "without end: RecursionError (3.8 recovers by running the frame eagerly)",
)
def test_graph_break_in_nested_loop(backend):
    _agree(backend, _nested_loops_inner_break, paddle.ones([2]))


def _loop_after_break(k, keys):
    d = {}
    k.max().item()
    for j in keys:
        d.setdefault("a", j)
    return d


@pytest.mark.xfail(
    sys.version_info >= (3, 11),
    strict=True,
    reason="a for loop run after a graph break reads a local of the frame as _Unbound",
)
def test_loop_after_break_sees_its_locals(backend):
    _agree(backend, _loop_after_break, paddle.ones([3], dtype="int64"), [3, 1])


def _tensor_list_in_loop_after_break(x):
    x.mean().item()
    for j in [1, 2]:
        print(j)
        t = [x, x]
    return t


@pytest.mark.xfail(
    sys.version_info >= (3, 11),
    strict=True,
    reason="a list of tensors built in a loop with a break, after a break, holds the loop "
    "variable instead: [2, 2]",
)
def test_loop_after_break_keeps_tensor_list(backend):
    _agree(backend, _tensor_list_in_loop_after_break, paddle.ones([3]))
