"""The built-in graph passes, registered through the same hook as an outside plugin's."""

from __future__ import annotations

from ..hookspecs import hookimpl
from .cleanup import common_subexpression_elimination, dead_code_elimination
from .folding import fold_batch_norm, fold_constants
from .fusion import fuse_patterns

BUILTIN_PASSES = (
    common_subexpression_elimination,
    fold_batch_norm,
    fold_constants,
    fuse_patterns,
    dead_code_elimination,
)


@hookimpl
def jit_register_passes(register):
    for p in BUILTIN_PASSES:
        register(p)
