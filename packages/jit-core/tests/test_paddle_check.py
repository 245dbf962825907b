"""jit-core does not depend on a Paddle build (CPU and GPU builds both provide
``import paddle``); importing it checks that one is there and new enough."""

from __future__ import annotations

import sys
import types

import pytest

from jit_core import _paddle


def test_missing_paddle_names_both_builds(monkeypatch):
    monkeypatch.setitem(sys.modules, "paddle", None)  # import paddle raises ImportError
    with pytest.raises(ImportError) as err:
        _paddle.check()
    msg = str(err.value)
    assert "pip install paddlepaddle" in msg and "paddlepaddle-gpu" in msg


def _fake(monkeypatch, version: str) -> None:
    monkeypatch.setitem(sys.modules, "paddle", types.SimpleNamespace(__version__=version))


def test_too_old_paddle_is_refused(monkeypatch):
    _fake(monkeypatch, "2.6.2")
    with pytest.raises(ImportError, match="needs PaddlePaddle 3.0 or newer, found 2.6.2"):
        _paddle.check()


def test_an_untested_release_warns(monkeypatch):
    _fake(monkeypatch, "3.9.0")
    with pytest.warns(RuntimeWarning, match="tested with PaddlePaddle .*found 3.9.0"):
        _paddle.check()


def test_the_tested_release_and_development_builds_are_quiet(monkeypatch, recwarn):
    _fake(monkeypatch, "3.0.0" if sys.version_info < (3, 9) else "3.3.1")
    _paddle.check()
    _fake(monkeypatch, "0.0.0")
    _paddle.check()
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
