"""``Graph``: an ordered list of nodes with one output, and the code it generates."""

from __future__ import annotations

import builtins
import contextlib
import keyword
import operator
from typing import Any, Callable, Dict, Iterator, List, Optional, cast

from .codegen import generate
from .node import Node, map_arg

_ANCHOR_NAME = "__root__"


def _base_name(op: str, target: Any) -> str:
    if op in ("placeholder", "call_module", "get_attr"):
        raw = str(target)
    elif op == "call_method":
        raw = str(target)
    elif op == "output":
        raw = "output"
    else:
        raw = getattr(target, "__name__", None) or type(target).__name__
    raw = raw.replace(".", "_").strip("_")
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in raw).lower() or "node"
    if name[0].isdigit():
        name = "_" + name
    if keyword.iskeyword(name) or hasattr(builtins, name) or name in ("self", "paddle"):
        name = name + "_1" if not name.endswith("_") else name + "1"
    return name


class Graph:
    def __init__(self):
        # a sentinel ring: root.next is the first node, root.prev the last
        self._root = Node(self, _ANCHOR_NAME, "placeholder", _ANCHOR_NAME, (), {})
        self._root.prev = self._root.next = self._root
        self._insert_before = self._root
        self._names: Dict[str, int] = {}
        self._used = set()

    # -- iteration
    @property
    def nodes(self) -> List[Node]:
        out = []
        n = self._root.next
        while n is not self._root:
            out.append(n)
            n = n.next
        return out

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def find_nodes(self, *, op: str, target: Any = None) -> List[Node]:
        return [n for n in self.nodes if n.op == op and (target is None or n.target == target)]

    # -- building
    def _unique(self, base: str) -> str:
        name = base
        i = self._names.get(base, 0)
        while name in self._used:
            i += 1
            name = f"{base}_{i}"
        self._names[base] = i
        self._used.add(name)
        return name

    def create_node(
        self, op: str, target: Any, args=(), kwargs=None, name: Optional[str] = None
    ) -> Node:
        name = self._unique(name or _base_name(op, target))
        node = Node(self, name, op, target, tuple(args), dict(kwargs or {}))
        anchor = self._insert_before
        node.prev, node.next = anchor.prev, anchor
        anchor.prev.next = node
        anchor.prev = node
        return node

    def placeholder(self, name: str) -> Node:
        return self.create_node("placeholder", name, name=name)

    def get_attr(self, target: str) -> Node:
        return self.create_node("get_attr", target)

    def call_function(self, fn: Callable, args=(), kwargs=None) -> Node:
        return self.create_node("call_function", fn, args, kwargs)

    def call_method(self, name: str, args=(), kwargs=None) -> Node:
        return self.create_node("call_method", name, args, kwargs)

    def call_module(self, target: str, args=(), kwargs=None) -> Node:
        return self.create_node("call_module", target, args, kwargs)

    def output(self, result: Any) -> Node:
        return self.create_node("output", "output", (result,), name="output")

    def output_values(self) -> tuple:
        """What the graph returns, as a tuple (one value alone is a tuple of one)."""
        out = self.nodes[-1].args[0]
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    @contextlib.contextmanager
    def inserting_before(self, node: Node):
        old = self._insert_before
        self._insert_before = node
        try:
            yield
        finally:
            self._insert_before = old

    @contextlib.contextmanager
    def inserting_after(self, node: Node):
        # (a node in the graph is linked on both sides)
        with self.inserting_before(cast(Node, node.next)):
            yield

    def node_copy(self, node: Node, arg_transform: Callable[[Node], Any] = lambda n: n) -> Node:
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        new = self.create_node(node.op, node.target, args, kwargs)
        new.meta = dict(node.meta)
        return new

    def copy(self, until: Optional[Node] = None) -> Graph:
        """A new graph with copies of these nodes (same placeholder names, meta copied).
        ``until``: only the nodes up to that one, the new graph returning its value (as a
        one-item tuple)."""
        new = Graph()
        env: Dict[Node, Node] = {}
        for node in self.nodes:
            if node.op == "output":
                new.output(map_arg(node.args[0], env.__getitem__))
                continue
            if node.op == "placeholder":
                copy = new.placeholder(node.target)
                copy.meta = dict(node.meta)
            else:
                copy = new.node_copy(node, env.__getitem__)
            env[node] = copy
            if node is until:
                new.output((copy,))
                break
        return new

    def erase_node(self, node: Node) -> None:
        if node.users:
            raise RuntimeError(
                f"cannot erase node {node.name}: it is still used by {list(node.users)}"
            )
        node._set_inputs((), {})
        # a node in the graph is linked on both sides
        prev, nxt = cast(Node, node.prev), cast(Node, node.next)
        prev.next = nxt
        nxt.prev = prev
        node.prev = node.next = None
        self._used.discard(node.name)

    # -- passes
    def eliminate_dead_code(self) -> bool:
        changed = False
        for node in reversed(self.nodes):
            if node.op in ("placeholder", "output") or node.users:
                continue
            if _is_impure(node):
                continue
            self.erase_node(node)
            changed = True
        return changed

    def lint(self) -> None:
        seen = set()
        names = set()
        outputs = [n for n in self.nodes if n.op == "output"]
        if len(outputs) != 1 or self.nodes[-1] is not outputs[0]:
            raise RuntimeError("a graph has exactly one output node, at the end")
        for node in self.nodes:
            if node.graph is not self:
                raise RuntimeError(f"node {node.name} belongs to another graph")
            if node.name in names:
                raise RuntimeError(f"node name {node.name} is used twice")
            names.add(node.name)
            for inp in node.all_input_nodes:
                if inp.graph is not self:
                    raise RuntimeError(f"{node.name} uses {inp.name} of another graph")
                if inp not in seen:
                    raise RuntimeError(f"{node.name} uses {inp.name} before it is defined")
                if node not in inp.users:
                    raise RuntimeError(f"{inp.name}.users does not list {node.name}")
            seen.add(node)

    # -- display and code
    def print_tabular(self, file=None) -> str:
        """Print the nodes as a table (to ``file``, default stdout) and return its text."""
        text = self.tabular()
        print(text, file=file)
        return text

    def tabular(self) -> str:
        rows = [("opcode", "name", "target", "args", "kwargs")]
        for n in self.nodes:
            target = (
                n.target
                if isinstance(n.target, str)
                else getattr(n.target, "__name__", repr(n.target))
            )
            rows.append((n.op, n.name, str(target), _short(n.args), _short(n.kwargs)))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = []
        for i, r in enumerate(rows):
            lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
            if i == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def __str__(self) -> str:
        return "graph():\n" + "\n".join("    " + n.format_node() for n in self.nodes)

    def python_code(self, root_name: str = "self", reuse_locals: bool = True):
        return generate(self, root_name, reuse_locals)


def _short(v: Any) -> str:
    return repr(map_arg(v, lambda n: _Name(n.name)))


class _Name:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


def _is_impure(node: Node) -> bool:
    if node.meta.get("impure"):
        return True
    if node.op == "call_method":
        t = node.target
        return t.endswith("_") and not t.endswith("__")
    if node.op == "call_function":
        name = getattr(node.target, "__name__", "")
        return (
            name.endswith("_")
            and not name.endswith("__")
            and node.target
            not in (
                operator.and_,
                operator.or_,
                operator.not_,
                operator.is_,
                operator.is_not,
            )
        )
    return False
