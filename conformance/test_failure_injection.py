"""Failure injection on every backend: a Paddle operation that raises inside a captured
frame, and a compile cache that cannot be written.

The user sees Paddle's own error, as eager Paddle raises it, pointing at their line; the
optimized callable keeps working afterwards and no frame hook is left installed.
"""

from __future__ import annotations

import inspect
import os
import traceback
import warnings

import paddle
import pytest
from paddle.framework import core

import jit_core

from .helpers import assert_same


def hook_is_off() -> bool:
    prev = core.set_eval_frame(None)
    if prev is not None:
        core.set_eval_frame(prev)
    return prev is None


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    (i,) = [i for i, line in enumerate(lines) if text in line]
    return first + i


def project(x, w):
    h = x * 2 + 1
    out = paddle.matmul(h, w)
    return out - 1


def test_an_op_that_raises_during_capture_raises_paddles_error_at_the_users_line(backend):
    fast = jit_core.optimize(project, backend=backend)
    x, bad_w = paddle.rand([2, 3]), paddle.rand([4, 5])
    with pytest.raises(Exception) as eager:
        project(x, bad_w)
    with pytest.raises(type(eager.value)) as jit:
        fast(x, bad_w)
    assert str(jit.value) == str(eager.value)
    frames = traceback.extract_tb(jit.value.__traceback__)
    mine = [f for f in frames if os.path.samefile(f.filename, __file__)]
    assert mine[-1].lineno == line_of(project, "paddle.matmul(h, w)")
    assert hook_is_off()
    w = paddle.rand([3, 5])
    assert_same(fast(x, w), project(x, w))
    assert fast.jit_stats.entries


def pick(x, index):
    y = x + 1
    return paddle.gather(y, index)


def test_an_op_that_raises_at_run_time_names_the_users_line(backend):
    """The index is a tensor: a bad value is only seen when the graph runs. Paddle's own
    error comes out of the graph, and its line in the traceback names the user's. On
    another backend its runtime's error makes the call run again on Paddle's kernels,
    which raise Paddle's error."""
    fast = jit_core.optimize(pick, backend=backend)
    x = paddle.rand([4, 2])
    good, bad = paddle.to_tensor([0, 3]), paddle.to_tensor([0, 9])
    assert_same(fast(x, good), pick(x, good))
    with pytest.raises(Exception) as eager:
        pick(x, bad)
    with pytest.raises(type(eager.value)) as jit:
        fast(x, bad)
    assert str(jit.value) == str(eager.value)
    text = "".join(traceback.format_exception(type(jit.value), jit.value, jit.value.__traceback__))
    line = line_of(pick, "paddle.gather(y, index)")
    assert f"{pick.__code__.co_filename}:{line}: return paddle.gather(y, index)" in text
    assert hook_is_off()
    assert_same(fast(x, good), pick(x, good))
    assert fast.jit_stats.compiled == 1  # the entry kept serving


class Net(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(6, 3)

    def forward(self, x):
        return paddle.nn.functional.relu(self.fc(x)) * 2


@pytest.mark.parametrize("how", ["a-file", "read-only"])
def test_a_cache_directory_that_cannot_be_written_costs_only_a_warning(
    backend, tmp_path, monkeypatch, how
):
    from jit_core.cache import disk as compile_cache

    if how == "a-file":
        root = tmp_path / "not-a-folder"
        root.write_text("a file where the cache directory should be")
    else:
        root = tmp_path / "read-only"
        root.mkdir()
        os.chmod(root, 0o555)

        def refused(*args, **kwargs):  # root writes anywhere: the refusal is made to happen
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr(compile_cache.tempfile, "mkstemp", refused)
    monkeypatch.setenv(compile_cache.ENV_VAR, str(root))
    paddle.seed(3)
    net = Net()
    net.eval()
    x = paddle.rand([2, 6])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fast = jit_core.optimize(net, backend=backend)
        assert_same(fast(x), net(x))
        compile_cache.wait_for_writes()  # (a writer thread may be the one to warn)
    problems = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
    # only what the cache could not do is said (backends without a disk cache say nothing)
    assert all("cannot write cache entry" in m for m in problems), problems
    assert_same(fast(x * 2), net(x * 2))
    assert fast.jit_stats.compiled == 1
    assert hook_is_off()
    os.chmod(root, 0o755)
