"""Which code the frame hook leaves alone (``jit_core.runtime.skipfiles``)."""

from __future__ import annotations

import copy
import importlib.util
import io
import os
import sys

import numpy as np
import paddle

import jit_core
from jit_core.runtime import eval_frame
from jit_core.runtime.skipfiles import is_skipped_file


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


# ------------------------------------------- library code below the hook, made quiet

SINK = io.StringIO()


def copies(x, items):
    y = x + 1
    print("copying", file=SINK)  # a graph break: the rest runs in a resume function
    copy.deepcopy(items)  # library code that calls library code, run between graphs
    return y * 2


def frames_hooked(fast, *args, monkeypatch) -> int:
    """How many frames Paddle's shim hands the hook during ``fast(*args)``."""
    seen = []
    original = eval_frame._Hook.__call__

    def counting(self, frame):
        seen.append(frame.f_code)
        return original(self, frame)

    with monkeypatch.context() as m:
        m.setattr(eval_frame._Hook, "__call__", counting)
        fast(*args)
    return len(seen)


def test_library_code_that_never_reaches_user_code_runs_unhooked_below(monkeypatch):
    """Every hooked frame costs a locals dict and a call of the hook: a library code
    that ran ``QUIET_AFTER`` times with no user code below it runs what it calls with
    the hook off, as eager does (``copy.deepcopy``'s recursion here)."""
    items = [[i, str(i), (i, float(i))] for i in range(20)]
    x = paddle.rand([3])
    fast = jit_core.optimize(copies)
    hooked = [frames_hooked(fast, x, items, monkeypatch=monkeypatch) for _ in range(3)]
    assert hooked[0] > 40, hooked  # the first call: deepcopy's recursion, frame by frame
    assert hooked[2] <= 3, hooked  # then deepcopy itself, not what it calls
    np.testing.assert_allclose(fast(x, items).numpy(), copies(x, items).numpy())
    assert fast.jit_stats.eager_frames == {}


class Doubler(paddle.nn.Layer):
    def forward(self, x):
        return x * 2 + 1


RELU = paddle.nn.ReLU()  # Paddle's own layer: its forward is library code
DOUBLER = Doubler()


def reads_its_locals(x):
    if (x > 0).any():  # a tensor decides, and the frame reads its locals: never split,
        x = x + 1  # it runs eagerly, and what it calls goes through the hook
    assert "x" in locals()
    for _ in range(eval_frame.QUIET_AFTER + 2):
        x = RELU(x)  # a layer's call with library code below it, again and again
    return DOUBLER(x)  # a layer's call reaching user code


def test_user_code_below_a_layer_call_is_captured_after_many_library_layers():
    """``Layer.__call__`` first ran Paddle's own ``ReLU`` more than ``QUIET_AFTER``
    times: it stays hooked (``LIBRARY_BRIDGES``), and the user layer's ``forward``
    below it is still captured."""
    x = paddle.rand([3]) - 0.5
    fast = jit_core.optimize(reads_its_locals)
    for _ in range(3):
        np.testing.assert_allclose(fast(x).numpy(), reads_its_locals(x).numpy())
    stats = fast.jit_stats
    assert any(key.startswith("reads_its_locals") for key in stats.eager_frames), stats
    assert [n for k, n in stats.entries.items() if k.startswith("Doubler.forward")] == [1]
    assert stats.captures == 2, stats  # the eager frame's attempt, and Doubler's graph
