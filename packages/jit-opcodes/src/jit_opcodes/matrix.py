"""The support matrix: every opcode of CPython 3.8 to 3.13 against what jit-core does.

``opmaps.json`` holds ``dis.opmap`` of each version (a test checks the running
interpreter's against it), so the whole matrix can be printed from any one Python.

Cells:

- ``symbolic``: a handler simulates it; the value can stay in a graph.
- ``breaks``: the graph breaks there: the instruction runs in CPython between two graphs
  and the frame goes on in a resume function (side effects such as attribute stores).
- ``eager``: the frame runs eagerly, with the reason in ``explain()`` (the handler says
  so, or the opcode only occurs in generators and coroutines, which run eagerly, or only
  on the exception path, which a capture never takes).
- ``no handler``: it can occur and nothing handles it yet: the frame runs eagerly with
  the reason "no handler for <opcode>". These are the opcodes to claim.
- ``n/a``: it never occurs in the code of a function the hook hands over (the reason
  says why).
- ``-``: the version has no such opcode.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Dict, List, Tuple

from . import load_families
from .registry import ALL_VERSIONS, HANDLERS

SYMBOLIC = "symbolic"
BREAKS = "breaks"
EAGER = "eager"
NO_HANDLER = "no handler"
NOT_APPLICABLE = "n/a"
ABSENT = "-"
#: the cells of opcodes that can occur in a captured function
OCCURS = (SYMBOLIC, BREAKS, EAGER, NO_HANDLER)

#: opcodes that only generators, coroutines and async generators use: such frames run
#: eagerly as a whole (they must start through CPython's own call). YIELD_VALUE,
#: GEN_START and RETURN_GENERATOR have handlers (``generators``): the code of a generator
#: expression or function consumed in a captured frame is captured; ``yield from``,
#: ``await`` and async generators are not
GENERATOR_ONLY = {
    name: "only in generators and coroutines, which run eagerly"
    for name in (
        "YIELD_FROM",
        "SEND",
        "END_SEND",
        "GET_AWAITABLE",
        "GET_AITER",
        "GET_ANEXT",
        "END_ASYNC_FOR",
        "BEFORE_ASYNC_WITH",
        "SETUP_ASYNC_WITH",
        "ASYNC_GEN_WRAP",
        "CLEANUP_THROW",
        "GET_YIELD_FROM_ITER",
    )
}

#: opcodes that only run while an exception propagates, on paths the exceptions a capture
#: takes to an ``except`` clause (``jit_core.errors.Raised``) never reach: exception
#: groups, and a with block's exit on an exception
EXCEPTION_PATH_ONLY = {
    name: "only on an exception path the capture never takes (the frame runs eagerly)"
    for name in (
        "CHECK_EG_MATCH",
        "PREP_RERAISE_STAR",
        "WITH_EXCEPT_START",
    )
}

_BODIES = "module and class bodies only; the hook captures function code"
#: opcodes that never occur in a captured function's code, and why
NEVER_IN_FUNCTIONS = {
    "LOAD_NAME": _BODIES,
    "STORE_NAME": _BODIES,
    "DELETE_NAME": _BODIES,
    "SETUP_ANNOTATIONS": _BODIES,
    "LOAD_LOCALS": _BODIES,
    "LOAD_FROM_DICT_OR_GLOBALS": _BODIES,
    "LOAD_FROM_DICT_OR_DEREF": _BODIES,
    "LOAD_CLASSDEREF": _BODIES,
    "IMPORT_STAR": "`from m import *` is a SyntaxError inside a function",
    "PRINT_EXPR": "emitted for the interactive prompt only",
    "EXTENDED_ARG": "dis folds it into the argument of the instruction it prefixes",
    "CACHE": "an inline cache entry, not an instruction (dis hides it)",
    "RESERVED": "reserved; CPython never emits it",
    "INTERPRETER_EXIT": "only in the interpreter's own trampoline code",
    "EXIT_INIT_CHECK": "only in the interpreter's own shim code for __init__ calls",
    "ENTER_EXECUTOR": (
        "put in place of a hot loop by 3.13's experimental JIT at run time; dis and the hook "
        "see the original instruction"
    ),
}
#: (opname, version) the compiler of that version never leaves in a code object, and why
NOT_EMITTED = {
    ("NOP", v): "the peephole optimizer of 3.8 and 3.9 removes every NOP" for v in ("3.8", "3.9")
}

_PSEUDO = "a pseudo-instruction: the compiler replaces it before a code object exists"
_INSTRUMENTED = (
    "exists only in code instrumented by sys.monitoring; dis and the hook see the plain instruction"
)


@dataclass(frozen=True)
class Cell:
    status: str
    reason: str = ""


def opmaps() -> Dict[str, Dict[str, int]]:
    with open(os.path.join(os.path.dirname(__file__), "opmaps.json"), encoding="utf-8") as f:
        return json.load(f)


def _handlers() -> Dict[Tuple[str, str], Cell]:
    """(opname, version) -> the cell of the declared handler."""
    load_families()
    found = {}
    for opname, fn, vs, family, _break_as in HANDLERS:
        for v in vs:
            eager_reason = getattr(fn, "eager_reason", None)
            break_reason = getattr(fn, "break_reason", None)
            if eager_reason:
                found[(opname, v)] = Cell(EAGER, eager_reason)
            elif break_reason:
                # the declaration names how jit-core breaks there (registry.handler
                # refuses breaks= without a break_as)
                found[(opname, v)] = Cell(BREAKS, break_reason)
            else:
                found[(opname, v)] = Cell(SYMBOLIC, family)
    return found


def build() -> Dict[str, Dict[str, Cell]]:
    """opname -> version -> Cell, for every opname of any version."""
    maps = opmaps()
    handlers = _handlers()
    names = sorted(set().union(*(m.keys() for m in maps.values())))
    table: Dict[str, Dict[str, Cell]] = {}
    for name in names:
        row = {}
        for v in ALL_VERSIONS:
            code = maps[v].get(name)
            if code is None:
                row[v] = Cell(ABSENT)
            elif (name, v) in NOT_EMITTED:
                row[v] = Cell(NOT_APPLICABLE, NOT_EMITTED[(name, v)])
            elif (name, v) in handlers:
                row[v] = handlers[(name, v)]
            elif code >= 256:
                row[v] = Cell(NOT_APPLICABLE, _PSEUDO)
            elif name.startswith("INSTRUMENTED_"):
                row[v] = Cell(NOT_APPLICABLE, _INSTRUMENTED)
            elif name in NEVER_IN_FUNCTIONS:
                row[v] = Cell(NOT_APPLICABLE, NEVER_IN_FUNCTIONS[name])
            elif name in GENERATOR_ONLY:
                row[v] = Cell(EAGER, GENERATOR_ONLY[name])
            elif name in EXCEPTION_PATH_ONLY:
                row[v] = Cell(EAGER, EXCEPTION_PATH_ONLY[name])
            else:
                row[v] = Cell(NO_HANDLER, "the frame runs eagerly: no handler yet")
        table[name] = row
    return table


def counts(table: Dict[str, Dict[str, Cell]]) -> Dict[str, Dict[str, int]]:
    out: Dict[str, Dict[str, int]] = {v: {} for v in ALL_VERSIONS}
    for row in table.values():
        for v, cell in row.items():
            out[v][cell.status] = out[v].get(cell.status, 0) + 1
    return out


def render_text(table: Dict[str, Dict[str, Cell]]) -> str:
    width = max(len(n) for n in table)
    head = f"{'opcode':{width}}  " + "  ".join(f"{v:10}" for v in ALL_VERSIONS)
    lines = [head, "-" * len(head)]
    for name, row in table.items():
        lines.append(f"{name:{width}}  " + "  ".join(f"{row[v].status:10}" for v in ALL_VERSIONS))
    lines.append("")
    lines += _summary(table)
    return "\n".join(lines)


def render_rst(table: Dict[str, Dict[str, Cell]]) -> str:
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - opcode",
    ]
    lines += [f"     - {v}" for v in ALL_VERSIONS]
    lines.append("     - note")
    for name, row in table.items():
        lines.append(f"   * - ``{name}``")
        # a bare "-" would start a nested bullet list in reStructuredText
        lines += [
            f"     - {'absent' if row[v].status == ABSENT else row[v].status}" for v in ALL_VERSIONS
        ]
        reasons = []
        for cell in row.values():
            if cell.status not in (SYMBOLIC, ABSENT) and cell.reason not in reasons:
                reasons.append(cell.reason)
        lines.append(f"     - {'; '.join(reasons)}")
    lines.append("")
    lines += ["| " + s for s in _summary(table)]
    return "\n".join(lines) + "\n"


def untested(
    table: Dict[str, Dict[str, Cell]], version: str, covered: Dict[str, List[str]]
) -> List[str]:
    """Opcodes of ``version`` that can occur in a captured function (symbolic, breaks,
    eager or no handler) and that no test in ``covered`` (``coverage.covered()``)
    exercises."""
    return [
        name for name, row in table.items() if row[version].status in OCCURS and name not in covered
    ]


def render_coverage(
    table: Dict[str, Dict[str, Cell]], version: str, covered: Dict[str, List[str]]
) -> str:
    """For ``version``: each opcode that can occur, what jit-core does with it and the
    tests that exercise it; then the ones no test exercises."""
    width = max(len(n) for n in table)
    lines = [f"tested on Python {version}:"]
    for name, row in table.items():
        cell = row[version]
        if cell.status in OCCURS:
            tests = ", ".join(covered.get(name, [])) or "NOT TESTED"
            lines.append(f"  {name:{width}}  {cell.status:10}  {tests}")
    missing = untested(table, version, covered)
    total = sum(row[version].status in OCCURS for row in table.values())
    lines.append("")
    if missing:
        lines.append(f"{len(missing)} of {total} opcodes untested: {', '.join(missing)}")
    else:
        lines.append(
            f"every one of the {total} opcodes that can occur on {version} is tested; the "
            "others are n/a with their reason"
        )
    return "\n".join(lines)


def _summary(table: Dict[str, Dict[str, Cell]]) -> List[str]:
    out = []
    for v, c in counts(table).items():
        parts = ", ".join(
            f"{c.get(s, 0)} {s}" for s in (SYMBOLIC, BREAKS, EAGER, NO_HANDLER, NOT_APPLICABLE)
        )
        out.append(f"{v}: {parts}")
    return out


__all__ = [
    "Cell",
    "build",
    "counts",
    "opmaps",
    "render_coverage",
    "render_rst",
    "render_text",
    "untested",
]
