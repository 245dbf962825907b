"""Graph -> Python source that reads like code a person wrote."""

from __future__ import annotations

import builtins
import importlib
import linecache
import math
import operator
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, cast

import paddle

from .node import Node

_INFIX = {
    operator.add: "+",
    operator.sub: "-",
    operator.mul: "*",
    operator.truediv: "/",
    operator.floordiv: "//",
    operator.mod: "%",
    operator.pow: "**",
    operator.matmul: "@",
    operator.lshift: "<<",
    operator.rshift: ">>",
    operator.and_: "&",
    operator.or_: "|",
    operator.xor: "^",
    operator.lt: "<",
    operator.le: "<=",
    operator.gt: ">",
    operator.ge: ">=",
    operator.eq: "==",
    operator.ne: "!=",
    operator.is_: "is",
    operator.is_not: "is not",
}
_PREFIX = {operator.neg: "-", operator.pos: "+", operator.invert: "~", operator.not_: "not "}


@dataclass
class PythonCode:
    src: str
    globals: Dict[str, Any]
    #: ``src`` with, after each line, the user's line it was captured from (file, line
    #: and text, as a comment): what a traceback through the graph shows
    shown: str = ""


def _resolves(path: str, obj: Any) -> bool:
    parts = path.split(".")
    try:
        cur = importlib.import_module(parts[0])
        for p in parts[1:]:
            cur = getattr(cur, p)
    except Exception:  # noqa: BLE001 - a module that fails to import does not resolve
        return False
    return cur is obj


#: how a bound operator's name starts, for the modules that hold most of them (the
#: longest prefix that fits wins); any other path has its dots written as underscores
_BOUND_PREFIXES = [
    ("paddle.nn.functional.", "F_"),
    ("paddle.base.libpaddle.pir.ops.", "_C_ops_"),
    ("paddle.base.libpaddle.eager.ops.", "_C_ops_"),
    ("paddle._C_ops.", "_C_ops_"),
]


def _bound_name(path: str) -> str:
    """``paddle.exp`` -> ``paddle_exp``, ``paddle.nn.functional.relu`` -> ``F_relu``."""
    for prefix, short in _BOUND_PREFIXES:
        if path.startswith(prefix):
            return short + path[len(prefix) :].replace(".", "_")
    return path.replace(".", "_")


class _Namespace:
    """``bind``: an operator found under a module path is bound once, as a global of the
    generated function named after that path (``F_relu``), not looked up through the
    path at every call (``paddle.base.libpaddle.pir.ops.full`` is five lookups). ``taken``:
    names the bound ones must not shadow (the graph's values)."""

    def __init__(self, bind: bool = False, taken=()):
        self.globals: Dict[str, Any] = {}
        self._ids: Dict[int, str] = {}
        self._n = {"fn": 0, "const": 0}
        self._bind = bind
        self._taken = set(taken)
        #: the local each value lives in, where it is not its own name (``_reused_local``)
        self.local: Dict[Node, str] = {}

    def alias(self, obj: Any, kind: str) -> str:
        if id(obj) in self._ids:
            return self._ids[id(obj)]
        name = f"_{kind}_{self._n[kind]}"
        self._n[kind] += 1
        self.globals[name] = obj
        self._ids[id(obj)] = name
        return name

    def qualified(self, fn: Any) -> str:
        if getattr(builtins, getattr(fn, "__name__", ""), None) is fn:
            # a builtin (mypy also narrows ``fn`` to the getattr's default, None)
            return cast(Any, fn).__name__
        name = getattr(fn, "__name__", None)
        candidates: List[str] = []
        if name:
            # Paddle generates some functions under private names (``_tanh`` in
            # generated_tensor_methods_patch) and exports them as ``paddle.tanh``
            for public in dict.fromkeys([name, name.lstrip("_")]):
                candidates += [
                    f"paddle.{public}",
                    f"paddle.nn.functional.{public}",
                    f"paddle.linalg.{public}",
                    f"paddle.fft.{public}",
                ]
            mod = getattr(fn, "__module__", None)
            qual = getattr(fn, "__qualname__", name)
            if mod:
                candidates.append(f"{mod}.{qual}")
        for path in candidates:
            if "<" in path:
                continue
            if _resolves(path, fn):
                if self._bind:
                    return self._bound(fn, path)
                top = path.split(".", 1)[0]
                self.globals[top] = importlib.import_module(top)
                return path
        return self.alias(fn, "fn")

    def _bound(self, fn: Any, path: str) -> str:
        if id(fn) in self._ids:
            return self._ids[id(fn)]
        name = _bound_name(path)
        while name in self._taken or (name in self.globals and self.globals[name] is not fn):
            name += "_"
        self.globals[name] = fn
        self._ids[id(fn)] = name
        return name

    def constant(self, value: Any) -> str:
        if type(value).__module__ == "numpy":
            # NumPy scalars subclass float or int but print as ``np.float64(0.5)``; the
            # value itself keeps its type (what Paddle promotes it to depends on it)
            return self.alias(value, "const")
        if value is None or isinstance(value, (bool, int, str, bytes)):
            return repr(value)
        if isinstance(value, float):
            if math.isnan(value):
                return "float('nan')"
            if math.isinf(value):
                return "float('inf')" if value > 0 else "float('-inf')"
            return repr(value)
        if isinstance(value, complex):
            return repr(value)
        if value is Ellipsis:
            return "..."
        if isinstance(value, tuple):
            inner = ", ".join(self.arg(v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if isinstance(value, list):
            return "[" + ", ".join(self.arg(v) for v in value) + "]"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{self.arg(k)}: {self.arg(v)}" for k, v in value.items()) + "}"
        if isinstance(value, slice):
            return f"slice({self.arg(value.start)}, {self.arg(value.stop)}, {self.arg(value.step)})"
        dtype_name = _paddle_dtype_name(value)
        if dtype_name is not None:
            self.globals["paddle"] = paddle
            return f"paddle.{dtype_name}"
        return self.alias(value, "const")

    def arg(self, value: Any) -> str:
        if isinstance(value, Node):
            return self.local.get(value, value.name)
        return self.constant(value)

    def index(self, value: Any) -> str:
        """A subscript: tuples without parentheses, slices as a:b:c."""
        if isinstance(value, tuple) and value:
            return ", ".join(self._index_item(v) for v in value)
        return self._index_item(value)

    def _index_item(self, v: Any) -> str:
        if isinstance(v, slice):
            parts = [
                "" if v.start is None else self.arg(v.start),
                "" if v.stop is None else self.arg(v.stop),
            ]
            text = ":".join(parts)
            if v.step is not None:
                text += ":" + self.arg(v.step)
            return text
        return self.arg(v)


def _paddle_dtype_name(value: Any):
    t = type(value)
    if not (t.__module__ or "").startswith("paddle") or t.__name__ not in (
        "dtype",
        "VarType",
        "DataType",
    ):
        return None
    name = str(value).replace("paddle.", "").split(".")[-1].lower()
    candidate = getattr(paddle, name, None)
    try:
        if candidate is not None and candidate == value:
            return name
    except Exception:  # noqa: BLE001 - a dtype Paddle cannot compare has no short name
        return None
    return None


def _frees_after(nodes: List[Node]) -> Dict[Node, List[Node]]:
    """For each node, the values whose last use it is (itself, when nothing uses it).

    The generated code deletes them right there, as eager code that rebinds its locals
    frees a tensor once nothing holds it: a graph that kept every intermediate until it
    returns ran 1.5-2x slower than eager on large convolution nets (Paddle's CPU allocator
    hands out fresh pages, each paid for with page faults) and peaked at many times eager's
    memory. torch.fx's codegen frees values at their last use for the same reason."""
    frees: Dict[Node, List[Node]] = {n: [] for n in nodes}
    seen: set = set()
    for node in reversed(nodes):
        if node.op == "output":
            seen.update(node.all_input_nodes)  # handed out: never freed here
            continue
        for inp in node.all_input_nodes:
            if inp not in seen:
                seen.add(inp)
                frees[node].append(inp)
        if node not in seen and node.op != "placeholder":
            seen.add(node)
            frees[node].insert(0, node)  # made for its effect alone
    return frees


def _reused_local(node: Node, dying: List[Node]) -> Optional[Node]:
    """The input whose local ``node``'s value is stored in, or None: its first argument
    (the object of a method), when ``node`` reads it for the last time. That writes
    ``x = F.relu(x)``, as eager code does; not ``size = paddle.zeros([size, 4])`` (not a
    first argument), ``x = paddle.split(x, 2)`` or ``bn = bn[0]`` (a tuple, read item by
    item) or ``w = w.reshape(...)`` (a parameter's local).

    Storing there frees the input as the store happens, where a ``del`` after the line
    would, with one instruction fewer per op: on a 500-op chain the ``del`` lines cost
    2-3 us a call on Python 3.8 (issue 35). The code's locals then name the first value
    of such a chain rather than each node."""
    if node in dying or not node.args:  # used by nothing: its own local, deleted at once
        return None
    subject = node.args[0]
    if not isinstance(subject, Node) or subject not in dying or subject.op == "get_attr":
        return None
    if _read_by_item(subject) or _read_by_item(node):
        return None
    return subject


def _read_by_item(node: Node) -> bool:
    """Whether ``node`` is a tuple the code reads item by item (``split[0]``): not known
    to be a tensor, and read only at integer indices."""
    return "shape" not in node.meta and all(
        u.op == "call_function" and u.target is operator.getitem and type(u.args[1]) is int
        for u in node.users
    )


def generate(graph, root_name: str = "self", reuse_locals: bool = True) -> PythonCode:
    """The graph's ``forward`` as source. ``reuse_locals``: an op stores its result over
    the local of a first argument it reads for the last time (``_reused_local``: what
    runs); without, every value has its own local named after the op that made it and is
    deleted after its last use, as torch.fx writes it (what a person reads)."""
    nodes = list(graph.nodes)
    ns = _Namespace(bind=True, taken=[root_name] + [n.name for n in nodes])
    params: List[str] = []
    body: List[str] = []
    #: where each line of ``body`` came from ("file:line"), or None
    origins: List[Optional[str]] = []
    frees = _frees_after(nodes)
    # parameters used by no node at all (a graph input only handed out, or unused)
    unused = [n for n in nodes if n.op == "placeholder" and not n.users]
    for node in nodes:
        op = node.op
        if op == "placeholder":
            params.append(node.name)
            continue
        if unused:
            body.append("del " + ", ".join(n.name for n in unused))
            origins.append(None)
            unused = []
        origins.append(node.meta.get("source_loc"))
        if op == "output":
            body.append(f"return {ns.arg(node.args[0])}")
            continue
        if op == "get_attr":
            expr = f"{root_name}." + node.target
        elif op == "call_module":
            expr = f"{root_name}.{node.target}({_call_args(ns, node.args, node.kwargs)})"
        elif op == "call_method":
            obj, *rest = node.args
            expr = f"{ns.arg(obj)}.{node.target}({_call_args(ns, rest, node.kwargs)})"
        else:
            expr = _function_call(ns, node)
        dying = frees[node]
        reused = _reused_local(node, dying) if reuse_locals else None
        if reused is not None:
            ns.local[node] = ns.arg(reused)
            dying = [n for n in dying if n is not reused]
        body.append(f"{ns.arg(node)} = {expr}")
        if dying:
            body.append("del " + ", ".join(ns.arg(n) for n in dying))
            origins.append(None)
    if not body or not body[-1].startswith("return"):
        body.append("return None")
    sig = ", ".join([root_name] + params)
    head = f"def forward({sig}):\n"
    src = head + "".join(f"    {line}\n" for line in body)
    shown = head + "".join(
        f"    {line}{_origin_comment(origin)}\n"
        for line, origin in zip(body, origins + [None] * (len(body) - len(origins)))
    )
    return PythonCode(src, ns.globals, shown)


def _origin_comment(origin: Optional[str]) -> str:
    """``  # model.py:12: y = paddle.gather(x, i)``: an error raised by the graph at run
    time (a data-dependent one: an index out of range) names the user's line, as eager
    Paddle's traceback would."""
    if not origin:
        return ""
    filename, _, line = origin.rpartition(":")
    text = linecache.getline(filename, int(line)).strip() if line.isdigit() else ""
    return f"  # {origin}: {text}" if text else f"  # {origin}"


def _call_args(ns: _Namespace, args, kwargs) -> str:
    parts = [ns.arg(a) for a in args]
    parts += [f"{k}={ns.arg(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _function_call(ns: _Namespace, node: Node) -> str:
    fn, args, kwargs = node.target, node.args, node.kwargs
    if not kwargs:
        if fn is operator.getitem and len(args) == 2:
            return f"{ns.arg(args[0])}[{ns.index(args[1])}]"
        if fn in _INFIX and len(args) == 2:
            return f"{ns.arg(args[0])} {_INFIX[fn]} {ns.arg(args[1])}"
        if fn in _PREFIX and len(args) == 1:
            return f"{_PREFIX[fn]}{ns.arg(args[0])}"
        if fn is operator.contains and len(args) == 2:
            return f"{ns.arg(args[1])} in {ns.arg(args[0])}"
    return f"{ns.qualified(fn)}({_call_args(ns, args, kwargs)})"
