"""Cache keys of what a backend builds from a graph's ONNX model, one per export route.

A model the direct exporter wrote depends on the graph and the exporter
(``exporter_fingerprint``), not on which paddle2onnx or onnx is installed; one paddle2onnx
wrote depends on both. Keying every build by both versions made Python 3.13 (no
paddle2onnx, a newer onnx) rebuild what 3.12 had built from the same direct model; keying
none of them would let a process without paddle2onnx load a build it could not make itself.
So a build is stored under the key of the route its model took, and a process looks up only
the routes it could take.
"""

from __future__ import annotations

import hashlib
from typing import Optional, Tuple

from .export import exporter_choice, installed_version, paddle2onnx_missing

#: the routes, in the order ``export_onnx`` tries them
DIRECT = "direct"
PADDLE2ONNX = "paddle2onnx"


class ExportKeys:
    """The keys of one graph's build under each route this process can export by, derived
    from ``base`` (the backend's ``graph_key``: graph, inputs, the backend's own options)."""

    __slots__ = ("_keys",)

    def __init__(self, base: str):
        def derive(*parts: str) -> str:
            return hashlib.sha256("\0".join((base, *parts)).encode()).hexdigest()

        self._keys = {}
        if exporter_choice() == DIRECT:
            self._keys[DIRECT] = derive(DIRECT)
        if not paddle2onnx_missing():
            self._keys[PADDLE2ONNX] = derive(
                PADDLE2ONNX,
                installed_version("paddle2onnx") or "",
                installed_version("onnx") or "",
            )

    def get(self, cache) -> Optional[Tuple[str, bytes]]:
        """The first build ``cache`` (a ``DiskCache``) holds under one of the keys, with
        that key; None where it holds none."""
        for key in self._keys.values():
            blob = cache.get(key)
            if blob is not None:
                return key, blob
        return None

    def of(self, gm) -> Optional[str]:
        """The key of a build from the model ``gm`` was just exported to (``export_onnx``
        notes in ``gm.meta`` when paddle2onnx wrote it); None where this process has no
        key for that route."""
        route = PADDLE2ONNX if gm.meta.get("onnx_exporter") or DIRECT not in self._keys else DIRECT
        return self._keys.get(route)

    def put(self, cache, gm, blob: bytes) -> None:
        key = self.of(gm)
        if key is not None:
            cache.put(key, blob)
