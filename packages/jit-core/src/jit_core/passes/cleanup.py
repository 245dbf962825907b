"""Passes that only remove work: dead code and repeated pure computations."""

from __future__ import annotations

from typing import Any, Dict, Hashable, Optional

from ..fx import Node
from .effects import is_pure, leaving
from .manager import graph_pass


def _must_stay(gm, node: Node) -> bool:
    if node.op in ("placeholder", "output") or node.users:
        return True
    if node.op == "call_module":
        # a layer in training mode may update state (BatchNorm statistics, Dropout's
        # generator) even when its result is unused, as it does in eager Paddle
        return bool(getattr(getattr(gm, node.target, None), "training", True))
    # in-place, out= and random calls have effects beyond their result
    return not is_pure(node)


@graph_pass("dce", order=90)
def dead_code_elimination(gm, ctx) -> int:
    """Remove nodes whose results nobody uses (in-place, random and stateful calls stay)."""
    removed = 0
    for node in reversed(gm.graph.nodes):
        if not _must_stay(gm, node):
            gm.graph.erase_node(node)
            removed += 1
    return removed


def _freeze(v: Any) -> Optional[Hashable]:
    """A hashable key for an argument, or None when it has none."""
    if isinstance(v, Node):
        return v
    if isinstance(v, (tuple, list)):
        items = []
        for i in v:
            f = _freeze(i)
            if f is None:
                return None
            items.append(f)
        return (type(v).__name__, tuple(items))
    if isinstance(v, dict):
        return _freeze(tuple(sorted(((str(k), k, i) for k, i in v.items()), key=lambda t: t[0])))
    if isinstance(v, slice):
        return ("slice", _freeze(v.start), _freeze(v.stop), _freeze(v.step))
    if isinstance(v, float):
        return ("float", repr(v))  # keeps 0.0 and -0.0 apart; nan never equals itself
    try:
        hash(v)
    except TypeError:
        return None
    return (type(v), v)


@graph_pass("cse", order=10)
def common_subexpression_elimination(gm, ctx) -> int:
    """Compute each pure expression once: later copies use the first result, except
    where both leave the graph: eager gives the frame two tensors, and an update in
    place of one (after a graph break, or by the caller) must not reach the other."""
    seen: Dict[Hashable, Node] = {}
    merged = 0
    escaping = leaving(gm)
    for node in gm.graph.nodes:
        if not is_pure(node):
            continue
        args, kwargs = _freeze(node.args), _freeze(node.kwargs)
        if (args is None and node.args) or (kwargs is None and node.kwargs):
            continue
        key = (node.op, _freeze(node.target), args, kwargs)
        first = seen.get(key)
        if first is None:
            seen[key] = node
            continue
        if node in escaping:
            if first in escaping:
                continue
            escaping.add(first)
        node.replace_all_uses_with(first)
        gm.graph.erase_node(node)
        merged += 1
    return merged
