"""Graph passes: the pass manager, ``replace_pattern``, and the built-in passes.

``optimize(..., passes=None)`` runs the default pipeline before the backend compiles a
graph; ``passes=[...]`` chooses, ``disable_passes=[...]`` turns passes off by name, and
``explain()`` shows what each one did. Outside plugins add passes through the
``jit_register_passes`` hook.
"""

from .base import GraphPass, PassContext, PassError, graph_pass
from .manager import PassManager, PassRecord
from .rewrite import Match, PatternError, replace_pattern

__all__ = [
    "GraphPass",
    "Match",
    "PassContext",
    "PassError",
    "PassManager",
    "PassRecord",
    "PatternError",
    "graph_pass",
    "replace_pattern",
]
