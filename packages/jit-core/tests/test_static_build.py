"""Static builds (the ONNX export, shape inference) in a process whose other threads run
Paddle: ``jit_core.kit.static_build``."""

from __future__ import annotations

import threading

import paddle
from paddle.base import framework

from jit_core.kit import static_build


def _in_static_mode():
    # what paddle.jit.to_static does around its program build: process-wide
    return framework._dygraph_guard(None)


def test_a_thread_that_first_touches_paddle_during_a_build_runs_eagerly_after_it():
    # Paddle's default for a new thread follows the last mode switch of any thread: a
    # thread that first asks during a build stays in static mode for good, and its
    # paddle.rand is a PIR value (float() of it raises; its ``x * 2`` segfaults)
    touched = threading.Event()
    build_done = threading.Event()
    out = {}

    def work():
        out["during"] = paddle.in_dynamic_mode()  # its first touch: inside the build
        touched.set()
        build_done.wait(10)
        try:
            t = paddle.rand([3]) * 2 + 1
            out["value"] = float(t.sum())
            out["eager"] = paddle.in_dynamic_mode()
        except Exception as e:  # noqa: BLE001 - the test reports it
            out["error"] = f"{type(e).__name__}: {e}"

    worker = threading.Thread(target=work)
    with static_build.building(), _in_static_mode():
        assert not paddle.in_dynamic_mode()
        worker.start()
        assert touched.wait(10)
    build_done.set()
    worker.join(10)
    assert "error" not in out, out["error"][:300]
    assert out["eager"] is True
    assert 3.0 <= out["value"] <= 9.0
    assert paddle.in_dynamic_mode()


def test_builds_nest_and_leave_paddle_as_it_was():
    init = framework.GlobalThreadLocal.__init__
    with static_build.building():
        with static_build.building():  # shape inference inside an export, say
            pass
        assert framework.GlobalThreadLocal.__init__ is not init  # still building
    assert framework.GlobalThreadLocal.__init__ is init
    assert paddle.in_dynamic_mode()
