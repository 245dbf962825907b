"""Graph breaks: the code that replaces a frame whose capture stopped at an instruction.

When the symbolic executor meets an instruction it cannot simulate in the frame it
captures (a call that prints, reads a tensor's value or mutates it; a branch on a tensor's
value; a store, which is a side effect), the frame is captured again up to that
instruction, and its replacement

1. runs the graph of everything before the break,
2. rebuilds the values of the live locals and of the stack (each value's
   ``reconstruct``: from the graph's outputs, or from where it came from),
3. runs the instruction itself in CPython (a call goes through ``hooked_call``, which
   turns the frame hook on so the callee is captured on its own; a branch tests the real
   value), and
4. returns what a resume function (``codegen.resume``) returns: the rest of the frame,
   entered with the stack and the live locals, captured on its own when it runs.

How step 3 looks depends on the instruction, and is the opcode handler's to say: a
handler registers a ``BreakKind`` with its opcode (``register(..., break_as=...)``,
see ``hookspecs.jit_register_opcodes``), one of the kinds below, which this module knows
how to perform. An opcode whose handler registers none cannot break the graph: a frame
that stops there runs eagerly.

Inside a loop the capture stops before the loop instead, and the resumed frame runs the
loop; inside a try or with block, before the block. A frame with cell variables shares
them with the resume functions (and stores in them what the capture left there first).
Where a break would not be exact the frame runs eagerly, and ``explain()`` says why.
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence

from bytecode import Instr
from bytecode.instr import UNSET

from .. import plugins
from ..bytecode import compat, flow
from ..bytecode.flow import parameter_names
from ..sources import Source
from ..spi import BreakKind, BreaksAtBranch, BreaksAtCall, CallParts, RunsInPython
from ..variables import DictVariable, TensorVariable, TupleVariable, VariableTracker
from ..variables.base import KnownValueVariable
from ..variables.functions import UserMethodVariable
from . import resume
from .frame import assemble, run_graph
from .pycodegen import PyCodegen, collect, store_cells

STACK_LOCAL = "___jit_stack"
LOCALS_LOCAL = "___jit_locals"


def break_kind(opname: str) -> Optional[BreakKind]:
    """How the graph breaks at ``opname`` on the running Python: what its registered
    handler says, or None (a frame that stops there runs eagerly)."""
    h = plugins.opcode_handlers().get(opname)
    return h.break_as if h is not None else None


def can_break_at(opname: str) -> bool:
    """Whether the graph can break at an instruction of this kind on the running Python."""
    return break_kind(opname) is not None


IN_LOOP = "the graph cannot break inside a loop (each iteration would need its own graph)"
IN_BLOCK = "the graph cannot break inside a try or with block (the block would lose its handler)"
IN_FINALLY = "the graph cannot break inside a finally body on Python 3.8 (it ends with END_FINALLY)"


@dataclass(frozen=True)
class Where:
    """Where a capture that stopped at an instruction ends: at that instruction (it runs
    in CPython), or, for one inside a loop or a try/with block, before that loop or
    block: the resumed frame runs it (a loop's body as a function of its own where it
    can be, ``codegen.loops``; a block as it is, with its handlers, eagerly)."""

    before_loop: Optional[int] = None  # the offset of the loop's or block's first instruction
    #: "loop", "block", or "raises": before an instruction that raises (the resumed
    #: frame starts with it, and CPython raises the error eager code raises)
    kind: str = "loop"


#: instructions before which the graph breaks where the capture knows they raise: the
#: resumed frame starts with one, and CPython raises there what eager code raises (a name
#: not defined: NameError). What they raise depends on nothing but the name and the
#: globals, which the resumed frame shares.
BREAK_BEFORE_RAISING = frozenset({"LOAD_GLOBAL"})


def where_to_break(code: types.CodeType, inst: dis.Instruction, raises: bool = False):
    """A ``Where``, or why the graph cannot break for ``inst`` ("" when the reason of the
    stop needs nothing added: only instructions whose handler registers a break kind
    can break, and, where the capture knows they raise (``raises``), those of
    ``BREAK_BEFORE_RAISING``, before which the graph breaks)."""
    if code.co_cellvars:
        # its cells are shared with the closures it made: the break stores what the
        # capture left in them, and the resume function gets the very cells as free
        # variables (``resume.cells_become_free``), unless a cell also lives in a plain slot
        why = flow.cells_not_shareable(code)
        if why:
            return f"the graph cannot break in a frame that makes closures here: {why}"
    if any(s <= inst.offset < e for s, e in compat.finally_bodies(code)):
        return IN_FINALLY
    head = flow.loop_head(code, inst.offset)
    if head is not None:
        # whatever stopped the capture, the whole loop runs in the resumed frame
        return IN_LOOP if flow.protected(code, head) else Where(before_loop=head)
    if inst.opname in ("BEFORE_WITH", "SETUP_WITH"):
        # entering the block stopped the capture (its manager is not modelled, or its
        # __enter__ breaks): the resumed frame enters it
        return Where(before_loop=inst.offset, kind="block")
    if flow.protected(code, inst.offset):
        # whatever stopped it: the resumed frame runs the whole block with its handlers
        start = flow.block_start(code, inst.offset)
        return IN_BLOCK if start is None else Where(before_loop=start, kind="block")
    if break_kind(inst.opname) is None:
        if raises and inst.opname in BREAK_BEFORE_RAISING:
            return Where(before_loop=inst.offset, kind="raises")
        return ""
    return Where()


def _method_parts(tx, call: CallParts) -> None:
    """A method of a user object is called as its function with the object first: in
    the argument list, or in the argument tuple of a call that unpacks one
    (``obj.method(*args, **kwargs)``, CALL_FUNCTION_EX)."""
    fn = call.fn
    if not isinstance(fn, UserMethodVariable):
        return
    call.fn = KnownValueVariable(fn.fn)
    if call.args_obj is None:
        call.args = [fn.obj] + list(call.args)
    else:
        call.args_obj = TupleVariable([fn.obj] + list(call.args_obj.unpack_var_sequence(tx)))


@dataclass
class BreakPoint:
    """The state of the frame just before the instruction that breaks the graph."""

    inst: dis.Instruction
    stack: List[VariableTracker]
    live: List[str]
    local_values: List[VariableTracker]
    #: how the graph breaks at ``inst`` (None when it stops before a loop or block)
    kind: Optional[BreakKind] = None
    call: Optional[CallParts] = None
    #: stopped before a loop: the instruction that would have run next resumes it
    before_loop: bool = False
    #: where the frame goes on after ``inst`` (or at the loop, ``before_loop``)
    next_offset: int = -1
    #: filled by ``build_break_code``: (name, offset, stack size) of each resume function
    resumes: List[tuple] = field(default_factory=list)
    #: the frame's cell variables, and the cells of its closure it assigned: (name,
    #: contents or None, bound at entry)
    cells: List[tuple] = field(default_factory=list)
    #: the lists and dicts from outside the frame that the capture mutated: their new
    #: contents are written back before the instruction
    containers: List[VariableTracker] = field(default_factory=list)


def break_point(tx, inst: dis.Instruction, before_loop: bool = False) -> BreakPoint:
    """Decode the stopped root translator ``tx`` at ``inst`` (the loop's first instruction
    when ``before_loop``)."""
    code = tx.code
    kind = None if before_loop else break_kind(inst.opname)
    if before_loop:
        starts = [inst.offset]
    elif kind is None:
        raise ValueError(f"no break kind is registered for {inst.opname}")
    else:
        starts = kind.successors(code, inst)
    live = sorted(n for n in flow.live_locals(code, starts) if n in tx.symbolic_locals)
    stack = list(tx.stack)
    call = None if kind is None else kind.call_parts(stack, inst, tx.kw_names)
    if call is not None:
        _method_parts(tx, call)
    values = [tx.symbolic_locals[n] for n in live]
    point = BreakPoint(inst, stack, live, values, kind, call, before_loop, starts[0])
    args = parameter_names(code)
    point.cells = [(n, tx.cells[n].contents, n in args) for n in code.co_cellvars]
    point.cells += written_cells(tx)
    point.containers = list(tx.output.side_effects.mutated)
    return point


def written_cells(tx) -> List[tuple]:
    """The cells of the frame's closure that the capture assigned or deleted, as
    ``store_cells`` takes them: code outside the frame shares them."""
    return [(n, tx.cells[n].contents, True) for n in tx.code.co_freevars if tx.cells[n].written]


class BreakBuilder:
    """What a ``BreakKind`` writes its code into: ``value(v)`` rebuilds a value on the
    stack, ``resume(offset, nstack)`` returns what the resume function at ``offset``
    returns for the top ``nstack`` stack entries, ``out`` takes any other instruction
    (it is the codegen's own list, so everything lands in order)."""

    def __init__(self, point: BreakPoint, cg: PyCodegen, hooked_call: Callable, resume_call):
        self.point = point
        self.cg = cg
        self.hooked_call = hooked_call
        self.out: List[Any] = cg.instrs
        self._resume_call = resume_call

    def value(self, v: VariableTracker) -> None:
        self.cg(v)

    def resume(self, offset: int, nstack: int) -> None:
        self._resume_call(self, offset, nstack)

    def hooked_call_of(self, call: CallParts) -> None:
        """Rebuild the callee and its arguments of ``call`` and call it through
        ``hooked_call`` (the frame hook captures the callee on its own); its result is
        left on the stack."""
        self.out += compat.load_callable_const(self.hooked_call)
        self.value(call.fn)
        self.value(call.args_obj if call.args_obj is not None else TupleVariable(call.args))
        self.value(call.kwargs_obj if call.kwargs_obj is not None else DictVariable(call.kwargs))
        self.stack_rebuilt()
        self.out += compat.call(3)

    def stack_rebuilt(self) -> None:
        """Called by a kind once the values the instruction takes are on the stack, before
        the instruction: the frame's cells get what the capture left in them (the
        instruction, the resume function and closures rebuilt here read the very
        cells), and the outside containers the capture mutated their new contents."""
        store_cells(self.cg, self.point.cells, self.point.containers)
        self.cg.release_locals(parameter_names(self.cg.code))


def _emit(b: BreakBuilder) -> None:
    """The whole break after the graph: the live locals, then the stack, the instruction
    and the resume functions."""
    point = b.point
    # the live locals first, while every source still reads the frame as it was
    for v in point.local_values:
        b.value(v)
    b.out += compat.build_tuple(len(point.local_values)) + compat.store_fast(LOCALS_LOCAL)
    if point.before_loop:
        for v in point.stack:
            b.value(v)
        b.stack_rebuilt()
        b.resume(point.next_offset, len(point.stack))
    else:
        assert point.kind is not None  # ``break_point`` sets one wherever not before_loop
        point.kind.emit(b)


def collect_break(code: types.CodeType, point: BreakPoint) -> PyCodegen:
    """The break's code, collected: ``.tensors`` are the graph outputs it needs (the
    tensors made by the graph that the rebuilt values hold; inputs and parameters are
    loaded from where they came from), ``.shared_objects()`` what ``build_break_code``
    keeps in locals."""

    def emit(cg: PyCodegen) -> None:
        _emit(BreakBuilder(point, cg, _no_call, lambda b, offset, nstack: None))

    return collect(code, emit, at_break=True)


def _no_call(*args):  # pragma: no cover - only stands in while collecting
    raise AssertionError


def build_break_code(
    code: types.CodeType,
    compiled: Optional[Callable],
    input_sources: Sequence[Source],
    outputs: Sequence[TensorVariable],
    point: BreakPoint,
    shared: Sequence[int],
    hooked_call: Callable,
    make_resume: Callable[[int, int, Sequence[str]], Callable],
    rearm: Optional[Callable[[], None]] = None,
) -> types.CodeType:
    """The replacement of ``code`` for a capture that stopped at ``point``; ``shared`` as
    ``collect_break`` found it.

    ``make_resume(offset, nstack, live)`` gives the callable that runs the rest of the frame
    from ``offset``: ``resume(stack_tuple, locals_tuple)``."""
    cg = PyCodegen(code, {id(t.node): i for i, t in enumerate(outputs)}, shared, at_break=True)

    def resume_call(b: BreakBuilder, offset: int, nstack: int) -> None:
        fn = make_resume(offset, nstack, point.live)
        made = (resume.resume_name(code, offset), offset, nstack)
        if made not in point.resumes:  # (the code is built twice: see frame_calls.Rearm)
            point.resumes.append(made)
        out = b.out
        out.extend(compat.build_tuple(nstack) + compat.store_fast(STACK_LOCAL))
        out.extend(compat.load_callable_const(fn))
        out.extend(compat.load_fast(STACK_LOCAL) + compat.load_fast(LOCALS_LOCAL))
        if code.co_freevars or code.co_cellvars:
            # the resume function reads the same cells as this frame
            out.extend(compat.load_closure(code) + compat.call(3))
        else:
            out.extend(compat.call(2))
        if rearm is not None:  # (see frame_calls.Rearm)
            out.extend(compat.load_callable_const(rearm) + compat.call(0) + compat.pop_top())
        out.extend(compat.return_value())

    _emit(BreakBuilder(point, cg, hooked_call, resume_call))
    # what runs at the break (the instruction itself, natively) carries its line: an
    # error it raises points at the user's line, as in eager, not at the ``def``
    line = compat.line_of(code, point.inst.offset)
    for ins in cg.instrs:
        if isinstance(ins, Instr) and (ins.lineno is None or ins.lineno is UNSET):
            ins.lineno = line
    return assemble(code, run_graph(code, compiled, input_sources) + cg.instrs)


__all__ = [
    "BreakBuilder",
    "BreakKind",
    "BreakPoint",
    "BreaksAtBranch",
    "BreaksAtCall",
    "CallParts",
    "IN_BLOCK",
    "IN_FINALLY",
    "IN_LOOP",
    "RunsInPython",
    "Where",
    "break_kind",
    "break_point",
    "build_break_code",
    "can_break_at",
    "collect_break",
    "where_to_break",
    "written_cells",
]
