"""A stand-in for the ``tensorrt`` module, for the tests of the lowering sequence on
machines without TensorRT (all of this project's). It has the names of TensorRT 10's
Python API that the backend calls and records each call in ``module.calls``; it builds
nothing: its "engine" is a tag plus what the builder was given. Passing against it shows
the backend calls TensorRT's API in the documented order with the right arguments, not
that TensorRT accepts them.
"""

from __future__ import annotations

import enum
import types
from typing import Any, List, Optional, Tuple

ENGINE_TAG = b"STAND-IN-ENGINE\n"


class _Severity(enum.IntEnum):
    INTERNAL_ERROR = 0
    ERROR = 1
    WARNING = 2
    INFO = 3
    VERBOSE = 4


class ILogger:
    Severity = _Severity
    INTERNAL_ERROR = _Severity.INTERNAL_ERROR
    ERROR = _Severity.ERROR
    WARNING = _Severity.WARNING
    INFO = _Severity.INFO
    VERBOSE = _Severity.VERBOSE

    def __init__(self) -> None:
        pass


class BuilderFlag(enum.Enum):
    FP16 = 0
    INT8 = 1
    TF32 = 2


class MemoryPoolType(enum.Enum):
    WORKSPACE = 0


class TensorIOMode(enum.Enum):
    INPUT = 1
    OUTPUT = 2


class ParserError:
    def __init__(self, node_name: str, operator: str, desc: str, node: int):
        self._name, self._op, self._desc, self._node = node_name, operator, desc, node

    def node_name(self) -> str:
        return self._name

    def node_operator(self) -> str:
        return self._op

    def desc(self) -> str:
        return self._desc

    def node(self) -> int:
        return self._node


class DataType(enum.Enum):
    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    BOOL = 4
    UINT8 = 5
    BF16 = 7
    INT64 = 8


_NUMPY = {DataType.FLOAT: "float32", DataType.INT64: "int64", DataType.INT32: "int32"}


class Engine:
    """An "engine" that computes ``compute`` (NumPy arrays by name -> arrays by name) on
    the memory bound to it by address, as TensorRT reads and writes device memory; on CPU
    tensors here. ``inputs``/``outputs``: (name, DataType) in TensorRT's order."""

    def __init__(self, inputs, outputs, compute, calls: List[Tuple[str, Any]]):
        self.inputs, self.outputs, self.compute, self.calls = inputs, outputs, compute, calls

    @property
    def num_io_tensors(self) -> int:
        return len(self.inputs) + len(self.outputs)

    def _io(self):
        return [(n, d, TensorIOMode.INPUT) for n, d in self.inputs] + [
            (n, d, TensorIOMode.OUTPUT) for n, d in self.outputs
        ]

    def get_tensor_name(self, i: int) -> str:
        return self._io()[i][0]

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        return {n: m for n, _, m in self._io()}[name]

    def get_tensor_dtype(self, name: str) -> DataType:
        return {n: d for n, d, _ in self._io()}[name]

    def create_execution_context(self) -> Context:
        return Context(self)


class Context:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.shapes: dict = {}
        self.addresses: dict = {}

    def set_input_shape(self, name: str, shape) -> bool:
        self.engine.calls.append(("set_input_shape", (name, tuple(shape))))
        self.shapes[name] = tuple(shape)
        return True

    def set_tensor_address(self, name: str, address: int) -> bool:
        self.engine.calls.append(("set_tensor_address", name))
        self.addresses[name] = address
        return True

    def _inputs(self):
        import ctypes

        import numpy as np

        arrays = {}
        for name, dtype in self.engine.inputs:
            shape = self.shapes[name]
            kind = np.dtype(_NUMPY[dtype])
            size = int(np.prod(shape, dtype=np.int64)) * kind.itemsize
            raw = (ctypes.c_char * size).from_address(self.addresses[name])
            arrays[name] = np.frombuffer(raw, dtype=kind).reshape(shape).copy()
        return arrays

    def get_tensor_shape(self, name: str):
        zeros = {n: a * 0 for n, a in self._inputs().items()}
        return self.engine.compute(zeros)[name].shape

    def execute_async_v3(self, stream: int) -> bool:
        import ctypes

        import numpy as np

        self.engine.calls.append(("execute_async_v3", stream))
        results = self.engine.compute(self._inputs())
        for name, dtype in self.engine.outputs:
            data = np.ascontiguousarray(results[name], dtype=_NUMPY[dtype]).tobytes()
            ctypes.memmove(self.addresses[name], data, len(data))
        return True


class _Input:
    def __init__(self, name: str, shape: Tuple[int, ...]):
        self.name = name
        self.shape = shape


def make_module(
    version: str = "10.0.1",
    parse_errors: Optional[List[ParserError]] = None,
    build_fails: bool = False,
) -> types.ModuleType:
    """A fresh stand-in; ``parse_errors`` makes ``parse`` fail with them, ``build_fails``
    makes ``build_serialized_network`` return None after logging an error."""
    trt = types.ModuleType("tensorrt")
    trt.__version__ = version
    calls: List[Tuple[str, Any]] = []
    trt.calls = calls
    trt.ILogger = ILogger
    trt.Logger = type("Logger", (ILogger,), {})
    trt.BuilderFlag = BuilderFlag
    trt.MemoryPoolType = MemoryPoolType
    trt.TensorIOMode = TensorIOMode
    trt.DataType = DataType

    class Network:
        def __init__(self) -> None:
            self.inputs: List[_Input] = []

        @property
        def num_inputs(self) -> int:
            return len(self.inputs)

        def get_input(self, i: int) -> _Input:
            return self.inputs[i]

    class OnnxParser:
        def __init__(self, network: Network, logger) -> None:
            calls.append(("OnnxParser", None))
            self.network = network
            self.errors: List[ParserError] = []

        def parse(self, model: bytes) -> bool:
            calls.append(("parse", model))
            if parse_errors:
                self.errors = list(parse_errors)
                return False
            import onnx

            proto = onnx.load_from_string(model)
            initializers = {i.name for i in proto.graph.initializer}
            for value in proto.graph.input:
                if value.name in initializers:
                    continue
                dims = value.type.tensor_type.shape.dim
                shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims)
                self.network.inputs.append(_Input(value.name, shape))
            return True

        @property
        def num_errors(self) -> int:
            return len(self.errors)

        def get_error(self, i: int) -> ParserError:
            return self.errors[i]

    class TimingCache:
        def __init__(self, data: bytes) -> None:
            self.data = data

        def serialize(self) -> bytes:
            return self.data + b"+timings"

    class Profile:
        def set_shape(self, name, low, opt, high) -> None:
            calls.append(("set_shape", (name, tuple(low), tuple(opt), tuple(high))))

    class Config:
        def __init__(self) -> None:
            self.timing_cache: Optional[TimingCache] = None
            self.flags = {BuilderFlag.TF32}  # TensorRT's default on Ampere and newer

        def set_memory_pool_limit(self, pool, size) -> None:
            calls.append(("set_memory_pool_limit", (pool, size)))

        def set_flag(self, flag) -> None:
            calls.append(("set_flag", flag))
            self.flags.add(flag)

        def clear_flag(self, flag) -> None:
            calls.append(("clear_flag", flag))
            self.flags.discard(flag)

        def create_timing_cache(self, data: bytes) -> TimingCache:
            calls.append(("create_timing_cache", bytes(data)))
            return TimingCache(bytes(data))

        def set_timing_cache(self, cache: TimingCache, ignore_mismatch: bool) -> bool:
            calls.append(("set_timing_cache", ignore_mismatch))
            self.timing_cache = cache
            return True

        def get_timing_cache(self) -> TimingCache:
            assert self.timing_cache is not None
            return self.timing_cache

        def add_optimization_profile(self, profile) -> int:
            calls.append(("add_optimization_profile", None))
            return 0

    class Builder:
        def __init__(self, logger) -> None:
            calls.append(("Builder", None))
            self.logger = logger

        def create_network(self, flags: int) -> Network:
            calls.append(("create_network", flags))
            return Network()

        def create_builder_config(self) -> Config:
            calls.append(("create_builder_config", None))
            return Config()

        def create_optimization_profile(self) -> Profile:
            calls.append(("create_optimization_profile", None))
            return Profile()

        def build_serialized_network(self, network: Network, config: Config):
            calls.append(("build_serialized_network", None))
            if build_fails:
                self.logger.log(ILogger.ERROR, "no implementation for node relu_0")
                return None
            flags = ",".join(sorted(f.name for f in config.flags))
            return ENGINE_TAG + flags.encode()

    class Runtime:
        def __init__(self, logger) -> None:
            pass

        def deserialize_cuda_engine(self, data: bytes):
            calls.append(("deserialize_cuda_engine", bytes(data)))
            # TensorRT returns None for bytes that are not an engine of its own
            return object() if bytes(data).startswith(ENGINE_TAG) else None

    trt.Builder = Builder
    trt.OnnxParser = OnnxParser
    trt.Runtime = Runtime
    return trt


def names(trt) -> List[str]:
    """The names of the calls made so far."""
    return [name for name, _ in trt.calls]
