"""jit-core's own ONNX lowerings (``jit_core.kit.onnx.direct``), registered through the
``jit_register_onnx_lowerings`` hook like a plugin's.

Each computes what the Paddle operation computes, for the arguments it accepts, and
declines the rest (``ex.decline``: the graph then takes the paddle2onnx path, or runs on
the paddle backend where paddle2onnx is missing). Every operation that only changes a
shape (``reshape``, ``flatten``, ``squeeze``...) is one ``Reshape`` to the result's
recorded shape (-1 for its one dynamic size, if any). ``builtin_lowerings`` adds those of
``lowerings_tensor`` (making, indexing, joining tensors), ``lowerings_c_ops`` and
``lowerings_detection`` (``generate_proposals``).
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any, Callable, Dict, List, Sequence, cast

import numpy as np
import paddle
import paddle.nn.functional as F

from ... import hookspecs, shapes
from .direct import Exporter, _resolve
from .lowerings_detection import detection_lowerings

hookimpl = hookspecs.hookimpl

_FLOATS = ("float16", "bfloat16", "float32", "float64")


def _float_input(ex: Exporter, x: Any) -> str:
    if ex.dtype(x) not in _FLOATS:
        ex.decline(f"a {ex.dtype(x)} input")
    return ex.input(x)


# -- elementwise arithmetic ---------------------------------------------------------------
def _binary(onnx_op: str) -> Callable:
    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        x, y = a["x"], a["y"]
        if ex.node.meta.get("dtype") is None and onnx_op in _INT_OPS:
            return _int_arithmetic(ex, onnx_op, x, y)
        if not (ex.is_tensor(x) or ex.is_tensor(y)):
            ex.decline("no tensor operand")
        out = ex.out_dtype()
        return ex.op(onnx_op, [ex.input(x, out), ex.input(y, out)])

    return lower


_INT_OPS = {"Add": operator.add, "Sub": operator.sub, "Mul": operator.mul}


def _int_operands(ex: Exporter, what: str, x: Any, y: Any, op: Callable) -> Any:
    """Decline unless ``x`` and ``y`` are graph ints or Python ints; ``op`` of their
    values where both are known, else None."""
    for v in (x, y):
        if not ((isinstance(v, int) and not isinstance(v, bool)) or ex.dtype(v) == "int64"):
            ex.decline(f"{what} of something other than ints")
        if ex.is_tensor(v) and ex.sizes(v):
            ex.decline(f"{what} of a tensor")
    try:
        return op(ex.known(x), ex.known(y))
    except Exception:  # noqa: BLE001 - an operand only the model knows (or y == 0)
        return None


def _int_arithmetic(ex: Exporter, onnx_op: str, x: Any, y: Any) -> str:
    """``+``, ``-``, ``*`` of graph ints (a size of a dynamic dimension and Python ints):
    a 0-D int64 tensor, known where both operands are."""
    value = _int_operands(ex, "int arithmetic", x, y, _INT_OPS[onnx_op])
    name = ex.op(onnx_op, [ex.input(x, "int64"), ex.input(y, "int64")])
    return ex.int_result(name, value)


def _int_floordiv(ex: Exporter, a: Dict[str, Any]) -> str:
    """``//`` of graph ints (``head_dim // 2``, a length halved): Python's, rounding
    towards minus infinity where ONNX's integer ``Div`` truncates."""
    x, y = a["x"], a["y"]
    if ex.node.meta.get("dtype") is not None:
        ex.decline("// of tensors")
    value = _int_operands(ex, "//", x, y, operator.floordiv)
    a_, b_ = ex.input(x, "int64"), ex.input(y, "int64")
    q = ex.op("Div", [a_, b_])
    inexact = ex.op("Not", [ex.op("Equal", [ex.op("Mul", [q, b_]), a_])])
    zero = ex.constant(np.int64(0), "int64")
    signs = ex.op("Xor", [ex.op("Less", [a_, zero]), ex.op("Less", [b_, zero])])
    down = ex.cast(ex.op("And", [inexact, signs]), "int64")
    return ex.int_result(ex.op("Sub", [q, down]), value)


def _size(ex: Exporter, a: Dict[str, Any]) -> str:
    """``jit_core.shapes.size(t, dim)``: a size the graph reads when it runs. A 0-D
    int64 tensor: the constant where this model fixes it, else read from ``t``."""
    t, dim = a["t"], a["dim"]
    sizes = ex.sizes(t)
    dim = dim % len(sizes)
    if sizes[dim] is not None:
        return ex.int_result(ex.constant(np.int64(sizes[dim]), "int64"), sizes[dim])
    one = ex.op("Shape", [ex.input(t)], start=dim, end=dim + 1)
    return ex.int_result(ex.op("Squeeze", [one, ex.ints([0])]))


def _compare(onnx_op: str, negate: bool = False) -> Callable:
    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        x, y = a["x"], a["y"]
        tensors = [v for v in (x, y) if ex.is_tensor(v)]
        dtypes = {ex.dtype(v) for v in tensors}
        if len(dtypes) != 1:
            ex.decline("operands of different dtypes")
        dtype = dtypes.pop()
        if any(isinstance(v, float) for v in (x, y)) and dtype not in _FLOATS:
            ex.decline("an integer tensor compared with a float")
        out = ex.op(onnx_op, [ex.input(x, dtype), ex.input(y, dtype)])
        return ex.op("Not", [out]) if negate else out

    return lower


def _logical(onnx_op: str) -> Callable:
    """``&``, ``|``, ``^`` and Paddle's logical and bitwise ops, of bool tensors (ONNX's
    bitwise ops on integers need opset 18)."""

    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        operands = [a["x"]] if onnx_op == "Not" else [a["x"], a["y"]]
        if not all(ex.is_tensor(v) and ex.dtype(v) == "bool" for v in operands):
            ex.decline("operands that are not all bool tensors")
        return ex.op(onnx_op, [ex.input(v) for v in operands])

    return lower


def _pow(ex: Exporter, a: Dict[str, Any]) -> str:
    x, y = a["x"], a["y"]
    if not ex.is_tensor(x):
        ex.decline("a number raised to a tensor")
    out = ex.out_dtype()
    if out not in _FLOATS:
        ex.decline("an integer power")
    return ex.op("Pow", [ex.input(x, out), ex.input(y, out)])


def _matmul(ex: Exporter, a: Dict[str, Any]) -> str:
    x, y = a["x"], a["y"]
    if a.get("transpose_x") or a.get("transpose_y"):
        x_t = _transposed_last(ex, x) if a.get("transpose_x") else ex.input(x)
        y_t = _transposed_last(ex, y) if a.get("transpose_y") else ex.input(y)
        return ex.op("MatMul", [x_t, y_t])
    if ex.dtype(x) != ex.dtype(y):
        ex.decline("operands of different dtypes")
    return ex.op("MatMul", [ex.input(x), ex.input(y)])


def _mm(ex: Exporter, a: Dict[str, Any]) -> str:
    """``paddle.mm(input, mat2)``: ``matmul`` without its transposes (Swin's attention)."""
    return _matmul(ex, {"x": a["input"], "y": a["mat2"]})


def _transposed_last(ex: Exporter, x: Any) -> str:
    rank = ex.rank(x)
    if rank < 2:
        ex.decline("a transposed vector")
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return ex.op("Transpose", [ex.input(x)], perm=perm)


def _unary(onnx_op: str, floats_only: bool = True) -> Callable:
    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        x = a["x"]
        return ex.op(onnx_op, [_float_input(ex, x) if floats_only else ex.input(x)])

    return lower


def _identity(ex: Exporter, a: Dict[str, Any]) -> str:
    return ex.op("Identity", [ex.input(a["x"])])


def _log_base(base: float) -> Callable:
    """log2, log10: ln(x) times a constant (ONNX has the natural logarithm only)."""

    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        x = _float_input(ex, a["x"])
        scale = ex.constant(1.0 / np.log(base), ex.dtype(a["x"]))
        return ex.op("Mul", [ex.op("Log", [x]), scale])

    return lower


def _log1p(ex: Exporter, a: Dict[str, Any]) -> str:
    """log(1 + x) without losing a small x to the rounding of 1 + x: x * log(u) / (u - 1)
    with u = 1 + x, x itself where u rounds to 1, u where it is infinite (Goldberg's
    formulation)."""
    x = _float_input(ex, a["x"])
    dtype = ex.dtype(a["x"])
    one = ex.constant(1.0, dtype)
    u = ex.op("Add", [one, x])
    d = ex.op("Sub", [u, one])
    scaled = ex.op("Mul", [x, ex.op("Div", [ex.op("Log", [u]), d])])
    # (+inf: inf / inf would be NaN)
    scaled = ex.op("Where", [ex.op("IsInf", [u], detect_negative=0), u, scaled])
    return ex.op("Where", [ex.op("Equal", [d, ex.constant(0.0, dtype)]), x, scaled])


def _expm1(ex: Exporter, a: Dict[str, Any]) -> str:
    """exp(x) - 1 without losing a small x: (u - 1) * x / log(u) with u = exp(x); x where
    u rounds to 1, -1 where it rounds to 0, u where it is infinite (Kahan's formulation)."""
    x = _float_input(ex, a["x"])
    dtype = ex.dtype(a["x"])
    one = ex.constant(1.0, dtype)
    u = ex.op("Exp", [x])
    d = ex.op("Sub", [u, one])
    scaled = ex.op("Div", [ex.op("Mul", [d, x]), ex.op("Log", [u])])
    # (+inf: inf / inf would be NaN)
    scaled = ex.op("Where", [ex.op("IsInf", [u], detect_negative=0), u, scaled])
    minus_one = ex.constant(-1.0, dtype)
    big = ex.op("Where", [ex.op("Equal", [d, minus_one]), minus_one, scaled])
    return ex.op("Where", [ex.op("Equal", [d, ex.constant(0.0, dtype)]), x, big])


# -- activations ----------------------------------------------------------------------------
def _relu6(ex: Exporter, a: Dict[str, Any]) -> str:
    x = _float_input(ex, a["x"])
    dtype = ex.dtype(a["x"])
    return ex.op("Clip", [x, ex.constant(0.0, dtype), ex.constant(6.0, dtype)])


def _relu(ex: Exporter, a: Dict[str, Any]) -> str:
    return _relu_of(ex, _float_input(ex, a["x"]), a["x"])


def _relu_of(ex: Exporter, x: str, source: Any) -> str:
    """Paddle's relu of the ONNX value ``x``, which has the sizes and dtype of the graph
    value ``source`` and is computed from it (itself, or a batch norm's result)."""
    # Paddle's kernel is ``x > 0 ? x : 0``: NaN and -0.0 give 0, where ONNX's Relu keeps
    # them
    zero = ex.constant(0.0, ex.dtype(source))
    if ex.acts_on_checks and _made_by_convolution(ex, source) and _large(ex, source):
        # ONNX Runtime fuses a convolution and its Relu (ResNet18: 20 ms -> 14.5 ms), not a
        # Where: Relu, + 0.0 (which turns -0.0 into 0.0), and a check that no NaN came
        # out (the call then runs on Paddle). A model with a check has no bound outputs,
        # about 30 us a call: worth it only where the pass the fusion saves is large
        out = ex.op("Add", [ex.op("Relu", [x]), zero])
        ex.require_no_nan(out)
        return out
    return ex.op("Where", [ex.op("Greater", [x, zero]), x, zero])


#: the fewest elements (of the fixed dimensions) of a convolution's output whose relu is
#: exported fused (``_relu``): 64 KB of float32, ResNet18's smallest at 224x224 is 25088
FUSED_RELU_ELEMENTS = 16384


def _large(ex: Exporter, x: Any) -> bool:
    return math.prod(d for d in ex.sizes(x) if d is not None) >= FUSED_RELU_ELEMENTS


def _made_by_convolution(ex: Exporter, x: Any, depth: int = 3) -> bool:
    """Whether ``x`` comes from a convolution, a batch norm of one, or a sum with one (a
    residual): what ONNX Runtime fuses with the Relu that follows."""
    if depth == 0 or getattr(x, "op", None) not in ("call_function", "call_module", "call_method"):
        return False
    if x.target is operator.getitem:  # one result of _C_ops.batch_norm
        return _made_by_convolution(ex, x.args[0], depth - 1)
    if x.op == "call_module":
        name = type(_resolve(ex.gm, x.target)).__name__.lower()
    elif x.op == "call_method":
        name = str(x.target)
    else:
        name = getattr(x.target, "__name__", "").lower()
    if "conv" in name:
        return True
    if "batch_norm" in name or "batchnorm" in name:
        return _made_by_convolution(ex, x.args[0] if x.args else None, depth - 1)
    if name in ("add", "__add__", "__radd__"):
        return any(_made_by_convolution(ex, arg, depth - 1) for arg in x.args[:2])
    return False


@functools.lru_cache(maxsize=None)
def _slope_is_float32() -> bool:
    """Whether Paddle's leaky_relu kernel holds its slope as a float32 (Paddle 3.0) or a
    double (3.3): a float64 input shows it."""
    x = paddle.to_tensor([-1e30], dtype="float64")
    return float(F.leaky_relu(x, 0.2).numpy()[0]) == -1e30 * float(np.float32(0.2))


def _leaky_relu(ex: Exporter, a: Dict[str, Any]) -> str:
    # ``x > 0 ? x : slope * x`` with the slope as Paddle's kernel holds it (ONNX's
    # LeakyRelu holds it as a float32, off by 1e-8 for float64 on Paddle 3.3)
    x = _float_input(ex, a["x"])
    dtype = ex.dtype(a["x"])
    value = float(a["negative_slope"])
    if _slope_is_float32():
        value = float(np.float32(value))
    slope = ex.constant(value, dtype)
    positive = ex.op("Greater", [x, ex.constant(0.0, dtype)])
    return ex.op("Where", [positive, x, ex.op("Mul", [x, slope])])


def _hardswish(ex: Exporter, a: Dict[str, Any]) -> str:
    # Paddle's kernel, x * min(max(x + 3, 0), 6) / 6 (ONNX Runtime's HardSwish is float32
    # only)
    x = _float_input(ex, a["x"])
    dtype = ex.dtype(a["x"])
    six = ex.constant(6.0, dtype)
    gate = ex.op("Clip", [ex.op("Add", [x, ex.constant(3.0, dtype)]), ex.constant(0.0, dtype), six])
    return ex.op("Div", [ex.op("Mul", [x, gate]), six])


def _hardsigmoid(ex: Exporter, a: Dict[str, Any]) -> str:
    # Paddle's kernel: clip(x * slope + offset, 0, 1) (ONNX Runtime has HardSigmoid for
    # float32 only)
    slope, offset = float(a.get("slope", 0.1666667)), float(a.get("offset", 0.5))
    x = _float_input(ex, a["x"])
    dtype = ex.dtype(a["x"])
    y = ex.op("Add", [ex.op("Mul", [x, ex.constant(slope, dtype)]), ex.constant(offset, dtype)])
    return ex.op("Clip", [y, ex.constant(0.0, dtype), ex.constant(1.0, dtype)])


def _silu(ex: Exporter, a: Dict[str, Any]) -> str:
    return _silu_of(ex, _float_input(ex, a["x"]), ex.dtype(a["x"]))


def _silu_of(ex: Exporter, x: str, dtype: str) -> str:
    # Paddle's kernel, x / (1 + exp(-x)) (x * sigmoid(x) is what ONNX Runtime 1.19 fuses
    # into a QuickGelu that has no float64 kernel)
    one = ex.constant(1.0, dtype)
    return ex.op("Div", [x, ex.op("Add", [one, ex.op("Exp", [ex.op("Neg", [x])])])])


def _swiglu(ex: Exporter, a: Dict[str, Any]) -> str:
    """``silu(x) * y``; without ``y``, the two halves of ``x``'s last axis (LLaMA's MLP)."""
    x = _float_input(ex, a["x"])
    dtype = ex.dtype(a["x"])
    if a.get("y") is None:
        size = ex.shape(a["x"])[-1]
        if size % 2:
            ex.decline("an odd last dimension")
        x, y = ex.op("Split", [x, ex.ints([size // 2, size // 2])], outputs=2, axis=-1)
    else:
        if ex.dtype(a["y"]) != dtype:
            ex.decline("inputs of two dtypes")
        y = ex.input(a["y"])
    return ex.op("Mul", [_silu_of(ex, x, dtype), y])


def _trilu(upper: bool) -> Callable:
    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        x, k = a["x"], ex.known(a.get("diagonal", 0))
        if not isinstance(k, int) or isinstance(k, bool):
            ex.decline("a diagonal that is not an int")
        if ex.rank(x) < 2:
            ex.decline("a tensor of fewer than 2 dimensions")
        if ex.dtype(x) not in ("float32", "float64", "int64", "bool"):
            # what ONNX Runtime's Trilu kernels take
            ex.decline(f"{ex.dtype(x)} values")
        return ex.op("Trilu", [ex.input(x), ex.constant(k, "int64")], upper=int(upper))

    return lower


def _incubate(name: str) -> Any:
    """``paddle.incubate.nn.functional.<name>``, or None where this Paddle has none."""
    try:
        import paddle.incubate.nn.functional as incubate
    except ImportError:
        return None
    return getattr(incubate, name, None)


def _sqrt_of(ex: Exporter, x: str, dtype: str) -> str:
    # ONNX Runtime 1.19 (the last for Python 3.8 and 3.9) takes sqrt(inf) for NaN
    inf = ex.constant(float("inf"), dtype)
    return ex.op("Where", [ex.op("Equal", [x, inf]), inf, ex.op("Sqrt", [x])])


def _sqrt(ex: Exporter, a: Dict[str, Any]) -> str:
    return _sqrt_of(ex, _float_input(ex, a["x"]), ex.dtype(a["x"]))


def _rsqrt(ex: Exporter, a: Dict[str, Any]) -> str:
    # Paddle's kernel: 1 / sqrt(x), where sqrt(-0.0) is -0.0 and so rsqrt(-0.0) is -inf
    # (ONNX Runtime 1.19's Sqrt gives +0.0): a zero is its own reciprocal's sign. (Div,
    # not Reciprocal: 1.19's Reciprocal of inf is NaN)
    x = _float_input(ex, a["x"])
    dtype = ex.dtype(a["x"])
    one, zero = ex.constant(1.0, dtype), ex.constant(0.0, dtype)
    root = ex.op("Div", [one, _sqrt_of(ex, x, dtype)])
    return ex.op("Where", [ex.op("Equal", [x, zero]), ex.op("Div", [one, x]), root])


def _elu(ex: Exporter, a: Dict[str, Any]) -> str:
    # Paddle's kernel: x > 0 ? x : alpha * (exp(x) - 1) (ONNX Runtime's Elu: float32 only)
    x = _float_input(ex, a["x"])
    dtype = ex.dtype(a["x"])
    alpha = ex.constant(float(a.get("alpha", 1.0)), dtype)
    grown = ex.op("Mul", [alpha, ex.op("Sub", [ex.op("Exp", [x]), ex.constant(1.0, dtype)])])
    return ex.op("Where", [ex.op("Greater", [x, ex.constant(0.0, dtype)]), x, grown])


def _selu(ex: Exporter, a: Dict[str, Any]) -> str:
    # Paddle's kernel: scale * (x > 0 ? x : alpha * (exp(x) - 1))
    dtype = ex.dtype(a["x"])
    scale = ex.constant(float(a.get("scale", 1.0507009873554804934193349852946)), dtype)
    alpha = float(a.get("alpha", 1.6732632423543772848170429916717))
    return ex.op("Mul", [scale, _elu(ex, {"x": a["x"], "alpha": alpha})])


def _mish(ex: Exporter, a: Dict[str, Any]) -> str:
    # Paddle's kernel: x * tanh(softplus(x)), its softplus x > 20 ? x : log(1 + exp(x))
    soft = _softplus(ex, {"x": a["x"], "beta": 1.0, "threshold": 20.0})
    return ex.op("Mul", [_float_input(ex, a["x"]), ex.op("Tanh", [soft])])


def _any_all(onnx_op: str) -> Callable:
    """``any`` (the max of 0/1 values) and ``all`` (their min)."""

    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        if ex.dtype(a["x"]) != "bool":
            ex.decline(f"a {ex.dtype(a['x'])} input")
        values = ex.cast(ex.input(a["x"]), "int32")
        return ex.cast(_reduce_names(ex, onnx_op, values, a), "bool")

    return lower


def _hardtanh(ex: Exporter, a: Dict[str, Any]) -> str:
    # Paddle's kernel: x > max ? max : (x < min ? min : x), NaN kept
    x = _float_input(ex, a["x"])
    dtype = ex.dtype(a["x"])
    lo, hi = ex.constant(float(a["min"]), dtype), ex.constant(float(a["max"]), dtype)
    inner = ex.op("Where", [ex.op("Less", [x, lo]), lo, x])
    return ex.op("Where", [ex.op("Greater", [x, hi]), hi, inner])


def _softplus(ex: Exporter, a: Dict[str, Any]) -> str:
    # Paddle's kernel: x * beta > threshold ? x : log(1 + exp(x * beta)) / beta
    beta, threshold = float(a["beta"]), float(a["threshold"])
    if beta == 0:
        ex.decline("beta=0")
    x = _float_input(ex, a["x"])
    dtype = ex.dtype(a["x"])
    scaled = x if beta == 1 else ex.op("Mul", [x, ex.constant(beta, dtype)])
    soft = ex.op("Log", [ex.op("Add", [ex.constant(1.0, dtype), ex.op("Exp", [scaled])])])
    if beta != 1:
        soft = ex.op("Div", [soft, ex.constant(beta, dtype)])
    above = ex.op("Greater", [scaled, ex.constant(threshold, dtype)])
    return ex.op("Where", [above, x, soft])


def _celu(ex: Exporter, a: Dict[str, Any]) -> str:
    # x > 0 ? x : alpha * (exp(x / alpha) - 1) (ONNX Runtime's Celu is float32 only)
    alpha = float(a.get("alpha", 1.0))
    if alpha == 0:
        ex.decline("alpha=0")
    x = _float_input(ex, a["x"])
    dtype = ex.dtype(a["x"])
    grown = ex.op("Exp", [ex.op("Div", [x, ex.constant(alpha, dtype)])])
    negative = ex.op(
        "Mul", [ex.op("Sub", [grown, ex.constant(1.0, dtype)]), ex.constant(alpha, dtype)]
    )
    return ex.op("Where", [ex.op("Greater", [x, ex.constant(0.0, dtype)]), x, negative])


def _log_sigmoid(ex: Exporter, a: Dict[str, Any]) -> str:
    # Paddle's kernel, stable where log(sigmoid(x)) is -inf: m = max(-x, 0);
    # -m - log(exp(-m) + exp(-x - m))
    x = _float_input(ex, a["x"])
    dtype = ex.dtype(a["x"])
    minus = ex.op("Neg", [x])
    m = ex.op("Max", [minus, ex.constant(0.0, dtype)])
    total = ex.op(
        "Add", [ex.op("Exp", [ex.op("Neg", [m])]), ex.op("Exp", [ex.op("Sub", [minus, m])])]
    )
    return ex.op("Sub", [ex.op("Neg", [m]), ex.op("Log", [total])])


def _layer_activation(lowering: Callable, **attributes: str) -> Callable:
    """A layer's lowering: ``lowering`` with the arguments its attributes hold
    (``argument="_attribute"``)."""

    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        layer = a["layer"]
        args = {name: getattr(layer, attr) for name, attr in attributes.items()}
        return lowering(ex, {"x": a["x"], **args})

    return lower


def _gelu(ex: Exporter, a: Dict[str, Any]) -> str:
    x = _float_input(ex, a["x"])
    dtype = ex.dtype(a["x"])
    if a.get("approximate"):
        half = ex.op("Mul", [x, ex.constant(0.5, dtype)])
        # 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))
        cube = ex.op("Mul", [ex.op("Mul", [x, x]), x])
        inner = ex.op("Add", [x, ex.op("Mul", [cube, ex.constant(0.044715, dtype)])])
        scaled = ex.op("Mul", [inner, ex.constant(math.sqrt(2.0 / math.pi), dtype)])
        return ex.op("Mul", [half, ex.op("Add", [ex.op("Tanh", [scaled]), ex.constant(1, dtype)])])
    # (x * (1 + erf(x / sqrt(2)))) * 0.5: in the order of ONNX Runtime's pattern, which
    # it fuses into one Gelu kernel (BERT's encoder: 4% of a call)
    if dtype != "float32":
        ex.decline(f"exact gelu of {dtype} (ONNX Runtime's Erf is float32 only)")
    erf = ex.op("Erf", [ex.op("Div", [x, ex.constant(math.sqrt(2.0), dtype)])])
    whole = ex.op("Mul", [x, ex.op("Add", [erf, ex.constant(1, dtype)])])
    return ex.op("Mul", [whole, ex.constant(0.5, dtype)])


def _shape_of(ex: Exporter, a: Dict[str, Any]) -> str:
    """``paddle.shape(x)`` (and ``_C_ops.shape``/``shape64``): the sizes as the model runs
    them (int64), cast to the result's dtype (int32 for ``shape`` on some versions)."""
    sizes = ex.op("Shape", [ex.input(a["input"])])
    out = ex.out_dtype()
    return sizes if out == "int64" else ex.cast(sizes, out)


def _softmax(ex: Exporter, a: Dict[str, Any]) -> str:
    x = a["x"]
    if a.get("dtype") is not None:
        # Paddle casts the input first (LLaMA asks for float32 scores)
        out = ex.out_dtype()
        if out not in _FLOATS:
            ex.decline(f"dtype {out}")
        name = ex.input(x, out)
    else:
        name = _float_input(ex, x)
    rank = ex.rank(x)
    axis = int(a.get("axis", -1))
    return ex.op("Softmax", [name], axis=axis + rank if axis < 0 else axis)


# -- shapes --------------------------------------------------------------------------------
def _runtime_item(ex: Exporter, d: Any) -> bool:
    """Whether an item of a shape list is a size only the model knows: a graph int of a
    dynamic size, or a 0-D tensor (LLaMA's ``seq_length + past_length``)."""
    if ex.runtime_int(d):
        return True
    return ex.is_tensor(d) and not ex.sizes(d) and ex.dtype(d) in ("int32", "int64")


def holds_runtime_sizes(ex: Exporter, shape: Any) -> bool:
    """Whether a shape list holds sizes only the model knows (``shape_list_tensor``)."""
    return isinstance(shape, (list, tuple)) and any(_runtime_item(ex, d) for d in shape)


def shape_list_tensor(ex: Exporter, shape: Any) -> str:
    """A shape list holding sizes the model computes, as a 1-D int64 tensor."""
    parts = []
    for d in shape:
        if _runtime_item(ex, d):
            parts.append(ex.op("Unsqueeze", [ex.input(d, "int64"), ex.ints([0])]))
        elif ex.is_tensor(d):
            ex.decline("a shape list holding a tensor that is not one size")
        else:
            parts.append(ex.ints([int(ex.known(d))]))
    return ex.op("Concat", parts, axis=0)


def _to_result_shape(ex: Exporter, a: Dict[str, Any]) -> str:
    """Every operation that only changes the shape: a Reshape to the result's (-1 for the
    one dynamic size it may have; a 0 is a size, not "the input's", ``allowzero``). A
    shape given as a tensor, or a list holding sizes the model computes, is the model's
    to read: it may follow the data."""
    shape = a.get("shape")
    if ex.is_tensor(shape):
        # Paddle's 0 ("the input's size") and -1 are ONNX Reshape's too
        return ex.op("Reshape", [ex.input(a["x"]), ex.input(shape, "int64")])
    if holds_runtime_sizes(ex, shape):
        return ex.op("Reshape", [ex.input(a["x"]), shape_list_tensor(ex, shape)])
    if isinstance(shape, (list, tuple)) and any(ex.is_tensor(d) for d in shape):
        ex.known(list(shape))  # graph ints this model fixes, else declined
    return reshaped_to_result(ex, ex.input(a["x"]))


def reshaped_to_result(ex: Exporter, name: str) -> str:
    """``name`` reshaped to the result's recorded shape (-1 for its one dynamic size)."""
    sizes = ex.sizes(ex.node)
    if sizes.count(None) > 1 or (None in sizes and 0 in sizes):
        ex.decline("a result with more than one dynamic size")
    shape = [-1 if d is None else d for d in sizes]
    return ex.op("Reshape", [name, ex.ints(shape)], allowzero=1 if 0 in shape else None)


def _expand(ex: Exporter, a: Dict[str, Any]) -> str:
    shape = a.get("shape")
    if holds_runtime_sizes(ex, shape):
        # (a list or a tuple: holds_runtime_sizes says so)
        target, n = shape_list_tensor(ex, shape), len(cast("Sequence[Any]", shape))
    elif not ex.is_tensor(shape):
        if isinstance(shape, (list, tuple)) and any(ex.is_tensor(d) for d in shape):
            ex.known(list(shape))  # graph ints this model fixes, else declined
        return ex.op("Expand", [ex.input(a["x"]), ex.ints(ex.out_shape())])
    else:
        target, n = ex.input(shape, "int64"), ex.shape(shape)[0]
    # a shape read when the model runs: its -1s keep the input's sizes (ONNX's Expand
    # has no -1), the input's shape aligned to the right
    rank = ex.rank(a["x"])
    if n < rank:
        ex.decline("a shape shorter than the input's")
    sizes = ex.op("Shape", [ex.input(a["x"])])
    if n > rank:
        sizes = ex.op("Concat", [ex.ints([1] * (n - rank)), sizes], axis=0)
    keep = ex.op("Equal", [target, ex.ints([-1])])
    return ex.op("Expand", [ex.input(a["x"]), ex.op("Where", [keep, sizes, target])])


def _where(ex: Exporter, a: Dict[str, Any]) -> str:
    cond, x, y = a["condition"], a.get("x"), a.get("y")
    if x is None or y is None:
        ex.decline("where(condition) without values (the indices of its True items)")
    if ex.dtype(cond) != "bool":
        ex.decline(f"a {ex.dtype(cond)} condition")
    out = ex.out_dtype()
    if out == "bool":
        ex.decline("a bool where (ONNX Runtime has no bool Where kernel)")
    return ex.op("Where", [ex.input(cond), ex.input(x, out), ex.input(y, out)])


def _full_like(value: Any) -> Callable:
    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        fill = a.get("fill_value", value)
        if not isinstance(fill, (int, float, bool)):
            ex.decline("a fill value that is not a number")
        constant = ex.tensor([fill], ex.out_dtype())
        if None in ex.sizes(ex.node):
            # the input's shape, read when the model runs
            shape = ex.op("Shape", [ex.input(a["x"])])
        else:
            shape = ex.ints(ex.out_shape())
        return ex.op("ConstantOfShape", [shape], value=constant)

    return lower


def _transpose(ex: Exporter, a: Dict[str, Any]) -> str:
    perm = a.get("perm")
    if not isinstance(perm, (list, tuple)) or not all(isinstance(p, int) for p in perm):
        ex.decline("a permutation that is not a list of ints")
    rank = ex.rank(a["x"])
    return ex.op("Transpose", [ex.input(a["x"])], perm=[p % rank if rank else p for p in perm])


def _concat(ex: Exporter, a: Dict[str, Any]) -> str:
    xs, axis = a["x"], a.get("axis", 0)
    if not isinstance(xs, (list, tuple)) or not xs or not isinstance(axis, int):
        ex.decline("not a list of tensors along a constant axis")
    out = ex.out_dtype()
    rank = ex.rank(ex.node)
    return ex.op("Concat", [ex.input(x, out) for x in xs], axis=axis % rank)


def _reduce(onnx_op: str) -> Callable:
    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        x = a["x"]
        if a.get("dtype") is not None:
            ex.decline("a dtype argument")
        out = ex.out_dtype()
        if onnx_op == "ReduceMean" and out not in _FLOATS:
            ex.decline("the mean of an integer tensor")
        return _reduce_names(ex, onnx_op, ex.input(x, out if out != ex.dtype(x) else None), a)

    return lower


def _reduce_names(ex: Exporter, onnx_op: str, name: str, a: Dict[str, Any]) -> str:
    """``name`` (the values of ``a["x"]``) reduced over ``a["axis"]``: an int, a list,
    or None and ``[]``, which are every axis in Paddle."""
    rank, axis = ex.rank(a["x"]), a.get("axis")
    if axis is None or (isinstance(axis, (list, tuple)) and not axis):
        axes = list(range(rank))
    elif isinstance(axis, int):
        axes = [axis]
    elif isinstance(axis, (list, tuple)) and all(isinstance(d, int) for d in axis):
        axes = list(axis)
    else:
        ex.decline("axes that are not constants")
    axes = sorted({d % rank for d in axes}) if rank else []
    keep = 1 if a.get("keepdim") else 0
    if not axes:
        return ex.op("Identity", [name])
    if onnx_op == "ReduceSum" or ex.opset >= 18:
        return ex.op(onnx_op, [name, ex.ints(axes)], keepdims=keep)
    return ex.op(onnx_op, [name], axes=axes, keepdims=keep)


def _clip(ex: Exporter, a: Dict[str, Any]) -> str:
    x, lo, hi = a["x"], a.get("min"), a.get("max")
    dtype = ex.dtype(x)
    if dtype not in _FLOATS:
        ex.decline(f"a {dtype} input")
    inputs = [ex.input(x), "" if lo is None else ex.input(lo, dtype)]
    inputs.append("" if hi is None else ex.input(hi, dtype))
    return ex.op("Clip", inputs)


def _cast(ex: Exporter, a: Dict[str, Any]) -> str:
    # (the result's dtype, as the capture recorded it, whatever spelling the call used)
    out = ex.out_dtype()
    if ex.dtype(a["x"]) in _FLOATS and out not in _FLOATS and out != "bool":
        # NaN and values out of range become what each library's C++ cast makes them
        ex.decline(f"a {ex.dtype(a['x'])} to {out} cast")
    return ex.op("Cast", [ex.input(a["x"])], to=ex._onnx_dtype(out))


def _scale(ex: Exporter, a: Dict[str, Any]) -> str:
    # Paddle's kernel: x * scale + bias, or (x + bias) * scale
    if a.get("act") is not None:
        ex.decline(f"act={a.get('act')!r}")
    out = ex.out_dtype()
    if out not in _FLOATS:
        ex.decline(f"a {out} input")
    x, scale, bias = ex.input(a["x"]), ex.input(a.get("scale", 1.0), out), a.get("bias", 0.0)
    if a.get("bias_after_scale", True):
        return ex.op("Add", [ex.op("Mul", [x, scale]), ex.input(bias, out)])
    return ex.op("Mul", [ex.op("Add", [x, ex.input(bias, out)]), scale])


def _arg_reduce(onnx_op: str) -> Callable:
    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        x, axis = a["x"], a.get("axis")
        if not (axis is None or isinstance(axis, int)):
            ex.decline("an axis that is not an int")
        values = ex.input(x)
        dtype = ex.dtype(x)
        if dtype in _FLOATS:
            # Paddle's kernel skips NaN (index 0 where every value is NaN), where ONNX
            # Runtime's stops at it: NaN becomes the value that never wins
            never = ex.constant(-math.inf if onnx_op == "ArgMax" else math.inf, dtype)
            values = ex.op("Where", [ex.op("IsNaN", [values]), never, values])
        if axis is None:
            flat = ex.op("Reshape", [values, ex.ints([-1])])
            index = ex.op(onnx_op, [flat], axis=0, keepdims=0)
            index = ex.op("Reshape", [index, ex.ints(ex.out_shape())])
        else:
            keep = 1 if a.get("keepdim") else 0
            index = ex.op(onnx_op, [values], axis=axis % max(ex.rank(x), 1), keepdims=keep)
        out = ex.out_dtype()
        return index if out == "int64" else ex.cast(index, out)

    return lower


def _dropout(ex: Exporter, a: Dict[str, Any]) -> str:
    layer = a.get("layer")
    training = layer.training if layer is not None else a.get("training", True)
    p = layer.p if layer is not None else a.get("p", 0.5)
    if training and p != 0:
        ex.decline("dropout in training")
    if (
        getattr(layer, "mode", None) if layer is not None else a.get("mode")
    ) == "downscale_in_infer":
        return ex.op("Mul", [ex.input(a["x"]), ex.constant(1.0 - float(p), ex.dtype(a["x"]))])
    return ex.op("Identity", [ex.input(a["x"])])


# -- convolution, normalization, pooling ----------------------------------------------------
_PADDING_ALGORITHMS = ("EXPLICIT", "SAME", "VALID")


def _onnx_pads(padding: List[int]) -> List[int]:
    """Paddle's normalized 2-D paddings, ``[h, w]`` or ``[top, bottom, left, right]``, in
    ONNX's order ``[top, left, bottom, right]``."""
    if len(padding) == 2:
        return [padding[0], padding[1], padding[0], padding[1]]
    return [padding[0], padding[2], padding[1], padding[3]]


def _same_padding(ex: Exporter, x, kernel, stride, dilation) -> List[int]:
    """Paddle's ``padding="SAME"`` of a convolution or a pooling as explicit paddings
    ``[top, bottom, left, right]``: the output is ``ceil(size / stride)``, and of the
    padding that takes, the larger half goes after (its kernels' padding update). With a
    stride of 1 that is ``kernel - 1`` whatever the size; with a larger one, the size must
    be fixed."""
    if any(d != 1 for d in dilation):
        ex.decline("padding algorithm SAME with a dilation")
    pads = []
    for size, k, s in zip(ex.sizes(x)[2:], kernel, stride):
        if s == 1:
            total = k - 1
        elif size is None:
            ex.decline("padding algorithm SAME with a stride, on a dynamic size")
        else:
            total = max((-(-size // s) - 1) * s + k - size, 0)
        pads += [total // 2, total - total // 2]
    return pads


def _conv(
    ex: Exporter, x, weight, bias, stride, padding, algorithm, dilation, groups, data_format
) -> str:
    if data_format != "NCHW" or ex.rank(x) != 4 or algorithm not in _PADDING_ALGORITHMS:
        ex.decline(f"data_format={data_format!r}, padding algorithm {algorithm}")
    if algorithm == "SAME":
        padding = _same_padding(ex, x, ex.shape(weight)[2:], list(stride), list(dilation))
    elif algorithm == "VALID":
        padding = [0, 0]
    inputs = [_float_input(ex, x), ex.input(weight)]
    if bias is not None:
        inputs.append(ex.input(bias))
    return ex.op(
        "Conv",
        inputs,
        strides=list(stride),
        pads=_onnx_pads(list(padding)),
        dilations=list(dilation),
        group=int(groups),
        kernel_shape=ex.shape(weight)[2:],
    )


def _conv2d(ex: Exporter, a: Dict[str, Any]) -> str:
    from paddle.nn.functional.conv import _update_padding_nd
    from paddle.utils import convert_to_list

    data_format = a.get("data_format", "NCHW")
    if not ex.is_tensor(a["weight"]):
        ex.decline("a weight that is not a tensor")
    padding, algorithm = _update_padding_nd(a["padding"], data_format == "NHWC", 2)
    stride = convert_to_list(a["stride"], 2, "stride")
    dilation = convert_to_list(a["dilation"], 2, "dilation")
    return _conv(
        ex, a["x"], a["weight"], a["bias"], stride, padding, algorithm, dilation, a["groups"],
        data_format,
    )  # fmt: skip


def _layer_conv2d(ex: Exporter, a: Dict[str, Any]) -> str:
    layer = a["layer"]
    if layer._padding_mode != "zeros":
        ex.decline(f"padding_mode={layer._padding_mode!r}")
    return _conv(
        ex, a["x"], layer.weight, layer.bias, layer._stride, layer._updated_padding,
        layer._padding_algorithm, layer._dilation, layer._groups, layer._data_format,
    )  # fmt: skip


def _linear(ex: Exporter, a: Dict[str, Any]) -> str:
    x, weight, bias = a["x"], a["weight"], a.get("bias")
    out = ex.op("MatMul", [_float_input(ex, x), ex.input(weight)])
    return out if bias is None else ex.op("Add", [out, ex.input(bias)])


def _layer_linear(ex: Exporter, a: Dict[str, Any]) -> str:
    layer = a["layer"]
    return _linear(ex, {"x": a["x"], "weight": layer.weight, "bias": layer.bias})


def _batch_norm(ex: Exporter, x, mean, var, weight, bias, epsilon, data_format) -> str:
    if data_format not in ("NCHW", "NCL", "NC", "NCDHW"):
        ex.decline(f"data_format={data_format!r}")
    channels = ex.dim(x, 1)
    dtype = ex.dtype(x)
    scale = ex.input(weight) if weight is not None else ex.constant([1.0] * channels, dtype)
    shift = ex.input(bias) if bias is not None else ex.constant([0.0] * channels, dtype)
    return ex.op(
        "BatchNormalization",
        [_float_input(ex, x), scale, shift, ex.input(mean), ex.input(var)],
        epsilon=float(epsilon),
    )


def _f_batch_norm(ex: Exporter, a: Dict[str, Any]) -> str:
    if a.get("training") and not a.get("use_global_stats"):
        ex.decline("batch statistics (training)")
    return _batch_norm(
        ex, a["x"], a["running_mean"], a["running_var"], a.get("weight"), a.get("bias"),
        a.get("epsilon", 1e-5), a.get("data_format", "NCHW"),
    )  # fmt: skip


def _layer_batch_norm(ex: Exporter, a: Dict[str, Any]) -> str:
    layer = a["layer"]
    if layer.training and not layer._use_global_stats:
        ex.decline("batch statistics (the layer is in training)")
    return _batch_norm(
        ex, a["x"], layer._mean, layer._variance, layer.weight, layer.bias, layer._epsilon,
        layer._data_format,
    )  # fmt: skip


def _layer_legacy_batch_norm(ex: Exporter, a: Dict[str, Any]) -> str:
    """``paddle.nn.BatchNorm``, the older layer PaddleClas and PaddleSeg build with: a
    batch norm, then the activation its ``act`` names."""
    layer = a["layer"]
    if layer.training and not layer._use_global_stats:
        ex.decline("batch statistics (the layer is in training)")
    out = _batch_norm(
        ex, a["x"], layer._mean, layer._variance, layer.weight, layer.bias, layer._epsilon,
        layer._data_layout,
    )  # fmt: skip
    act = layer._act
    if act is None:
        return out
    if act == "relu":  # fused with the convolution before it where ``_relu`` would be
        return _relu_of(ex, out, a["x"])
    if act in ("sigmoid", "tanh"):
        return ex.op(act.capitalize(), [out])
    if act == "swish":  # Paddle's swish is x * sigmoid(x)
        return ex.op("Mul", [out, ex.op("Sigmoid", [out])])
    ex.decline(f"act={act!r}")


def _layer_norm(ex: Exporter, x, shape, weight, bias, epsilon) -> str:
    shape = [shape] if isinstance(shape, int) else list(shape)
    rank = ex.rank(x)
    dtype = ex.dtype(x)
    if ex.opset < 17:
        ex.decline("LayerNormalization needs opset 17")
    size = int(math.prod(shape)) if shape else 1
    w = ex.input(weight) if weight is not None else ex.constant([1.0] * size, dtype)
    b = ex.input(bias) if bias is not None else ex.constant([0.0] * size, dtype)
    if len(shape) > 1:  # Paddle's parameters are flat
        w = ex.op("Reshape", [w, ex.ints(shape)])
        b = ex.op("Reshape", [b, ex.ints(shape)])
    return ex.op(
        "LayerNormalization",
        [_float_input(ex, x), w, b],
        axis=rank - len(shape),
        epsilon=float(epsilon),
    )


def _f_layer_norm(ex: Exporter, a: Dict[str, Any]) -> str:
    return _layer_norm(
        ex, a["x"], a["normalized_shape"], a.get("weight"), a.get("bias"), a.get("epsilon", 1e-5)
    )


def _layer_layer_norm(ex: Exporter, a: Dict[str, Any]) -> str:
    layer = a["layer"]
    return _layer_norm(
        ex, a["x"], layer._normalized_shape, layer.weight, layer.bias, layer._epsilon
    )


def _pool(ex: Exporter, a: Dict[str, Any], kind: str) -> str:
    from paddle.nn.functional.pooling import _update_padding_nd
    from paddle.utils import convert_to_list

    x = a["x"]
    if a.get("data_format", "NCHW") != "NCHW" or ex.rank(x) != 4:
        ex.decline(f"data_format={a.get('data_format')!r}")
    if a.get("return_mask"):
        ex.decline("return_mask=True")
    if a.get("divisor_override") is not None:
        ex.decline("divisor_override")
    kernel = convert_to_list(a["kernel_size"], 2, "pool_size")
    stride = kernel if a.get("stride") is None else convert_to_list(a["stride"], 2, "pool_stride")
    padding, algorithm = _update_padding_nd(
        a["padding"], num_dims=2, channel_last=False, ceil_mode=False
    )
    if algorithm == "SAME":
        padding = _same_padding(ex, x, kernel, stride, [1, 1])
    elif algorithm == "VALID":
        padding = [0, 0]
    elif algorithm != "EXPLICIT":
        ex.decline(f"padding={a['padding']!r}")
    if a.get("ceil_mode") and not _ceil_is_floor(ex, x, kernel, stride, list(padding)):
        ex.decline("ceil_mode=True")
    attrs: Dict[str, Any] = {
        "kernel_shape": kernel,
        "strides": stride,
        "pads": _onnx_pads(list(padding)),
    }
    if kind == "AveragePool":
        attrs["count_include_pad"] = 0 if a.get("exclusive", True) else 1
    return ex.op(kind, [_float_input(ex, x)], **attrs)


def _ceil_is_floor(ex: Exporter, x, kernel, stride, padding) -> bool:
    """Whether ``ceil_mode`` gives the sizes the floor gives: with a stride of 1 always
    (PP-HGNetV2's stem), else where the windows fit the padded size exactly. Elsewhere
    the last window may start in the padding, where runtimes' ``ceil_mode`` disagree (one
    drops it, Paddle keeps it): declined."""
    pads = padding * 2 if len(padding) == 2 else padding[0::2] + padding[1::2]
    for dim, (k, s) in enumerate(zip(kernel, stride)):
        size = ex.sizes(x)[2 + dim]
        if s != 1 and (size is None or (size + pads[dim] + pads[dim + 2] - k) % s):
            return False
    return True


def _max_pool2d(ex: Exporter, a: Dict[str, Any]) -> str:
    return _pool(ex, a, "MaxPool")


def _avg_pool2d(ex: Exporter, a: Dict[str, Any]) -> str:
    return _pool(ex, a, "AveragePool")


def _layer_pool(kind: str) -> Callable:
    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        layer = a["layer"]
        args = {
            "x": a["x"],
            "kernel_size": layer.ksize,
            "stride": layer.stride,
            "padding": layer.padding,
            "ceil_mode": layer.ceil_mode,
            "data_format": layer.data_format,
            "return_mask": getattr(layer, "return_mask", False),
            "exclusive": getattr(layer, "exclusive", True),
            "divisor_override": getattr(layer, "divisor", None),
        }
        return _pool(ex, args, kind)

    return lower


def _adaptive_avg_pool2d(ex: Exporter, a: Dict[str, Any]) -> str:
    x, size = a["x"], a["output_size"]
    if a.get("data_format", "NCHW") != "NCHW" or ex.rank(x) != 4:
        ex.decline(f"data_format={a.get('data_format')!r}")
    sizes = [size, size] if isinstance(size, int) else list(size)
    if sizes == [1, 1]:
        return ex.op("GlobalAveragePool", [_float_input(ex, x)])
    h, w = ex.dim(x, 2), ex.dim(x, 3)
    sizes = [h if s is None else s for s in sizes[:1]] + [w if s is None else s for s in sizes[1:]]
    if sizes == [1, 1]:
        return ex.op("GlobalAveragePool", [_float_input(ex, x)])
    if [h, w] == [1, 1]:
        # every bin of a 1x1 map is its one value (VGG's 7x7 pooling of a small image)
        return ex.op("Expand", [_float_input(ex, x), ex.ints(ex.out_shape())])
    if len(sizes) != 2 or h % sizes[0] or w % sizes[1]:
        ex.decline(f"output_size {size} that does not divide the input's {h}x{w}")
    kernel = [h // sizes[0], w // sizes[1]]
    return ex.op("AveragePool", [_float_input(ex, x)], kernel_shape=kernel, strides=kernel)


def _adaptive_avg_pool1d(ex: Exporter, a: Dict[str, Any]) -> str:
    x, size = a["x"], a["output_size"]
    if ex.rank(x) != 3 or not isinstance(size, int) or isinstance(size, bool):
        ex.decline(f"adaptive_avg_pool1d of output_size {size!r}")
    if size == 1:
        return ex.op("GlobalAveragePool", [_float_input(ex, x)])
    length = ex.dim(x, 2)
    if length % size:
        ex.decline(f"output_size {size} that does not divide the input's length {length}")
    kernel = [length // size]
    return ex.op("AveragePool", [_float_input(ex, x)], kernel_shape=kernel, strides=kernel)


def _layer_adaptive_avg_pool1d(ex: Exporter, a: Dict[str, Any]) -> str:
    return _adaptive_avg_pool1d(ex, {"x": a["x"], "output_size": a["layer"].output_size})


def _layer_adaptive_avg_pool2d(ex: Exporter, a: Dict[str, Any]) -> str:
    layer = a["layer"]
    args = {"x": a["x"], "output_size": layer._output_size, "data_format": layer._data_format}
    return _adaptive_avg_pool2d(ex, args)


def _layer_softmax(ex: Exporter, a: Dict[str, Any]) -> str:
    return _softmax(ex, {"x": a["x"], "axis": a["layer"]._axis})


def _layer_gelu(ex: Exporter, a: Dict[str, Any]) -> str:
    return _gelu(ex, {"x": a["x"], "approximate": a["layer"]._approximate})


def _layer_leaky_relu(ex: Exporter, a: Dict[str, Any]) -> str:
    return _leaky_relu(ex, {"x": a["x"], "negative_slope": a["layer"]._negative_slope})


# ------------------------------------------------------------------------- the table
def builtin_lowerings() -> Dict[Any, Callable]:
    table: Dict[Any, Callable] = {}

    def add(keys, fn):
        for key in keys if isinstance(keys, (list, tuple)) else [keys]:
            # the capture records the function under Paddle's decorators (``_tanh`` for
            # ``paddle.tanh`` on Paddle 3.3): each layer of the wrapping is a key
            while key is not None:
                table[key] = fn
                key = getattr(key, "__wrapped__", None) if not isinstance(key, str) else None

    _add_operators(add)
    _add_functions(add)
    _add_layers(add)
    from .lowerings_c_ops import c_ops_lowerings
    from .lowerings_tensor import tensor_lowerings

    table.update(tensor_lowerings())
    table.update(c_ops_lowerings())
    table.update(detection_lowerings())
    return table


def _add_operators(add: Callable) -> None:
    """Python's operators and Paddle's arithmetic, comparison and logical functions."""
    for op, onnx_op in (
        (operator.add, "Add"),
        (operator.sub, "Sub"),
        (operator.mul, "Mul"),
        (operator.truediv, "Div"),
    ):
        add(op, _binary(onnx_op))
    add([paddle.add, "Tensor.add", "Tensor.__add__", "Tensor.__radd__"], _binary("Add"))
    add([paddle.subtract, "Tensor.subtract", "Tensor.__sub__"], _binary("Sub"))
    add([paddle.multiply, "Tensor.multiply", "Tensor.__mul__", "Tensor.__rmul__"], _binary("Mul"))
    add([paddle.divide, "Tensor.divide", "Tensor.__truediv__"], _binary("Div"))
    add([paddle.maximum, "Tensor.maximum"], _binary("Max"))
    add([paddle.minimum, "Tensor.minimum"], _binary("Min"))
    add([operator.pow, paddle.pow, "Tensor.pow", "Tensor.__pow__"], _pow)
    add([operator.matmul, paddle.matmul, "Tensor.matmul", "Tensor.__matmul__"], _matmul)
    add([paddle.mm, "Tensor.mm"], _mm)
    for op, onnx_op in ((operator.lt, "Less"), (operator.gt, "Greater")):
        add(op, _compare(onnx_op))
    add([operator.le], _compare("LessOrEqual"))
    add([operator.ge], _compare("GreaterOrEqual"))
    add([operator.eq], _compare("Equal"))
    add([operator.ne], _compare("Equal", negate=True))
    for op, name, onnx_op in (
        (operator.and_, "and", "And"),
        (operator.or_, "or", "Or"),
        (operator.xor, "xor", "Xor"),
    ):
        keys = [op, getattr(paddle, f"logical_{name}"), getattr(paddle, f"bitwise_{name}")]
        keys += [f"Tensor.__{name}__", f"Tensor.logical_{name}", f"Tensor.bitwise_{name}"]
        add(keys, _logical(onnx_op))
    add(
        [operator.invert, paddle.logical_not, paddle.bitwise_not, "Tensor.__invert__"]
        + ["Tensor.logical_not", "Tensor.bitwise_not"],
        _logical("Not"),
    )


def _add_functions(add: Callable) -> None:
    """Paddle's functions: activations, shapes, reductions, the functional layers."""
    add([operator.neg, paddle.neg, "Tensor.neg", "Tensor.__neg__"], _unary("Neg", False))
    add([operator.abs, paddle.abs, "Tensor.abs"], _unary("Abs", False))
    for name, onnx_op in (
        ("exp", "Exp"),
        ("log", "Log"),
        ("tanh", "Tanh"),
        ("sin", "Sin"),
        ("cos", "Cos"),
        ("floor", "Floor"),
        ("ceil", "Ceil"),
        ("erf", "Erf"),
        ("reciprocal", "Reciprocal"),
        ("tan", "Tan"),
        ("asin", "Asin"),
        ("acos", "Acos"),
        ("atan", "Atan"),
    ):
        add([getattr(paddle, name, None), f"Tensor.{name}"], _unary(onnx_op))
    add([paddle.nn.functional.sigmoid, "Tensor.sigmoid"], _unary("Sigmoid"))
    add([paddle.log2, "Tensor.log2"], _log_base(2.0))
    add([paddle.log10, "Tensor.log10"], _log_base(10.0))
    add([paddle.log1p, "Tensor.log1p"], _log1p)
    add([paddle.expm1, "Tensor.expm1"], _expm1)
    add([F.relu], _relu)
    add([F.tanh, paddle.nn.functional.activation.tanh], _unary("Tanh"))
    add([F.relu6], _relu6)
    add([F.leaky_relu], _leaky_relu)
    add([F.hardswish], _hardswish)
    add([F.hardsigmoid], _hardsigmoid)
    add([F.silu], _silu)
    add([F.gelu], _gelu)
    add([paddle.shape], _shape_of)
    add([shapes.size], _size)
    add([operator.floordiv], _int_floordiv)
    add([F.hardtanh], _hardtanh)
    add([paddle.rsqrt, "Tensor.rsqrt"], _rsqrt)
    add([paddle.sqrt, "Tensor.sqrt"], _sqrt)
    add([F.elu], _elu)
    add([F.selu], _selu)
    add([F.mish], _mish)
    add([F.swish], _silu)  # (the same kernel: x / (1 + exp(-x)))
    add([_incubate("swiglu"), getattr(F, "swiglu", None)], _swiglu)
    add([paddle.tril, "Tensor.tril"], _trilu(False))
    add([paddle.triu, "Tensor.triu"], _trilu(True))
    add([paddle.any, "Tensor.any"], _any_all("ReduceMax"))
    add([paddle.all, "Tensor.all"], _any_all("ReduceMin"))
    add([operator.pos], _identity)
    add([paddle.clone, "Tensor.clone"], _identity)
    add(["Tensor.detach"], _identity)  # (gradients are no concern of an exported model)
    add([abs], _unary("Abs", False))
    add([F.softplus], _softplus)
    add([F.celu], _celu)
    add([F.log_sigmoid], _log_sigmoid)
    add([F.softmax, "Tensor.softmax"], _softmax)
    add([paddle.reshape, "Tensor.reshape", paddle.flatten, "Tensor.flatten"], _to_result_shape)
    add([paddle.squeeze, "Tensor.squeeze", paddle.unsqueeze, "Tensor.unsqueeze"], _to_result_shape)
    add([paddle.transpose, "Tensor.transpose"], _transpose)
    add([paddle.expand, "Tensor.expand"], _expand)
    add([paddle.where, "Tensor.where"], _where)
    add([paddle.zeros_like], _full_like(0))
    add([paddle.ones_like], _full_like(1))
    add([paddle.full_like], _full_like(None))
    add([paddle.concat], _concat)
    add([paddle.mean, "Tensor.mean"], _reduce("ReduceMean"))
    add([paddle.sum, "Tensor.sum"], _reduce("ReduceSum"))
    add([paddle.max, "Tensor.max"], _reduce("ReduceMax"))
    add([paddle.min, "Tensor.min"], _reduce("ReduceMin"))
    add([paddle.clip, "Tensor.clip"], _clip)
    add([paddle.cast, "Tensor.cast", "Tensor.astype"], _cast)
    add([paddle.scale, "Tensor.scale"], _scale)
    add([paddle.argmax, "Tensor.argmax"], _arg_reduce("ArgMax"))
    add([paddle.argmin, "Tensor.argmin"], _arg_reduce("ArgMin"))
    # (dropout2d and dropout3d drop whole channels in training; in eval, the input)
    add([F.dropout, F.dropout2d, F.dropout3d], _dropout)
    add([F.conv2d], _conv2d)
    add([F.linear], _linear)
    add([F.batch_norm], _f_batch_norm)
    add([F.layer_norm], _f_layer_norm)
    add([F.max_pool2d], _max_pool2d)
    add([F.avg_pool2d], _avg_pool2d)
    add([F.adaptive_avg_pool2d], _adaptive_avg_pool2d)
    add([F.adaptive_avg_pool1d], _adaptive_avg_pool1d)


def _add_layers(add: Callable) -> None:
    """Paddle's layers: their forward is one of the calls above, with the layer's
    attributes."""
    nn = paddle.nn
    add(nn.Conv2D, _layer_conv2d)
    add(nn.Linear, _layer_linear)
    add([nn.BatchNorm2D, nn.BatchNorm1D, nn.BatchNorm3D], _layer_batch_norm)
    add(nn.BatchNorm, _layer_legacy_batch_norm)
    add(nn.LayerNorm, _layer_layer_norm)
    add(nn.MaxPool2D, _layer_pool("MaxPool"))
    add(nn.AvgPool2D, _layer_pool("AveragePool"))
    add(nn.AdaptiveAvgPool2D, _layer_adaptive_avg_pool2d)
    add(nn.AdaptiveAvgPool1D, _layer_adaptive_avg_pool1d)
    add(nn.Flatten, _to_result_shape)
    add(nn.ReLU, _relu)
    add(nn.ReLU6, _relu6)
    add(nn.Sigmoid, _unary("Sigmoid"))
    add(nn.Tanh, _unary("Tanh"))
    add(nn.Hardswish, _hardswish)
    add(nn.Hardsigmoid, _hardsigmoid)  # the layer has F.hardsigmoid's defaults
    add(nn.Silu, _silu)
    add(nn.GELU, _layer_gelu)
    add(nn.LeakyReLU, _layer_leaky_relu)
    add(nn.Softmax, _layer_softmax)
    add(nn.Identity, _identity)
    add(nn.Hardtanh, _layer_activation(_hardtanh, min="_min", max="_max"))
    add(nn.Softplus, _layer_activation(_softplus, beta="_beta", threshold="_threshold"))
    add(nn.CELU, _layer_activation(_celu, alpha="_alpha"))
    add(nn.LogSigmoid, _layer_activation(_log_sigmoid))
    add(nn.ELU, _layer_activation(_elu, alpha="_alpha"))
    add(nn.SELU, _layer_activation(_selu, scale="_scale", alpha="_alpha"))
    add(nn.Mish, _layer_activation(_mish))
    add(nn.Swish, _silu)
    add([nn.Dropout, nn.Dropout2D, nn.Dropout3D], _dropout)


@hookimpl
def jit_register_onnx_lowerings(register):
    for target, lowering in builtin_lowerings().items():
        register(target, lowering)
