"""jit_core.kit.index_bounds: which graph inputs hold indices, and the check a backend whose
runtime does not check indices (TVM) runs before each call."""

from __future__ import annotations

import paddle
import paddle.nn.functional as F

import jit_core
from jit_core.kit.index_bounds import IndexChecked, plan


class Indexing(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.emb = paddle.nn.Embedding(10, 4)

    def forward(self, ids, x, i):
        a = self.emb(ids[:, -1])  # a slice of an input: its values are the input's
        b = paddle.gather(x, i)
        c = paddle.index_select(x, i, axis=1)
        d = x[i]
        e = F.embedding(ids, self.emb.weight)
        f = paddle.take_along_axis(x, i.unsqueeze(0).expand([4, 2]), axis=1)
        g = paddle.gather(x, paddle.argmax(x, axis=0))  # below 4: x has 4 rows
        return a, b, c, d, e, f, g


def _inputs():
    return paddle.to_tensor([[1, 2]]), paddle.rand([4, 3]), paddle.to_tensor([0, 2])


def test_indices_are_followed_back_to_the_inputs_they_come_from():
    gm = jit_core.capture(Indexing(), *_inputs())
    checks, always, unchecked = plan(gm)
    # ids index the 10 embeddings; i indexes axes of sizes 4 and 3: the smaller holds
    assert checks == [(0, 10), (2, 3)]
    assert not always and not unchecked


def shifted(x, i):
    return paddle.gather(x, i + 1)


def wide_argmax(x, y):
    return paddle.gather(y, paddle.argmax(x, axis=0))


def test_indices_that_cannot_be_checked_before_the_run():
    gm = jit_core.capture(shifted, paddle.rand([4, 3]), paddle.to_tensor([0, 1]))
    checks, always, unchecked = plan(gm)
    assert checks == [] and not always
    assert unchecked == ["gather with the index add"]
    # an argmax over 6 rows indexes a tensor of 4: it may be out of range on any call
    gm = jit_core.capture(wide_argmax, paddle.zeros([6, 3]), paddle.rand([4, 3]))
    assert plan(gm)[1] is True


def test_a_call_with_an_index_out_of_range_runs_on_paddle():
    gm = jit_core.capture(Indexing(), *_inputs())
    calls = []

    def backend(*args):
        calls.append("backend")
        return "from the backend"

    def paddle_run(*args):
        calls.append("paddle")
        return "from paddle"

    made = []

    def make_paddle():
        made.append(1)
        return paddle_run

    checked = IndexChecked(backend, gm, make_paddle)
    ids, x, i = _inputs()
    assert checked.needed
    assert checked(ids, x, i) == "from the backend"
    assert checked(paddle.to_tensor([[1, 10]]), x, i) == "from paddle"  # 10 of 10
    assert checked(ids, x, paddle.to_tensor([0, 3])) == "from paddle"  # 3 of axis size 3
    assert checked(ids, x, paddle.to_tensor([0, -1])) == "from paddle"  # Paddle decides
    assert checked(ids, x, i) == "from the backend"
    assert calls == ["backend", "paddle", "paddle", "paddle", "backend"]
    assert made == [1]  # the paddle callable is built once


def last_axis(x, i):
    return x[..., i]


def before_last(x, i):
    return x[..., i, :]


def after_new_axis(x, i):
    return x[:, None, i]


def test_an_index_after_an_ellipsis_is_checked_against_its_own_axis():
    # ``...`` indexes no axis of its own: the keys after it count from the last axis
    i = paddle.to_tensor([0, 2])
    gm = jit_core.capture(last_axis, paddle.rand([4, 5, 10]), i)
    assert plan(gm)[0] == [(1, 10)]
    gm = jit_core.capture(before_last, paddle.rand([2, 10, 3, 4]), i)
    assert plan(gm)[0] == [(1, 3)]


def test_an_index_after_a_new_axis_is_left_unchecked_and_said_so():
    # Paddle 3.0 applies i to the new axis (size 1), 3.3 to the first: no axis to check
    i = paddle.to_tensor([0])
    gm = jit_core.capture(after_new_axis, paddle.rand([4, 6]), i)
    checks, always, unchecked = plan(gm)
    assert checks == [] and not always
    assert len(unchecked) == 1 and unchecked[0].startswith("tensor index with the index ")
