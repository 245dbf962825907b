"""Every difference between CPython 3.8 and 3.13 that jit-core itself cares about.

The executor, the codegen and the guards never look at ``sys.version_info``; they ask
this module. Opcode handlers declare their own versions in jit-opcodes instead.
"""

from __future__ import annotations

import dis
import functools
import gc
import linecache
import sys
import types
import weakref
from typing import Any, Dict, Iterable, List, Optional, Tuple

from bytecode import CellVar, FreeVar, Instr

PY_VERSION = sys.version_info[:2]
VERSION_STR = f"{PY_VERSION[0]}.{PY_VERSION[1]}"

#: 3.11 added the zero-cost exception tables, PRECALL/CALL and the NULL that precedes a callable.
CALL_NEEDS_NULL = PY_VERSION >= (3, 11)
#: 3.11 only: every CALL is preceded by PRECALL.
HAS_PRECALL = PY_VERSION == (3, 11)
#: 3.12 packs the "push NULL / method" flag into LOAD_ATTR's argument.
LOAD_ATTR_HAS_FLAG = PY_VERSION >= (3, 12)
#: 3.11+: LOAD_GLOBAL carries a "push NULL" flag.
LOAD_GLOBAL_HAS_FLAG = PY_VERSION >= (3, 11)
#: 3.11+ code objects start with MAKE_CELL / COPY_FREE_VARS / RESUME.
HAS_PROLOGUE = PY_VERSION >= (3, 11)
#: 3.12+: FOR_ITER jumps to END_FOR, which pops the iterator and one more slot (3.13: END_FOR
#: pops the slot, the POP_TOP after it the iterator).
FOR_ITER_JUMPS_TO_END_FOR = PY_VERSION >= (3, 12)
#: the instructions at FOR_ITER's target that an exhausted iterator skips in CPython:
#: 3.12 goes on after END_FOR, 3.13 after END_FOR and its POP_TOP
FOR_ITER_EXIT_SKIPS = 2 if PY_VERSION >= (3, 13) else 1 if PY_VERSION >= (3, 12) else 0
#: 3.13 puts the NULL (or ``self``) *after* the callable: ``callable, self_or_null, args``;
#: 3.11 and 3.12 put it before: ``NULL, callable, args`` or ``method, self, args``.
NULL_AFTER_CALLABLE = PY_VERSION >= (3, 13)
#: 3.13: conditional jumps take an exact bool; the compiler puts TO_BOOL before them.
JUMPS_NEED_BOOL = PY_VERSION >= (3, 13)
#: 3.13: LOAD_CLOSURE is a pseudo-instruction, assembled as LOAD_FAST of the cell.
LOAD_CLOSURE_IS_LOAD_FAST = PY_VERSION >= (3, 13)


#: 3.11+: Paddle's C shim never hands a frame whose code has an exception table (any
#: ``try``, ``with``, or a 3.12 inlined comprehension) to the hook, so ``optimize()`` enters
#: such a target code itself (see ``CompileContext.run``).
HOOK_SKIPS_EXCEPTION_TABLES = PY_VERSION >= (3, 11)
#: 3.8-3.10: Paddle's C shim starts a replacement code in a new frame whose local slots
#: it fills *by position* from the original frame: ``co_nlocals`` of the original's slots,
#: then its cells and free variables after the replacement's own locals. 3.11+ maps them
#: by name.
SHIM_COPIES_LOCALS_BY_POSITION = PY_VERSION < (3, 11)


if PY_VERSION == (3, 12):
    import ctypes

    # ``PyDictObject.ma_values``, the struct's last field: set for a split (key-sharing) dict
    _MA_VALUES_OFFSET = dict.__basicsize__ - ctypes.sizeof(ctypes.c_void_p)


def attribute_reads_specialized(instance_dict: dict) -> bool:
    """Whether ``obj.name``, for a name in ``obj``'s materialized instance dict, runs as a
    specialized attribute read though the class defines ``__getattr__`` (Paddle's
    ``Layer`` does). Where it does not, the read takes the slot's generic path (60-100 ns
    on these machines) and ``vars(obj)['name']`` (25-40 ns) is faster.

    - 3.8-3.10 specialize nothing; 3.11 nothing on a class whose ``tp_getattro`` is not
      the generic one.
    - 3.12 specializes it, except on a split dict (``SPEC_FAIL_ATTR_SPLIT_DICT``): a
      layer of at most 30 attributes set in its class's usual order has one, once
      ``__dict__`` is read (``Layer.__setattr__`` reads it).
    - 3.13 specializes it always: the values stay inline when the dict is materialized.
    """
    if PY_VERSION >= (3, 13):
        return True
    if PY_VERSION == (3, 12):
        return ctypes.c_void_p.from_address(id(instance_dict) + _MA_VALUES_OFFSET).value is None
    return False


def hook_skips(code) -> bool:
    """Whether Paddle's frame hook never sees frames of ``code`` (generators aside)."""
    return HOOK_SKIPS_EXCEPTION_TABLES and bool(getattr(code, "co_exceptiontable", b""))


class EntryFrame:
    """What the hook reads of a frame, made by hand for a call the hook cannot see."""

    __slots__ = ("f_code", "f_locals", "f_globals", "f_closure")

    def __init__(self, code, f_locals: dict, f_globals: dict, closure: Optional[tuple] = None):
        self.f_code = code
        self.f_locals = f_locals
        self.f_globals = f_globals
        #: the function's closure cells (a real frame does not show them)
        self.f_closure = closure


#: 3.11 added ``co_qualname``; before, only the function object knows its qualified name.
CODE_HAS_QUALNAME = PY_VERSION >= (3, 11)
_qualnames: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def code_qualnames(codes: Iterable[types.CodeType]) -> Dict[types.CodeType, str]:
    """The qualified name of each code object (``Net.forward``, ``f.<locals>.g``).

    3.11+ reads ``co_qualname``. Before, the name is the ``__qualname__`` of a function
    that runs the code, found once among the code's referrers (one pass over the heap
    for all the codes not seen yet, then remembered); ``co_name`` when none is alive.
    """
    codes = list(codes)
    if CODE_HAS_QUALNAME:
        # 3.11+ only: mypy checks against 3.10, where CodeType has no co_qualname
        return {c: c.co_qualname for c in codes}  # type: ignore[attr-defined]
    out = {}
    missing = []
    for c in codes:
        name = _qualnames.get(c)
        if name is None:
            missing.append(c)
        else:
            out[c] = name
    if missing:
        wanted = set(map(id, missing))
        found: Dict[int, str] = {}
        for r in gc.get_referrers(*missing):
            if isinstance(r, types.FunctionType) and id(r.__code__) in wanted:
                # prefer a function named like its code: a functools.wraps wrapper
                # carries the qualified name of what it wraps
                if id(r.__code__) not in found or r.__name__ == r.__code__.co_name:
                    found[id(r.__code__)] = r.__qualname__
        for c in missing:
            name = found.get(id(c))
            if name is not None:
                _qualnames[c] = name
            out[c] = name if name is not None else c.co_name
    return out


def code_qualname(code: types.CodeType, func: Optional[types.FunctionType] = None) -> str:
    """The qualified name of one code object; ``func``, a function that runs it, saves
    the search on 3.8-3.10."""
    if CODE_HAS_QUALNAME:
        return code.co_qualname  # type: ignore[attr-defined]  # 3.11+; mypy checks 3.10
    if func is not None and getattr(func, "__code__", None) is code:
        name = _qualnames.get(code)
        if name is None:
            name = _qualnames[code] = func.__qualname__
        return name
    return code_qualnames([code])[code]


def instructions(code) -> List[dis.Instruction]:
    """The instructions of ``code`` without 3.11+ CACHE entries, jump targets as offsets."""
    return list(_instructions(code))


# a capture with breaks reads one code's instructions a dozen times (the resume layout of
# every break); ``dis`` was a seventh of capture time. Bounded: it holds the codes
@functools.lru_cache(maxsize=128)
def _instructions(code) -> Tuple[dis.Instruction, ...]:
    return tuple(dis.get_instructions(code))


#: 3.13 made ``Instruction.starts_line`` a bool and put the line in ``line_number``.
_STARTS_LINE_IS_FLAG = PY_VERSION >= (3, 13)


def instruction_line(inst: dis.Instruction) -> Optional[int]:
    """The source line an instruction starts, or None."""
    if _STARTS_LINE_IS_FLAG:
        # 3.13+ only: mypy checks against 3.10, whose Instruction has no line_number
        return inst.line_number if inst.starts_line else None  # type: ignore[attr-defined]
    return inst.starts_line


def line_of(code: types.CodeType, offset: int) -> int:
    """The source line of the instruction at ``offset`` of ``code``."""
    line = code.co_firstlineno
    for start, lineno in dis.findlinestarts(code):
        if start > offset:
            break
        if lineno is not None:  # (3.13: instructions with no line)
            line = lineno
    return line


def frame_locals(frame) -> dict:
    """The frame's locals as a dict: arguments, cell contents and free variables by name.

    On 3.8-3.10 the hook gets a real frame; on 3.11+ Paddle hands a proxy. Both expose
    ``f_locals`` as a mapping filled before the first instruction runs.
    """
    return frame.f_locals


# --------------------------------------------------------------------- bytecode emission


def _deref_arg(name: str, code) -> Any:
    return CellVar(name) if name in code.co_cellvars else FreeVar(name)


def load_local(name: str, code) -> Instr:
    """Load a local of the *original* code, through its cell when it has one."""
    if name in code.co_cellvars or name in code.co_freevars:
        return Instr("LOAD_DEREF", _deref_arg(name, code))
    return Instr("LOAD_FAST", name)


def load_global(name: str, push_null: bool = False) -> List[Instr]:
    if LOAD_GLOBAL_HAS_FLAG:
        return [Instr("LOAD_GLOBAL", (push_null, name))]
    return [Instr("LOAD_GLOBAL", name)]


def load_attr(name: str) -> List[Instr]:
    if LOAD_ATTR_HAS_FLAG:
        return [Instr("LOAD_ATTR", (False, name))]
    return [Instr("LOAD_ATTR", name)]


def load_callable_const(obj: Any) -> List[Instr]:
    """Push ``obj`` (any object, kept in co_consts) so that ``call(n)`` can call it."""
    if NULL_AFTER_CALLABLE:
        return [Instr("LOAD_CONST", obj), Instr("PUSH_NULL")]
    if CALL_NEEDS_NULL:
        return [Instr("PUSH_NULL"), Instr("LOAD_CONST", obj)]
    return [Instr("LOAD_CONST", obj)]


def call(nargs: int) -> List[Instr]:
    """Call the callable pushed by ``load_callable_const`` with ``nargs`` positional args."""
    if HAS_PRECALL:
        return [Instr("PRECALL", nargs), Instr("CALL", nargs)]
    if CALL_NEEDS_NULL:
        return [Instr("CALL", nargs)]
    return [Instr("CALL_FUNCTION", nargs)]


#: 3.13's instructions that access two locals, packed 4 bits each into the argument, and
#: the two instructions each stands for
_LOCAL_PAIRS = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
}


def to_code(bc) -> types.CodeType:
    """``bc.to_code()``, with 3.13's pairs of local accesses taken apart first. Code
    entered in the middle or rebuilt has its locals in another order, and a pair whose
    local lands at index 16 is miscompiled by the bytecode library (it checks ``> 16``
    where the 4-bit field holds 0 to 15): the instruction reads another local."""
    if PY_VERSION >= (3, 13):
        items = []
        for item in bc:
            # labels, line numbers and try markers have no name
            pair = _LOCAL_PAIRS.get(getattr(item, "name", ""))
            if pair is None:
                items.append(item)
                continue
            for opname, name in zip(pair, item.arg):
                single = item.copy()
                single.set(opname, name)
                items.append(single)
        bc.clear()
        bc.extend(items)
    return bc.to_code()


def replacement_code(bc, code: types.CodeType) -> types.CodeType:
    """``to_code(bc)`` for a code that Paddle's shim runs in place of ``code``'s frame.

    Where the shim copies locals by position, the replacement must keep every local slot
    of ``code`` at its index: one with fewer local slots than the original was written
    past its end (a heap corruption on 3.8-3.10 for frames with many locals), and one with
    its arguments in other slots reads the wrong values. The bytecode library numbers a
    code's locals from ``argnames`` on, so seeding those with all of ``code``'s locals
    keeps them in place; the new code's own locals follow."""
    if SHIM_COPIES_LOCALS_BY_POSITION:
        argnames = bc.argnames
        bc.argnames = list(code.co_varnames)
        try:
            new_code = to_code(bc)
        finally:
            bc.argnames = argnames
        if new_code.co_varnames[: code.co_nlocals] != code.co_varnames or (
            new_code.co_cellvars,
            new_code.co_freevars,
        ) != (code.co_cellvars, code.co_freevars):
            raise RuntimeError(
                f"the replacement for {code.co_name} moved the frame's local slots: "
                f"{new_code.co_varnames} for {code.co_varnames}"
            )
        return new_code
    return to_code(bc)


def subscr() -> List[Instr]:
    return [Instr("BINARY_SUBSCR")]


def prologue(code) -> List[Instr]:
    """What a 3.11+ function must run first: copy free variables, make cells, RESUME.

    The transformed code keeps the original's cells and free variables unchanged (on
    3.8-3.10 a replacement with different cellvars segfaults), so it needs the same prologue.
    """
    if not HAS_PROLOGUE:
        return []
    out: List[Instr] = []
    if code.co_freevars:
        out.append(Instr("COPY_FREE_VARS", len(code.co_freevars)))
    for name in code.co_cellvars:
        out.append(Instr("MAKE_CELL", CellVar(name)))
    out.append(Instr("RESUME", 0))
    return out


def entry_prologue(code) -> List[Instr]:
    """The prologue of a function that enters ``code`` in the middle (a resume function,
    a loop body). Its cells are the frame's own, passed in as free variables after
    ``code``'s cell variables (see ``load_closure``): so the free variables copied, no
    cell made, and RESUME."""
    if not HAS_PROLOGUE:
        return []
    nfree = len(code.co_cellvars) + len(code.co_freevars)
    out = [Instr("COPY_FREE_VARS", nfree)] if nfree else []
    return out + [Instr("RESUME", 0)]


def load_closure(code) -> List[Instr]:
    """Push the tuple of ``code``'s cells, its cell variables' then its free variables':
    the closure a function entering the same code from elsewhere (a resume function, a
    loop body) needs, so that it shares every cell with this frame and the closures that
    this frame made (3.8-3.10 index cells and free variables as one list, 3.11+ the
    frame's slots: the bytecode library resolves both)."""
    out = [load_cell(name, code) for name in code.co_cellvars + code.co_freevars]
    return out + build_tuple(len(out))


def load_cell(name: str, code) -> Instr:
    """Push the cell object (not its contents) of a cell or free variable of ``code``."""
    if LOAD_CLOSURE_IS_LOAD_FAST:
        return Instr("LOAD_FAST", _deref_arg(name, code))
    return Instr("LOAD_CLOSURE", _deref_arg(name, code))


def store_deref(name: str, code) -> List[Instr]:
    return [Instr("STORE_DEREF", _deref_arg(name, code))]


def delete_deref(name: str, code) -> List[Instr]:
    return [Instr("DELETE_DEREF", _deref_arg(name, code))]


def build_tuple(n: int) -> List[Instr]:
    return [Instr("BUILD_TUPLE", n)]


def build_list(n: int) -> List[Instr]:
    return [Instr("BUILD_LIST", n)]


def build_set(n: int) -> List[Instr]:
    return [Instr("BUILD_SET", n)]


def build_map(n: int) -> List[Instr]:
    return [Instr("BUILD_MAP", n)]


def return_value() -> List[Instr]:
    return [Instr("RETURN_VALUE")]


def store_fast(name: str) -> List[Instr]:
    return [Instr("STORE_FAST", name)]


def load_fast(name: str) -> List[Instr]:
    return [Instr("LOAD_FAST", name)]


def load_const(value: Any) -> List[Instr]:
    # slices are unhashable before 3.12, and a code object hashes its constants (the
    # frame hook keeps generated codes in a weak set): such values are built instead
    if isinstance(value, slice):
        parts = (value.start, value.stop, value.step)
        return [i for p in parts for i in load_const(p)] + [Instr("BUILD_SLICE", 3)]
    if type(value) is tuple and not _hashable(value):
        return [i for item in value for i in load_const(item)] + build_tuple(len(value))
    return [Instr("LOAD_CONST", value)]


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


# --------------------------------------------------------------------- graph breaks

#: 3.11+: try blocks are ranges of an exception table; before, SETUP_* instructions
HAS_EXCEPTION_TABLE = PY_VERSION >= (3, 11)
#: 3.8 enters a ``finally`` body on the normal path with BEGIN_FINALLY
HAS_BEGIN_FINALLY = PY_VERSION < (3, 9)
_SETUP_OPS = ("SETUP_FINALLY", "SETUP_WITH", "SETUP_ASYNC_WITH")


def exception_table(code) -> List[Any]:
    """3.11+ only: the entries of ``code``'s exception table, each with ``start``, ``end``
    (excluded), ``target``, ``depth`` and ``lasti``."""
    # dis has no public reader of the table before 3.13, and typeshed no stub of this one
    return dis._parse_exception_table(code)  # type: ignore[attr-defined]


def protected_ranges(code) -> List[tuple]:
    """``(start, end)`` offsets (end excluded) of the instructions inside a try or with
    block: a graph cannot break there, since the resumed code would lose the handler."""
    if HAS_EXCEPTION_TABLE:
        return [(e.start, e.end) for e in exception_table(code)]
    return [
        (inst.offset, inst.argval)
        for inst in dis.get_instructions(code)
        if inst.opname in _SETUP_OPS
    ]


def exception_handler(code, offset: int) -> Optional[Tuple[int, int, bool]]:
    """3.11+: ``(handler offset, stack depth, push lasti)`` of the exception-table entry
    that covers the instruction at ``offset``, or None (an exception leaves the code)."""
    for e in exception_table(code):
        if e.start <= offset < e.end:
            return e.target, e.depth, e.lasti
    return None


def finally_bodies(code) -> List[tuple]:
    """``(start, end)`` offsets (end excluded) of the ``finally`` bodies that the normal
    path enters on 3.8: BEGIN_FINALLY pushes a NULL that the body's END_FINALLY pops, so
    code entered in between (a resume function) would not hold it. 3.9+ copy the body
    onto the normal path instead."""
    if not HAS_BEGIN_FINALLY:
        return []
    insts = list(dis.get_instructions(code))
    index = {inst.offset: i for i, inst in enumerate(insts)}
    out = []
    for inst in insts:
        if inst.opname != "SETUP_FINALLY":
            continue
        t = index.get(inst.argval)
        if t is None or t == 0 or insts[t - 1].opname != "BEGIN_FINALLY":
            continue
        depth = 0
        for k in range(t, len(insts)):
            op = insts[k].opname
            if op in _SETUP_OPS:
                depth += 1
            elif op == "END_FINALLY":
                if depth == 0:
                    out.append((insts[t].offset, insts[k].offset + 2))
                    break
                depth -= 1
    return out


def pop_jump_forward(if_true: bool, label) -> List[Instr]:
    """Pop the top and jump forward to ``label`` if its truth is ``if_true`` (3.13 first
    turns it into a bool: its jumps read any other object as false)."""
    if PY_VERSION == (3, 11):
        return [
            Instr("POP_JUMP_FORWARD_IF_TRUE" if if_true else "POP_JUMP_FORWARD_IF_FALSE", label)
        ]
    jump = Instr("POP_JUMP_IF_TRUE" if if_true else "POP_JUMP_IF_FALSE", label)
    return [Instr("TO_BOOL"), jump] if JUMPS_NEED_BOOL else [jump]


def dup_top() -> List[Instr]:
    return [Instr("COPY", 1)] if PY_VERSION >= (3, 11) else [Instr("DUP_TOP")]


def pop_top() -> List[Instr]:
    return [Instr("POP_TOP")]


def jump_forward(label) -> List[Instr]:
    return [Instr("JUMP_FORWARD", label)]


def exec_source(
    source: str, filename: str, name: str, namespace: Dict[str, Any], shown: str = ""
) -> Any:
    """Run generated ``source`` (registered in ``linecache`` under ``filename``, so that
    tracebacks show its lines and ``inspect``/``paddle.jit.to_static`` can read it) in
    ``namespace`` and return the object it defines as ``name``. ``shown``, the text
    registered instead, has the same lines with comments added.

    The ``linecache`` entry lives as long as that object: every capture, recompile and
    ``reset()`` generates new guards and graphs, and entries that outlived them would grow
    the process without bound."""
    text = shown or source
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    obj = namespace[name]
    weakref.finalize(obj, linecache.cache.pop, filename, None)
    return obj
