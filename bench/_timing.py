"""The timing loop the benchmarks share: medians over interleaved rounds."""

from __future__ import annotations

import contextlib
import copy
import io
import statistics
import time
from typing import Any, Callable, List, Sequence


def per_call_us(
    fns: Sequence[Callable],
    args: tuple,
    repeat: int,
    rounds: int = 9,
    warmup: int = 20,
    quiet: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> List[float]:
    """Median microseconds per call of each function on ``args``. Rounds interleave the
    functions so that drift of the machine (frequency, other processes) hits all of them
    alike, in turn forwards and backwards: what one leaves behind (the allocator's free
    pages, the caches) is not always met by the same next one. ``quiet``: what they
    print is swallowed (models that print at a break).
    ``clock``: ``time.process_time`` counts only this process's CPU time, steadier than
    wall time while other processes share the cores."""
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink) if quiet else contextlib.nullcontext():
        for fn in fns:
            for _ in range(warmup):
                fn(*args)
        samples: List[List[float]] = [[] for _ in fns]
        for r in range(rounds):
            order = list(enumerate(fns))
            for i, fn in order if r % 2 == 0 else order[::-1]:
                start = clock()
                for _ in range(repeat):
                    fn(*args)
                samples[i].append((clock() - start) / repeat * 1e6)
    return [statistics.median(s) for s in samples]


def sot_of(net: Any) -> Any:
    """Paddle's SOT (``paddle.jit.to_static(..., full_graph=False)``) of a copy of the
    layer ``net``: ``to_static`` sets its ``forward`` on the instance it is given, and
    ``net`` itself, timed as eager Paddle, would then run SOT."""
    import paddle

    return paddle.jit.to_static(copy.deepcopy(net), full_graph=False)
