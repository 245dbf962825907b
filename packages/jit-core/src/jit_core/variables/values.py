"""Values the capture knows in full, though they are not Python literals: Paddle's value
objects (places, dtypes), NumPy scalars and small arrays made from constants, and what
Paddle's build and device queries answer.

Such values are constants of the graph (guarded where they come from the frame), not
reasons to break it: ``_C_ops.full(shape, 1.0, dtype, paddle.core.CPUPlace())``,
``x * np.float32(2)`` and ``if paddle.device.is_compiled_with_rocm():`` (inside every
``nn.LSTM``) all stay in one graph.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

import numpy as np

from ..errors import DYNAMIC_VALUE, LIMIT, RAISES, SIDE_EFFECT, Unsupported

#: Paddle's place classes (``paddle.CPUPlace``, ``paddle.base.libpaddle.Place``...)
_PLACE_MODULES = ("paddle.base.libpaddle", "paddle.base.core", "paddle.fluid.core")

#: the most elements a NumPy array made during a capture may have to become a constant
#: of the graph (bigger arrays are data, not configuration)
MAX_NUMPY_CONSTANT = 1 << 16

#: NumPy functions that write into an argument, touch files or global state, or draw
#: random numbers: never folded at capture
_NUMPY_IMPURE = {
    "copyto",
    "put",
    "place",
    "putmask",
    "fill_diagonal",
    "put_along_axis",
    "save",
    "savez",
    "savez_compressed",
    "savetxt",
    "load",
    "loadtxt",
    "genfromtxt",
    "fromfile",
    "memmap",
    "seterr",
    "seterrcall",
    "set_printoptions",
    "setbufsize",
    "empty",
    "empty_like",
}

#: methods of NumPy values that change the value in place
_NUMPY_MUTATORS = {
    "sort",
    "fill",
    "resize",
    "put",
    "itemset",
    "setfield",
    "setflags",
    "partition",
    "byteswap",
    "tofile",
    "dump",
    "__setitem__",
    "__iadd__",
    "__isub__",
    "__imul__",
    "__itruediv__",
}


def is_place_class(cls: Any) -> bool:
    return (
        isinstance(cls, type)
        and cls.__name__.endswith("Place")
        and (cls.__module__ or "").startswith(_PLACE_MODULES)
    )


def is_place(value: Any) -> bool:
    return is_place_class(type(value))


def place_method(name: str) -> bool:
    """The questions a place answers about itself (``is_cpu_place``, ``get_device_id``);
    ``set_place`` changes it."""
    return name.startswith(("is_", "get_")) or name == "__eq__"


def is_numpy_value(value: Any) -> bool:
    return isinstance(value, (np.generic, np.ndarray))


def is_numpy_scalar_type(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, np.generic)


def is_numpy_function(fn: Any) -> bool:
    if isinstance(fn, np.ufunc):  # (NumPy 1.x gives them no __module__)
        return True
    mod = getattr(fn, "__module__", None) or ""
    return (mod == "numpy" or mod.startswith("numpy.")) and not mod.startswith(
        ("numpy.random", "numpy.testing")
    )


def check_numpy_result(value: Any, what: str) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise Unsupported(
                f"{what} made a NumPy array of Python objects", category=DYNAMIC_VALUE
            )
        if value.size > MAX_NUMPY_CONSTANT:
            raise Unsupported(
                f"{what} made a NumPy array of {value.size} elements (constants of a graph "
                f"are capped at {MAX_NUMPY_CONSTANT})",
                category=LIMIT,
            )
    return value


def fold_numpy_call(fn: Callable, args: list, kwargs: Dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)`` for a pure NumPy function on constants, checked."""
    name = getattr(fn, "__name__", "?")
    if name in _NUMPY_IMPURE or "out" in kwargs:
        raise Unsupported(
            f"numpy.{name}() writes into its arguments, a file or global state",
            category=SIDE_EFFECT,
        )
    try:
        value = fn(*args, **kwargs)
    except Exception as e:
        raise Unsupported(
            f"numpy.{name}(...) raises {type(e).__name__}: {e}", category=RAISES
        ) from e
    return check_numpy_result(value, f"numpy.{name}()")


_NUMPY_DUNDERS = {"__getitem__", "__len__", "__contains__", "__array__"}


def numpy_attribute_allowed(name: str) -> bool:
    """Whether reading ``value.name`` of a NumPy value at capture has no effect."""
    if name in _NUMPY_MUTATORS:
        return False
    return not name.startswith("_") or name in _NUMPY_DUNDERS


#: Paddle queries answered by how Paddle was built: the same for the whole process
def is_build_query(fn: Any) -> bool:
    name = getattr(fn, "__name__", "") or ""
    return name.startswith("is_compiled_with_")


#: Paddle queries whose answer can change while the process runs (``set_flags``,
#: ``set_device``, ``set_default_dtype``): constants of a capture under a guard that
#: calls them again
_STATE_QUERIES = {
    "get_flags",
    "get_device",
    "get_default_dtype",
    "get_cudnn_version",
    "device_count",
    "get_all_device_type",
    "get_all_custom_device_type",
    "get_available_device",
    "get_available_custom_device",
    # the place new tensors go to (``set_device`` moves it): dumped programs and GraphNet
    # samples hand it to ``_C_ops.full``, ``full_like`` and ``arange``
    "_current_expected_place",
    "_current_expected_place_",
    # the mixed-precision state library code reads to pick dtypes (T5 reads it in every
    # layer): None outside auto_cast
    "amp_state",
    # whether paddle.jit.to_static (or SOT) is tracing: False wherever captured code runs,
    # unless a user traces the optimized function itself, which the guard sees
    "in_declarative_mode",
    "in_to_static_mode",
    "in_sot_simulation_mode",
}


#: Paddle functions whose answer depends on their (constant) arguments alone, as NumPy's
#: ``finfo``: ``paddle.finfo(x.dtype).min`` is a constant of the capture (the dtype is
#: guarded with the tensor)
_TYPE_INFO = {"finfo", "iinfo"}
#: what such an answer tells, read at capture as constants
TYPE_INFO_ATTRIBUTES = frozenset(
    {"min", "max", "eps", "tiny", "bits", "resolution", "smallest_normal", "dtype"}
)


#: more such functions: ``convert_dtype(x.dtype)`` names a dtype (``"float32"``), which
#: ``paddle.nn``'s attention masks branch on
_OF_CONSTANTS = _TYPE_INFO | {"convert_dtype"}


def is_type_info(fn: Any) -> bool:
    """Whether ``fn`` is one of Paddle's functions whose answer depends on its constant
    arguments alone (``finfo``, ``iinfo``, ``convert_dtype``): folded at capture."""
    return (getattr(fn, "__name__", "") or "") in _OF_CONSTANTS and (
        getattr(fn, "__module__", "") or ""
    ).startswith("paddle")


def is_type_info_value(value: Any) -> bool:
    t = type(value)
    return t.__name__ in _TYPE_INFO and (t.__module__ or "").startswith("paddle")


def is_state_query(fn: Any) -> bool:
    return (getattr(fn, "__name__", "") or "") in _STATE_QUERIES


def constant_arguments(args, kwargs) -> Optional[tuple]:
    """``(args, kwargs)`` as Python values when every one is a constant, else None."""
    if not all(a.is_python_constant() for a in args):
        return None
    if not all(v.is_python_constant() for v in kwargs.values()):
        return None
    return [a.as_python_constant() for a in args], {
        k: v.as_python_constant() for k, v in kwargs.items()
    }
