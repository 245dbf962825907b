"""Graph breaks: the bytecode analyses behind them (liveness, loops, try ranges), resume
functions run on their own, and what explain() and dump() show of a break."""

from __future__ import annotations

import dis
import os
import types

import paddle
import pytest

import jit_core
from jit_core import errors
from jit_core.bytecode import flow
from jit_core.codegen import resume


def helper(v):
    return v * 10


def straight(x, y, flag=True):
    a = x + 1
    b = helper(a)
    if flag:
        c = 1
    else:
        c = 2
    unused = 3  # noqa: F841  (dead: never read after the break)
    return a * b + y + c


def looping(x, items):
    total = 0
    for item in items:
        total += helper(item)
    try:
        total += x
    except TypeError:
        total = -1
    return total


def _offset(fn, opname, nth=0):
    found = [i for i in dis.get_instructions(fn) if i.opname.startswith(opname)]
    return found[nth].offset


def _after(fn, offset):
    insts = [i for i in dis.get_instructions(fn) if i.opname != "EXTENDED_ARG"]
    return next(insts[k + 1].offset for k, i in enumerate(insts) if i.offset == offset)


def _call_offset(fn, nth=0):
    calls = [i for i in dis.get_instructions(fn) if i.opname in ("CALL_FUNCTION", "CALL")]
    return calls[nth].offset


def test_live_locals_after_a_call_are_those_read_later():
    after = _after(straight, _call_offset(straight))
    assert flow.live_locals(straight.__code__, [after]) == {"a", "y", "flag"}


def test_live_locals_follow_loops_and_handlers():
    code = looping.__code__
    head = _offset(looping, "FOR_ITER")
    # the loop reads items through its iterator (already on the stack), total and x later
    assert flow.live_locals(code, [head]) == {"total", "x"}


def test_loops_and_try_ranges():
    code = looping.__code__
    call_in_loop = _call_offset(looping)
    # the loop goes back to FOR_ITER on every version
    assert flow.loop_head(code, call_in_loop) == _offset(looping, "FOR_ITER")
    assert flow.loop_head(straight.__code__, _call_offset(straight)) is None
    read_in_try = next(
        i.offset
        for i in dis.get_instructions(looping)
        # (3.13 loads `total` and `x` with one LOAD_FAST_LOAD_FAST)
        if i.opname.startswith("LOAD_FAST")
        and "x" in (i.argval if type(i.argval) is tuple else [i.argval])
    )
    assert flow.protected(code, read_in_try)
    assert not flow.protected(code, call_in_loop)


def test_a_resume_function_runs_the_rest_of_the_frame():
    after = _after(straight, _call_offset(straight))
    live = sorted(flow.live_locals(straight.__code__, [after]))
    code = resume.build_resume_code(straight.__code__, after, 1, live)
    assert code.co_name == f"straight__resume_at_{after}"
    assert code.co_varnames[: code.co_argcount] == ("___stack0", *live)
    fn = types.FunctionType(code, straight.__globals__)
    values = {"a": 3, "y": 5, "flag": False}
    # ___stack0 is what helper(a) returned
    assert fn(30, *[values[n] for n in live]) == straight(2, 5, False)


def branchy(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


def test_explain_lists_the_break_and_dump_writes_the_resume_functions(tmp_path):
    x = paddle.ones([3])
    report = jit_core.explain(branchy, x)
    assert (report.graph_count, report.break_count) == (2, 1)
    brk = report.breaks[0]
    assert brk.graph_break and brk.category == errors.TENSOR_BRANCH
    assert brk.location == f"{__file__}:{branchy.__code__.co_firstlineno + 2}"
    assert brk.instruction.startswith(("POP_JUMP", "JUMP_IF"))
    names = [name for name, _ in brk.resumes]
    assert len(names) == 2 and all(n.startswith("branchy__resume_at_") for n in names)
    assert "graph break" in str(report) and "resumes in" in str(report)
    written = report.dump(str(tmp_path))
    resume_files = [p for p in written if p.endswith(".resume.txt")]
    assert sorted(os.path.basename(p) for p in resume_files) == sorted(
        f"{n}.resume.txt" for n in names
    )
    text = open(resume_files[0], encoding="utf-8").read()
    assert "___stack" in text or "LOAD_FAST" in text


def test_full_graph_still_refuses_to_break():
    fast = jit_core.optimize(branchy, full_graph=True)
    with pytest.raises(jit_core.GraphBreakError, match="branch"):
        fast(paddle.ones([3]))


def closure_with_print(x):
    k = 2

    def scale(t):
        return t * k

    print("closures break too")
    return scale(x)


def test_a_frame_that_makes_closures_breaks_like_any_other(capsys):
    x = paddle.ones([3])
    report = jit_core.explain(closure_with_print, x)
    # the closure made before the print is made again over the frame's own cell, and the
    # resume function gets that cell: it calls the closure inline in its graph
    assert report.break_count == 1 and report.breaks[0].graph_break
    frames = [g.frame for g in report.graphs]
    assert len(frames) == 2 and frames[0] == "closure_with_print", frames
    assert frames[1].startswith("closure_with_print__resume_at_"), frames
    assert capsys.readouterr().out.count("closures break too") == 1
    assert report.result.numpy().tolist() == [2.0, 2.0, 2.0]


def lambdas_over_a_comprehension(x):
    fs = [lambda: i for i in range(3)]  # noqa: B023 (the point: a cell per comprehension)
    print("cannot break here")
    return x * fs[2]()


def test_frames_where_a_break_would_not_be_exact_run_eagerly(capsys):
    x = paddle.ones([3])
    report = jit_core.explain(lambdas_over_a_comprehension, x)
    # each lambda has a cell of the comprehension's own (3.12: made in mid-frame; before:
    # in the comprehension's frame, inlined in the capture): no resume function shares it
    first = report.breaks[0]
    assert not first.graph_break and first.frame == "lambdas_over_a_comprehension", str(report)
    assert "cell" in first.reason, str(report)
    assert capsys.readouterr().out.count("cannot break here") == 1
    assert report.result.numpy().tolist() == [2.0, 2.0, 2.0]


def grows_a_list(x):
    import bisect

    items = [1, 3]
    bisect.insort(items, 2)  # a library call that mutates a list the frame still holds
    items.append(4)
    return x * len(items), items


def test_a_container_held_in_two_places_stays_one_object():
    x = paddle.ones([2])
    report = jit_core.explain(grows_a_list, x)
    # the list is an argument of the call that breaks and a live local: the code after
    # the break builds it once and hands the same object to both, so the mutation made
    # by the call shows through the local
    assert report.breaks[0].graph_break, str(report)
    assert report.breaks[0].instruction.startswith("CALL"), str(report)
    out, items = report.result
    assert items == [1, 2, 3, 4]
    assert out.numpy().tolist() == [4.0, 4.0]
    # (built once, kept in a local of the break code for the second place)
    assert "___jit_shared_0" in report.graphs[0].transformed_bytecode


def returns_one_list_twice(x):
    items = [x + 1]
    return items, items


def test_a_returned_list_held_twice_is_one_object():
    out = jit_core.optimize(returns_one_list_twice)(paddle.ones([2]))
    assert out[0] is out[1]
    out[0].append(3)
    assert len(out[1]) == 2


def sums_rows(x):
    y = x * 2
    total = paddle.zeros([3])
    for row in y:  # more rows than the capture unrolls
        total = total + row
    return total + 1


def test_a_loop_over_a_long_tensor_breaks_at_get_iter_and_runs_in_python():
    x = paddle.rand([100, 3])
    report = jit_core.explain(sums_rows, x)
    first, loop = report.breaks
    assert first.graph_break and first.instruction == "GET_ITER" and "100 rows" in first.reason
    # the resumed frame starts at the loop, which steps a real iterator: the loop runs in
    # Python and its body is a function of its own, one graph for every row
    assert loop.graph_break and "loop_body" in loop.reason, str(report)
    assert loop.location.endswith(f":{sums_rows.__code__.co_firstlineno + 3}")
    body = [g for g in report.graphs if "loop_body" in g.frame]
    assert len(body) == 1 and body[0].op_count == 1, str(report)
    assert paddle.allclose(report.result, sums_rows(x)).item()


class _BreakingBlock(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)

    def forward(self, x):
        y = paddle.nn.functional.relu(self.fc(x))
        y.numpy()  # breaks: this frame has a replacement with a resume function
        return y + x


class _EagerLoopOfBreakingBlocks(paddle.nn.Layer):
    """A while loop: the frame runs eagerly, every block is reached through the hook."""

    def __init__(self, n=5):
        super().__init__()
        self.blocks = paddle.nn.LayerList([_BreakingBlock() for _ in range(n)])

    def forward(self, x):
        i = 0
        while i < len(self.blocks):
            x = self.blocks[i](x)
            i += 1
        return x


def test_every_breaking_callee_of_an_eager_frame_is_captured():
    # Paddle's shim runs a replaced frame with its callback off; the break inside turns
    # the hook on and off again, which used to uninstall it for the rest of the caller
    paddle.seed(4)
    net = _EagerLoopOfBreakingBlocks()
    fast = jit_core.optimize(net, share_layers=False)  # an entry per block: each captured
    x = paddle.rand([2, 4])
    for _ in range(2):
        assert paddle.allclose(fast(x), net(x)).item()
    entries = fast.jit_stats.entries
    key = [k for k in entries if k.startswith("_BreakingBlock.forward")]
    assert key and entries[key[0]] == 5, entries
    # and nothing is left hooked once the call returned
    from paddle.framework import core

    assert core.set_eval_frame(None) is None


def _shout(t):
    print("item", t.shape)
    return t * 2


def comprehension_that_breaks(x):
    y = x + 1
    return [_shout(t) for t in (y, y * 3)]


def test_a_comprehension_whose_loop_breaks(capsys):
    # before 3.12 a comprehension is a frame of its own whose result list sits below the
    # loop's iterator: its loop cannot become a body function, and must stay exact
    x = paddle.rand([2])
    expected = comprehension_that_breaks(x)
    out = capsys.readouterr().out
    fast = jit_core.optimize(comprehension_that_breaks)
    for _ in range(2):
        got = fast(x)
        assert len(got) == 2 and all(paddle.allclose(a, b).item() for a, b in zip(got, expected))
        assert capsys.readouterr().out == out


def returns_slices(x):
    s = slice(1, 3)
    return x[s] * 2, s, (s, 0)


def test_slices_are_rebuilt_on_every_python():
    # before 3.12 a slice is unhashable, and so is a code object holding one as a
    # constant ("unhashable type: 'slice'" sent such frames to eager on 3.8-3.11)
    x = paddle.arange(4, dtype="float32")
    report = jit_core.explain(returns_slices, x)
    assert (report.graph_count, report.break_count) == (1, 0), str(report)
    out, s, key = report.result
    assert s == slice(1, 3) and key == (slice(1, 3), 0)
    assert out.numpy().tolist() == [2.0, 4.0]


def test_a_gc_callback_that_runs_inside_an_optimized_call_is_not_captured():
    # the collector runs gc.callbacks in the thread that allocates; inside an optimized
    # call the hook saw them (Hypothesis's gc_callback, a profiler's) and listed them
    # as frames that run eagerly
    import gc
    import time

    seen = []

    def on_collect(phase, info):
        seen.append(time.perf_counter())

    def f(x):
        y = x * 2
        gc.collect()
        return y + 1

    gc.callbacks.append(on_collect)
    try:
        fast = jit_core.optimize(f)
        x = paddle.rand([3])
        out = fast(x)
    finally:
        gc.callbacks.remove(on_collect)
    assert seen  # it ran, once per phase
    assert bool(paddle.allclose(out, x * 2 + 1))
    names = list(fast.jit_stats.entries) + list(fast.jit_stats.eager_frames)
    assert not [n for n in names if "on_collect" in n], fast.jit_stats


def _many_locals():
    # forty locals written after a break: the replacement of the frame runs a graph and
    # calls a resume function, and uses a handful of local slots of its own
    lines = ["def many_locals(x):", "    t0 = x + 1", "    n = int(t0.numpy().sum())"]
    lines += [f"    t{i} = t{i - 1} * 0.5 + n" for i in range(1, 40)]
    lines.append("    return " + " + ".join(f"t{i}" for i in range(40)))
    namespace: dict = {}
    exec(compile("\n".join(lines), "<many_locals>", "exec"), namespace)
    return namespace["many_locals"]


def test_a_replacement_keeps_the_frame_local_slots_where_the_shim_copies_them():
    # was, on 3.8-3.10, a heap corruption: Paddle's shim copies the original frame's 41
    # local slots by position into the replacement, which had 5
    from jit_core.bytecode import compat

    many_locals = _many_locals()
    fast = jit_core.optimize(many_locals)
    x = paddle.ones([3])
    for _ in range(3):
        assert paddle.allclose(fast(x), many_locals(x)).item()
    code = many_locals.__code__
    (entry,) = fast._ctx.cache[code].entries
    if compat.SHIM_COPIES_LOCALS_BY_POSITION:
        assert entry.code.co_varnames[: code.co_nlocals] == code.co_varnames
    else:  # 3.11+: the shim maps locals by name, and the replacement keeps only its own
        assert entry.code.co_nlocals < code.co_nlocals


class _BreakingBlock(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        if y.mean() > 0:  # a break in every block
            y = y * 0.5
        return y + x


class _Blocks(paddle.nn.Layer):
    def __init__(self, n):
        super().__init__()
        self.blocks = paddle.nn.LayerList([_BreakingBlock() for _ in range(n)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def test_a_captured_sublayer_is_entered_without_layer_call(monkeypatch):
    """At a break, a sublayer whose forward has cache entries is entered through its
    cache directly; one that needs ``Layer.__call__`` (a hook) still gets it."""
    net = _Blocks(3)
    net.eval()
    fast = jit_core.optimize(net, share_layers=False)
    x = paddle.rand([2, 4])
    for _ in range(3):
        assert paddle.allclose(fast(x), net(x)).item()
    captures = fast.jit_stats.captures
    called = []
    layer_call = paddle.nn.Layer.__call__

    def counting(self, *args, **kwargs):
        called.append(type(self).__name__)
        return layer_call(self, *args, **kwargs)

    monkeypatch.setattr(paddle.nn.Layer, "__call__", counting)
    out = fast(x)
    assert "_BreakingBlock" not in called  # entered directly, through the cache
    monkeypatch.undo()
    assert paddle.allclose(out, net(x)).item()
    assert fast.jit_stats.captures == captures  # and the cache served every block
    seen = []
    handle = net.blocks[1].register_forward_pre_hook(lambda layer, args: seen.append(1))
    assert paddle.allclose(fast(x), net(x)).item()
    assert len(seen) == 2  # the optimized call ran the hook, as eager did
    handle.remove()
    net.blocks[2].forward = lambda t: t * 3
    assert paddle.allclose(fast(x), net(x)).item()
