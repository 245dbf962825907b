"""``extract()``: write every graph the JIT captures from a call as a GraphNet sample.

The call runs through the JIT on a recording backend: each graph, as it is compiled, gets
a runner that keeps the tensors of its first run and the order in which the graphs run.
Each graph becomes a ``model.py`` whose ``GraphModule.forward`` takes the graph's weights
and inputs by name and calls the same Paddle functions (a call of a sub-layer becomes the
functional call that layer makes), with metas from the real tensors.
"""

from __future__ import annotations

import json
import os
import threading
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import paddle

from .. import plugins
from ..errors import JitError
from ..fx import codegen
from ..fx.node import Node
from ..hookspecs import hookimpl
from .writer import graph_net_info, meta_from_tensor, write_sample

#: the recording backend's name while ``extract()`` runs (it is registered only then)
BACKEND = "jit-extract"
INDEX_FILE = "extract_index.json"

_lock = threading.Lock()


class ExtractError(JitError):
    """A captured graph that cannot be written as a sample; the message says why."""


@dataclass
class ExtractedGraph:
    #: the sample folder
    path: str
    #: the frame the graph was captured from (``forward``, ``forward__resume_at_40``)
    frame: str
    op_count: int
    #: the tensors of its first run, by the names the metas give them
    values: Dict[str, Any] = field(default_factory=dict)
    #: its outputs on that run, flattened
    outputs: List[Any] = field(default_factory=list)


@dataclass
class ExtractResult:
    """What ``extract()`` wrote: the model folder, one sample per graph, the order the
    graphs ran in (indices into ``graphs``), and the call's own result."""

    path: str
    graphs: List[ExtractedGraph]
    order: List[int]
    result: Any


@dataclass
class _Record:
    gm: Any
    args: Optional[Tuple[Any, ...]] = None
    outputs: Any = None
    #: the graph's parameters and buffers as they were before its first run (a layer in
    #: training mode updates some), by ``id`` of the live tensor
    state: Dict[int, Any] = field(default_factory=dict)


class _Recorder:
    def __init__(self):
        self.records: List[_Record] = []
        self.order: List[int] = []

    def compile(self, gm, example_inputs):
        index = len(self.records)
        record = _Record(gm)
        self.records.append(record)

        def run(*args):
            self.order.append(index)
            if record.args is None:
                record.args = tuple(_copy(a) for a in args)
                for t in list(gm.parameters()) + list(gm.buffers()):
                    record.state[id(t)] = t.detach().clone()
                out = gm.forward(*args)
                record.outputs = _copy(out)
                return out
            return gm.forward(*args)

        return run

    @hookimpl
    def jit_register_backends(self, register):
        register(
            BACKEND,
            self.compile,
            description="records each graph for jit_core.extract() (only while it runs)",
            dynamic_shapes=True,
        )


def _copy(value):
    if isinstance(value, paddle.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(v) for v in value)
    return value


def extract(
    fn_or_layer: Callable, *args, out: str, name: Optional[str] = None, **kwargs
) -> ExtractResult:
    """Run ``fn_or_layer(*args, **kwargs)`` through the JIT and write every graph it
    captured (those of resume functions after a graph break included) as a GraphNet
    sample under ``out/name``: the folder itself for a single graph, else one
    ``subgraph_N`` folder per graph, numbered in the order they were captured.
    ``extract_index.json`` there lists the graphs and the order they ran in."""
    import jit_core

    if name is None:
        name = getattr(fn_or_layer, "__name__", None) or type(fn_or_layer).__name__
    if not name or os.sep in name or name in (".", ".."):
        raise ValueError(f"extract() needs a plain folder name, got name={name!r}")
    recorder = _Recorder()
    plugin_name = f"jit_core.graphnet.extract.{id(recorder)}"
    with _lock:
        plugins.register_plugin(recorder, name=plugin_name)
        try:
            optimized = jit_core.optimize(fn_or_layer, backend=BACKEND, dynamic=False)
            result = optimized(*args, **kwargs)
        finally:
            plugins.unregister_plugin(plugin_name)
    frames = {}
    for ev in optimized._ctx.events:
        if ev.compiled and ev.entry is not None and ev.entry.graph_module is not None:
            frames[id(ev.entry.graph_module)] = ev.code_name
    ran = [i for i, r in enumerate(recorder.records) if r.args is not None]
    root = os.path.join(out, name)
    graphs: List[ExtractedGraph] = []
    number = {}
    for n, i in enumerate(ran):
        record = recorder.records[i]
        folder = root if len(ran) == 1 else os.path.join(root, f"subgraph_{n}")
        source, weights, inputs, values = graphnet_module(record.gm, record.args, record.state)
        weight_metas = [meta_from_tensor(w, t, orig) for w, t, orig in weights]
        input_metas = [meta_from_tensor(d, t, orig) for d, t, orig in inputs]
        write_sample(folder, source, weight_metas, input_metas, graph_net_info(name))
        op_count = sum(1 for node in record.gm.graph.nodes if node.op.startswith("call_"))
        frame = frames.get(id(record.gm), "graph")
        graphs.append(ExtractedGraph(folder, frame, op_count, values, _flat(record.outputs)))
        number[i] = n
    order = [number[i] for i in recorder.order if i in number]
    index = {
        "model_name": name,
        "graphs": [
            {"sample": os.path.relpath(g.path, root), "frame": g.frame, "ops": g.op_count}
            for g in graphs
        ],
        "order": [os.path.relpath(graphs[i].path, root) for i in order],
    }
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, INDEX_FILE), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    return ExtractResult(root, graphs, order, result)


def _flat(value) -> List[Any]:
    if isinstance(value, paddle.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat(v)]
    return []


# -- model.py from a graph ---------------------------------------------------------------

_F = "paddle.nn.functional"


def _layer_call(layer, x: str, w: Callable[[Any, str], str]) -> str:
    """The functional call that ``layer(x)`` makes; ``w(tensor, attr)`` names a weight."""
    nn = paddle.nn
    kind = type(layer)

    def opt(t, attr):
        return "None" if t is None else w(t, attr)

    if isinstance(layer, nn.Linear):
        return f"{_F}.linear({x}, {w(layer.weight, 'weight')}, {opt(layer.bias, 'bias')})"
    if isinstance(layer, (nn.Conv1D, nn.Conv2D, nn.Conv3D)):
        if getattr(layer, "_padding_mode", "zeros") != "zeros":
            raise ExtractError(f"{kind.__name__} with padding_mode={layer._padding_mode!r}")
        fn = {nn.Conv1D: "conv1d", nn.Conv2D: "conv2d", nn.Conv3D: "conv3d"}[
            next(c for c in (nn.Conv1D, nn.Conv2D, nn.Conv3D) if isinstance(layer, c))
        ]
        return (
            f"{_F}.{fn}({x}, {w(layer.weight, 'weight')}, {opt(layer.bias, 'bias')}, "
            f"stride={layer._stride!r}, padding={layer._padding!r}, "
            f"dilation={layer._dilation!r}, groups={layer._groups!r}, "
            f"data_format={layer._data_format!r})"
        )
    if isinstance(layer, nn.layer.norm._BatchNormBase):
        return (
            f"{_F}.batch_norm({x}, {w(layer._mean, '_mean')}, {w(layer._variance, '_variance')}, "
            f"{opt(layer.weight, 'weight')}, {opt(layer.bias, 'bias')}, "
            f"training={layer.training!r}, momentum={layer._momentum!r}, "
            f"epsilon={layer._epsilon!r}, data_format={layer._data_format!r}, "
            f"use_global_stats={layer._use_global_stats!r})"
        )
    if isinstance(layer, nn.LayerNorm):
        return (
            f"{_F}.layer_norm({x}, {list(layer._normalized_shape)!r}, "
            f"{opt(layer.weight, 'weight')}, {opt(layer.bias, 'bias')}, {layer._epsilon!r})"
        )
    if isinstance(layer, nn.Embedding):
        if getattr(layer, "_max_norm", None) is not None:
            raise ExtractError("Embedding with max_norm")
        return (
            f"{_F}.embedding({x}, {w(layer.weight, 'weight')}, "
            f"padding_idx={layer._padding_idx!r}, sparse={layer._sparse!r})"
        )
    if isinstance(layer, nn.Dropout):
        if not layer.training and layer.mode == "upscale_in_train":
            return x  # what the layer returns in eval mode: its input, as it is
        return (
            f"{_F}.dropout({x}, p={layer.p!r}, axis={layer.axis!r}, "
            f"training={layer.training!r}, mode={layer.mode!r})"
        )
    if isinstance(layer, nn.Softmax):
        return f"{_F}.softmax({x}, axis={layer._axis!r})"
    if isinstance(layer, nn.GELU):
        return f"{_F}.gelu({x}, approximate={layer._approximate!r})"
    simple = {
        nn.ReLU: "relu",
        nn.Sigmoid: "sigmoid",
        nn.Tanh: "tanh",
        nn.Silu: "silu",
        nn.Hardswish: "hardswish",
    }
    for cls, fn in simple.items():
        if type(layer) is cls:
            return f"{_F}.{fn}({x})"
    if isinstance(layer, nn.MaxPool2D):
        return (
            f"{_F}.max_pool2d({x}, kernel_size={layer.ksize!r}, stride={layer.stride!r}, "
            f"padding={layer.padding!r}, ceil_mode={layer.ceil_mode!r}, "
            f"return_mask={layer.return_mask!r}, data_format={layer.data_format!r})"
        )
    if isinstance(layer, nn.AdaptiveAvgPool2D):
        return (
            f"{_F}.adaptive_avg_pool2d({x}, output_size={layer._output_size!r}, "
            f"data_format={layer._data_format!r})"
        )
    if isinstance(layer, nn.Flatten):
        return (
            f"paddle.flatten({x}, start_axis={layer.start_axis!r}, stop_axis={layer.stop_axis!r})"
        )
    if type(layer) is nn.Identity:
        return x
    raise ExtractError(
        f"a call of the sub-layer {kind.__module__}.{kind.__qualname__} has no functional "
        "form extract() knows"
    )


class _Names(codegen._Namespace):
    """The code generator's namespace, with the graph's values renamed for a sample:
    inputs ``data_N``, weights ``parameter_N``."""

    def __init__(self, names: Dict[Node, str], weight: Callable[[Any, str], str]):
        super().__init__()
        self.names = names
        self.weight = weight

    def arg(self, value: Any) -> str:
        if isinstance(value, Node):
            return self.names[value]
        return self.constant(value)

    def constant(self, value: Any) -> str:
        if isinstance(value, paddle.Tensor):
            return self.weight(value, "")
        return super().constant(value)


def graphnet_module(
    gm, args, state: Optional[Dict[int, Any]] = None
) -> Tuple[str, list, list, Dict[str, Any]]:
    """``model.py`` for graph module ``gm`` run on ``args``; the weights and the inputs as
    ``(name, tensor, original name)``, and every tensor by its name. ``state`` maps the
    ``id`` of a live parameter or buffer to its value to write instead."""
    weights: List[Tuple[str, Any, Optional[str]]] = []
    weight_ids: Dict[int, str] = {}
    inputs: List[Tuple[str, Any, Optional[str]]] = []
    values: Dict[str, Any] = {}

    def weight(tensor, path: str) -> str:
        if id(tensor) not in weight_ids:
            name = f"parameter_{len(weights)}"
            weight_ids[id(tensor)] = name
            value = (state or {}).get(id(tensor))
            if value is None:
                value = tensor.detach().clone()
            weights.append((name, value, path or getattr(tensor, "name", None)))
            values[name] = weights[-1][1]
        return weight_ids[id(tensor)]

    names: Dict[Node, str] = {}
    ns = _Names(names, weight)
    params: List[str] = []
    body: List[str] = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(args):
        raise ExtractError(f"the graph takes {len(placeholders)} inputs, its run had {len(args)}")
    # each value deleted after its last use, as GraphNet's own samples do: eager Paddle
    # runs a model.py that keeps every intermediate up to 2x slower (its CPU allocator)
    frees = codegen._frees_after(list(gm.graph.nodes))
    taken = set()
    for node, value in zip(placeholders, args):
        if isinstance(value, paddle.Tensor):
            name = f"data_{len(inputs)}"
            inputs.append((name, value, node.name))
            values[name] = value
            params.append(name)
            names[node] = name
        else:
            # a Python value the graph was specialized on: written in as a constant
            names[node] = node.name
            body.append(f"{node.name} = {ns.constant(value)}")
        taken.add(names[node])
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            body.append(f"return {ns.arg(node.args[0])}")
            continue
        local = node.name
        while local in taken or local.startswith(("parameter_", "data_")):
            local += "_"
        names[node] = local
        taken.add(local)
        if node.op == "get_attr":
            obj = gm
            for part in node.target.split("."):
                obj = getattr(obj, part)
            expr = weight(obj, node.target) if isinstance(obj, paddle.Tensor) else ns.constant(obj)
        elif node.op == "call_module":
            layer = gm
            for part in node.target.split("."):
                layer = getattr(layer, part)
            if len(node.args) != 1 or node.kwargs:
                raise ExtractError(
                    f"the call of sub-layer {node.target} takes {len(node.args)} arguments"
                    f"{' and keywords' if node.kwargs else ''}; extract() writes one-input calls"
                )

            def w(t, attr, _target=node.target):
                return weight(t, f"{_target}.{attr}")

            expr = _layer_call(layer, ns.arg(node.args[0]), w)
        elif node.op == "call_method":
            obj, *rest = node.args
            expr = f"{ns.arg(obj)}.{node.target}({codegen._call_args(ns, rest, node.kwargs)})"
        else:
            expr = codegen._function_call(ns, node)
        body.append(f"{local} = {expr}")
        if frees[node]:
            body.append("del " + ", ".join(names[n] for n in frees[node]))
    if not body or not body[-1].startswith("return"):
        body.append("return None")
    header = _imports(ns.globals)
    sig = ", ".join(["self"] + [w[0] for w in weights] + params)
    lines = header + [
        "",
        "",
        "class GraphModule(paddle.nn.Layer):",
        "    def __init__(self):",
        "        super().__init__()",
        "",
        f"    def forward({sig}):",
    ]
    lines += [f"        {line}" for line in body]
    return "\n".join(lines) + "\n", weights, inputs, values


def _imports(globals_: Dict[str, Any]) -> List[str]:
    imports = {"import paddle"}
    assigns = []
    for name, obj in sorted(globals_.items()):
        if isinstance(obj, types.ModuleType):
            if obj.__name__ == name:
                imports.add(f"import {name}")
            else:
                imports.add(f"import {obj.__name__} as {name}")
            continue
        if type(obj).__module__ == "numpy":
            imports.add("import numpy")
            assigns.append(f"{name} = numpy.{type(obj).__name__}({obj.item()!r})")
            continue
        mod = getattr(obj, "__module__", None)
        qual = getattr(obj, "__qualname__", None)
        if mod and qual and "<" not in qual and codegen._resolves(f"{mod}.{qual}", obj):
            imports.add(f"import {mod}")
            assigns.append(f"{name} = {mod}.{qual}")
            continue
        raise ExtractError(
            f"the graph refers to {obj!r}, which a sample's model.py cannot import or write"
        )
    return sorted(imports) + ([""] + assigns if assigns else [])


__all__ = ["extract", "ExtractResult", "ExtractedGraph", "ExtractError"]
