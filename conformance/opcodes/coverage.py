"""What an opcode test covers: the opcodes it names must really occur in its function on
the running Python, or the test would silently stop covering them."""

from __future__ import annotations

import dis
import types
from typing import Callable, Set


def opcodes_of(fn: Callable) -> Set[str]:
    """Opnames in ``fn``'s code and in the code objects nested in it."""
    fn = getattr(fn, "__func__", fn)
    todo = [fn.__code__]
    found: Set[str] = set()
    while todo:
        code = todo.pop()
        found.update(i.opname for i in dis.get_instructions(code))
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return found


def assert_covers(fn: Callable, *opnames: str) -> None:
    """Each named opcode that this Python has occurs in ``fn``. ``"A|B"`` names
    alternatives, one of which must occur (``CONTAINS_OP|COMPARE_OP``: ``in`` compiles to
    COMPARE_OP on 3.8). At least one name must exist on this Python."""
    present = opcodes_of(fn)
    checked = 0
    for spec in opnames:
        choices = [op for op in spec.split("|") if op in dis.opmap]
        if not choices:
            continue
        checked += 1
        assert any(op in present for op in choices), (
            f"{getattr(fn, '__qualname__', fn)} contains none of {choices} on this Python"
        )
    assert checked, f"none of {opnames} exists on this Python: the test covers nothing here"
