"""What a graph pass is: ``GraphPass`` (a function with the facts it requires and the
graph properties it keeps), the ``@graph_pass`` decorator, and the ``PassContext`` it is
run with. The plugin contract: ``plugins`` checks what a plugin registers against it, the
pass manager (``passes.manager``) runs it. It imports nothing of jit-core but ``errors``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, FrozenSet, Iterable, List, Optional, Set

from ..errors import JitError

#: facts a capture can establish; ``requires`` may name these
FACTS = ("frozen", "no_grad")
#: graph properties a pass can require and preserve
PROPERTIES = ("shapes",)


class PassError(JitError):
    """A graph pass is unknown, misdeclared, or left an invalid graph."""


@dataclass(frozen=True)
class GraphPass:
    name: str
    fn: Callable[[Any, PassContext], Optional[int]]
    order: int = 100
    requires: FrozenSet[str] = frozenset()
    preserves: FrozenSet[str] = frozenset(PROPERTIES)
    #: part of the default pipeline (``optimize(passes=None)``)
    default: bool = True
    description: str = ""

    def __post_init__(self):
        unknown = set(self.requires) - set(FACTS) - set(PROPERTIES)
        unknown |= set(self.preserves) - set(PROPERTIES)
        if unknown:
            raise PassError(
                f"pass {self.name!r} declares unknown requirements {sorted(unknown)}; "
                f"known facts: {list(FACTS)}, graph properties: {list(PROPERTIES)}"
            )


def graph_pass(
    name: str,
    *,
    order: int = 100,
    requires: Iterable[str] = (),
    preserves: Iterable[str] = PROPERTIES,
    default: bool = True,
) -> Callable[[Callable], GraphPass]:
    """Decorator: turn ``fn(gm, ctx) -> int`` into a ``GraphPass``."""

    def wrap(fn: Callable) -> GraphPass:
        doc = (fn.__doc__ or "").strip().splitlines()
        return GraphPass(
            name=name,
            fn=fn,
            order=order,
            requires=frozenset(requires),
            preserves=frozenset(preserves),
            default=default,
            description=doc[0] if doc else "",
        )

    return wrap


@dataclass
class PassContext:
    """What a pass may know about the capture its graph comes from."""

    example_inputs: List[Any]
    facts: Set[str] = field(default_factory=set)
    #: graph properties currently correct
    valid: Set[str] = field(default_factory=lambda: set(PROPERTIES))
    #: facts that a pass which ran relied on: the cache entry must be guarded on them
    relied_on: Set[str] = field(default_factory=set)
    debug: bool = False


__all__ = ["FACTS", "PROPERTIES", "GraphPass", "PassContext", "PassError", "graph_pass"]
