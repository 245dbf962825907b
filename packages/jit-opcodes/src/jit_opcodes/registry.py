"""The ``@handler`` decorator: every family module declares its handlers through it."""

from __future__ import annotations

from typing import Callable, Iterable, List, Optional, Tuple

#: the Python versions this package knows
ALL_VERSIONS: Tuple[str, ...] = ("3.8", "3.9", "3.10", "3.11", "3.12")

#: (opname, handler, versions, family) in declaration order
HANDLERS: List[Tuple[str, Callable, Tuple[str, ...], str]] = []


def versions(first: str = "3.8", last: str = "3.12") -> Tuple[str, ...]:
    """The versions from ``first`` to ``last`` inclusive."""
    lo, hi = ALL_VERSIONS.index(first), ALL_VERSIONS.index(last)
    return ALL_VERSIONS[lo : hi + 1]


def handler(
    *opnames: str,
    versions: Iterable[str] = ALL_VERSIONS,
    eager: Optional[str] = None,
    breaks: Optional[str] = None,
):
    """Declare ``fn(tx, inst)`` as the handler of ``opnames`` on ``versions``.

    ``eager="why"`` declares a handler that always sends the frame to eager execution
    (it raises ``Unsupported`` at an instruction the graph cannot break at);
    ``breaks="why"`` one that always breaks the graph there (the instruction runs in
    CPython between two graphs). The support matrix shows the reason."""
    vs = tuple(versions)
    for v in vs:
        if v not in ALL_VERSIONS:
            raise ValueError(f"unknown Python version {v!r}")

    def deco(fn: Callable) -> Callable:
        family = fn.__module__.rsplit(".", 1)[-1]
        if eager is not None:
            fn.eager_reason = eager
        if breaks is not None:
            fn.break_reason = breaks
        for name in opnames:
            HANDLERS.append((name, fn, vs, family))
        return fn

    return deco
