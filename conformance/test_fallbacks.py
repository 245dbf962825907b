"""What cannot be captured breaks the graph (the rest of the frame goes on in a resume
function) or, where a break would not be exact, runs the frame eagerly: either way the
results and side effects are eager Paddle's, and ``explain()`` says why and where.
"""

from __future__ import annotations

import os

import paddle
import pytest

import jit_core
from jit_core.api import frame_key
from jit_core.errors import GraphBreakError

from .helpers import assert_same

THIS_FILE = os.path.basename(__file__)


def f_print(x):
    print("hello from f_print")
    return x + 1


def f_numpy(x):
    return x + float(x.numpy().sum())


def f_tensor_branch(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def f_inplace(x, y):
    x.add_(y)
    return x * 2


def f_with_block(x):
    with paddle.no_grad():  # the block is captured; a break inside it is not yet
        y = x * 2
        print("in the block")
    return y + 1


def f_generator(x):
    yield x + 1
    yield x * 2


def f_name_not_defined(x):
    y = paddle.nn.functional.relu(x) * 2
    return y + _NOT_YET_DEFINED  # noqa: F821 - defined by the test, or not


#: function, argument factory, words the reason must contain
CASES = [
    (f_print, lambda: (paddle.rand([4, 4]),), "print"),
    (f_numpy, lambda: (paddle.rand([4, 4]),), "NumPy scalar"),
    (f_tensor_branch, lambda: (paddle.rand([4, 4]),), "branch"),
    (f_tensor_branch, lambda: (-paddle.rand([4, 4]),), "branch"),
    (f_inplace, lambda: (paddle.rand([4, 4]), paddle.rand([4, 4])), "in-place"),
    (f_with_block, lambda: (paddle.rand([4, 4]),), "inside a try or with block"),
]


@pytest.mark.parametrize(
    "fn, make, why", CASES, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)]
)
def test_breaks_with_the_same_result_and_a_reason(fn, make, why, backend, capsys):
    args = make()
    eager_args = [a.clone() for a in args]
    expected = fn(*eager_args)
    eager_out = capsys.readouterr().out

    fast = jit_core.optimize(fn, backend=backend)
    for _ in range(2):
        jit_args = [a.clone() for a in args]
        assert_same(fast(*jit_args), expected)
        # inputs mutated exactly as eager mutated them
        assert_same(jit_args, eager_args)
        assert capsys.readouterr().out == eager_out

    eager = fast.jit_stats.eager_frames
    if frame_key(fn) in eager:
        assert why in eager[frame_key(fn)]

    report = jit_core.explain(fn, *[a.clone() for a in args], backend=backend)
    capsys.readouterr()
    assert report.break_count >= 1
    brk = report.breaks[0]
    assert brk.graph_break == (frame_key(fn) not in eager)
    assert why in brk.reason
    assert brk.location and brk.location.split(":")[0].endswith(THIS_FILE), brk.location
    assert int(brk.location.rsplit(":", 1)[1]) > fn.__code__.co_firstlineno
    assert why in str(report)


def test_generator_runs_eagerly(backend):
    x = paddle.rand([4, 4])
    fast = jit_core.optimize(f_generator, backend=backend)
    assert_same(list(fast(x)), list(f_generator(x)))
    assert "generator" in fast.jit_stats.eager_frames[frame_key(f_generator)]


def test_full_graph_names_the_first_break(backend):
    fast = jit_core.optimize(f_tensor_branch, backend=backend, full_graph=True)
    with pytest.raises(GraphBreakError) as err:
        fast(paddle.rand([4, 4]))
    message = str(err.value)
    assert "branch" in message
    assert f"{THIS_FILE}:{f_tensor_branch.__code__.co_firstlineno + 1}" in message


def test_a_name_not_defined_breaks_before_it_and_raises_as_eager(backend):
    # the graph of what comes before it runs compiled; the resumed frame starts at the
    # LOAD_GLOBAL, where CPython raises eager's NameError
    x = paddle.rand([4, 4])
    with pytest.raises(NameError) as eager:
        f_name_not_defined(x)
    fast = jit_core.optimize(f_name_not_defined, backend=backend)
    for _ in range(2):
        with pytest.raises(NameError) as err:
            fast(x)
        assert str(err.value) == str(eager.value)
    stats = fast.jit_stats
    assert (stats.captures, stats.compiled) == (2, 1), stats
    # the resumed frame starts with the name, nothing to capture before it: it raises
    (resumed,) = stats.eager_frames
    assert resumed.startswith("f_name_not_defined__resume_at_"), resumed
    assert "name '_NOT_YET_DEFINED' is not defined (NameError)" in stats.eager_frames[resumed]
    # once the name exists, the same graph serves eager's result
    globals()["_NOT_YET_DEFINED"] = 3.0
    try:
        assert_same(fast(x), f_name_not_defined(x))
        assert fast.jit_stats.compiled == 1
    finally:
        del globals()["_NOT_YET_DEFINED"]
