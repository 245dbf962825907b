"""The pass manager: which graph passes run, in which order, and what each one did.

A pass is a function ``fn(gm, ctx) -> int`` that rewrites ``gm.graph`` in place and
returns how many rewrites it made. It declares:

- ``requires``: facts about the capture it depends on (``"frozen"``: the user promised
  with ``freeze=True`` that parameters do not change; ``"no_grad"``: gradients were off
  during the capture) and graph properties it reads (``"shapes"``: every tensor node has
  a correct ``meta["shape"]`` and ``meta["dtype"]``). A pass whose facts do not hold is
  skipped and the record says why; a missing graph property is recomputed first.
- ``preserves``: the graph properties still correct after it ran. The others are
  invalidated, so a later pass that needs them gets them recomputed.

Passes run in ascending ``order`` (ties by name) unless the user lists them explicitly.
In debug mode (``debug=True`` or ``JIT_DEBUG=1``) the graph is linted and its code
regenerated after every pass, so a broken pass is named at once.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

from .base import FACTS, PROPERTIES, GraphPass, PassContext, PassError, graph_pass
from .shape_prop import propagate_shapes


@dataclass
class PassRecord:
    """What one pass did to one graph, for ``explain()``."""

    name: str
    ran: bool
    rewrites: int = 0
    ops_before: int = 0
    ops_after: int = 0
    seconds: float = 0.0
    skipped_because: Optional[str] = None

    def __str__(self) -> str:
        if not self.ran:
            return f"{self.name}: skipped ({self.skipped_because})"
        return (
            f"{self.name}: {self.rewrites} rewrite{'s' if self.rewrites != 1 else ''}, "
            f"ops {self.ops_before} -> {self.ops_after} ({self.seconds * 1e3:.1f} ms)"
        )


def op_count(graph) -> int:
    return sum(1 for n in graph.nodes if n.op in ("call_function", "call_method", "call_module"))


def debug_from_env() -> bool:
    return os.environ.get("JIT_DEBUG", "").strip().lower() not in ("", "0", "false", "no")


PassSpec = Union[str, GraphPass]


class PassManager:
    def __init__(self, passes: Sequence[GraphPass], debug: Optional[bool] = None):
        self.passes = list(passes)
        self.debug = debug_from_env() if debug is None else debug

    @classmethod
    def from_options(
        cls,
        passes: Optional[Sequence[PassSpec]] = None,
        disable: Sequence[str] = (),
        debug: Optional[bool] = None,
    ) -> PassManager:
        """``passes=None``: every registered default pass by ``order``; a sequence of names
        or ``GraphPass`` objects runs exactly those, in that order. ``disable`` drops passes
        by name from either."""
        from ..plugins import graph_passes

        known = graph_passes()
        names = set(known)
        chosen: List[GraphPass] = []
        if passes is None:
            chosen = sorted(
                (p for p in known.values() if p.default), key=lambda p: (p.order, p.name)
            )
        else:
            if isinstance(passes, (str, GraphPass)):
                passes = [passes]
            for spec in passes:
                if isinstance(spec, GraphPass):
                    chosen.append(spec)
                    names.add(spec.name)
                elif spec in known:
                    chosen.append(known[spec])
                else:
                    raise PassError(
                        f"unknown graph pass {spec!r}; registered passes: {', '.join(sorted(known))}"
                    )
        for name in disable:
            if name not in names:
                raise PassError(
                    f"cannot disable unknown graph pass {name!r}; registered passes: "
                    f"{', '.join(sorted(known))}"
                )
        off = set(disable)
        return cls([p for p in chosen if p.name not in off], debug)

    @property
    def names(self) -> List[str]:
        return [p.name for p in self.passes]

    def run(self, gm, ctx: PassContext) -> List[PassRecord]:
        """Run the passes over ``gm`` in place; regenerate its code once at the end."""
        ctx.debug = ctx.debug or self.debug
        records: List[PassRecord] = []
        for p in self.passes:
            missing = sorted((set(p.requires) & set(FACTS)) - ctx.facts)
            if missing:
                records.append(PassRecord(p.name, False, skipped_because=_why_not(missing)))
                continue
            for prop in set(p.requires) & set(PROPERTIES):
                if prop not in ctx.valid:
                    propagate_shapes(gm, ctx.example_inputs)
                    ctx.valid.add(prop)
            before = op_count(gm.graph)
            start = time.perf_counter()
            try:
                rewrites = p.fn(gm, ctx) or 0
            except PassError:
                raise
            except Exception as e:
                raise PassError(f"graph pass {p.name!r} failed: {type(e).__name__}: {e}") from e
            elapsed = time.perf_counter() - start
            ctx.valid &= set(p.preserves)
            ctx.relied_on |= set(p.requires) & set(FACTS)
            if ctx.debug:
                self.check(gm, p.name)
            records.append(
                PassRecord(p.name, True, int(rewrites), before, op_count(gm.graph), elapsed)
            )
        gm.recompile()
        return records

    @staticmethod
    def check(gm, pass_name: str) -> None:
        """Lint the graph and regenerate its code; name the pass that broke it."""
        try:
            gm.graph.lint()
            gm.recompile()
        except Exception as e:
            raise PassError(
                f"graph pass {pass_name!r} left an invalid graph: {type(e).__name__}: {e}\n"
                f"{gm.graph}"
            ) from e


def _why_not(missing: List[str]) -> str:
    text = {
        "frozen": "parameters may change: optimize(..., freeze=True) promises they do not",
        "no_grad": "gradients are on: it only runs under paddle.no_grad()",
    }
    return "; ".join(text[m] for m in missing)


__all__ = [
    "FACTS",
    "PROPERTIES",
    "GraphPass",
    "PassContext",
    "PassError",
    "PassManager",
    "PassRecord",
    "graph_pass",
    "op_count",
]
