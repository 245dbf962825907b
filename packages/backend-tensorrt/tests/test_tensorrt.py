"""The tensorrt backend, as far as it can be checked without TensorRT or a GPU: why it
cannot run (each cause), the fallback, its options, its cache keys and entries, the
optimization profiles, and the lowering sequence against a stand-in ``tensorrt`` module
(trt_stand_in.py) fed with the shared ONNX export. No test here runs real TensorRT."""

from __future__ import annotations

import os
import sys
import types
import warnings

import jit_backend_tensorrt
import numpy as np
import paddle
import pytest
import trt_stand_in
from jit_backend_tensorrt import backend, engine_cache, environment, lowering
from jit_backend_tensorrt.engine_cache import CACHE, Origin
from jit_backend_tensorrt.environment import Environment, probe, unavailable_reason
from jit_backend_tensorrt.lowering import TensorRTError
from jit_backend_tensorrt.options import builder_settings
from jit_backend_tensorrt.profiles import (
    UNBOUNDED_FACTOR,
    dimension_range,
    optimization_profile,
    outside,
)
from jit_backend_tensorrt.runtime import NotOnGpuError

import jit_core
from jit_core.cache.disk import ENV_VAR
from jit_core.errors import BackendUnavailableError

HERE = unavailable_reason(probe())
needs_unavailable = pytest.mark.skipif(
    not HERE, reason="TensorRT can run here: the unavailability path does not apply"
)
#: the shared ONNX export, which the lowering tests feed the stand-in (where onnx is installed)
NO_EXPORT = jit_core.kit.onnx.unavailable_reason()
needs_export = pytest.mark.skipif(
    bool(NO_EXPORT), reason=f"the ONNX export cannot run here: {NO_EXPORT}"
)
ORIGIN = Origin("10.0.1", "NVIDIA A100-SXM4-80GB", "8.0")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "cache"))
    return tmp_path / "cache"


def linear_graph(dynamic: bool = False):
    paddle.seed(3)
    lin = paddle.nn.Linear(3, 5)

    def f(x):
        return paddle.nn.functional.relu(lin(x)) * 2.0

    x = paddle.rand([4, 3])
    if dynamic:
        jit_core.mark_dynamic(x, 0, min=2, max=16)
    return jit_core.capture(f, x), x, f


# ------------------------------------------------------------------ registration


def test_registered_as_a_plugin_listing_why_it_cannot_run():
    assert ("tensorrt", "jit-backend-tensorrt", jit_backend_tensorrt.__version__) in (
        jit_core.list_plugins()
    )
    found = jit_core.backends()["tensorrt"]
    assert found.inference_only and found.dynamic_shapes
    assert found.unavailable == HERE


@needs_unavailable
def test_optimize_raises_at_once_naming_what_is_missing():
    with pytest.raises(BackendUnavailableError) as e:
        jit_core.optimize(lambda x: x + 1, backend="tensorrt")
    assert "'tensorrt' is installed but cannot run here" in str(e.value)
    assert HERE in str(e.value)
    if not paddle.is_compiled_with_cuda():
        assert "paddlepaddle-gpu" in str(e.value)


@needs_unavailable
def test_compile_graph_called_directly_raises_the_same_reason():
    gm, x, _ = linear_graph()
    with pytest.raises(BackendUnavailableError, match="cannot run here"):
        backend.compile_graph(gm, [x])


@needs_unavailable
def test_fallback_runs_on_paddle_with_one_warning_and_eager_results():
    paddle.seed(1)
    net = paddle.nn.Sequential(paddle.nn.Linear(6, 4), paddle.nn.ReLU())
    net.eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fast = jit_core.optimize(net, backend="tensorrt", fallback=True)
        with paddle.no_grad():
            for batch in (2, 2, 5):
                x = paddle.rand([batch, 6])
                np.testing.assert_array_equal(fast(x).numpy(), net(x).numpy())
    ours = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    message = str(ours[0].message)
    assert "'tensorrt' cannot run here" in message and "paddle backend" in message
    assert HERE in message


@needs_unavailable
def test_fallback_still_refuses_an_option_the_backend_does_not_take():
    with pytest.raises(TypeError, match="takes no option 'fp17'"):
        jit_core.optimize(lambda x: x, backend="tensorrt", fallback=True, fp17=True)


# ------------------------------------------------------------------ each cause


def env(**changes) -> Environment:
    ready = dict(
        tensorrt_found=True,
        tensorrt_version="10.3.0",
        paddle_cuda=True,
        paddle_version="3.3.1",
        cuda_devices=1,
    )
    ready.update(changes)
    return Environment(**ready)


def test_ready_environment_has_no_reason():
    assert unavailable_reason(env()) == ""


def test_tensorrt_missing_says_how_to_install_it():
    why = unavailable_reason(env(tensorrt_found=False, tensorrt_version=None))
    assert "TensorRT is not installed (no module 'tensorrt')" in why
    assert (
        "pip install 'jit-backend-tensorrt[trt]'" in why and "pip install 'tensorrt>=10,<11'" in why
    )


def test_lean_or_dispatch_runtime_only_cannot_build():
    why = unavailable_reason(
        env(tensorrt_found=False, runtime_only=("tensorrt_lean", "tensorrt_dispatch"))
    )
    assert "only TensorRT's runtime (tensorrt_lean, tensorrt_dispatch)" in why
    assert "cannot build them" in why and "jit-backend-tensorrt[trt]" in why
    why = unavailable_reason(env(has_builder=False))
    assert "runtime-only build without trt.Builder" in why


def test_tensorrt_that_fails_to_import_is_named_with_its_error():
    why = unavailable_reason(env(import_error="OSError: libnvinfer.so.10: cannot open"))
    assert "cannot be imported (OSError: libnvinfer.so.10: cannot open)" in why
    assert "--force-reinstall tensorrt" in why


@pytest.mark.parametrize("version", ["8.6.1", "11.0.0", "unknown"])
def test_tensorrt_outside_the_supported_majors_is_refused(version):
    why = unavailable_reason(env(tensorrt_version=version))
    assert f"TensorRT {version} is installed; this backend supports TensorRT 10.x only" in why
    assert "pip install 'tensorrt>=10,<11'" in why
    assert unavailable_reason(env(tensorrt_version="10.13.3")) == ""


def test_the_trt_extra_installs_the_supported_majors_only():
    from importlib.metadata import requires

    from jit_backend_tensorrt.environment import REQUIREMENT

    extra = [r for r in requires("jit-backend-tensorrt") if "extra ==" in r]
    assert len(extra) == 1
    spec = extra[0].split(";")[0].replace(" ", "")
    assert spec.startswith("tensorrt")
    assert sorted(spec[len("tensorrt") :].split(",")) == sorted(
        REQUIREMENT[len("tensorrt") :].split(",")
    )


def test_paddle_without_cuda_and_no_device():
    why = unavailable_reason(env(paddle_cuda=False, cuda_devices=0))
    assert "Paddle 3.3.1 is built without CUDA" in why and "paddlepaddle-gpu" in why
    why = unavailable_reason(env(cuda_devices=0))
    assert "Paddle sees no CUDA device" in why and "CUDA_VISIBLE_DEVICES" in why


def test_every_cause_is_reported_together():
    why = unavailable_reason(env(tensorrt_found=False, paddle_cuda=False, cuda_devices=0))
    assert why.count("; ") == 1 and "no module 'tensorrt'" in why and "without CUDA" in why


NO_PADDLE2ONNX = (
    "JIT_CORE_ONNX_EXPORTER=paddle2onnx asks for paddle2onnx, and paddle2onnx 2.x has no "
    "wheels for Python 3.13 (its wheels cover Python 3.8 to 3.12)"
)


def test_an_export_that_cannot_run_is_a_reason_of_its_own():
    assert unavailable_reason(env(export_unavailable=NO_PADDLE2ONNX)) == NO_PADDLE2ONNX
    why = unavailable_reason(
        env(tensorrt_found=False, paddle_cuda=False, export_unavailable=NO_PADDLE2ONNX)
    )
    assert why.count("; ") == 2 and why.endswith(NO_PADDLE2ONNX)


def test_probe_asks_the_export_whether_paddle2onnx_serves(paddle2onnx_at, monkeypatch):
    from jit_core.kit.onnx.export import EXPORTER_ENV

    paddle2onnx_at(None)
    assert probe().export_unavailable == ""  # the direct export needs none
    monkeypatch.setenv(EXPORTER_ENV, "paddle2onnx")
    assert "paddle2onnx" in probe().export_unavailable
    assert "paddle2onnx" in unavailable_reason(probe())
    paddle2onnx_at("2.1.0")
    assert probe().export_unavailable == ""


@pytest.fixture
def gpu_paddle(monkeypatch):
    """Paddle as probe() sees it on a CUDA build with one device."""
    monkeypatch.setattr(paddle, "is_compiled_with_cuda", lambda: True)
    monkeypatch.setattr(paddle.device.cuda, "device_count", lambda: 1)
    # and the ONNX export can run (paddle2onnx asked for and missing: a reason of its own)
    monkeypatch.setattr(environment, "_export_unavailable", lambda: "")


def test_probe_imports_tensorrt_only_where_a_gpu_can_run_it(monkeypatch, gpu_paddle):
    monkeypatch.setattr(environment, "_found", lambda m: m == "tensorrt")
    monkeypatch.setitem(sys.modules, "tensorrt", trt_stand_in.make_module("10.3.0"))
    found = probe()
    assert (found.tensorrt_version, found.has_builder, found.cuda_devices) == ("10.3.0", True, 1)
    assert unavailable_reason(found) == ""
    monkeypatch.setattr(paddle.device.cuda, "device_count", lambda: 0)
    found = probe()
    assert found.tensorrt_version is None  # not imported
    assert "no CUDA device" in unavailable_reason(found)


def test_probe_sees_a_runtime_only_module_and_a_broken_one(monkeypatch, gpu_paddle):
    monkeypatch.setattr(environment, "_found", lambda m: m in ("tensorrt", "tensorrt_lean"))
    lean = trt_stand_in.make_module()
    del lean.Builder
    monkeypatch.setitem(sys.modules, "tensorrt", lean)
    assert "runtime-only build" in unavailable_reason(probe())

    def missing_library(name):
        raise OSError("libnvinfer.so.10: cannot open shared object file")

    monkeypatch.setattr(
        environment, "importlib", types.SimpleNamespace(import_module=missing_library)
    )
    assert "cannot be imported (OSError: libnvinfer.so.10: cannot open" in unavailable_reason(
        probe()
    )
    monkeypatch.setattr(environment, "_found", lambda m: m == "tensorrt_lean")
    assert "only TensorRT's runtime (tensorrt_lean)" in unavailable_reason(probe())


# ------------------------------------------------------------------ options


def test_options_are_checked_with_errors_naming_them():
    assert builder_settings() == builder_settings(fp16=False, int8=False, timing_cache=True)
    for name in ("fp16", "tf32", "timing_cache", "cache", "fallback", "int8"):
        with pytest.raises(TypeError, match=f"{name} must be True or False, got 'yes'"):
            builder_settings(**{name: "yes"})
    with pytest.raises(ValueError, match="int8=True is not supported: .*calibration"):
        builder_settings(int8=True)
    for bad in (0, -1, 1.5, True, "1GB"):
        with pytest.raises(ValueError, match="workspace_bytes must be a positive int"):
            builder_settings(workspace_bytes=bad)
    assert builder_settings(workspace_bytes=1 << 30).workspace_bytes == 1 << 30
    for bad in (6, "17", True):
        with pytest.raises(ValueError, match="opset must be"):
            builder_settings(opset=bad)
    assert builder_settings(fp16=True).tolerance > builder_settings().tolerance


def test_options_are_checked_before_anything_else():
    gm, x, _ = linear_graph()
    with pytest.raises(ValueError, match="int8=True"):
        backend.compile_graph(gm, [x], int8=True)


def test_unknown_option_names_the_ones_it_takes():
    with pytest.raises(TypeError) as e:
        jit_core.optimize(lambda x: x, backend="tensorrt", fallback=True, precision="fp16")
    for option in ("fp16", "int8", "workspace_bytes", "timing_cache", "fallback"):
        assert option in str(e.value)


# ------------------------------------------------------------------ profiles


def test_dimension_ranges():
    assert dimension_range(8, (None, None)) == (2, 8, 8 * UNBOUNDED_FACTOR)
    assert dimension_range(8, (4, 32)) == (4, 8, 32)
    assert dimension_range(8, (0, 8)) == (2, 8, 8)  # jit-core never makes 0 and 1 dynamic
    with pytest.raises(ValueError, match="no size between 40 and 32"):
        dimension_range(8, (40, 32))


def test_profile_of_static_and_dynamic_inputs():
    profile = optimization_profile(
        [("x", [8, 3, 224, 224], [0], {0: (1, 64)}), ("w", [3, 3], [], {})]
    )
    assert profile == {
        "x": ((2, 3, 224, 224), (8, 3, 224, 224), (64, 3, 224, 224)),
        "w": ((3, 3), (3, 3), (3, 3)),
    }
    assert outside(profile, "x", [64, 3, 224, 224]) is None
    assert outside(profile, "x", [65, 3, 224, 224]) == (
        "dimension 0 of input x is 65, the engine serves 2 to 64"
    )
    assert "rank 3" in outside(profile, "x", [2, 3, 224])


def test_profile_of_a_captured_graph_takes_mark_dynamic_bounds():
    gm, x, _ = linear_graph(dynamic=True)
    profile = backend.input_profile(gm, [x], {})
    assert profile == {"x": ((2, 3), (4, 3), (16, 3))}


# ------------------------------------------------------------------ cache keys and entries


def test_engine_key_covers_version_gpu_capability_and_options():
    gm, x, _ = linear_graph()
    settings = builder_settings()
    profile = backend.input_profile(gm, [x], {})

    def key(origin=ORIGIN, s=settings, p=profile, frozen=True):
        return engine_cache.engine_key(gm, [x], s, p, origin, frozen)

    base = key()
    assert key() == base
    others = [
        key(origin=Origin("10.4.0", ORIGIN.gpu, ORIGIN.capability)),
        key(origin=Origin(ORIGIN.tensorrt, "NVIDIA H100 80GB HBM3", ORIGIN.capability)),
        key(origin=Origin(ORIGIN.tensorrt, ORIGIN.gpu, "9.0")),
        key(s=builder_settings(fp16=True)),
        key(s=builder_settings(workspace_bytes=1 << 30)),
        key(s=builder_settings(tf32=True)),
        key(p={"x": ((2, 3), (4, 3), (16, 3))}),
        key(frozen=False),
    ]
    assert len(set(others + [base])) == len(others) + 1
    # options that do not shape the engine share it
    assert key(s=builder_settings(timing_cache=False, fallback=True)) == base
    assert engine_cache.timing_cache_key(ORIGIN) != engine_cache.timing_cache_key(
        Origin(ORIGIN.tensorrt, ORIGIN.gpu, "9.0")
    )


def test_entries_name_where_they_were_built():
    entry = engine_cache.pack(b"engine", ORIGIN)
    assert engine_cache.unpack(entry, ORIGIN) == (b"engine", "")
    data, why = engine_cache.unpack(entry, Origin("10.0.1", "NVIDIA H100 80GB HBM3", "9.0"))
    assert data is None
    assert why == (
        "it was built for capability '8.0', gpu 'NVIDIA A100-SXM4-80GB'; this is "
        "capability '9.0', gpu 'NVIDIA H100 80GB HBM3'"
    )
    assert engine_cache.unpack(b"plain engine bytes", ORIGIN)[1] == (
        "it is not an entry of this backend"
    )
    assert engine_cache.unpack(entry[:12], ORIGIN)[0] is None


@pytest.fixture
def stub_export(monkeypatch):
    """engine_for without paddle2onnx: the export's bytes are a marker."""
    monkeypatch.setattr(backend, "export_model", lambda *a: b"exported")
    monkeypatch.setattr(
        backend,
        "build_engine",
        lambda trt, model, settings, profile, timings: (
            trt_stand_in.ENGINE_TAG + model,
            (timings or b"") + b"t" if settings.timing_cache else None,
        ),
    )


def test_engines_are_cached_and_foreign_or_corrupt_ones_rebuilt(stub_export):
    gm, x, _ = linear_graph()
    trt = trt_stand_in.make_module()
    # the stand-in is this process's module: the build runs here
    settings = builder_settings(isolate=False)
    profile = backend.input_profile(gm, [x], {})

    def build():
        before = dict(backend.stats)
        _, engine, data, key, from_cache = backend.engine_for(
            trt, gm, [x], settings, profile, ORIGIN, {}
        )
        assert engine is not None
        built = backend.stats["builds"] - before["builds"]
        return data, key, from_cache, built

    data, key, from_cache, built = build()
    assert (from_cache, built) == (False, 1)
    assert data == trt_stand_in.ENGINE_TAG + b"exported"
    # engine_for does not store: only an engine that passed the check is kept
    assert CACHE.get(key) is None
    CACHE.put(key, engine_cache.pack(data, ORIGIN))
    assert build()[2:] == (True, 0)
    # built for another GPU: rebuilt, with a warning naming why
    CACHE.put(key, engine_cache.pack(data, Origin("10.0.1", "Tesla T4", "7.5")))
    with pytest.warns(RuntimeWarning, match="is rebuilt: it was built for capability '7.5'"):
        assert build()[2:] == (False, 1)
    # one TensorRT refuses to deserialize
    CACHE.put(key, engine_cache.pack(b"garbage", ORIGIN))
    with pytest.warns(RuntimeWarning, match="refused to deserialize it"):
        assert build()[2:] == (False, 1)
    # damaged on disk: DiskCache's checksum refuses it
    with open(CACHE.path(key), "r+b") as f:
        f.seek(-3, 2)
        f.write(b"xyz")
    with pytest.warns(RuntimeWarning, match="corrupt or truncated"):
        assert build()[2:] == (False, 1)
    # the timing cache of this TensorRT and GPU grew with each build and was fed back
    timings, _ = engine_cache.unpack(CACHE.get(engine_cache.timing_cache_key(ORIGIN)), ORIGIN)
    assert timings == b"tttt"


def test_no_cache_builds_every_time(stub_export):
    gm, x, _ = linear_graph()
    trt = trt_stand_in.make_module()
    profile = backend.input_profile(gm, [x], {})
    settings = builder_settings(cache=False, timing_cache=False, isolate=False)
    for _ in range(2):
        *_, key, from_cache = backend.engine_for(trt, gm, [x], settings, profile, ORIGIN, {})
        assert key is None and not from_cache
    assert backend.CACHE.get(engine_cache.timing_cache_key(ORIGIN)) is None


# ------------------------------------------------------------------ lowering sequence


@needs_export
def test_parser_gets_the_shared_export_and_builder_the_options(monkeypatch):
    gm, x, _ = linear_graph(dynamic=True)
    exported = []
    real_export = backend.export_onnx

    def spy(*args):
        model = real_export(*args)
        exported.append(model)
        return model

    monkeypatch.setattr(backend, "export_onnx", spy)
    trt = trt_stand_in.make_module()
    live = jit_core.kit.onnx.live_tensors(gm)
    settings = builder_settings(fp16=True, workspace_bytes=1 << 28, isolate=False)
    profile = backend.input_profile(gm, [x], live)
    data = backend.lower(trt, gm, [x], settings, profile, ORIGIN, live)
    # the bytes parsed are the shared export's model (parameters lifted to inputs)
    (model,) = exported
    parsed = [arg for name, arg in trt.calls if name == "parse"]
    assert parsed == [model.SerializeToString()]
    assert sorted(i.name for i in model.graph.input) == sorted(["x", *live])
    assert trt_stand_in.names(trt) == [
        "Builder",
        "create_network",
        "OnnxParser",
        "parse",
        "create_builder_config",
        "set_memory_pool_limit",
        "set_flag",
        "clear_flag",
        "create_timing_cache",
        "set_timing_cache",
        "create_optimization_profile",
        "set_shape",
        "set_shape",
        "set_shape",
        "add_optimization_profile",
        "build_serialized_network",
    ]
    calls = dict((n, a) for n, a in trt.calls if n != "set_shape")
    assert calls["create_network"] == 0
    assert calls["set_memory_pool_limit"] == (trt.MemoryPoolType.WORKSPACE, 1 << 28)
    assert calls["set_flag"] is trt.BuilderFlag.FP16
    assert calls["clear_flag"] is trt.BuilderFlag.TF32
    assert calls["create_timing_cache"] == b""  # nothing cached yet
    assert calls["set_timing_cache"] is False  # a mismatched cache is not used
    shapes = {a[0]: a[1:] for n, a in trt.calls if n == "set_shape"}
    assert shapes == profile and shapes["x"] == ((2, 3), (4, 3), (16, 3))
    assert data == trt_stand_in.ENGINE_TAG + b"FP16"  # TF32 cleared, FP16 set
    # the timing cache went to the compile cache, for the next build on this GPU
    entry = CACHE.get(engine_cache.timing_cache_key(ORIGIN))
    assert engine_cache.unpack(entry, ORIGIN)[0] == b"+timings"


def test_static_network_has_no_profile_and_default_options():
    trt = trt_stand_in.make_module()
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = onnx.helper.make_model(graph).SerializeToString()
    settings = builder_settings(timing_cache=False)
    data, timings = lowering.build_engine(trt, model, settings, {"x": ((2, 3),) * 3})
    assert timings is None
    names = trt_stand_in.names(trt)
    assert "create_optimization_profile" not in names and "set_flag" not in names
    assert "set_memory_pool_limit" not in names and "create_timing_cache" not in names
    assert data == trt_stand_in.ENGINE_TAG  # TF32 cleared
    with pytest.raises(TensorRTError, match=r"inputs \['x'\] the graph lacks"):
        lowering.build_engine(trt_stand_in.make_module(), model, settings, {})


def test_parse_errors_name_the_onnx_node_and_trt_message():
    errors = [
        trt_stand_in.ParserError("p2o.Erf.0", "Erf", "  no importer for Erf ", 3),
        trt_stand_in.ParserError("", "", "model has no graph", -1),
    ]
    trt = trt_stand_in.make_module(parse_errors=errors)
    with pytest.raises(TensorRTError) as e:
        lowering.build_engine(trt, b"model", builder_settings(), {})
    assert str(e.value) == (
        "TensorRT 10.0.1's ONNX parser refused the exported graph: ONNX node p2o.Erf.0 "
        "(Erf): no importer for Erf; the model: model has no graph"
    )


def test_failed_build_reports_the_builder_log():
    trt = trt_stand_in.make_module(build_fails=True)
    trt.OnnxParser.parse = lambda self, model: True
    with pytest.raises(TensorRTError, match="could not build an engine.*no implementation"):
        lowering.build_engine(trt, b"model", builder_settings(), {})


# ------------------------------------------------------------------ CPU tensors


def test_cpu_tensors_say_to_set_the_device_and_fallback_runs_paddle(monkeypatch):
    gm, x, f = linear_graph()
    trt = trt_stand_in.make_module()
    monkeypatch.setattr(backend, "load_tensorrt", lambda: trt)
    with pytest.raises(NotOnGpuError) as e:
        backend.compile_graph(gm, [x])
    assert "TensorRT runs on GPU tensors and input 0 is on Place(cpu)" in str(e.value)
    assert 'paddle.device.set_device("gpu")' in str(e.value)
    assert trt.calls == []  # nothing exported or built
    before = backend.stats["fallbacks"]
    with pytest.warns(RuntimeWarning, match='set_device\\("gpu"\\).*paddle backend'):
        run = backend.compile_graph(gm, [x], fallback=True)
    assert backend.stats["fallbacks"] == before + 1
    np.testing.assert_array_equal(run(x)[0].numpy(), f(x).numpy())


# ------------------------------------------------------------------ running an engine


@pytest.fixture
def bound_on_cpu(monkeypatch):
    """TrtGraph's binding on CPU tensors: the stand-in engine reads and writes the
    addresses it is given, as TensorRT does on the GPU; the stream handle is a marker."""
    from jit_backend_tensorrt import runtime

    monkeypatch.setattr(runtime, "not_on_gpu", lambda *a, **k: None)
    monkeypatch.setattr(runtime, "current_stream_handle", lambda: 1234)


def linear_engine(trt, w_name: str, b_name: str):
    def compute(a):
        return {"out": np.maximum(a["x"] @ a[w_name] + a[b_name], 0) * 2.0}

    float32 = trt.DataType.FLOAT
    inputs = [(b_name, float32), ("x", float32), (w_name, float32)]
    return trt_stand_in.Engine(inputs, [("out", float32)], compute, trt.calls)


def test_inputs_and_live_parameters_are_bound_by_address(bound_on_cpu):
    from jit_backend_tensorrt.runtime import TrtGraph

    gm, x, f = linear_graph(dynamic=True)
    live = jit_core.kit.onnx.live_tensors(gm)
    w_name, b_name = list(live)
    trt = trt_stand_in.make_module()
    profile = backend.input_profile(gm, [x], live)
    compiled = TrtGraph(trt, None, linear_engine(trt, w_name, b_name), gm, live, profile)
    for batch in (4, 7):
        x = paddle.rand([batch, 3])
        (out,) = compiled(x)
        np.testing.assert_allclose(out.numpy(), f(x).numpy(), rtol=1e-5, atol=1e-6)
    # parameters are read on every call: an update is seen without a rebuild
    with paddle.no_grad():
        live[b_name].set_value(live[b_name] + 1.0)
    np.testing.assert_allclose(compiled(x)[0].numpy(), f(x).numpy(), rtol=1e-5, atol=1e-6)
    shapes = [a for n, a in trt.calls if n == "set_input_shape"]
    assert sorted(shapes[:3]) == sorted([("x", (4, 3)), (w_name, (3, 5)), (b_name, (5,))])
    assert ("execute_async_v3", 1234) in trt.calls


def test_a_call_outside_the_profile_runs_on_paddle_with_one_warning(bound_on_cpu):
    from jit_backend_tensorrt.runtime import TrtGraph

    gm, x, f = linear_graph(dynamic=True)
    live = jit_core.kit.onnx.live_tensors(gm)
    trt = trt_stand_in.make_module()
    profile = backend.input_profile(gm, [x], live)
    compiled = TrtGraph(trt, None, linear_engine(trt, *live), gm, live, profile)
    big = paddle.rand([17, 3])
    with pytest.warns(RuntimeWarning, match="is 17, the engine serves 2 to 16.*max="):
        np.testing.assert_allclose(compiled(big)[0].numpy(), f(big).numpy(), rtol=1e-5, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled(big)
    assert "execute_async_v3" not in trt_stand_in.names(trt)


def test_results_get_paddle_shape_and_engine_outputs_must_match_the_graph(bound_on_cpu):
    from jit_backend_tensorrt.runtime import TrtGraph

    def total(x):
        return paddle.sum(x * 2.0)

    x = paddle.rand([3, 2])
    gm = jit_core.capture(total, x)
    trt = trt_stand_in.make_module()
    float32 = trt.DataType.FLOAT

    def compute(a):  # paddle2onnx gives a 0-D result the shape [1]
        return {"y": np.sum(a["x"] * 2.0).reshape([1])}

    engine = trt_stand_in.Engine([("x", float32)], [("y", float32)], compute, trt.calls)
    compiled = TrtGraph(trt, None, engine, gm, {}, {"x": ((3, 2),) * 3})
    (y,) = compiled(x)
    assert y.shape == [] and y.dtype == paddle.float32
    np.testing.assert_allclose(y.numpy(), total(x).numpy(), rtol=1e-5, atol=1e-6)
    two = trt_stand_in.Engine(
        [("x", float32)], [("y", float32), ("z", float32)], compute, trt.calls
    )
    with pytest.raises(TensorRTError, match="the engine has 2 outputs, the graph 1"):
        TrtGraph(trt, None, two, gm, {}, {})
    stray = trt_stand_in.Engine([("x", float32), ("w", float32)], [("y", float32)], compute, [])
    with pytest.raises(TensorRTError, match=r"inputs \['w'\] the graph lacks"):
        TrtGraph(trt, None, stray, gm, {}, {})


def test_cpu_tensors_at_run_time_say_to_set_the_device():
    from jit_backend_tensorrt.runtime import TrtGraph

    gm, x, _ = linear_graph()
    live = jit_core.kit.onnx.live_tensors(gm)
    trt = trt_stand_in.make_module()
    profile = backend.input_profile(gm, [x], live)
    compiled = TrtGraph(trt, None, linear_engine(trt, *live), gm, live, profile)
    with pytest.raises(NotOnGpuError, match=r'set_device\("gpu"\)'):
        compiled(x)


# ------------------------------------------------------------------ the build worker

#: a build worker whose ``tensorrt`` is the stand-in; with "abort" its builder aborts, as
#: TensorRT does on an uncaught C++ exception
STAND_IN_WORKER = """
import os, runpy, sys
sys.path.insert(0, sys.argv[2])
import trt_stand_in
trt = trt_stand_in.make_module()
def abort(self, network, config):
    sys.stderr.write("terminate called after throwing an instance of 'std::out_of_range'\\n")
    sys.stderr.flush()
    os.abort()
if sys.argv[1] == "abort":
    trt.Builder.build_serialized_network = abort
sys.modules["tensorrt"] = trt
sys.argv = ["jit_core.workers", sys.argv[3]]
runpy.run_module("jit_core.workers", run_name="__main__")
"""


@pytest.fixture
def stand_in_worker(monkeypatch):
    """The build worker replaced by one whose tensorrt is the stand-in."""
    from jit_backend_tensorrt import build_worker

    from jit_core.workers import Worker

    workers = []

    def use(mode: str) -> Worker:
        tests = os.path.dirname(os.path.abspath(__file__))
        argv = [sys.executable, "-c", STAND_IN_WORKER, mode, tests, build_worker.WORKER.argv[-1]]
        worker = Worker(argv, "test")
        workers.append(worker)
        monkeypatch.setattr(build_worker, "WORKER", worker)
        return worker

    yield use
    for worker in workers:
        worker.close()


def _relu_model() -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    return helper.make_model(graph).SerializeToString()


def test_the_build_worker_builds_what_this_process_would(stand_in_worker):
    from jit_backend_tensorrt import build_worker

    stand_in_worker("build")
    model = _relu_model()
    profile = {"x": ((2, 3),) * 3}
    settings = builder_settings(fp16=True)
    here = lowering.build_engine(trt_stand_in.make_module(), model, settings, profile, b"old")
    there = build_worker.build(None, model, settings, profile, b"old")
    assert there == here and there[0].startswith(trt_stand_in.ENGINE_TAG)
    assert there[1] is not None  # the timing cache came back
    # TensorRT's own refusal is the same error as in this process
    with pytest.raises(TensorRTError, match=r"inputs \['x'\] the graph lacks"):
        build_worker.build(None, model, settings, {})


def test_tensorrt_dying_in_a_build_costs_the_graph_not_the_program(stand_in_worker):
    from jit_backend_tensorrt import build_worker

    stand_in_worker("abort")
    model, profile = _relu_model(), {"x": ((2, 3),) * 3}
    with pytest.raises(TensorRTError) as error:
        build_worker.build(None, model, builder_settings(), profile)
    message = str(error.value)
    assert "TensorRT's build worker ended during the engine build: it died of SIGABRT" in message
    assert "std::out_of_range" in message
    # the next build starts a new worker
    with pytest.raises(TensorRTError, match="SIGABRT"):
        build_worker.build(None, model, builder_settings(), profile)
