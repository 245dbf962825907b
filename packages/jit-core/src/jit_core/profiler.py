"""``jit_core.profile()``: which graphs ran how often and for how long, what compiling
each cost, which guards failed and which breaks were taken (``runtime.profiling``)."""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional

from . import api  # noqa: F401 - optimized objects follow the profile (api.apply_controls)
from .runtime import profiling
from .runtime.profiling import Profile


@contextlib.contextmanager
def profile(path: Optional[str] = None) -> Iterator[Profile]:
    """Profile the optimized calls made inside the block (or the decorated function)::

        with jit_core.profile() as prof:
            for step in range(100):
                train_step(x, y)
        print(prof)                 # a table, graphs sorted by time
        prof.to_json()              # the same as a dict
        prof.chrome_trace()         # spans for chrome://tracing or Perfetto

    ``path``: also write ``path`` (JSON), ``path``'s ``.trace.json`` (the trace) and
    ``.txt`` (the table) when the block ends. ``JIT_PROFILE=path`` profiles a whole
    program the same way, written at exit. Profiles do not nest.

    While it is active, calls take the general path (the inlined call of a cache hit
    is not timed graph by graph): times are a few microseconds a call above an
    unprofiled run.
    """
    active = profiling.start()
    try:
        yield active
    finally:
        profiling.stop()
        if path:
            active.save(path)


__all__ = ["Profile", "profile"]
