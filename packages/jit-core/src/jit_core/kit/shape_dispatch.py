"""Graphs with dynamic dimensions on backends that build for fixed shapes."""

from __future__ import annotations

import logging
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import paddle

from .. import rng
from ..errors import StaticShapesOnly
from ..fx import GraphModule
from ..passes.shape_prop import propagate_shapes
from ..shapes import size

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
        why: str = "",
    ):
        self.backend = backend
        self.why = why
        self.gm = gm
        self.options = options
        self.limit = limit
        self.builds: Dict[Tuple, Callable] = {}
        self.built = 0
        #: shapes served by the paddle backend past the limit, and because a build failed
        self.over_limit = 0
        self.failed = 0
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
        graph = self.gm.graph.copy()
        for node in graph.nodes:
            # this build is for this shape alone
            node.meta.pop("dynamic_dims", None)
            node.meta.pop("dynamic_bounds", None)
        copy = GraphModule(self.gm, graph, class_name=type(self.gm).__name__)
        copy.meta = dict(self.gm.meta)
        examples: List[Any] = list(args)
        if not self.builds:
            # the first build is the capture's: its errors are the capture's to report
            from ..runtime.convert_frame import EXAMPLE_RUN

            try:
                fn = self.backend.compile(copy, examples, **self.options)
            finally:
                # (the capture's outputs, which the copy need not keep)
                copy.meta.pop(EXAMPLE_RUN, None)
        else:
            try:
                # (a build at call time draws nothing from the user's random stream)
                with rng.preserved():
                    propagate_shapes(copy, examples)
                    fn = self.backend.compile(copy, examples, **self.options)
            except Exception as e:  # noqa: BLE001 - this shape runs on Paddle's kernels
                self.failed += 1
                warnings.warn(
                    f"jit_core: backend {self.backend.name!r} could not build "
                    f"{type(self.gm).__name__} for input shapes {list(key)} "
                    f"({type(e).__name__}: {str(e)[:300]}); they run on Paddle's kernels",
                    RuntimeWarning,
                    stacklevel=3,
                )
                fn = self.gm.forward
        self.builds[key] = fn
        self.built += 1
        return fn

    def __call__(self, *args):
        fn = self.builds.get(self._key(args))
        if fn is None:
            fn = self._build(self._key(args), args)
        return fn(*args)

    def describe(self) -> str:
        paddle_kernels = self.over_limit + self.failed
        extra = f", {paddle_kernels} on Paddle's kernels" if paddle_kernels else ""
        why = self.why or "it builds for fixed shapes"
        return (
            f"one build per input shape ({self.built} so far{extra}): backend "
            f"{self.backend.name!r} {why}"
        )


def reads_sizes(gm: GraphModule) -> bool:
    """Whether the graph's code reads a tensor size (``shapes.size``) when it runs."""
    return any(n.op == "call_function" and n.target is size for n in gm.graph.nodes)


def dynamic_dims(gm: GraphModule) -> Dict[str, List[int]]:
    """placeholder name -> its dynamic dimensions, for the inputs that have some."""
    return {
        n.name: list(n.meta["dynamic_dims"])
        for n in gm.graph.nodes
        if n.op == "placeholder" and n.meta.get("dynamic_dims")
    }


def _grown(examples: Sequence[Any], names: List[str], which) -> List[Any]:
    out = []
    for name, x in zip(names, examples):
        for d in which.get(name, ()):
            # the first slice repeated: integer inputs such as token ids stay valid
            x = paddle.concat([x, paddle.slice(x, [d], [0], [1])], axis=d)
        out.append(x)
    return out


def other_sizes(examples: Sequence[Any], gm: GraphModule) -> Iterator[List[Any]]:
    """Example inputs of other sizes, to check that a build serves more than the size it
    was made at: every dynamic dimension one longer, then each one alone (dimensions
    that must agree, such as a batch shared by two inputs, only grow together)."""
    dims = dynamic_dims(gm)
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    yield _grown(examples, names, dims)
    singles = [(name, d) for name, ds in dims.items() for d in ds]
    if len(singles) > 1:
        for name, d in singles:
            yield _grown(examples, names, {name: [d]})


def check_other_sizes(
    gm: GraphModule,
    examples: Sequence[Any],
    check: Callable[[List[Any]], None],
    what: str,
    skip: Optional[Callable[[List[Any]], bool]] = None,
    required: bool = True,
) -> None:
    """Check a backend's build with dynamic dimensions at sizes it was not made at:
    ``check(inputs)`` (raising where the results are wrong) at each of ``other_sizes``
    that the graph's own code takes (dimensions that must agree, grown alone, give no
    such size) and ``skip`` does not exclude. A failing check, or no size to check at
    where ``required``, raises ``StaticShapesOnly`` naming ``what`` (jit-core then builds
    the graph per shape)."""
    checked = 0
    for inputs in other_sizes(examples, gm):
        if skip is not None and skip(inputs):
            continue
        try:
            with paddle.no_grad():
                gm.forward(*inputs)
        except Exception:  # noqa: BLE001 - not inputs Paddle takes
            continue
        try:
            check(inputs)
        except Exception as e:  # any failure: the build serves one size
            raise StaticShapesOnly(
                f"{what} fails at another size: {type(e).__name__}: {str(e)[:300]}"
            ) from e
        checked += 1
    if required and not checked:
        raise StaticShapesOnly(f"no other input size to check {what} at")
