"""``GraphModule``: a ``paddle.nn.Layer`` whose ``forward`` is generated from a Graph."""

from __future__ import annotations

import itertools
from typing import Any, Dict, Optional, Union

import paddle

from ..bytecode import compat
from .graph import Graph

_counter = itertools.count()


def _resolve(root: paddle.nn.Layer, path: str) -> Any:
    obj: Any = root
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _is_parameter(obj: Any) -> bool:
    return isinstance(obj, paddle.Tensor) and type(obj).__name__ in ("EagerParamBase", "Parameter")


def _register_on(holder: paddle.nn.Layer, name: str, obj: Any) -> None:
    """Keep ``obj`` on ``holder`` by reference, as what it is: a sublayer, a parameter, a
    buffer (any other tensor: so that ``to_static`` and ``state_dict`` see it), or a plain
    attribute."""
    if isinstance(obj, paddle.nn.Layer):
        holder.add_sublayer(name, obj)
    elif _is_parameter(obj):
        holder.add_parameter(name, obj)
    elif isinstance(obj, paddle.Tensor):
        holder.register_buffer(name, obj)
    else:
        object.__setattr__(holder, name, obj)


class GraphModule(paddle.nn.Layer):
    """Holds the objects the graph refers to *by reference* (parameters stay shared with
    the user's layers) and a generated ``forward``.

    ``gm.forward`` is a plain bound method: calling it skips ``Layer.__call__`` and its
    hooks, which is what the JIT's fast path does.
    """

    #: the readable ``code``, made when first read
    _code: Optional[str]

    def __init__(
        self,
        root: Union[paddle.nn.Layer, Dict[str, Any]],
        graph: Graph,
        class_name: str = "GraphModule",
    ):
        super().__init__()
        self.__class__ = type(class_name, (GraphModule,), {})
        #: free-form facts about the graph (``capture`` records ``input_sources``, ``passes``)
        self.meta: Dict[str, Any] = {}
        if isinstance(root, paddle.nn.Layer):
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    self._copy_path(root, node.target)
        else:
            for name, obj in root.items():
                self._register(name, obj)
        self._graph = graph
        self.recompile()

    def _register(self, name: str, obj: Any) -> None:
        _register_on(self, name, obj)

    def _copy_path(self, root: paddle.nn.Layer, path: str) -> None:
        parts = path.split(".")
        holder: paddle.nn.Layer = self
        src: Any = root
        for part in parts[:-1]:
            src = getattr(src, part)
            sub = holder._sub_layers.get(part)
            if sub is None:
                sub = paddle.nn.Layer()
                holder.add_sublayer(part, sub)
            holder = sub
        _register_on(holder, parts[-1], getattr(src, parts[-1]))

    @property
    def graph(self) -> Graph:
        return self._graph

    @graph.setter
    def graph(self, g: Graph) -> None:
        self._graph = g
        self.recompile()

    @property
    def code(self) -> str:
        """The generated ``forward`` as a person reads it: every value named after the
        operation that made it, and deleted after its last use (torch.fx's way). What
        runs (``run_code``) is the same program with an op's result stored over a first
        argument it reads for the last time, which saves a ``del`` per op."""
        if self._code is None:
            self._code = self._graph.python_code("self", reuse_locals=False).src
        return self._code

    @property
    def run_code(self) -> str:
        """The source of the ``forward`` that runs."""
        return self._run_code

    def recompile(self) -> None:
        pc = self._graph.python_code("self")
        self._run_code = pc.src
        self._code = None  # made when first read
        self._code_globals = dict(pc.globals)
        filename = f"<jit_core.fx.{type(self).__name__}_{next(_counter)}>"
        fn = compat.exec_source(pc.src, filename, "forward", dict(pc.globals), pc.shown)
        # set on the class so that paddle.jit.to_static finds a normal method
        type(self).forward = fn

    def code_globals(self) -> Dict[str, Any]:
        """The objects the generated code refers to by name (modules, functions, constants)."""
        return dict(self._code_globals)

    def print_readable(self) -> str:
        return f"class {type(self).__name__}(paddle.nn.Layer):\n" + "".join(
            "    " + line + "\n" for line in self.code.splitlines()
        )
