"""Pattern fusions written with ``replace_pattern``: several Paddle calls become one fused
Paddle kernel with the same result."""

from __future__ import annotations

from typing import Callable, List, Tuple

import paddle
import paddle.nn.functional as F

from .manager import graph_pass
from .rewrite import Match, pattern_graph, replace_pattern

# -- matmul + bias -> linear (one fused kernel, ``_C_ops.linear``, in dynamic mode)


def _matmul_add(x, w, b):
    return paddle.matmul(x, w) + b


def _matmul_operator_add(x, w, b):
    return x @ w + b


def _linear(x, w, b):
    return F.linear(x, w, b)


def _is_bias_of(m: Match) -> bool:
    """F.linear wants a 2-D weight and a 1-D bias of its output size, one float dtype."""
    x, w, b = (n.meta for n in m.inputs)
    if not all("shape" in meta for meta in (x, w, b)):
        return False
    return (
        len(w["shape"]) == 2
        and len(x["shape"]) >= 2
        and b["shape"] == [w["shape"][1]]
        and x["dtype"] == w["dtype"] == b["dtype"]
        and x["dtype"] in ("float32", "float64")
    )


# -- x * sigmoid(x) -> silu


def _mul_sigmoid(x):
    return x * F.sigmoid(x)


def _sigmoid_mul(x):
    return F.sigmoid(x) * x


def _silu(x):
    return F.silu(x)


_FUSIONS: List[Tuple[Callable, Callable, Tuple[Callable, ...]]] = [
    (_matmul_add, _linear, (_is_bias_of,)),
    (_matmul_operator_add, _linear, (_is_bias_of,)),
    (_mul_sigmoid, _silu, ()),
    (_sigmoid_mul, _silu, ()),
]
_graphs: dict = {}


def _graph(fn: Callable):
    # captured once per process: patterns are code, not data
    g = _graphs.get(fn)
    if g is None:
        g = _graphs[fn] = pattern_graph(fn)
    return g


@graph_pass("fuse_patterns", order=50, requires=("shapes",), preserves=())
def fuse_patterns(gm, ctx) -> int:
    """matmul + bias -> F.linear and x * sigmoid(x) -> F.silu, with replace_pattern."""
    replaced = 0
    for pattern, replacement, filters in _FUSIONS:
        matches = replace_pattern(gm, _graph(pattern), _graph(replacement), filters=filters)
        replaced += len(matches)
    return replaced


__all__ = ["fuse_patterns"]
