"""The contract between jit-core and the opcode handlers that plugins register.

An opcode handler (``hookspecs.jit_register_opcodes``) gets a ``Translator`` and one
instruction, and may name the ``BreakKind`` its instruction breaks the graph as. This
module is that whole interface: what a handler may call on the translator, the break
kinds, and ``CallParts`` (a call decoded from the stack, which a call handler and its
break share). It is a leaf: it imports only ``jit_core.bytecode`` (facts about code
objects) and nothing of the executor, so a handler package depends on this module, on
``variables`` (the values it pushes) and on ``errors``, and on nothing else of jit-core.
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Protocol, Sequence

from bytecode import Instr, Label

from .bytecode import compat, flow

if TYPE_CHECKING:  # (for the annotations only: the contract imports no tracker at run time)
    from .codegen.breaks import BreakBuilder
    from .variables.base import VariableTracker


class Translator(Protocol):
    """What an opcode handler may use of the translator ``tx`` it is handed: the
    simulated stack and locals, the code it runs, and the operations that record Paddle
    work into the graph or decide a graph break. The executor's ``Translator`` is the one
    implementation; ``jit-opcodes`` uses nothing else of it (a test checks)."""

    #: the simulated value stack, bottom first
    stack: List[VariableTracker]
    #: the frame's locals by name, as trackers
    symbolic_locals: Dict[str, VariableTracker]
    #: the code object being simulated and the globals it reads
    code: types.CodeType
    f_globals: Dict[str, Any]
    #: 3.11-3.12's KW_NAMES: the keyword names of the next CALL
    kw_names: tuple
    #: a generator's frame: the values it yielded so far; None for any other frame
    yielded: Optional[List[VariableTracker]]
    #: per-frame state a family of handlers keeps (e.g. 3.8-3.10's block stack)
    scratch: Dict[str, Any]
    #: the graph being recorded (``call_function``, ``grad_mode()``, ``handlers_running``)
    output: Any

    def push(self, v: VariableTracker) -> None: ...
    def pop(self) -> VariableTracker: ...
    def popn(self, n: int) -> List[VariableTracker]: ...
    def peek(self, i: int = 1) -> VariableTracker: ...
    def jump(self, inst: dis.Instruction) -> None: ...
    def do_return(self, value: VariableTracker) -> None: ...
    def load_local(self, name: str) -> VariableTracker: ...
    def store_local(self, name: str, value: VariableTracker) -> None: ...
    def delete_local(self, name: str) -> None: ...
    def cell(self, name: str) -> Any: ...
    def load_global(self, name: str) -> VariableTracker: ...
    def call(
        self,
        fn: VariableTracker,
        args: List[VariableTracker],
        kwargs: Dict[str, VariableTracker],
    ) -> VariableTracker: ...
    def getattr(self, obj: VariableTracker, name: str) -> VariableTracker: ...
    def getitem(self, obj: VariableTracker, key: VariableTracker) -> VariableTracker: ...
    def setitem(
        self, obj: VariableTracker, key: VariableTracker, value: VariableTracker
    ) -> None: ...
    def delitem(self, obj: VariableTracker, key: VariableTracker) -> None: ...
    def binary_op(
        self, fn: Callable, a: VariableTracker, b: VariableTracker
    ) -> VariableTracker: ...
    def unary_op(self, fn: Callable, a: VariableTracker) -> VariableTracker: ...
    def identity_compare(
        self, fn: Callable, a: VariableTracker, b: VariableTracker
    ) -> VariableTracker: ...
    def iterate(self, obj: VariableTracker) -> VariableTracker: ...
    def stepwise_producer(self) -> Optional[tuple]: ...
    def no_side_effect(self, what: str) -> None: ...


@dataclass
class CallParts:
    """A call instruction decoded from the tracker stack: what a call handler and its
    break share (``BreaksAtCall``)."""

    #: stack entries the instruction takes
    consumed: int
    fn: VariableTracker
    args: List[VariableTracker] = field(default_factory=list)
    kwargs: Dict[str, VariableTracker] = field(default_factory=dict)
    #: CALL_FUNCTION_EX: the argument tuple and keyword dict as they are
    args_obj: Optional[VariableTracker] = None
    kwargs_obj: Optional[VariableTracker] = None


class BreakKind:
    """How the graph breaks at one kind of instruction: which stack entries it takes,
    where the frame goes on after it, and the code that runs it in CPython between the
    graph before it and the resume functions after it (written into the
    ``codegen.breaks.BreakBuilder`` it is given). Opcode handlers choose one of the
    subclasses below when they register (``break_as=``)."""

    def call_parts(self, stack: Sequence[VariableTracker], inst, kw_names) -> Optional[CallParts]:
        """The call an instruction of this kind makes, decoded from ``stack``."""
        return None

    def successors(self, code: types.CodeType, inst: dis.Instruction) -> List[int]:
        """The offsets where the frame can go on after ``inst``."""
        return [flow.next_offset(code, inst.offset)]

    def emit(self, b: BreakBuilder) -> None:
        """Write into ``b`` the code that rebuilds the stack, runs the instruction and
        returns what the resume function of each successor returns."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RunsInPython(BreakKind):
    """The instruction runs as it is, on the rebuilt stack: stores and deletes (side
    effects), and GET_ITER (a loop over what the capture cannot unroll)."""

    def __init__(self, pops: int, pushes: int = 0):
        self.pops, self.pushes = pops, pushes

    def emit(self, b: BreakBuilder) -> None:
        point = b.point
        inst = point.inst
        for v in point.stack:
            b.value(v)
        b.stack_rebuilt()
        if inst.opcode in dis.hasname:
            b.out.append(Instr(inst.opname, inst.argval))
        elif inst.opcode < dis.HAVE_ARGUMENT:
            b.out.append(Instr(inst.opname))
        else:
            raise ValueError(f"RunsInPython cannot re-emit {inst.opname} with its argument")
        b.resume(point.next_offset, len(point.stack) - self.pops + self.pushes)

    def __repr__(self) -> str:
        return f"RunsInPython(pops={self.pops}, pushes={self.pushes})"


class BreaksAtCall(BreakKind):
    """A call: the callee runs in CPython through ``hooked_call`` (so the frame hook
    captures it on its own), and its result is the top of the resumed frame's stack.
    ``decode(stack, inst, kw_names) -> CallParts`` reads the instruction's operands, the
    same function its handler simulates the call with."""

    def __init__(self, decode: Callable[..., CallParts]):
        self.decode = decode

    def call_parts(self, stack, inst, kw_names) -> Optional[CallParts]:
        return self.decode(stack, inst, kw_names)

    def emit(self, b: BreakBuilder) -> None:
        point = b.point
        call = point.call
        assert call is not None  # (break_point decodes it with call_parts for this kind)
        rest = point.stack[: len(point.stack) - call.consumed]
        for v in rest:
            b.value(v)
        b.hooked_call_of(call)
        b.resume(point.next_offset, len(rest) + 1)

    def __repr__(self) -> str:
        return f"BreaksAtCall({getattr(self.decode, '__name__', self.decode)})"


class BreaksAtBranch(BreakKind):
    """A conditional jump on a value the capture cannot know (a tensor's truth): the
    real value decides, and each side goes on in its own resume function."""

    def __init__(self, jump_if_true: bool, keeps_value: bool = False):
        #: jumps when the value is true; keeps the value on the stack when it jumps
        self.jump_if_true, self.keeps_value = jump_if_true, keeps_value

    def successors(self, code, inst) -> List[int]:
        return [flow.next_offset(code, inst.offset), inst.argval]

    def emit(self, b: BreakBuilder) -> None:
        point = b.point
        rest = point.stack[:-1]
        for v in point.stack:
            b.value(v)
        b.stack_rebuilt()
        taken = Label()
        if self.keeps_value:
            b.out += compat.dup_top()
        b.out += compat.pop_jump_forward(self.jump_if_true, taken)
        if self.keeps_value:
            b.out += compat.pop_top()
        b.resume(point.next_offset, len(rest))
        b.out.append(taken)
        b.resume(point.inst.argval, len(rest) + (1 if self.keeps_value else 0))

    def __repr__(self) -> str:
        return f"BreaksAtBranch(jump_if_true={self.jump_if_true}, keeps_value={self.keeps_value})"


__all__ = [
    "BreakKind",
    "BreaksAtBranch",
    "BreaksAtCall",
    "CallParts",
    "RunsInPython",
    "Translator",
]
