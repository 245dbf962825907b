"""Build the code object that replaces a captured frame.

The replacement keeps the original's signature, cell and free variables (a different set
of cells crashes CPython 3.8-3.10 inside the frame hook) and does three things: load the
graph's inputs through their sources, call the compiled graph, and rebuild the value the
original code would have returned.
"""

from __future__ import annotations

import dis
import io
import types
import weakref
from typing import Any, Callable, List, NamedTuple, Optional, Sequence

from bytecode import Bytecode, Instr

from ..bytecode import compat
from ..bytecode.opcode_info import GENERATOR_FLAGS
from ..sources import LocalSource, Source
from ..variables import TensorVariable, VariableTracker
from .pycodegen import OUT_LOCAL, PyCodegen, collect, store_cells


def collect_return(
    code: types.CodeType,
    value: VariableTracker,
    inputs_as_outputs: bool = False,
    cells: Sequence[tuple] = (),
    containers: Sequence[VariableTracker] = (),
) -> PyCodegen:
    """The return's code, collected: ``.tensors`` are the graph-made tensors a returned
    value (and what goes into ``cells``) holds, in order, each once: the graph's outputs
    (inputs and parameters are loaded from where they came from, unless
    ``inputs_as_outputs``); ``.shared_objects()`` what ``build_code`` keeps in locals.
    ``containers``: the outside lists and dicts the capture mutated, written back."""
    return collect(code, lambda cg: _emit_return(cg, value, cells, containers), inputs_as_outputs)


def _emit_return(
    cg: PyCodegen,
    value: VariableTracker,
    cells: Sequence[tuple],
    containers: Sequence[VariableTracker] = (),
) -> None:
    cg(value)
    # (after the value: it may be loaded from a cell the frame read before assigning it,
    # or from an item of a list before the list changes)
    store_cells(cg, cells, containers)


#: every code object built here: it keeps the original's file name, so the frame hook of
#: an enclosing optimize() must be told that it is ours and not user code to capture
GENERATED_CODES: weakref.WeakSet[types.CodeType] = weakref.WeakSet()


class GraphCall(NamedTuple):
    """A replacement that does nothing but ``return compiled(<arguments>)[output]``: the
    graph's inputs are the frame's own positional arguments (their indices in ``args``),
    and the frame returns one of its outputs as it is."""

    compiled: Callable
    args: tuple
    output: int


#: the replacements ``build_code`` found to be a ``GraphCall``: a call that passes their
#: guards may run the graph without entering them (``runtime.fast_dispatch``)
GRAPH_CALLS: weakref.WeakKeyDictionary[types.CodeType, GraphCall] = weakref.WeakKeyDictionary()


def _graph_call(
    code: types.CodeType,
    compiled: Optional[Callable],
    input_sources: Sequence[Source],
    returned: List[Any],
    n_outputs: int,
) -> Optional[GraphCall]:
    """What ``build_code``'s replacement of ``code`` does, as a ``GraphCall``, when that
    is all it does; ``returned``: the instructions that build its return value."""
    if compiled is None or code.co_cellvars or code.co_freevars:
        return None
    params = code.co_varnames[: code.co_argcount]
    args = []
    for src in input_sources:
        if type(src) is not LocalSource or src.local_name not in params:
            return None
        args.append(params.index(src.local_name))
    if len(set(args)) != len(args) or len(returned) != 3:
        return None
    # ``OUT_LOCAL[i]``: the output's index is the constant loaded
    i = getattr(returned[1], "arg", None)
    if type(i) is not int or not 0 <= i < n_outputs:
        return None
    expected = compat.load_fast(OUT_LOCAL) + compat.load_const(i) + compat.subscr()
    return GraphCall(compiled, tuple(args), i) if _same_instrs(returned, expected) else None


def _same_instrs(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(
        isinstance(x, Instr) and isinstance(y, Instr) and (x.name, x.arg) == (y.name, y.arg)
        for x, y in zip(a, b)
    )


def run_graph(
    code: types.CodeType, compiled: Optional[Callable], input_sources: Sequence[Source]
) -> List[Any]:
    """The start of every replacement of ``code``: its prologue, then the compiled graph
    called on the inputs (loaded through their sources), its outputs kept in OUT_LOCAL."""
    instrs: List[Any] = list(compat.prologue(code))
    if compiled is not None:
        instrs += compat.load_callable_const(compiled)
        for src in input_sources:
            instrs += src.reconstruct(code)
        instrs += compat.call(len(input_sources))
        instrs += compat.store_fast(OUT_LOCAL)
    return instrs


def assemble(code: types.CodeType, instrs: List[Any]) -> types.CodeType:
    """A code object with ``code``'s signature, cells and names, running ``instrs``."""
    bc = Bytecode.from_code(code)
    bc.clear()
    bc.flags = bc.flags & ~GENERATOR_FLAGS
    line = code.co_firstlineno
    for ins in instrs:
        if isinstance(ins, Instr) and ins.lineno is None:
            ins.lineno = line
    bc.extend(instrs)
    new_code = compat.replacement_code(bc, code)
    GENERATED_CODES.add(new_code)
    return new_code


def build_code(
    code: types.CodeType,
    compiled: Optional[Callable],
    input_sources: Sequence[Source],
    outputs: Sequence[TensorVariable],
    return_value: VariableTracker,
    cells: Sequence[tuple],
    shared: Sequence[int],
    containers: Sequence[VariableTracker] = (),
) -> types.CodeType:
    """The replacement for ``code``: run ``compiled`` on the inputs, store what the
    capture assigned into the cells of the frame's closure (``cells``) and the new
    contents of the outside containers it mutated (``containers``), as
    ``pycodegen.store_cells`` takes them, and return the result; ``shared`` as
    ``collect_return`` found it."""
    cg = PyCodegen(code, {id(t.node): i for i, t in enumerate(outputs)}, shared)
    instrs = run_graph(code, compiled, input_sources)
    _emit_return(cg, return_value, cells, containers)
    returned = cg.instrs
    instrs += returned
    instrs += compat.return_value()
    new_code = assemble(code, instrs)
    call = _graph_call(code, compiled, input_sources, returned, len(outputs))
    if call is not None:
        GRAPH_CALLS[new_code] = call
    return new_code


def disassemble(code: types.CodeType) -> str:
    buf = io.StringIO()
    dis.dis(code, file=buf)
    return buf.getvalue()
