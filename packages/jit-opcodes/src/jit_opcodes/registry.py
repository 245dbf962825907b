"""The ``@handler`` decorator: every family module declares its handlers through it."""

from __future__ import annotations

from typing import Callable, Iterable, List, NamedTuple, Optional, Tuple

from jit_core.spi import BreakKind

#: the Python versions this package knows
ALL_VERSIONS: Tuple[str, ...] = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13")


class Declared(NamedTuple):
    """One ``@handler`` declaration for one opname."""

    opname: str
    fn: Callable
    versions: Tuple[str, ...]
    family: str
    #: how jit-core breaks the graph at the opcode (None: the frame runs eagerly there)
    break_as: Optional[BreakKind] = None


#: every declaration, in declaration order
HANDLERS: List[Declared] = []


def versions(first: str = "3.8", last: str = "3.13") -> Tuple[str, ...]:
    """The versions from ``first`` to ``last`` inclusive."""
    lo, hi = ALL_VERSIONS.index(first), ALL_VERSIONS.index(last)
    return ALL_VERSIONS[lo : hi + 1]


def handler(
    *opnames: str,
    versions: Iterable[str] = ALL_VERSIONS,
    eager: Optional[str] = None,
    breaks: Optional[str] = None,
    break_as: Optional[BreakKind] = None,
):
    """Declare ``fn(tx, inst)`` as the handler of ``opnames`` on ``versions``.

    ``break_as`` is how the graph breaks at the instruction when the handler raises
    ``Unsupported`` (a ``jit_core.spi.BreakKind``: the stack it takes and the
    code that runs it in CPython between two graphs); without it such a frame runs
    eagerly. ``eager="why"`` declares a handler that always sends the frame to eager
    execution; ``breaks="why"`` one that always breaks the graph there, which needs a
    ``break_as``. The support matrix shows the reason."""
    vs = tuple(versions)
    for v in vs:
        if v not in ALL_VERSIONS:
            raise ValueError(f"unknown Python version {v!r}")
    if break_as is not None and not isinstance(break_as, BreakKind):
        raise TypeError(f"break_as={break_as!r} is not a jit_core.spi.BreakKind")
    if breaks is not None and break_as is None:
        raise ValueError(
            f"{', '.join(opnames)}: breaks={breaks!r} needs break_as= (how the graph breaks)"
        )

    def deco(fn: Callable) -> Callable:
        family = fn.__module__.rsplit(".", 1)[-1]
        # (attributes of the function, which the support matrix reads; mypy's Callable
        # has none)
        if eager is not None:
            fn.eager_reason = eager  # type: ignore[attr-defined]
        if breaks is not None:
            fn.break_reason = breaks  # type: ignore[attr-defined]
        for name in opnames:
            HANDLERS.append(Declared(name, fn, vs, family, break_as))
        return fn

    return deco
