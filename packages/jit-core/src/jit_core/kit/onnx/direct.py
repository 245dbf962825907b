"""The direct ONNX exporter: a captured graph lowered to ONNX node by node.

The graph already holds what the model computes, op by op, with every value's shape and
dtype (``node.meta``), so each Paddle operation becomes the ONNX operators that compute
it, without turning the graph back into a static Paddle program (``paddle.jit.to_static``
+ ``paddle.jit.save``) and without paddle2onnx. Parameters become initializers named as
Paddle names them, so ``parameters.lift_parameters`` keeps them live as before.

A lowering is a function ``lower(ex, a) -> name or tuple of names``: ``ex`` is the
``Exporter`` (it adds ONNX nodes and constants and answers shapes and dtypes) and ``a``
the call's arguments by parameter name. Lowerings are registered per Paddle callable
(``paddle.add``, ``F.conv2d``), per tensor method (``"Tensor.reshape"``) and per layer class
(``paddle.nn.Conv2D``, then ``a["layer"]`` is the layer), through the
``jit_register_onnx_lowerings`` hook: jit-core's own through the same hook as a plugin's.

A graph with a call that has no lowering, or that a lowering declines (``ex.decline(why)``:
an option it does not serve), raises ``MissingLowering``, which names the operation and
the user's line; ``export.export_onnx`` then takes the paddle2onnx path where that is
installed (the paddle backend runs the graph where it is not), and says so in
``explain()``.

Dynamic dimensions: the graph runs once more with each dynamic input dimension one longer
(``_dynamic_sizes``); the sizes that change are dynamic, inputs get a symbol for each, and
a lowering that needs such a size declines (``Exporter.shape``).

Sizes that follow the data (``generate_proposals`` keeps as many boxes as survive): a
lowering marked ``@data_dependent(perturb)`` says how to change its result's sizes, the
graph runs once more with its results so changed, and the sizes that change downstream are
dynamic too. A lowering exact only for some data (no ties among the scores it sorts)
states that as a run-time check (``Exporter.require``): the model returns the check as an
extra output (``runtime_checks``), and a backend runs the call on Paddle where it fails.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import operator
from typing import (
    Any,
    Callable,
    Dict,
    FrozenSet,
    List,
    NoReturn,
    Optional,
    Sequence,
    Tuple,
    Union,
    cast,
)

import numpy as np
import paddle

from ... import rng
from ...cache.disk import host_array
from ...errors import GraphDeclined
from ...fx import Node
from ...fx.interpreter import Interpreter, run_leaf_layer
from .export import EXPORT_REVISION, OnnxExportError, exporter_choice, require
from .prepare import out_of_place_twin

log = logging.getLogger("jit_core.kit.onnx")

#: raised whenever what a lowering writes for the same graph changes: part of every cache
#: key of a directly exported model (2: 0-D constants stay 0-D, ``sum(axis=[])`` is over
#: every axis, dynamic dimensions are symbols; 3: a convolution's relu for a backend that
#: acts on run-time checks)
DIRECT_EXPORTER_VERSION = 3

#: the names of a model's run-time checks among its outputs (``Exporter.require``): each a
#: bool scalar, True where the model's results are Paddle's for that call
RUNTIME_CHECK_PREFIX = "runtime_check__"

#: ONNX's IR version of the models written: opset 17 needs 8, and ONNX Runtime 1.19 (the
#: last with Python 3.8 wheels) reads up to 10
IR_VERSION = 8


class MissingLowering(OnnxExportError):
    """No lowering serves a call of the graph (or its lowering declined its arguments)."""

    def __init__(self, operation: str, where: str = "", why: str = ""):
        self.operation = operation
        self.where = where
        self.why = why
        at = f" at {where}" if where else ""
        because = f" ({why})" if why else ""
        super().__init__(f"no ONNX lowering for {operation}{at}{because}", [operation])


class _Declined(Exception):
    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def operation_name(node, gm=None) -> str:
    """The Paddle operation a node calls, as a user writes it (``paddle.nn.Conv2D``,
    ``Tensor.reshape``, ``operator.add``)."""
    target = node.target
    if node.op == "call_method":
        return f"Tensor.{target}"
    if node.op == "call_module":
        layer = type(_resolve(gm, target)) if gm is not None else None
        return f"the layer {layer.__name__}" if layer is not None else f"the layer {target}"
    name = _target_name(target)
    return "operator." + name[len("_operator.") :] if name.startswith("_operator.") else name


# ------------------------------------------------------------------------- the registry
_BINARY = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.floordiv,
    operator.pow,
    operator.matmul,
    operator.lt,
    operator.le,
    operator.gt,
    operator.ge,
    operator.eq,
    operator.ne,
    operator.getitem,
    operator.and_,
    operator.or_,
    operator.xor,
}
_UNARY = {operator.neg, operator.pos, operator.abs, operator.invert}


def lowerings() -> Dict[Any, Callable]:
    """Every registered lowering, by what it serves (built once; plugins included)."""
    from ... import plugins

    return plugins.onnx_lowerings()


def exporter_fingerprint() -> str:
    """What decides how a graph is exported, for the cache keys of exported models: the
    export revision, the exporter chosen (``JIT_CORE_ONNX_EXPORTER``) and, for the direct
    one, its version and which lowering serves which target (a plugin that adds or
    replaces one changes it)."""
    if exporter_choice() != "direct":
        # the static program and paddle2onnx: no lowering takes part
        return f"revision {EXPORT_REVISION}, paddle2onnx"
    table = sorted(
        f"{_target_name(t)}={getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', fn)}"
        for t, fn in lowerings().items()
    )
    text = "\n".join([f"revision {EXPORT_REVISION}", f"direct {DIRECT_EXPORTER_VERSION}", *table])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _target_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    return f"{module}.{name}" if module else str(name)


def _signature(fn: Callable) -> Optional[inspect.Signature]:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _bind(fn: Callable, args: Sequence[Any], kwargs: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    if fn in _BINARY:
        return {"x": args[0], "y": args[1]} if len(args) == 2 and not kwargs else None
    if fn in _UNARY:
        return {"x": args[0]} if len(args) == 1 and not kwargs else None
    sig = _signature(fn)
    if sig is None:
        return None
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    out = dict(bound.arguments)
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            out.update(out.pop(p.name, {}))
    return out


# ------------------------------------------------------------------------- the exporter
_DTYPES = {
    "float32": "FLOAT",
    "float64": "DOUBLE",
    "float16": "FLOAT16",
    "bfloat16": "BFLOAT16",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "uint8": "UINT8",
    "bool": "BOOL",
    "complex64": "COMPLEX64",
    "complex128": "COMPLEX128",
}


def dtype_name(dtype: Any) -> str:
    """``'float32'`` for every way Paddle spells a dtype (``paddle.float32``, a
    ``DataType``, a ``VarType``, a string)."""
    text = str(dtype)
    for prefix in ("paddle.", "DataType.", "VarType."):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    text = text.split(":")[0].strip("<> ").lower()
    aliases = {"fp32": "float32", "fp64": "float64", "fp16": "float16", "bf16": "bfloat16"}
    return aliases.get(text, text)


class Exporter:
    """What a lowering writes the model through."""

    def __init__(
        self,
        gm,
        opset: int,
        dynamic: Optional[Dict[Any, FrozenSet[int]]] = None,
        acts_on_checks: bool = False,
    ):
        self.onnx = require("onnx")
        self.gm = gm
        self.opset = opset
        #: whether the backend acts on run-time checks (``require``): a lowering may then
        #: take a faster form that is exact only where a check holds
        self.acts_on_checks = acts_on_checks
        #: scalars whose NaN means a check failed (``require_no_nan``)
        self._nan_probes: List[str] = []
        #: node -> the dimensions of its value that follow the graph's dynamic input
        #: dimensions (``_dynamic_sizes``); empty for a graph of fixed shapes
        self.dynamic: Dict[Any, FrozenSet[int]] = dynamic or {}
        self.nodes: List[Any] = []
        #: the model being written: its initializers are written into it at once (each
        #: copy of ResNet18's 45 MB of weights costs 20 ms: make_graph and make_model
        #: would copy them twice more)
        self.model = self.onnx.ModelProto()
        self.initializers = self.model.graph.initializer
        #: node -> its ONNX name (a tuple of them for a call with several results)
        self._names: Dict[Any, Union[str, Tuple[str, ...]]] = {}
        self._used: set = set()
        self._params: Dict[int, str] = {}
        self._consts: Dict[Tuple, str] = {}
        #: the node being lowered (its meta gives the result's shape and dtype)
        self.node: Any = None
        #: node -> the value it is known to hold when the model runs (``remember``)
        self._known: Dict[Any, Any] = {}
        #: (a bool scalar of the model, why the results need it) per ``require``
        self.checks: List[Tuple[str, str]] = []
        #: nodes holding a graph int (a size read when the model runs, arithmetic on it):
        #: 0-D int64 tensors of the model (``int_result``)
        self._ints: set = set()

    # names ----------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        name = hint
        n = 0
        while name in self._used:
            n += 1
            name = f"{hint}_{n}"
        self._used.add(name)
        return name

    # what lowerings ask --------------------------------------------------------------
    def decline(self, why: str) -> NoReturn:
        """Refuse the call: the graph is exported another way, ``why`` in ``explain()``."""
        raise _Declined(why)

    def require(self, condition: str, why: str) -> None:
        """State that the model computes Paddle's result only where ``condition`` (a bool
        scalar of the model) holds: the backend runs the call on Paddle where it does not
        (``why`` says what the condition is, for the log)."""
        where = _where(self.node) if self.node is not None else ""
        self.checks.append((condition, f"{why} ({where})" if where else why))

    def none(self, *flags: str) -> str:
        """A bool scalar of the model: no element of the bool tensors ``flags`` is set
        (True where they are empty)."""
        total: Optional[str] = None
        for f in flags:
            flat = self.cast(self.op("Reshape", [f, self.ints([-1])]), "int64")
            count = self.op("ReduceSum", [flat], keepdims=0)
            total = count if total is None else self.op("Add", [total, count])
        assert total is not None, "none() takes at least one flag"  # as every caller does
        return self.op("Equal", [total, self.constant(0, "int64")])

    def require_none(self, flags: Sequence[str], why: str) -> None:
        """``require`` that no element of the bool tensors ``flags`` is set."""
        self.require(self.none(*flags), why)

    def require_no_nan(self, name: str) -> None:
        """``require`` that ``name`` holds no NaN, for a value that is NaN-free exactly
        where the sum of its elements is (no infinities of both signs: a ``Relu``'s
        output). The sums of every such value make one check of the model."""
        total = self.op("ReduceSum", [name], keepdims=0)
        self._nan_probes.append(
            total if self.dtype(self.node) == "float64" else self.cast(total, "float64")
        )

    def is_tensor(self, value: Any) -> bool:
        return value in self._names if _is_node(value) else _is_paddle_tensor(value)

    def shape(self, value: Any) -> List[int]:
        """The sizes of a value; declines where one of them is dynamic (``sizes``, ``dim``
        and ``rank`` serve lowerings that can do without them)."""
        sizes = self.sizes(value)
        if None in sizes:
            self.decline(f"the sizes of {value.name} follow the graph's dynamic dimensions")
        return cast("List[int]", sizes)  # no None among them

    def sizes(self, value: Any) -> List[Optional[int]]:
        """The sizes of a value, None for each dimension that is dynamic."""
        if _is_node(value) and value in self._ints:
            return []
        if _is_node(value):
            shape = value.meta.get("shape")
            if shape is None or not all(isinstance(d, int) for d in shape):
                self.decline(f"the shape of {value.name} is not known")
            dynamic = self.dynamic.get(value, ())
            return [None if i in dynamic else d for i, d in enumerate(shape)]
        if _is_paddle_tensor(value):
            return list(value.shape)
        return list(np.shape(value))

    def dim(self, value: Any, i: int) -> int:
        """One size of a value; declines where it is dynamic."""
        size = self.sizes(value)[i]
        if size is None:
            self.decline(f"dimension {i} of {value.name} is dynamic")
        return size

    def rank(self, value: Any) -> int:
        return len(self.sizes(value))

    def dtype(self, value: Any) -> str:
        if _is_node(value) and value in self._ints:
            return "int64"
        if _is_node(value):
            dtype = value.meta.get("dtype")
            if dtype is None:
                self.decline(f"the dtype of {value.name} is not known")
            return dtype_name(dtype)
        if _is_paddle_tensor(value):
            return dtype_name(value.dtype)
        if isinstance(value, bool):
            return "bool"
        if isinstance(value, int):
            return "int64"
        if isinstance(value, float):
            return "float32"
        self.decline(f"an argument of type {type(value).__name__}")

    def remember(self, value: Any) -> None:
        """Note that the node being lowered always holds ``value`` (a ``full`` of one
        number): ``known`` gives it to the lowerings of the nodes that read it (an axis or
        a dropout rate passed as a tensor)."""
        self._known[self.node] = value

    def known(self, value: Any) -> Any:
        """The Python value of an argument: itself, or what a node was ``remember``-ed to
        hold; declines for a value only known when the model runs."""
        if _is_node(value):
            if value not in self._known:
                self.decline(f"{value.name} is not a constant")
            return self._known[value]
        if isinstance(value, (list, tuple)):
            return type(value)(self.known(v) for v in value)
        if _is_paddle_tensor(value):
            self.decline("a tensor where a constant is expected")
        return value

    def runtime_int(self, value: Any) -> bool:
        """Whether ``value`` is a graph int the model computes (not ``known``)."""
        return _is_node(value) and value in self._ints and value not in self._known

    def int_result(self, name: str, value: Any = None) -> str:
        """The node being lowered holds a graph int, ``name`` (a 0-D int64 tensor), known
        to be ``value`` where that is not None."""
        self._ints.add(self.node)
        if value is not None:
            self.remember(value)
        return name

    def items(self, value: Any) -> Optional[Tuple[str, ...]]:
        """The ONNX names of the results of a call with several (``split``), or None."""
        name = self._names.get(value) if _is_node(value) else None
        return name if isinstance(name, tuple) else None

    def out_dtype(self) -> str:
        return self.dtype(self.node)

    def out_shape(self) -> List[int]:
        return self.shape(self.node)

    # what lowerings write ------------------------------------------------------------
    def input(self, value: Any, dtype: Optional[str] = None) -> str:
        """The ONNX name of a graph value, a parameter or a Python number (as a constant of
        ``dtype``, default that of the result), cast to ``dtype`` when given."""
        if _is_node(value):
            if value not in self._names:
                self.decline(f"{value.name} is not a tensor the exporter made")
            name = self._names[value]
            if isinstance(name, tuple):
                self.decline(f"{value.name} is a list of tensors")
            have = self.dtype(value)
        elif _is_paddle_tensor(value):
            name = self.parameter(value)
            have = dtype_name(value.dtype)
        elif isinstance(value, (bool, int, float)):
            return self.constant(value, dtype or self.out_dtype())
        else:
            self.decline(f"an argument of type {type(value).__name__}")
        if dtype is not None and dtype != have:
            return self.cast(name, dtype)
        return name

    def parameter(self, tensor: Any) -> str:
        """An initializer holding a parameter or buffer, named as Paddle names it."""
        key = id(tensor)
        if key not in self._params:
            name = str(tensor.name)
            if name in self._used:
                name = self.fresh(name)
            self._used.add(name)
            array = host_array(tensor)
            self._initializer(array, dtype_name(tensor.dtype), name)
            self._params[key] = name
        return self._params[key]

    def constant(self, value: Any, dtype: str) -> str:
        """An initializer holding ``value`` (a number, a list, an array) as ``dtype``."""
        array = np.asarray(value)
        key = (dtype, array.shape, array.tobytes() if array.dtype != object else repr(value))
        if key not in self._consts:
            name = self.fresh("const")
            self._initializer(array, dtype, name)
            self._consts[key] = name
        return self._consts[key]

    def ints(self, values: Sequence[int]) -> str:
        """An int64 1-D constant (shapes, axes)."""
        return self.constant(np.asarray(list(values), dtype=np.int64), "int64")

    def cast(self, name: str, dtype: str) -> str:
        return self.op("Cast", [name], to=self._onnx_dtype(dtype))

    def op(self, op_type: str, inputs: Sequence[str], outputs: int = 1, **attrs) -> Any:
        """Add one ONNX node; its output name (a list of them when ``outputs`` > 1). The
        node is named after the graph node it computes and says the user's line in its
        ``doc_string``, so that a runtime's error about it leads back to the code."""
        hint = self.node.name if self.node is not None else op_type.lower()
        names = [self.fresh(f"{hint}__{op_type}") for _ in range(outputs)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        where = _where(self.node) if self.node is not None else ""
        self.nodes.append(
            self.onnx.helper.make_node(
                op_type, list(inputs), names, name=names[0], doc_string=where or None, **attrs
            )
        )
        return names if outputs > 1 else names[0]

    # internals -----------------------------------------------------------------------
    def _onnx_dtype(self, dtype: str) -> int:
        if dtype not in _DTYPES:
            self.decline(f"dtype {dtype}")
        return getattr(self.onnx.TensorProto, _DTYPES[dtype])

    def tensor(self, value: Any, dtype: str, name: str = ""):
        """``value`` as an ONNX TensorProto of ``dtype`` (an attribute's)."""
        array = self._array(value, dtype)
        # the bytes as they are, one copy (numpy_helper.from_array makes two)
        return self.onnx.helper.make_tensor(
            name, self._onnx_dtype(dtype), array.shape, array.tobytes(), raw=True
        )

    def _initializer(self, value: Any, dtype: str, name: str) -> None:
        """``value`` as an initializer of the model, written into it in place."""
        array = self._array(value, dtype)
        proto = self.initializers.add()
        proto.name = name
        proto.data_type = self._onnx_dtype(dtype)
        proto.dims.extend(array.shape)
        proto.raw_data = array.tobytes()

    def _array(self, value: Any, dtype: str) -> np.ndarray:
        self._onnx_dtype(dtype)
        if dtype == "bfloat16":
            self.decline("a bfloat16 constant")
        # (C order without a copy where it is; np.ascontiguousarray would make 0-D 1-D)
        return np.asarray(np.asarray(value).astype(np.dtype(dtype), copy=False), order="C")

    def value_info(self, name: str, value: Any, symbols: bool = False):
        """A graph input's or output's type: a dynamic dimension is a symbol of its own
        (``symbols``, the inputs) or left unknown (the outputs)."""
        shape = [
            (f"{name}_dim{i}" if symbols else None) if d is None else d
            for i, d in enumerate(self.sizes(value))
        ]
        return self.onnx.helper.make_tensor_value_info(
            name, self._onnx_dtype(self.dtype(value)), shape
        )


def positional(*names: str) -> Callable[[Callable], Callable]:
    """Names the positional parameters of a lowering's target where Python cannot see
    them (the ``_C_ops`` functions, written in C++): ``@positional("x", "y")``."""

    def wrap(lowering: Callable) -> Callable:
        @functools.wraps(lowering)
        def lower(ex: Exporter, a: Dict[str, Any]):
            return lowering(ex, a)

        lower.parameters = names  # type: ignore[attr-defined]
        return lower

    return wrap


def data_dependent(perturb: Callable[[Any], Any]) -> Callable[[Callable], Callable]:
    """Marks a lowering whose result's sizes follow the data: ``perturb(result)`` returns
    the result with those sizes changed (one row fewer), so that the exporter finds which
    sizes downstream follow them (``_dynamic_sizes``)."""

    def wrap(lowering: Callable) -> Callable:
        lowering.perturb = perturb  # type: ignore[attr-defined]
        return lowering

    return wrap


def runtime_checks(output_names: Sequence[str]) -> List[int]:
    """The positions of a model's run-time checks among its outputs' names."""
    return [i for i, name in enumerate(output_names) if name.startswith(RUNTIME_CHECK_PREFIX)]


def refuse_runtime_checks(model, backend: str = "the backend") -> None:
    """For a backend that cannot act on a model's run-time checks: decline a model that
    has some (``errors.GraphDeclined``: the graph runs on the paddle backend, the reason
    in ``explain()``). ``export.export_onnx`` does it for every such backend."""
    checks = runtime_checks([o.name for o in model.graph.output])
    if checks:
        whys = {p.key: p.value for p in model.metadata_props}
        why = whys.get(model.graph.output[checks[0]].name, "a run-time check")
        raise GraphDeclined(
            f"its model is exact only where run-time checks hold ({why}), and {backend} "
            "does not act on them"
        )


def data_dependent_sizes(gm) -> bool:
    """Whether a call of ``gm`` has results whose sizes follow the data (the shapes the
    capture recorded are the example's only)."""
    return bool(_perturbers(gm))


def _perturbers(gm) -> Dict[Any, Callable]:
    table = lowerings()
    marked = {target: fn.perturb for target, fn in table.items() if hasattr(fn, "perturb")}
    if not marked:
        return {}
    found = {}
    for node in gm.graph.nodes:
        if node.op == "call_module":
            key = type(_resolve(gm, node.target))
        elif node.op in ("call_function", "call_method"):
            key = _key(node.op, node.target)
        else:
            continue
        if key in marked:
            found[node] = marked[key]
    return found


def _is_node(value: Any) -> bool:
    return isinstance(value, Node)


def _is_paddle_tensor(value: Any) -> bool:
    return isinstance(value, paddle.Tensor)


def _where(node) -> str:
    return str(node.meta.get("source_loc") or "")


def _resolve(gm, path: str) -> Any:
    value = gm
    for part in path.split("."):
        value = getattr(value, part)
    return value


#: argument names Paddle 3.3 accepts as aliases (``Tensor.softmax(input, dim)``, as
#: PyTorch spells them) or a method's own tensor (``Tensor.astype(self, dtype)``), and the
#: names lowerings read
_ALIASES = (
    ("self", "x"),
    ("input", "x"),
    ("dim", "axis"),
    ("other", "y"),
    ("keepdims", "keepdim"),
)


def _lowering_for(node, table: Dict[Any, Callable], gm) -> Tuple[Optional[Callable], Any]:
    """(the lowering, the arguments by name) of a call node; (None, name) when none. An
    update in place is lowered as its out-of-place twin (the graph reads its result)."""
    target = node.target
    twin = out_of_place_twin(node)
    if twin is not None and _key(node.op, target) not in table:
        target = twin
    if node.op == "call_function":
        fn = table.get(target)
        if fn is None:
            return None, None
        bound = _bind(target, node.args, node.kwargs)
        names = getattr(fn, "parameters", None)
        if bound is None and names is not None and len(node.args) <= len(names):
            # a function without a Python signature (``_C_ops``): the lowering names its
            # parameters (``positional``)
            bound = {**dict(zip(names, node.args)), **node.kwargs}
        return fn, bound
    if node.op == "call_method":
        fn = table.get(f"Tensor.{target}")
        if fn is None:
            return None, None
        method = getattr(paddle.Tensor, target, None)
        bound = _bind(method, node.args, node.kwargs) if method is not None else None
        if bound is None and not node.kwargs and len(node.args) <= 2:
            # a method written in C (``__add__``): its tensor and its operand
            bound = dict(zip(("x", "y"), node.args))
        return fn, bound
    if node.op == "call_module":
        layer = _resolve(gm, node.target)
        fn = table.get(type(layer))
        if fn is None:
            return None, None
        bound = _bind(type(layer).forward, (layer, *node.args), node.kwargs)
        if bound is not None:
            # the layer's input under the name every lowering reads, whatever forward calls it
            names = [n for n in bound if n != "self"]
            bound = {"layer": layer, "x": bound[names[0]] if names else None, **bound}
            bound.pop("self", None)
        return fn, bound
    return None, None


def _key(op: str, target: Any) -> Any:
    return f"Tensor.{target}" if op == "call_method" else target


def export_direct(gm, example_inputs: Sequence[Any], opset: int, acts_on_checks: bool = False):
    """The ONNX model of ``gm`` for inputs shaped like ``example_inputs``; raises
    ``MissingLowering`` for a call that no lowering serves. ``acts_on_checks``: the backend
    computes a call whose run-time checks fail another way (``Exporter.acts_on_checks``)."""
    from ..shape_dispatch import dynamic_dims

    perturbers = _perturbers(gm)
    dynamic = {}
    if dynamic_dims(gm) or perturbers:
        dynamic = _dynamic_sizes(gm, example_inputs, perturbers)
    ex = Exporter(gm, opset, dynamic, acts_on_checks)
    onnx = ex.onnx
    table = lowerings()
    graph = gm.graph
    inputs = []
    for node in graph.nodes:
        if node.op == "placeholder":
            if node.meta.get("number_input") or node.meta.get("shape") is None:
                raise MissingLowering(
                    f"the input {node.name}", why="a Python number input of the graph"
                )
            ex._names[node] = node.name
            ex._used.add(node.name)
            try:
                inputs.append(ex.value_info(node.name, node, symbols=True))
            except _Declined as e:
                raise MissingLowering(f"the input {node.name}", why=e.why) from None
            continue
        if node.op == "output":
            continue
        if node.op == "get_attr":
            value = _resolve(gm, node.target)
            if not _is_paddle_tensor(value):
                raise MissingLowering(f"the attribute {node.target}", why="not a tensor")
            ex._names[node] = ex.parameter(value)
            continue
        fn, bound = _lowering_for(node, table, gm)
        name = operation_name(node, gm)
        if fn is None:
            raise MissingLowering(name, _where(node))
        if bound is None:
            raise MissingLowering(name, _where(node), "arguments it cannot bind")
        if bound.get("out") is not None:
            raise MissingLowering(name, _where(node), "an out= argument")
        for alias, canonical in _ALIASES:
            if alias in bound and canonical not in bound:
                bound[canonical] = bound[alias]
        ex.node = node
        try:
            out = fn(ex, bound)
        except _Declined as e:
            raise MissingLowering(name, _where(node), e.why) from None
        except Exception as e:  # a lowering's bug: export the other way
            log.warning("the ONNX lowering of %s failed: %s: %s", name, type(e).__name__, e)
            why = f"its lowering raised {type(e).__name__}: {e}"
            raise MissingLowering(name, _where(node), why) from e
        # (several results: a tuple of names, which ``operator.getitem`` picks from)
        ex._names[node] = tuple(out) if isinstance(out, (list, tuple)) else out
        ex.node = None
    outputs = []
    seen: set = set()
    constants = {p.name for p in ex.initializers}
    for i, value in enumerate(graph.output_values()):
        made = ex._names.get(value) if _is_node(value) else None
        if not isinstance(made, str):
            raise MissingLowering(f"graph output {i}", why="not a tensor the graph computes")
        name = made
        if name in seen or value.op == "placeholder" or name in constants:
            # one ONNX value per output: a value returned twice (or an input or a
            # parameter returned as it is) is copied
            name = _identity(ex, name, f"output_{i}")
        seen.add(name)
        try:
            outputs.append(ex.value_info(name, value))
        except _Declined as e:
            raise MissingLowering(f"graph output {i}", why=e.why) from None
    if ex._nan_probes:
        ex.node = None
        probes = ex._nan_probes
        total = ex.op("Sum", probes) if len(probes) > 1 else probes[0]
        ex.checks.append((ex.op("Not", [ex.op("IsNaN", [total])]), "no NaN where Relu keeps it"))
    for i, (condition, why) in enumerate(ex.checks):
        name = f"{RUNTIME_CHECK_PREFIX}{i}"
        ex.nodes.append(ex.onnx.helper.make_node("Identity", [condition], [name], name=name))
        bool_type = ex.onnx.TensorProto.BOOL
        outputs.append(ex.onnx.helper.make_tensor_value_info(name, bool_type, []))
        entry = ex.model.metadata_props.add()
        entry.key, entry.value = name, why
    model = ex.model
    model.graph.name = type(gm).__name__
    model.graph.node.extend(ex.nodes)
    model.graph.input.extend(inputs)
    model.graph.output.extend(outputs)
    model.opset_import.extend([onnx.helper.make_opsetid("", opset)])
    model.producer_name = "jit_core"
    model.producer_version = str(DIRECT_EXPORTER_VERSION)
    model.ir_version = IR_VERSION
    return model


def _dynamic_sizes(
    gm, example_inputs: Sequence[Any], perturbers: Optional[Dict[Any, Callable]] = None
) -> Dict[Any, FrozenSet[int]]:
    """Node -> the dimensions of its value that follow the graph's dynamic input
    dimensions or the data: those whose size changes when the graph runs with every
    dynamic input dimension one longer (``shape_dispatch.other_sizes``), or with the results
    of the calls of ``perturbers`` changed by them (each run alone, so that the two changes
    cannot cancel). The backends check the model at each of those sizes before they use
    it, a dimension grown alone included."""

    from ..shape_dispatch import dynamic_dims, other_sizes

    perturbers = perturbers or {}
    runs: List[Tuple[str, List[Any], Dict[Any, Callable]]] = []
    if dynamic_dims(gm):
        runs.append(("a graph with dynamic dimensions", next(other_sizes(example_inputs, gm)), {}))
    if perturbers:
        runs.append(("a graph whose sizes follow the data", list(example_inputs), perturbers))
    dynamic: Dict[Any, FrozenSet[int]] = {}
    for what, inputs, perturb in runs:
        for node, changed in _sizes_changed(gm, what, inputs, perturb).items():
            dynamic[node] = dynamic.get(node, frozenset()) | changed
    return dynamic


def _sizes_changed(gm, what: str, inputs, perturb) -> Dict[Any, FrozenSet[int]]:
    grown: Dict[Any, List[int]] = {}

    class Sizes(Interpreter):
        def run_node(self, node):
            value = super().run_node(node)
            if node in perturb:
                value = perturb[node](value)
            if isinstance(value, paddle.Tensor):
                grown[node] = list(value.shape)
            return value

        def call_module(self, target, args, kwargs):
            return run_leaf_layer(getattr(self.gm, target), args, kwargs)

    try:
        with rng.preserved(), paddle.no_grad():
            Sizes(gm).run(*inputs)
    except Exception as e:  # noqa: BLE001 - its export is then of one size at a time
        why = f"it does not run at other sizes ({type(e).__name__}: {str(e)[:200]})"
        raise MissingLowering(what, why=why) from None
    dynamic: Dict[Any, FrozenSet[int]] = {}
    for node, shape in grown.items():
        before = node.meta.get("shape")
        if before is None or len(before) != len(shape):
            continue
        changed = frozenset(i for i, (a, b) in enumerate(zip(before, shape)) if a != b)
        if changed:
            dynamic[node] = changed
    return dynamic


def _identity(ex: Exporter, name: str, hint: str) -> str:
    out = ex.fresh(hint)
    ex.nodes.append(ex.onnx.helper.make_node("Identity", [name], [out], name=out))
    return out


Lowering = Callable[[Exporter, Dict[str, Any]], Union[str, Tuple[str, ...]]]

__all__ = [
    "DIRECT_EXPORTER_VERSION",
    "Exporter",
    "Lowering",
    "MissingLowering",
    "RUNTIME_CHECK_PREFIX",
    "data_dependent",
    "data_dependent_sizes",
    "dtype_name",
    "export_direct",
    "exporter_fingerprint",
    "lowerings",
    "operation_name",
    "positional",
    "refuse_runtime_checks",
    "runtime_checks",
]
