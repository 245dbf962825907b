"""Graphs with dynamic dimensions on backends that build for fixed shapes."""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, List, Sequence, Tuple

from .fx import GraphModule
from .passes.shape_prop import propagate_shapes

log = logging.getLogger("jit_core.recompiles")

#: builds per graph before the rest of its shapes run on the paddle backend
DEFAULT_SHAPE_LIMIT = 8


class PerShape:
    """Serves one graph with dynamic dimensions through a backend that builds for one
    input shape at a time: a build per distinct shape, made on the first call with it,
    up to ``limit``; other shapes then run the graph's own code (Paddle's kernels)."""

    def __init__(
        self,
        backend,
        gm: GraphModule,
        examples: Sequence[Any],
        options: Dict[str, Any],
        limit: int = DEFAULT_SHAPE_LIMIT,
    ):
        self.backend = backend
        self.gm = gm
        self.options = options
        self.limit = limit
        self.builds: Dict[Tuple, Callable] = {}
        self.built = 0
        #: shapes served by the paddle backend past the limit
        self.over_limit = 0
        self._build(self._key(examples), examples)

    @staticmethod
    def _key(args: Sequence[Any]) -> Tuple:
        return tuple(tuple(a.shape) for a in args)

    def _build(self, key: Tuple, args: Sequence[Any]) -> Callable:
        if self.built >= self.limit:
            self.over_limit += 1
            log.info(
                "%s: shape %s past the %d builds of backend %r: runs on Paddle's kernels",
                type(self.gm).__name__,
                key,
                self.limit,
                self.backend.name,
            )
            fn = self.builds[key] = self.gm.forward
            return fn
        # a copy whose shapes are this call's: backends rewrite graphs by their shapes
        copy = GraphModule(self.gm, self.gm.graph.copy(), class_name=type(self.gm).__name__)
        copy.meta = dict(self.gm.meta)
        examples: List[Any] = list(args)
        propagate_shapes(copy, examples)
        fn = self.builds[key] = self.backend.compile(copy, examples, **self.options)
        self.built += 1
        return fn

    def __call__(self, *args):
        fn = self.builds.get(self._key(args))
        if fn is None:
            fn = self._build(self._key(args), args)
        return fn(*args)

    def describe(self) -> str:
        extra = f", {self.over_limit} more on Paddle's kernels" if self.over_limit else ""
        return (
            f"backend {self.backend.name!r} builds for fixed shapes: one build per input "
            f"shape ({self.built} so far{extra})"
        )
