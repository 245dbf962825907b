"""Build the code object that replaces a captured frame.

The replacement keeps the original's signature, cell and free variables (a different set
of cells crashes CPython 3.8-3.10 inside the frame hook) and does three things: load the
graph's inputs through their sources, call the compiled graph, and rebuild the value the
original code would have returned.
"""

from __future__ import annotations

import dis
import functools
import io
import types
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
from bytecode import Bytecode, Instr

from .. import _compat
from ..errors import RECONSTRUCT, Unsupported
from ..sources import Source
from ..variables import (
    CellVariable,
    ConstantVariable,
    DictVariable,
    ListVariable,
    NestedFunctionVariable,
    SetVariable,
    TensorVariable,
    TupleVariable,
    VariableTracker,
)
from ..variables.functions import REBUILT_FUNCTIONS

OUT_LOCAL = "___jit_graph_out"
#: a closure rebuilt at a break, kept so that every place holding it gets the same object
CLOSURE_LOCAL = "___jit_closure{}"

_GEN_FLAGS = 0x20 | 0x80 | 0x100 | 0x200


def _make_function(code, f_globals, qualname, defaults, kwdefaults, annotations, closure):
    """What MAKE_FUNCTION makes, for a function the capture made and a break hands on."""
    fn = types.FunctionType(code, f_globals, code.co_name, defaults, closure)
    fn.__qualname__ = qualname
    if kwdefaults is not None:
        fn.__kwdefaults__ = kwdefaults
    if isinstance(annotations, tuple):  # 3.10+: name, value, name, value ...
        annotations = dict(zip(annotations[::2], annotations[1::2]))
    if annotations is not None:
        fn.__annotations__ = annotations
    REBUILT_FUNCTIONS.add(fn)
    return fn


class _Emitter:
    def __init__(self, code: types.CodeType, outputs: Dict[int, int]):
        self.code = code
        self.outputs = outputs  # id(node) -> index in the graph's output tuple
        self.instrs: List[Instr] = []
        #: set at a graph break, where the code stores the root frame's cells first
        #: (``store_cells``): only there is a function made during the capture rebuilt
        self.at_break = False
        #: id(NestedFunctionVariable) -> the local that holds the function once rebuilt
        self.closures: Dict[int, str] = {}

    def closure(self, v: NestedFunctionVariable) -> None:
        """A function made during the capture: made again, over the very cells of the
        frame (a cell of a function inlined in the capture has no real counterpart)."""
        made = self.closures.get(id(v))
        if made is not None:
            self.instrs += _compat.load_fast(made)
            return
        if not self.at_break:
            raise Unsupported(f"cannot rebuild the returned {v.describe()}", category=RECONSTRUCT)
        cells = v.closure or []
        for cell in cells:
            if not isinstance(cell, CellVariable) or cell.root_name is None:
                raise Unsupported(
                    f"cannot rebuild {v.describe()}: it holds a cell of a function inlined "
                    "in the capture",
                    category=RECONSTRUCT,
                )
        make = functools.partial(_make_function, v.code, v.f_globals, v.name)
        self.instrs += _compat.load_callable_const(make)
        for part in (v.defaults, v.kwdefaults, v.annotations):
            if part is None:
                self.instrs += _compat.load_const(None)
            else:
                self.value(part)
        if v.closure is None:
            self.instrs += _compat.load_const(None)
        else:
            self.instrs += [_compat.load_cell(c.root_name, self.code) for c in cells]
            self.instrs += _compat.build_tuple(len(cells))
        self.instrs += _compat.call(4)
        name = self.closures[id(v)] = CLOSURE_LOCAL.format(len(self.closures))
        self.instrs += _compat.dup_top() + _compat.store_fast(name)

    def value(self, v: VariableTracker) -> None:
        if isinstance(v, NestedFunctionVariable):
            self.closure(v)
            return
        if isinstance(v, TensorVariable):
            idx = self.outputs.get(id(v.node))
            if idx is None:
                raise Unsupported(
                    f"returned {v.describe()} is not an output of the graph", category=RECONSTRUCT
                )
            self.instrs += _compat.load_fast(OUT_LOCAL) + _compat.load_const(idx) + _compat.subscr()
            return
        if isinstance(v, ConstantVariable):
            unread = v.unread_source()
            if unread is not None:  # not guarded: the same value, from the frame
                self.instrs += unread.reconstruct(self.code)
                return
            if isinstance(v.value, np.ndarray):
                # a new array on every call, as the original code makes one: a shared
                # constant would carry a caller's in-place changes into the next call
                self.instrs += _compat.load_callable_const(functools.partial(np.copy, v.value))
                self.instrs += _compat.call(0)
                return
            self.instrs += _compat.load_const(v.value)
            return
        if isinstance(v, (ListVariable, DictVariable)) and v.source is not None:
            # an object from outside, unchanged: hand back the same object
            self.instrs += v.source.reconstruct(self.code)
            return
        if isinstance(v, TupleVariable):
            for item in v.items:
                self.value(item)
            self.instrs += _compat.build_tuple(len(v.items))
            return
        if isinstance(v, ListVariable):
            subclass = v.container_type is not list
            if subclass:  # paddle.Size: a list subclass made from a list
                self.instrs += _compat.load_callable_const(v.container_type)
            for item in v.items:
                self.value(item)
            self.instrs += _compat.build_list(len(v.items))
            if subclass:
                self.instrs += _compat.call(1)
            return
        if isinstance(v, SetVariable):
            # a new set on every call, as the original code makes one
            for item in v.value:
                self.instrs += _compat.load_const(item)
            self.instrs += _compat.build_set(len(v.value))
            return
        if isinstance(v, DictVariable):
            for k, item in v.items.items():
                self.instrs += _compat.load_const(k)
                self.value(item)
            self.instrs += _compat.build_map(len(v.items))
            return
        if v.source is not None:
            self.instrs += v.source.reconstruct(self.code)
            return
        if v.is_python_constant():
            self.instrs += _compat.load_const(v.as_python_constant())
            return
        raise Unsupported(
            f"cannot rebuild the returned {v.describe()} after the graph", category=RECONSTRUCT
        )


def store_cells(em: _Emitter, cells: Sequence[tuple]) -> List[Instr]:
    """Give the replacement frame's cells what the captured code left in them: ``cells``
    is ``(name, tracker or None when unbound, bound at entry)`` for each cell variable of
    the root frame. The code that follows (a call, the resume function, closures rebuilt
    by ``em``) reads the very cells. Every value is loaded before any cell changes, as its
    source may read one."""
    out: List[Instr] = []
    stores: List[Instr] = []
    for name, contents, bound_at_entry in cells:
        if contents is not None:
            em.instrs = []
            em.value(contents)
            out += em.instrs
            stores = _compat.store_deref(name, em.code) + stores
        elif bound_at_entry:  # an argument deleted by the captured code
            stores += _compat.delete_deref(name, em.code)
    em.instrs = []
    return out + stores


def collect_tensors(v: VariableTracker, out: List[TensorVariable]) -> None:
    """The tensors a returned structure holds, in order, each once."""
    if isinstance(v, TensorVariable):
        if all(t.node is not v.node for t in out):
            out.append(v)
    elif isinstance(v, (ListVariable, DictVariable)) and v.source is not None:
        return
    elif isinstance(v, (TupleVariable, ListVariable)):
        for item in v.items:
            collect_tensors(item, out)
    elif isinstance(v, DictVariable):
        for item in v.items.values():
            collect_tensors(item, out)


#: every code object built here: it keeps the original's file name, so the frame hook of
#: an enclosing optimize() must be told that it is ours and not user code to capture
GENERATED_CODES: weakref.WeakSet[types.CodeType] = weakref.WeakSet()


def run_graph(
    code: types.CodeType, compiled: Optional[Callable], input_sources: Sequence[Source]
) -> List[Any]:
    """The start of every replacement of ``code``: its prologue, then the compiled graph
    called on the inputs (loaded through their sources), its outputs kept in OUT_LOCAL."""
    instrs: List[Any] = list(_compat.prologue(code))
    if compiled is not None:
        instrs += _compat.load_callable_const(compiled)
        for src in input_sources:
            instrs += src.reconstruct(code)
        instrs += _compat.call(len(input_sources))
        instrs += _compat.store_fast(OUT_LOCAL)
    return instrs


def assemble(code: types.CodeType, instrs: List[Any]) -> types.CodeType:
    """A code object with ``code``'s signature, cells and names, running ``instrs``."""
    bc = Bytecode.from_code(code)
    bc.clear()
    bc.flags = bc.flags & ~_GEN_FLAGS
    line = code.co_firstlineno
    for ins in instrs:
        if isinstance(ins, Instr) and ins.lineno is None:
            ins.lineno = line
    bc.extend(instrs)
    new_code = bc.to_code()
    GENERATED_CODES.add(new_code)
    return new_code


def build_code(
    code: types.CodeType,
    compiled: Optional[Callable],
    input_sources: Sequence[Source],
    outputs: Sequence[TensorVariable],
    return_value: VariableTracker,
) -> types.CodeType:
    """The replacement for ``code``: run ``compiled`` on the inputs and return the result."""
    em = _Emitter(code, {id(t.node): i for i, t in enumerate(outputs)})
    instrs = run_graph(code, compiled, input_sources)
    em.value(return_value)
    instrs += em.instrs
    instrs += _compat.return_value()
    return assemble(code, instrs)


def disassemble(code: types.CodeType) -> str:
    buf = io.StringIO()
    dis.dis(code, file=buf)
    return buf.getvalue()
