"""jit_core: a Python-level JIT compiler for PaddlePaddle.

``optimize(fn_or_layer, backend="paddle")`` captures the Paddle work of a function or a
layer from its bytecode into graphs, guards and caches them, and runs them on a backend
plugin. ``explain(fn, *args)`` reports what was captured and why anything was not.
"""

from __future__ import annotations

# first: a missing or too old Paddle is one clear error, not a traceback from deep inside
from . import (
    _paddle,  # noqa: F401
    debug,
)
from .api import OptimizedFunction, OptimizedLayer, optimize
from .cache.remote import set_remote_cache
from .capture import capture
from .controls import disable, error_on_graph_break, set_stance
from .errors import (
    BackendNotFoundError,
    BackendUnavailableError,
    CaptureError,
    GraphBreakError,
    JitError,
    RecompileError,
    Unsupported,
)
from .explain import ExplainOutput, explain
from .graphnet.extract import ExtractError, extract
from .hookspecs import hookimpl
from .logs import set_logs
from .passes import GraphPass, graph_pass, replace_pattern
from .plugins import backends, graph_passes, list_plugins
from .profiler import Profile, profile
from .runtime import profiling
from .shapes import mark_dynamic, mark_static

__version__ = "0.2.0"

# JIT_PROFILE=path: the whole program is profiled, and the profile written at exit
profiling.profile_from_env()

__all__ = [
    "optimize",
    "explain",
    "debug",
    "profile",
    "Profile",
    "capture",
    "extract",
    "ExtractError",
    "mark_dynamic",
    "mark_static",
    "replace_pattern",
    "graph_pass",
    "GraphPass",
    "graph_passes",
    "CaptureError",
    "ExplainOutput",
    "OptimizedFunction",
    "OptimizedLayer",
    "JitError",
    "GraphBreakError",
    "RecompileError",
    "disable",
    "set_stance",
    "error_on_graph_break",
    "BackendNotFoundError",
    "BackendUnavailableError",
    "Unsupported",
    "hookimpl",
    "set_logs",
    "set_remote_cache",
    "backends",
    "list_plugins",
    "__version__",
]
