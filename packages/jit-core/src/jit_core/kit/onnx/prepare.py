"""Exact rewrites of a graph copy before paddle2onnx sees it.

Each one works around a paddle2onnx 2.1 problem met by the conformance suite, and each
computes the same values as the original:

- ``x + c`` / ``x - c`` with a Python number: Paddle records ``scale(x, 1, bias=c)``, which
  paddle2onnx turns into ``x`` (the bias is lost). It becomes ``paddle.add(x, full(c))``.
- ``x.mean()``, ``x.std()`` and ``x.var()`` over all axes: paddle2onnx aborts ("Can not
  get input 'axis(dim)' value", said of ``numel`` for the last two); the axes are spelt
  out.
- ``AdaptiveAvgPool2D`` of a 1x1 map: paddle2onnx emits an AveragePool with stride 0,
  which ONNX Runtime refuses; averaging one value is a broadcast, so it becomes ``expand``.
- activations whose attributes paddle2onnx drops or misreads, spelt out in elementary
  operators in the order Paddle's kernels compute them (the functional form and the layer
  alike; the results differ from eager Paddle's by float rounding, about 1e-7):

  - ``relu`` is ``x > 0 ? x : 0`` in Paddle, so a NaN becomes 0 (and -0.0 becomes 0.0);
    ONNX's ``Relu`` keeps the NaN, and a model with a NaN or an infinity in its input
    gave NaNs where eager Paddle gives numbers. It becomes ``where(x > 0, x, 0)``.

  - ``gelu(x, approximate=True)`` was exported as exact GELU, a silent difference of up
    to 5e-4; it becomes ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``.
  - ``leaky_relu`` (any slope, the default too) was exported with a wrong slope; it
    becomes ``where(x > 0, x, x * slope)``.
  - ``hardtanh`` with bounds other than -1, 1 was exported with the default bounds; it
    becomes ``clip(x, min, max)``.
  - ``softplus`` aborts paddle2onnx ("Only support softplus with beta == 1.0 and
    threshold == 20.0", said of the defaults too on Paddle 3.3); it becomes
    ``where(x * beta > threshold, x, log(1 + exp(x * beta)) / beta)``, Paddle's kernel.
  - ``celu`` has no converter; it becomes ``where(x > 0, x, alpha * (exp(x / alpha) - 1))``.
  - ``log_sigmoid`` was exported as ``log(sigmoid(x))``, which is ``-inf`` below x = -88
    and loses the small values; it becomes Paddle's kernel,
    ``-m - log(exp(-m) + exp(-x - m))`` with ``m = max(-x, 0)``.

- in-place updates: ``_C_ops.relu_(t)``, ``_C_ops.add_(t, y)``... (the form of Paddle's
  program dumps) stay ``pd_op.relu_`` in the static program, which paddle2onnx has no
  converter for; ``t.multiply_(y)`` on a tensor that had a view taken (``flatten(t)``)
  makes ``to_static`` refuse the whole program. They become ``_C_ops.relu(t)``,
  ``t.multiply(y)``...: the capture keeps such an update only on a tensor the graph made
  whose views are not read after it, and reads the update through the node it returns,
  so the out-of-place op gives every later node the same value.
- a reduction of a 0-D tensor (``x[0].sum()``), which aborts paddle2onnx, is its input
  (cast where the reduction's dtype differs).
- ``paddle.stack`` of tensors with a dimension of size 1, reduced after it, is exported
  with its inputs taken for 0-D ones, which ONNX Runtime refuses; every ``stack`` becomes
  ``concat`` of its inputs each unsqueezed at the axis, the same tensor.
- an output held twice (or an input returned as it is) becomes a copy of its own, since
  paddle2onnx exports one output per variable.
- inputs that nothing reads: ``paddle.jit.save`` refuses them, so they are dropped (the
  runtime feeds inputs by name).
"""

from __future__ import annotations

import math
import operator
import sys
from typing import Any, Callable, Dict, Optional, Tuple

import paddle

from ...fx import Graph, Node
from ...shapes import size


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


#: reductions that paddle2onnx 2.1 cannot export over all axes, with the keywords that
#: may stay as they are when the axes are spelt out
_OVER_ALL_AXES = {
    "mean": {"axis", "keepdim"},
    "std": {"axis", "unbiased", "keepdim"},
    "var": {"axis", "unbiased", "keepdim"},
}


def _mean_over_all(graph: Graph) -> int:
    n = 0
    for node in graph.nodes:
        name = node.target if node.op == "call_method" else None
        if node.op == "call_function":
            fn = node.target
            name = next((r for r in _OVER_ALL_AXES if getattr(paddle, r, None) is fn), None)
        if name not in _OVER_ALL_AXES or len(node.args) != 1:
            continue
        if node.kwargs.get("axis") is not None or set(node.kwargs) - _OVER_ALL_AXES[name]:
            continue
        shape = node.args[0].meta.get("shape") if isinstance(node.args[0], Node) else None
        if not shape:
            continue
        node.kwargs = {**node.kwargs, "axis": list(range(len(shape)))}
        n += 1
    return n


_REDUCTIONS = ("sum", "mean", "max", "min", "prod", "amax", "amin")


def _reduction_of_a_scalar(graph: Graph) -> int:
    """A reduction of a 0-D tensor (``x[0].sum()``) aborts paddle2onnx ("In arrange(),
    end must be greater than start"): it is the value itself (cast where the reduction
    changes the dtype, as ``sum`` of an int32 does)."""
    n = 0
    for node in list(graph.nodes):
        name = node.target if node.op == "call_method" else None
        if node.op == "call_function":
            fn = node.target
            name = next((r for r in _REDUCTIONS if getattr(paddle, r, None) is fn), None)
        if name not in _REDUCTIONS or not node.args or not isinstance(node.args[0], Node):
            continue
        x = node.args[0]
        if x.meta.get("shape") != [] or node.meta.get("shape") != []:
            continue
        replacement = x
        if node.meta.get("dtype") != x.meta.get("dtype") and node.meta.get("dtype"):
            with graph.inserting_before(node):
                replacement = graph.call_function(paddle.cast, (x, node.meta["dtype"]))
            replacement.meta = dict(node.meta)
        node.replace_all_uses_with(replacement)
        graph.erase_node(node)
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


def _functions(name: str) -> Tuple[Callable, ...]:
    """``paddle.nn.functional.<name>`` and the function it wraps (Paddle 3.3 puts a
    wrapper in front of some activations; a graph may name either)."""
    F = paddle.nn.functional
    found = [getattr(F, name, None), getattr(getattr(F, "activation", None), name, None)]
    return tuple(f for f in found if f is not None)


def _argument(node: Node, index: int, name: str, default: Any) -> Any:
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def _activation(gm, node: Node) -> Optional[Tuple[str, Node, Dict[str, Any]]]:
    """(activation name, input, attributes) for a call of one of the activations that
    ``_activations`` rewrites, with every attribute a Python value; else None."""
    if node.op == "call_function" and node.target is getattr(paddle._C_ops, "relu", None):
        x = node.args[0] if len(node.args) == 1 and not node.kwargs else None
        return ("relu", x, {}) if isinstance(x, Node) else None
    if node.op == "call_function":
        name = next((k for k in _ACTIVATION_PARAMS if node.target in _functions(k)), None)
        if name is None:
            return None
        params = _ACTIVATION_PARAMS[name]
        if set(node.kwargs) - {p for p, _ in params} - {"x", "name"}:
            return None
        attrs = {p: _argument(node, i + 1, p, default) for i, (p, default) in enumerate(params)}
        x = node.args[0] if node.args else node.kwargs.get("x")
    elif node.op == "call_module":
        layer = getattr(gm, node.target, None)
        name = next((k for k, (c, _) in _ACTIVATION_LAYERS.items() if type(layer) is c), None)
        if name is None or len(node.args) != 1 or node.kwargs:
            return None
        fields = _ACTIVATION_LAYERS[name][1]
        attrs = {p: getattr(layer, field, None) for p, field in fields.items()}
        x = node.args[0]
    else:
        return None
    if not isinstance(x, Node) or any(isinstance(v, Node) for v in attrs.values()):
        return None
    return name, x, attrs


#: the activations ``_activations`` looks at: their attributes after ``x``, in order
_ACTIVATION_PARAMS = {
    "relu": (),
    "gelu": (("approximate", False),),
    "leaky_relu": (("negative_slope", 0.01),),
    "hardtanh": (("min", -1.0), ("max", 1.0)),
    "softplus": (("beta", 1.0), ("threshold", 20.0)),
    "celu": (("alpha", 1.0),),
    "log_sigmoid": (),
}
_ACTIVATION_LAYERS = {
    "relu": (paddle.nn.ReLU, {}),
    "gelu": (paddle.nn.GELU, {"approximate": "_approximate"}),
    "leaky_relu": (paddle.nn.LeakyReLU, {"negative_slope": "_negative_slope"}),
    "hardtanh": (paddle.nn.Hardtanh, {"min": "_min", "max": "_max"}),
    "softplus": (paddle.nn.Softplus, {"beta": "_beta", "threshold": "_threshold"}),
    "celu": (paddle.nn.CELU, {"alpha": "_alpha"}),
    "log_sigmoid": (paddle.nn.LogSigmoid, {}),
}
_FLOATS = ("float16", "bfloat16", "float32", "float64")


class _Emitter:
    """Inserts elementwise calls before ``node``, each with ``node``'s shape and dtype;
    Python numbers become 0-D tensors of that dtype (``x * 0.5`` would be a ``scale``)."""

    def __init__(self, graph: Graph, node: Node, dtype: str):
        self.graph, self.node, self.dtype = graph, node, dtype

    def const(self, value: float) -> Node:
        new = self.call(paddle.full, [], float(value), self.dtype)
        new.meta = {"shape": [], "dtype": self.dtype}
        return new

    def call(self, fn: Callable, *args) -> Node:
        with self.graph.inserting_before(self.node):
            new = self.graph.call_function(fn, args)
        new.meta = {k: self.node.meta[k] for k in ("shape", "dtype") if k in self.node.meta}
        return new

    def mul(self, a: Node, b: Any) -> Node:
        return self.call(paddle.multiply, a, b if isinstance(b, Node) else self.const(b))

    def replace(self, result: Node) -> None:
        result.meta = dict(self.node.meta)
        self.node.replace_all_uses_with(result)
        self.graph.erase_node(self.node)


def _spelt_out(e: _Emitter, name: str, x: Node, a: Dict[str, Any]) -> Optional[Node]:
    """What replaces the activation ``name`` of ``x``, or None where the export is right."""
    if name == "relu":
        # Paddle's kernel: x > 0 ? x : 0, so NaN and -0.0 give 0; ONNX's Relu (fused into
        # a convolution or not) keeps both. Zeros of x's shape, not a 0-D constant: a
        # broadcast over dynamic sizes exports as a Max of shapes TVM cannot import
        zeros = e.call(paddle.zeros_like, x)
        positive = e.call(paddle.greater_than, x, zeros)
        positive.meta["dtype"] = "bool"
        return e.call(paddle.where, positive, x, zeros)
    if name == "gelu":
        if a["approximate"] not in (True, "tanh"):
            return None
        # Paddle's kernel: x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
        cube = e.mul(e.mul(x, x), x)
        inner = e.call(paddle.add, x, e.mul(cube, 0.044715))
        t = e.call(paddle.tanh, e.mul(inner, math.sqrt(2.0 / math.pi)))
        return e.mul(e.mul(x, 0.5), e.call(paddle.add, e.const(1.0), t))
    if name == "leaky_relu":
        if not _is_number(a["negative_slope"]):
            return None
        positive = e.call(paddle.greater_than, x, e.const(0.0))
        positive.meta["dtype"] = "bool"
        return e.call(paddle.where, positive, x, e.mul(x, a["negative_slope"]))
    if name == "hardtanh":
        low, high = a["min"], a["max"]
        if not (_is_number(low) and _is_number(high)) or (low, high) == (-1.0, 1.0):
            return None
        return e.call(paddle.clip, x, e.const(low), e.const(high))
    if name == "softplus":
        beta, threshold = a["beta"], a["threshold"]
        if not (_is_number(beta) and _is_number(threshold)) or beta == 0:
            return None
        # Paddle's kernel: x * beta > threshold ? x : log(1 + exp(x * beta)) / beta
        scaled = x if beta == 1 else e.mul(x, beta)
        above = e.call(paddle.greater_than, scaled, e.const(threshold))
        above.meta["dtype"] = "bool"
        soft = e.call(paddle.log, e.call(paddle.add, e.const(1.0), e.call(paddle.exp, scaled)))
        if beta != 1:
            soft = e.call(paddle.divide, soft, e.const(beta))
        return e.call(paddle.where, above, x, soft)
    if name == "celu":
        alpha = a["alpha"]
        if not _is_number(alpha) or alpha == 0:
            return None
        positive = e.call(paddle.greater_than, x, e.const(0.0))
        positive.meta["dtype"] = "bool"
        grown = e.call(paddle.exp, e.call(paddle.divide, x, e.const(alpha)))
        negative = e.mul(e.call(paddle.subtract, grown, e.const(1.0)), alpha)
        return e.call(paddle.where, positive, x, negative)
    if name == "log_sigmoid":
        # Paddle's kernel: m = max(-x, 0); -m - log(exp(-m) + exp(-x - m))
        minus = e.call(paddle.neg, x)
        m = e.call(paddle.maximum, minus, e.const(0.0))
        total = e.call(
            paddle.add,
            e.call(paddle.exp, e.call(paddle.neg, m)),
            e.call(paddle.exp, e.call(paddle.subtract, minus, m)),
        )
        return e.call(paddle.subtract, e.call(paddle.neg, m), e.call(paddle.log, total))
    return None


def _activations(gm, graph: Graph) -> int:
    n = 0
    for node in graph.nodes:
        found = _activation(gm, node)
        if found is None:
            continue
        name, x, attrs = found
        dtype = x.meta.get("dtype")
        if dtype not in _FLOATS or node.meta.get("dtype") != dtype:
            continue
        e = _Emitter(graph, node, dtype)
        result = _spelt_out(e, name, x, attrs)
        if result is not None:
            e.replace(result)
            n += 1
    return n


def _out_of_place_updates(graph: Graph) -> int:
    n = 0
    for node in graph.nodes:
        twin = out_of_place_twin(node)
        if twin is not None:
            if getattr(node.target, "__name__", "") in _FILLS and node.op == "call_function":
                # full_(out, shape, value, ...) is full(shape, value, ...) of out's place
                if not node.args or "output" in node.kwargs:
                    continue
                node.args = node.args[1:]
            node.target = twin
            n += 1
    return n


def out_of_place_twin(node) -> Any:
    """The out-of-place form of an update in place the capture marked
    (``meta["inplace"]``: the graph already reads its result where Paddle would read the
    updated tensor): ``"multiply"`` for ``x.multiply_(y)``, ``_C_ops.relu`` for
    ``_C_ops.relu_``, ``F.relu`` for ``F.relu_``; None for any other node."""
    if not node.meta.get("inplace") or node.op not in ("call_function", "call_method"):
        return None
    if node.op == "call_method":
        # x.multiply_(y): to_static refuses one whose tensor has a view taken
        # ("multiply_'s output variable is a viewed Tensor in dygraph")
        name = node.target if isinstance(node.target, str) else ""
        if _is_update_name(name) and callable(getattr(paddle.Tensor, name[:-1], None)):
            return name[:-1]
        return None
    name = getattr(node.target, "__name__", "") or ""
    if not _is_update_name(name):
        return None
    # _C_ops.relu_, paddle.subtract_, F.relu_: the twin from the same module
    module = sys.modules.get(getattr(node.target, "__module__", None) or "")
    for home in (paddle._C_ops, module):
        if home is not None and getattr(home, name, None) is node.target:
            return getattr(home, name[:-1], None)
    return None


#: _C_ops updates whose first argument is the tensor they fill, which the out-of-place
#: op of the same name does not take: called with it, Paddle's static program builder
#: dies of an uncaught std::length_error (SIGABRT) where eager raises a TypeError
_FILLS = frozenset(("assign_value_", "full_"))


def _is_update_name(name: str) -> bool:
    return name.endswith("_") and not name.endswith("__") and len(name) > 1


def _stack_as_concat(graph: Graph) -> int:
    """``paddle.stack(xs, axis)`` of tensors with a dimension of size 1, reduced after it
    (``stack([x, y]).sum(0)`` at x of shape [1]), is exported with its inputs taken for
    0-D ones, and ONNX Runtime refuses the model ("axis must be in [-rank, rank-1]").
    ``concat`` of the inputs each unsqueezed at ``axis`` is the same tensor."""
    n = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not paddle.stack:
            continue
        xs = _argument(node, 0, "x", None)
        axis = _argument(node, 1, "axis", 0)
        if set(node.kwargs) - {"x", "axis"} or not isinstance(axis, int):
            continue
        if not isinstance(xs, (list, tuple)) or not xs or not all(isinstance(t, Node) for t in xs):
            continue
        parts = []
        with graph.inserting_before(node):
            for t in xs:
                part = graph.call_function(paddle.unsqueeze, (t, axis))
                shape = t.meta.get("shape")
                if shape is not None:
                    rank = len(shape) + 1
                    at = axis % rank
                    part.meta = {"shape": shape[:at] + [1] + shape[at:]}
                    if "dtype" in t.meta:
                        part.meta["dtype"] = t.meta["dtype"]
                parts.append(part)
        _replace_with_call(graph, node, paddle.concat, (parts, axis))
        n += 1
    return n


def _variable(node: Node) -> Any:
    """What ``node`` is in the static program: ``split(c, 2)[1]`` read twice is two
    getitem nodes but one variable, the split's second output."""
    if (
        node.op == "call_function"
        and node.target is operator.getitem
        and isinstance(node.args[0], Node)
    ):
        return (_variable(node.args[0]), repr(node.args[1]))
    return node


def _distinct_outputs(graph: Graph) -> int:
    """An output held twice (CSE merged ``x.mean()`` and ``x.mean()``, a frame returns
    one tensor twice, or two reads of one item of a ``split``) is one variable to
    paddle2onnx, which then exports one output where the graph has two: each repeat
    becomes a copy of its own."""
    out = graph.nodes[-1]
    items = graph.output_values()
    seen: set = set()
    fresh = []
    n = 0
    for item in items:
        key = _variable(item) if isinstance(item, Node) else None
        if key is not None and (key in seen or item.op == "placeholder"):
            with graph.inserting_before(out):
                copy = graph.call_function(paddle.assign, (item,))
            copy.meta = dict(item.meta)
            item, n = copy, n + 1
        seen.add(key)
        fresh.append(item)
    if n:
        out.args = (tuple(fresh),)
    return n


def _sizes_to_constants(graph: Graph, dynamic: bool) -> int:
    """A size the graph reads (``shapes.size``) that the exported model fixes is the
    constant it has: every size where the export is static, those of static dimensions of
    the inputs where it is dynamic. An input whose sizes were all it was read for is then
    unused (a static program refuses inputs nothing depends on)."""
    n = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not size:
            continue
        tensor, dim = node.args
        shape = tensor.meta.get("shape") if isinstance(tensor, Node) else None
        if shape is None:
            continue
        if dynamic and not (
            tensor.op == "placeholder"
            and dim % len(shape) not in tensor.meta.get("dynamic_dims", ())
        ):
            continue
        for user in list(node.users):
            user.replace_input_with(node, int(shape[dim]))
        graph.erase_node(node)
        n += 1
    return n


def _keep_what_reaches_outputs(graph: Graph) -> int:
    """The exported model computes its outputs and nothing else. A node they do not need
    stays in the captured graph when it updates a tensor in place (``t.scale_(1.5)`` of
    a tensor nothing returns, made out of place above); exported, it leaves an input that
    reaches no output, and ``paddle.jit.save`` refuses the program ("feed_var ... is not
    involved in the target_vars calculation"). Found by the fuzzer on onnxrt."""
    needed = set()
    stack = [graph.nodes[-1]]
    while stack:
        node = stack.pop()
        if node not in needed:
            needed.add(node)
            stack.extend(node.all_input_nodes)
    dead = [n for n in graph.nodes if n.op not in ("placeholder", "output") and n not in needed]
    # users first: a user of a dead node is dead too
    for node in reversed(dead):
        graph.erase_node(node)
    return len(dead)


def _drop_unused_inputs(graph: Graph) -> int:
    unused = [n for n in graph.nodes if n.op == "placeholder" and not n.users]
    for node in unused:
        graph.erase_node(node)
    return len(unused)


def prepare_graph(gm, dynamic: bool = False) -> Graph:
    """A copy of ``gm``'s graph with the rewrites above applied. ``dynamic``: the model
    serves every size of some dimensions, so no rewrite may rely on the example's sizes
    (ranks do not change)."""
    graph = gm.graph.copy()
    _sizes_to_constants(graph, dynamic)
    _scalar_add_sub(graph)
    _reduction_of_a_scalar(graph)
    _mean_over_all(graph)
    if not dynamic:
        _adaptive_pool_of_one(gm, graph)
    # after the updates are out of place: ``relu_`` is then a ``relu`` to spell out
    _out_of_place_updates(graph)
    _activations(gm, graph)
    _stack_as_concat(graph)
    _distinct_outputs(graph)
    _keep_what_reaches_outputs(graph)
    _drop_unused_inputs(graph)
    return graph
