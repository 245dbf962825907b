"""Resume functions: the rest of a frame after a graph break, as a function of its own.

A resume function is the original code with a short prefix: its arguments are the values
that were on the stack at the break and the locals still needed afterwards (found by
liveness analysis); the prefix pushes the stack values back and jumps to the instruction
where the frame goes on. Everything else is the original bytecode, so the resumed frame
computes exactly what the rest of the original frame would have.
"""

from __future__ import annotations

import dis
import io
import types
from typing import List, Sequence, Tuple

from bytecode import Bytecode, CellVar, FreeVar, Instr, Label

from ..bytecode import compat
from ..bytecode.flow import layout, null_slots

#: the prefix's names for the stack values it pushes back
STACK_ARG = "___stack{}"


def cells_become_free(bc: Bytecode, items: list) -> list:
    """Make the cell variables of ``bc`` free variables placed before its own, and
    ``items`` (the whole original code, to be entered in the middle) use them as such: the
    function gets the frame's very cells in its closure (``compat.load_closure``), so
    that closures the frame made before the break and the code after it see the same
    ones. The original prologue (3.11+: COPY_FREE_VARS, MAKE_CELL) is dropped:
    ``compat.entry_prologue`` copies the new closure instead."""
    cells = list(bc.cellvars)
    if not cells:
        return items
    bc.freevars = cells + list(bc.freevars)
    bc.cellvars = []
    kept = []
    for item in items:
        if isinstance(item, Instr):
            if item.name in ("MAKE_CELL", "COPY_FREE_VARS"):
                continue
            arg = item.arg
            if isinstance(arg, CellVar):
                item = item.copy()
                item.arg = FreeVar(arg.name)
            elif item.name == "LOAD_FAST" and isinstance(arg, str) and arg in cells:
                # 3.13 loads the cell of an argument (its slot is the argument's) by name
                item = item.copy()
                item.arg = FreeVar(arg)
        kept.append(item)
    return kept


def resume_name(code: types.CodeType, offset: int) -> str:
    return f"{code.co_name}__resume_at_{offset}"


def build_resume_code(
    code: types.CodeType, offset: int, nstack: int, live: Sequence[str]
) -> types.CodeType:
    """The original ``code`` entered at the instruction at ``offset`` with ``nstack``
    values on the stack: ``f(___stack0, ..., ___stack{n-1}, *live)``."""
    insts, index = layout(code)
    target = index[offset]
    bc = Bytecode.from_code(code)
    items = list(bc)
    label = Label()
    seen = -1
    for pos, item in enumerate(items):
        if isinstance(item, Instr):
            seen += 1
            if seen == target:
                if item.name != insts[target].opname:
                    raise ValueError(
                        f"bytecode and dis disagree at {insts[target].offset}: "
                        f"{item.name} != {insts[target].opname}"
                    )
                # before the try blocks that begin at the instruction: entered past
                # their TryBegin, the block would have no stack depth (the bytecode
                # library leaves it unset, and unwinding an exception there crashes)
                while pos > 0 and _marks_the_instruction(items[pos - 1]):
                    pos -= 1
                items.insert(pos, label)
                break
    else:
        raise ValueError(f"no instruction {target} in {code.co_name}")
    items = cells_become_free(bc, items)
    line = code.co_firstlineno
    stack_args = _stack_arg_names(code, nstack)
    prefix: List[Instr] = compat.entry_prologue(code)
    nulls = null_slots(code, offset, nstack) if compat.NULL_AFTER_CALLABLE else ()
    prefix += [
        Instr("PUSH_NULL") if j in nulls else Instr("LOAD_FAST", name)
        for j, name in enumerate(stack_args)
    ]
    prefix += compat.jump_forward(label)
    for ins in prefix:
        ins.lineno = line
    bc.clear()
    bc.extend(prefix + items)
    args = stack_args + list(live)
    bc.argnames = args
    bc.argcount = len(args)
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    bc.flags = bc.flags & ~(0x04 | 0x08)  # no *args, no **kwargs
    bc.name = resume_name(code, insts[target].offset)
    if hasattr(bc, "qualname"):
        bc.qualname = bc.name
    return compat.to_code(bc)


def _marks_the_instruction(item) -> bool:
    return type(item).__name__ in ("TryBegin", "SetLineno")


def fresh_name(code: types.CodeType, name: str) -> str:
    """``name``, or ``name`` with underscores added, so that ``code`` has no local, cell or
    free variable of that name. Code entered in the middle (a resume function, a loop
    body) may be made from code that is itself such a function, whose own arguments are
    still among its locals: a name it already has would make two arguments one local."""
    taken = set(code.co_varnames) | set(code.co_cellvars) | set(code.co_freevars)
    while name in taken:
        name += "_"
    return name


def _stack_arg_names(code: types.CodeType, nstack: int) -> List[str]:
    """Names for the stack values a resume function of ``code`` takes."""
    return [fresh_name(code, STACK_ARG.format(j)) for j in range(nstack)]


def describe_resume(code: types.CodeType) -> Tuple[str, str]:
    """(name, disassembly) of a resume function, for dumps."""
    buf = io.StringIO()
    dis.dis(code, file=buf)
    return code.co_name, buf.getvalue()


__all__ = [
    "STACK_ARG",
    "build_resume_code",
    "cells_become_free",
    "describe_resume",
    "fresh_name",
    "resume_name",
]
