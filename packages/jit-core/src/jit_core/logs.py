"""Logging channels, switched on with one environment variable.

``JIT_LOGS=graphs,guards`` (or ``all``) turns channels on at import; ``set_logs()`` does
it from code. Every channel is a child of the ``jit_core`` logger, so ordinary
``logging`` configuration works too.
"""

from __future__ import annotations

import logging
import os
from typing import Iterable, Optional, Union

ENV_VAR = "JIT_LOGS"

#: channel name -> what it reports
CHANNELS = {
    "graphs": "the generated code of every captured graph",
    "guards": "the generated guard function of every cache entry",
    "breaks": "why a frame could not be captured and runs eagerly",
    "recompiles": "cache misses that trigger a new capture, and the guard that failed",
    "bytecode": "the original and transformed bytecode of every compiled frame",
    "tuning": "progress of backends that tune kernels (tvm's MetaSchedule), task by task",
    "cache": "the compile cache: hits, misses and stores on disk and in the remote store, "
    "and the entries it refuses",
}

_ROOT = logging.getLogger("jit_core")
# Quiet unless a channel is switched on: Paddle configures the root logger at INFO.
_ROOT.setLevel(logging.WARNING)


def get_logger(channel: str) -> logging.Logger:
    if channel not in CHANNELS:
        raise ValueError(f"unknown log channel {channel!r}; known: {', '.join(CHANNELS)}")
    return _ROOT.getChild(channel)


def set_logs(channels: Optional[Union[str, Iterable[str]]] = None, level: int = logging.DEBUG):
    """Turn on the named channels (a comma-separated string or an iterable; 'all' for every one).

    A stderr handler is attached to the ``jit_core`` logger once, if it has none.
    """
    if channels is None:
        return
    if isinstance(channels, str):
        names = [c.strip() for c in channels.split(",") if c.strip()]
    else:
        names = list(channels)
    if "all" in names:
        names = list(CHANNELS)
    for name in names:
        get_logger(name).setLevel(level)
    if names and not _ROOT.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        _ROOT.addHandler(handler)


set_logs(os.environ.get(ENV_VAR))

graphs_log = get_logger("graphs")
guards_log = get_logger("guards")
breaks_log = get_logger("breaks")
recompiles_log = get_logger("recompiles")
bytecode_log = get_logger("bytecode")
