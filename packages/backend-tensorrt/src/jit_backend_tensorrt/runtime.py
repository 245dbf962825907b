"""Run a TensorRT engine on Paddle GPU tensors: inputs bound by address, outputs allocated
by Paddle on the same device, ``execute_async_v3`` on Paddle's current CUDA stream. No
tensor goes through host memory.

Written against TensorRT 10's documented API; this project's CI has no GPU with TensorRT,
so this module has not run there (see docs/backends.rst).
"""

from __future__ import annotations

import threading
import warnings
from typing import Any, Dict, List, Optional, Sequence

import paddle

from jit_core.kit.onnx import restored_shapes

from .lowering import TensorRTError
from .profiles import Profile, outside

#: TensorRT's DataType member names -> Paddle dtypes
DTYPES = {
    "FLOAT": "float32",
    "HALF": "float16",
    "BF16": "bfloat16",
    "INT8": "int8",
    "UINT8": "uint8",
    "INT32": "int32",
    "INT64": "int64",
    "BOOL": "bool",
}

CPU_TENSORS = (
    "TensorRT runs on GPU tensors and {what} is on {place}: call "
    'paddle.device.set_device("gpu") before making the model and its inputs (or move '
    "them with .cuda())"
)


class NotOnGpuError(TensorRTError):
    """A tensor fed to TensorRT is not on a CUDA device."""


def not_on_gpu(tensors: Sequence[Any], what: str = "input") -> Optional[str]:
    """Why these tensors cannot be fed to an engine (one is not on a CUDA device)."""
    for i, t in enumerate(tensors):
        if isinstance(t, paddle.Tensor) and not t.place.is_gpu_place():
            return CPU_TENSORS.format(what=f"{what} {i}", place=t.place)
    return None


class TrtGraph:
    """A compiled graph: call it with the graph's input tensors, get its output tuple."""

    def __init__(
        self,
        trt,
        runtime,
        engine,
        gm,
        live: Dict[str, paddle.Tensor],
        profile: Profile,
    ):
        self._trt = trt
        self._runtime = runtime  # the engine's runtime must outlive it
        self.engine = engine
        self.context = engine.create_execution_context()
        if self.context is None:
            raise TensorRTError("TensorRT could not create an execution context (GPU memory?)")
        self._graph = gm
        self._profile = profile
        placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        inputs: List[str] = []
        outputs: List[str] = []
        for i in range(engine.num_io_tensors):
            name = engine.get_tensor_name(i)
            is_input = engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
            (inputs if is_input else outputs).append(name)
        # paddle2onnx drops inputs that nothing reads: bind by name
        self._feeds = [(n, placeholders.index(n)) for n in inputs if n in placeholders]
        self._live = [(n, live.get(n)) for n in inputs if n not in placeholders]
        unknown = [n for n, t in self._live if t is None]
        if unknown:
            raise TensorRTError(f"the engine has inputs {unknown} the graph lacks")
        self._outputs = outputs
        self._out_dtypes = [DTYPES.get(engine.get_tensor_dtype(n).name) for n in outputs]
        out = gm.graph.output_values()
        self._shapes = restored_shapes(gm)
        self._dtypes = [getattr(n, "meta", {}).get("dtype") for n in out]
        if len(out) != len(outputs):
            raise TensorRTError(f"the engine has {len(outputs)} outputs, the graph {len(out)}")
        self._lock = threading.Lock()  # one execution context: one run at a time
        self._warned_outside = False

    def __call__(self, *tensors):
        bound = [(name, tensors[i]) for name, i in self._feeds]
        bound += [(name, t.detach()) for name, t in self._live]
        for name, t in bound:
            reason = outside(self._profile, name, t.shape)
            if reason is not None:
                return self._outside_profile(reason, tensors)
        why = not_on_gpu([t for _, t in bound])
        if why:
            raise NotOnGpuError(why)
        with self._lock:
            return self._run(bound)

    def _run(self, bound):
        keep = []
        for name, t in bound:
            t = t.contiguous() if not t.is_contiguous() else t
            keep.append(t)
            self.context.set_input_shape(name, list(t.shape))
            self.context.set_tensor_address(name, t.data_ptr())
        results = []
        for name, dtype in zip(self._outputs, self._out_dtypes):
            shape = list(self.context.get_tensor_shape(name))
            if dtype is None:
                raise TensorRTError(f"engine output {name} has a dtype Paddle lacks")
            out = paddle.empty(shape, dtype=dtype)
            self.context.set_tensor_address(name, out.data_ptr())
            results.append(out)
        stream = current_stream_handle()
        # Paddle's allocator orders frees on this same stream: ``keep`` and the outputs
        # stay valid until the engine has read and written them
        if not self.context.execute_async_v3(stream):
            raise TensorRTError("TensorRT's execute_async_v3 failed (its log says why)")
        return tuple(_restored(t, s, d) for t, s, d in zip(results, self._shapes, self._dtypes))

    def _outside_profile(self, reason: str, tensors):
        if not self._warned_outside:
            self._warned_outside = True
            warnings.warn(
                f"jit_core tensorrt: {reason}, so this call and others like it run on the "
                "paddle backend; jit_core.mark_dynamic(t, dim, max=...) sets the largest size "
                "an engine serves",
                RuntimeWarning,
                stacklevel=3,
            )
        with paddle.no_grad():
            return self._graph.forward(*tensors)


def current_stream_handle() -> int:
    """The raw ``cudaStream_t`` of Paddle's current stream on the current device
    (``paddle.device.cuda.current_stream`` is deprecated since Paddle 2.5)."""
    return int(paddle.device.current_stream().stream_base.cuda_stream)


def _restored(t: paddle.Tensor, shape, dtype) -> paddle.Tensor:
    # only a reshape of the same elements (a dynamic graph's results differ from the
    # example's shape in their dynamic dimensions)
    if shape is not None and list(t.shape) != list(shape) and t.size == _count(shape):
        t = t.reshape(shape)
    if dtype is not None and str(t.dtype).replace("paddle.", "") != dtype:
        t = t.astype(dtype)
    return t


def _count(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n
