"""The bytecode that rebuilds the frame's values after a graph ran.

Every value tracker says how it is rebuilt (``VariableTracker.reconstruct(cg)``): from
where it came from, as a constant, as a graph output, or from its parts. ``PyCodegen``
is what they write into. It runs twice over the same values: first collecting, to learn
which graph-made tensors must be graph outputs and which objects are held in more
than one place, then emitting, with the outputs known.
"""

from __future__ import annotations

import types
from typing import Any, Callable, Dict, List, Optional, Sequence

from bytecode import Instr

from ..bytecode import compat
from ..errors import RECONSTRUCT, Unsupported

OUT_LOCAL = "___jit_graph_out"
SHARED_LOCAL = "___jit_shared_{}"
#: the new contents of an outside container the capture mutated, until it is written back
WRITTEN_LOCAL = "___jit_written_{}"


class PyCodegen:
    """Collects (``outputs=None``) or emits the instructions that rebuild values.

    ``outputs`` maps ``id(node)`` of each graph output to its index in the graph's
    output tuple, which the generated code keeps in ``OUT_LOCAL``."""

    def __init__(
        self,
        code: types.CodeType,
        outputs: Optional[Dict[int, int]] = None,
        shared: Sequence[int] = (),
        inputs_as_outputs: bool = False,
        at_break: bool = False,
    ):
        self.code = code
        self.outputs = outputs
        #: at a graph break, whose code gives the frame's cells what the capture left
        #: in them first (``store_cells``): only there can a function made during
        #: the capture be made again over them
        self.at_break = at_break
        #: ``capture()``: the graph returns what the function returns, its inputs too
        self.inputs_as_outputs = inputs_as_outputs
        self.instrs: List[Any] = []
        #: collecting: the graph-made tensors the values hold, in order, each once
        self.tensors: List[Any] = []
        self._seen_nodes: set = set()
        #: collecting: how often each object made during the capture is rebuilt
        self.uses: Dict[int, int] = {}
        #: emitting: objects rebuilt more than once -> the local that keeps the first
        self._shared: Dict[int, Optional[str]] = {cid: None for cid in shared}
        self._building: set = set()

    @property
    def collecting(self) -> bool:
        return self.outputs is None

    def __call__(self, v) -> None:
        v.reconstruct(self)

    def extend(self, instrs: Sequence[Any]) -> None:
        self.instrs.extend(instrs)

    def tensor(self, t) -> None:
        """Load the tensor tracker ``t``: an input or a parameter from where it came from
        (the very object, as eager hands it back: an in-place update after a break
        changes what eager would change), a tensor the graph made from its outputs."""
        if t.source is not None and not self.inputs_as_outputs:
            self.extend(t.source.reconstruct(self.code))
        else:
            self.graph_output(t)

    def graph_output(self, t) -> None:
        """Load the graph output that holds the tensor tracker ``t``."""
        if self.outputs is None:  # collecting
            if id(t.node) not in self._seen_nodes:
                self._seen_nodes.add(id(t.node))
                self.tensors.append(t)
            return
        idx = self.outputs.get(id(t.node))
        if idx is None:
            raise Unsupported(f"{t.describe()} is not an output of the graph", category=RECONSTRUCT)
        self.extend(compat.load_fast(OUT_LOCAL) + compat.load_const(idx) + compat.subscr())

    def new_object(self, v, build: Callable[[], None]) -> None:
        """Rebuild ``v``, a mutable object made during the capture (a list, a dict, a
        set, a function), with ``build``.

        The eager frame holds one object wherever it is held (two locals, a list inside
        a returned tuple...): it is built once, and every other place loads the same
        object, so a later mutation shows through all of them."""
        key = id(v)
        if key in self._building:
            raise Unsupported(f"{v.describe()} contains itself", category=RECONSTRUCT)
        if self.collecting:
            self.uses[key] = self.uses.get(key, 0) + 1
            if self.uses[key] > 1:
                return
        elif (kept := self._shared.get(key)) is not None:
            self.extend(compat.load_fast(kept))
            return
        self._building.add(key)
        try:
            build()
        finally:
            self._building.discard(key)
        if not self.collecting and key in self._shared:
            name = SHARED_LOCAL.format(len([n for n in self._shared.values() if n]))
            self._shared[key] = name
            self.extend(compat.dup_top() + compat.store_fast(name))

    def container(self, v, build: Callable[[], None]) -> None:
        """A list or a dict: one from outside the frame (unchanged, since mutating one
        breaks the graph) is the same object, from its source; one made in the frame is
        built (once, ``new_object``)."""
        if v.source is not None:
            self.extend(v.source.reconstruct(self.code))
        else:
            self.new_object(v, build)

    def release_locals(self, parameters: Sequence[str]) -> None:
        """Drop what the frame's own locals hold once every value has been rebuilt onto
        the stack: the graph's outputs (``OUT_LOCAL``), the objects kept for sharing,
        and the frame's parameters (its cells aside: closures share them). The rest of
        the frame runs in a resume function that holds what it needs itself: a value
        kept here would stay alive until that function returns, where eager code that
        assigns the local again frees it."""
        cells = set(self.code.co_cellvars) | set(self.code.co_freevars)
        names = [n for n in parameters if n not in cells]
        names += [OUT_LOCAL] + [n for n in self._shared.values() if n]
        for name in names:
            # (a store, not DELETE_FAST: OUT_LOCAL is unbound where no graph ran)
            self.extend(compat.load_const(None) + compat.store_fast(name))

    def shared_objects(self) -> List[int]:
        """Collecting: the objects held in more than one place."""
        return [k for k, n in self.uses.items() if n > 1]


def store_cells(cg: PyCodegen, cells: Sequence[tuple], containers: Sequence[Any] = ()) -> None:
    """Write back what the captured code changed outside the frame: give the frame's cells
    what the capture left in them (``cells`` holds ``(name, tracker or None when unbound,
    bound at entry)``), and the lists and dicts from outside that it mutated their new
    contents (``containers``: their trackers, ``executor.side_effects``). Every value is
    loaded before anything changes, as the source of one may read a cell or an item of a
    container that changes."""
    for i, c in enumerate(containers):
        c.build_new(cg)
        cg.extend(compat.store_fast(WRITTEN_LOCAL.format(i)))
    stores: List[Any] = []
    for name, contents, bound_at_entry in cells:
        if contents is not None:
            cg(contents)
            stores = compat.store_deref(name, cg.code) + stores
        elif bound_at_entry:  # deleted by the captured code
            stores += compat.delete_deref(name, cg.code)
    # the containers first: their sources may go through a cell that changes
    for i, c in enumerate(containers):
        local = WRITTEN_LOCAL.format(i)
        cg.extend(compat.load_callable_const(c.written_back_by()))
        pinned = getattr(c, "pinned", None)
        if pinned is not None:  # the object the guards held it to, this very call
            cg.extend(compat.load_const(pinned))
        else:
            cg.extend(c.source.reconstruct(cg.code))
        cg.extend(compat.load_fast(local) + compat.call(2) + compat.pop_top())
        # the copy must not keep the items alive while the rest of the frame runs
        cg.extend([Instr("DELETE_FAST", local)])
    cg.extend(stores)


def collect(
    code: types.CodeType,
    emit: Callable[[PyCodegen], None],
    inputs_as_outputs: bool = False,
    at_break: bool = False,
) -> PyCodegen:
    """Run ``emit`` collecting: the returned codegen lists the tensors and shared
    objects it met."""
    cg = PyCodegen(code, inputs_as_outputs=inputs_as_outputs, at_break=at_break)
    emit(cg)
    return cg


__all__ = ["OUT_LOCAL", "PyCodegen", "collect", "store_cells"]
