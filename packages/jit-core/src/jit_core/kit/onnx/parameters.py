"""Parameters of an exported graph that stay live: the tensors a graph reads, and the
rewrite that turns them from baked-in constants into model inputs.

Every ONNX-based backend that keeps parameters current (the default, ``freeze=False``)
feeds them on each run, so ``set_state_dict`` or an optimizer step is seen by the next call.
"""

from __future__ import annotations

from typing import Dict

import paddle

from .export import OnnxExportError


def live_tensors(gm) -> Dict[str, paddle.Tensor]:
    """The parameters and buffers the graph reads, by the name Paddle gave them (the name
    they have in the exported model)."""
    found: Dict[str, paddle.Tensor] = {}
    for node in gm.graph.nodes:
        if node.op == "call_module":
            layer = getattr(gm, node.target)
            tensors = list(layer.parameters()) + list(layer.buffers())
        elif node.op == "get_attr":
            value = gm
            for part in node.target.split("."):
                value = getattr(value, part)
            tensors = [value] if isinstance(value, paddle.Tensor) else []
        else:
            continue
        for t in tensors:
            found[t.name] = t
    return found


def lift_parameters(model, tensors: Dict[str, paddle.Tensor]) -> None:
    """Turn the constants that hold parameters and buffers into model inputs, so that
    every run reads their current values (``set_state_dict``, an optimizer step) instead
    of the values at export time. Every tensor must be found by name: one that
    paddle2onnx transformed could not be kept current, and the export is refused."""
    from onnx import helper

    graph = model.graph
    found = set()
    nodes = []
    for node in graph.node:
        name = node.output[0] if len(node.output) == 1 else None
        if node.op_type == "Constant" and name in tensors:
            t = node.attribute[0].t
            graph.input.append(helper.make_tensor_value_info(name, t.data_type, t.dims))
            found.add(name)
        else:
            nodes.append(node)
    for init in list(graph.initializer):
        if init.name in tensors:
            graph.input.append(helper.make_tensor_value_info(init.name, init.data_type, init.dims))
            graph.initializer.remove(init)
            found.add(init.name)
    # A non-persistable buffer (an RNN's dropout state) is scratch space that an op may
    # take without reading it in inference; paddle2onnx leaves it out of the model then.
    # Parameters and persistable buffers must all be found.
    missing = [n for n, t in tensors.items() if n not in found and t.persistable]
    if missing:
        raise OnnxExportError(
            f"the exported model does not hold the parameters {', '.join(missing[:5])} "
            "under their names, so they could not stay current; optimize(..., "
            "freeze=True) bakes parameters into the model instead"
        )
    del graph.node[:]
    graph.node.extend(nodes)
