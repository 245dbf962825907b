"""Imports inside functions: modules that are already imported are just looked up."""

from __future__ import annotations

import sys

from jit_core.errors import SIDE_EFFECT, UNSUPPORTED_OPCODE, Unsupported
from jit_core.variables import wrap_static

from .registry import handler


@handler("IMPORT_NAME")
def import_name(tx, inst):
    fromlist = tx.pop().as_python_constant()
    level = tx.pop().as_python_constant()
    name = inst.argval
    if level != 0:
        raise Unsupported(f"relative import of {name!r}", category=UNSUPPORTED_OPCODE)
    if name not in sys.modules:
        raise Unsupported(
            f"import of {name!r} would load a module (a side effect)", category=SIDE_EFFECT
        )
    # `import a.b` binds the top package; `from a.b import c` works on a.b itself
    target = name if fromlist else name.partition(".")[0]
    tx.push(wrap_static(sys.modules[target]))


@handler("IMPORT_FROM")
def import_from(tx, inst):
    tx.push(tx.getattr(tx.peek(), inst.argval))
