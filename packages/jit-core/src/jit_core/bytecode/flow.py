"""Control flow and locals of a code object: successors, liveness, loops, try blocks and
the NULLs on the stack, as a graph break and a loop body need them. It reads code
objects only (through ``dis`` and ``compat``) and imports nothing else of jit-core."""

from __future__ import annotations

import dis
import types
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from . import compat
from .opcode_info import JUMPS, NO_FALL_THROUGH

_LOADS = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR"}
_STORES = {"STORE_FAST"}
_DELETES = {"DELETE_FAST"}
#: 3.13's pairs of local accesses in one instruction (its argval names both locals): what
#: each does to the first and the second, in the order they run
_PAIRS = {
    "LOAD_FAST_LOAD_FAST": ("load", "load"),
    "STORE_FAST_LOAD_FAST": ("store", "load"),
    "STORE_FAST_STORE_FAST": ("store", "store"),
}


def parameter_names(code: types.CodeType) -> Tuple[str, ...]:
    """The names a call binds: positional and keyword-only parameters, ``*args``,
    ``**kwargs``."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    return code.co_varnames[:n]


def layout(code: types.CodeType) -> Tuple[List[dis.Instruction], Dict[int, int]]:
    """The instructions minus EXTENDED_ARG (the bytecode library folds it into the
    argument of the next instruction), and every offset -> index in that list (the offset
    of an EXTENDED_ARG, where a jump may land, maps to the instruction it prefixes)."""
    insts: List[dis.Instruction] = []
    index: Dict[int, int] = {}
    pending: List[int] = []
    for inst in compat.instructions(code):
        if inst.opname == "EXTENDED_ARG":
            pending.append(inst.offset)
            continue
        for off in pending + [inst.offset]:
            index[off] = len(insts)
        pending = []
        insts.append(inst)
    return insts, index


def _successors(insts, index, i: int, handlers: Dict[int, List[int]]) -> List[int]:
    return [j for j, _jumped in flows(insts, index, i)] + list(handlers.get(i, ()))


def _exception_edges(code, insts, index) -> Dict[int, List[int]]:
    """3.11+: every instruction inside a try range may continue at its handler."""
    edges: Dict[int, List[int]] = {}
    if not compat.HAS_EXCEPTION_TABLE:
        return edges  # SETUP_* instructions already jump to their handlers
    for entry in compat.exception_table(code):
        target = index.get(entry.target)
        if target is None:
            continue
        for i, inst in enumerate(insts):
            if entry.start <= inst.offset < entry.end:
                edges.setdefault(i, []).append(target)
    return edges


def local_accesses(inst: dis.Instruction, cells: Iterable[str] = ()) -> List[Tuple[str, str]]:
    """``(kind, name)`` for each local that ``inst`` loads, stores or deletes, in the order
    it does so; ``kind`` is "load", "store" or "delete". ``cells``: the code's cell and
    free variables (3.13 loads such a cell itself, for a closure, with LOAD_FAST: not a
    read of a local)."""
    op = inst.opname
    if op in _LOADS:
        if op == "LOAD_FAST" and compat.LOAD_CLOSURE_IS_LOAD_FAST and inst.argval in cells:
            return []
        return [("load", inst.argval)]
    if op in _STORES:
        return [("store", inst.argval)]
    if op in _DELETES:
        return [("delete", inst.argval)]
    pair = _PAIRS.get(op)
    if pair is not None:
        return list(zip(pair, inst.argval))
    return []


def live_locals(code: types.CodeType, starts: Iterable[int]) -> FrozenSet[str]:
    """The locals that may be read, before being assigned again, by the code that runs
    from any of the offsets ``starts``: the ones a resume function needs."""
    insts, index = layout(code)
    handlers = _exception_edges(code, insts, index)
    succ = [_successors(insts, index, i, handlers) for i in range(len(insts))]
    cells = frozenset(code.co_cellvars + code.co_freevars)
    live_in: List[Set[str]] = [set() for _ in insts]
    changed = True
    while changed:
        changed = False
        for i in range(len(insts) - 1, -1, -1):
            inst = insts[i]
            out: Set[str] = set()
            for s in succ[i]:
                out |= live_in[s]
            # backwards through what the instruction does, last access first
            for kind, name in reversed(local_accesses(inst, cells)):
                if kind == "store":
                    out.discard(name)
                else:  # a load, or a del, which reads the binding first
                    out.add(name)
            if out != live_in[i]:
                live_in[i] = out
                changed = True
    found: Set[str] = set()
    for offset in starts:
        found |= live_in[index[offset]]
    return frozenset(found)


def loop_head(code: types.CodeType, offset: int) -> Optional[int]:
    """The offset of the first instruction of the outermost loop around ``offset``, or
    None when that instruction is in no loop."""
    insts, index = layout(code)
    i = index[offset]
    heads = [
        index[inst.argval]
        for inst in insts[i:]
        if inst.opcode in JUMPS and index.get(inst.argval, len(insts)) <= i
    ]
    return insts[min(heads)].offset if heads else None


def next_offset(code: types.CodeType, offset: int) -> int:
    """The offset of the instruction after the one at ``offset``."""
    insts, index = layout(code)
    return insts[index[offset] + 1].offset


def protected(code: types.CodeType, offset: int) -> bool:
    """Whether the instruction at ``offset`` is inside a try or with block."""
    return any(start <= offset < end for start, end in compat.protected_ranges(code))


def block_start(code: types.CodeType, offset: int) -> Optional[int]:
    """The offset where the outermost try or with block around ``offset`` starts: its
    SETUP_* (3.8-3.10), or, on 3.11+, the first instruction its exception-table ranges
    cover, or the BEFORE_WITH just before them. None when that block starts in a loop or
    after an instruction that left values the block needs (a handler's own code)."""
    ranges = compat.protected_ranges(code)
    if not compat.HAS_EXCEPTION_TABLE:
        starts = [s for s, e in ranges if s <= offset < e]
        return min(starts) if starts else None
    entries = [e for e in compat.exception_table(code)]
    inside = [e for e in entries if e.start <= offset < e.end]
    if not inside:
        return None
    start = min(e.start for e in inside)
    # a block is cut into several ranges around nested ones: walk back over those that
    # end where it starts and go to the same handlers
    targets = {e.target for e in inside}
    moved = True
    while moved:
        moved = False
        for e in entries:
            if e.end == start and e.target in targets:
                start, moved = e.start, True
                targets.add(e.target)
    insts, index = layout(code)
    i = index.get(start)
    if i is None:
        return None
    if i > 0 and insts[i - 1].opname == "BEFORE_WITH":
        return insts[i - 1].offset  # enter the manager in the resumed frame too
    if insts[i].opname in ("PUSH_EXC_INFO", "WITH_EXCEPT_START"):
        return None  # a handler: only reached while an exception propagates
    return start


def cells_not_shareable(code: types.CodeType) -> str:
    """Why a function entering ``code`` in the middle could not share ``code``'s cells by
    taking them as free variables, or "". 3.12 inlines comprehensions: a cell of one's own
    (a lambda in it captures its variable) is made in mid-code with MAKE_CELL and saved and
    restored in the cell's slot with LOAD_FAST_AND_CLEAR / STORE_FAST, which a free
    variable's slot does not take."""
    cells = set(code.co_cellvars)
    started = False  # past the prologue, whose MAKE_CELLs make the frame's cells
    for inst in compat.instructions(code):
        if inst.opname == "RESUME":
            started = True
            continue
        touched = [name for kind, name in local_accesses(inst, cells) if name in cells]
        if (inst.opname == "MAKE_CELL" and started) or touched:
            name = inst.argval if inst.opname == "MAKE_CELL" else touched[0]
            return (
                f"a comprehension inlined in it makes its variable {name!r} a cell of "
                "its own (a lambda in it captures the variable)"
            )
    return ""


def null_slots(code: types.CodeType, offset: int, nstack: int) -> FrozenSet[int]:
    """The stack slots (0 at the bottom) that hold a NULL when ``code`` reaches ``offset``
    with ``nstack`` values on the stack.

    3.13 puts the NULL after the callable, and CALL reads anything there but a NULL as
    ``self``, while CALL_FUNCTION_EX ignores the slot: no stand-in object works for both,
    so a resume function pushes a real NULL (PUSH_NULL) in those slots. The break passes
    ``base.call_first`` there, unused. Found by walking the code the way CPython's
    compiler lays out its stack: only the instructions below push NULLs (LOAD_ATTR's may
    be ``self`` at run time; the capture models it as the bound method and a NULL, which
    CALL takes alike), and only calls pop them, with the callable below."""
    insts, index = layout(code)
    start = index[offset]
    states: Dict[int, Tuple[bool, ...]] = {0: ()}
    todo = [0]
    while todo:
        i = todo.pop()
        if i == start:
            break
        flags = states[i]
        inst = insts[i]
        for j, taken in flows(insts, index, i):
            nxt = _null_effect(inst, flags, taken)
            if j not in states:
                states[j] = nxt
                todo.append(j)
    reached = states.get(start)
    if reached is None or len(reached) != nstack:
        raise ValueError(
            f"{code.co_name}: the stack at offset {offset} could not be laid out "
            f"({'unreached' if reached is None else len(reached)} slots, {nstack} expected)"
        )
    return frozenset(j for j, null in enumerate(reached) if null)


def flows(insts, index, i: int) -> List[Tuple[int, bool]]:
    """(successor, jumped) of instruction ``i``, exception handlers left out (liveness adds
    them; a resume function never starts in one)."""
    inst = insts[i]
    out = []
    if inst.opname not in NO_FALL_THROUGH and i + 1 < len(insts):
        out.append((i + 1, False))
    if inst.opcode in JUMPS and inst.argval in index:
        out.append((index[inst.argval], True))
    return out


def _null_effect(inst: dis.Instruction, flags: Tuple[bool, ...], jumped: bool) -> Tuple[bool, ...]:
    # ``arg`` is None only for opcodes without an argument, none of those matched below
    op, arg = inst.opname, inst.arg or 0
    if op == "PUSH_NULL":
        return flags + (True,)
    if op == "LOAD_GLOBAL" and arg & 1:
        return flags + (False, True)
    if op == "LOAD_ATTR" and arg & 1:
        return flags[:-1] + (False, True)
    if op == "LOAD_SUPER_ATTR" and arg & 1:
        return flags[:-3] + (False, True)
    if op == "COPY":
        return flags + (flags[-arg],)
    if op == "SWAP":
        out = list(flags)
        out[-1], out[-arg] = out[-arg], out[-1]
        return tuple(out)
    # everything else pops values that are not NULLs (a call pops its NULL, which sits
    # above its callable, whose slot takes the result) and pushes values
    effect = dis.stack_effect(
        inst.opcode, arg if inst.opcode >= dis.HAVE_ARGUMENT else None, jump=jumped
    )
    return flags[: len(flags) + effect] if effect <= 0 else flags + (False,) * effect


__all__ = [
    "block_start",
    "cells_not_shareable",
    "flows",
    "layout",
    "live_locals",
    "local_accesses",
    "loop_head",
    "next_offset",
    "null_slots",
    "parameter_names",
    "protected",
]
