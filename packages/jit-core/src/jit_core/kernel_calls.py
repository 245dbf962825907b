"""The ``paddle`` backend's lowering: an API call in a graph becomes the kernel calls that
the API makes.

Eager Paddle reaches a kernel through a Python wrapper that checks and normalizes its
arguments on every call: ``F.conv2d`` costs 18 us on a small input where its kernel,
``_C_ops.conv2d``, costs 6 us; ``F.linear`` reads a flag (4 us) before ``_C_ops.linear``.
In a captured graph those arguments are constants and the shapes are guarded, so that
work is done once, here, and the generated code calls the kernels itself. That is how
the ``paddle`` backend runs small graphs faster than eager Paddle with the same kernels.

Each rule mirrors the dynamic-mode branch of one API, as Paddle 3.0 to 3.3 write it on a
build without CUDA (``TESTED``); on other versions or builds nothing is lowered. A rule
lowers a call only when every argument it reads is a constant (or a tensor whose sizes
it does not read, or reads from a guarded static shape) and returns None otherwise: the
call stays as captured. Paddle's own helpers normalize paddings and strides, so that
logic is not copied. Paddle's layers (``call_module`` nodes) are lowered to the API call
their ``forward`` makes (``_LAYER_RULES``), their configuration read now, their
parameters read through the layer at each call.

Each lowered call is checked when the graph is compiled: the API (or layer) and its
kernel calls run on the same made-up inputs of the call's dtypes and must agree bit for
bit; a call that does not stays as captured (``_agrees``). A call too large for the check
to be cheap is not lowered: its wrapper is a small part of its time. ``explain()`` says
what was lowered, and why not.
"""

from __future__ import annotations

import inspect
import operator
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import paddle
import paddle.nn.functional as F

from .fx import Graph, GraphModule, Node, map_arg

#: the Paddle versions whose API wrappers the rules were written from and tested against
TESTED = ("3.0.", "3.1.", "3.2.", "3.3.")


def why_not_lowered() -> str:
    """Why no rule applies in this process, or ""."""
    if not paddle.__version__.startswith(TESTED):
        return f"Paddle {paddle.__version__} is not one the rules were checked on"
    if paddle.is_compiled_with_cuda():
        return "this Paddle build has CUDA, where its wrappers choose kernels per device"
    return ""


def _kernel(name: str) -> Callable:
    # the same objects the API wrappers call
    return getattr(paddle._C_ops, name)


class _Emit:
    """Adds kernel calls before the node being lowered."""

    def __init__(self, graph: Graph, at: Node):
        self.graph = graph
        self.at = at
        #: (input, its channel axis or None) of a rule whose arguments depend on none of
        #: that input's sizes but the channels': the check may make the others small
        #: (``_agrees``)
        self.image: Optional[Tuple[Node, Optional[int]]] = None
        #: the nodes added, in order
        self.added: List[Node] = []

    def _added(self, node: Node) -> Node:
        self.added.append(node)
        return node

    def __call__(self, kernel: str, *args: Any) -> Node:
        with self.graph.inserting_before(self.at):
            return self._added(self.graph.call_function(_kernel(kernel), args))

    def item(self, value: Node, index: int) -> Node:
        with self.graph.inserting_before(self.at):
            return self._added(self.graph.call_function(operator.getitem, (value, index)))

    def method(self, name: str, *args: Any) -> Node:
        with self.graph.inserting_before(self.at):
            return self._added(self.graph.call_method(name, args))

    def attr(self, path: str, value: Any) -> Node:
        with self.graph.inserting_before(self.at):
            node = self._added(self.graph.get_attr(path))
        node.meta["shape"] = list(value.shape)
        node.meta["dtype"] = str(value.dtype).replace("paddle.", "")
        return node


def _shape(value: Any) -> Optional[List[int]]:
    """The static shape of a tensor node, or None when unknown or partly dynamic."""
    if not isinstance(value, Node):
        return None
    shape = value.meta.get("shape")
    if shape is None or any(not isinstance(d, int) or d < 0 for d in shape):
        return None
    return list(shape)


def _rank(value: Any) -> Optional[int]:
    if not isinstance(value, Node) or value.meta.get("shape") is None:
        return None
    return len(value.meta["shape"])


def _tensor(value: Any) -> bool:
    return isinstance(value, Node) and value.meta.get("shape") is not None


def _constant(value: Any) -> bool:
    """No graph value anywhere inside (a list of ints, a string, None)."""
    if isinstance(value, Node):
        return False
    if isinstance(value, (list, tuple)):
        return all(_constant(v) for v in value)
    return isinstance(value, (int, float, str, bool, type(None)))


def _optional_tensor(value: Any) -> bool:
    return value is None or _tensor(value)


# -- the rules: (bound arguments, emit) -> the node that replaces the call, or None


def _conv2d(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    from paddle.nn.functional.conv import _update_padding_nd
    from paddle.utils import convert_to_list

    x, weight, bias = a["x"], a["weight"], a["bias"]
    config = (a["stride"], a["padding"], a["dilation"], a["groups"], a["data_format"])
    if not (_tensor(x) and _tensor(weight) and _optional_tensor(bias) and _constant(config)):
        return None
    stride, padding, dilation, groups, data_format = config
    if data_format not in ("NCHW", "NHWC") or _rank(x) != 4 or not isinstance(groups, int):
        return None
    channel_last = data_format == "NHWC"
    x_shape, w_shape = _shape(x), _shape(weight)
    if not sizes_static or x_shape is None or w_shape is None or groups <= 0:
        return None
    channels, filters = x_shape[-1 if channel_last else 1], w_shape[0]
    if channels % groups or filters % groups:
        return None  # eager raises: left to it
    padding, algorithm = _update_padding_nd(padding, channel_last, 2)
    stride = convert_to_list(stride, 2, "stride")
    dilation = convert_to_list(dilation, 2, "dilation")
    emit.image = (x, 3 if channel_last else 1)
    if channels == groups and channels != 1 and filters % channels == 0:
        # the depthwise kernel; without CUDA, _conv_nd reads no flag
        out = emit(
            "depthwise_conv2d", x, weight, stride, padding, algorithm, groups, dilation, data_format
        )
        if bias is None:
            return out
        new_shape = [1] * 4
        new_shape[3 if channel_last else 1] = -1
        return emit("add", out, emit.method("reshape", bias, new_shape))
    out = emit("conv2d", x, weight, stride, padding, algorithm, dilation, groups, data_format)
    if bias is None:
        return out
    b_rank = _rank(bias)
    if b_rank is None:
        return None
    if b_rank < 4:
        dim = 3 if channel_last else 1
        b_shape = _shape(bias)
        if b_shape is None:
            return None
        bias = emit("reshape", bias, [1] * dim + b_shape + [1] * (4 - dim - 1))
    return emit("add", out, bias)


def _linear(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    x, weight, bias = a["x"], a["weight"], a["bias"]
    if not (_tensor(x) and _tensor(weight) and _optional_tensor(bias)):
        return None
    return emit("linear", x, weight, bias)


def _updates_statistics(a: Dict[str, Any]) -> bool:
    """Whether a ``F.batch_norm`` call may update its running statistics: in training, or
    told not to use them (its kernel then trains them). Only ``training=False`` with
    ``use_global_stats`` None or True is known not to."""
    return a["training"] is not False or a["use_global_stats"] not in (None, True)


def _batch_norm(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    x = a["x"]
    tensors = (a["running_mean"], a["running_var"])
    config = (a["training"], a["momentum"], a["epsilon"], a["data_format"], a["use_global_stats"])
    if not (_tensor(x) and all(_tensor(t) for t in tensors) and _constant(config)):
        return None
    if not (_optional_tensor(a["weight"]) and _optional_tensor(a["bias"])):
        return None
    training, momentum, epsilon, data_format, use_global_stats = config
    rank = _rank(x)
    if _updates_statistics(a) or rank is None or rank < 2:
        return None
    if data_format not in ("NC", "NCL", "NCHW", "NCDHW", "NLC", "NHWC", "NDHWC"):
        return None
    layout = "NCHW" if data_format[1] == "C" else "NHWC"
    use_global_stats, trainable = True, False  # what None and True both mean here
    emit.image = (x, 1 if layout == "NCHW" else rank - 1)
    out = emit(
        "batch_norm",
        x,
        a["running_mean"],
        a["running_var"],
        a["weight"],
        a["bias"],
        True,
        momentum,
        epsilon,
        layout,
        use_global_stats,
        trainable,
    )
    return emit.item(out, 0)


def _layer_norm(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    x, normalized = a["x"], a["normalized_shape"]
    if not (_tensor(x) and _constant((normalized, a["epsilon"]))):
        return None
    if not (_optional_tensor(a["weight"]) and _optional_tensor(a["bias"])):
        return None
    if isinstance(normalized, int) and not isinstance(normalized, bool):
        normalized = [normalized]
    if not isinstance(normalized, (list, tuple)):
        return None
    shape = _shape(x)
    if not sizes_static or shape is None or len(normalized) > len(shape):
        return None
    begin = len(shape) - len(normalized)
    if shape[begin:] != list(normalized):
        return None  # eager raises
    return emit("layer_norm", x, a["weight"], a["bias"], a["epsilon"], begin)


def _softmax(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    x, axis = a["x"], a["axis"]
    if not _tensor(x) or a.get("dtype") is not None or a.get("out") is not None:
        return None
    if not isinstance(axis, int) or isinstance(axis, bool):
        return None
    return emit("softmax", x, axis)


def _pool2d_config(a: Dict[str, Any], ceil_mode: bool):
    from paddle.nn.functional.pooling import _update_padding_nd
    from paddle.utils import convert_to_list

    kernel = convert_to_list(a["kernel_size"], 2, "pool_size")
    stride = kernel if a["stride"] is None else convert_to_list(a["stride"], 2, "pool_stride")
    channel_last = a["data_format"] == "NHWC"
    padding, algorithm = _update_padding_nd(
        a["padding"], num_dims=2, channel_last=channel_last, ceil_mode=ceil_mode
    )
    return kernel, stride, padding, algorithm


def _pool2d(
    a: Dict[str, Any], emit: _Emit, options: Tuple[str, ...], pooling: str, exclusive: Any
) -> Optional[Node]:
    """The ``_C_ops.pool2d`` call both pooling wrappers make, when ``x`` is a tensor and
    ``options`` (the wrapper's arguments besides) are constants."""
    x, data_format = a["x"], a["data_format"]
    if not (_tensor(x) and _constant([a[k] for k in options])):
        return None
    if data_format not in ("NCHW", "NHWC"):
        return None
    kernel, stride, padding, algorithm = _pool2d_config(a, a["ceil_mode"])
    if min(kernel + stride) <= 0:
        return None  # eager raises
    emit.image = (x, 3 if data_format == "NHWC" else 1)
    args = (kernel, stride, padding, a["ceil_mode"], exclusive, data_format, pooling)
    return emit("pool2d", x, *args, False, False, algorithm)


def _max_pool2d(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    if a["return_mask"] is not False:
        return None
    options = ("kernel_size", "stride", "padding", "ceil_mode", "data_format")
    return _pool2d(a, emit, options, "max", True)


def _avg_pool2d(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    if a["divisor_override"] is not None:
        return None
    options = ("kernel_size", "stride", "padding", "ceil_mode", "exclusive", "data_format")
    return _pool2d(a, emit, options, "avg", a["exclusive"])


def _adaptive_avg_pool2d(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    x, size, data_format = a["x"], a["output_size"], a["data_format"]
    if not (_tensor(x) and _constant((size, data_format))) or data_format not in ("NCHW", "NHWC"):
        return None
    if isinstance(size, int) and not isinstance(size, bool):
        size = [size, size]
    elif isinstance(size, (list, tuple)) and len(size) == 2:
        if None in size:
            shape = _shape(x)
            if not sizes_static or shape is None or len(shape) != 4:
                return None
            hw = shape[2:4] if data_format == "NCHW" else shape[1:3]
            size = [hw[i] if s is None else s for i, s in enumerate(size)]
        size = list(size)
    else:
        return None
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in size):
        return None
    # the wrapper runs the kernel on a view that does not choose cuDNN
    x = emit.method("_use_gpudnn", x, False)
    return emit(
        "pool2d", x, size, [1, 1], [0, 0], False, True, data_format, "avg", False, True, "EXPLICIT"
    )


def _flatten(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    x, start, stop = a["x"], a["start_axis"], a["stop_axis"]
    rank = _rank(x)
    if rank is None or rank == 0 or not all(type(v) is int for v in (start, stop)):
        return None
    if not (-rank <= start < rank and -rank <= stop < rank):
        return None
    start, stop = start % rank, stop % rank
    if start > stop:
        return None
    return emit("flatten", x, start, stop)


def _unary(kernel: str):
    def rule(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
        if not _tensor(a["x"]):
            return None
        emit.image = (a["x"], None)  # elementwise: no size matters
        return emit(kernel, a["x"])

    return rule


def _gelu(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    approximate = a["approximate"]
    if not _tensor(a["x"]) or type(approximate) is not bool:
        return None
    emit.image = (a["x"], None)
    return emit("gelu", a["x"], approximate)


def _silu(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    if not _tensor(a["x"]) or a.get("inplace", False) is not False:
        return None
    emit.image = (a["x"], None)
    return emit("silu", a["x"])


_RULES: Dict[Callable, Callable] = {
    F.conv2d: _conv2d,
    F.linear: _linear,
    F.batch_norm: _batch_norm,
    F.layer_norm: _layer_norm,
    F.softmax: _softmax,
    F.max_pool2d: _max_pool2d,
    F.avg_pool2d: _avg_pool2d,
    F.adaptive_avg_pool2d: _adaptive_avg_pool2d,
    paddle.flatten: _flatten,
    F.relu: _unary("relu"),
    F.sigmoid: _unary("sigmoid"),
    F.gelu: _gelu,
    F.silu: _silu,
}
_SIGNATURES: Dict[Callable, inspect.Signature] = {}

# -- Paddle's own layers (``call_module`` nodes): the API call their ``forward`` makes, with
# the layer's configuration read now and its parameters and buffers read at each call


def _attrs(layer, names: Tuple[str, ...]) -> Optional[Tuple[Any, ...]]:
    values = tuple(getattr(layer, n, None) for n in names)
    return values if _constant(values) else None


def _layer_conv2d(layer, x: Node, tensor: Callable, emit: _Emit, sizes_static: bool):
    """``Conv2D.forward``: ``_conv_nd`` with the paddings the layer normalized when made."""
    config = _attrs(
        layer,
        ("_stride", "_updated_padding", "_padding_algorithm", "_dilation", "_groups")
        + ("_data_format", "_channel_dim", "_op_type", "_padding_mode"),
    )
    if config is None or not _tensor(x):
        return None
    stride, padding, algorithm, dilation, groups, data_format, channel_dim, op_type, mode = config
    if mode != "zeros" or data_format not in ("NCHW", "NHWC") or _rank(x) != 4:
        return None
    weight, bias = tensor("weight"), tensor("bias")
    emit.image = (x, 3 if data_format == "NHWC" else 1)
    if op_type == "conv2d":
        out = emit("conv2d", x, weight, stride, padding, algorithm, dilation, groups, data_format)
    elif op_type == "depthwise_conv2d":
        out = emit(
            "depthwise_conv2d", x, weight, stride, padding, algorithm, groups, dilation, data_format
        )
    else:
        return None
    if bias is None:
        return out
    new_shape = [1] * 4
    new_shape[channel_dim] = -1
    return emit("add", out, emit.method("reshape", bias, new_shape))


def _via(api: Callable, *names: str, tensors: Tuple[str, ...] = (), **fixed: str):
    """A layer whose ``forward`` is ``api(x, <its attributes>)``: ``names`` are the API's
    parameters after ``x`` read from attributes named in ``fixed`` (or of the same name),
    ``tensors`` those read at each call."""

    def rule(layer, x: Node, tensor: Callable, emit: _Emit, sizes_static: bool):
        bound: Dict[str, Any] = {"x": x}
        for name in names:
            attr = fixed.get(name, name)
            if name in tensors:
                bound[name] = tensor(attr)
            else:
                value = getattr(layer, attr, None)
                if not _constant(value):
                    return None
                bound[name] = value
        try:
            full = _signature(api).bind(**bound)
        except TypeError:
            return None
        full.apply_defaults()
        return _RULES[api](dict(full.arguments), emit, sizes_static)

    return rule


def _layer_batch_norm(layer, x: Node, tensor: Callable, emit: _Emit, sizes_static: bool):
    # the layer's forward checks its format and the input's rank (the example passed
    # them), warns in training (not lowered) and calls F.batch_norm
    from paddle.nn.layer.norm import _BatchNormBase

    if type(layer).forward is not _BatchNormBase.forward or layer.training:
        return None
    rule = _via(
        F.batch_norm,
        "running_mean",
        "running_var",
        "weight",
        "bias",
        "training",
        "momentum",
        "epsilon",
        "data_format",
        "use_global_stats",
        tensors=("running_mean", "running_var", "weight", "bias"),
        running_mean="_mean",
        running_var="_variance",
        momentum="_momentum",
        epsilon="_epsilon",
        data_format="_data_format",
        use_global_stats="_use_global_stats",
    )
    return rule(layer, x, tensor, emit, sizes_static)


_LAYER_RULES: Dict[type, Callable] = {
    paddle.nn.Conv2D: _layer_conv2d,
    paddle.nn.Linear: _via(F.linear, "weight", "bias", tensors=("weight", "bias")),
    paddle.nn.BatchNorm1D: _layer_batch_norm,
    paddle.nn.BatchNorm2D: _layer_batch_norm,
    paddle.nn.BatchNorm3D: _layer_batch_norm,
    paddle.nn.LayerNorm: _via(
        F.layer_norm,
        "normalized_shape",
        "weight",
        "bias",
        "epsilon",
        tensors=("weight", "bias"),
        normalized_shape="_normalized_shape",
        epsilon="_epsilon",
    ),
    paddle.nn.ReLU: _via(F.relu),
    paddle.nn.Sigmoid: _via(F.sigmoid),
    paddle.nn.GELU: _via(F.gelu, "approximate", approximate="_approximate"),
    paddle.nn.Softmax: _via(F.softmax, "axis", axis="_axis"),
    paddle.nn.MaxPool2D: _via(
        F.max_pool2d,
        "kernel_size",
        "stride",
        "padding",
        "return_mask",
        "ceil_mode",
        "data_format",
        kernel_size="ksize",
    ),
    paddle.nn.AvgPool2D: _via(
        F.avg_pool2d,
        "kernel_size",
        "stride",
        "padding",
        "ceil_mode",
        "exclusive",
        "divisor_override",
        "data_format",
        kernel_size="ksize",
        divisor_override="divisor",
    ),
    paddle.nn.AdaptiveAvgPool2D: _via(
        F.adaptive_avg_pool2d,
        "output_size",
        "data_format",
        output_size="_output_size",
        data_format="_data_format",
    ),
    paddle.nn.Flatten: _via(paddle.flatten, "start_axis", "stop_axis"),
}


def _signature(fn: Callable) -> inspect.Signature:
    sig = _SIGNATURES.get(fn)
    if sig is None:
        sig = _SIGNATURES[fn] = inspect.signature(fn)
    return sig


def _bind(fn: Callable, node: Node) -> Optional[Dict[str, Any]]:
    try:
        bound = _signature(fn).bind(*node.args, **node.kwargs)
    except TypeError:
        return None  # an alias keyword or a wrong call: left to the wrapper
    bound.apply_defaults()
    return dict(bound.arguments)


def _resolve(root: Any, path: str) -> Any:
    for part in path.split("."):
        root = getattr(root, part)
    return root


def _lower(
    gm, graph: Graph, sizes_static: bool
) -> Tuple[Dict[str, int], Dict[str, Tuple[int, str]]]:
    """Lower, in place, every call a rule takes and whose kernels give the API's (or the
    layer's) values (``_agrees``); per API or layer name, how many were lowered, and why
    one was not."""
    lowered: Dict[str, int] = {}
    refused: Dict[str, Tuple[int, str]] = {}
    for node in list(graph.nodes):
        emit = _Emit(graph, node)
        # builds the node's replacement (None: the rule does not take the call)
        make: Callable[[], Optional[Node]]
        if node.op == "call_function":
            rule = _RULES.get(node.target)
            bound = _bind(node.target, node) if rule is not None else None
            if bound is None:
                continue

            def make(rule=rule, bound=bound, emit=emit):
                return rule(bound, emit, sizes_static)

            # Paddle 3.3 defines some under private names (``_gelu``)
            name = node.target.__name__.lstrip("_")
        elif node.op == "call_module":
            layer = _resolve(gm, node.target)
            layer_rule = _LAYER_RULES.get(type(layer))
            if layer_rule is None or node.kwargs or len(node.args) != 1:
                continue

            def make(layer_rule=layer_rule, layer=layer, node=node, emit=emit):
                def tensor(attr: str) -> Any:
                    value = getattr(layer, attr, None)
                    if not isinstance(value, paddle.Tensor):
                        return value  # None, or what no rule takes for a tensor
                    return emit.attr(f"{node.target}.{attr}", value)

                return layer_rule(layer, node.args[0], tensor, emit, sizes_static)

            name = type(layer).__name__
        else:
            continue
        try:
            new = make()
        except Exception:  # noqa: BLE001 - Paddle's normalizers reject what eager rejects
            new = None
        added = emit.added
        if new is not None:
            why = _agrees(gm, node, added, new, emit.image)
            if why:
                refused[name] = (refused.get(name, (0, ""))[0] + 1, why)
                new = None
        if new is None:
            for n in reversed(added):
                graph.erase_node(n)
            continue
        for n in added:
            n.meta.setdefault("origin", node.meta.get("origin"))
        new.meta = {**node.meta}
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        lowered[name] = lowered.get(name, 0) + 1
    return lowered, refused


#: the largest batch and spatial size an image input gets in ``_agrees``'s check
_SMALL_IMAGE = (1, 16)


def _synthetic(node: Node, shape: Optional[List[int]] = None) -> Any:
    """A tensor of ``node``'s shape and dtype with made-up values: floats of both signs
    that vary along every axis (``1.5 * sin(0.7 i)``), so that a rule that ignored a
    clamp, a threshold or an axis shows. Made without ``paddle.to_tensor`` (which leaks a
    list per call in Paddle 3.3) and without Paddle's random generator (the program's)."""
    shape, dtype = shape or node.meta.get("shape"), node.meta.get("dtype")
    if shape is None or dtype is None:
        raise ValueError(f"{node.name} has no known shape")
    count = int(np.prod(shape)) if shape else 1
    index = paddle.arange(count, dtype="float64" if dtype == "float64" else "float32")
    if dtype in ("float16", "bfloat16", "float32", "float64"):
        values = paddle.sin(index * 0.7) * 1.5
    elif dtype == "bool":
        values = paddle.sin(index * 0.7) > 0
    else:
        values = index % 3
    return values.reshape(shape).astype(dtype)


def _run(gm, node: Node, env: Dict[Node, Any]) -> Any:
    if node.op == "get_attr":
        return _resolve(gm, node.target)
    args = map_arg(node.args, env.__getitem__)
    kwargs = map_arg(node.kwargs, env.__getitem__)
    if node.op == "call_module":
        return _resolve(gm, node.target)(*args, **kwargs)
    if node.op == "call_method":
        obj, *rest = args
        return getattr(obj, node.target)(*rest, **kwargs)
    return node.target(*args, **kwargs)


#: the most multiply-adds a call's check may cost (about a tenth of a millisecond here):
#: a larger call is not lowered, its wrapper being a small part of its time anyway
_CHECK_BUDGET = 2_000_000
_TOO_LARGE = "large calls (their wrappers are a small part of their time: not worth a check)"


def _check_cost(gm, node: Node, size: Optional[List[int]], image) -> float:
    """About how many multiply-adds the check of ``node`` costs: its input's elements
    times those of a weight over the size of the axis they share (a convolution's or a
    matrix product's), or its inputs' elements."""
    shapes = [n.meta["shape"] for n in node.all_input_nodes if n.meta.get("shape") is not None]
    if node.op == "call_module":
        layer_weight = getattr(_resolve(gm, node.target), "weight", None)
        if isinstance(layer_weight, paddle.Tensor):
            shapes.append(list(layer_weight.shape))
    if not shapes:
        return 0.0
    x = size or shapes[0]
    count = float(np.prod(x)) if x else 1.0
    weights = [shape for shape in shapes[1:] if len(shape) >= 2]
    if not weights:
        return count * len(shapes)
    axis = image[1] if image is not None and image[1] is not None else -1
    shared = x[axis] if x else 1
    return count * float(np.prod(weights[0])) / max(shared, 1)


def _small_image(shape: List[int], channel_axis: Optional[int]) -> Optional[List[int]]:
    small = [
        d if axis == channel_axis else min(d, _SMALL_IMAGE[0] if axis == 0 else _SMALL_IMAGE[1])
        for axis, d in enumerate(shape)
    ]
    return small if small != shape else None


def _agrees(gm, node: Node, added: List[Node], new: Node, image=None) -> str:
    """Why the kernel calls ``added`` (ending in ``new``) do not compute what the API call
    ``node`` does, or "": both run on the same inputs of the call's dtypes and must agree
    bit for bit. The rules rewrite arguments, never values, so inputs made up here check
    them as well as the capture's would, without touching any state of the program, at
    the cost of the lowered calls alone (not of a run of the whole graph). An image input
    of a rule that reads none of its batch and spatial sizes (``image``: the node and its
    channel axis) is made small first (a batch of 1, at most 16 wide), so that checking a
    ResNet's 20 convolutions costs little beside its first call; where the small run
    fails (a kernel larger than 16), the check runs at full size."""
    sizes: List[Optional[List[int]]] = [None]
    if image is not None and image[0].meta.get("shape"):
        small = _small_image(list(image[0].meta["shape"]), image[1])
        if small is not None:
            sizes.insert(0, small)
    if _check_cost(gm, node, sizes[0], image) > _CHECK_BUDGET:
        return _TOO_LARGE
    failure = ""
    for size in sizes:
        try:
            env: Dict[Node, Any] = {
                n: _synthetic(n, size if image is not None and n is image[0] else None)
                for n in node.all_input_nodes
            }
            with paddle.no_grad():
                expected = _run(gm, node, env)
                for n in added:
                    env[n] = _run(gm, n, env)
        except Exception as e:  # noqa: BLE001 - the call as captured is the reference
            failure = f"its kernels failed: {type(e).__name__}: {e}"
            continue
        if not _same(env[new], expected):
            return "its kernels' values differ from the API's"
        return ""
    return failure


def _same(a: Any, b: Any) -> bool:
    """Bit for bit the same values (NaN equal to NaN), the same structure."""
    if isinstance(a, (tuple, list)):
        return (
            isinstance(b, (tuple, list))
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b))
        )
    if isinstance(a, paddle.Tensor):
        if not isinstance(b, paddle.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
            return False
        x = np.ascontiguousarray(a.numpy()).reshape(-1).view(np.uint8)
        y = np.ascontiguousarray(b.numpy()).reshape(-1).view(np.uint8)
        return bool(np.array_equal(x, y))
    return type(a) is type(b) and (a == b or (a != a and b != b))


class Lowering:
    """What lowering did to one graph, for ``explain()``."""

    def __init__(
        self,
        lowered: Dict[str, int],
        why_not: str = "",
        code: Optional[str] = None,
        refused: Optional[Dict[str, Tuple[int, str]]] = None,
    ):
        self.lowered = lowered
        self.why_not = why_not
        #: the lowered graph's generated forward
        self.code = code
        #: per API, how many calls a rule took were left as captured after all, and why
        self.refused = refused or {}

    def describe(self) -> str:
        if self.why_not:
            return f"API calls run as captured: {self.why_not}"
        said = []
        if self.lowered:
            parts = [f"{name} x{n}" if n > 1 else name for name, n in sorted(self.lowered.items())]
            count = sum(self.lowered.values())
            said.append(f"{count} API calls run their kernels directly ({', '.join(parts)})")
        for name, (count, why) in sorted(self.refused.items()):
            said.append(f"{name}{f' x{count}' if count > 1 else ''} as captured: {why}")
        return "; ".join(said)


def _has_rule(gm, node: Node) -> bool:
    if node.op == "call_function":
        return node.target in _RULES
    return node.op == "call_module" and type(_resolve(gm, node.target)) in _LAYER_RULES


#: a rough rate of this kind of CPU (multiply-adds per microsecond), what an op costs
#: besides, and what lowering one call saves: enough to tell a graph of small calls from
#: one whose time is its large kernels'
_MACS_PER_US = 50_000
_US_PER_OP = 2.0
_US_SAVED_PER_CALL = 3.0
#: lowering is skipped where it would save less than this part of the graph's time: its
#: checks would then cost more of the first call than it saves on the next thousand
_WORTH = 0.005


def _not_worth_it(gm) -> str:
    """Why lowering ``gm`` would not pay ("" when it would): its calls that rules take
    would save less than half a percent of its estimated time (ResNet18: its 20
    convolutions are 99.8% of it)."""
    total_us = 0.0
    takers = 0
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        shape = node.all_input_nodes[0].meta.get("shape") if node.all_input_nodes else None
        channels = (None, 1) if shape is not None and len(shape) == 4 else None
        try:
            macs = _check_cost(gm, node, None, channels)
        except Exception:  # noqa: BLE001 - no estimate: count the op only
            macs = 0.0
        total_us += macs / _MACS_PER_US + _US_PER_OP
        if _has_rule(gm, node) and macs <= _CHECK_BUDGET:
            takers += 1
    saved = takers * _US_SAVED_PER_CALL
    if saved >= _WORTH * total_us:
        return ""
    return (
        f"its {takers} small calls would save about {saved:.0f} us of its "
        f"{total_us / 1e3:.1f} ms (estimated): its large kernels are its time"
    )


def lower(gm: GraphModule, example_inputs: List[Any]) -> Tuple[Callable, Lowering]:
    """The forward to run for ``gm``: a lowered copy's when a rule lowered a call, else
    ``gm.forward``; and what was done."""
    if not any(_has_rule(gm, n) for n in gm.graph.nodes):
        return gm.forward, Lowering({})
    why = why_not_lowered() or _not_worth_it(gm)
    if why:
        return gm.forward, Lowering({}, why)
    graph = gm.graph.copy()
    sizes_static = not any(n.meta.get("dynamic_dims") for n in graph.nodes if n.op == "placeholder")
    lowered, refused = _lower(gm, graph, sizes_static)
    if not lowered:
        return gm.forward, Lowering({}, refused=refused)
    kernels = GraphModule(gm, graph, class_name=type(gm).__name__)
    # the graph reads a lowered layer's parameters through the layer itself
    # (``self.conv.weight``), as its forward did: one replaced later is the one used
    for node in gm.graph.nodes:
        if node.op == "call_module" and any(
            n.op == "get_attr" and n.target.startswith(node.target + ".") for n in graph.nodes
        ):
            kernels._copy_path(gm, node.target)
    return kernels.forward, Lowering(lowered, code=kernels.code, refused=refused)


__all__ = ["Lowering", "TESTED", "lower", "why_not_lowered"]
