"""Apache TVM backend for jit-core: ``optimize(fn, backend="tvm")``.

Importing the package does not import TVM or Paddle (MetaSchedule's worker processes
import ``jit_backend_tvm._ms_build``); the names below load on first use.
"""

from __future__ import annotations

__version__ = "0.2.0"

_LAZY = {
    "TvmCompileError": "backend",
    "TvmGraph": "backend",
    "compile_graph": "backend",
    "stats": "backend",
    "TuningReport": "tuning",
    "tune": "tuning",
    "database_dir": "tuning",
    "host_target": "target",
    "make_target": "target",
}

__all__ = [*_LAZY, "__version__"]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
