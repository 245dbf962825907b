"""Inference passes that compute from parameters ahead of time.

Both need ``freeze=True`` (the user promises parameters and buffers do not change after
the capture: the folded values are computed once) and gradients off during the capture
(folded values carry no gradient; the cache entry is guarded on ``paddle.is_grad_enabled()``
so a call with gradients on captures again without folding). After changing parameters of
a frozen model, call ``reset()`` on the optimized object.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional

import paddle
import paddle.nn.functional as F

from ..fx import Node, map_arg
from .effects import is_pure, leaving
from .manager import graph_pass

#: a folded value may be this many times larger than its inputs (a broadcast or an expand
#: is cheaper to run than to keep)
_GROWTH_LIMIT = 4
_SMALL = 1 << 16


def _resolve(gm, target: str) -> Any:
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _add_constant(gm, before: Node, value: paddle.Tensor, hint: str) -> Node:
    # numbered per graph module, not per process: the same graph folded twice must read
    # the same, or backends' compile caches (keyed by the code) would miss
    number = 0
    while hasattr(gm, f"_folded_{hint}_{number}"):
        number += 1
    name = f"_folded_{hint}_{number}"
    gm.register_buffer(name, value)
    with gm.graph.inserting_before(before):
        node = gm.graph.get_attr(name)
    node.meta["shape"] = list(value.shape)
    node.meta["dtype"] = str(value.dtype).replace("paddle.", "")
    return node


def _numel(t: paddle.Tensor) -> int:
    return int(math.prod(t.shape)) if t.shape else 1


@graph_pass("constant_fold", order=30, requires=("frozen", "no_grad"))
def fold_constants(gm, ctx) -> int:
    """Compute subgraphs that read only parameters and buffers once, at compile time."""
    values: Dict[Node, Any] = {}
    folded = 0
    graph = gm.graph
    # a constant handed out would be one tensor for every call: the caller's update in
    # place of one result would change the next (eager makes a new one each call)
    out = leaving(gm)
    for node in graph.nodes:
        if node.op == "get_attr":
            value = _resolve(gm, node.target)
            if isinstance(value, paddle.Tensor):
                values[node] = value
            continue
        if node.op not in ("call_function", "call_method") or not is_pure(node):
            continue
        if node in out:
            continue
        inputs = node.all_input_nodes
        if any(i not in values for i in inputs):
            continue
        result = _evaluate(node, values)
        if result is None:
            continue
        budget = max(sum(_numel(values[i]) for i in inputs), 1) * _GROWTH_LIMIT
        if _numel(result) > max(budget, _SMALL):
            continue
        new = _add_constant(gm, node, result, "const")
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        values[new] = result
        folded += 1
    return folded


def _evaluate(node: Node, values: Dict[Node, Any]) -> Optional[paddle.Tensor]:
    args = map_arg(node.args, values.__getitem__)
    kwargs = map_arg(node.kwargs, values.__getitem__)
    try:
        with paddle.no_grad():
            if node.op == "call_method":
                obj, *rest = args
                result = getattr(obj, node.target)(*rest, **kwargs)
            else:
                result = node.target(*args, **kwargs)
    except Exception:  # noqa: BLE001 - what cannot be computed now is left to run time
        return None
    return result.detach() if isinstance(result, paddle.Tensor) else None


_CONV_FUNCTIONS = {
    paddle.nn.Conv1D: F.conv1d,
    paddle.nn.Conv2D: F.conv2d,
    paddle.nn.Conv3D: F.conv3d,
}
_CHANNEL_FIRST = ("NC", "NCL", "NCHW", "NCDHW")


def _batch_norm_scale(bn):
    """(scale, shift) with bn(y) == y * scale + shift per channel, in eval mode."""
    var = bn._variance
    scale = 1.0 / paddle.sqrt(var + bn._epsilon)
    if bn.weight is not None:
        scale = scale * bn.weight
    shift = -bn._mean * scale
    if bn.bias is not None:
        shift = shift + bn.bias
    return scale, shift


def _foldable_bn(gm, node: Node):
    if node.op != "call_module" or node.kwargs or len(node.args) != 1:
        return None
    from paddle.nn.layer.norm import _BatchNormBase

    bn = getattr(gm, node.target, None)
    if not isinstance(bn, _BatchNormBase) or bn.training:
        return None
    if bn._use_global_stats is False or bn._data_format not in _CHANNEL_FIRST:
        return None
    producer = node.args[0]
    if not isinstance(producer, Node) or producer.op != "call_module":
        return None
    if list(producer.users) != [node] or producer.kwargs or len(producer.args) != 1:
        return None
    return bn, producer, getattr(gm, producer.target, None)


@graph_pass("bn_fold", order=20, requires=("frozen", "no_grad", "shapes"))
def fold_batch_norm(gm, ctx) -> int:
    """Fold an eval-mode BatchNorm into the Conv1D/2D/3D or Linear that feeds it."""
    graph = gm.graph
    folded = 0
    for node in graph.nodes:
        found = _foldable_bn(gm, node)
        if found is None:
            continue
        bn, producer, layer = found
        with paddle.no_grad():
            scale, shift = _batch_norm_scale(bn)
            if type(layer) in _CONV_FUNCTIONS:
                if layer._padding_mode != "zeros" or layer._data_format not in _CHANNEL_FIRST:
                    continue
                w = layer.weight
                weight = w * scale.reshape([-1] + [1] * (len(w.shape) - 1))
                fn = _CONV_FUNCTIONS[type(layer)]
                kwargs = dict(
                    stride=layer._stride,
                    padding=layer._padding,
                    dilation=layer._dilation,
                    groups=layer._groups,
                    data_format=layer._data_format,
                )
            elif type(layer) is paddle.nn.Linear:
                # the BatchNorm's channels are the Linear's features only for [N, C] input
                if len(producer.meta.get("shape", ())) != 2:
                    continue
                weight = layer.weight * scale.reshape([1, -1])
                fn = F.linear
                kwargs = {}
            else:
                continue
            bias = shift if layer.bias is None else layer.bias * scale + shift
        w_node = _add_constant(gm, producer, weight.detach(), "weight")
        b_node = _add_constant(gm, producer, bias.detach(), "bias")
        with graph.inserting_before(node):
            fused = graph.call_function(fn, (producer.args[0], w_node, b_node), kwargs)
        fused.meta.update({k: node.meta[k] for k in ("shape", "dtype") if k in node.meta})
        node.replace_all_uses_with(fused)
        graph.erase_node(node)
        graph.erase_node(producer)
        folded += 1
    return folded
