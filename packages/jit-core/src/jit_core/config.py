"""Options of one ``optimize()`` call, with their defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence

DEFAULT_RECOMPILE_LIMIT = 8
DEFAULT_ACCUMULATED_RECOMPILE_LIMIT = 64


def _positive_int(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


@dataclass
class Options:
    backend: str = "paddle"
    full_graph: bool = False
    #: cache entries per code object (and per ``self`` or layer held by a local, for
    #: frames whose guards pin it) past which a call that matches none runs eagerly
    recompile_limit: int = DEFAULT_RECOMPILE_LIMIT
    #: cache entries per code object in all (every ``self`` together) past which a call
    #: that matches none runs eagerly
    accumulated_recompile_limit: int = DEFAULT_ACCUMULATED_RECOMPILE_LIMIT
    #: options handed to the backend unchanged
    backend_options: Dict[str, Any] = field(default_factory=dict)
    #: graph passes: None for the registered defaults, else names or GraphPass objects
    passes: Optional[Sequence[Any]] = None
    #: names of passes not to run
    disable_passes: Sequence[str] = ()
    #: parameters and buffers are constants: inference passes may fold them into the graph
    freeze: bool = False
    #: lint the graph after every pass (None: the JIT_DEBUG environment variable decides)
    debug: Optional[bool] = None
    #: dynamic shapes (``jit_core.shapes``): None makes a dimension dynamic when its size
    #: changing causes a recompile, True every dimension from the start, False none
    dynamic: Optional[bool] = None

    @classmethod
    def from_kwargs(cls, backend: str, full_graph: bool, options: Dict[str, Any]) -> Options:
        opts = dict(options)
        limit = _positive_int(
            "recompile_limit", opts.pop("recompile_limit", DEFAULT_RECOMPILE_LIMIT)
        )
        accumulated = _positive_int(
            "accumulated_recompile_limit",
            opts.pop("accumulated_recompile_limit", DEFAULT_ACCUMULATED_RECOMPILE_LIMIT),
        )
        passes = opts.pop("passes", None)
        if passes is False:
            passes = ()
        disable = opts.pop("disable_passes", ())
        if isinstance(disable, str):
            disable = (disable,)
        freeze = opts.pop("freeze", False)
        if not isinstance(freeze, bool):
            raise TypeError(f"freeze must be True or False, got {freeze!r}")
        debug = opts.pop("debug", None)
        dynamic = opts.pop("dynamic", None)
        if dynamic not in (None, True, False):
            raise TypeError(f"dynamic must be None, True or False, got {dynamic!r}")
        return cls(
            backend=backend,
            full_graph=full_graph,
            recompile_limit=limit,
            accumulated_recompile_limit=accumulated,
            backend_options=opts,
            passes=passes,
            disable_passes=tuple(disable),
            freeze=freeze,
            debug=debug,
            dynamic=dynamic,
        )
