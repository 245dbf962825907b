"""The symbolic executor: walks a frame's bytecode with trackers instead of values.

Opcode handlers (registered by jit-opcodes or any plugin) drive a ``Translator`` through
the small API below: the stack, the locals and cells, jumps, and the operations that
turn into graph nodes. User functions and ``Layer.forward`` are inlined by running a
child translator that shares the parent's ``OutputGraph``.
"""

from __future__ import annotations

import builtins
import dis
import logging
import types
from typing import Any, Callable, Dict, List, Optional

from .. import plugins
from ..bytecode import compat
from ..bytecode.flow import parameter_names
from ..bytecode.opcode_info import CO_GENERATOR, GENERATOR_FLAGS
from ..config import DISABLED_ATTR, DISABLED_CODES
from ..errors import (
    GENERATOR,
    INTERNAL,
    LIMIT,
    RAISES,
    SIDE_EFFECT,
    UNSUPPORTED_OPCODE,
    UNTRACED_CALL,
    ExceptionsNotSimulated,
    Raised,
    Unsupported,
    describe_instruction,
)
from ..sources import (
    ClosureSource,
    DefaultSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    ObjectSource,
    Source,
)
from ..variables import (
    CellVariable,
    ConstantVariable,
    DictVariable,
    ListVariable,
    NestedFunctionVariable,
    TupleVariable,
    VariableTracker,
    generators,
    wrap,
)
from ..variables.base import LazyVariable
from ..variables.containers import _BIRTHS
from ..variables.exceptions import ExceptionVariable
from .operations import Operations
from .output_graph import OutputGraph

log = logging.getLogger("jit_core.breaks")

MAX_INLINE_DEPTH = 32
#: a guard against capture loops that never end (a `while True` on Python values)
MAX_INSTRUCTIONS = 2_000_000


#: each code's decoded instructions. It keeps every code it read alive, on purpose for now:
#: a weak version (a leak fix, ~0.27 MB a fuzz program) was followed by a segfault in a
#: generated resume function in CI on 3.12 that did not reproduce here. Suspected:
#: Paddle's eval-frame shim keeps per-code status by the code's address, which a code
#: freed early hands on to the next code allocated there
_instruction_cache: Dict[types.CodeType, tuple] = {}


def _decoded(code: types.CodeType):
    cached = _instruction_cache.get(code)
    if cached is None:
        insts = compat.instructions(code)
        index = {inst.offset: i for i, inst in enumerate(insts)}
        # the source line of every instruction (dis marks only those that start one): a
        # jump into the middle of a line, as a resume function's prefix makes, keeps it
        lines = []
        line = code.co_firstlineno
        for inst in insts:
            line = compat.instruction_line(inst) or line
            lines.append(line)
        cached = (insts, index, lines)
        _instruction_cache[code] = cached
    return cached


def _inlinable_code(fn: types.FunctionType) -> types.CodeType:
    """``fn``'s code, to inline; a function ``jit_core.disable()`` keeps out of capture is
    never inlined: the graph breaks at its call."""
    if fn.__code__ in DISABLED_CODES or getattr(fn, DISABLED_ATTR, None) is not None:
        raise Unsupported(
            f"{fn.__qualname__} is marked jit_core.disable(): it runs eagerly",
            category=UNTRACED_CALL,
        )
    return fn.__code__


class Translator(Operations):
    def __init__(
        self,
        code: types.CodeType,
        f_globals: Dict[str, Any],
        output: OutputGraph,
        root_globals: Dict[str, Any],
        parent: Optional[Translator] = None,
        generator: bool = False,
    ):
        # a generator's code runs only through ``inline_generator`` (a generator
        # expression or function consumed in a captured frame); a captured frame that is
        # a generator, and every coroutine, runs eagerly
        if code.co_flags & GENERATOR_FLAGS and not (
            generator and code.co_flags & GENERATOR_FLAGS == CO_GENERATOR
        ):
            raise Unsupported("generators and coroutines run eagerly", category=GENERATOR)
        self.code = code
        self.f_globals = f_globals
        self.f_builtins = f_globals.get("__builtins__", builtins)
        if isinstance(self.f_builtins, types.ModuleType):
            self.f_builtins = self.f_builtins.__dict__
        self.output = output
        self.root_globals = root_globals
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        if self.depth > MAX_INLINE_DEPTH:
            raise Unsupported(f"inlining deeper than {MAX_INLINE_DEPTH} calls", category=LIMIT)
        self.instructions, self._offset_index, self._lines = _decoded(code)
        self.ip = 0
        self.stack: List[VariableTracker] = []
        self.symbolic_locals: Dict[str, VariableTracker] = {}
        self.cells: Dict[str, CellVariable] = {}
        #: root only: id of each real cell of the captured frame's closure -> its tracker,
        #: so that a function inlined in the capture that shares one shares its tracker
        self.root_cells: Dict[int, CellVariable] = {}
        self.return_value: Optional[VariableTracker] = None
        self.done = False
        self.lineno = code.co_firstlineno
        self.current: Optional[dis.Instruction] = None
        #: 3.11/3.12 KW_NAMES: the keyword names of the next CALL
        self.kw_names: tuple = ()
        #: per-opcode scratch space for handlers (e.g. a block stack on 3.8-3.10)
        self.scratch: Dict[str, Any] = {}
        self.steps = 0
        #: stop (with the state intact) before the instruction that would be this step:
        #: how the capture of a frame that breaks ends (see codegen.breaks)
        self.stop_at_step: Optional[int] = None
        #: or before the first instruction at this offset (the head of a loop)
        self.stop_at_offset: Optional[int] = None
        self.stopped = False
        #: the values a generator's code yields (YIELD_VALUE); None outside generators
        self.yielded: Optional[List[VariableTracker]] = [] if generator else None
        #: (root only) the code running for a lazy iterator now, innermost last: (first
        #: container number it owns, what it is, consumed step by step, gradient mode)
        self.producers: List[tuple] = []
        #: (root only) how many containers made in the frame have changed so far
        self.mutation_count = 0

    # ------------------------------------------------------------------ running
    def run(self) -> Optional[VariableTracker]:
        handlers = plugins.opcode_handlers()
        insts = self.instructions
        while not self.done:
            if self.ip >= len(insts):
                raise Unsupported("fell off the end of the bytecode", category=INTERNAL)
            if (self.stop_at_step is not None and self.steps + 1 == self.stop_at_step) or (
                self.stop_at_offset is not None and insts[self.ip].offset == self.stop_at_offset
            ):
                self.stopped = True
                return None
            inst = insts[self.ip]
            self.ip += 1
            self.current = inst
            self.lineno = self._lines[self.ip - 1]
            self.steps += 1
            try:
                if self.steps > MAX_INSTRUCTIONS:
                    raise Unsupported(
                        f"more than {MAX_INSTRUCTIONS} instructions simulated", category=LIMIT
                    )
                h = handlers.get(inst.opname)
                if h is None:
                    raise Unsupported(
                        f"no handler for opcode {inst.opname} on Python {compat.VERSION_STR}",
                        category=UNSUPPORTED_OPCODE,
                    )
                h.handler(self, inst)
            except Unsupported as e:
                if isinstance(e, Raised) and self._to_handler(e):
                    continue
                if self.output.handlers_running:
                    # a handler the capture took an exception to cannot be left half
                    # way (a break there would resume without the exception)
                    raise ExceptionsNotSimulated(
                        f"inside an exception handler the capture entered: {e.reason}"
                    ) from None
                if e.location is None:
                    e.location = self.location()
                    e.instruction = self.describe_instruction(inst)
                if self.parent is not None:
                    e.reads_frame = False  # the frame it reads is the callee's own
                if self.parent is None and e.root_step is None:
                    e.root_step = self.steps
                    e.root_instruction = inst
                    e.root_location = self.location()
                raise
        assert self.return_value is not None
        return self.return_value

    def location(self) -> str:
        return f"{self.code.co_filename}:{self.lineno}"

    # ------------------------------------------------------------------ exceptions
    def _to_handler(self, e: Raised) -> bool:
        """Take ``e`` to the handler of the ``try`` block around the current instruction,
        as CPython would: the stack cut to the block's depth, the exception pushed, the
        handler next. False where no block of this code covers the instruction (the
        exception leaves the function: the caller's translator looks for its own)."""
        if self.output.shape_policy.raise_reason is not None:
            return False
        if self.root().producers:
            raise ExceptionsNotSimulated("an exception raised inside a generator's code")
        assert self.current is not None  # (called by run(), for the instruction it runs)
        offset = self.current.offset
        exc = ExceptionVariable(e.exc, made_here=e.made_here)
        if compat.HAS_EXCEPTION_TABLE:
            entry = compat.exception_handler(self.code, offset)
            if entry is None:
                return False
            target, depth, lasti = entry
            pushed: List[VariableTracker] = [ConstantVariable(offset)] if lasti else []
            pushed.append(exc)
        else:
            blocks = self.scratch.get("blocks") or []
            if not blocks:
                return False
            kind, target, depth = blocks.pop()
            if kind != "finally":
                # a with block: its __exit__ would see the exception
                raise ExceptionsNotSimulated(f"an exception raised inside a {kind} block")
            blocks.append(("except-handler", None, depth))
            none = ConstantVariable(None)
            # what CPython pushes: the exception state before (traceback, value, type),
            # then the exception's own
            pushed = [none, none, none, none, exc, ExceptionVariable(e.exc, is_type=True)]
        if len(self.stack) < depth:
            raise ExceptionsNotSimulated("the stack is shallower than the try block's")
        del self.stack[depth:]
        self.stack.extend(pushed)
        self.jump_to_offset(target)
        self.output.handlers_running += 1
        log.debug("%s: %s taken to the handler at %d", self.location(), e.reason, target)
        return True

    describe_instruction = staticmethod(describe_instruction)

    # ------------------------------------------------------------------ stack
    def push(self, v: VariableTracker) -> None:
        assert isinstance(v, VariableTracker), v
        self.stack.append(v)

    def pop(self) -> VariableTracker:
        return self.stack.pop()

    def popn(self, n: int) -> List[VariableTracker]:
        if n == 0:
            return []
        out = self.stack[-n:]
        del self.stack[-n:]
        return out

    def peek(self, i: int = 1) -> VariableTracker:
        return self.stack[-i]

    def jump(self, inst: dis.Instruction) -> None:
        self.ip = self._offset_index[inst.argval]

    def jump_to_offset(self, offset: int) -> None:
        self.ip = self._offset_index[offset]

    def do_return(self, value: VariableTracker) -> None:
        self.return_value = value
        self.done = True

    # ------------------------------------------------------------------ names
    def load_local(self, name: str) -> VariableTracker:
        if name not in self.symbolic_locals:
            raise Unsupported(f"local variable {name!r} is read before assignment", category=RAISES)
        value = self.symbolic_locals[name]
        if isinstance(value, LazyVariable) and not self._only_returned():
            value = self.symbolic_locals[name] = value.realize(self)
        return value

    #: False where every value returned must be a graph input (``jit_core.capture``)
    unread_pass_through = True

    #: what may stand between a load and the frame's return for the value to be only
    #: passed through: more loads, and tuples built of them
    _PASS_THROUGH = frozenset(
        {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_LOAD_FAST", "LOAD_CONST", "BUILD_TUPLE"}
    )

    def _only_returned(self) -> bool:
        """Whether the value loaded now goes straight into the frame's return value: a
        loop body hands every local back this way (``codegen.loops``). Such a value stays
        unread (no guard: the code after the graph loads it again from the frame)."""
        if self.parent is not None or not self.unread_pass_through:
            return False  # an inlined function's return goes on in its caller
        for inst in self.instructions[self.ip :]:
            if inst.opname not in self._PASS_THROUGH:
                return inst.opname == "RETURN_VALUE"
        return False

    def store_local(self, name: str, value: VariableTracker) -> None:
        self.symbolic_locals[name] = value

    def delete_local(self, name: str) -> None:
        if name not in self.symbolic_locals:
            raise Unsupported(f"del of unbound local {name!r}", category=RAISES)
        del self.symbolic_locals[name]

    def cell(self, name: str) -> CellVariable:
        if name not in self.cells:
            raise Unsupported(f"unknown cell {name!r}", category=INTERNAL)
        return self.cells[name]

    def global_source(self, name: str) -> Source:
        if self.f_globals is self.root_globals:
            return GlobalSource(name)
        mod = self.f_globals.get("__name__", "?")
        return ItemSource(ObjectSource(self.f_globals, f"globals of {mod}"), name)

    def load_global(self, name: str) -> VariableTracker:
        if name in self.f_globals:
            return wrap(self, self.f_globals[name], self.global_source(name))
        if name in self.f_builtins:
            return wrap(self, self.f_builtins[name], None)
        raise Unsupported(f"name {name!r} is not defined (NameError)", category=RAISES)

    # ------------------------------------------------------------------ operations
    def call(
        self, fn: VariableTracker, args: List[VariableTracker], kwargs: Dict[str, VariableTracker]
    ):
        return fn.call_function(self, list(args), dict(kwargs))

    def getattr(self, obj: VariableTracker, name: str) -> VariableTracker:
        return obj.var_getattr(self, name)

    # ------------------------------------------------------------------ lazy iterators
    def root(self) -> Translator:
        tx = self
        while tx.parent is not None:
            tx = tx.parent
        return tx

    def run_producer(
        self, produce: Callable[[Translator], List[VariableTracker]], what: str, stepwise: bool
    ) -> List[VariableTracker]:
        """Run the code of a lazy iterator (``variables.generators``) for all its items.
        ``stepwise``: its consumer runs between two items in CPython, so the code may
        have no side effect the consumer could see."""
        root = self.root()
        floor = next(_BIRTHS)
        root.producers.append((floor, what, stepwise, self.output.grad_mode()))
        inplace = _inplace_count(self.output) if stepwise else 0
        try:
            items = produce(self)
        except Unsupported as e:
            if not e.reason.startswith("inside "):
                e.reason = f"inside {what}: {e.reason}"
            raise
        finally:
            root.producers.pop()
        if stepwise and _inplace_count(self.output) != inplace:
            raise Unsupported(
                f"inside {what}, consumed step by step: an in-place update would interleave "
                "with the consumer's code",
                category=SIDE_EFFECT,
            )
        return items

    def stepwise_producer(self) -> Optional[tuple]:
        """The innermost lazy iterator consumed step by step whose code runs now."""
        for region in reversed(self.root().producers):
            if region[2]:
                return region
        return None

    def no_side_effect(self, what: str) -> None:
        """Refuse ``what`` (a side effect) in the code of an iterator consumed step by step."""
        region = self.stepwise_producer()
        if region is not None:
            raise Unsupported(
                f"{what} inside {region[1]}, consumed step by step: a side effect that "
                "would interleave with the consumer's code",
                category=SIDE_EFFECT,
            )

    def container_mutated(self, container: VariableTracker, what: str) -> None:
        """``container`` (made in the frame) changes: refused inside the code of an
        iterator consumed step by step, unless that code made the container."""
        root = self.root()
        for floor, desc, stepwise, _ in root.producers:
            if stepwise and getattr(container, "birth", -1) < floor:
                raise Unsupported(
                    f"{what} of a container from outside {desc}, consumed step by step: "
                    "a side effect that would interleave with the consumer's code",
                    category=SIDE_EFFECT,
                )
        root.mutation_count += 1

    def container_mutations(self) -> int:
        return self.root().mutation_count

    def make_generator(self, code, f_globals, defaults, kwdefaults, closure, args, kwargs):
        """Call a generator function: its arguments are bound now, its code runs when
        the generator is consumed (``variables.generators``)."""
        bound = bind_arguments(code, defaults, kwdefaults, list(args), dict(kwargs))

        def run(tx: Translator) -> List[VariableTracker]:
            return tx.inline_generator(code, f_globals, dict(bound), closure)

        return generators.generator(self, code, run)

    def inline_generator(self, code, f_globals, bound, closure) -> List[VariableTracker]:
        """Run a generator's code to its end in a child translator: what it yields."""
        child = Translator(code, f_globals, self.output, self.root_globals, self, generator=True)
        child.setup_locals(bound, closure)
        child.run()
        assert child.yielded is not None
        return child.yielded

    # ------------------------------------------------------------------ inlining
    def inline_function(
        self,
        fn: types.FunctionType,
        args: List[VariableTracker],
        kwargs: Dict[str, VariableTracker],
        fn_source: Optional[Source],
    ) -> VariableTracker:
        code = _inlinable_code(fn)
        defaults = []
        for i, d in enumerate(fn.__defaults__ or ()):
            src: Optional[Source] = DefaultSource(fn_source, i) if fn_source is not None else None
            defaults.append(wrap(self, d, src))
        kwdefaults = {}
        for k, d in (fn.__kwdefaults__ or {}).items():
            src = DefaultSource(fn_source, k, kwonly=True) if fn_source is not None else None
            kwdefaults[k] = wrap(self, d, src)
        closure: List[CellVariable] = []
        shared = self.root().root_cells
        for i, cell in enumerate(fn.__closure__ or ()):
            if id(cell) in shared:
                # a cell of the captured frame's closure: what the capture wrote into it
                # (still to be stored after the graph) is what this function reads
                closure.append(shared[id(cell)])
                continue
            try:
                contents = cell.cell_contents
            except ValueError:
                closure.append(CellVariable(None, external=True))
                continue
            src = ClosureSource(fn_source, i) if fn_source is not None else None
            closure.append(CellVariable(wrap(self, contents, src), external=True))
        return self._inline(code, fn.__globals__, defaults, kwdefaults, closure, args, kwargs)

    def inline_nested(self, fn: NestedFunctionVariable, args, kwargs) -> VariableTracker:
        defaults = fn.defaults.items if fn.defaults is not None else []
        kwdefaults = fn.kwdefaults.items if fn.kwdefaults is not None else {}
        closure = fn.closure or []
        return self._inline(fn.code, fn.f_globals, defaults, kwdefaults, closure, args, kwargs)

    def _inline(self, code, f_globals, defaults, kwdefaults, closure, args, kwargs):
        if code.co_flags & GENERATOR_FLAGS == CO_GENERATOR:
            return self.make_generator(code, f_globals, defaults, kwdefaults, closure, args, kwargs)
        child = Translator(code, f_globals, self.output, self.root_globals, parent=self)
        bound = bind_arguments(code, defaults, kwdefaults, list(args), dict(kwargs))
        child.setup_locals(bound, closure)
        return child.run()

    def setup_locals(self, bound: Dict[str, VariableTracker], closure: List[CellVariable]) -> None:
        code = self.code
        for name, value in bound.items():
            if name in code.co_cellvars:
                self.cells[name] = CellVariable(value)
            else:
                self.symbolic_locals[name] = value
        for name in code.co_cellvars:
            self.cells.setdefault(name, CellVariable(None))
        if len(closure) != len(code.co_freevars):
            raise Unsupported("closure does not match the code's free variables", category=INTERNAL)
        for name, cell in zip(code.co_freevars, closure):
            self.cells[name] = cell


def _inplace_count(output: OutputGraph) -> int:
    return sum(1 for n in output.graph.nodes if n.meta.get("inplace"))


def bind_arguments(code, defaults, kwdefaults, args, kwargs) -> Dict[str, VariableTracker]:
    """Bind trackers to a code object's parameters the way CPython does."""
    nargs = code.co_argcount
    nposonly = getattr(code, "co_posonlyargcount", 0)
    nkwonly = code.co_kwonlyargcount
    names = code.co_varnames
    has_varargs = bool(code.co_flags & 0x04)
    has_varkw = bool(code.co_flags & 0x08)
    posnames = names[:nargs]
    kwonlynames = names[nargs : nargs + nkwonly]
    i = nargs + nkwonly
    varargs_name = names[i] if has_varargs else None
    if has_varargs:
        i += 1
    varkw_name = names[i] if has_varkw else None

    bound: Dict[str, VariableTracker] = {}
    for name, value in zip(posnames, args):
        bound[name] = value
    extra = args[len(posnames) :]
    if extra and not has_varargs:
        raise Unsupported(
            f"{code.co_name}() got too many positional arguments (TypeError)", category=RAISES
        )
    if varargs_name is not None:  # (has_varargs)
        bound[varargs_name] = TupleVariable(list(extra))
    rest: Dict[str, VariableTracker] = {}
    for k, v in kwargs.items():
        if k in posnames[nposonly:] or k in kwonlynames:
            if k in bound:
                raise Unsupported(
                    f"{code.co_name}() got multiple values for {k!r} (TypeError)", category=RAISES
                )
            bound[k] = v
        elif has_varkw:
            rest[k] = v
        else:
            raise Unsupported(
                f"{code.co_name}() got an unexpected keyword {k!r} (TypeError)", category=RAISES
            )
    ndefaults = len(defaults)
    for idx, name in enumerate(posnames):
        if name not in bound:
            d = idx - (nargs - ndefaults)
            if d < 0:
                raise Unsupported(
                    f"{code.co_name}() missing argument {name!r} (TypeError)", category=RAISES
                )
            bound[name] = defaults[d]
    for name in kwonlynames:
        if name not in bound:
            if name not in kwdefaults:
                raise Unsupported(
                    f"{code.co_name}() missing keyword argument {name!r} (TypeError)",
                    category=RAISES,
                )
            bound[name] = kwdefaults[name]
    if varkw_name is not None:  # (has_varkw)
        bound[varkw_name] = DictVariable(rest)
    return bound


def root_locals(
    code, f_locals: Dict[str, Any], tx: Translator, real_cells: Optional[tuple] = None
) -> None:
    """Fill the root translator's locals from the real frame, each with its source;
    ``real_cells``: the frame's closure, when known."""
    # wrapped when first read (cells at once: their contents are read through the cell)
    bound = {
        name: wrap(tx, f_locals[name], LocalSource(name))
        if name in code.co_cellvars
        else LazyVariable(f_locals[name], LocalSource(name))
        for name in parameter_names(code)
        if name in f_locals
    }
    closure = [
        CellVariable(
            wrap(tx, f_locals[name], LocalSource(name)) if name in f_locals else None,
            external=True,
        )
        for name in code.co_freevars
    ]
    tx.setup_locals(bound, closure)
    for name in code.co_cellvars + code.co_freevars:
        tx.cells[name].root_name = name
    for name, real in zip(code.co_freevars, real_cells or ()):
        tx.cells[name].real_cell = real
        tx.root_cells[id(real)] = tx.cells[name]


__all__ = [
    "Translator",
    "bind_arguments",
    "root_locals",
    "ListVariable",
    "TupleVariable",
]
