"""TVM's tensor intrinsics, imported in seconds instead of a quarter of a minute.

MetaSchedule imports ``tvm.s_tir.tensor_intrin`` the first time it makes a
``TuneContext`` (the sampled schedules of every build make one per kernel, tuning one per
task). That package declares some 250 TVMScript functions, and TVMScript's ``prim_func``
calls ``inspect.stack()`` for each. ``inspect.stack()`` looks for the source of every
frame on the stack; for a frame whose file does not exist (``<frozen
importlib._bootstrap>``: an import's own frames, ``<string>``) it scans all of
``sys.modules`` on every call, and with Paddle imported that is more than a thousand
modules: 17 s on 2 cores, in every process that builds (the build worker, a user's
process building in place), before the first kernel is scheduled.

Here the import runs with ``inspect.stack`` giving such frames no source lines without
the scan: exactly what the scan finds for them (none). Frames of files that exist are
described by ``inspect`` itself, source lines included (TVMScript reads those to tell a
function declared in a class). 3.1 s instead of 17.3 s.
"""

from __future__ import annotations

import inspect
import linecache
import os
import sys
import threading
from typing import List

_MODULE = "tvm.s_tir.tensor_intrin"
_lock = threading.Lock()


def import_tensor_intrinsics() -> None:
    """Import TVM's tensor intrinsics once per process (see the module's docstring)."""
    if _MODULE in sys.modules:
        return
    with _lock:
        if _MODULE in sys.modules:
            return
        real = inspect.stack
        inspect.stack = _stack  # type: ignore[assignment]
        try:
            __import__(_MODULE)
        finally:
            inspect.stack = real  # type: ignore[assignment]


def _stack(context: int = 1) -> List[inspect.FrameInfo]:
    """``inspect.stack(context)``, without the scan of ``sys.modules`` for frames whose
    file neither exists nor is in ``linecache``."""
    found = []
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if os.path.exists(name) or name in linecache.cache:
            found.append(inspect.FrameInfo(frame, *inspect.getframeinfo(frame, context)))
        else:
            code = frame.f_code
            found.append(inspect.FrameInfo(frame, name, frame.f_lineno, code.co_name, None, None))
        frame = frame.f_back
    return found


__all__ = ["import_tensor_intrinsics"]
