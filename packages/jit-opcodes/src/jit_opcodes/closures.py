"""Cells and free variables: closures created and called inside the capture."""

from __future__ import annotations

from jit_core.errors import RAISES, SIDE_EFFECT, Unsupported

from .registry import handler


@handler("LOAD_DEREF")
def load_deref(tx, inst):
    cell = tx.cell(inst.argval)
    if cell.contents is None:
        raise Unsupported(
            f"free variable {inst.argval!r} is read before assignment (NameError)", category=RAISES
        )
    tx.push(cell.contents)


@handler("STORE_DEREF")
def store_deref(tx, inst):
    cell = tx.cell(inst.argval)
    if cell.external:
        raise Unsupported(
            f"nonlocal {inst.argval!r} of an enclosing function is assigned: "
            "a side effect not captured yet",
            category=SIDE_EFFECT,
        )
    if inst.argval in tx.code.co_freevars:
        tx.no_side_effect(f"assigning nonlocal {inst.argval!r}")
    cell.contents = tx.pop()


@handler("DELETE_DEREF")
def delete_deref(tx, inst):
    cell = tx.cell(inst.argval)
    if cell.external:
        raise Unsupported(
            f"del of nonlocal {inst.argval!r}: a side effect not captured yet", category=SIDE_EFFECT
        )
    if inst.argval in tx.code.co_freevars:
        tx.no_side_effect(f"del of nonlocal {inst.argval!r}")
    cell.contents = None


@handler("LOAD_CLOSURE")
def load_closure(tx, inst):
    tx.push(tx.cell(inst.argval))
