"""Options of one ``optimize()`` call, with their defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence

DEFAULT_RECOMPILE_LIMIT = 8


@dataclass
class Options:
    backend: str = "paddle"
    full_graph: bool = False
    #: cache entries per code object before the frame runs eagerly for good
    recompile_limit: int = DEFAULT_RECOMPILE_LIMIT
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

    @classmethod
    def from_kwargs(cls, backend: str, full_graph: bool, options: Dict[str, Any]) -> Options:
        opts = dict(options)
        limit = opts.pop("recompile_limit", DEFAULT_RECOMPILE_LIMIT)
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"recompile_limit must be a positive int, got {limit!r}")
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
        return cls(
            backend=backend,
            full_graph=full_graph,
            recompile_limit=limit,
            backend_options=opts,
            passes=passes,
            disable_passes=tuple(disable),
            freeze=freeze,
            debug=debug,
        )
