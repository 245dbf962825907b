"""NumPy arrays computed in the graph: ``t.numpy()``, NumPy's operators and functions on
what it gives, made an ndarray again where the value leaves the graph.

Paddle computes each NumPy operation and NumPy decides what it gives: at capture the
operation runs once in NumPy on the example values, and the dtype, shape and kind (array
or NumPy scalar) of that result are what the graph's operation must give. The operands are
cast to the dtype NumPy computes in (NumPy's promotion rules and float64 defaults, not
Paddle's), and Paddle's result on the examples must equal NumPy's, else the graph breaks
before the operation, saying why (``explain()``). An operation NumPy has and this module
does not map breaks the graph as before. Where an array leaves the graph (returned,
stored, handed to code that is not captured) the code after the graph makes it an ndarray
again (``tensor.numpy()``), or a NumPy scalar where NumPy gives one.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import paddle

from ..bytecode import compat
from ..errors import DATA_LEAVES_GRAPH, DYNAMIC_VALUE, RAISES, TENSOR_BRANCH, Unsupported
from ..sources import Source
from .base import VariableTracker
from .constant import ConstantVariable
from .tensor import TensorVariable

#: the dtypes an array computed in the graph may have: those Paddle's tensors have too
_DTYPES = {
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
}
#: how close Paddle's result on the examples must be to NumPy's, by dtype kind
_TOLERANCE = {"f": 1e-6, "c": 1e-6}
_TOLERANCE_FLOAT32 = 1e-5


def to_numpy(t: paddle.Tensor) -> np.ndarray:
    """The ndarray a graph output stands for (the code after the graph calls it)."""
    return t.numpy()


def to_numpy_scalar(t: paddle.Tensor) -> Any:
    """The NumPy scalar a 0-d graph output stands for."""
    return t.numpy()[()]


class NdarrayVariable(VariableTracker):
    """A NumPy array (or scalar) computed in the graph, held as a tensor of the same dtype
    and shape. Nothing but the graph refers to it, so it is never updated in place."""

    def __init__(
        self, tensor: TensorVariable, scalar: bool = False, origin: Optional[Source] = None
    ):
        super().__init__(origin)
        self.tensor = tensor
        self.scalar = scalar

    @property
    def example(self) -> Any:
        """Its value on the examples, as NumPy has it."""
        value = self.tensor.example.numpy()
        return value[()] if self.scalar else value

    def python_type(self) -> type:
        return type(self.example)

    def describe(self) -> str:
        ex = self.example
        kind = "scalar" if self.scalar else f"array of shape {tuple(ex.shape)}"
        return f"NumPy {kind} of dtype {ex.dtype} (computed in the graph)"

    def reconstruct(self, cg) -> None:
        if self.source is not None:  # an array of the frame: that very object
            cg.extend(self.source.reconstruct(cg.code))
            return
        cg.extend(compat.load_callable_const(to_numpy_scalar if self.scalar else to_numpy))
        cg.tensor(self.tensor)
        cg.extend(compat.call(1))

    def truthy(self, tx) -> bool:
        raise Unsupported(
            f"the truth of a {self.describe()} decides a branch", category=TENSOR_BRANCH
        )

    def var_getattr(self, tx, name: str) -> VariableTracker:
        ex = self.example
        if name in ("dtype", "ndim", "size", "itemsize", "nbytes"):
            return ConstantVariable(getattr(ex, name))
        if name == "shape":
            return ConstantVariable(tuple(ex.shape))
        if name == "T":
            return transpose(tx, self, None)
        if name in _METHODS or name in _LEAVES:
            from .functions import BoundMethodVariable

            return BoundMethodVariable(self, name)
        raise Unsupported(
            f"attribute {name!r} of a {self.describe()} is not captured", category=DYNAMIC_VALUE
        )

    def call_method(self, tx, name: str, args, kwargs):
        if name in _LEAVES:
            raise Unsupported(
                f"ndarray.{name}() makes the array's value leave the graph",
                category=DATA_LEAVES_GRAPH,
            )
        if name == "__len__":
            if self.scalar or not self.example.shape:
                raise Unsupported("len() of a 0-d NumPy array raises TypeError", category=RAISES)
            return ConstantVariable(self.example.shape[0])
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return getitem(tx, self, args[0])
        method = _METHODS.get(name)
        if method is None:
            raise Unsupported(
                f"ndarray.{name}() on a {self.describe()} is not captured",
                category=DYNAMIC_VALUE,
            )
        return method(tx, self, list(args), dict(kwargs))


# ----------------------------------------------------------------- making arrays


def from_tensor(tx, t: TensorVariable, what: str = "tensor.numpy()") -> NdarrayVariable:
    """``t.numpy()``: a copy of the tensor's values, apart from its gradients."""
    dtype = _numpy_dtype_of(t)
    if dtype not in _DTYPES:
        raise Unsupported(
            f"{what} of a {t.example.dtype} tensor (its NumPy array is not of that dtype)",
            category=DATA_LEAVES_GRAPH,
        )
    if not _static_shape(tx, t):
        raise Unsupported(
            f"{what} of a tensor whose shape changes between calls (NumPy's shapes are "
            "known at capture)",
            category=DYNAMIC_VALUE,
        )
    if not t.example.place.is_cpu_place():
        raise Unsupported(
            f"{what} of a tensor on {t.example.place} copies it to the host",
            category=DATA_LEAVES_GRAPH,
        )
    # a copy: eager's ndarray keeps its values when the tensor is updated in place later
    copy = tx.output.call_method(tx, "clone", [t], {})
    detached = tx.output.call_method(tx, "detach", [copy], {})
    return NdarrayVariable(detached, scalar=False)


def _static_shape(tx, t: TensorVariable) -> bool:
    """Whether every size of ``t`` is a constant of the capture."""
    return all(tx.output.size_is_pinned(t, d) for d in range(len(t.example.shape)))


def from_outside(tx, array: np.ndarray, source: Source) -> Optional[NdarrayVariable]:
    """An ndarray of the frame (an argument, a global, a cell): the graph takes its values
    as an input; None for one the graph cannot hold (its dtype)."""
    if array.dtype.name not in _DTYPES:
        return None
    return NdarrayVariable(tx.output.add_array_input(array, source), origin=source)


def to_tensor(tx, array: NdarrayVariable, kwargs: Dict[str, VariableTracker]) -> TensorVariable:
    """``paddle.to_tensor(array, dtype=..., stop_gradient=...)``: a new tensor of the
    array's values."""
    unknown = set(kwargs) - {"dtype", "stop_gradient", "place"}
    if unknown or not all(v.is_python_constant() for v in kwargs.values()):
        raise Unsupported(
            "paddle.to_tensor() of a NumPy array computed in the graph, with "
            f"{', '.join(sorted(kwargs))}",
            category=DYNAMIC_VALUE,
        )
    place = kwargs.get("place")
    if place is not None and place.as_python_constant() is not None:
        raise Unsupported(
            "paddle.to_tensor(..., place=...) of a NumPy array computed in the graph",
            category=DYNAMIC_VALUE,
        )
    t = tx.output.call_method(tx, "clone", [array.tensor], {})
    dtype = kwargs.get("dtype")
    if dtype is not None and dtype.as_python_constant() is not None:
        t = tx.output.call_function(tx, paddle.cast, [t, dtype], {})
    stop = kwargs.get("stop_gradient")
    if stop is not None and stop.as_python_constant() is False:
        raise Unsupported(
            "paddle.to_tensor(array, stop_gradient=False): a new leaf that requires "
            "gradients, made in the graph",
            category=DYNAMIC_VALUE,
        )
    return t


def _constant_tensor(tx, value: Any, dtype: str) -> TensorVariable:
    """A constant of the capture as a tensor of ``dtype`` in the graph."""
    array = np.asarray(value, dtype=dtype)
    return tx.output.call_function(tx, paddle.to_tensor, [ConstantVariable(array)], {})


# ----------------------------------------------------------------- operations


def _numpy_dtype_of(t: TensorVariable) -> str:
    return str(t.example.dtype).replace("paddle.", "")


def _example(v: VariableTracker) -> Any:
    if isinstance(v, NdarrayVariable):
        return v.example
    if isinstance(v, TensorVariable):
        raise Unsupported(
            "a NumPy operation on a NumPy array and a tensor (NumPy would convert the "
            "tensor, Paddle the array)",
            category=DYNAMIC_VALUE,
        )
    if v.is_python_constant():
        return v.as_python_constant()
    raise Unsupported(
        f"{v.describe()} in a NumPy operation on an array computed in the graph",
        category=DYNAMIC_VALUE,
    )


def _operand(tx, v: VariableTracker, dtype: Optional[str]) -> Any:
    """``v`` as a graph operand of ``dtype`` (an array's tensor, cast; a constant array as
    a tensor; a Python number as it is, where ``dtype`` is None)."""
    if isinstance(v, NdarrayVariable):
        t = v.tensor
        if dtype is not None and _numpy_dtype_of(t) != dtype:
            t = tx.output.call_function(tx, paddle.cast, [t, ConstantVariable(dtype)], {})
        return t
    value = v.as_python_constant()
    if dtype is None:
        return v
    return _constant_tensor(tx, value, dtype)


def _result(tx, what: str, expected: Any, t: TensorVariable) -> NdarrayVariable:
    """The graph's value ``t`` of ``what`` as NumPy's ``expected`` (its example result):
    cast to its dtype, checked against it on the examples."""
    if not isinstance(expected, (np.ndarray, np.generic)) or str(expected.dtype) not in _DTYPES:
        raise Unsupported(
            f"{what} gives a {type(expected).__name__}"
            + (f" of dtype {expected.dtype}" if hasattr(expected, "dtype") else "")
            + ", which the graph does not compute",
            category=DYNAMIC_VALUE,
        )
    want = str(expected.dtype)
    if _numpy_dtype_of(t) != want:
        t = tx.output.call_function(tx, paddle.cast, [t, ConstantVariable(want)], {})
    got = t.example.numpy()
    expected_array = np.asarray(expected)
    if got.shape != expected_array.shape or not _same_values(got, expected_array):
        raise Unsupported(
            f"Paddle's {what} gives other values than NumPy's on the examples "
            f"(shape {got.shape}, NumPy's {expected_array.shape})",
            category=DYNAMIC_VALUE,
        )
    # explain() lists the operations NumPy code made
    t.node.meta["numpy"] = what
    return NdarrayVariable(t, scalar=isinstance(expected, np.generic))


def _same_values(got: np.ndarray, want: np.ndarray) -> bool:
    kind = want.dtype.kind
    if kind in _TOLERANCE:
        rtol = _TOLERANCE_FLOAT32 if want.dtype.itemsize <= 4 else _TOLERANCE[kind]
        if want.dtype == np.float16:
            rtol = 1e-3
        # (a sum that cancels to about 0 differs by rounding, as the order of adding does)
        finite = np.abs(want[np.isfinite(want)]) if want.size else want
        atol = rtol * max(1.0, float(finite.max()) if finite.size else 1.0)
        return bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))
    return bool(np.array_equal(got, want))


def _run_numpy(what: str, fn: Callable, *args: Any, **kwargs: Any) -> Any:
    try:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    except Exception as e:  # eager raises it too, at this line
        raise Unsupported(f"{what} raises {type(e).__name__}: {e}", category=RAISES) from e


def _float_kind(dtype: str) -> bool:
    return np.dtype(dtype).kind in "fc"


def _nan_aware(tx, fn: Callable, a: TensorVariable, b: TensorVariable) -> TensorVariable:
    """NumPy's maximum/minimum: NaN where either operand is NaN (Paddle 3.0 gives the other
    operand where the first is NaN)."""
    out = tx.output.call_function(tx, fn, [a, b], {})
    nan = tx.output.call_function(
        tx,
        paddle.logical_or,
        [
            tx.output.call_function(tx, paddle.isnan, [a], {}),
            tx.output.call_function(tx, paddle.isnan, [b], {}),
        ],
        {},
    )
    total = tx.output.call_function(tx, operator.add, [a, b], {})
    return tx.output.call_function(tx, paddle.where, [nan, total, out], {})


#: operators and NumPy's binary ufuncs -> (Paddle's function, whether the operands are
#: cast to the common dtype of the inputs instead of the result's: comparisons)
_BINARY: Dict[Any, Tuple[Callable, bool]] = {
    operator.add: (operator.add, False),
    operator.sub: (operator.sub, False),
    operator.mul: (operator.mul, False),
    operator.truediv: (paddle.divide, False),
    operator.floordiv: (paddle.floor_divide, False),
    operator.mod: (paddle.remainder, False),
    operator.pow: (paddle.pow, False),
    operator.matmul: (paddle.matmul, False),
    operator.eq: (paddle.equal, True),
    operator.ne: (paddle.not_equal, True),
    operator.lt: (paddle.less_than, True),
    operator.le: (paddle.less_equal, True),
    operator.gt: (paddle.greater_than, True),
    operator.ge: (paddle.greater_equal, True),
    operator.and_: (paddle.bitwise_and, False),
    operator.or_: (paddle.bitwise_or, False),
    operator.xor: (paddle.bitwise_xor, False),
    np.add: (operator.add, False),
    np.subtract: (operator.sub, False),
    np.multiply: (operator.mul, False),
    np.divide: (paddle.divide, False),
    np.true_divide: (paddle.divide, False),
    np.floor_divide: (paddle.floor_divide, False),
    np.mod: (paddle.remainder, False),
    np.remainder: (paddle.remainder, False),
    np.power: (paddle.pow, False),
    np.maximum: (paddle.maximum, False),
    np.minimum: (paddle.minimum, False),
    np.matmul: (paddle.matmul, False),
    np.equal: (paddle.equal, True),
    np.not_equal: (paddle.not_equal, True),
    np.less: (paddle.less_than, True),
    np.less_equal: (paddle.less_equal, True),
    np.greater: (paddle.greater_than, True),
    np.greater_equal: (paddle.greater_equal, True),
    np.logical_and: (paddle.logical_and, True),
    np.logical_or: (paddle.logical_or, True),
    np.logical_xor: (paddle.logical_xor, True),
    np.arctan2: (paddle.atan2, False),
}
#: NumPy's unary ufuncs (and operators) -> Paddle's function
_UNARY: Dict[Any, Callable] = {
    operator.neg: operator.neg,
    operator.pos: lambda x: x,
    operator.abs: paddle.abs,
    abs: paddle.abs,
    np.negative: operator.neg,
    np.abs: paddle.abs,
    np.absolute: paddle.abs,
    np.exp: paddle.exp,
    np.expm1: paddle.expm1,
    np.log: paddle.log,
    np.log1p: paddle.log1p,
    np.log2: paddle.log2,
    np.log10: paddle.log10,
    np.sqrt: paddle.sqrt,
    np.square: paddle.square,
    np.sin: paddle.sin,
    np.cos: paddle.cos,
    np.tan: paddle.tan,
    np.tanh: paddle.tanh,
    np.arcsin: paddle.asin,
    np.arccos: paddle.acos,
    np.arctan: paddle.atan,
    np.floor: paddle.floor,
    np.ceil: paddle.ceil,
    np.sign: paddle.sign,
    np.isnan: paddle.isnan,
    np.isinf: paddle.isinf,
    np.isfinite: paddle.isfinite,
    np.logical_not: paddle.logical_not,
}


def binary(tx, fn: Any, a: VariableTracker, b: VariableTracker, what: str = "") -> NdarrayVariable:
    """``a <op> b`` (or NumPy's binary ufunc) where one operand is an array computed in the
    graph."""
    what = what or f"NumPy's {getattr(fn, '__name__', fn)}"
    entry = _BINARY.get(fn)
    if entry is None:
        raise Unsupported(f"{what} on a NumPy array computed in the graph", category=DYNAMIC_VALUE)
    paddle_fn, on_inputs = entry
    ex_a, ex_b = _example(a), _example(b)
    expected = _run_numpy(what, fn, ex_a, ex_b)
    if fn in (operator.matmul, np.matmul) and (np.ndim(ex_a) == 0 or np.ndim(ex_b) == 0):
        raise Unsupported(f"{what} of a 0-d array raises ValueError", category=RAISES)
    dtype = str(np.result_type(ex_a, ex_b)) if on_inputs else str(np.asarray(expected).dtype)
    if dtype not in _DTYPES:
        raise Unsupported(f"{what} computes in {dtype}", category=DYNAMIC_VALUE)
    if paddle_fn in (paddle.floor_divide, paddle.remainder) and not _float_kind(dtype):
        if not (b.is_python_constant() and np.all(np.asarray(b.as_python_constant()) != 0)):
            # where the divisor is 0 NumPy gives 0 (and warns), Paddle's kernel raises
            raise Unsupported(
                f"{what} of integers by an array that may hold 0", category=DYNAMIC_VALUE
            )
    if paddle_fn is paddle.pow and not _float_kind(dtype) and _small_exponent(b):
        # an integer power by a constant as products: exact, and what every backend has
        # (TVM's power is float-only)
        out = _operand(tx, a, dtype)
        base = out
        for _ in range(int(b.as_python_constant()) - 1):
            out = tx.output.call_function(tx, operator.mul, [out, base], {})
        return _result(tx, what, expected, out)
    operator_fn = _OPERATORS.get(fn)
    if operator_fn is not None and (_python_number(a) or _python_number(b)):
        # a Python number stays one, as in Paddle code (``t // 3``): the tensor already
        # has the dtype NumPy computes in, which a number of it keeps
        ta = _operand(tx, a, None if _python_number(a) else dtype)
        tb = _operand(tx, b, None if _python_number(b) else dtype)
        out = tx.output.call_function(tx, operator_fn, [ta, tb], {})
        return _result(tx, what, expected, out)
    ta, tb = _operand(tx, a, dtype), _operand(tx, b, dtype)
    if paddle_fn in (paddle.maximum, paddle.minimum) and _float_kind(dtype):
        out = _nan_aware(tx, paddle_fn, ta, tb)
    else:
        out = tx.output.call_function(tx, paddle_fn, [ta, tb], {})
    return _result(tx, what, expected, out)


#: the binary ufuncs that are Python operators on tensors too (and so take a number)
_OPERATORS: Dict[Any, Callable] = {
    **{
        op: op
        for op in (
            operator.add,
            operator.sub,
            operator.mul,
            operator.truediv,
            operator.floordiv,
            operator.mod,
            operator.eq,
            operator.ne,
            operator.lt,
            operator.le,
            operator.gt,
            operator.ge,
        )
    },
    np.add: operator.add,
    np.subtract: operator.sub,
    np.multiply: operator.mul,
    np.divide: operator.truediv,
    np.true_divide: operator.truediv,
    np.floor_divide: operator.floordiv,
    np.mod: operator.mod,
    np.remainder: operator.mod,
    np.equal: operator.eq,
    np.not_equal: operator.ne,
    np.less: operator.lt,
    np.less_equal: operator.le,
    np.greater: operator.gt,
    np.greater_equal: operator.ge,
}


def _python_number(v: VariableTracker) -> bool:
    return v.is_python_constant() and type(v.as_python_constant()) in (int, float)


def _small_exponent(b: VariableTracker) -> bool:
    if not b.is_python_constant():
        return False
    value = b.as_python_constant()
    return type(value) is int and 2 <= value <= 4


def unary(tx, fn: Any, a: VariableTracker, what: str = "") -> NdarrayVariable:
    what = what or f"NumPy's {getattr(fn, '__name__', fn)}"
    if fn is operator.invert:
        fn = np.logical_not if np.asarray(_example(a)).dtype == bool else np.invert
    paddle_fn = _UNARY.get(fn)
    if fn is np.invert:
        paddle_fn = paddle.bitwise_not
    if paddle_fn is None:
        raise Unsupported(f"{what} on a NumPy array computed in the graph", category=DYNAMIC_VALUE)
    expected = _run_numpy(what, fn, _example(a))
    out_dtype = str(np.asarray(expected).dtype)
    # a float result is computed in its dtype (np.exp of ints: float64); the rest in the
    # input's (np.isnan, np.sign)
    dtype = out_dtype if _float_kind(out_dtype) else None
    t = _operand(tx, a, dtype)
    out = tx.output.call_function(tx, paddle_fn, [t], {})
    return _result(tx, what, expected, out)


def _constant_args(what: str, values: Dict[str, VariableTracker]) -> Dict[str, Any]:
    out = {}
    for name, v in values.items():
        if not v.is_python_constant():
            raise Unsupported(f"{what} with {name}={v.describe()}", category=DYNAMIC_VALUE)
        out[name] = v.as_python_constant()
    return out


def _axis(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


#: the positional parameters of NumPy's reductions (the others: axis, out, keepdims)
_REDUCTION_PARAMETERS = {
    "sum": ("axis", "dtype", "out", "keepdims"),
    "mean": ("axis", "dtype", "out", "keepdims"),
    "prod": ("axis", "dtype", "out", "keepdims"),
    "std": ("axis", "dtype", "out", "ddof", "keepdims"),
    "var": ("axis", "dtype", "out", "ddof", "keepdims"),
}


def reduction(
    tx, name: str, a: VariableTracker, args: List[VariableTracker], kwargs
) -> NdarrayVariable:
    """``np.sum(a, axis, ...)``, ``a.mean(axis, keepdims=...)`` and the like."""
    what = f"numpy.{name}()"
    names = _REDUCTION_PARAMETERS.get(name, ("axis", "out", "keepdims"))
    given = dict(zip(names, args))
    given.update(kwargs)
    options = _constant_args(what, given)
    if options.get("out") is not None or set(options) - set(names):
        raise Unsupported(f"{what} with {', '.join(sorted(options))}", category=DYNAMIC_VALUE)
    options.pop("out", None)
    ex = _example(a)
    expected = _run_numpy(what, getattr(np, name), ex, **options)
    out_dtype = str(np.asarray(expected).dtype)
    axis = _axis(options.get("axis"))
    keepdim = bool(options.get("keepdims", False))
    if name in ("argmax", "argmin"):
        t = _arg_extreme(tx, name, _operand(tx, a, None), axis, keepdim)
    elif name in ("any", "all"):
        t = _operand(tx, a, "bool")
        t = tx.output.call_function(
            tx, getattr(paddle, name), [t], {"axis": _c(axis), "keepdim": _c(keepdim)}
        )
    elif name in ("std", "var"):
        ddof = options.get("ddof", 0)
        if ddof not in (0, 1):
            raise Unsupported(f"{what} with ddof={ddof}", category=DYNAMIC_VALUE)
        t = _operand(tx, a, _accumulating(out_dtype))
        t = tx.output.call_function(
            tx,
            getattr(paddle, name),
            [t],
            {"axis": _c(axis), "unbiased": _c(ddof == 1), "keepdim": _c(keepdim)},
        )
    else:
        # sum and prod of ints add in int64, mean of ints in float64: in the result's dtype
        compute = _accumulating(out_dtype) if name in ("sum", "prod", "mean") else None
        t = _operand(tx, a, compute)
        fn = {"max": paddle.max, "amax": paddle.max, "min": paddle.min, "amin": paddle.min}.get(
            name, getattr(paddle, name, None)
        )
        t = tx.output.call_function(tx, fn, [t], {"axis": _c(axis), "keepdim": _c(keepdim)})
    return _result(tx, what, expected, t)


def _accumulating(dtype: str) -> str:
    """The dtype a sum of ``dtype`` values adds in: float64 for float16 and float32, whose
    result is then rounded once. NumPy adds float32 pairwise, with an error of a few units
    in the last place; a backend's kernel may add a million values one after another in
    float32 (TVM: 2e-4 of the mean off), which its check of the build refuses."""
    return "float64" if dtype in ("float16", "float32") else dtype


def _c(value: Any) -> ConstantVariable:
    return ConstantVariable(value)


def _arg_extreme(tx, name: str, t: TensorVariable, axis: Any, keepdim: bool) -> TensorVariable:
    """NumPy's argmax/argmin: the first NaN's index where there is one (Paddle skips it)."""
    fn = getattr(paddle, name)
    kwargs = {"axis": _c(axis), "keepdim": _c(keepdim)}
    index = tx.output.call_function(tx, fn, [t], kwargs)
    if not _float_kind(_numpy_dtype_of(t)):
        return index
    nan = tx.output.call_function(tx, paddle.isnan, [t], {})
    nan_int = tx.output.call_function(tx, paddle.cast, [nan, _c("int32")], {})
    first_nan = tx.output.call_function(tx, paddle.argmax, [nan_int], kwargs)
    any_nan = tx.output.call_function(tx, paddle.any, [nan], kwargs)
    return tx.output.call_function(tx, paddle.where, [any_nan, first_nan, index], {})


def transpose(tx, a: NdarrayVariable, axes: Any) -> NdarrayVariable:
    ex = a.example
    perm = list(range(np.ndim(ex)))[::-1] if axes is None else list(axes)
    expected = _run_numpy("numpy.transpose()", np.transpose, ex, None if axes is None else perm)
    t = tx.output.call_function(tx, paddle.transpose, [a.tensor, _c(perm)], {})
    return _result(tx, "numpy.transpose()", expected, t)


def reshape(tx, a: NdarrayVariable, shape: Any, what: str = "numpy.reshape()") -> NdarrayVariable:
    expected = _run_numpy(what, np.reshape, a.example, shape)
    t = tx.output.call_function(tx, paddle.reshape, [a.tensor, _c(list(expected.shape))], {})
    return _result(tx, what, expected, t)


def astype(tx, a: NdarrayVariable, dtype: Any) -> NdarrayVariable:
    expected = _run_numpy("ndarray.astype()", a.example.astype, dtype)
    t = tx.output.call_function(tx, paddle.cast, [a.tensor, _c(str(expected.dtype))], {})
    return _result(tx, "ndarray.astype()", expected, t)


def getitem(tx, a: NdarrayVariable, key: VariableTracker) -> NdarrayVariable:
    """``a[key]`` with ints, slices, None and ``...``: a copy in the graph (NumPy's view is
    never written here)."""
    if not key.is_python_constant() or not _basic_key(key.as_python_constant()):
        raise Unsupported(
            f"indexing a NumPy array computed in the graph with {key.describe()}",
            category=DYNAMIC_VALUE,
        )
    value = key.as_python_constant()
    expected = _run_numpy("ndarray indexing", operator.getitem, a.example, value)
    t = tx.output.call_function(tx, operator.getitem, [a.tensor, key], {})
    if list(t.example.shape) != list(np.shape(expected)):
        t = tx.output.call_function(tx, paddle.reshape, [t, _c(list(np.shape(expected)))], {})
    return _result(tx, "ndarray indexing", expected, t)


def _basic_key(key: Any) -> bool:
    parts = key if isinstance(key, tuple) else (key,)
    return all(p is None or p is Ellipsis or isinstance(p, slice) or type(p) is int for p in parts)


def join(tx, name: str, args: List[VariableTracker], kwargs) -> NdarrayVariable:
    """``np.concatenate(arrays, axis)`` and ``np.stack(arrays, axis)``."""
    what = f"numpy.{name}()"
    if not args:
        raise Unsupported(f"{what} without arrays", category=RAISES)
    items = args[0].unpack_var_sequence(tx)
    options = _constant_args(what, dict(zip(["axis"], args[1:]), **kwargs))
    if set(options) - {"axis"}:
        raise Unsupported(f"{what} with {', '.join(sorted(options))}", category=DYNAMIC_VALUE)
    examples = [_example(i) for i in items]
    expected = _run_numpy(what, getattr(np, name), examples, **options)
    dtype = str(np.asarray(expected).dtype)
    tensors = [_operand(tx, i, dtype) for i in items]
    from .containers import ListVariable

    fn = paddle.concat if name == "concatenate" else paddle.stack
    axis = options.get("axis", 0)
    if axis is None:
        tensors = [tx.output.call_function(tx, paddle.flatten, [t], {}) for t in tensors]
        axis = 0
    t = tx.output.call_function(tx, fn, [ListVariable(tensors)], {"axis": _c(axis)})
    return _result(tx, what, expected, t)


def where(tx, args: List[VariableTracker], kwargs) -> NdarrayVariable:
    if len(args) != 3 or kwargs:
        raise Unsupported("numpy.where() with one argument (its indices)", category=DYNAMIC_VALUE)
    cond, a, b = args
    expected = _run_numpy("numpy.where()", np.where, *[_example(v) for v in args])
    dtype = str(np.asarray(expected).dtype)
    c = _operand(tx, cond, "bool")
    ta, tb = _operand(tx, a, dtype), _operand(tx, b, dtype)
    shape = list(np.shape(expected))
    c, ta, tb = (
        tx.output.call_function(tx, paddle.broadcast_to, [v, _c(shape)], {}) for v in (c, ta, tb)
    )
    t = tx.output.call_function(tx, paddle.where, [c, ta, tb], {})
    return _result(tx, "numpy.where()", expected, t)


def clip(tx, a: VariableTracker, args: List[VariableTracker], kwargs) -> NdarrayVariable:
    options = _constant_args("numpy.clip()", dict(zip(["a_min", "a_max"], args), **kwargs))
    lo, hi = options.get("a_min", options.get("min")), options.get("a_max", options.get("max"))
    expected = _run_numpy("numpy.clip()", np.clip, _example(a), lo, hi)
    dtype = str(np.asarray(expected).dtype)
    t = _operand(tx, a, dtype)
    for bound, fn in ((lo, paddle.maximum), (hi, paddle.minimum)):
        if bound is None:
            continue
        limit = _constant_tensor(tx, bound, dtype)
        if _float_kind(dtype):  # NaN stays NaN
            t = _nan_aware(tx, fn, t, limit)
        else:
            t = tx.output.call_function(tx, fn, [t, limit], {})
    return _result(tx, "numpy.clip()", expected, t)


def _method_reduction(name: str):
    def call(tx, a, args, kwargs):
        return reduction(tx, name, a, args, kwargs)

    return call


def _method_reshape(tx, a, args, kwargs):
    if kwargs:
        raise Unsupported("ndarray.reshape() with keywords", category=DYNAMIC_VALUE)
    shape = [v.as_python_constant() for v in args] if len(args) > 1 else _constant(args[0])
    return reshape(tx, a, shape, "ndarray.reshape()")


def _method_transpose(tx, a, args, kwargs):
    axes = None
    if args:
        axes = [v.as_python_constant() for v in args] if len(args) > 1 else _constant(args[0])
    return transpose(tx, a, axes)


def _method_astype(tx, a, args, kwargs):
    if len(args) != 1 or kwargs:
        raise Unsupported("ndarray.astype() with options", category=DYNAMIC_VALUE)
    return astype(tx, a, _constant(args[0]))


def _method_copy(tx, a, args, kwargs):
    t = tx.output.call_method(tx, "clone", [a.tensor], {})
    return NdarrayVariable(t, a.scalar)


def _method_flatten(tx, a, args, kwargs):
    return reshape(tx, a, [-1], "ndarray.flatten()")


def _constant(v: VariableTracker) -> Any:
    if not v.is_python_constant():
        raise Unsupported(
            f"{v.describe()} as an argument of a NumPy method", category=DYNAMIC_VALUE
        )
    return v.as_python_constant()


_REDUCTIONS = ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "any", "all", "std", "var")
_METHODS: Dict[str, Callable] = {name: _method_reduction(name) for name in _REDUCTIONS}
_METHODS.update(
    {
        "reshape": _method_reshape,
        "transpose": _method_transpose,
        "astype": _method_astype,
        "copy": _method_copy,
        "flatten": _method_flatten,
        "ravel": _method_flatten,
        "squeeze": lambda tx, a, args, kwargs: _shape_function(tx, "squeeze", a, args, kwargs),
    }
)
#: what hands the array's values to Python
_LEAVES = {"item", "tolist", "tobytes", "__float__", "__int__", "__bool__", "__index__"}


def _shape_function(tx, name: str, a: VariableTracker, args, kwargs) -> NdarrayVariable:
    """``np.squeeze(a, axis)``, ``np.expand_dims(a, axis)``: the result's shape is known at
    capture, so both are a reshape."""
    what = f"numpy.{name}()"
    options = _constant_args(what, dict(zip(["axis"], args), **kwargs))
    if set(options) - {"axis"}:
        raise Unsupported(f"{what} with {', '.join(sorted(options))}", category=DYNAMIC_VALUE)
    expected = _run_numpy(what, getattr(np, name), _example(a), **options)
    t = _operand(tx, a, None)
    t = tx.output.call_function(tx, paddle.reshape, [t, _c(list(np.shape(expected)))], {})
    return _result(tx, what, expected, t)


def _array_of(tx, args, kwargs, name: str) -> VariableTracker:
    """``np.asarray(x, dtype)`` / ``np.array(x, dtype)`` of a tensor or an array computed
    in the graph."""
    options = _constant_args(f"numpy.{name}()", dict(zip(["dtype"], args[1:]), **kwargs))
    if set(options) - {"dtype"}:
        raise Unsupported(
            f"numpy.{name}() with {', '.join(sorted(options))}", category=DYNAMIC_VALUE
        )
    source = args[0]
    if isinstance(source, TensorVariable):
        array = from_tensor(tx, source, f"numpy.{name}()")
    elif isinstance(source, NdarrayVariable):
        array = source
    else:
        raise Unsupported(
            f"numpy.{name}() of a {source.describe()} holding arrays computed in the graph",
            category=DYNAMIC_VALUE,
        )
    if name == "array" and array is source:
        array = _method_copy(tx, array, [], {})
    dtype = options.get("dtype")
    return array if dtype is None else astype(tx, array, dtype)


def _holds_array(v: VariableTracker) -> bool:
    """Whether ``v`` is an array computed in the graph, or a list or tuple holding one."""
    from .containers import BaseListVariable

    if isinstance(v, BaseListVariable):
        return any(_holds_array(i) for i in v.items)
    return isinstance(v, NdarrayVariable)


def call_numpy(tx, fn: Any, args: List[VariableTracker], kwargs: Dict[str, VariableTracker]):
    """A NumPy function called with an array computed in the graph (or a tensor, which it
    makes one), or None where no argument is one."""
    if not any(_holds_array(v) for v in list(args) + list(kwargs.values())):
        if not (
            fn in (np.asarray, np.array, np.asanyarray)
            and args
            and isinstance(args[0], TensorVariable)
        ):
            return None
    name = getattr(fn, "__name__", "?")
    if fn in (np.asarray, np.array, np.asanyarray) and args:
        return _array_of(tx, args, kwargs, "array" if fn is np.array else "asarray")
    if isinstance(fn, np.ufunc) and kwargs:
        raise Unsupported(
            f"numpy.{name}() with {', '.join(sorted(kwargs))}", category=DYNAMIC_VALUE
        )
    if fn in _UNARY and len(args) == 1:
        return unary(tx, fn, args[0])
    if fn in _BINARY and len(args) == 2:
        return binary(tx, fn, args[0], args[1])
    if fn is np.dot and len(args) == 2 and not kwargs:
        if max(np.ndim(_example(args[0])), np.ndim(_example(args[1]))) > 2:
            raise Unsupported(
                "numpy.dot() of arrays of more than 2 dimensions", category=DYNAMIC_VALUE
            )
        return binary(tx, np.matmul, args[0], args[1], "numpy.dot()")
    if name in _REDUCTIONS + ("amax", "amin") and args:
        return reduction(tx, name, args[0], args[1:], kwargs)
    if name in ("concatenate", "stack"):
        return join(tx, name, args, kwargs)
    if name == "where":
        return where(tx, args, kwargs)
    if name == "clip" and args:
        return clip(tx, args[0], args[1:], kwargs)
    if name in ("squeeze", "expand_dims") and args:
        return _shape_function(tx, name, args[0], args[1:], kwargs)
    if name in ("reshape", "transpose") and args and isinstance(args[0], NdarrayVariable):
        method = _METHODS[name]
        return method(tx, args[0], args[1:], kwargs)
    if name == "shape" and len(args) == 1 and not kwargs:
        return ConstantVariable(tuple(np.shape(_example(args[0]))))
    if name == "ndim" and len(args) == 1 and not kwargs:
        return ConstantVariable(np.ndim(_example(args[0])))
    raise Unsupported(
        f"numpy.{name}() on a NumPy array computed in the graph is not captured",
        category=DYNAMIC_VALUE,
    )


__all__ = [
    "NdarrayVariable",
    "binary",
    "call_numpy",
    "from_tensor",
    "getitem",
    "to_tensor",
    "unary",
]
