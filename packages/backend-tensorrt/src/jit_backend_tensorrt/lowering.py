"""ONNX bytes -> a serialized TensorRT engine, through TensorRT 10's Python API:
``trt.Builder`` -> a network -> ``trt.OnnxParser.parse`` -> an ``IBuilderConfig`` (the
options, the timing cache, one optimization profile) -> ``build_serialized_network``.

Written against TensorRT 10's documented API; this project's CI has no TensorRT, so it is
checked there only against a stand-in module that records the calls (tests/fake_tensorrt.py).
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional, Tuple

from jit_core.errors import JitError

from .options import BuilderSettings
from .profiles import Profile

log = logging.getLogger("jit_core.tensorrt")


class TensorRTError(JitError):
    """TensorRT cannot parse, build, load or run a graph; the message says where."""


#: one logger per ``tensorrt`` module: TensorRT keeps the logger of the first builder or
#: runtime of a process for all later ones, and holds it by pointer, so it must live on
_LOGGERS: Dict[int, Any] = {}


def shared_logger(trt) -> Any:
    """This process's logger for ``trt`` (made once)."""
    logger = _LOGGERS.get(id(trt))
    if logger is None:
        logger = _LOGGERS[id(trt)] = make_logger(trt)
    return logger


def make_logger(trt) -> Any:
    """A ``trt.ILogger`` that sends TensorRT's messages to ``logging`` and keeps its errors
    for the exception that reports a failed build."""

    class _Logger(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            #: where a build collects the errors logged while it runs (None: none does)
            self.errors: Optional[List[str]] = None

        def log(self, severity, msg) -> None:
            if severity in (trt.ILogger.INTERNAL_ERROR, trt.ILogger.ERROR):
                if self.errors is not None:
                    self.errors.append(str(msg))
                log.error("TensorRT: %s", msg)
            elif severity == trt.ILogger.WARNING:
                log.warning("TensorRT: %s", msg)
            else:
                log.debug("TensorRT: %s", msg)

    return _Logger()


def _call(obj, name: str) -> Optional[Any]:
    method = getattr(obj, name, None)
    try:
        return method() if method is not None else None
    except Exception:  # noqa: BLE001 - a field this TensorRT version does not fill
        return None


def parser_errors(parser) -> str:
    """The parser's errors, each naming its ONNX node (name, operator, index)."""
    out = []
    for i in range(parser.num_errors):
        error = parser.get_error(i)
        name = _call(error, "node_name")
        op = _call(error, "node_operator")
        index = _call(error, "node")
        where = "the model"
        if name or op or (index is not None and index >= 0):
            parts = [f"{name}" if name else f"#{index}", f"({op})" if op else ""]
            where = "ONNX node " + " ".join(p for p in parts if p)
        out.append(f"{where}: {str(_call(error, 'desc') or '').strip()}")
    return "; ".join(out) or "no error recorded"


def build_engine(
    trt,
    onnx_model: bytes,
    settings: BuilderSettings,
    profile: Profile,
    timing_cache: Optional[bytes] = None,
) -> Tuple[bytes, Optional[bytes]]:
    """(the serialized engine, the timing cache after the build or None)."""
    logger = shared_logger(trt)
    errors: List[str] = []
    logger.errors = errors
    try:
        return _build(trt, logger, errors, onnx_model, settings, profile, timing_cache)
    finally:
        logger.errors = None


def _build(trt, logger, errors, onnx_model, settings, profile, timing_cache):
    builder = trt.Builder(logger)
    # TensorRT 10: every network has an explicit batch dimension; 0 is the only flag needed
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_model):
        raise TensorRTError(
            f"TensorRT {trt.__version__}'s ONNX parser refused the exported graph: "
            f"{parser_errors(parser)}"
        )
    config = builder.create_builder_config()
    if settings.workspace_bytes is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, settings.workspace_bytes)
    if settings.fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    if not settings.tf32:
        # TensorRT rounds float32 matmuls and convolutions to TF32 on Ampere and newer by
        # default: 1e-3 relative error where eager Paddle computes in float32
        config.clear_flag(trt.BuilderFlag.TF32)
    cache = None
    if settings.timing_cache:
        cache = config.create_timing_cache(timing_cache or b"")
        # ignore_mismatch=False: a cache from another device or version is not used
        config.set_timing_cache(cache, False)
    names = [network.get_input(i).name for i in range(network.num_inputs)]
    unknown = [n for n in names if n not in profile]
    if unknown:
        raise TensorRTError(f"the exported model has inputs {unknown} the graph lacks")
    if any(-1 in tuple(network.get_input(i).shape) for i in range(network.num_inputs)):
        shapes = builder.create_optimization_profile()
        for name in names:
            low, opt, high = profile[name]
            shapes.set_shape(name, low, opt, high)
        config.add_optimization_profile(shapes)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise TensorRTError(
            f"TensorRT {trt.__version__} could not build an engine for the graph: "
            + ("; ".join(errors[-5:]) or "no error recorded")
        )
    timings = bytes(config.get_timing_cache().serialize()) if cache is not None else None
    return bytes(serialized), timings


def load_engine(trt, engine: bytes) -> Tuple[Any, Any]:
    """(the runtime, the deserialized engine); the engine is None where TensorRT refuses
    the bytes (another version's or GPU's, or damaged)."""
    runtime = trt.Runtime(shared_logger(trt))
    try:
        loaded = runtime.deserialize_cuda_engine(engine)
    except Exception as e:  # noqa: BLE001 - refused: the caller rebuilds
        log.warning("TensorRT refused a cached engine: %s", e)
        loaded = None
    return runtime, loaded
