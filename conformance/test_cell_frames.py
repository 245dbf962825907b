"""Frames that make closures (cell variables) can break their graph.

The cells of such a frame are shared with the closures it made, so the code after a break
must see the very cells, not copies of their values: at the break the frame's cells get
what the captured code left in them, closures made during the capture are made again over
them, and the resume functions and loop body functions take them as free variables. A
closure made before the break and called after it, a ``nonlocal`` write on either side, a
cell assigned only after the break: all read what eager reads.
"""

from __future__ import annotations

import paddle

import jit_core

from .helpers import assert_same


def _not_eager(fast) -> None:
    """The frame broke its graph instead of running eagerly as a whole."""
    stats = fast.jit_stats
    assert stats.eager_frames.get(jit_core.api.frame_key(fast._orig_fn)) is None, stats


def closure_before_the_break(x):
    scale = 2.0

    def f(t):
        return t * scale

    y = f(x)
    if y.mean() > 0:
        y = y + 1
    return f(y)


def test_a_closure_made_before_the_break_is_called_after_it(backend):
    pos, neg = paddle.rand([3]) + 0.1, -paddle.rand([3]) - 0.1
    fast = jit_core.optimize(closure_before_the_break, backend=backend)
    for x in (pos, neg) * 6:
        assert_same(fast(x), closure_before_the_break(x))
    _not_eager(fast)
    # the closure is a new object on each call, as in eager: the resume functions that
    # get it are guarded on what it is made of, so they compile once
    assert set(fast.jit_stats.entries.values()) == {1}, fast.jit_stats
    assert not fast.jit_stats.eager_frames, fast.jit_stats
    report = jit_core.explain(closure_before_the_break, pos, backend=backend)
    # before the branch, and the rest after it (the closure called there is inlined)
    assert report.graph_count == 2 and report.break_count == 1, str(report)
    assert report.breaks[0].graph_break, str(report)
    assert report.breaks[0].category == "tensor-branch", str(report)


def nonlocal_counter(x):
    count = 0

    def bump():
        nonlocal count
        count += 1

    bump()  # captured: the cell holds 1 at the break
    y = x * 2
    if y.mean() > 0:
        bump()  # after the break: the same cell, from the real closure
        y = y * count
    bump()
    return y * count, count


def test_nonlocal_writes_on_both_sides_of_the_break(backend):
    pos, neg = paddle.rand([3]) + 0.1, -paddle.rand([3]) - 0.1
    fast = jit_core.optimize(nonlocal_counter, backend=backend)
    for x in (pos, neg, pos):
        assert_same(fast(x), nonlocal_counter(x))
    _not_eager(fast)
    report = jit_core.explain(nonlocal_counter, pos, backend=backend)
    # the branch; the resumed frame gets the cell as a free variable, and bump, inlined
    # there, writes it: the capture stores the new count into the real cell afterwards
    assert report.breaks[0].graph_break, str(report)
    assert report.breaks[0].frame == "nonlocal_counter", str(report)
    assert report.graph_count == 2 and report.break_count == 1, str(report)


def late_cell(x):
    def read():
        return x * late

    y = x + 1
    if y.mean() > 0:
        y = y * 2
    late = 3.0  # assigned only after the break: the closure made before reads it
    return read() + y


def test_a_cell_assigned_after_the_break_is_read_by_an_older_closure(backend):
    pos, neg = paddle.rand([3]) + 0.1, -paddle.rand([3]) - 0.1
    fast = jit_core.optimize(late_cell, backend=backend)
    for x in (pos, neg, pos):
        assert_same(fast(x), late_cell(x))
    _not_eager(fast)
    report = jit_core.explain(late_cell, pos, backend=backend)
    assert report.breaks[0].graph_break, str(report)
    assert report.breaks[0].frame == "late_cell", str(report)
    # the resumed frame assigns the cell, shared with a closure from before the break: the
    # closure, inlined there, reads what the capture assigned (the real cell gets it
    # after the graph)
    assert report.graph_count == 2 and report.break_count == 1, str(report)


def argument_cell(x, scale):
    def f(t):
        return t * scale

    y = f(x)
    if y.mean() > 0:
        y = y + scale
    return f(y)


def reassigned_argument_cell(x, scale):
    old = scale
    scale = scale * 2  # the cell changes before the break; ``old`` still reads the argument

    def f(t):
        return t * scale + old

    y = f(x)
    if y.mean() > 0:
        y = y - old
    return f(y), scale


def test_a_cell_that_is_an_argument(backend):
    pos, neg = paddle.rand([3]) + 0.1, -paddle.rand([3]) - 0.1
    for fn in (argument_cell, reassigned_argument_cell):
        fast = jit_core.optimize(fn, backend=backend)
        for x in (pos, neg, pos):
            assert_same(fast(x, 3.0), fn(x, 3.0))
            assert_same(fast(x, paddle.full([3], 0.5)), fn(x, paddle.full([3], 0.5)))
        _not_eager(fast)
        report = jit_core.explain(fn, pos, 3.0, backend=backend)
        assert report.graph_count == 2 and report.break_count == 1, str(report)
        assert report.breaks[0].graph_break, str(report)


class LoopWithClosure(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)

    def forward(self, x):
        shift = 0.5
        step = lambda t: self.fc(t) - shift  # noqa: E731 (captures self and shift)
        h = step(x)
        for _ in range(3):
            h = step(h)
            if h.mean() > 0:
                h = h - 1
        return step(h)


def test_a_break_in_a_loop_body_of_a_frame_with_cells(backend):
    paddle.seed(7)
    net = LoopWithClosure()
    fast = jit_core.optimize(net, backend=backend)
    for _ in range(3):
        x = paddle.randn([2, 4])
        assert_same(fast(x), net(x))
    assert not fast.jit_stats.eager_frames, fast.jit_stats
    report = jit_core.explain(net, paddle.randn([2, 4]), backend=backend)
    first = report.breaks[0]
    assert first.graph_break and "its body is captured" in first.reason, str(report)
    # before the loop, the body before its branch, and after the loop: the side of the
    # branch this input takes only goes on to the next item, which needs no resume
    # function (codegen.loops.exit_at)
    assert report.graph_count == 3 and report.break_count == 2, str(report)


class LambdaAndComprehension(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)
        self.alpha = 0.5

    def forward(self, x):
        h = self.fc(x)
        parts = [h * w for w in (1.0, 2.0)]  # a comprehension reading the local h
        act = lambda t: paddle.tanh(t) * self.alpha  # noqa: E731 (a cell for self)
        g = h
        if h.mean() > 0:
            g = act(h)  # (before 3.12 ``h`` is a cell: assigning it here would be a side
            # effect of the resumed frame, which then runs eagerly)
        return act(parts[0] + parts[1]) + g


def test_a_lambda_and_a_comprehension_in_a_layer_that_breaks(backend):
    paddle.seed(3)
    net = LambdaAndComprehension()
    fast = jit_core.optimize(net, backend=backend)
    for _ in range(4):
        x = paddle.randn([2, 4])
        assert_same(fast(x), net(x))
    assert not fast.jit_stats.eager_frames, fast.jit_stats
    report = jit_core.explain(net, paddle.randn([2, 4]), backend=backend)
    assert report.graph_count == 2 and report.break_count == 1, str(report)
    assert report.breaks[0].graph_break, str(report)


def comprehension_cells(x):
    fs = [lambda: i for i in range(3)]  # noqa: B023 (each lambda: a cell of the comprehension)
    y = x * 2
    if y.mean() > 0:
        y = y + 1
    return y * fs[1]()


def test_a_lambda_over_a_comprehension_variable_keeps_the_frame_eager(backend):
    # 3.12 inlines the comprehension and makes that cell in mid-frame, a slot a resume
    # function cannot share; before, the cell belongs to the comprehension's own frame,
    # inlined in the capture, and has no real counterpart at the break: both refused
    pos, neg = paddle.rand([3]) + 0.1, -paddle.rand([3]) - 0.1
    fast = jit_core.optimize(comprehension_cells, backend=backend)
    for x in (pos, neg):
        assert_same(fast(x), comprehension_cells(x))
    report = jit_core.explain(comprehension_cells, pos, backend=backend)
    first = report.breaks[0]
    assert not first.graph_break and first.frame == "comprehension_cells", str(report)
    assert "a cell of its own" in first.reason or "inlined in the capture" in first.reason


def reassigned_after_the_break(x):
    late = 1.0

    def read():
        return x * late

    y = x + 1
    if y.mean() > 0:
        y = y * 2
    late = 3.0  # the closure made before the break must see 3.0, not the 1.0 it had
    return read() + y


def test_a_closure_from_before_the_break_reads_the_new_value(backend):
    pos, neg = paddle.rand([3]) + 0.1, -paddle.rand([3]) - 0.1
    fast = jit_core.optimize(reassigned_after_the_break, backend=backend)
    for x in (pos, neg, pos, pos):
        assert_same(fast(x), reassigned_after_the_break(x))
    _not_eager(fast)


def make_step():
    previous = None
    calls = 0

    def step(x):
        nonlocal previous, calls
        y = x * 2
        if previous is not None:
            y = y + previous
        previous = y  # kept for the next call, in the closure's cell
        calls = 1  # (a constant, so the guard on it holds from the second call on)
        return y + 1

    return step, lambda: (previous, calls)


def test_a_closure_keeps_a_tensor_in_its_cell_between_calls(backend):
    eager, eager_state = make_step()
    step, state = make_step()
    fast = jit_core.optimize(step, backend=backend)
    for i in range(5):
        x = paddle.full([3], float(i))
        assert_same(fast(x), eager(x))
        assert_same(state()[0], eager_state()[0])
        assert state()[1] == eager_state()[1] == 1
    # captured: the first call (previous is None) and the rest (previous is a tensor)
    assert fast.jit_stats.captures == 2, fast.jit_stats
    assert not fast.jit_stats.eager_frames
