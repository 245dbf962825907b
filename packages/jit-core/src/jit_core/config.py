"""Options of one ``optimize()`` call, with their defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict

DEFAULT_RECOMPILE_LIMIT = 8


@dataclass
class Options:
    backend: str = "paddle"
    full_graph: bool = False
    #: cache entries per code object before the frame runs eagerly for good
    recompile_limit: int = DEFAULT_RECOMPILE_LIMIT
    #: options handed to the backend unchanged
    backend_options: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_kwargs(cls, backend: str, full_graph: bool, options: Dict[str, Any]) -> Options:
        opts = dict(options)
        limit = opts.pop("recompile_limit", DEFAULT_RECOMPILE_LIMIT)
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"recompile_limit must be a positive int, got {limit!r}")
        return cls(
            backend=backend, full_graph=full_graph, recompile_limit=limit, backend_options=opts
        )
