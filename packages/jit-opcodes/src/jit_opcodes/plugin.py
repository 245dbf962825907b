"""Registers every handler of this package with jit-core (priority 0: plugins override)."""

from __future__ import annotations

from jit_core.hookspecs import hookimpl

from . import FAMILIES, load_families
from .registry import HANDLERS


@hookimpl
def jit_register_opcodes(register):
    load_families()
    for d in HANDLERS:
        register(d.opname, d.fn, d.versions, priority=0, break_as=d.break_as)


__all__ = ["FAMILIES", "jit_register_opcodes"]
