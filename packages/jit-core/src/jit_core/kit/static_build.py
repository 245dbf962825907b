"""Building a static program (``paddle.jit.to_static``) in a process whose other threads
run eager Paddle.

Paddle keeps its eager/static mode per thread (the Python ``global_var`` and the C++
tracer both), except for one thing: a thread that touches Paddle for the first time
copies the mode from a module global that follows the last switch made by *any* thread
(``framework.GlobalThreadLocal``, Paddle 3.0 to 3.3). A thread started while another one
builds a program is then in static mode for good: its ``paddle.rand`` is a PIR value and
its ``x * 2`` adds an operator to a program that does not hold ``x`` (a segfault). Threads
that touched Paddle before the build are not affected (checked on 3.0 and 3.3: their
operators, ``full`` and ``rand`` included, run eagerly during another thread's build).

The ONNX export, shape inference and the paddle backend's static mode build static
programs inside a user's call, maybe while other threads start on the same optimized
model. ``building()`` is what each such build runs under:

- a thread that first touches Paddle during the build starts in eager mode, as it would
  at any other time;
- one build at a time in the process: two interleaved builds would undo each other's
  setting, and PIR's program building shares process-wide state.

A build of Paddle's own (``paddle.jit.to_static`` called by the user) is not covered: a
thread started during it is in static mode, with or without this project.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator

_LOCK = threading.RLock()
_depth = 0


@contextmanager
def building() -> Iterator[None]:
    """Run a static-program build of this project's (``to_static``, ``jit.save``)."""
    global _depth
    with _LOCK:
        _depth += 1
        try:
            if _depth > 1:  # nested: the outer build has set everything up
                yield
                return
            restore = _new_threads_start_eager()
            try:
                yield
            finally:
                restore()
        finally:
            _depth -= 1


def _new_threads_start_eager() -> Callable[[], None]:
    """From now on, a thread that first touches Paddle starts in eager mode; returns the
    undo. (On a Paddle without ``GlobalThreadLocal`` nothing is changed.)"""
    from paddle.base import framework

    cls = getattr(framework, "GlobalThreadLocal", None)
    tracer = getattr(getattr(framework, "global_var", None), "_dygraph_tracer_", None)
    if cls is None or tracer is None or "__init__" not in vars(cls):
        return lambda: None
    original = vars(cls)["__init__"]

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        # the eager tracer, not the static mode copied from the building thread (the
        # class's __setattr__ switches this thread's C++ tracer too)
        self._dygraph_tracer_ = tracer

    cls.__init__ = init

    def restore() -> None:
        cls.__init__ = original

    return restore
