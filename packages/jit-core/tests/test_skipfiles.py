"""Which code the frame hook leaves alone (``jit_core.skipfiles``)."""

from __future__ import annotations

import importlib.util
import os
import sys

import paddle

import jit_core
from jit_core.skipfiles import is_skipped_file


def test_paddle_the_standard_library_and_infrastructure_are_skipped(tmp_path):
    assert is_skipped_file(paddle.tensor.math.__file__)
    assert is_skipped_file(os.__file__)
    assert is_skipped_file(jit_core.__file__)
    site = os.path.join(str(tmp_path), "lib", "site-packages")
    assert is_skipped_file(os.path.join(site, "ray", "_private", "worker.py"))
    assert is_skipped_file(os.path.join(site, "filelock", "_core", "_fork.py"))
    # a model library is user code, and so is a package whose name merely starts alike
    assert not is_skipped_file(os.path.join(site, "paddlenlp", "transformers", "bert.py"))
    assert not is_skipped_file(os.path.join(site, "raytracer", "model.py"))
    assert not is_skipped_file(__file__)


HOOK = """
active = False
calls = 0


def audit(event, args):
    global calls
    if active:
        calls += 1
"""


def test_an_audit_hook_of_filelock_is_not_captured_inside_the_users_frames(tmp_path):
    # filelock installs one (fork safety); Python calls it on events such as id() while the
    # user's frames run under the hook. (An audit hook cannot be removed: this one is a
    # no-op once the test is over.)
    folder = tmp_path / "site-packages" / "filelock"
    folder.mkdir(parents=True)
    (folder / "audit.py").write_text(HOOK)
    spec = importlib.util.spec_from_file_location("fake_filelock_audit", str(folder / "audit.py"))
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    sys.addaudithook(hook.audit)

    def f(x, y):
        # runs eagerly (a set of tensors), under the hook: events reach the audit hook
        return len({x, y}) * x

    hook.active = True
    try:
        x = paddle.rand([2])
        report = jit_core.explain(f, x, x)
    finally:
        hook.active = False
    assert hook.calls > 0
    assert report.graph_count == 0, str(report)
