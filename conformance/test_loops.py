"""Loops whose body breaks the graph. The loop runs in Python and its body is a function
of its own (``jit_core.codegen.loops``), captured once per set of guards: each iteration
runs compiled graphs split only where the body itself breaks. The rest of the frame after
the loop is a resume function. Results must equal eager Paddle on every path: both sides
of a branch, ``continue``, ``break``, ``return`` inside the loop, the ``else`` clause.
"""

from __future__ import annotations

import sys
import warnings

import paddle
import pytest

import jit_core

from .helpers import assert_same


class BranchInLoop(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.stem = paddle.nn.Linear(4, 4)
        self.fc = paddle.nn.Linear(4, 4)

    def forward(self, x, steps: int = 4):
        h = self.stem(x)
        for _ in range(steps):
            h = self.fc(h)
            if h.mean() > 0:
                h = h - 1
            else:
                h = paddle.tanh(h) + 0.5
        return h * 2


def early_exit(x, limit: float = 50.0):
    for i in range(8):
        x = x * 2 + i
        if x.sum() > limit:
            break
        if x.mean() < 0:
            return -x
    else:
        x = x - 1000
    return x + 1


def skip_some(x):
    total = paddle.zeros_like(x)
    for i in range(6):
        if (x * i).max() > 2:
            continue
        total = total + x * i
    return total


class PrintingBlocks(paddle.nn.Layer):
    """A loop over a LayerList whose body prints: the body breaks at the print."""

    def __init__(self):
        super().__init__()
        self.blocks = paddle.nn.LayerList([paddle.nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for i, block in enumerate(self.blocks):
            x = paddle.nn.functional.relu(block(x))
            print("block", i)
        return x


class TinyDecoder(paddle.nn.Layer):
    """A GPT-style decode loop with a KV cache: each step attends over the cache and
    appends the greedy token; it stops at the end token."""

    def __init__(self, vocab=11, d=8):
        super().__init__()
        self.embed = paddle.nn.Embedding(vocab, d)
        self.q = paddle.nn.Linear(d, d)
        self.k = paddle.nn.Linear(d, d)
        self.v = paddle.nn.Linear(d, d)
        self.head = paddle.nn.Linear(d, vocab)

    def forward(self, ids, steps: int = 5, end: int = 0):
        keys, values = [], []
        for t in range(ids.shape[1]):
            h = self.embed(ids[:, t])
            keys.append(self.k(h))
            values.append(self.v(h))
        out = ids
        for _ in range(steps):
            h = self.embed(out[:, -1])
            keys.append(self.k(h))
            values.append(self.v(h))
            k, v = paddle.stack(keys, 1), paddle.stack(values, 1)
            att = paddle.nn.functional.softmax((k @ self.q(h).unsqueeze(-1)).squeeze(-1), -1)
            logits = self.head((att.unsqueeze(-1) * v).sum(1))
            nxt = paddle.argmax(logits, -1, keepdim=True)
            out = paddle.concat([out, nxt], 1)
            if (nxt == end).all():
                break
        return out


def while_loop(x):
    n = 0
    while x.sum() < 100:
        x = x * 2 + 1
        n += 1
    return x, n


def grow_until(x):
    """A tensor decides when the loop stops."""
    y = x + 1
    while y.sum() < 100:
        y = y * 2 + 1
    return y - 1


def count_and_branch(x, n: int = 6):
    """A Python counter in the test, a tensor branch in the body."""
    x = x * 3
    i = 0
    while i < n:
        x = x * 1.5
        if x.mean() > 2:
            x = x - 1
        i += 1
    return x + 1


def until_break(x):
    x = x + 0.5
    while True:
        x = x * 2
        if x.sum() > 50:
            break
    return x + 1


def refine(x, limit: float = 1000.0):
    """``while ... else``: the else clause runs only when the test fails, not after a
    break; a return leaves the function from inside the loop."""
    x = x + 0.1
    while x.sum() < 100:
        x = x * 2
        if x.max() > limit:
            break
        if x.min() < 0:
            return x - 7
    else:
        x = x - 1000
    return x + 1


def nested_for(x):
    x = x + 1
    while x.sum() < 100:
        for j in range(3):
            x = x + j
            if x.max() > 20:
                x = x * 1.1
        x = x * 2
    return x


class WhileDecoder(paddle.nn.Layer):
    """Greedy decoding with a KV cache until the end token or ``max_len``."""

    def __init__(self, vocab=11, d=8):
        super().__init__()
        self.embed = paddle.nn.Embedding(vocab, d)
        self.k = paddle.nn.Linear(d, d)
        self.v = paddle.nn.Linear(d, d)
        self.q = paddle.nn.Linear(d, d)
        self.head = paddle.nn.Linear(d, vocab)

    def forward(self, ids, max_len: int = 6, end: int = 0):
        keys, values = [], []
        out = ids
        done = False
        while not done and out.shape[1] < max_len:
            h = self.embed(out[:, -1])
            keys.append(self.k(h))
            values.append(self.v(h))
            k, v = paddle.stack(keys, 1), paddle.stack(values, 1)
            att = paddle.nn.functional.softmax((k @ self.q(h).unsqueeze(-1)).squeeze(-1), -1)
            logits = self.head((att.unsqueeze(-1) * v).sum(1))
            nxt = paddle.argmax(logits, -1, keepdim=True)
            out = paddle.concat([out, nxt], 1)
            if (nxt == end).all():
                done = True
        return out


def _report(fn, *args):
    return jit_core.explain(fn, *args)


def test_branch_in_a_loop_runs_compiled_bodies(backend):
    paddle.seed(20)
    net = BranchInLoop()
    net.eval()
    x = paddle.rand([2, 4])
    report = _report(net, x)
    first = report.breaks[0]
    assert first.graph_break and "loop_body" in first.reason, str(report)
    # the graph before the loop, and graphs in the loop body's own frames
    assert any(g.frame.startswith("forward__loop_body") and g.op_count for g in report.graphs)
    assert not [b for b in report.breaks if not b.graph_break], str(report)
    fast = jit_core.optimize(net, backend=backend)
    inputs = [paddle.rand([2, 4]) - 0.5 * k for k in range(4)]
    for x in inputs:
        assert_same(fast(x), net(x))
    captures = fast.jit_stats.captures
    for x in inputs:
        assert_same(fast(x), net(x))
    assert fast.jit_stats.captures == captures  # both branches seen: all cache hits
    assert not fast.jit_stats.eager_frames, fast.jit_stats


@pytest.mark.parametrize("scale", [0.01, 1.0, -1.0], ids=["else", "break", "return"])
def test_break_return_and_else_leave_the_loop_as_in_eager(scale, backend):
    x = paddle.rand([3]) * scale
    fast = jit_core.optimize(early_exit, backend=backend)
    assert_same(fast(x), early_exit(x))
    assert_same(fast(x), early_exit(x))
    assert not fast.jit_stats.eager_frames, fast.jit_stats


def test_continue_skips_to_the_next_item(backend):
    x = paddle.rand([4])
    fast = jit_core.optimize(skip_some, backend=backend)
    for _ in range(2):
        assert_same(fast(x), skip_some(x))


def test_loop_over_layers_with_a_print(backend, capsys):
    paddle.seed(21)
    net = PrintingBlocks()
    net.eval()
    x = paddle.rand([2, 4])
    expected = net(x)
    eager_out = capsys.readouterr().out
    fast = jit_core.optimize(net, backend=backend)
    for _ in range(2):
        assert_same(fast(x), expected)
        assert capsys.readouterr().out == eager_out
    assert not fast.jit_stats.eager_frames, fast.jit_stats


def test_decode_loop_with_a_kv_cache(backend):
    paddle.seed(22)
    net = TinyDecoder()
    net.eval()
    ids = paddle.to_tensor([[3, 5], [7, 1]], dtype="int64")
    fast = jit_core.optimize(net, backend=backend)
    for _ in range(2):
        assert_same(fast(ids), net(ids))
    report = _report(net, ids)
    assert any("loop_body" in b.reason for b in report.breaks), str(report)


def test_a_long_decode_loop_serves_every_cache_length(backend):
    # the body's graph reads the KV-cache lists whole (paddle.stack): once their length
    # changed, the lists are inputs of any length on the paddle backend (two body entries
    # for 16 steps); other backends keep a graph per length up to the recompile limit,
    # then run the body eagerly. Every step gives eager's tokens either way.
    paddle.seed(23)
    net = TinyDecoder()
    net.eval()
    ids = paddle.to_tensor([[3, 5], [7, 1]], dtype="int64")
    fast = jit_core.optimize(net, backend=backend)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*recompile limit", category=RuntimeWarning)
        for steps in (16, 16, 9):
            assert_same(fast(ids, steps, -1), net(ids, steps, -1))
    if backend != "paddle":
        return
    stats = fast.jit_stats
    body = [k for k in stats.entries if "loop_body" in k and "resume" not in k]
    assert [stats.entries[k] for k in body] == [2], stats
    assert not stats.eager_frames, stats
    notes = [n for v in stats.dynamic_shapes.values() for n in v]
    assert any("the list L['keys'] is an input of any length" in n for n in notes), notes


def _append_then_stack(xs, x):
    for _ in range(3):
        xs.append(x * len(xs))
        y = paddle.stack(xs).sum(0)
        if y.mean() > 1e9:
            break
    return y


@pytest.mark.parametrize(
    "make",
    [
        lambda: [paddle.ones([2])],
        lambda: [paddle.ones([2]), paddle.ones([2])],
        lambda: [paddle.ones([2]), paddle.ones([3])[:2]],
    ],
    ids=["one", "two", "two again"],
)
def test_a_list_of_any_length_is_read_whole_and_written_back(make, backend):
    # len(xs) pins the length (a guard) while paddle.stack(xs) reads the list whole: both
    # in one body; the list from outside gets eager's appends
    fast = jit_core.optimize(_append_then_stack, backend=backend)
    x = paddle.rand([2])
    for _ in range(2):
        mine, theirs = make(), make()
        assert_same(fast(mine, x), _append_then_stack(theirs, x))
        assert_same(mine, theirs)


def _counts(py38, py310):
    """The (graphs, breaks) expected on this Python: 3.8/3.9 test a while loop at its
    head, 3.10+ once before the loop and again at its bottom (``codegen.loops``). A break
    whose way on only leaves the body (the test at the bottom, ``if ...: break`` at its
    end) makes no resume function, so it adds no graph (``loops.exit_at``)."""
    return py38 if sys.version_info < (3, 10) else py310


def _check_while(fn, args, counts, backend, calls=2):
    report = _report(fn, *args)
    assert (report.graph_count, report.break_count) == counts, str(report)
    assert any("loop_body" in g.frame and g.op_count for g in report.graphs), str(report)
    assert not [b for b in report.breaks if not b.graph_break], str(report)
    fast = jit_core.optimize(fn, backend=backend)
    for _ in range(calls):
        assert_same(fast(*args), fn(*args))
    assert not fast.jit_stats.eager_frames, fast.jit_stats
    return fast


def test_while_with_a_tensor_test_runs_compiled_bodies(backend):
    x = paddle.rand([3])
    fast = _check_while(grow_until, (x,), _counts((4, 2), (4, 3)), backend)
    captures = fast.jit_stats.captures
    assert_same(fast(x), grow_until(x))
    assert fast.jit_stats.captures == captures  # one set of body graphs for every iteration


def test_while_true_with_a_tensor_break(backend):
    _check_while(until_break, (paddle.rand([3]),), _counts((3, 2), (3, 2)), backend)


@pytest.mark.parametrize("case", ["else", "break", "return"], ids=["else", "break", "return"])
def test_while_else_break_and_return_leave_as_in_eager(case, backend):
    x = paddle.rand([3])
    args = {"else": (x,), "break": (x, 10.0), "return": (-x - 1,)}[case]
    counts = {
        "else": _counts((5, 4), (6, 5)),
        "break": _counts((5, 4), (6, 5)),
        "return": _counts((5, 4), (5, 4)),
    }[case]
    _check_while(refine, args, counts, backend)


def test_nested_for_inside_a_while(backend):
    # the inner body: a graph for j == 0, then one that reads j as an input (automatic
    # dynamic ints) serves 1 and 2
    _check_while(nested_for, (paddle.rand([3]),), _counts((8, 5), (8, 6)), backend)


def test_decode_while_loop_with_a_growing_kv_cache(backend):
    paddle.seed(23)
    net = WhileDecoder()
    net.eval()
    ids = paddle.to_tensor([[3, 5], [7, 1]], dtype="int64")
    # a break per token (the test of `(nxt == end).all()`): the appends to the caches
    # are written back after each graph, not breaks, and once their length changed the
    # caches are inputs of any length (one body graph for the later tokens)
    _check_while(net, (ids,), _counts((5, 3), (7, 3)), backend)
    # another prompt length: the cache grows from another size, results still eager's
    longer = paddle.to_tensor([[3, 5, 2], [7, 1, 4]], dtype="int64")
    fast = jit_core.optimize(net, backend=backend)
    assert_same(fast(longer), net(longer))


def _takes_numbers(backend: str) -> bool:
    return jit_core.backends()[backend].number_inputs


def _eager(report) -> list:
    """The frames of ``report`` that ran eagerly."""
    return [b for b in report.breaks if not b.graph_break]


def _eager_loops(report) -> list:
    return [b for b in _eager(report) if "__loop_at_" in b.frame]


def test_while_with_a_python_counter(backend):
    """Where the backend takes Python numbers as inputs, the body function runs compiled
    in every iteration: its second capture takes the counter ``i`` as an input and serves
    every value after it. Elsewhere a body would be captured again for each value of
    ``i``: the whole loop runs eagerly in one call of its loop function, the graphs before
    and after the loop stay."""
    x = paddle.rand([3])
    report = jit_core.explain(count_and_branch, x, backend=backend)
    fast = jit_core.optimize(count_and_branch, backend=backend)
    for n in (6, 50, 6):
        assert_same(fast(x, n), count_and_branch(x, n))
    assert any("resume" in g.frame and g.op_count for g in report.graphs), str(report)
    if _takes_numbers(backend):
        assert not _eager(report) and not fast.jit_stats.eager_frames, str(report)
        assert any("loop_body" in k for k in fast.jit_stats.entries), fast.jit_stats
        # every counter value and every later n is served: no capture per value
        captures = fast.jit_stats.captures
        for n in (80, 7):
            assert_same(fast(x, n), count_and_branch(x, n))
        assert fast.jit_stats.captures == captures, fast.jit_stats.entries
    else:
        (eager,) = _eager_loops(report)
        assert "changes the Python int 'i'" in eager.reason, str(report)
        assert f"the backend {backend!r} takes no Python numbers" in eager.reason
        assert not [g for g in report.graphs if "loop_body" in g.frame], str(report)
        assert fast.jit_stats.captures <= 4, fast.jit_stats


def count_by_range(x, n: int = 12):
    """A counter the body needs as a Python value (``range(i)``): each value would be
    a capture of its own."""
    i = 0
    while i < n:
        for _ in range(i):
            x = x + 1
        if x.mean() > 1e9:
            x = x * 0.5
        i += 1
    return x


def test_while_whose_body_needs_its_counter_as_a_python_value_runs_whole(backend):
    # once a capture pins the counter that is an input, the rest of the loop and later
    # calls run the loop whole, eagerly: no capture per value, no recompile-limit warning
    x = paddle.rand([3])
    fast = jit_core.optimize(count_by_range, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for n in (12, 12, 30):
            assert_same(fast(x, n), count_by_range(x, n))
    (reason,) = [r for k, r in fast.jit_stats.eager_frames.items() if "__loop_at_" in k]
    assert "changes the Python int 'i'" in reason, reason
    if _takes_numbers(backend):
        assert "needs 'i' as a Python value" in reason, reason
    assert fast.jit_stats.captures <= 8, fast.jit_stats


def test_while_with_a_counter_next_to_a_tensor_test(backend):
    x = paddle.rand([3])
    report = jit_core.explain(while_loop, x, backend=backend)
    if _takes_numbers(backend):
        assert not _eager(report), str(report)
    else:
        (eager,) = _eager_loops(report)
        assert "changes the Python int 'n'" in eager.reason, str(report)
    got, n = jit_core.optimize(while_loop, backend=backend)(x)
    want, m = while_loop(x)
    assert_same(got, want)
    assert n == m


def count_else_break_return(x, n: int, limit: float):
    """A counter loop that leaves by its test (the ``else`` clause), by ``break`` or by
    ``return``, with a tensor branch in its body."""
    x = x + 1
    i = 0
    while i < n:
        x = x * 1.5
        if x.max() > limit:
            break
        if x.min() < 0:
            return x - 7, i
        i += 1
    else:
        x = x - 1000
    return x + 1, i


@pytest.mark.parametrize("args", [(3, 1e9), (50, 20.0), (4, 1e9)], ids=["else", "break", "again"])
def test_a_counter_loop_leaves_by_else_break_and_return_as_in_eager(args, backend):
    x = paddle.rand([3])
    report = jit_core.explain(count_else_break_return, x, *args, backend=backend)
    # run whole, eagerly, where the counter cannot be a graph input
    assert bool(_eager_loops(report)) != _takes_numbers(backend), str(report)
    fast = jit_core.optimize(count_else_break_return, backend=backend)
    for inputs in ((x,) + args, (-x - 5,) + args):
        got, i = fast(*inputs)
        want, j = count_else_break_return(*inputs)
        assert_same(got, want)
        assert i == j
