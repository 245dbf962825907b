"""Run a GraphModule node by node (for debugging, and as a base for analyses)."""

from __future__ import annotations

from typing import Any, Dict

from .node import Node, map_arg


class Interpreter:
    def __init__(self, gm):
        self.gm = gm
        self.env: Dict[Node, Any] = {}

    def run(self, *args) -> Any:
        self.env = {}
        self._args = iter(args)
        result = None
        for node in self.gm.graph.nodes:
            value = self.run_node(node)
            if node.op == "output":
                result = value
            else:
                self.env[node] = value
        return result

    def _fetch(self, arg):
        return map_arg(arg, lambda n: self.env[n])

    def run_node(self, node: Node) -> Any:
        args = self._fetch(node.args)
        kwargs = self._fetch(node.kwargs)
        return getattr(self, node.op)(node.target, args, kwargs)

    def placeholder(self, target, args, kwargs):
        return next(self._args)

    def get_attr(self, target, args, kwargs):
        obj = self.gm
        for part in target.split("."):
            obj = getattr(obj, part)
        return obj

    def call_function(self, target, args, kwargs):
        return target(*args, **kwargs)

    def call_method(self, target, args, kwargs):
        obj, *rest = args
        return getattr(obj, target)(*rest, **kwargs)

    def call_module(self, target, args, kwargs):
        return getattr(self.gm, target)(*args, **kwargs)

    def output(self, target, args, kwargs):
        return args[0]


def run_leaf_layer(layer, args, kwargs):
    """Call ``layer`` on an example without changing its state: a layer in training mode
    (BatchNorm) gets back the statistics it updated."""
    # In training mode layers like BatchNorm update their running statistics in place;
    # the capture must not, so they are put back after the example run. Paddle keeps those
    # statistics as buffers in some layers and as stop_gradient parameters in others.
    saved = []
    if layer.training:
        state = [b for _, b in layer.named_buffers()]
        state += [p for _, p in layer.named_parameters() if p.stop_gradient]
        for t in state:
            if t is not None and t._is_initialized():
                saved.append((t, t.clone()))
    try:
        return layer(*args, **kwargs)
    finally:
        for buf, value in saved:
            buf.set_value(value)
