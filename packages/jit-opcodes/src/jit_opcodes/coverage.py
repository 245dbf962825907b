"""Which opcodes the conformance tests exercise, proven with ``dis`` on the running Python.

A test declares what it covers with ``@covers(fn, "OPNAME", ...)`` (or
``@covers_cases([(fn, ("OPNAME", ...)), ...])`` for a parametrized one). Two things follow:

- before the test body runs, each named opcode that this Python has must occur in ``fn``'s
  code (or in code nested in it): a test cannot silently stop covering an opcode when a new
  Python compiles the same source differently;
- the declaration is recorded when the test module is imported, so
  ``python -m jit_opcodes matrix --coverage DIR`` can tell, for the running Python, which
  cells of the support matrix no test exercises.

``"A|B"`` names alternatives, one of which must occur (``CONTAINS_OP|COMPARE_OP``: ``in``
compiles to COMPARE_OP on 3.8); every alternative that does occur counts as covered.
"""

from __future__ import annotations

import dis
import functools
import importlib
import os
import sys
import types
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Sequence, Set, Tuple


@dataclass(frozen=True)
class Declaration:
    """One test's claim that ``fn`` holds ``specs`` (each ``"A"`` or ``"A|B"``)."""

    test: Callable
    fn: Callable
    specs: Tuple[str, ...]

    @property
    def test_name(self) -> str:
        return f"{self.test.__module__.rsplit('.', 1)[-1]}::{self.test.__qualname__}"


#: every declaration made by the test modules imported so far
DECLARATIONS: List[Declaration] = []


def opcodes_of(fn: Callable) -> Set[str]:
    """Opnames in ``fn``'s code (a function, a method or a code object) and in the code
    objects nested in it (comprehensions, lambdas, inner functions)."""
    code = fn if isinstance(fn, types.CodeType) else getattr(fn, "__func__", fn).__code__
    todo = [code]
    found: Set[str] = set()
    while todo:
        code = todo.pop()
        found.update(i.opname for i in dis.get_instructions(code))
        todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return found


def assert_covers(fn: Callable, *specs: str) -> None:
    """Each named opcode that this Python has occurs in ``fn``; at least one name must
    exist on this Python, else the test covers nothing here."""
    present = opcodes_of(fn)
    checked = 0
    for spec in specs:
        # (pseudo-instructions, 256 and up, never reach a code object: 3.13's LOAD_CLOSURE)
        choices = [op for op in spec.split("|") if dis.opmap.get(op, 256) < 256]
        if not choices:
            continue
        checked += 1
        assert any(op in present for op in choices), (
            f"{getattr(fn, '__qualname__', fn)} contains none of {choices} on this Python"
        )
    assert checked, f"none of {specs} exists on this Python: the test covers nothing here"


def covers_cases(cases: Iterable[Tuple[Callable, Sequence[str]]]):
    """Decorate a test that exercises each ``(fn, specs)`` of ``cases``."""
    declared = [(fn, tuple(specs)) for fn, specs in cases]

    def deco(test: Callable) -> Callable:
        @functools.wraps(test)
        def checked(*args, **kwargs):
            for fn, specs in declared:
                assert_covers(fn, *specs)
            return test(*args, **kwargs)

        # pytest reads the test's parameters through __wrapped__ (functools.wraps)
        DECLARATIONS.extend(Declaration(checked, fn, specs) for fn, specs in declared)
        return checked

    return deco


def covers(fn: Callable, *specs: str):
    """Decorate a test that exercises ``specs`` in ``fn``."""
    return covers_cases([(fn, specs)])


def _skipped(test: Callable) -> bool:
    """Whether pytest marks skip the test on this run: a skipped test covers nothing."""
    module = sys.modules.get(test.__module__)
    marks = []
    for owner in (test, module):
        # a module's pytestmark may be one mark or a list of them
        found = getattr(owner, "pytestmark", [])
        marks += found if isinstance(found, list) else [found]
    for mark in marks:
        if mark.name == "skip":
            return True
        if mark.name == "skipif" and any(bool(a) for a in mark.args):
            return True
    return False


def covered() -> Dict[str, List[str]]:
    """opname -> the tests that exercise it on the running Python."""
    out: Dict[str, List[str]] = {}
    for decl in DECLARATIONS:
        if _skipped(decl.test):
            continue
        present = opcodes_of(decl.fn)
        for spec in decl.specs:
            for op in spec.split("|"):
                if op in present and decl.test_name not in out.setdefault(op, []):
                    out[op].append(decl.test_name)
    return out


def load_tests(directory: str) -> List[str]:
    """Import every ``test_*.py`` module of ``directory`` (a package folder, imported with
    its parent packages so relative imports work) and return their module names."""
    directory = os.path.abspath(directory)
    parts: List[str] = []
    root = directory
    while os.path.isfile(os.path.join(root, "__init__.py")):
        root, name = os.path.split(root)
        parts.insert(0, name)
    if not parts:
        raise ValueError(f"{directory} is not a package (it has no __init__.py)")
    if root not in sys.path:
        sys.path.insert(0, root)
    package = ".".join(parts)
    names = []
    for entry in sorted(os.listdir(directory)):
        if entry.startswith("test_") and entry.endswith(".py"):
            names.append(f"{package}.{entry[:-3]}")
            importlib.import_module(names[-1])
    return names


__all__ = [
    "DECLARATIONS",
    "Declaration",
    "assert_covers",
    "covered",
    "covers",
    "covers_cases",
    "load_tests",
    "opcodes_of",
]
