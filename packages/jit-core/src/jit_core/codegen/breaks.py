"""Graph breaks: the code that replaces a frame whose capture stopped at an instruction.

When the symbolic executor meets an instruction it cannot simulate in the frame it
captures (a call that prints, reads a tensor's value or mutates it; a branch on a tensor's
value; a store, which is a side effect), the frame is captured again up to that
instruction, and its replacement

1. runs the graph of everything before the break,
2. rebuilds the values of the live locals and of the stack, from the graph's outputs and
   from where the other values came from,
3. runs the instruction itself in CPython (a call goes through ``hooked_call``, which
   turns the frame hook on so the callee is captured on its own; a branch tests the real
   value), and
4. returns what a resume function (``codegen.resume``) returns: the rest of the frame,
   entered with the stack and the live locals, captured on its own when it runs.

Inside a loop the capture stops before the loop instead, and the resumed frame runs the
loop. Where a break would not be exact (inside a try or with block, in a frame with
closures) the frame runs eagerly, and ``explain()`` says why.
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from bytecode import Instr, Label

from .. import _compat
from ..errors import RECONSTRUCT, Unsupported
from ..sources import Source
from ..variables import (
    DictVariable,
    NullVariable,
    TensorVariable,
    TupleVariable,
    VariableTracker,
)
from ..variables.base import KnownValueVariable, LazyVariable, call_first
from ..variables.containers import BaseListVariable, ListIteratorVariable, SetVariable
from ..variables.functions import BoundMethodVariable, UserMethodVariable
from . import resume
from .frame import _Emitter, assemble, run_graph, store_cells

STACK_LOCAL = "___jit_stack"
LOCALS_LOCAL = "___jit_locals"

CALLS = {"CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_METHOD", "CALL", "CALL_FUNCTION_EX"}
#: instructions that run as they are: stores and deletes (side effects), and GET_ITER
#: (a loop over what the capture cannot unroll): opname -> (stack values taken, pushed)
NATIVE = {
    "STORE_SUBSCR": (3, 0),
    "DELETE_SUBSCR": (2, 0),
    "STORE_ATTR": (2, 0),
    "DELETE_ATTR": (1, 0),
    "STORE_GLOBAL": (1, 0),
    "DELETE_GLOBAL": (0, 0),
    "GET_ITER": (1, 1),
}
_NAMED = {"STORE_ATTR", "DELETE_ATTR", "STORE_GLOBAL", "DELETE_GLOBAL"}
#: opname -> (jumps when the value is true, keeps the value on the stack when it jumps)
JUMPS = {
    "POP_JUMP_IF_FALSE": (False, False),
    "POP_JUMP_IF_TRUE": (True, False),
    "POP_JUMP_FORWARD_IF_FALSE": (False, False),
    "POP_JUMP_FORWARD_IF_TRUE": (True, False),
    "JUMP_IF_FALSE_OR_POP": (False, True),
    "JUMP_IF_TRUE_OR_POP": (True, True),
}


IN_LOOP = "the graph cannot break inside a loop (each iteration would need its own graph)"


def can_break_at(opname: str) -> bool:
    """Whether ``build_break_code`` can run an instruction of this kind in CPython between
    two graphs: calls, conditional jumps, and the stores and GET_ITER of ``NATIVE``. The
    opcode matrix's "breaks" column comes from here."""
    return opname in CALLS or opname in JUMPS or opname in NATIVE


IN_BLOCK = "the graph cannot break inside a try or with block (the block would lose its handler)"


@dataclass(frozen=True)
class Where:
    """Where a capture that stopped at an instruction ends: at that instruction (it runs
    in CPython), or, for one inside a loop or a try/with block, before that loop or
    block: the resumed frame runs it (a loop's body as a function of its own where it
    can be, ``codegen.loops``; a block as it is, with its handlers, eagerly)."""

    before_loop: Optional[int] = None  # the offset of the loop's or block's first instruction
    #: "loop" or "block"
    kind: str = "loop"


def where_to_break(code: types.CodeType, inst: dis.Instruction):
    """A ``Where``, or why the graph cannot break for ``inst`` ("" when the reason of the
    stop needs nothing added: only calls, branches and stores can break)."""
    if code.co_cellvars:
        # its cells are shared with the closures it made: the break stores what the
        # capture left in them, and the resume function gets the very cells as free
        # variables (``resume.cells_become_free``), unless a cell also lives in a plain slot
        why = resume.cells_not_shareable(code)
        if why:
            return f"the graph cannot break in a frame that makes closures here: {why}"
    head = resume.loop_head(code, inst.offset)
    if head is not None:
        # whatever stopped the capture, the whole loop runs in the resumed frame
        return IN_LOOP if resume.protected(code, head) else Where(before_loop=head)
    if inst.opname in ("BEFORE_WITH", "SETUP_WITH"):
        # entering the block stopped the capture (its manager is not modelled, or its
        # __enter__ breaks): the resumed frame enters it
        return Where(before_loop=inst.offset, kind="block")
    if resume.protected(code, inst.offset):
        # whatever stopped it: the resumed frame runs the whole block with its handlers
        start = resume.block_start(code, inst.offset)
        return IN_BLOCK if start is None else Where(before_loop=start, kind="block")
    if inst.opname not in CALLS and inst.opname not in JUMPS and inst.opname not in NATIVE:
        return ""
    return Where()


@dataclass
class CallParts:
    """A call instruction decoded from the tracker stack."""

    consumed: int
    fn: VariableTracker
    args: List[VariableTracker] = field(default_factory=list)
    kwargs: Dict[str, VariableTracker] = field(default_factory=dict)
    #: CALL_FUNCTION_EX: the argument tuple and keyword dict as they are
    args_obj: Optional[VariableTracker] = None
    kwargs_obj: Optional[VariableTracker] = None

    def values(self) -> List[VariableTracker]:
        out = [self.fn, *self.args, *self.kwargs.values()]
        return out + [v for v in (self.args_obj, self.kwargs_obj) if v is not None]


def decode_call(stack: Sequence[VariableTracker], inst: dis.Instruction, kw_names) -> CallParts:
    """The callee and arguments a call instruction would take from ``stack``."""
    op, n = inst.opname, inst.arg or 0
    if op == "CALL_FUNCTION":
        return CallParts(n + 1, stack[-n - 1], list(stack[len(stack) - n :]))
    if op == "CALL_FUNCTION_KW":
        names = stack[-1].as_python_constant()
        values = list(stack[len(stack) - n - 1 : -1])
        pos = values[: n - len(names)]
        return CallParts(n + 2, stack[-n - 2], pos, dict(zip(names, values[len(pos) :])))
    if op in ("CALL_METHOD", "CALL"):
        args = list(stack[len(stack) - n :])
        second, first = stack[-n - 1], stack[-n - 2]
        fn = second
        if not isinstance(first, NullVariable):
            fn, args = first, [second] + args
        kwargs: Dict[str, VariableTracker] = {}
        if op == "CALL" and kw_names:
            pos = args[: len(args) - len(kw_names)]
            kwargs = dict(zip(kw_names, args[len(pos) :]))
            args = pos
        return CallParts(n + 2, fn, args, kwargs)
    if op == "CALL_FUNCTION_EX":
        i = 1
        kwargs_obj = None
        if inst.arg & 1:
            kwargs_obj = stack[-i]
            i += 1
        args_obj = stack[-i]
        fn = stack[-i - 1]
        consumed = i + 1 + (1 if _compat.CALL_NEEDS_NULL else 0)
        return CallParts(consumed, fn, args_obj=args_obj, kwargs_obj=kwargs_obj)
    raise Unsupported(f"{op} is not a call", category=RECONSTRUCT)


def _method_parts(fn: VariableTracker, args: List[VariableTracker]):
    """A method of a user object is called as its function with the object first."""
    if isinstance(fn, UserMethodVariable):
        return KnownValueVariable(fn.fn), [fn.obj] + list(args)
    return fn, list(args)


class BreakEmitter(_Emitter):
    """Rebuilds the values live at a break: more kinds than a return value can be."""

    def value(self, v: VariableTracker) -> None:
        if isinstance(v, LazyVariable):
            # never read by the capture: the very value, from where it came from
            self.instrs += v.source.reconstruct(self.code)
            return
        if isinstance(v, TensorVariable) and v.source is not None:
            # an input or a parameter: the very object, so in-place work after the break
            # changes what eager Paddle would change
            self.instrs += v.source.reconstruct(self.code)
            return
        if isinstance(v, NullVariable):
            self.instrs += _compat.load_const(call_first)
            return
        if isinstance(v, BoundMethodVariable):
            self.value(v.obj)
            self.instrs += _compat.load_attr(v.name)
            return
        if isinstance(v, UserMethodVariable):
            self.instrs += _compat.load_callable_const(types.MethodType)
            self.instrs += _compat.load_const(v.fn)
            self.value(v.obj)
            self.instrs += _compat.call(2)
            return
        if isinstance(v, KnownValueVariable) and v.source is None:
            self.instrs += _compat.load_const(v.value)
            return
        if isinstance(v, ListIteratorVariable):
            # a loop's iterator: the items it has not given yet, as a real iterator
            self.instrs += _compat.load_callable_const(iter)
            self.value(TupleVariable(v.items[v.index :]))
            self.instrs += _compat.call(1)
            return
        super().value(v)


def tensors_to_rebuild(values: Sequence[VariableTracker]) -> List[TensorVariable]:
    """The graph outputs a break needs: the tensors made by the graph (inputs and
    parameters are loaded from where they came from), each once, in order."""
    out: List[TensorVariable] = []
    seen: set = set()

    def visit(v):
        if isinstance(v, TensorVariable):
            if v.source is None and id(v.node) not in seen:
                seen.add(id(v.node))
                out.append(v)
        elif isinstance(v, BaseListVariable) and v.source is None:
            for item in v.items:
                visit(item)
        elif isinstance(v, DictVariable) and v.source is None:
            for item in v.items.values():
                visit(item)
        elif isinstance(v, (BoundMethodVariable, UserMethodVariable)):
            visit(v.obj)
        elif isinstance(v, ListIteratorVariable):
            for item in v.items[v.index :]:
                visit(item)

    for v in values:
        visit(v)
    return out


@dataclass
class BreakPoint:
    """The state of the frame just before the instruction that breaks the graph."""

    inst: dis.Instruction
    stack: List[VariableTracker]
    live: List[str]
    local_values: List[VariableTracker]
    call: Optional[CallParts] = None
    #: stopped before a loop: the instruction that would have run next resumes it
    before_loop: bool = False
    #: where the frame goes on after ``inst`` (or at the loop, ``before_loop``)
    next_offset: int = -1
    #: filled by ``build_break_code``: (name, offset, stack size) of each resume function
    resumes: List[tuple] = field(default_factory=list)
    #: the frame's cell variables: (name, contents or None, bound at entry)
    cells: List[tuple] = field(default_factory=list)

    def values(self) -> List[VariableTracker]:
        out = list(self.stack) + list(self.local_values)
        out += [c for _, c, _ in self.cells if c is not None]
        if self.call is not None:
            out += self.call.values()
        return out


def break_point(tx, inst: dis.Instruction, before_loop: bool = False) -> BreakPoint:
    """Decode the stopped root translator ``tx`` at ``inst`` (the loop's first instruction
    when ``before_loop``)."""
    code = tx.code
    after = inst.offset if before_loop else resume.next_offset(code, inst.offset)
    starts = [after]
    if inst.opname in JUMPS and not before_loop:
        starts.append(inst.argval)
    live = sorted(n for n in resume.live_locals(code, starts) if n in tx.symbolic_locals)
    stack = list(tx.stack)
    call = None
    if inst.opname in CALLS and not before_loop:
        call = decode_call(stack, inst, tx.kw_names)
        call.fn, call.args = _method_parts(call.fn, call.args)
    values = [tx.symbolic_locals[n] for n in live]
    point = BreakPoint(inst, stack, live, values, call, before_loop, after)
    nargs = code.co_argcount + code.co_kwonlyargcount
    args = code.co_varnames[: nargs + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)]
    point.cells = [(n, tx.cells[n].contents, n in args) for n in code.co_cellvars]
    return point


def _refuse_shared_containers(values: Sequence[VariableTracker]) -> None:
    """A list, dict or set made during the capture is rebuilt as a new object wherever it
    is live; two places holding the same one would get two objects, and a mutation
    through one would not show through the other: refused (the frame runs eagerly)."""
    seen: set = set()

    def visit(v):
        if isinstance(v, (BaseListVariable, DictVariable, SetVariable)) and v.source is None:
            if not isinstance(v, TupleVariable):
                if id(v) in seen:
                    raise Unsupported(
                        f"a {v.describe()} made in the frame is held in two places at the break",
                        category=RECONSTRUCT,
                    )
                seen.add(id(v))
            items = v.items.values() if isinstance(v, DictVariable) else getattr(v, "items", [])
            for item in items:
                visit(item)
        elif isinstance(v, (BoundMethodVariable, UserMethodVariable)):
            visit(v.obj)

    for v in values:
        visit(v)


def build_break_code(
    code: types.CodeType,
    compiled: Optional[Callable],
    input_sources: Sequence[Source],
    outputs: Sequence[TensorVariable],
    point: BreakPoint,
    hooked_call: Callable,
    make_resume: Callable[[int, int, Sequence[str]], Callable],
    rearm: Optional[Callable[[], None]] = None,
) -> types.CodeType:
    """The replacement of ``code`` for a capture that stopped at ``point``.

    ``make_resume(offset, nstack, live)`` gives the callable that runs the rest of the frame
    from ``offset``: ``resume(stack_tuple, locals_tuple)``."""
    # (the call's parts are a view of the top of the stack, not more places)
    cells = [c for _, c, _ in point.cells if c is not None]
    _refuse_shared_containers(list(point.stack) + list(point.local_values) + cells)
    em = BreakEmitter(code, {id(t.node): i for i, t in enumerate(outputs)})
    em.at_break = True
    out: List[Any] = run_graph(code, compiled, input_sources)

    def emit(v: VariableTracker) -> None:
        em.instrs = []
        em.value(v)
        out.extend(em.instrs)

    # the live locals first, while every source still reads the frame as it was
    for v in point.local_values:
        emit(v)
    out += _compat.build_tuple(len(point.local_values)) + _compat.store_fast(LOCALS_LOCAL)

    def resume_call(offset: int, nstack: int) -> None:
        fn = make_resume(offset, nstack, point.live)
        made = (resume.resume_name(code, offset), offset, nstack)
        if made not in point.resumes:  # (the code is built twice: see eval_frame._Rearm)
            point.resumes.append(made)
        out.extend(_compat.build_tuple(nstack) + _compat.store_fast(STACK_LOCAL))
        out.extend(_compat.load_callable_const(fn))
        out.extend(_compat.load_fast(STACK_LOCAL) + _compat.load_fast(LOCALS_LOCAL))
        if code.co_freevars or code.co_cellvars:
            # the resume function reads the same cells as this frame
            out.extend(_compat.load_closure(code) + _compat.call(3))
        else:
            out.extend(_compat.call(2))
        if rearm is not None:  # (see eval_frame._Rearm)
            out.extend(_compat.load_callable_const(rearm) + _compat.call(0) + _compat.pop_top())
        out.extend(_compat.return_value())

    inst = point.inst
    if point.before_loop:
        for v in point.stack:
            emit(v)
        out += store_cells(em, point.cells)
        resume_call(point.next_offset, len(point.stack))
    elif inst.opname in NATIVE:
        taken, pushed = NATIVE[inst.opname]
        for v in point.stack:
            emit(v)
        out += store_cells(em, point.cells)
        out.append(Instr(inst.opname, inst.argval) if inst.opname in _NAMED else Instr(inst.opname))
        resume_call(point.next_offset, len(point.stack) - taken + pushed)
    elif point.call is not None:
        call = point.call
        rest = point.stack[: len(point.stack) - call.consumed]
        for v in rest:
            emit(v)
        out += _compat.load_callable_const(hooked_call)
        emit(call.fn)
        if call.args_obj is not None:
            emit(call.args_obj)
        else:
            emit(TupleVariable(call.args))
        if call.kwargs_obj is not None:
            emit(call.kwargs_obj)
        else:
            emit(DictVariable(dict(call.kwargs)))
        out += store_cells(em, point.cells)
        out += _compat.call(3)
        resume_call(point.next_offset, len(rest) + 1)
    else:
        jump_if_true, keeps = JUMPS[inst.opname]
        rest = point.stack[:-1]
        for v in rest:
            emit(v)
        emit(point.stack[-1])
        out += store_cells(em, point.cells)
        taken = Label()
        if keeps:
            out += _compat.dup_top()
        out.append(Instr(_compat.pop_jump_forward(jump_if_true), taken))
        if keeps:
            out += _compat.pop_top()
        resume_call(point.next_offset, len(rest))
        out.append(taken)
        resume_call(inst.argval, len(rest) + (1 if keeps else 0))
    return assemble(code, out)


__all__ = [
    "BreakPoint",
    "CALLS",
    "can_break_at",
    "IN_BLOCK",
    "JUMPS",
    "break_point",
    "build_break_code",
    "call_first",
    "decode_call",
    "tensors_to_rebuild",
    "where_to_break",
]
