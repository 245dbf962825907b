"""``replace_pattern``: find a subgraph by data flow and put another in its place.

Pattern and replacement are plain Python functions written with Paddle calls (or
GraphModules from ``jit_core.capture``). They are captured with the same machinery as user
code, so ``x + b`` in a pattern is the same node as ``x + b`` in a model.

Matching starts from the pattern's output and walks the arguments backwards: a pattern
placeholder matches any node of the graph, every other pattern node must match a graph node
of the same kind and target whose arguments match in turn. Literal arguments must be equal
(``ignore_literals=True`` lets them match any literal). A match is kept only when its inner
nodes are used by nothing outside it (else removing them would change other results) and
when it does not overlap an earlier match.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import paddle

from ..errors import JitError
from ..fx import Graph, GraphModule, Node

#: the example value for each pattern argument when none are given
DEFAULT_EXAMPLE_SHAPE = [2, 2]


class PatternError(JitError):
    """A pattern or replacement cannot be captured or used."""


@dataclass
class Match:
    """One place where the pattern was found.

    ``anchor`` is the graph node that matched the pattern's output; ``nodes_map`` maps each
    pattern node to the graph node it matched (placeholders included).
    """

    anchor: Node
    nodes_map: Dict[Node, Node]
    #: the graph nodes bound to the pattern's arguments, in argument order
    inputs: List[Node]

    @property
    def replaced(self) -> List[Node]:
        """Graph nodes the pattern's operations matched (these are removed)."""
        return [g for p, g in self.nodes_map.items() if p.op != "placeholder"]


PatternLike = Union[Callable, GraphModule, Graph]


def pattern_graph(fn: PatternLike, example_inputs: Optional[Sequence[Any]] = None) -> Graph:
    """The graph of a pattern or replacement: captured from ``fn`` with ``example_inputs``
    (by default one float32 tensor of shape [2, 2] per argument)."""
    if isinstance(fn, Graph):
        return fn
    if isinstance(fn, GraphModule):
        return fn.graph
    from ..capture import capture

    defaulted = example_inputs is None
    if example_inputs is None:
        n = len(inspect.signature(fn).parameters)
        example_inputs = [paddle.full(DEFAULT_EXAMPLE_SHAPE, 0.5, "float32") for _ in range(n)]
    try:
        gm = capture(fn, *example_inputs)
    except JitError as e:
        hint = (
            "; pass example_inputs=... with shapes the pattern's operations accept"
            if defaulted
            else ""
        )
        raise PatternError(
            f"cannot capture pattern {getattr(fn, '__qualname__', fn)!r}: {e}{hint}"
        ) from e
    return gm.graph


def _check(graph: Graph, what: str) -> Node:
    out = graph.nodes[-1]
    for n in graph.nodes:
        if n.op in ("call_module", "get_attr"):
            raise PatternError(
                f"the {what} uses {n.op} {n.target!r}: patterns are functions of their "
                "arguments only (pass weights as arguments instead of reading layers)"
            )
    result = out.args[0]
    if isinstance(result, (tuple, list)):
        if len(result) != 1:
            raise PatternError(f"the {what} returns {len(result)} values; it must return one")
        result = result[0]
    if not isinstance(result, Node):
        raise PatternError(f"the {what} must return a tensor computed from its arguments")
    return result


class _Matcher:
    def __init__(self, pattern: Graph, ignore_literals: bool):
        self.pattern = pattern
        self.ignore_literals = ignore_literals
        self.placeholders = [n for n in pattern.nodes if n.op == "placeholder"]
        self.anchor = _check(pattern, "pattern")
        if self.anchor.op == "placeholder":
            raise PatternError("the pattern returns one of its arguments: it matches nothing")

    def match_at(self, node: Node) -> Optional[Match]:
        m: Dict[Node, Node] = {}
        if not self._node(self.anchor, node, m):
            return None
        for p in self.placeholders:
            if p not in m:
                raise PatternError(
                    f"pattern argument {p.target!r} is not used by the pattern's result"
                )
        inner = {g for p, g in m.items() if p.op != "placeholder"}
        # values computed inside the match must not be needed outside it
        for p, g in m.items():
            if p.op == "placeholder" or g is node:
                continue
            if any(user not in inner for user in g.users):
                return None
        # the replacement runs where the anchor was: it must not read, after an in-place
        # update, a value the matched nodes read before it (passes.effects)
        if any(g.meta.get("mutated") for g in m.values()):
            return None
        return Match(node, m, [m[p] for p in self.placeholders])

    def _node(self, p: Node, g: Node, m: Dict[Node, Node]) -> bool:
        if p in m:
            return m[p] is g
        if p.op == "placeholder":
            m[p] = g
            return True
        if g.op != p.op or not _same_target(p.target, g.target):
            return False
        if any(q is not p and q.op != "placeholder" and h is g for q, h in m.items()):
            return False  # one graph node cannot stand for two pattern operations
        if len(p.args) != len(g.args) or set(p.kwargs) != set(g.kwargs):
            return False
        saved = dict(m)
        m[p] = g
        ok = self._arg(p.args, g.args, m) and all(
            self._arg(p.kwargs[k], g.kwargs[k], m) for k in p.kwargs
        )
        if not ok:
            m.clear()
            m.update(saved)
        return ok

    def _arg(self, pa: Any, ga: Any, m: Dict[Node, Node]) -> bool:
        if isinstance(pa, Node):
            return isinstance(ga, Node) and self._node(pa, ga, m)
        if isinstance(ga, Node):
            return False
        if isinstance(pa, (tuple, list)):
            return (
                type(pa) is type(ga)
                and len(pa) == len(ga)
                and all(self._arg(a, b, m) for a, b in zip(pa, ga))
            )
        if isinstance(pa, dict):
            return (
                isinstance(ga, dict)
                and set(pa) == set(ga)
                and all(self._arg(pa[k], ga[k], m) for k in pa)
            )
        if self.ignore_literals:
            return True
        return type(pa) is type(ga) and _equal(pa, ga)


def _same_target(a: Any, b: Any) -> bool:
    return a is b or (isinstance(a, str) and a == b)


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values that cannot be compared are different
        return a is b


def replace_pattern(
    gm: GraphModule,
    pattern: PatternLike,
    replacement: PatternLike,
    *,
    example_inputs: Optional[Sequence[Any]] = None,
    ignore_literals: bool = False,
    filters: Sequence[Callable[[Match], bool]] = (),
) -> List[Match]:
    """Replace every non-overlapping match of ``pattern`` in ``gm`` with ``replacement``.

    ``pattern`` and ``replacement`` take the same arguments; both are captured with
    ``example_inputs`` (default: one float32 [2, 2] tensor per argument, enough for
    elementwise and matmul patterns). ``filters`` are called with each candidate ``Match``
    and can reject it. The graph is changed in place, its code regenerated, and the
    matches that were replaced are returned.
    """
    if not isinstance(gm, GraphModule):
        raise TypeError(
            f"replace_pattern() takes a jit_core GraphModule first (capture() makes one), "
            f"got {type(gm).__name__}"
        )
    pat = pattern_graph(pattern, example_inputs)
    rep = pattern_graph(replacement, example_inputs)
    matcher = _Matcher(pat, ignore_literals)
    rep_out = _check(rep, "replacement")
    rep_params = [n for n in rep.nodes if n.op == "placeholder"]
    if len(rep_params) != len(matcher.placeholders):
        raise PatternError(
            f"the pattern takes {len(matcher.placeholders)} arguments and the replacement "
            f"{len(rep_params)}; they must take the same ones"
        )

    graph = gm.graph
    taken: set = set()
    matches: List[Match] = []
    for node in graph.nodes:
        if node.op in ("placeholder", "output") or node in taken:
            continue
        found = matcher.match_at(node)
        if found is None or any(n in taken for n in found.replaced):
            continue
        if not all(f(found) for f in filters):
            continue
        taken.update(found.replaced)
        matches.append(found)

    # a match may read the result of an earlier one, whose anchor is gone by then
    replaced_by: Dict[Node, Node] = {}
    for found in matches:
        found.inputs = [replaced_by.get(n, n) for n in found.inputs]
        result = _substitute(graph, found, rep, rep_params, rep_out)
        replaced_by[found.anchor] = result
    if matches:
        gm.recompile()
    return matches


def _substitute(graph: Graph, found: Match, rep: Graph, rep_params, rep_out: Node) -> Node:
    env: Dict[Node, Any] = dict(zip(rep_params, found.inputs))
    anchor = found.anchor
    with graph.inserting_before(anchor):
        for n in rep.nodes:
            if n.op in ("placeholder", "output"):
                continue
            new = graph.node_copy(n, lambda x: env[x])
            # the replacement's examples had other shapes: only its result's are known
            new.meta.pop("shape", None)
            new.meta.pop("dtype", None)
            env[n] = new
    result = env[rep_out]
    if "shape" in anchor.meta and isinstance(result, Node):
        result.meta["shape"] = anchor.meta["shape"]
        result.meta["dtype"] = anchor.meta.get("dtype")
    anchor.replace_all_uses_with(result)
    order = {n: i for i, n in enumerate(graph.nodes)}
    for g in sorted(found.replaced, key=order.__getitem__, reverse=True):
        if not g.users:
            graph.erase_node(g)
    return result


__all__ = ["Match", "PatternError", "pattern_graph", "replace_pattern"]
