"""Loops whose body breaks the graph: the body becomes a function of its own.

A graph cannot break inside a loop of the frame it belongs to (each iteration would need
its own graph and its own resume point). So when the capture stops inside a loop, the
frame's graph ends before the loop, and the loop itself runs in Python, in a driver
(``frame_calls.LoopCall``), that calls a *loop body function* once per iteration:

    body([item,] *locals) -> (CONTINUE, None, locals) | (BREAK, target, locals)
                              | (RETURN, value, None)

For a ``for`` loop the body function is the original code entered right after
``FOR_ITER`` with the item on the stack, and the driver iterates. For a ``while`` loop it
is the original code entered at the loop's head, and the driver calls it until it
returns BREAK: the loop's test is part of the body, and its failing jumps out of the
loop like a ``break`` (to the ``else`` clause when there is one, which a real ``break``
jumps over: the target offset tells them apart, as for ``for ... else``). The head is the
target of the jump back: on 3.8/3.9 the test itself; 3.10+ copy the test to the bottom of
the loop and jump back to the first statement of the body when it holds, so the copy
before the loop runs once, in the frame (a tensor test there is a branch break of its
own, whose resume function then starts at the loop); ``while True`` has no test. Every
way out of the body is rewritten to return: the jump back to the head, a jump out of the
loop, falling out of it (3.10+ bottom test), a ``return``. The body function is captured
like any other frame, with its own graphs, guards and breaks, so the work of each
iteration runs as compiled graphs split only where the body itself must break (a test on
a tensor becomes a branch break, a test on Python values is folded and guarded). Locals
go in and out as one tuple over all the code's locals, ``UNBOUND`` standing for the
unbound ones; what the body never reads adds no guard (see ``variables.base.
LazyVariable``). When the loop ends, the rest of the frame is a resume function, as
after any other break.

A ``while`` loop that carries a Python number from one iteration to the next (``i += 1``
for ``while i < n``, an error it compares with a tolerance: ``carried_numbers``) has a
body that reads the number. Where the backend takes numbers as graph inputs, the body's
second capture takes it as one (automatic dynamic numbers, ``shapes.ShapePolicy.
number_is_input``): the test becomes a guard on a relation, and a few captures serve
every value. Where it cannot (no number inputs, ``dynamic=False``, or a capture of the
body that needs the number as a Python value and so pins it:
``FrameCompiler.serves_every_value``), the body would be captured again in every
iteration (8 captures until the recompile limit, a warning, then eager iterations behind
eight failing guards, slower than eager Paddle). So the driver then runs the rest of the
loop in one call of a *loop function* (``forward__loop_at_26``: the loop itself, its
exits rewritten as the body's, ``build_body_code(..., whole=True)``) that runs eagerly for
good, its callees still through the hook, with the reason in ``explain()``. That is how
the frame ran the loop before loops were outlined, without a call through the cache per
iteration, and the frame after the loop stays compiled. Python booleans (a ``done``
flag) take two values at most and do not count. A ``for`` loop's int item becomes an
input of the body's graph once it changed, in the same way; other items recompile per
item up to the limit.

Loops this cannot outline keep the older behaviour (the loop and the rest of the frame
run eagerly, the functions they call captured on their own): loops that hold a
``try``/``with`` block or ``del`` a local, and shapes whose stack the walk of
``_check_stack`` cannot follow exactly (one that reaches below the loop's own values). In a frame that makes closures, the body function gets the frame's own cells as
free variables, like a resume function.
"""

from __future__ import annotations

import dis
import itertools
import types
import weakref
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple, Union

from bytecode import Bytecode, Instr, Label

from ..bytecode import compat, flow
from ..bytecode.opcode_info import JUMPS, NO_FALL_THROUGH, TERMINAL, UNCONDITIONAL_JUMPS
from . import resume

CONTINUE, BREAK, RETURN = 0, 1, 2

#: the body function's names for the item and for a returned value it holds a moment
ITEM_ARG = "___loop_item"
RETURN_LOCAL = "___loop_return"


class _Unbound:
    """Stands for a local that is unbound when the loop body starts or ends."""

    _instance: Optional[_Unbound] = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unbound>"

    def __reduce__(self):
        return (_Unbound, ())


UNBOUND = _Unbound()

#: the loop body codes made here: every name of one is an argument, UNBOUND where the
#: frame that calls it has no value (its exits read every name)
BODY_CODES: weakref.WeakSet[types.CodeType] = weakref.WeakSet()


def is_body(code: types.CodeType) -> bool:
    return code in BODY_CODES


#: instructions that reach the stack slot their argument counts down to, plus how many
#: slots above it they pop first (the loop's iterator is slot 1 of the body's stack)
_DEEP = {"LIST_APPEND": 1, "SET_ADD": 1, "MAP_ADD": 2, "COPY": 0, "SWAP": 0}
#: backward jumps of 3.11+ and the forward ones that replace them when their target (the
#: loop head) becomes a stub at the end of the body function
_FORWARD = {
    "JUMP_BACKWARD": "JUMP_FORWARD",
    "JUMP_BACKWARD_NO_INTERRUPT": "JUMP_FORWARD",
    "POP_JUMP_BACKWARD_IF_FALSE": "POP_JUMP_FORWARD_IF_FALSE",
    "POP_JUMP_BACKWARD_IF_TRUE": "POP_JUMP_FORWARD_IF_TRUE",
    "POP_JUMP_BACKWARD_IF_NONE": "POP_JUMP_FORWARD_IF_NONE",
    "POP_JUMP_BACKWARD_IF_NOT_NONE": "POP_JUMP_FORWARD_IF_NOT_NONE",
}


@dataclass(frozen=True)
class LoopPlan:
    """A loop that can be outlined, in offsets of the original code."""

    head: int  # the FOR_ITER, or the first instruction of a ``while`` loop's region
    body_start: int
    end: int  # the first offset after the body (FOR_ITER's target; after a while's region)
    #: where the frame goes on when the iterator is exhausted (after 3.12's END_FOR); a
    #: ``while`` loop is never exhausted: its test failing is one of its ``break_targets``
    exhausted: int
    #: every offset a ``break`` (or a ``while`` loop's failed test) leaves the loop for
    break_targets: Tuple[int, ...]
    names: Tuple[str, ...]
    kind: str = "for"  # or "while"
    #: the locals a ``while`` loop reads and assigns, its loop-carried values
    carried: Tuple[str, ...] = ()

    @property
    def stack_at_head(self) -> int:
        """The values the loop keeps on the stack at its head: a ``for`` loop's iterator."""
        return 1 if self.kind == "for" else 0


def body_name(code: types.CodeType, head: int) -> str:
    return f"{code.co_name}__loop_body_at_{head}"


def eager_loop_name(code: types.CodeType, head: int) -> str:
    return f"{code.co_name}__loop_at_{head}"


def plan_loop(code: types.CodeType, head: int) -> Union[LoopPlan, str]:
    """How to outline the loop starting at ``head``, or why it cannot be."""
    insts, index = flow.layout(code)
    i = index.get(head)
    if i is None:
        return f"no instruction at {head}"
    kind = "for" if insts[i].opname == "FOR_ITER" else "while"
    if kind == "for":
        end = insts[i].argval
        end_i = index[end]
        first = i + 1  # the body starts after FOR_ITER, which stays in the driver
    else:
        # the region of a ``while`` loop runs from its head to the last jump back to it
        # (3.10+ test at the bottom and jump back when true; the test before the head
        # runs once, in the frame before the loop)
        backs = [k for k in range(i, len(insts)) if _jumps_to(insts[k], index, i)]
        if not backs:
            return f"no jump back to the loop head at {head}"
        end_i = backs[-1] + 1
        end = insts[end_i].offset if end_i < len(insts) else _past_end(insts)
        first = i
    for start, stop in compat.protected_ranges(code) + compat.finally_bodies(code):
        if start < end and head < stop:
            return "the loop holds (or is inside) a try or with block"
    region = range(first, end_i)
    for k in region:
        if insts[k].opname in ("DELETE_FAST", "YIELD_VALUE"):
            return f"the loop body has {insts[k].opname}"
    # nothing may jump into the body from outside it (but to a while loop's head)
    for k, inst in enumerate(insts):
        if k in region or inst.opcode not in JUMPS:
            continue
        t = index.get(inst.argval)
        if t is not None and i < t < end_i:
            return "a jump into the loop body from outside it"
    breaks = _check_stack(insts, index, i, end_i, first, 2 if kind == "for" else 0)
    if isinstance(breaks, str):
        return breaks
    exhausted = end
    if kind == "for" and insts[end_i].opname == "END_FOR":
        exhausted = insts[end_i + compat.FOR_ITER_EXIT_SKIPS].offset
    return LoopPlan(
        head,
        insts[first].offset,
        end,
        exhausted,
        tuple(sorted(breaks)),
        # (a cell variable that is an argument is read through its cell, the body's too)
        tuple(n for n in code.co_varnames if n not in code.co_cellvars),
        kind,
        _carried(code, insts, range(first, end_i), head) if kind == "while" else (),
    )


def _carried(code: types.CodeType, insts, region: range, head: int) -> Tuple[str, ...]:
    """The locals the loop assigns and reads, that are live at its head (those only
    assigned in it, or read after it, are not carried from one iteration to the next;
    one read after the loop too is counted, to be safe)."""
    cells = code.co_cellvars + code.co_freevars
    accesses = [a for k in region for a in flow.local_accesses(insts[k], cells)]
    stored = {name for kind, name in accesses if kind == "store"}
    loaded = {name for kind, name in accesses if kind == "load"}
    live = flow.live_locals(code, [head])
    return tuple(sorted(stored & loaded & live))


def carried_numbers(plan: LoopPlan, values: Dict[str, object]) -> Tuple[Tuple[str, type], ...]:
    """``(name, type)`` of the Python numbers the ``while`` loop of ``plan`` carries from
    one iteration to the next (a counter, an error it compares with a tolerance), with the
    locals ``values`` it starts with: the body reads them, and a capture that takes them
    as constants guards on their values."""
    return tuple(
        (name, type(values.get(name)))
        for name in plan.carried
        if type(values.get(name)) in (int, float)
    )


def _jumps_to(inst: dis.Instruction, index, target_i: int) -> bool:
    return inst.opcode in JUMPS and index.get(inst.argval) == target_i


def _past_end(insts) -> int:
    last = insts[-1]
    return last.offset + 2


def iterations(plan: LoopPlan, stack: tuple) -> Iterator[tuple]:
    """What each call of the body function takes before the locals, until the loop ends
    by itself: a ``for`` loop's item from its iterator (on top of ``stack``), nothing for a
    ``while`` loop, which the body ends by returning BREAK when its test fails."""
    if plan.kind == "for":
        return ((item,) for item in stack[-1])
    return itertools.repeat(())


def head_where(code: types.CodeType, plan: LoopPlan) -> Tuple[str, str]:
    """``(file:line, instruction)`` of the loop's head, for reports."""
    insts, index = flow.layout(code)
    inst = insts[index[plan.head]]
    line = compat.instruction_line(inst) or code.co_firstlineno
    arg = f" {inst.argrepr}" if inst.argrepr else ""
    return f"{code.co_filename}:{line}", f"{inst.opname}{arg}"


def _effect(inst: dis.Instruction, jump: bool) -> int:
    arg = inst.arg if inst.opcode >= dis.HAVE_ARGUMENT else None
    return dis.stack_effect(inst.opcode, arg, jump=jump)


def _check_stack(
    insts, index, head_i: int, end_i: int, start_i: int, start_depth: int
) -> Union[set, str]:
    """Walk the body from ``start_i``, counting the stack from the loop's: a ``for``
    loop's iterator (1) and item (2), nothing for a ``while`` loop. A jump back to the head
    must leave only the iterator (nothing), a jump out of the loop nothing (the compiler
    pops the iterator first), a return only its value. The offsets the body leaves the
    loop for, or why the body does not fit."""
    at_head = start_depth // 2
    depth: Dict[int, int] = {start_i: start_depth}
    work = [start_i]
    breaks: set = set()

    def reach(k: int, d: int) -> Optional[str]:
        if k == head_i:
            return None if d == at_head else f"a jump back to the loop head with {d} values"
        if not head_i < k < end_i:
            if d != 0:
                return f"a jump out of the loop with {d} values on the stack"
            breaks.add(insts[k].offset)
            return None
        if k in depth:
            return None if depth[k] == d else "the stack depth of the loop body is not fixed"
        depth[k] = d
        work.append(k)
        return None

    while work:
        k = work.pop()
        inst, d = insts[k], depth[k]
        if inst.opname in _DEEP and (inst.arg or 0) + _DEEP[inst.opname] > d:
            # reaches below the loop's iterator (a comprehension's result list)
            return f"{inst.opname} reaches below the loop's iterator"
        if inst.opname in ("RETURN_VALUE", "RETURN_CONST"):
            want = 1 if inst.opname == "RETURN_VALUE" else 0
            if d != want:
                return "a return with other values on the stack"
            continue
        if inst.opname in TERMINAL:
            continue
        try:
            if inst.opcode in JUMPS:
                t = index.get(inst.argval)
                if t is None:
                    return f"a jump to {inst.argval}, which is no instruction"
                why = reach(t, d + _effect(inst, True))
                if why:
                    return why
            if inst.opname not in UNCONDITIONAL_JUMPS:
                why = reach(k + 1, d + _effect(inst, False))
                if why:
                    return why
        except ValueError as e:
            return f"{inst.opname}: {e}"
    return breaks


def _names_tuple(names) -> List[Instr]:
    out: List[Instr] = []
    for n in names:
        out += compat.load_fast(n)
    return out + compat.build_tuple(len(names))


def _exit(kind: int, payload: List[Instr], names) -> List[Instr]:
    return (
        compat.load_const(kind)
        + payload
        + _names_tuple(names)
        + compat.build_tuple(3)
        + compat.return_value()
    )


def _label_positions(items: list) -> Dict[Label, int]:
    """Which instruction (counted without labels and markers) each label stands before."""
    label_at: Dict[Label, int] = {}
    pending: List[Label] = []
    n = 0
    for item in items:
        if isinstance(item, Label):
            pending.append(item)
        elif isinstance(item, Instr):
            for lab in pending:
                label_at[lab] = n
            pending = []
            n += 1
    return label_at


def build_body_code(code: types.CodeType, plan: LoopPlan, whole: bool = False) -> types.CodeType:
    """The loop body of ``code`` as a function ``body(item, *plan.names)`` (a ``for``
    loop) or ``body(*plan.names)`` (a ``while`` loop, entered at its head).

    ``whole`` (a ``while`` loop only): the whole loop instead, its jumps back to the head
    left as they are, returning only as the body does on a ``break``, the test failing or
    a ``return`` (``eager_loop_name``): a counter loop runs in it eagerly, in one call."""
    if whole and plan.kind != "while":
        raise ValueError("only a while loop runs whole in a loop function")
    insts, index = flow.layout(code)
    head_i, end_i = index[plan.head], index.get(plan.end, len(insts))
    first = index[plan.body_start]
    bc = Bytecode.from_code(code)
    items = list(bc)
    label_at = _label_positions(items)
    names = plan.names
    line = compat.instruction_line(insts[head_i]) or code.co_firstlineno
    body_label, continue_label = Label(), Label()
    break_labels = {t: Label() for t in plan.break_targets}
    out: List = []
    k = -1
    for item in items:
        if not isinstance(item, Instr):
            out.append(item)
            continue
        k += 1
        if k == first:
            out.append(body_label)
        if not first <= k < end_i:
            out.append(item)
            continue
        if isinstance(item.arg, Label):
            t = label_at[item.arg]
            target = None
            if t == head_i and whole:
                pass  # the loop stays a loop
            elif t == head_i:
                target = continue_label
            elif not head_i < t < end_i:
                target = break_labels[insts[t].offset]
            if target is not None:
                item = item.copy()
                item.arg = target
                if item.name in _FORWARD:
                    item.name = _FORWARD[item.name]
        if item.name == "RETURN_VALUE":
            ret = compat.store_fast(RETURN_LOCAL) + _exit(
                RETURN, compat.load_fast(RETURN_LOCAL), ()
            )
            out += _at_line(ret, item)
            continue
        if item.name == "RETURN_CONST":
            out += _at_line(_exit(RETURN, compat.load_const(item.arg), ()), item)
            continue
        out.append(item)
        falls = item.name not in NO_FALL_THROUGH
        if k == end_i - 1 and falls and plan.end in break_labels:
            # 3.10+ test a while loop at its bottom: when false, it falls out of the loop
            out += _at_line(compat.jump_forward(break_labels[plan.end]), item)

    out = resume.cells_become_free(bc, out)
    stubs: List = []
    if not whole:
        stubs.append(continue_label)
        if plan.kind == "for":
            stubs += compat.pop_top()
        stubs += _exit(CONTINUE, compat.load_const(None), names)
    for break_at, label in break_labels.items():
        stubs.append(label)
        stubs += _exit(BREAK, compat.load_const(break_at), names)
    prefix = compat.entry_prologue(code)
    item_arg = resume.fresh_name(code, ITEM_ARG)
    if plan.kind == "for":
        # the loop's iterator stays below the item in the original; a placeholder stands
        # for it here (the body only ever pops it, on its way out)
        # (a loop nested in an outlined loop is outlined from the outer body, which has an
        # item argument of its own among its locals)
        prefix += compat.load_const(None) + compat.load_fast(item_arg)
    prefix += compat.jump_forward(body_label)
    for ins in prefix + stubs:
        if isinstance(ins, Instr):
            ins.lineno = line
    bc.clear()
    bc.extend(prefix + out + stubs)
    args = ([item_arg] if plan.kind == "for" else []) + list(names)
    bc.argnames = args
    bc.argcount = len(args)
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    bc.flags = bc.flags & ~(0x04 | 0x08)
    bc.name = eager_loop_name(code, plan.head) if whole else body_name(code, plan.head)
    if hasattr(bc, "qualname"):
        bc.qualname = bc.name
    body = compat.to_code(bc)
    BODY_CODES.add(body)
    return body


@dataclass(frozen=True)
class Exit:
    """What a loop body returns from an exit stub: ``(kind, payload, names)``, ``names``
    the locals it hands back, in order."""

    kind: int
    payload: object
    names: Tuple[str, ...]


#: instructions that only lead on to the next one or jump, on the way to an exit stub
_ON_THE_WAY = {"NOP"} | UNCONDITIONAL_JUMPS


def exit_at(code: types.CodeType, offset: int, nstack: int) -> Optional[Exit]:
    """The exit stub of a loop body code (or of a resume function made from one) that the
    code at ``offset`` goes straight on to with ``nstack`` values on the stack (popped on
    the way, as the ``continue`` stub pops a ``for`` loop's iterator), or None when the
    code does anything else first.

    A break whose way on is such an exit (the two sides of a ``while`` loop's test at its
    bottom on 3.10+, ``if ...: break`` at the end of a body) needs no resume function: the
    driver takes the exit's tuple at once, without another trip through the cache, its
    guards and a call of compiled code that would do nothing (``frame_calls.LoopExit``)."""
    if not is_body(code):
        return None
    insts, index = flow.layout(code)
    i = index.get(offset)
    seen = set()
    while i is not None and i < len(insts) and insts[i].opname in _ON_THE_WAY:
        if i in seen:  # (a jump to itself)
            return None
        seen.add(i)
        inst = insts[i]
        i = i + 1 if inst.opname == "NOP" else index.get(inst.argval)
    if i is None:
        return None
    for _ in range(nstack):
        if i >= len(insts) or insts[i].opname != "POP_TOP":
            return None
        i += 1
    # LOAD_CONST kind, LOAD_CONST payload, LOAD_FAST name..., BUILD_TUPLE n,
    # BUILD_TUPLE 3, RETURN_VALUE (see _exit)
    ops = insts[i : i + 2]
    if [inst.opname for inst in ops] != ["LOAD_CONST", "LOAD_CONST"]:
        return None
    kind, payload = ops[0].argval, ops[1].argval
    if kind not in (CONTINUE, BREAK):
        return None
    i += 2
    names: List[str] = []
    while i < len(insts) and insts[i].opname == "LOAD_FAST":
        names.append(insts[i].argval)
        i += 1
    tail = [(inst.opname, inst.arg) for inst in insts[i : i + 3]]
    if tail != [("BUILD_TUPLE", len(names)), ("BUILD_TUPLE", 3), ("RETURN_VALUE", None)]:
        return None
    return Exit(kind, payload, tuple(names))


def _at_line(instrs: List[Instr], like: Instr) -> List[Instr]:
    for ins in instrs:
        ins.lineno = like.lineno
    return instrs


__all__ = [
    "BREAK",
    "CONTINUE",
    "RETURN",
    "UNBOUND",
    "Exit",
    "LoopPlan",
    "body_name",
    "build_body_code",
    "carried_numbers",
    "eager_loop_name",
    "exit_at",
    "head_where",
    "is_body",
    "iterations",
    "plan_loop",
]
