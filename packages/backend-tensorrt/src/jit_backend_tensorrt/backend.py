"""Compile a captured graph for TensorRT: the shared ONNX export, an engine built from it
(or taken from the compile cache), checked against Paddle, wrapped as a callable that takes
and returns Paddle GPU tensors."""

from __future__ import annotations

import importlib
import logging
import warnings
from typing import Any, Dict, Optional, Sequence, Tuple

import paddle

from jit_core.errors import BackendUnavailableError, StaticShapesOnly
from jit_core.kit.onnx import (
    DEFAULT_OPSET,
    OnnxExportError,
    check_against_paddle,
    export_onnx,
    exporter_name,
    lift_parameters,
    live_tensors,
    run_on_paddle,
)
from jit_core.kit.shape_dispatch import check_other_sizes, dynamic_dims

from . import build_worker, engine_cache
from .engine_cache import CACHE, Origin, device_origin, engine_key, timing_cache_key
from .environment import probe, unavailable_reason
from .lowering import TensorRTError, build_engine, load_engine
from .options import BuilderSettings, builder_settings
from .profiles import Profile, graph_inputs, optimization_profile, outside
from .runtime import NotOnGpuError, TrtGraph, not_on_gpu

log = logging.getLogger("jit_core.tensorrt")

#: what this process did: engines built, engines taken from the compile cache, cached
#: engines refused (foreign or damaged) and rebuilt, graphs that fell back to paddle
stats: Dict[str, int] = {"builds": 0, "cache_hits": 0, "rebuilt": 0, "fallbacks": 0}


def load_tensorrt():
    """The ``tensorrt`` module, or ``BackendUnavailableError`` saying what is missing."""
    why = unavailable_reason(probe())
    if why:
        raise BackendUnavailableError(f"backend 'tensorrt' cannot run here: {why}")
    return importlib.import_module("tensorrt")


def compile_graph(
    gm,
    example_inputs: Sequence[Any],
    *,
    fp16: bool = False,
    int8: bool = False,
    tf32: bool = False,
    workspace_bytes: Optional[int] = None,
    timing_cache: bool = True,
    opset: int = DEFAULT_OPSET,
    cache: bool = True,
    fallback: bool = False,
    isolate: bool = True,
):
    """The backend's ``compile``: see the package README for the options."""
    settings = builder_settings(
        fp16=fp16,
        int8=int8,
        tf32=tf32,
        workspace_bytes=workspace_bytes,
        timing_cache=timing_cache,
        opset=opset,
        cache=cache,
        fallback=fallback,
        isolate=isolate,
    )
    try:
        trt = load_tensorrt()
        return _compile(trt, gm, list(example_inputs), settings)
    except (OnnxExportError, TensorRTError, BackendUnavailableError) as e:
        if (
            dynamic_dims(gm)
            and isinstance(e, (OnnxExportError, TensorRTError))
            and not isinstance(e, NotOnGpuError)
        ):
            # what fails with dynamic dimensions may work for one shape at a time
            raise StaticShapesOnly(
                f"its engine with dynamic dimensions failed: {type(e).__name__}: {str(e)[:300]}"
            ) from e
        if not settings.fallback:
            raise
        stats["fallbacks"] += 1
        return run_on_paddle("tensorrt", e, gm)


def _compile(trt, gm, example_inputs, settings: BuilderSettings) -> TrtGraph:
    frozen = bool(gm.meta.get("frozen"))
    live = {} if frozen else live_tensors(gm)
    why = not_on_gpu(example_inputs) or not_on_gpu(list(live.values()), "parameter")
    if why:
        raise NotOnGpuError(why)
    origin = device_origin(str(trt.__version__))
    profile = input_profile(gm, example_inputs, live)
    runtime, engine, data, key, from_cache = engine_for(
        trt, gm, example_inputs, settings, profile, origin, live
    )
    compiled = TrtGraph(trt, runtime, engine, gm, live, profile)
    if not from_cache:
        validate(compiled, gm, example_inputs, settings)
        if dynamic_dims(gm):
            names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
            check_other_sizes(
                gm,
                example_inputs,
                lambda inputs: validate(compiled, gm, inputs, settings),
                "its engine with dynamic dimensions",
                # sizes outside the engine's profile run on the paddle backend
                skip=lambda inputs: any(
                    outside(profile, n, x.shape) for n, x in zip(names, inputs) if n in profile
                ),
                required=False,
            )
        # only an engine that passed the check is kept
        if key is not None:
            CACHE.put(key, engine_cache.pack(data, origin))
    return compiled


def input_profile(gm, example_inputs, live: Dict[str, paddle.Tensor]) -> Profile:
    """The optimization profile of the graph's inputs and of the live parameters it takes
    as inputs (static)."""
    inputs = graph_inputs(gm, example_inputs)
    inputs += [(name, list(t.shape), [], {}) for name, t in live.items()]
    return optimization_profile(inputs)


def export_model(gm, example_inputs, opset: int, live: Dict[str, paddle.Tensor]) -> bytes:
    """The shared ONNX export (``jit_core.kit.onnx``), parameters lifted to inputs when live."""
    model = export_onnx(gm, example_inputs, opset)
    if live:
        lift_parameters(model, live)
    return model.SerializeToString()


def engine_for(
    trt,
    gm,
    example_inputs,
    settings: BuilderSettings,
    profile: Profile,
    origin: Origin,
    live: Dict[str, paddle.Tensor],
) -> Tuple[Any, Any, bytes, Optional[str], bool]:
    """(runtime, engine, its serialized bytes, its cache key or None, whether it came
    from the cache). A cached entry built elsewhere, or one TensorRT refuses, is rebuilt
    (and replaced once the new engine has passed the check)."""
    key = None
    if settings.cache:
        key = engine_key(gm, example_inputs, settings, profile, origin, frozen=not live)
        entry = CACHE.get(key)
        if entry is not None:
            data, why = engine_cache.unpack(entry, origin)
            if data is not None:
                runtime, engine = load_engine(trt, data)
                if engine is not None:
                    stats["cache_hits"] += 1
                    log.info("%s: engine from the cache (%s)", type(gm).__name__, key[:12])
                    return runtime, engine, data, key, True
                why = f"TensorRT {trt.__version__} refused to deserialize it"
            stats["rebuilt"] += 1
            warnings.warn(
                f"jit_core tensorrt: the cached engine {key[:12]} is rebuilt: {why}",
                RuntimeWarning,
                stacklevel=2,
            )
    data = lower(trt, gm, example_inputs, settings, profile, origin, live)
    runtime, engine = load_engine(trt, data)
    if engine is None:
        raise TensorRTError(f"TensorRT {trt.__version__} cannot load the engine it just built")
    return runtime, engine, data, key, False


def lower(
    trt,
    gm,
    example_inputs,
    settings: BuilderSettings,
    profile: Profile,
    origin: Origin,
    live: Dict[str, paddle.Tensor],
) -> bytes:
    """The serialized engine of ``gm``: shared ONNX export -> TensorRT's parser and
    builder, with the timing cache of this TensorRT and GPU read and written back."""
    model = export_model(gm, example_inputs, settings.opset, live)
    timings = None
    tkey = timing_cache_key(origin)
    if settings.timing_cache:
        entry = CACHE.get(tkey)
        if entry is not None:
            timings, _ = engine_cache.unpack(entry, origin)
    build = build_worker.build if settings.isolate else build_engine
    data, new_timings = build(trt, model, settings, profile, timings)
    stats["builds"] += 1
    if new_timings:
        CACHE.put(tkey, engine_cache.pack(new_timings, origin))
    return data


def validate(compiled: TrtGraph, gm, example_inputs, settings: BuilderSettings) -> None:
    """Refuse an engine whose results differ from Paddle's on the example inputs beyond
    the tolerance of its precision (``options.RTOL``...)."""
    rtol, scaled_atol = settings.tolerance
    check_against_paddle(
        compiled,
        gm,
        example_inputs,
        TensorRTError,
        f"{exporter_name(gm)} or TensorRT",
        rtol=rtol,
        scaled_atol=scaled_atol,
    )
