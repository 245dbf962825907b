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
logic is not copied.

Each lowered call is checked when the graph is compiled: the API and its kernel calls run
on inputs of the call's shapes and dtypes (made up, so no state of the program is touched
and the cost is that of the lowered calls, not of the graph) and must agree bit for bit;
a call that does not stays as captured. ``explain()`` says what was lowered, and why not.
"""

from __future__ import annotations

import inspect
import operator
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import paddle
import paddle.nn.functional as F

from .fx import Graph, GraphModule, Node

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

    def __call__(self, kernel: str, *args: Any) -> Node:
        with self.graph.inserting_before(self.at):
            return self.graph.call_function(_kernel(kernel), args)

    def item(self, value: Node, index: int) -> Node:
        with self.graph.inserting_before(self.at):
            return self.graph.call_function(operator.getitem, (value, index))

    def method(self, name: str, *args: Any) -> Node:
        with self.graph.inserting_before(self.at):
            return self.graph.call_method(name, args)


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
    if _updates_statistics(a) or (_rank(x) or 0) < 2:
        return None
    if data_format not in ("NC", "NCL", "NCHW", "NCDHW", "NLC", "NHWC", "NDHWC"):
        return None
    layout = "NCHW" if data_format[1] == "C" else "NHWC"
    use_global_stats, trainable = True, False  # what None and True both mean here
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


def _max_pool2d(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    x = a["x"]
    keys = ("kernel_size", "stride", "padding", "return_mask", "ceil_mode", "data_format")
    if not (_tensor(x) and _constant([a[k] for k in keys])):
        return None
    if a["return_mask"] is not False or a["data_format"] not in ("NCHW", "NHWC"):
        return None
    ceil_mode = a["ceil_mode"]
    kernel, stride, padding, algorithm = _pool2d_config(a, ceil_mode)
    return emit(
        "pool2d",
        x,
        kernel,
        stride,
        padding,
        ceil_mode,
        True,
        a["data_format"],
        "max",
        False,
        False,
        algorithm,
    )


def _avg_pool2d(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    x = a["x"]
    keys = ("kernel_size", "stride", "padding", "ceil_mode", "exclusive", "data_format")
    if not (_tensor(x) and _constant([a[k] for k in keys])):
        return None
    if a["divisor_override"] is not None or a["data_format"] not in ("NCHW", "NHWC"):
        return None
    kernel, stride, padding, algorithm = _pool2d_config(a, a["ceil_mode"])
    if min(kernel + stride) <= 0:
        return None  # eager raises
    return emit(
        "pool2d",
        x,
        kernel,
        stride,
        padding,
        a["ceil_mode"],
        a["exclusive"],
        a["data_format"],
        "avg",
        False,
        False,
        algorithm,
    )


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
        return emit(kernel, a["x"]) if _tensor(a["x"]) else None

    return rule


def _gelu(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    approximate = a["approximate"]
    if not _tensor(a["x"]) or type(approximate) is not bool:
        return None
    return emit("gelu", a["x"], approximate)


def _silu(a: Dict[str, Any], emit: _Emit, sizes_static: bool) -> Optional[Node]:
    if not _tensor(a["x"]) or a.get("inplace", False) is not False:
        return None
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


def _bind(fn: Callable, node: Node) -> Optional[Dict[str, Any]]:
    sig = _SIGNATURES.get(fn)
    if sig is None:
        sig = _SIGNATURES[fn] = inspect.signature(fn)
    try:
        bound = sig.bind(*node.args, **node.kwargs)
    except TypeError:
        return None  # an alias keyword or a wrong call: left to the wrapper
    bound.apply_defaults()
    return dict(bound.arguments)


def _lower(graph: Graph, sizes_static: bool) -> Tuple[Dict[str, int], Dict[str, str]]:
    """Lower, in place, every call a rule takes and whose kernels give the API's values
    (``_agrees``); per API name, how many were lowered, and why one was not."""
    lowered: Dict[str, int] = {}
    refused: Dict[str, str] = {}
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        rule = _RULES.get(node.target)
        if rule is None:
            continue
        bound = _bind(node.target, node)
        if bound is None:
            continue
        emit = _Emit(graph, node)
        before = set(graph.nodes)
        try:
            new = rule(bound, emit, sizes_static)
        except Exception:  # noqa: BLE001 - Paddle's normalizers reject what eager rejects
            new = None
        added = [n for n in graph.nodes if n not in before]
        # Paddle 3.3 defines some under private names (``_gelu``)
        name = node.target.__name__.lstrip("_")
        if new is not None:
            why = _agrees(node, added, new)
            if why:
                refused[name] = why
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


def _synthetic(node: Node, rng) -> Any:
    """A tensor of ``node``'s shape and dtype with values from ``rng`` (Paddle's own
    generator is left alone): normal floats, both signs, so that a rule that ignored a
    clamp or a threshold shows."""
    shape, dtype = node.meta.get("shape"), node.meta.get("dtype")
    if shape is None or dtype is None:
        raise ValueError(f"{node.name} has no known shape")
    if dtype in ("float16", "bfloat16", "float32", "float64"):
        data = rng.standard_normal(shape).astype("float64" if dtype == "float64" else "float32")
        return paddle.to_tensor(data).astype(dtype)
    if dtype == "bool":
        return paddle.to_tensor(rng.uniform(0, 1, shape) > 0.5)
    return paddle.to_tensor(rng.integers(0, 3, shape)).astype(dtype)


def _run(node: Node, env: Dict[Node, Any]) -> Any:
    from .fx import map_arg

    args = map_arg(node.args, env.__getitem__)
    kwargs = map_arg(node.kwargs, env.__getitem__)
    if node.op == "call_method":
        obj, *rest = args
        return getattr(obj, node.target)(*rest, **kwargs)
    return node.target(*args, **kwargs)


def _agrees(node: Node, added: List[Node], new: Node) -> str:
    """Why the kernel calls ``added`` (ending in ``new``) do not compute what the API call
    ``node`` does, or "": both run on inputs of the call's shapes and dtypes and must
    agree bit for bit. The rules rewrite arguments, never values, so inputs made up here
    check them as well as the capture's would, at the cost of the lowered calls alone
    (not of a run of the whole graph) and without touching any state of the program."""
    rng = np.random.default_rng(0)
    try:
        env: Dict[Node, Any] = {n: _synthetic(n, rng) for n in node.all_input_nodes}
        with paddle.no_grad():
            expected = _run(node, env)
            for n in added:
                env[n] = _run(n, env)
    except Exception as e:  # noqa: BLE001 - the call as captured is the reference
        return f"its kernels failed: {type(e).__name__}: {e}"
    if not _same(env[new], expected):
        return "its kernels' values differ from the API's"
    return ""


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
        refused: Optional[Dict[str, str]] = None,
    ):
        self.lowered = lowered
        self.why_not = why_not
        #: the lowered graph's generated forward
        self.code = code
        #: per API, why a call a rule took was left as captured after all
        self.refused = refused or {}

    def describe(self) -> str:
        if self.why_not:
            return f"API calls run as captured: {self.why_not}"
        said = []
        if self.lowered:
            parts = [f"{name} x{n}" if n > 1 else name for name, n in sorted(self.lowered.items())]
            count = sum(self.lowered.values())
            said.append(f"{count} API calls run their kernels directly ({', '.join(parts)})")
        said += [f"{name} runs as captured: {why}" for name, why in sorted(self.refused.items())]
        return "; ".join(said)


def lower(gm: GraphModule, example_inputs: List[Any]) -> Tuple[Callable, Lowering]:
    """The forward to run for ``gm``: a lowered copy's when a rule lowered a call, else
    ``gm.forward``; and what was done."""
    if not any(n.op == "call_function" and n.target in _RULES for n in gm.graph.nodes):
        return gm.forward, Lowering({})
    why = why_not_lowered()
    if why:
        return gm.forward, Lowering({}, why)
    graph = gm.graph.copy()
    sizes_static = not any(n.meta.get("dynamic_dims") for n in graph.nodes if n.op == "placeholder")
    lowered, refused = _lower(graph, sizes_static)
    if not lowered:
        return gm.forward, Lowering({}, refused=refused)
    kernels = GraphModule(gm, graph, class_name=type(gm).__name__)
    return kernels.forward, Lowering(lowered, code=kernels.code, refused=refused)


__all__ = ["Lowering", "TESTED", "lower", "why_not_lowered"]
