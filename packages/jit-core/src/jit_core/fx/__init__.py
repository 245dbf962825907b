"""The graph IR: ``Graph`` of ``Node``s (six kinds), ``GraphModule`` with generated code,
and an ``Interpreter``. Modelled on torch.fx."""

from .graph import Graph
from .graph_module import GraphModule
from .interpreter import Interpreter
from .node import Node, map_arg

__all__ = ["Graph", "GraphModule", "Interpreter", "Node", "map_arg"]
