"""GraphNet-format computation-graph samples: find them, load them, make their inputs.

A sample is a folder holding ``model.py`` (a ``class GraphModule(paddle.nn.Layer)`` whose
``forward`` takes the weights and the data tensors by name), ``weight_meta.py`` and
``input_meta.py`` (one class per tensor: ``name``, ``shape``, ``dtype`` and either ``data``
or the range and moments to draw it from) and ``graph_net.json``. A model folder may hold
``subgraph_N/`` sample folders instead (PaddlePaddle/GraphNet's layout).
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import itertools
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import paddle

MODEL_FILE = "model.py"
WEIGHT_META_FILE = "weight_meta.py"
INPUT_META_FILE = "input_meta.py"
INFO_FILE = "graph_net.json"

# what GraphNet draws from when a meta gives no range
DEFAULT_MIN_VAL = 0
DEFAULT_MAX_VAL = 2

_module_ids = itertools.count()


class SampleError(Exception):
    """A sample that cannot be loaded; the message names the file and what is wrong."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass
class TensorMeta:
    """One tensor of a sample, as a meta class describes it."""

    name: str
    shape: List[int]
    dtype: str = "float32"
    #: the values themselves (flat or nested), when the meta gives them
    data: Optional[Any] = None
    min_val: Optional[float] = None
    max_val: Optional[float] = None
    mean: Optional[float] = None
    std: Optional[float] = None
    original_name: Optional[str] = None

    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass
class Sample:
    path: str
    #: a readable name: the path under the folder the run was given
    name: str
    weights: List[TensorMeta] = field(default_factory=list)
    inputs: List[TensorMeta] = field(default_factory=list)
    info: Dict[str, Any] = field(default_factory=dict)

    @property
    def model_name(self) -> str:
        return str(self.info.get("model_name") or os.path.basename(self.path))

    def load_module(self):
        """Import ``model.py`` and return a new ``GraphModule`` (a ``SampleError`` names the
        problem: no such class, an import that raises)."""
        return load_graph_module(os.path.join(self.path, MODEL_FILE))

    def make_inputs(self, seed: int = 0, overrides: Optional[Dict[str, Any]] = None):
        """The keyword arguments of ``forward``: every weight and input tensor, drawn
        deterministically from ``seed`` (the same seed gives the same tensors), or taken
        from ``overrides`` (name -> tensor) where given."""
        rng = np.random.RandomState(seed)
        out: Dict[str, Any] = {}
        for meta in self.weights + self.inputs:
            if overrides and meta.name in overrides:
                out[meta.name] = overrides[meta.name]
            else:
                out[meta.name] = make_tensor(meta, rng)
        return out


def _natural_key(name: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def find_samples(paths: Sequence[str]) -> List[str]:
    """Every sample folder (one holding ``model.py``) under the given folders, in a stable
    order (``subgraph_2`` before ``subgraph_10``). A path that does not exist, or holds no
    sample, is an error that names it."""
    found: List[str] = []
    for root in paths:
        if not os.path.isdir(root):
            raise SampleError(root, "no such folder")
        before = len(found)
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort(key=_natural_key)
            dirnames[:] = [d for d in dirnames if not d.startswith((".", "__"))]
            if MODEL_FILE in filenames:
                found.append(dirpath)
        if len(found) == before:
            raise SampleError(root, f"no sample under it (no folder holds a {MODEL_FILE})")
    return found


def load_sample(path: str, root: Optional[str] = None) -> Sample:
    """Read a sample's metas and ``graph_net.json`` (``model.py`` is imported later, by
    ``Sample.load_module``, in the worker that runs it)."""
    model = os.path.join(path, MODEL_FILE)
    if not os.path.isfile(model):
        raise SampleError(path, f"not a sample: no {MODEL_FILE}")
    name = os.path.relpath(path, root) if root else path
    if name == ".":
        name = os.path.basename(os.path.abspath(path))
    info: Dict[str, Any] = {}
    info_path = os.path.join(path, INFO_FILE)
    if os.path.isfile(info_path):
        try:
            with open(info_path, encoding="utf-8") as f:
                info = json.load(f)
        except ValueError as e:
            raise SampleError(info_path, f"not valid JSON: {e}") from None
        if not isinstance(info, dict):
            raise SampleError(info_path, "must hold a JSON object")
    weights = read_metas(os.path.join(path, WEIGHT_META_FILE))
    inputs = read_metas(os.path.join(path, INPUT_META_FILE))
    seen = set()
    for meta in weights + inputs:
        if meta.name in seen:
            raise SampleError(path, f"two tensor metas are named {meta.name!r}")
        seen.add(meta.name)
    return Sample(path, name, weights, inputs, info)


def read_metas(path: str) -> List[TensorMeta]:
    """The tensor metas of a ``weight_meta.py`` or ``input_meta.py``, in the order its
    classes are written (a missing file has none)."""
    if not os.path.isfile(path):
        return []
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        tree = ast.parse(source, filename=path)
    except (OSError, SyntaxError, ValueError) as e:
        raise SampleError(path, f"cannot be read: {type(e).__name__}: {e}") from None
    class_names = [node.name for node in tree.body if isinstance(node, ast.ClassDef)]
    namespace: Dict[str, Any] = {"__file__": path, "__name__": "jit_core_sample_meta"}
    try:
        exec(compile(tree, path, "exec"), namespace)
    except Exception as e:  # noqa: BLE001 - any error in a meta file is the sample's
        raise SampleError(path, f"raised {type(e).__name__}: {e}") from None
    return [_meta_of(path, name, namespace[name]) for name in class_names]


def _meta_of(path: str, cls_name: str, cls: Any) -> TensorMeta:
    attrs = {k: v for k, v in vars(cls).items() if not k.startswith("__")}
    where = f"class {cls_name}"
    name = attrs.get("name")
    if not isinstance(name, str) or not name.isidentifier():
        raise SampleError(path, f"{where}: 'name' must be a Python identifier, got {name!r}")
    shape = attrs.get("shape")
    if not isinstance(shape, (list, tuple)) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise SampleError(path, f"{where}: 'shape' must be a list of sizes >= 0, got {shape!r}")
    dtype = attrs.get("dtype", "float32")
    if not isinstance(dtype, str):
        raise SampleError(path, f"{where}: 'dtype' must be a string, got {dtype!r}")
    dtype = dtype.replace("paddle.", "")
    if dtype not in _DTYPES:
        raise SampleError(path, f"{where}: unknown dtype {dtype!r} (known: {', '.join(_DTYPES)})")
    meta = TensorMeta(name=name, shape=list(shape), dtype=dtype)
    meta.original_name = attrs.get("original_name")
    # old GraphNet samples spell the range low/high
    meta.min_val = _number(path, where, "min_val", attrs.get("min_val", attrs.get("low")))
    meta.max_val = _number(path, where, "max_val", attrs.get("max_val", attrs.get("high")))
    meta.mean = _number(path, where, "mean", attrs.get("mean"))
    meta.std = _number(path, where, "std", attrs.get("std"))
    data = attrs.get("data")
    if data is not None:
        if isinstance(data, str):
            raise SampleError(path, f"{where}: 'data' as a string is not supported")
        flat = _flatten(data)
        if len(flat) != meta.numel():
            raise SampleError(
                path,
                f"{where}: 'data' holds {len(flat)} values, shape {shape} needs {meta.numel()}",
            )
        meta.data = flat
    return meta


def _number(path: str, where: str, key: str, value: Any) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SampleError(path, f"{where}: {key!r} must be a number, got {value!r}")
    return float(value)


def _flatten(data: Any) -> List[Any]:
    if isinstance(data, (list, tuple)):
        out: List[Any] = []
        for item in data:
            out.extend(_flatten(item))
        return out
    return [data]


_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8")
_FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
_DTYPES = _FLOAT_DTYPES + _INT_DTYPES + ("bool", "complex64", "complex128")


def make_tensor(meta: TensorMeta, rng):
    """A tensor for ``meta``: its ``data`` when given, else drawn from ``rng`` as GraphNet
    draws it: integers uniformly in ``[min_val, max_val]``, booleans 0 or 1, floats from a
    normal of the meta's mean and a fifth of its std clipped to the range (or uniformly in
    the range when the meta gives no moments)."""
    shape = list(meta.shape)
    if meta.data is not None:
        np_dtype = "float32" if meta.dtype == "bfloat16" else meta.dtype
        array = np.asarray(meta.data, dtype=np_dtype).reshape(shape)
        return paddle.to_tensor(array).astype(meta.dtype)
    lo = DEFAULT_MIN_VAL if meta.min_val is None else meta.min_val
    hi = DEFAULT_MAX_VAL if meta.max_val is None else meta.max_val
    if meta.dtype == "bool":
        array = rng.randint(0, 2, size=shape).astype("bool")
    elif meta.dtype in _INT_DTYPES:
        array = rng.randint(int(lo), int(hi) + 1, size=shape).astype(meta.dtype)
    elif meta.dtype.startswith("complex"):
        array = (rng.uniform(lo, hi, size=shape) + 1j * rng.uniform(lo, hi, size=shape)).astype(
            meta.dtype
        )
    else:
        if meta.mean is not None and meta.std is not None:
            array = rng.normal(0.0, 1.0, size=shape) * meta.std * 0.2 + meta.mean
            array = np.clip(array, lo, hi)
        else:
            array = rng.uniform(lo, hi, size=shape)
        array = array.astype("float32")
    tensor = paddle.to_tensor(array)
    if str(tensor.dtype).replace("paddle.", "") != meta.dtype:
        tensor = tensor.astype(meta.dtype)
    return tensor


def load_graph_module(model_path: str):
    """Import ``model.py`` under a name of its own and instantiate its ``GraphModule``."""
    name = f"jit_core_sample_{next(_module_ids)}"
    try:
        spec = importlib.util.spec_from_file_location(name, model_path)
        if spec is None or spec.loader is None:
            raise ImportError(f"no loader for {model_path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - any import error is the sample's
        raise SampleError(model_path, f"import raised {type(e).__name__}: {e}") from None
    cls = getattr(module, "GraphModule", None)
    if not (isinstance(cls, type) and issubclass(cls, paddle.nn.Layer)):
        raise SampleError(model_path, "defines no class GraphModule(paddle.nn.Layer)")
    try:
        return cls()
    except Exception as e:  # noqa: BLE001
        raise SampleError(model_path, f"GraphModule() raised {type(e).__name__}: {e}") from None


def check_signature(sample: Sample, module) -> None:
    """Every parameter of ``forward`` has a tensor meta, and every meta a parameter (or a
    ``**kwargs`` that takes it: GraphNet calls ``model(**inputs)``, and
    ``forward(self, *args, **kwargs)`` runs that way)."""
    signature = inspect.signature(module.forward).parameters.values()
    params = [p.name for p in signature if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if any(p.kind == p.VAR_KEYWORD for p in signature):
        return
    metas = [m.name for m in sample.weights + sample.inputs]
    missing = [p for p in params if p not in metas]
    if missing:
        raise SampleError(
            os.path.join(sample.path, MODEL_FILE),
            f"forward takes {', '.join(missing)}, which no {WEIGHT_META_FILE} or "
            f"{INPUT_META_FILE} class describes",
        )
    extra = [m for m in metas if m not in params]
    if extra:
        raise SampleError(
            os.path.join(sample.path, MODEL_FILE),
            f"forward takes no {', '.join(extra)}, described in the metas",
        )


__all__ = [
    "Sample",
    "SampleError",
    "TensorMeta",
    "find_samples",
    "load_sample",
    "read_metas",
    "make_tensor",
    "load_graph_module",
    "check_signature",
]
