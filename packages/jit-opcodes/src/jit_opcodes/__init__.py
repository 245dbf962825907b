"""jit_opcodes: the bytecode handlers of jit-core, one module per family.

Each handler is ``fn(tx, inst)``: ``tx`` is the symbolic executor (a
``jit_core.executor.translator.Translator``), ``inst`` a ``dis.Instruction``. Handlers
declare the Python versions they serve with ``@handler(..., versions=...)``.
"""

from __future__ import annotations

import importlib

__version__ = "0.2.0"

FAMILIES = (
    "load_store",
    "stack",
    "arithmetic",
    "containers",
    "calls",
    "jumps",
    "closures",
    "exceptions",
    "imports",
    "matching",
    "generators",
)

_loaded = False


def load_families() -> None:
    global _loaded
    if _loaded:
        return
    for name in FAMILIES:
        importlib.import_module(f"{__name__}.{name}")
    _loaded = True
