"""Nodes of the graph IR: six kinds, like torch.fx."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

OPS = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")


def map_arg(arg: Any, fn: Callable[[Node], Any]) -> Any:
    """Apply ``fn`` to every Node inside nested tuples, lists, dicts and slices."""
    if isinstance(arg, Node):
        return fn(arg)
    if isinstance(arg, tuple):
        return tuple(map_arg(a, fn) for a in arg)
    if isinstance(arg, list):
        return [map_arg(a, fn) for a in arg]
    if isinstance(arg, dict):
        return {k: map_arg(v, fn) for k, v in arg.items()}
    if isinstance(arg, slice):
        return slice(map_arg(arg.start, fn), map_arg(arg.stop, fn), map_arg(arg.step, fn))
    return arg


class Node:
    def __init__(self, graph, name: str, op: str, target: Any, args: Tuple, kwargs: Dict[str, Any]):
        if op not in OPS:
            raise ValueError(f"unknown node kind {op!r}; one of {OPS}")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self.users: Dict[Node, None] = {}
        self.meta: Dict[str, Any] = {}
        self.prev: Optional[Node] = None
        self.next: Optional[Node] = None
        self._args: Tuple = ()
        self._kwargs: Dict[str, Any] = {}
        self._set_inputs(tuple(args), dict(kwargs))

    # -- inputs
    @property
    def args(self) -> Tuple:
        return self._args

    @args.setter
    def args(self, value) -> None:
        self._set_inputs(tuple(value), self._kwargs)

    @property
    def kwargs(self) -> Dict[str, Any]:
        return self._kwargs

    @kwargs.setter
    def kwargs(self, value) -> None:
        self._set_inputs(self._args, dict(value))

    def _set_inputs(self, args: Tuple, kwargs: Dict[str, Any]) -> None:
        for old in self.all_input_nodes:
            old.users.pop(self, None)
        self._args = args
        self._kwargs = kwargs
        for new in self.all_input_nodes:
            new.users[self] = None

    @property
    def all_input_nodes(self) -> List[Node]:
        found: Dict[Node, None] = {}
        map_arg((self._args, self._kwargs), lambda n: found.setdefault(n, None))
        return list(found)

    def update_arg(self, index: int, value: Any) -> None:
        args = list(self._args)
        args[index] = value
        self.args = args

    def replace_input_with(self, old: Node, new: Any) -> None:
        # ``new`` may be a constant: a node's size known after all (kit/onnx/prepare.py)
        def swap(n):
            return new if n is old else n

        self._set_inputs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    def replace_all_uses_with(self, new: Node) -> List[Node]:
        users = list(self.users)
        for user in users:
            user.replace_input_with(self, new)
        return users

    # -- display
    def format_node(self) -> str:
        if self.op == "placeholder":
            return f"%{self.name} : placeholder[target={self.target}]"
        if self.op == "output":
            return f"return {_fmt(self._args[0])}"
        target = (
            self.target
            if isinstance(self.target, str)
            else getattr(self.target, "__name__", repr(self.target))
        )
        return (
            f"%{self.name} : {self.op}[target={target}]"
            f"(args = {_fmt(self._args)}, kwargs = {_fmt(self._kwargs)})"
        )

    def __repr__(self) -> str:
        return self.name


def _fmt(arg: Any) -> str:
    return repr(map_arg(arg, lambda n: _Ref(n.name)))


class _Ref:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"%{self.name}"
