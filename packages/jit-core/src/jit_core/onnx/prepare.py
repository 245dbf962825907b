"""Exact rewrites of a graph copy before paddle2onnx sees it.

Each one works around a paddle2onnx 2.1 problem met by the conformance suite, and each
computes the same values as the original:

- ``x + c`` / ``x - c`` with a Python number: Paddle records ``scale(x, 1, bias=c)``, which
  paddle2onnx turns into ``x`` (the bias is lost). It becomes ``paddle.add(x, full(c))``.
- ``x.mean()`` over all axes: paddle2onnx aborts ("Can not get input 'axis(dim)' value");
  the axes are spelt out.
- ``AdaptiveAvgPool2D`` of a 1x1 map: paddle2onnx emits an AveragePool with stride 0,
  which ONNX Runtime refuses; averaging one value is a broadcast, so it becomes ``expand``.
- inputs that nothing reads: ``paddle.jit.save`` refuses them, so they are dropped (the
  runtime feeds inputs by name).
"""

from __future__ import annotations

import operator
from typing import Any

import paddle

from ..fx import Graph, Node


def _replace_with_call(graph: Graph, node: Node, fn, args) -> None:
    """Put ``fn(*args)`` where ``node`` was; it computes the same value (meta kept)."""
    with graph.inserting_before(node):
        new = graph.call_function(fn, args)
    new.meta = dict(node.meta)
    node.replace_all_uses_with(new)
    graph.erase_node(node)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _scalar_add_sub(graph: Graph) -> int:
    n = 0
    for node in graph.nodes:
        if node.op != "call_function" or node.kwargs or len(node.args) != 2:
            continue
        if node.target not in (operator.add, operator.sub):
            continue
        a, b = node.args
        if isinstance(a, Node) and _is_number(b):
            tensor, number, first = a, b, True
        elif node.target is operator.add and isinstance(b, Node) and _is_number(a):
            tensor, number, first = b, a, False
        else:
            continue
        dtype = tensor.meta.get("dtype")
        # only where the result keeps the tensor's dtype (no int + float promotion)
        if dtype is None or node.meta.get("dtype") != dtype:
            continue
        if isinstance(number, float) and not dtype.startswith(("float", "bfloat")):
            continue
        fn = paddle.add if node.target is operator.add else paddle.subtract
        with graph.inserting_before(node):
            const = graph.call_function(paddle.full, ([], number, dtype))
        _replace_with_call(graph, node, fn, (tensor, const) if first else (const, tensor))
        n += 1
    return n


def _mean_over_all(graph: Graph) -> int:
    n = 0
    for node in graph.nodes:
        is_method = node.op == "call_method" and node.target == "mean"
        is_function = node.op == "call_function" and node.target is paddle.mean
        if not (is_method or is_function) or len(node.args) != 1:
            continue
        if node.kwargs.get("axis") is not None or set(node.kwargs) - {"axis"}:
            continue
        shape = node.args[0].meta.get("shape") if isinstance(node.args[0], Node) else None
        if not shape:
            continue
        node.kwargs = {"axis": list(range(len(shape)))}
        n += 1
    return n


def _adaptive_pool_of_one(gm, graph: Graph) -> int:
    n = 0
    for node in graph.nodes:
        if node.op != "call_module" or len(node.args) != 1 or node.kwargs:
            continue
        layer = getattr(gm, node.target, None)
        if not isinstance(layer, paddle.nn.AdaptiveAvgPool2D):
            continue
        x = node.args[0]
        shape_in = x.meta.get("shape") if isinstance(x, Node) else None
        shape_out = node.meta.get("shape")
        if not shape_in or not shape_out or len(shape_in) != 4:
            continue
        if getattr(layer, "_data_format", "NCHW") != "NCHW" or shape_in[2:] != [1, 1]:
            continue
        _replace_with_call(graph, node, paddle.expand, (x, list(shape_out)))
        n += 1
    return n


def _drop_unused_inputs(graph: Graph) -> int:
    unused = [n for n in graph.nodes if n.op == "placeholder" and not n.users]
    for node in unused:
        graph.erase_node(node)
    return len(unused)


def prepare_graph(gm) -> Graph:
    """A copy of ``gm``'s graph with the rewrites above applied."""
    graph = gm.graph.copy()
    _scalar_add_sub(graph)
    _mean_over_all(graph)
    _adaptive_pool_of_one(gm, graph)
    _drop_unused_inputs(graph)
    return graph
