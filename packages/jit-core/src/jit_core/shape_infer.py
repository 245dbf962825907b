"""Which sizes of the tensors a graph makes hold at every size of its dynamic inputs,
answered by Paddle itself.

A size of a tensor the graph made (``h = self.proj(x); h.shape[-1]``) has no expression
over the frame's inputs. When Python needs its value, the graph built so far is turned
into a static program whose dynamic input dimensions are unknown (``InputSpec`` with
``None``), and Paddle's shape inference (each operator's InferMeta) says which output
dimensions are fixed numbers: those hold at every size the guards admit, so the capture
may use them as constants without a guard. A dimension it leaves unknown (-1), or a
graph that cannot become a static program, is a size the capture must not pin: the frame
is then captured with static shapes (``shapes.SpecializeShapes``).
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, Dict, List, Optional

import paddle

from .fx import Graph, GraphModule
from .kit.static_build import building

log = logging.getLogger("jit_core.recompiles")


def static_shapes(output, node) -> Optional[List[int]]:
    """The shape of the tensor ``node`` of ``output``'s graph as Paddle infers it with the
    dynamic input dimensions unknown (-1 where a size depends on them), or None when the
    graph up to ``node`` cannot be made a static program. Answers are kept per node."""
    cache: Dict[Any, Optional[List[int]]] = output.static_shapes
    if node not in cache:
        cache.update(_infer(output, node))
        cache.setdefault(node, None)
    return cache[node]


def _flat(values) -> list:
    if isinstance(values, (tuple, list)):
        return [v for item in values for v in _flat(item)]
    return [values]


def _infer(output, last) -> Dict[Any, Optional[List[int]]]:
    graph = Graph()
    env: Dict[Any, Any] = {}
    tensors = []
    specs = []
    examples = {node: ex for _, node, ex in output.inputs}
    for node in output.graph.nodes:
        if node.op == "output":
            break
        if node.op == "placeholder" and node.meta.get("number_input"):
            # a number input: a 0-D tensor in the program, which Paddle's shape arguments
            # take; a size that depends on it comes out unknown (-1)
            copy = graph.placeholder(node.name)
            dtype = "int64" if isinstance(examples[node], int) else "float64"
            specs.append(paddle.static.InputSpec([], dtype, name=node.name))
        elif node.op == "placeholder":
            copy = graph.placeholder(node.name)
            shape: list = list(examples[node].shape)
            for d in node.meta.get("dynamic_dims", ()):
                shape[d] = None
            specs.append(paddle.static.InputSpec(shape, examples[node].dtype, name=node.name))
        else:
            copy = graph.node_copy(node, env.__getitem__)
        env[node] = copy
        if "shape" in node.meta and node.op != "placeholder":
            tensors.append(node)
        if node is last:
            break
    if not tensors:
        return {}
    graph.output(tuple(env[n] for n in tensors))
    try:
        gm = GraphModule(output.root, graph, class_name="ShapeInference")
        with building(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            static = paddle.jit.to_static(gm, input_spec=specs, full_graph=True)
            program = static.forward.concrete_program
        outs = _flat(program.outputs)
        if len(outs) != len(tensors):
            return {}
        return {n: [int(d) for d in o.shape] for n, o in zip(tensors, outs)}
    except Exception as e:  # noqa: BLE001 - no static program: nothing is known
        log.info("no static shape inference for the graph so far: %s: %s", type(e).__name__, e)
        return {}
