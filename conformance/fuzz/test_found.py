"""Discrepancies the differential fuzzer found, each shrunk to a plain reproducer.

An open one stays ``xfail(strict=True)`` until the core is fixed: the fix turns it into
an XPASS, which fails, and the one who fixed it removes the mark (and its line in
``test_differential.KNOWN_BUGS``). Where a bug shows on some Pythons only, the mark is
conditional on those. A fixed one stays here as a plain regression test."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

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


def test_graph_break_in_nested_loop(backend):
    # was: resume functions of resume functions without end (RecursionError); the inner
    # loop is now outlined from the outer loop's body
    _agree(backend, _nested_loops_inner_break, paddle.ones([2]))
    report = jit_core.explain(_nested_loops_inner_break, paddle.ones([2]))
    assert any("loop_body_at" in g.frame and g.frame.count("loop_body") == 2 for g in report.graphs)


def _loop_after_break(k, keys):
    d = {}
    k.max().item()
    for j in keys:
        d.setdefault("a", j)
    return d


def test_loop_after_break_sees_its_locals(backend):
    # was (3.11+): the loop body's resume function took two arguments named ___stack0
    _agree(backend, _loop_after_break, paddle.ones([3], dtype="int64"), [3, 1])


def _tensor_list_in_loop_after_break(x):
    x.mean().item()
    for j in [1, 2]:
        print(j)
        t = [x, x]
    return t


def test_loop_after_break_keeps_tensor_list(backend):
    # was (3.11+), a wrong result: [2, 2], the loop variable in the slot of x
    _agree(backend, _tensor_list_in_loop_after_break, paddle.ones([3]))


def _inner_loop_then_a_later_local(x, m):
    for _ in range(m % 4):
        for _ in range(3):
            t = paddle.to_tensor(x.numpy()) + x
    s = paddle.zeros([])  # unbound while the loops run
    for r in x:
        s = s + r.sum()
    return s, t


def test_inner_loop_with_a_local_unbound_during_the_loops(backend):
    # was (3.12): a segfault. The outer body's resume function after the inner loop did
    # not get the names unbound so far, and the body's exit read them with LOAD_FAST
    for x, m in ((paddle.ones([3]), 2), (paddle.ones([3]), 2), (paddle.rand([3]), 3)):
        _agree(backend, _inner_loop_then_a_later_local, x, m)


def _inner_loop_after_a_break_in_the_outer_body(x, m):
    for _ in range(m):
        y = x * 2
        print("outer")
        for _ in range(2):
            print("inner")
            y = y + 1
    z = y + 1
    return z


def test_inner_loop_after_a_break_in_the_outer_body(backend, capsys):
    # the inner loop is outlined from a resume function of the outer body: the same
    # rule (every name, UNBOUND ones too) holds there
    for x, m in ((paddle.ones([3]), 2), (paddle.ones([3]), 2), (paddle.rand([3]), 3)):
        _agree(backend, _inner_loop_after_a_break_in_the_outer_body, x, m)
    out = capsys.readouterr().out
    assert out.count("outer") == 14 and out.count("inner") == 28


FINALLY_LOG: list = []


#: a call the capture cannot follow (a builtin method of an outside list), so a break:
#: ``FINALLY_LOG.append(...)`` itself is written back after the graph, with no break
_log_finally = FINALLY_LOG.append


def _side_effect_in_finally(x):
    try:
        y = x + 1
    finally:
        _log_finally("finally")  # a break in the finally body
    return y * 2


def test_a_break_in_a_finally_body(backend):
    # was (3.8): an internal error ("Failed to compute stacksize"): the finally body ends
    # with END_FINALLY, which pops what BEGIN_FINALLY pushed before it; 3.8 runs such a
    # frame eagerly now, with the reason (as 3.9 and 3.10 do), 3.11+ break there
    FINALLY_LOG.clear()
    x = paddle.ones([3])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        _agree(backend, _side_effect_in_finally, x)
    assert FINALLY_LOG == ["finally", "finally"]
    report = jit_core.explain(_side_effect_in_finally, x)
    if sys.version_info < (3, 9):
        assert "finally body" in report.breaks[0].reason, str(report)
    elif sys.version_info < (3, 11):
        # the copy of the body on the normal path lies inside the SETUP_FINALLY's range
        assert "try or with block" in report.breaks[0].reason, str(report)
    else:
        assert report.breaks[0].graph_break, str(report)


def _one_value_returned_twice(x):
    s1 = x.mean()
    s2 = x.mean()  # merged with s1 by CSE: the graph's output tuple holds one node twice
    return x, s1, s2, s1


def test_one_value_returned_twice(backend):
    # was (onnxrt, tvm): "the exported model has 1 outputs, the graph 2", a compile error
    # eager never gives: paddle2onnx exports one output per variable
    with paddle.no_grad():
        _agree(backend, _one_value_returned_twice, paddle.rand([3]))


def _reduce_a_row(x):
    r = x[0]  # a 0-D tensor
    return r.sum() + r.mean() + r.max()


def test_a_reduction_of_a_0d_tensor(backend):
    # was (onnxrt, tvm): paddle2onnx aborted ("In arrange(), end must be greater than
    # start"), a compile error eager never gives
    with paddle.no_grad():
        _agree(backend, _reduce_a_row, paddle.rand([3]))


def _error_in_a_with_after_a_caught_one(x):
    s = x.mean()
    d = {"k0": 1}
    if True:
        try:
            d["missing"]  # raises, caught: the capture breaks before the try block
        except KeyError:
            pass
    with paddle.no_grad():
        for _ in undefined_name:  # noqa: F821 - raises NameError, as in eager
            s = s + 1
    return s


def test_an_error_unwinding_in_a_resume_function(backend):
    # was (3.11): a segfault. The resume function entered the try block past its
    # TryBegin, so the bytecode library left the block's stack depth unset in the
    # exception table (32768), and unwinding an error there corrupted the stack
    x = paddle.ones([2])
    with pytest.raises(NameError):
        _error_in_a_with_after_a_caught_one(x)
    with pytest.raises(NameError):
        jit_core.optimize(_error_in_a_with_after_a_caught_one, backend=backend)(x)


class _Box:
    pass


def _accumulate(x, obj):
    obj.total = getattr(obj, "total", 0.0) + x.mean()
    return x


def test_getattr_default_guards_that_the_attribute_is_missing(backend):
    # was: the first call's entry (attribute missing: the default) served the second
    # call, which has the attribute: total 2.0 instead of 4.0
    fast = jit_core.optimize(_accumulate, backend=backend)
    box, eager_box = _Box(), _Box()
    x = paddle.ones([2]) * 2
    for _ in range(2):
        fast(x, box)
        _accumulate(x, eager_box)
    assert_same(box.total, eager_box.total)


def _reshape_like(x, y):
    return x.reshape(y.shape) + 1


def test_a_shape_with_dynamic_sizes_is_passed_as_a_list(backend):
    # was: paddle.Size() refused the graph nodes of dynamic sizes (internal error, eager)
    fast = jit_core.optimize(_reshape_like, backend=backend, dynamic=True)
    for n in (2, 3):
        x, y = paddle.randn([n * 2]), paddle.randn([n, 2])
        assert_same(fast(x, y), _reshape_like(x, y))
    assert fast.jit_stats.eager_frames == {}, fast.jit_stats


_FOUND = os.path.join(os.path.dirname(os.path.abspath(__file__)), "found")


def test_a_layer_called_through_a_function_again():
    # found by the fuzzer's two-instance phase on 3.8: program 32 of the CI run. Was, before
    # 3.11, a heap corruption (a segfault or a malloc abort): the replacement of the
    # layer's forward (39 locals) had 8 local slots, and Paddle's shim copies the frame's
    # locals into it by position (compat.replacement_code).
    # Run in a process of its own: a crash must not take the test run with it.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = (
        "import sys, warnings; warnings.simplefilter('ignore'); sys.path.insert(0, ROOT)\n"
        "from conformance.fuzz.checker import check\n"
        "from conformance.fuzz.programs import Spec\n"
        "spec = eval(open(SPEC).read())\n"
        "for _ in range(3):\n"
        "    check(spec, 'paddle', open(PROGRAM).read(), instances=True)\n"
    )
    script = (
        script.replace("ROOT", repr(root))
        .replace("SPEC", repr(os.path.join(_FOUND, "layer_through_a_function.spec")))
        .replace("PROGRAM", repr(os.path.join(_FOUND, "layer_through_a_function.py")))
    )
    env = dict(os.environ, GLOG_minloglevel="2")
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:  # a corrupted heap can deadlock in malloc
        pytest.fail("the program hung (a corrupted heap deadlocks in malloc)")
    assert done.returncode == 0, done.stderr[-2000:]


def _one_split_item_twice(x):
    s = x.mean()
    a = paddle.split(paddle.concat([x, x]), 2)[1]
    b = paddle.split(paddle.concat([x, x]), 2)[1]
    return s, a, b


def test_one_split_item_returned_twice(backend):
    # was, on onnxrt (seed 3303): BackendCompileError "the exported model has 2 outputs,
    # the graph 3". CSE merged the two splits; the two reads of item 1 stayed two getitem
    # nodes, one variable of the static program, which paddle2onnx exports once
    _agree(backend, _one_split_item_twice, paddle.rand([2, 2, 1]))
