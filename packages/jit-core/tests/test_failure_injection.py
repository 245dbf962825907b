"""Failure injection: a backend that fails (while compiling, while running, with wrong
shapes), a guard that raises, KeyboardInterrupt in the middle of a capture, a cache
directory that is full or read-only.

Each must give the user a clear error (or a warning and a fallback that computes the
right result), and leave the optimized callable usable and the process as it was: no
frame hook left installed, the gradient mode and the random generator untouched.
"""

from __future__ import annotations

import errno
import os
import warnings

import numpy as np
import paddle
import pytest
from paddle.framework import core

import jit_core
from jit_core.api import frame_key
from jit_core.cache import disk as compile_cache
from jit_core.cache.disk import DiskCache
from jit_core.errors import BackendCompileError
from jit_core.executor import translator


def hook_is_off() -> bool:
    prev = core.set_eval_frame(None)
    if prev is not None:
        core.set_eval_frame(prev)
    return prev is None


@pytest.fixture(autouse=True)
def _process_state_is_kept():
    grad = paddle.is_grad_enabled()
    assert hook_is_off()
    yield
    assert hook_is_off()
    assert paddle.is_grad_enabled() == grad


def close(a, b):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)


class FaultyBackend:
    """A backend plugin, registered through the hooks like an installed one, that fails
    the way it is told to: ``compile`` raises, ``run`` raises (from the ``run_fails``-th
    run on), or ``shape`` returns the outputs cut to one row."""

    def __init__(self):
        self.fault = None
        self.run_fails = 1
        self.compiles = 0
        self.runs = 0

    @jit_core.hookimpl
    def jit_register_backends(self, register):
        def compile_fn(gm, example_inputs, **options):
            self.compiles += 1
            if self.fault == "compile":
                raise RuntimeError("the faulty compiler broke")
            forward = gm.forward

            def run(*args):
                self.runs += 1
                if self.fault == "run" and self.runs >= self.run_fails:
                    raise RuntimeError("the faulty runtime broke")
                out = forward(*args)
                if self.fault == "shape":
                    return tuple(o[:1] for o in out)
                return out

            return run

        register("faulty", compile_fn, description="fails on demand (tests)")


@pytest.fixture
def faulty(install_plugin):
    return install_plugin(FaultyBackend(), "faulty-test")


def affine(x, w):
    return paddle.matmul(x, w) * 2 + 1


def with_break(x):
    y = x * 2
    if y.sum() > 0:  # a tensor decides a branch: resume functions, captured later
        return y + 1
    return y - 1


def inputs():
    return paddle.rand([2, 3]), paddle.rand([3, 4])


def test_a_backend_that_fails_to_compile_raises_a_clear_error_and_recovers(faulty):
    fast = jit_core.optimize(affine, backend="faulty")
    x, w = inputs()
    faulty.fault = "compile"
    with pytest.raises(BackendCompileError, match="backend 'faulty' failed to compile the graph"):
        fast(x, w)
    with pytest.raises(BackendCompileError) as info:
        fast(x, w)  # the same error again, not a half-made cache entry
    assert isinstance(info.value.__cause__, RuntimeError)
    assert not fast.jit_stats.entries
    faulty.fault = None
    close(fast(x, w), affine(x, w))
    assert fast.jit_stats.entries == {frame_key(affine): 1}


def test_a_backend_whose_later_runs_fail_runs_those_calls_on_paddle(faulty):
    # a runtime's error where Paddle raises none (a data-dependent failure of the
    # backend): the call runs again on Paddle's kernels, which decide, with one warning;
    # where Paddle raises too, the user sees Paddle's error (conformance:
    # test_an_op_that_raises_at_run_time_names_the_users_line)
    fast = jit_core.optimize(affine, backend="faulty")
    x, w = inputs()
    close(fast(x, w), affine(x, w))
    faulty.fault = "run"
    with pytest.warns(RuntimeWarning, match="raised in backend 'faulty' .*faulty runtime broke"):
        close(fast(x, w), affine(x, w))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one warning, not one per call
        close(fast(x, w), affine(x, w))
    faulty.fault = None
    runs = faulty.runs
    close(fast(x, w), affine(x, w))
    assert faulty.runs == runs + 1  # the backend serves again
    assert faulty.compiles == 1  # the entry stayed


def test_a_backend_that_fails_its_first_run_is_replaced_by_paddle_with_a_warning(faulty):
    fast = jit_core.optimize(affine, backend="faulty")
    x, w = inputs()
    faulty.fault = "run"
    with pytest.warns(RuntimeWarning, match="runs on the paddle backend: backend 'faulty'"):
        out = fast(x, w)
    close(out, affine(x, w))
    close(fast(x, w), affine(x, w))
    (entry,) = fast._ctx.cache[affine.__code__].entries
    assert entry.backend == "paddle"
    assert "raised RuntimeError: the faulty runtime broke" in entry.backend_note


def test_a_backend_that_returns_wrong_shapes_is_replaced_by_paddle_with_a_warning(faulty):
    # before, the cut outputs were returned to the user as the result
    fast = jit_core.optimize(affine, backend="faulty")
    x, w = inputs()
    faulty.fault = "shape"
    with pytest.warns(
        RuntimeWarning, match=r"output 0 is Tensor \[1, 4\].*computes Tensor \[2, 4\]"
    ):
        out = fast(x, w)
    assert out.shape == [2, 4]
    close(out, affine(x, w))
    close(fast(x * 3, w), affine(x * 3, w))
    with pytest.warns(RuntimeWarning, match="is wrong for it"):
        text = str(jit_core.explain(affine, x, w, backend="faulty"))
    assert "runs on the paddle backend: backend 'faulty' is wrong for it" in text


class Config:
    def __init__(self):
        self.broken = False

    @property
    def scale(self):
        if self.broken:
            raise AttributeError("scale is gone")
        return 2.0


def scaled(cfg, x):
    return x * cfg.scale


def test_a_guard_that_raises_fails_and_the_user_sees_eager_behaviour():
    fast = jit_core.optimize(scaled)
    cfg = Config()
    x = paddle.rand([3])
    close(fast(cfg, x), x * 2.0)
    cfg.broken = True
    with pytest.raises(AttributeError, match="scale is gone") as info:
        fast(cfg, x)
    # the user's own error, from the user's own line, as eager raises it (the frame that
    # raises may be a resume function of ``scale``: its name differs, not its lines)
    last = info.traceback[-1]
    assert os.path.samefile(str(last.path), __file__)
    assert last.statement.lines[-1].strip() == 'raise AttributeError("scale is gone")'
    cfg.broken = False
    close(fast(cfg, x), x * 2.0)


@pytest.mark.parametrize("nth", [1, 2], ids=["frame", "resume-function"])
def test_keyboard_interrupt_during_a_capture_leaves_everything_usable(monkeypatch, nth):
    real = translator.Translator.run
    runs = {"n": 0}

    def interrupted(self):
        runs["n"] += 1
        if runs["n"] == nth:
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(translator.Translator, "run", interrupted)
    fast = jit_core.optimize(with_break)
    x = paddle.rand([3])
    paddle.seed(7)
    expected_random = paddle.rand([2]).numpy()
    paddle.seed(7)
    with paddle.no_grad():
        with pytest.raises(KeyboardInterrupt):
            fast(x)
        assert not paddle.is_grad_enabled()
    # a capture stopped half-way left no entry, no lock held, the generator as it was
    np.testing.assert_array_equal(paddle.rand([2]).numpy(), expected_random)
    close(fast(x), with_break(x))
    close(fast(-x), with_break(-x))
    assert not fast.jit_stats.eager_frames


# ------------------------------------------------------------------ the disk cache


def test_a_full_disk_warns_and_leaves_no_partial_entry(tmp_path, monkeypatch):
    cache = DiskCache("full", root=str(tmp_path))

    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(compile_cache.os, "fsync", no_space)
    with pytest.warns(RuntimeWarning, match="cannot write cache entry.*No space left"):
        assert cache.put("ab12", b"artifact") is None
    folder = os.path.dirname(cache.path("ab12"))
    assert os.listdir(folder) == []  # the temporary file is gone too
    assert cache.get("ab12") is None
    monkeypatch.undo()
    assert cache.put("ab12", b"artifact") is not None
    assert cache.get("ab12") == b"artifact"


def test_a_read_only_cache_directory_warns_and_is_only_read(tmp_path, monkeypatch):
    cache = DiskCache("ro", root=str(tmp_path))
    assert cache.put("cd34", b"old") is not None
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        os.chmod(os.path.dirname(cache.path("cd34")), 0o555)
    else:  # root writes anywhere: the refusal is made to happen

        def read_only(*args, **kwargs):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

        monkeypatch.setattr(compile_cache.tempfile, "mkstemp", read_only)
    try:
        with pytest.warns(RuntimeWarning, match="cannot write cache entry.*Permission denied"):
            assert cache.put("cd34", b"new") is None
        assert cache.get("cd34") == b"old"  # what was there is still served
    finally:
        os.chmod(os.path.dirname(cache.path("cd34")), 0o755)


def test_keyboard_interrupt_while_writing_the_cache_leaves_no_partial_entry(tmp_path, monkeypatch):
    cache = DiskCache("ki", root=str(tmp_path))

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(compile_cache.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cache.put("ef56", b"artifact")
    assert os.listdir(os.path.dirname(cache.path("ef56"))) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.get("ef56") is None
