"""Cells and free variables: closures created and called inside the capture."""

from __future__ import annotations

from jit_core.errors import RAISES, SIDE_EFFECT, Unsupported

from .registry import handler, versions


@handler("LOAD_DEREF")
def load_deref(tx, inst):
    cell = tx.cell(inst.argval)
    if cell.contents is None:
        raise Unsupported(
            f"free variable {inst.argval!r} is read before assignment (NameError)", category=RAISES
        )
    tx.push(cell.contents)


def _writable(tx, name: str, what: str):
    """The cell ``name`` refers to, checked for a write."""
    cell = tx.cell(name)
    if cell.external and (cell.root_name is None or cell.real_cell is None):
        # a cell of a function that exists outside the capture, or one of the captured
        # frame whose real cell is not known (a frame the hook handed over): functions
        # inlined later could not be told that they share it
        raise Unsupported(
            f"{what} of an enclosing function: a side effect not captured yet",
            category=SIDE_EFFECT,
        )
    if name in tx.code.co_freevars:
        tx.no_side_effect(what)
    if cell.external:
        # a cell of the captured frame that code outside it shares (its closure): the
        # new contents go into the real cell after the graph, at the return or the break
        cell.written = True
    return cell


@handler("STORE_DEREF")
def store_deref(tx, inst):
    cell = _writable(tx, inst.argval, f"assigning nonlocal {inst.argval!r}")
    cell.contents = tx.pop()


@handler("DELETE_DEREF")
def delete_deref(tx, inst):
    cell = _writable(tx, inst.argval, f"del of nonlocal {inst.argval!r}")
    cell.contents = None


@handler("LOAD_CLOSURE", versions=versions("3.8", "3.12"))  # 3.13: LOAD_FAST of the cell
def load_closure(tx, inst):
    tx.push(tx.cell(inst.argval))
