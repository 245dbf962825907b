"""ONNX lowerings of Paddle's ``_C_ops`` functions, as programs written against them call
them (GraphNet's samples, the fused paths of library models).

A ``_C_ops`` function is written in C++: Python sees no parameter names, so each lowering
names its positional parameters (``direct.positional``), in the order Paddle's own Python
APIs pass them, and reuses the lowering of the API that computes the same.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

import numpy as np
import paddle

from . import lowerings as api
from . import lowerings_tensor as tensor
from .direct import Exporter, positional


def _full(ex: Exporter, a: Dict[str, Any]) -> str:
    return tensor._full(ex, {"fill_value": a["value"]})


def _empty(ex: Exporter, a: Dict[str, Any]) -> str:
    # the values of an empty tensor are whatever its memory held: zeros are as good
    return tensor.constant_result(ex, 0)


def _full_int_array(ex: Exporter, a: Dict[str, Any]) -> str:
    return ex.constant(list(ex.known(a["value"])), ex.out_dtype())


def _full_like(ex: Exporter, a: Dict[str, Any]) -> str:
    return api._full_like(None)(ex, {"x": a["x"], "fill_value": ex.known(a["fill_value"])})


def _slice(ex: Exporter, a: Dict[str, Any]) -> str:
    """``slice(x, axes, starts, ends, infer_flags, decrease_axis)``: a Slice, reshaped to
    the result (which drops the dimensions of ``decrease_axis``)."""
    axes, starts, ends = (ex.known(a[k]) for k in ("axes", "starts", "ends"))
    return _sliced(ex, a["x"], axes, starts, ends, [1] * len(axes))


def _strided_slice(ex: Exporter, a: Dict[str, Any]) -> str:
    axes, starts, ends, strides = (ex.known(a[k]) for k in ("axes", "starts", "ends", "strides"))
    return _sliced(ex, a["x"], axes, starts, ends, strides)


def _sliced(ex: Exporter, x: Any, axes, starts, ends, steps) -> str:
    for values in (axes, starts, ends, steps):
        if not isinstance(values, (list, tuple)) or not all(isinstance(v, int) for v in values):
            ex.decline("slice bounds that are not constants")
    out = ex.op(
        "Slice",
        [ex.input(x), ex.ints(starts), ex.ints(ends), ex.ints(axes), ex.ints(steps)],
    )
    return api.reshaped_to_result(ex, out)


def _split(ex: Exporter, a: Dict[str, Any]) -> tuple:
    return tensor._split(ex, {"x": a["x"], "num_or_sections": a["sections"], "axis": a["axis"]})


def _concat(ex: Exporter, a: Dict[str, Any]) -> str:
    return api._concat(ex, {"x": a["x"], "axis": ex.known(a["axis"])})


def _reduce(onnx_op: str) -> Callable:
    lower = api._reduce(onnx_op)

    def reduce(ex: Exporter, a: Dict[str, Any]) -> str:
        axis = ex.known(a.get("axis"))
        # ``[]`` is every axis, as ``None`` is for the API
        return lower(ex, {**a, "axis": None if axis in ([], ()) else axis})

    return reduce


def _layer_norm(ex: Exporter, a: Dict[str, Any]) -> str:
    x, begin = a["x"], a["begin_norm_axis"]
    if not isinstance(begin, int):
        ex.decline("a begin_norm_axis that is not an int")
    shape = ex.shape(x)[begin:]
    return api._layer_norm(ex, x, shape, a.get("scale"), a.get("bias"), a["epsilon"])


def _dropout(ex: Exporter, a: Dict[str, Any]) -> str:
    if not a.get("is_test"):
        ex.decline("dropout in training")
    return api._dropout(
        ex, {"x": a["x"], "p": ex.known(a["p"]), "training": False, "mode": a["mode"]}
    )


def _conv2d(ex: Exporter, a: Dict[str, Any]) -> str:
    return api._conv(
        ex, a["x"], a["weight"], None, a["strides"], a["paddings"], a["padding_algorithm"],
        a["dilations"], a["groups"], a["data_format"],
    )  # fmt: skip


def _pool2d(ex: Exporter, a: Dict[str, Any]) -> str:
    kind = {"max": "MaxPool", "avg": "AveragePool"}.get(a["pooling_type"])
    if kind is None or a.get("global_pooling") or a.get("adaptive"):
        ex.decline(f"{a['pooling_type']} pooling (global or adaptive)")
    if a["padding_algorithm"] != "EXPLICIT":
        ex.decline(f"padding algorithm {a['padding_algorithm']}")
    args = {
        "x": a["x"],
        "kernel_size": ex.known(a["kernel_size"]),
        "stride": a["strides"],
        "padding": a["paddings"],
        "ceil_mode": a["ceil_mode"],
        "exclusive": a["exclusive"],
        "data_format": a["data_format"],
    }
    return api._pool(ex, args, kind)


def _interp(ex: Exporter, a: Dict[str, Any]) -> str:
    """``nearest_interp``/``bilinear_interp``/...: the ``interpolate`` the API would have
    called, from the kernel's arguments (an output size as ``out_h``/``out_w``, or a scale
    list; sizes passed as tensors are declined, as values only the run knows)."""
    for name in ("out_size", "size_tensor", "scale_tensor"):
        if a.get(name) is not None:
            ex.decline(f"{a['interp_method']}_interp with {name} given as a tensor")
    out_h, out_w = ex.known(a["out_h"]), ex.known(a["out_w"])
    scale = list(ex.known(a.get("scale") or []))
    args = {
        "x": a["x"],
        "mode": a["interp_method"],
        "align_corners": ex.known(a["align_corners"]),
        "align_mode": ex.known(a["align_mode"]),
        "data_format": a["data_format"],
        "size": [out_h, out_w] if out_h > 0 and out_w > 0 else None,
        "scale_factor": scale or None,
    }
    return tensor._interpolate(ex, args)


def _batch_norm(ex: Exporter, a: Dict[str, Any]) -> tuple:
    """``batch_norm(x, mean, variance, scale, bias, is_test, momentum, epsilon,
    data_format, use_global_stats, trainable_statistics)`` with the running statistics
    (``is_test`` or ``use_global_stats``): its result, and the statistics unchanged. Its
    other results (the batch's statistics, a reserve) are not computed: a graph that reads
    them is exported another way."""
    if not (ex.known(a["is_test"]) or ex.known(a["use_global_stats"])):
        ex.decline("batch statistics (training)")
    out = api._batch_norm(
        ex, a["x"], a["mean"], a["variance"], a["scale"], a["bias"], ex.known(a["epsilon"]),
        ex.known(a["data_format"]),
    )  # fmt: skip
    mean = ex.op("Identity", [ex.input(a["mean"])])
    variance = ex.op("Identity", [ex.input(a["variance"])])
    return (out, mean, variance, None, None, None)


def _split_with_num(ex: Exporter, a: Dict[str, Any]) -> tuple:
    return tensor._split(
        ex, {"x": a["x"], "num_or_sections": ex.known(a["num"]), "axis": a["axis"]}
    )


def _square(ex: Exporter, a: Dict[str, Any]) -> str:
    x = ex.input(a["x"])
    return ex.op("Mul", [x, x])


def _add_n(ex: Exporter, a: Dict[str, Any]) -> str:
    """The inputs added left to right, as Paddle's kernel accumulates them."""
    xs = a["inputs"]
    if not isinstance(xs, (list, tuple)) or not xs:
        ex.decline("add_n of something other than a list of tensors")
    out = ex.out_dtype()
    total = ex.input(xs[0], out)
    for x in xs[1:]:
        total = ex.op("Add", [total, ex.input(x, out)])
    return total if len(xs) > 1 else ex.op("Identity", [total])


def _meshgrid(ex: Exporter, a: Dict[str, Any]) -> tuple:
    """Each 1-D input laid along its own axis and expanded to the grid."""
    xs = a["inputs"]
    if not isinstance(xs, (list, tuple)) or not xs:
        ex.decline("meshgrid of something other than a list of tensors")
    sizes = []
    for x in xs:
        shape = ex.shape(x)
        if len(shape) > 1:
            ex.decline("meshgrid of an input of more than one dimension")
        sizes.append(shape[0] if shape else 1)
    grids = []
    for i, x in enumerate(xs):
        along = [1] * len(xs)
        along[i] = sizes[i]
        laid = ex.op("Reshape", [ex.input(x), ex.ints(along)])
        grids.append(ex.op("Expand", [laid, ex.ints(sizes)]))
    return tuple(grids)


def _assign_value(ex: Exporter, a: Dict[str, Any]) -> str:
    """``assign_value_(output, shape, dtype, values, place)``: a constant of those values."""
    values = ex.known(a["values"])
    shape = ex.known(a["shape"])
    if not isinstance(values, (list, tuple)) or not isinstance(shape, (list, tuple)):
        ex.decline("values or a shape that are not constants")
    dtype = ex.out_dtype()
    array = np.asarray(values, dtype=np.dtype(dtype) if dtype != "bfloat16" else np.float32)
    if array.size != (int(np.prod(shape)) if shape else 1):
        ex.decline(f"{array.size} values for the shape {list(shape)}")
    return tensor.remembered_constant(ex, array.reshape(shape), dtype)


def _full_with_tensor(ex: Exporter, a: Dict[str, Any]) -> str:
    """``full_with_tensor(value, shape, dtype)``: the one value, expanded to a shape the
    model reads when it runs (``shape64`` of another tensor)."""
    value = ex.op("Reshape", [ex.input(a["value"], ex.out_dtype()), ex.ints([])])
    shape = a["shape"]
    if isinstance(shape, (list, tuple)) and all(isinstance(d, int) for d in shape):
        sizes = ex.ints(shape)
    else:
        sizes = ex.input(shape, "int64")
    return ex.op("Expand", [value, sizes])


def _integer_division(onnx_mod: bool) -> Callable:
    """``floor_divide`` and ``remainder`` of integers, rounding toward -inf as Python and
    Paddle do (ONNX's ``Div`` truncates). Paddle raises on a zero divisor, where ONNX
    Runtime would crash: the model divides by 1 there instead and says so in a run-time
    check, so that such a call runs on Paddle and raises its error."""

    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        out = ex.out_dtype()
        if out not in ("int32", "int64"):
            ex.decline(f"{'remainder' if onnx_mod else 'floor_divide'} of {out}")
        x, y = ex.input(a["x"], out), ex.input(a["y"], out)
        zero, one = ex.constant(0, out), ex.constant(1, out)
        is_zero = ex.op("Equal", [y, zero])
        ex.require_none([is_zero], "integer division: no divisor is zero (Paddle raises)")
        y = ex.op("Where", [is_zero, one, y])
        mod = ex.op("Mod", [x, y], fmod=0)  # the sign of the divisor, as Python's %
        if onnx_mod:
            return mod
        return ex.op("Div", [ex.op("Sub", [x, mod]), y])

    return lower


def _topk(ex: Exporter, a: Dict[str, Any]) -> tuple:
    """``topk(x, k, axis, largest, sorted)`` in order. Paddle's kernel orders equal values
    as ``std::partial_sort`` leaves them and NaN as it compares them: the model is exact
    where the values that decide the result (the first k + 1 along the axis) are distinct
    and not NaN, and says so in a run-time check."""
    x = a["x"]
    k, axis = ex.known(a["k"]), ex.known(a.get("axis", -1))
    if not ex.known(a.get("sorted", True)):
        ex.decline("topk with sorted=False (the kernel's own order)")
    if not isinstance(k, int) or not isinstance(axis, int):
        ex.decline("k or an axis that is not a constant int")
    axis = axis % ex.rank(x)
    size = ex.dim(x, axis)
    if not 0 < k <= size:
        ex.decline(f"k={k} of a size {size}")
    largest = 1 if ex.known(a.get("largest", True)) else 0
    name = ex.input(x)
    ranked = min(k + 1, size)
    values, indices = ex.op(
        "TopK", [name, ex.ints([ranked])], outputs=2, axis=axis, largest=largest, sorted=1
    )
    ties = []
    if ex.dtype(x) in ("float16", "float32", "float64", "bfloat16"):
        ties.append(ex.op("IsNaN", [name]))
    if ranked > 1:
        upper = ex.op("Slice", [values, ex.ints([0]), ex.ints([ranked - 1]), ex.ints([axis])])
        lower = ex.op("Slice", [values, ex.ints([1]), ex.ints([ranked]), ex.ints([axis])])
        ties.append(ex.op("Equal", [upper, lower]))
    if ties:
        ex.require_none(ties, "topk: the values that decide it are distinct and not NaN")
    if ranked > k:
        values = ex.op("Slice", [values, ex.ints([0]), ex.ints([k]), ex.ints([axis])])
        indices = ex.op("Slice", [indices, ex.ints([0]), ex.ints([k]), ex.ints([axis])])
    return values, indices


def _one_hot(ex: Exporter, a: Dict[str, Any]) -> str:
    """``one_hot(x, num_classes)`` as float32. Paddle raises for an index outside [0,
    num_classes), where ONNX gives a row of zeros: a run-time check sends such a call to
    Paddle."""
    depth = ex.known(a["num_classes"])
    if not isinstance(depth, int) or depth <= 0:
        ex.decline("a number of classes that is not a constant")
    x = ex.input(a["x"], "int64")
    outside = ex.op(
        "Or",
        [
            ex.op("Less", [x, ex.constant(0, "int64")]),
            ex.op("GreaterOrEqual", [x, ex.constant(depth, "int64")]),
        ],
    )
    ex.require_none([outside], "one_hot: every index is in [0, num_classes)")
    values = ex.constant([0.0, 1.0], ex.out_dtype())
    return ex.op("OneHot", [x, ex.constant([depth], "int64"), values], axis=-1)


def _embedding(ex: Exporter, a: Dict[str, Any]) -> str:
    # (-1 is "none" here; F.embedding turns a negative padding_idx into its row first)
    pad = a.get("padding_idx", -1)
    return tensor._embedding(ex, a["x"], a["weight"], None if pad == -1 else pad)


def _cumsum(ex: Exporter, a: Dict[str, Any]) -> str:
    axis = None if a.get("flatten") else a["axis"]
    return tensor._cumsum(ex, {**a, "axis": axis})


#: the parameters of every ``*_interp`` kernel, in the order ``F.interpolate`` passes them
_INTERP_PARAMETERS = (
    "x",
    "out_size",
    "size_tensor",
    "scale_tensor",
    "data_format",
    "out_d",
    "out_h",
    "out_w",
    "scale",
    "interp_method",
    "align_corners",
    "align_mode",
)

#: name -> (positional parameters, lowering); the exporter lowers an update in place
#: (``relu_``) as its out-of-place twin
_TABLE = {
    "add": (("x", "y"), api._binary("Add")),
    "subtract": (("x", "y"), api._binary("Sub")),
    "multiply": (("x", "y"), api._binary("Mul")),
    "divide": (("x", "y"), api._binary("Div")),
    "maximum": (("x", "y"), api._binary("Max")),
    "minimum": (("x", "y"), api._binary("Min")),
    "matmul": (("x", "y", "transpose_x", "transpose_y"), api._matmul),
    "pow": (("x", "y"), api._pow),
    "greater_than": (("x", "y"), api._compare("Greater")),
    "less_than": (("x", "y"), api._compare("Less")),
    "greater_equal": (("x", "y"), api._compare("GreaterOrEqual")),
    "less_equal": (("x", "y"), api._compare("LessOrEqual")),
    "equal": (("x", "y"), api._compare("Equal")),
    "not_equal": (("x", "y"), api._compare("Equal", negate=True)),
    "relu": (("x",), api._relu),
    "exp": (("x",), api._unary("Exp")),
    "tanh": (("x",), api._unary("Tanh")),
    "sigmoid": (("x",), api._unary("Sigmoid")),
    "sqrt": (("x",), api._sqrt),
    "rsqrt": (("x",), api._rsqrt),
    "log": (("x",), api._unary("Log")),
    "abs": (("x",), api._unary("Abs", False)),
    "gelu": (("x", "approximate"), api._gelu),
    "silu": (("x",), api._silu),
    "softmax": (("x", "axis"), api._softmax),
    "scale": (("x", "scale", "bias", "bias_after_scale"), api._scale),
    "cast": (("x", "dtype"), api._cast),
    "assign": (("x",), api._identity),
    "where": (("condition", "x", "y"), api._where),
    "clip": (("x", "min", "max"), api._clip),
    "reshape": (("x", "shape"), api._to_result_shape),
    "flatten": (("x", "start_axis", "stop_axis"), api._to_result_shape),
    "squeeze": (("x", "axis"), api._to_result_shape),
    "unsqueeze": (("x", "axis"), api._to_result_shape),
    "transpose": (("x", "perm"), api._transpose),
    "expand": (("x", "shape"), api._expand),
    "concat": (("x", "axis"), _concat),
    "stack": (("x", "axis"), tensor._stack),
    "split": (("x", "sections", "axis"), _split),
    "slice": (("x", "axes", "starts", "ends", "infer_flags", "decrease_axis"), _slice),
    "strided_slice": (("x", "axes", "starts", "ends", "strides"), _strided_slice),
    "gather": (("x", "index", "axis"), tensor._gather),
    "index_select": (("x", "index", "axis"), tensor._gather),
    "tile": (("x", "repeat_times"), tensor._tile),
    "sum": (("x", "axis", "dtype", "keepdim"), _reduce("ReduceSum")),
    "mean": (("x", "axis", "keepdim"), _reduce("ReduceMean")),
    "max": (("x", "axis", "keepdim"), _reduce("ReduceMax")),
    "min": (("x", "axis", "keepdim"), _reduce("ReduceMin")),
    "cumsum": (("x", "axis", "flatten", "exclusive", "reverse"), _cumsum),
    "layer_norm": (("x", "scale", "bias", "epsilon", "begin_norm_axis"), _layer_norm),
    "conv2d": (
        (
            "x",
            "weight",
            "strides",
            "paddings",
            "padding_algorithm",
            "dilations",
            "groups",
            "data_format",
        ),
        _conv2d,
    ),
    "depthwise_conv2d": (
        (
            "x",
            "weight",
            "strides",
            "paddings",
            "padding_algorithm",
            "groups",
            "dilations",
            "data_format",
        ),
        _conv2d,
    ),
    "pool2d": (
        (
            "x",
            "kernel_size",
            "strides",
            "paddings",
            "ceil_mode",
            "exclusive",
            "data_format",
            "pooling_type",
            "global_pooling",
            "adaptive",
            "padding_algorithm",
        ),
        _pool2d,
    ),
    "dropout": (("x", "seed_tensor", "p", "is_test", "mode", "seed", "fix_seed"), _dropout),
    "embedding": (("x", "weight", "padding_idx", "sparse"), _embedding),
    "batch_norm": (
        (
            "x",
            "mean",
            "variance",
            "scale",
            "bias",
            "is_test",
            "momentum",
            "epsilon",
            "data_format",
            "use_global_stats",
            "trainable_statistics",
        ),
        _batch_norm,
    ),
    "split_with_num": (("x", "num", "axis"), _split_with_num),
    "full_with_tensor": (("value", "shape", "dtype"), _full_with_tensor),
    "floor_divide": (("x", "y"), _integer_division(onnx_mod=False)),
    "remainder": (("x", "y"), _integer_division(onnx_mod=True)),
    "topk": (("x", "k", "axis", "largest", "sorted"), _topk),
    "one_hot": (("x", "num_classes"), _one_hot),
    "arange": (("start", "end", "step", "dtype", "place"), tensor._arange),
    "square": (("x",), _square),
    "add_n": (("inputs",), _add_n),
    "meshgrid": (("inputs",), _meshgrid),
    "assign_value_": (("output", "shape", "dtype", "values", "place"), _assign_value),
    "sin": (("x",), api._unary("Sin")),
    "cos": (("x",), api._unary("Cos")),
    "floor": (("x",), api._unary("Floor")),
    "relu6": (("x",), api._relu6),
    "leaky_relu": (("x", "negative_slope"), api._leaky_relu),
    "hardswish": (("x",), api._hardswish),
    "hardsigmoid": (("x", "slope", "offset"), api._hardsigmoid),
    "swish": (("x",), api._silu),
    "elementwise_pow": (("x", "y"), api._pow),
    **{
        f"{method}_interp": (_INTERP_PARAMETERS, _interp)
        for method in ("nearest", "bilinear", "linear", "bicubic", "trilinear")
    },
    "full": (("shape", "value", "dtype", "place"), _full),
    "full_like": (("x", "fill_value", "dtype", "place"), _full_like),
    "full_int_array": (("value", "dtype", "place"), _full_int_array),
    "empty": (("shape", "dtype", "place"), _empty),
    # paddle.shape's lowering: the sizes as the model runs them, in the result's dtype
    "shape": (("input",), api._shape_of),
    "shape64": (("input",), api._shape_of),
}


def c_ops_lowerings() -> Dict[Any, Callable]:
    """The lowerings of this module, by ``_C_ops`` function (those this Paddle has)."""
    table: Dict[Any, Callable] = {}
    for name, (parameters, lowering) in _TABLE.items():
        fn = getattr(paddle._C_ops, name, None)
        if fn is not None:
            table[fn] = positional(*parameters)(lowering)
    return table
