"""The tvm backend: what it computes, what it keeps on disk, how it tunes, how it fails."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys

import numpy as np
import paddle
import pytest
from jit_backend_tvm import plugin

import jit_core
from jit_core.errors import BackendCompileError, BackendUnavailableError

#: the package installs TVM on Python 3.10 to 3.12 (no wheels before 3.10; on 3.13 the ONNX
#: export it compiles from cannot run)
HAS_TVM = importlib.util.find_spec("tvm") is not None
#: why the backend cannot run here: no TVM (3.8/3.9) or no ONNX export (3.13: no paddle2onnx
#: 2.x wheels); the tests of TVM's own side run wherever TVM does
WHY_NOT = plugin.unavailable_reason()


def _one_python(skip):
    """``skip``, and the test marked ``one_python``: what TVM builds and how this package
    drives it do not depend on the Python (one apache-tvm wheel for all), and the first
    build in a process costs TVM's own start-up (20-30 s on 2 cores), so CI runs these on
    one Python; the tvm conformance run builds and checks graphs on every Python with TVM.
    The tests of why the backend can or cannot run stay on every Python."""

    def mark(fn):
        return pytest.mark.one_python(skip(fn))

    return mark


needs_tvm = _one_python(
    pytest.mark.skipif(not HAS_TVM, reason="apache-tvm is installed on Python 3.10-3.12")
)
needs_backend = _one_python(
    pytest.mark.skipif(bool(WHY_NOT), reason=f"the tvm backend cannot run here: {WHY_NOT}")
)


class SmallNet(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = paddle.nn.Conv2D(3, 8, 3, padding=1)
        self.bn = paddle.nn.BatchNorm2D(8)
        self.fc = paddle.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        y = paddle.nn.functional.relu(self.bn(self.conv(x)))
        return self.fc(y.flatten(1)).softmax(-1)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    from jit_core.cache.disk import ENV_VAR

    monkeypatch.setenv(ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.delenv("JIT_TVM_TUNE", raising=False)


def _net():
    paddle.seed(0)
    net = SmallNet()
    net.eval()
    return net


@pytest.mark.skipif(
    sys.version_info >= plugin.MIN_PYTHON, reason="checks the error on Pythons without TVM wheels"
)
def test_unavailable_before_310_says_why():
    assert jit_core.backends()["tvm"].unavailable
    with pytest.raises(BackendUnavailableError, match=r"Python 3\.10\+"):
        jit_core.optimize(_net(), backend="tvm")


def test_registered_with_the_reason_it_cannot_run_here_or_none():
    assert jit_core.backends()["tvm"].unavailable == WHY_NOT
    assert jit_core.backends()["tvm"].inference_only


def test_the_reasons_name_the_missing_package_and_the_python(paddle2onnx_at, monkeypatch):
    from jit_core.kit.onnx import export

    paddle2onnx_at(None)
    with_paddle2onnx = export.installed_version
    monkeypatch.setattr(
        export,
        "installed_version",
        lambda d: "0.27.0" if d == "apache-tvm" else with_paddle2onnx(d),
    )
    # the direct ONNX export needs no paddle2onnx: TVM runs on 3.13 too
    assert plugin.unavailable_reason((3, 13)) == plugin.unavailable_reason((3, 12)) == ""
    assert plugin.unavailable_reason((3, 9)) == (
        "apache-tvm 0.27 has wheels for Python 3.10+ only; this is Python 3.9"
    )
    # unless paddle2onnx is asked for: TVM's own reason and the export's, together
    monkeypatch.setenv(export.EXPORTER_ENV, "paddle2onnx")
    assert plugin.unavailable_reason((3, 9)) == (
        "apache-tvm 0.27 has wheels for Python 3.10+ only; this is Python 3.9; "
        "JIT_CORE_ONNX_EXPORTER=paddle2onnx asks for paddle2onnx, and paddle2onnx is not "
        "installed: pip install 'jit-core[onnx]' (paddle2onnx and onnx)"
    )
    assert "paddle2onnx 2.x has no wheels for Python 3.13" in plugin.unavailable_reason((3, 13))
    # a paddle2onnx 2.x built from source serves on 3.13; 0.9.2 (3.13's only wheel) does not
    paddle2onnx_at("2.1.0")
    monkeypatch.setattr(
        export, "installed_version", lambda d: "0.27.0" if d == "apache-tvm" else "2.1.0"
    )
    assert plugin.unavailable_reason((3, 13)) == ""
    paddle2onnx_at("0.9.2")
    assert "the installed paddle2onnx 0.9.2 cannot read Paddle 3's programs" in (
        plugin.unavailable_reason((3, 13))
    )


def test_without_apache_tvm_the_reason_says_what_to_install(monkeypatch):
    from jit_core.kit.onnx import export

    real = export.installed_version
    monkeypatch.setattr(
        export, "installed_version", lambda d: None if d == "apache-tvm" else real(d)
    )
    why = plugin.unavailable_reason((3, 12))
    assert why.startswith("apache-tvm is not installed (jit-backend-tvm brings it on Python 3.10")
    assert "pip install 'apache-tvm==0.27.*'" in why


def test_the_dependencies_leave_tvm_out_where_it_cannot_run():
    import re
    from importlib.metadata import requires

    deps = {re.match(r"[A-Za-z0-9_.-]+", r).group(): r for r in requires("jit-backend-tvm")}
    tvm = ("apache-tvm", "apache-tvm-ffi", "psutil", "cloudpickle", "xgboost-cpu")
    for name in tvm:
        marker = deps[name].split(";")[1].replace('"', "'")
        assert marker.split() == "python_version >= '3.10'".split()
        # what the message tells users to install is what the package would have installed
        assert name in plugin.TVM_PACKAGES
    assert set(deps) - set(tvm) == {"jit-core", "numpy"}


def test_a_missing_paddle2onnx_is_listed_and_refused_with_the_reason(monkeypatch, paddle2onnx_at):
    from jit_core import plugins
    from jit_core.kit.onnx.export import EXPORTER_ENV

    # (asked for: the direct export needs no paddle2onnx)
    paddle2onnx_at(None)
    monkeypatch.setenv(EXPORTER_ENV, "paddle2onnx")
    monkeypatch.setattr(plugins, "_backends", None)  # registered again, then put back
    assert "paddle2onnx" in jit_core.backends()["tvm"].unavailable
    with pytest.raises(BackendUnavailableError, match="paddle2onnx"):
        jit_core.optimize(_net(), backend="tvm")


@needs_backend
def test_matches_eager_with_live_parameters():
    from jit_backend_tvm import stats

    net = _net()
    x = paddle.rand([2, 3, 8, 8])
    fast = jit_core.optimize(net, backend="tvm", tune="off")
    builds = stats["builds"]
    with paddle.no_grad():
        np.testing.assert_allclose(fast(x).numpy(), net(x).numpy(), rtol=1e-5, atol=1e-6)
        report = jit_core.explain(fast, x)
        assert report.graph_count == 1 and report.break_count == 0
        assert stats["builds"] == builds + 1
        # parameters are inputs of the compiled model: new weights are seen without a rebuild
        other = SmallNet()
        net.set_state_dict(other.state_dict())
        np.testing.assert_allclose(fast(x).numpy(), net(x).numpy(), rtol=1e-5, atol=1e-6)
        # every call returns its own tensors, not a buffer the next call overwrites
        first = fast(x)
        kept = first.numpy().copy()
        fast(x * 2)
        np.testing.assert_array_equal(first.numpy(), kept)
    assert stats["builds"] == builds + 1


@needs_backend
def test_parameters_changed_in_place_or_given_new_memory_are_read_at_each_call():
    # the TVM tensors over the parameters are made once, again on new memory
    net = _mlp()
    fast = jit_core.optimize(net, backend="tvm", tune="off")
    x = paddle.randn([4, 8])

    def same():
        np.testing.assert_allclose(fast(x).numpy(), net(x).numpy(), rtol=1e-5, atol=1e-6)

    with paddle.no_grad():
        same()
        first = next(m for m in net.sublayers() if isinstance(m, paddle.nn.Linear))
        first.weight.set_value(np.full(first.weight.shape, 0.1, "float32"))  # same memory
        same()
        first.bias.add_(paddle.ones(first.bias.shape))
        same()
        moved = first.bias.data_ptr()
        (paddle.ones(first.bias.shape) * 5)._share_buffer_to(first.bias)  # new memory
        assert first.bias.data_ptr() != moved
        same()
    assert fast.jit_stats.captures == 1


@needs_backend
def test_frozen_model_and_library_cache(capfd):
    from jit_backend_tvm import stats

    net = _net()
    x = paddle.rand([1, 3, 8, 8])
    with paddle.no_grad():
        expected = net(x).numpy()
        hits = stats["cache_hits"]
        out = jit_core.optimize(net, backend="tvm", tune="off", freeze=True)(x)
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)
        assert stats["cache_hits"] == hits
        # TVM's C++ debugging line on saving a library is not passed on
        assert "Scope Saving" not in capfd.readouterr().err
        # a second optimize of the same graph loads the library the first one stored
        out = jit_core.optimize(net, backend="tvm", tune="off", freeze=True)(x)
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)
        assert stats["cache_hits"] == hits + 1
        assert "Scope Loaded" not in capfd.readouterr().err


@needs_backend
def test_a_library_with_live_parameters_serves_a_twin_model():
    from jit_backend_tvm import stats

    x = paddle.rand([1, 3, 8, 8])
    first = _net()
    second = SmallNet()  # other weights, and other tensor names (Paddle numbers them)
    second.eval()
    assert first.conv.weight.name != second.conv.weight.name
    with paddle.no_grad():
        hits, builds = stats["cache_hits"], stats["builds"]
        out = jit_core.optimize(first, backend="tvm", tune="off")(x)
        np.testing.assert_allclose(out.numpy(), first(x).numpy(), rtol=1e-5, atol=1e-6)
        # the library built for the first is the second's too (as in another process),
        # fed the second's own parameters
        out = jit_core.optimize(second, backend="tvm", tune="off")(x)
        np.testing.assert_allclose(out.numpy(), second(x).numpy(), rtol=1e-5, atol=1e-6)
        assert not np.allclose(second(x).numpy(), first(x).numpy())
    assert stats["builds"] == builds + 1 and stats["cache_hits"] == hits + 1


def _matmul(x, w):
    return paddle.nn.functional.relu(paddle.matmul(x, w))


TUNE_IN_A_PROCESS = """
import json, logging, sys, warnings
warnings.filterwarnings("ignore")
import paddle, jit_core
from jit_backend_tvm import stats

records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logging.getLogger("jit_core.tuning").addHandler(Keep())

def f(x, w):
    return paddle.nn.functional.relu(paddle.matmul(x, w))

paddle.seed(0)
x, w = paddle.rand([64, 128]), paddle.rand([128, 64])
with paddle.no_grad():
    fast = jit_core.optimize(
        f, backend="tvm", tune=sys.argv[1], trials_per_task=2, cache=sys.argv[2] == "cache"
    )
    expected = f(x, w)
    diff = float((fast(x, w) - expected).abs().max() / expected.abs().max())
print(json.dumps({"stats": stats, "log": records, "diff": diff}))
"""


def _tune_in_a_process(mode: str, cache: str = "cache", **env_vars: str) -> dict:
    env = dict(os.environ, GLOG_minloglevel="2", **env_vars)
    out = subprocess.run(
        [sys.executable, "-c", TUNE_IN_A_PROCESS, mode, cache],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_backend
def test_tuning_records_outlive_the_process_and_travel_through_redis(redis_server, tmp_path):
    from jit_backend_tvm.target import make_target
    from jit_backend_tvm.tuning import database_dir

    from jit_core.cache.disk import ENV_VAR
    from jit_core.cache.remote import KEY_ENV, URL_ENV

    remote = {URL_ENV: redis_server.url, KEY_ENV: "cluster key"}
    first = _tune_in_a_process("auto", **remote)
    assert first["diff"] < 1e-6
    tuned = first["stats"]["tuned_tasks"]
    assert tuned >= 1 and first["stats"]["builds"] == 1
    # progress: one line per kernel on the "tuning" channel
    assert sum("best" in line for line in first["log"]) == tuned, first["log"]
    folder = database_dir(make_target())
    with open(os.path.join(folder, "database_tuning_record.json")) as f:
        assert len(f.read().splitlines()) >= tuned

    # a fresh process: the compiled library comes from the cache, nothing is tuned or built
    warm = _tune_in_a_process("auto", **remote)
    assert warm["diff"] < 1e-6
    assert warm["stats"]["tuned_tasks"] == 0 and warm["stats"]["cache_hits"] == 1
    assert warm["stats"]["builds"] == 0

    # another machine, its local cache empty: the signed, tuned library comes from Redis
    elsewhere = _tune_in_a_process("auto", **remote, **{ENV_VAR: str(tmp_path / "b")})
    assert elsewhere["diff"] < 1e-6
    assert elsewhere["stats"]["cache_hits"] == 1 and elsewhere["stats"]["builds"] == 0
    assert elsewhere["stats"]["tuned_tasks"] == 0

    # a third without the library cache: the records pooled in Redis spare the tuning
    rebuilt = _tune_in_a_process("auto", "no cache", **remote, **{ENV_VAR: str(tmp_path / "c")})
    assert rebuilt["stats"]["tuned_tasks"] == 0 and rebuilt["stats"]["builds"] == 1
    assert any("all" in line and "have records" in line for line in rebuilt["log"])


@needs_backend
@pytest.mark.parametrize(
    "options, message",
    [
        (dict(tune="fast"), "tune must be one of auto, always, off"),
        (dict(trials_per_task=0), "trials_per_task must be a positive int"),
        (dict(target={"kind": "cuda"}), "compiles for CPUs"),
        (dict(layout="NCHW8c"), "layout must be one of NHWC, NCHW"),
        (dict(winograd="yes"), "winograd must be True or False"),
        (dict(symbolic="yes"), "symbolic must be 'auto', True or False"),
    ],
)
def test_bad_options_are_named(options, message):
    fast = jit_core.optimize(_matmul, backend="tvm", **options)
    with pytest.raises(BackendCompileError, match=message), paddle.no_grad():
        fast(paddle.rand([4, 4]), paddle.rand([4, 4]))


@needs_tvm
def test_unsupported_onnx_operator_is_named():
    from jit_backend_tvm.library import TvmCompileError, _to_relax
    from onnx import TensorProto, helper

    node = helper.make_node("NoSuchOperator", ["x"], ["y"], name="mystery_0")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(TvmCompileError, match="NoSuchOperator.*mystery_0"):
        _to_relax(model, {"x": [2]}, {"x": "float32"}, False)


@needs_tvm
def test_compile_failure_names_the_relax_operator():
    from jit_backend_tvm.library import _compile_failure

    class Module:
        def script(self, show_meta=False):
            return "lv = R.nn.conv2d(x, w)\nlv1 = R.nn.relu(lv)\n"

    text = _compile_failure(
        RuntimeError("trace\nInternalError: cannot legalize nn.conv2d"), Module()
    )
    assert "at Relax operator nn.conv2d" in text and "cannot legalize" in text


@needs_tvm
def test_shape_arithmetic_is_folded_for_the_importer():
    from jit_backend_tvm.library import fold_static_shapes
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node(
            "Constant", [], ["i"], value=numpy_helper.from_array(np.array([0], np.int64))
        ),
        helper.make_node("Gather", ["s", "i"], ["batch"], name="gather"),
        helper.make_node(
            "Constant", [], ["rest"], value=numpy_helper.from_array(np.array([-1], np.int64))
        ),
        helper.make_node("Concat", ["batch", "rest"], ["target"], axis=0, name="concat"),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert fold_static_shapes(model) == 3
    ops = [n.op_type for n in model.graph.node]
    assert ops == ["Constant"] * 5 + ["Reshape"]
    target = next(n for n in model.graph.node if n.output[0] == "target")
    assert numpy_helper.to_array(target.attribute[0].t).tolist() == [2, -1]


@needs_backend
def test_a_spent_time_budget_leaves_kernels_untuned_and_the_build_uncached():
    from jit_backend_tvm import stats

    x, w = paddle.rand([64, 128]), paddle.rand([128, 64])
    before = dict(stats)
    with paddle.no_grad():
        for _ in range(2):
            fast = jit_core.optimize(_matmul, backend="tvm", tune="auto", tune_seconds=1e-3)
            np.testing.assert_allclose(fast(x, w).numpy(), _matmul(x, w).numpy(), rtol=1e-5)
    # the budget ran out before the first kernel: nothing tuned, and the incomplete build
    # was not cached, so the second optimize() built again (and would go on tuning)
    assert stats["tuned_tasks"] == before["tuned_tasks"]
    assert stats["builds"] == before["builds"] + 2
    assert stats["cache_hits"] == before["cache_hits"]


def _relax_matmul_relu():
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((64, 128), "float32"))
    w = relax.Var("w", relax.TensorType((128, 64), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.nn.relu(relax.op.matmul(x, w)))
        bb.emit_func_output(y)
    return bb.get()


# (TVM's schedule search, in C++: the same on every Python)
@needs_tvm
def test_kernels_without_records_get_a_sampled_schedule():
    import tvm
    from jit_backend_tvm import schedules, tuning
    from jit_backend_tvm.target import make_target
    from tvm import relax, tirx

    target = make_target()
    plain = tuning.prepare(_relax_matmul_relu(), target)
    kernels = [gv.name_hint for gv, f in plain.functions_items() if isinstance(f, tirx.PrimFunc)]
    assert kernels
    assert all("T.parallel" not in plain[name].script() for name in kernels)

    first, count = schedules.sample_unscheduled(
        tuning.prepare(_relax_matmul_relu(), target), target
    )
    again, _ = schedules.sample_unscheduled(tuning.prepare(_relax_matmul_relu(), target), target)
    assert count == len(kernels)
    for name in kernels:
        code = first[name].script()
        # threads and vectors instead of the plain loop nest, the same program every time
        assert "T.parallel" in code and "T.vectorized" in code, code
        tvm.ir.assert_structural_equal(first[name], again[name])

    x, w = np.random.rand(64, 128).astype("float32"), np.random.rand(128, 64).astype("float32")
    vm = relax.VirtualMachine(tvm.compile(first, target), tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(w)).numpy()
    np.testing.assert_allclose(out, np.maximum(x @ w, 0), rtol=1e-5)


def _relax_conv_relu():
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 3, 8, 8), "float32"))
    w = relax.const(np.ones((4, 3, 3, 3), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit_output(relax.op.nn.relu(relax.op.nn.conv2d(x, w, padding=1)))
        bb.emit_func_output(y)
    return bb.get()


@needs_backend
@pytest.mark.parametrize("layout, data_shape", [("NHWC", [1, 8, 8, 3]), ("NCHW", [1, 3, 8, 8])])
def test_convolutions_run_in_the_layout_asked_for(layout, data_shape):
    from jit_backend_tvm import tuning
    from jit_backend_tvm.target import make_target
    from tvm import tirx

    mod = tuning.prepare(_relax_conv_relu(), make_target(), layout)
    conv = [f for gv, f in mod.functions_items() if "conv2d" in gv.name_hint]
    assert len(conv) == 1 and isinstance(conv[0], tirx.PrimFunc)
    code = conv[0].script()
    dims = ", ".join(f"T.int64({d})" for d in data_shape)
    assert f'T.sblock("conv2d_{layout.lower()}")' in code and f"T.Buffer(({dims})" in code, code

    net = _net()
    image = paddle.rand([1, 3, 8, 8])
    with paddle.no_grad():
        out = jit_core.optimize(net, backend="tvm", tune="off", freeze=True, layout=layout)(image)
        np.testing.assert_allclose(out.numpy(), net(image).numpy(), rtol=1e-5, atol=1e-6)


@needs_tvm
def test_a_failing_layout_conversion_keeps_nchw(monkeypatch, caplog):
    from jit_backend_tvm import tuning
    from jit_backend_tvm.target import make_target
    from tvm import relax

    def broken(desired):
        raise RuntimeError("InternalError: std::bad_alloc")

    monkeypatch.setattr(relax.transform, "ConvertLayout", broken)
    with caplog.at_level("INFO", logger="jit_core.tuning"):
        mod = tuning.prepare(_relax_conv_relu(), make_target(), "NHWC")
    code = next(f for gv, f in mod.functions_items() if "conv2d" in gv.name_hint).script()
    assert 'T.sblock("conv2d_nchw")' in code
    assert "convolutions stay in NCHW" in caplog.text and "bad_alloc" in caplog.text


# (TVM's schedule search, in C++: the same on every Python)
@needs_tvm
def test_sampled_schedules_unroll_little():
    import tvm
    from jit_backend_tvm import schedules, tuning
    from jit_backend_tvm.target import make_target
    from tvm import s_tir, tirx
    from tvm.s_tir import meta_schedule as ms

    target = make_target()
    mod = tuning.prepare(_relax_matmul_relu(), target)
    func = next(f for _, f in mod.functions_items() if isinstance(f, tirx.PrimFunc))
    with target, tuning.tuning_environment(target):
        context = ms.TuneContext(
            mod=tvm.IRModule({"main": func}), target=target, space_generator="post-order-apply"
        )
        space = context.generate_design_space()[0]

    def unroll(schedule):
        inst = next(i for i in schedule.trace.insts if i.kind.name == "SampleCategorical")
        return [int(v) for v in inst.attrs[0]], inst

    values, inst = unroll(space)
    # the sample drawing MetaSchedule's largest unrolling (512 steps) ...
    trace = space.trace.with_decision(inst, values.index(max(values)), remove_postproc=True)
    largest = s_tir.Schedule(tvm.IRModule({"main": func}))
    trace.apply_to_schedule(largest, remove_postproc=True)
    values, inst = unroll(largest)
    assert values[int(largest.trace.get_decision(inst))] == 512
    # ... keeps at most MAX_UNROLL
    capped = schedules._capped_unrolling(largest, func)
    values, inst = unroll(capped)
    assert values[int(capped.trace.get_decision(inst))] == schedules.MAX_UNROLL


@needs_tvm
def test_batch_norms_with_constant_statistics_become_multiply_add():
    from jit_backend_tvm.library import fold_batch_norms
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(0)
    stats_ = {
        "scale": rng.random(3).astype("float32") + 0.5,
        "bias": rng.random(3).astype("float32"),
        "mean": rng.random(3).astype("float32"),
        "var": rng.random(3).astype("float32") + 0.1,
    }
    # as paddle2onnx writes a frozen model: the statistics are Constant nodes
    nodes = [
        helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value))
        for name, value in stats_.items()
    ]
    nodes.append(
        helper.make_node("BatchNormalization", ["x", *stats_], ["y"], name="bn_0", epsilon=1e-5)
    )
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.random((2, 3, 4, 4)).astype("float32")
    expected = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert fold_batch_norms(model) == 1
    assert [n.op_type for n in model.graph.node] == ["Mul", "Add"]
    np.testing.assert_allclose(
        ReferenceEvaluator(model).run(None, {"x": x})[0], expected, rtol=1e-6, atol=1e-6
    )


def test_winograd_matrices_compute_a_correlation():
    from jit_backend_tvm.winograd import transform_matrices

    rng = np.random.default_rng(0)
    for m in (2, 4):
        a, b, g = transform_matrices(m)
        assert a.shape == (m + 2, m) and b.shape == (m + 2, m + 2) and g.shape == (m + 2, 3)
        d, w = rng.standard_normal(m + 2), rng.standard_normal(3)
        # m outputs of the 3-tap correlation from m + 2 products
        expected = np.correlate(d, w, mode="valid")
        np.testing.assert_allclose(a.T @ ((g @ w) * (b.T @ d)), expected, atol=1e-12)


def _relax_conv(size: int, padding, weight):
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, weight.shape[1], size, size), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            conv = relax.op.nn.conv2d(x, relax.const(weight), padding=padding)
            y = bb.emit_output(relax.op.nn.relu(conv))
        bb.emit_func_output(y)
    return bb.get()


def _direct_conv_relu(x, weight, padding):
    """float64 NumPy reference: NCHW data, OIHW weights, padding (top, left, bottom, right)."""
    top, left, bottom, right = padding
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    out_h, out_w = x.shape[2] - 2, x.shape[3] - 2
    out = np.zeros((x.shape[0], weight.shape[0], out_h, out_w))
    for i in range(3):
        for j in range(3):
            out += np.einsum(
                "nchw,oc->nohw", x[:, :, i : i + out_h, j : j + out_w], weight[:, :, i, j]
            )
    return np.maximum(out, 0)


@needs_tvm
@pytest.mark.parametrize(
    "size, padding",
    [
        (9, (1, 1, 1, 1)),  # 9x9 output: F(2x2, 3x3), the last tile half outside
        (20, (1, 1, 1, 1)),  # 20x20: F(4x4, 3x3)
        (12, (0, 1, 2, 1)),  # asymmetric padding as ONNX may have it
    ],
)
def test_winograd_convolutions_equal_the_direct_ones(size, padding):
    import tvm
    from jit_backend_tvm import schedules, tuning
    from jit_backend_tvm.target import make_target
    from tvm import relax, tirx

    rng = np.random.default_rng(1)
    weight = rng.standard_normal((24, 16, 3, 3)).astype("float32")
    x = rng.standard_normal((1, 16, size, size)).astype("float32")
    target = make_target()
    results = {}
    for winograd in (True, False):
        mod = tuning.prepare(_relax_conv(size, padding, weight), target, "NHWC", winograd)
        kernels = [gv.name_hint for gv, f in mod.functions_items() if isinstance(f, tirx.PrimFunc)]
        assert any("conv2d_winograd" in k for k in kernels) == winograd, kernels
        mod, _ = schedules.sample_unscheduled(mod, target)
        vm = relax.VirtualMachine(tvm.compile(mod, target), tvm.cpu())
        results[winograd] = vm["main"](tvm.runtime.tensor(x)).numpy()
    expected = _direct_conv_relu(x, weight, padding)
    # F(4x4, 3x3) rounds a few more times per product: about 1e-6 of the largest value
    scale = float(np.abs(expected).max())
    for out in results.values():
        assert out.shape == expected.shape
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5 * scale)


@needs_tvm
def test_layout_conversion_transposes_frozen_weights_with_numpy():
    from jit_backend_tvm import layouts

    weight = np.arange(4 * 3 * 3 * 3, dtype="float32").reshape(4, 3, 3, 3)
    converted = layouts.channels_last(_relax_conv(8, 1, weight))
    assert "R.permute_dims(metadata" in converted.script(show_meta=False)
    folded = layouts.fold_constant_permutes(converted)
    # no transpose of a constant is left for TVM to compile a kernel for
    assert "R.permute_dims(metadata" not in folded.script(show_meta=False)
    consts = [c for c in _constants(folded) if c.shape == (4, 3, 3, 3)]
    np.testing.assert_array_equal(consts[0], weight.transpose(0, 2, 3, 1))


def _constants(mod):
    import tvm
    from tvm import relax

    found = []

    def visit(expr):
        if isinstance(expr, tvm.ir.expr.Constant) and hasattr(expr.value, "numpy"):
            found.append(expr.value.numpy())

    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func.body, visit)
    return found


class WideConvNet(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv1 = paddle.nn.Conv2D(3, 16, 3, padding=1)
        self.conv2 = paddle.nn.Conv2D(16, 16, 3, padding=1)

    def forward(self, x):
        return self.conv2(paddle.nn.functional.relu(self.conv1(x))).mean([2, 3])


@needs_backend
def test_frozen_graphs_use_winograd_unless_told_not_to(caplog):
    paddle.seed(3)
    net = WideConvNet()
    net.eval()
    x = paddle.rand([1, 3, 10, 10])
    with paddle.no_grad():
        expected = net(x).numpy()
        for winograd in (True, False):
            caplog.clear()
            with caplog.at_level("INFO", logger="jit_core.tvm"):
                fast = jit_core.optimize(
                    net, backend="tvm", tune="off", freeze=True, winograd=winograd
                )
                out = fast(x).numpy()
            np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
            # conv1 has 3 input channels: too few for the transforms to pay; conv2 qualifies
            used = "1 of 2 convolutions computed by Winograd" in caplog.text
            assert used == winograd, caplog.text


def _relax_two_matmuls():
    """Two kernels alike: matmul + ReLU, and matmul + bias + ReLU."""
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((64, 128), "float32"))
    x2 = relax.Var("x2", relax.TensorType((64, 128), "float32"))
    w = relax.Var("w", relax.TensorType((128, 64), "float32"))
    b = relax.Var("b", relax.TensorType((64,), "float32"))
    with bb.function("main", [x, x2, w, b]):
        with bb.dataflow():
            plain = relax.op.nn.relu(relax.op.matmul(x, w))
            biased = relax.op.nn.relu(relax.op.add(relax.op.matmul(x2, w), b))
            y = bb.emit_output(relax.Tuple([plain, biased]))
        bb.emit_func_output(y)
    return bb.get()


@needs_tvm
def test_a_kernel_starts_from_the_schedules_of_kernels_alike():
    from jit_backend_tvm import tuning
    from jit_backend_tvm.target import make_target

    target = make_target()
    mod = tuning.prepare(_relax_two_matmuls(), target)
    names = sorted(t.task_name for t in tuning.extract_tasks(mod, target))
    assert len(names) == 2 and any("add" in n for n in names), names
    report = tuning.tune(mod, target, trials_per_task=2)
    assert sorted(report.tuned) == names
    # each kernel's best schedule was measured on the other as well: before the second
    # kernel's search, and for the first kernel once the second was tuned
    assert report.adopted == 2
    database = tuning.best_records(target)
    for task in tuning.extract_tasks(mod, target):
        assert tuning.has_record(database, task, target)


class MLP(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.body = paddle.nn.Sequential(
            paddle.nn.Linear(8, 16), paddle.nn.ReLU(), paddle.nn.Linear(16, 4)
        )

    def forward(self, x):
        return self.body(x)


def _mlp():
    paddle.seed(0)
    net = MLP()
    net.eval()
    return net


@needs_backend
def test_a_dynamic_batch_builds_once_with_symbolic_sizes(monkeypatch):
    from jit_backend_tvm import stats

    monkeypatch.setenv("JIT_TVM_TUNE", "off")
    net = _mlp()
    # True: the matmuls MetaSchedule cannot schedule over a symbolic batch stay loop nests
    fast = jit_core.optimize(net, backend="tvm", symbolic=True)
    builds, symbolic = stats["builds"], stats["symbolic_builds"]
    with paddle.no_grad():
        for b in range(2, 10):
            x = paddle.randn([b, 8])
            np.testing.assert_allclose(fast(x).numpy(), net(x).numpy(), rtol=1e-5, atol=1e-6)
        # batch 2 is captured static (one build), batch 3 makes dimension 0 dynamic: one
        # symbolic build serves 3..9
        assert fast.jit_stats.captures == 2, fast.jit_stats
        assert stats["symbolic_builds"] == symbolic + 1
        assert stats["builds"] == builds + 2
        report = str(jit_core.explain(fast, paddle.randn([5, 8])))
    assert "one build per input shape" not in report


@needs_backend
def test_by_default_kernels_without_a_symbolic_schedule_are_built_per_shape(monkeypatch):
    # "auto": the MLP's matmuls get no sampled schedule over a symbolic batch, and their
    # loop nests would run many times slower (12.8x on a 256-1024-256 MLP): per shape
    from jit_backend_tvm import stats

    monkeypatch.setenv("JIT_TVM_TUNE", "off")
    net = _mlp()
    fast = jit_core.optimize(net, backend="tvm")
    failures, symbolic = stats["symbolic_failures"], stats["symbolic_builds"]
    with paddle.no_grad():
        for b in (2, 3, 4):
            x = paddle.randn([b, 8])
            np.testing.assert_allclose(fast(x).numpy(), net(x).numpy(), rtol=1e-5, atol=1e-6)
        assert fast.jit_stats.captures == 2, fast.jit_stats
        assert stats["symbolic_failures"] == failures + 1
        assert stats["symbolic_builds"] == symbolic
        report = str(jit_core.explain(fast, paddle.randn([5, 8])))
    assert "one build per input shape" in report
    assert "TVM has no schedule over symbolic sizes for the kernels " in report
    assert "fused_matmul" in report.split("for the kernels ")[1].split(":")[0]


@needs_backend
def test_the_next_process_builds_per_shape_without_trying_symbolic_sizes_again(monkeypatch, caplog):
    # the compile cache keeps the verdict of a symbolic build that would fail again: a new
    # optimize() (all a new process has is the compile cache) builds nothing symbolic,
    # and its per-shape libraries come from the cache
    from jit_backend_tvm import backend, stats

    monkeypatch.setenv("JIT_TVM_TUNE", "off")
    built = []
    build = backend._build

    def recording(gm, example_inputs, live, opset, spec, *args, **kwargs):
        built.append("symbolic" if spec.symbolic else "static")
        return build(gm, example_inputs, live, opset, spec, *args, **kwargs)

    monkeypatch.setattr(backend, "_build", recording)
    caplog.set_level(logging.INFO, logger="jit_core.recompiles")
    net = _mlp()
    with paddle.no_grad():
        for process in ("first", "next"):
            built.clear()
            failures = stats["symbolic_failures"]
            fast = jit_core.optimize(net, backend="tvm")
            for b in (2, 3, 4):
                x = paddle.randn([b, 8])
                np.testing.assert_allclose(fast(x).numpy(), net(x).numpy(), rtol=1e-5, atol=1e-6)
            assert stats["symbolic_failures"] == failures + 1
            if process == "first":
                assert built == ["static", "symbolic", "static", "static"]
            else:
                assert built == []
    (said,) = [r.getMessage() for r in caplog.records if "the verdict of an earlier" in r.message]
    assert "one build per input shape: TVM has no schedule over symbolic sizes" in said
    assert "(the verdict of an earlier process, kept in the compile cache" in said


@needs_backend
def test_a_build_with_loop_nests_in_the_cache_is_not_served_by_default(monkeypatch):
    # symbolic=True keeps loop nests that "auto" refuses: the cache keys differ
    from jit_backend_tvm import stats

    monkeypatch.setenv("JIT_TVM_TUNE", "off")
    net = _mlp()
    with paddle.no_grad():
        for symbolic in (True, "auto"):
            fast = jit_core.optimize(net, backend="tvm", symbolic=symbolic)
            hits, failures = stats["cache_hits"], stats["symbolic_failures"]
            for b in (2, 3):
                fast(paddle.randn([b, 8]))
            if symbolic == "auto":
                # batch 2 from the cache (a static build), batch 3 tried symbolically
                assert stats["cache_hits"] == hits + 1
                assert stats["symbolic_failures"] == failures + 1


@needs_backend
def test_a_failing_symbolic_build_falls_back_to_one_build_per_shape(monkeypatch):
    from jit_backend_tvm import library, stats

    monkeypatch.setenv("JIT_TVM_TUNE", "off")
    to_relax = library._to_relax

    def refuses_symbolic(model, shapes, dtypes, dynamic):
        if dynamic:
            raise library.TvmCompileError("no symbolic sizes here (test)")
        return to_relax(model, shapes, dtypes, dynamic)

    # the patch holds in this process: the build runs here (isolate=False)
    monkeypatch.setattr(library, "_to_relax", refuses_symbolic)
    net = _mlp()
    x = paddle.randn([3, 8])
    jit_core.mark_dynamic(x, 0)
    fast = jit_core.optimize(net, backend="tvm", isolate=False)
    failures, builds = stats["symbolic_failures"], stats["builds"]
    with paddle.no_grad():
        np.testing.assert_allclose(fast(x).numpy(), net(x).numpy(), rtol=1e-5, atol=1e-6)
        for b in (4, 5):
            y = paddle.randn([b, 8])
            np.testing.assert_allclose(fast(y).numpy(), net(y).numpy(), rtol=1e-5, atol=1e-6)
        assert fast.jit_stats.captures == 1, fast.jit_stats
        assert stats["symbolic_failures"] == failures + 1
        assert stats["builds"] == builds + 3  # one per shape
        z = paddle.randn([6, 8])
        jit_core.mark_dynamic(z, 0)
        report = str(jit_core.explain(fast, z))
    assert "one build per input shape" in report
    assert "symbolic TVM build failed (import into Relax)" in report
    assert "no symbolic sizes here (test)" in report


@needs_tvm
def test_identities_are_dropped_for_the_symbolic_importer():
    from jit_backend_tvm.library import drop_identities
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Identity", ["s"], ["s2"]),
        helper.make_node("Reshape", ["x", "s2"], ["y"]),
        helper.make_node("Identity", ["y"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert drop_identities(model) == 1
    assert [n.op_type for n in model.graph.node] == ["Shape", "Reshape", "Identity"]
    assert list(model.graph.node[1].input) == ["x", "s"]


#: a build worker whose TVM dies of SIGFPE compiling, as LLVM or ONNX's shape inference can
CRASHING_WORKER = """
import os, runpy, signal, sys
import tvm
def crash(*args, **kwargs):
    sys.stderr.write("LLVM ERROR: a crash of the test's making\\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGFPE)
tvm.compile = crash
sys.argv = ["jit_core.workers", sys.argv[1]]
runpy.run_module("jit_core.workers", run_name="__main__")
"""


@needs_backend
def test_tvm_dying_on_a_graph_costs_the_graph_not_the_program(monkeypatch):
    from jit_backend_tvm import build_worker, stats

    from jit_core.workers import Worker

    crashing = Worker([sys.executable, "-c", CRASHING_WORKER, build_worker.WORKER.argv[-1]], "test")
    monkeypatch.setattr(build_worker, "WORKER", crashing)
    x, w = paddle.rand([4, 8]), paddle.rand([8, 4])
    try:
        with paddle.no_grad():
            with pytest.raises(BackendCompileError) as error:
                jit_core.optimize(_matmul, backend="tvm", tune="off", cache=False)(x, w)
            message = str(error.value)
            assert "TVM's build worker ended during tvm.compile: it died of SIGFPE" in message
            assert "a crash of the test's making" in message
            # with fallback the graph runs on paddle, and the program goes on
            fallbacks = stats["fallbacks"]
            fast = jit_core.optimize(_matmul, backend="tvm", tune="off", cache=False, fallback=True)
            with pytest.warns(RuntimeWarning, match="SIGFPE.*runs on the paddle backend"):
                out = fast(x, w)
            np.testing.assert_allclose(out.numpy(), _matmul(x, w).numpy(), rtol=1e-6)
            assert stats["fallbacks"] == fallbacks + 1
    finally:
        crashing.close()
    # the real worker builds the same graph
    monkeypatch.undo()
    with paddle.no_grad():
        fast = jit_core.optimize(_matmul, backend="tvm", tune="off", cache=False)
        np.testing.assert_allclose(fast(x, w).numpy(), _matmul(x, w).numpy(), rtol=1e-5)


@needs_backend
def test_a_build_in_this_process_gives_the_same_library(monkeypatch):
    from jit_backend_tvm import build_worker, stats

    def no_worker(*args):
        raise AssertionError("isolate=False must not use the build worker")

    monkeypatch.setattr(build_worker, "build", no_worker)
    x, w = paddle.rand([4, 8]), paddle.rand([8, 4])
    builds = stats["builds"]
    with paddle.no_grad():
        fast = jit_core.optimize(_matmul, backend="tvm", tune="off", cache=False, isolate=False)
        np.testing.assert_allclose(fast(x, w).numpy(), _matmul(x, w).numpy(), rtol=1e-5)
    assert stats["builds"] == builds + 1
    with pytest.raises(BackendCompileError, match="isolate must be True or False"):
        jit_core.optimize(_matmul, backend="tvm", isolate="yes")(x, w)


@needs_backend
def test_a_library_that_computes_wrongly_is_built_again_with_loop_nests(monkeypatch, caplog):
    # TVM 0.27 vectorizes a flip read through a reshape wrongly (half the values wrong,
    # the rest read out of bounds); its loop nest computes it right
    from jit_backend_tvm import backend, schedules

    def flip_through_reshape(x):
        return x.reshape([-1]).flip(0).reshape(x.shape) * 2

    x = paddle.rand([4, 4, 4])
    plans = []
    real = backend._build

    def build(gm, inputs, live, opset, spec, *args):
        plans.append(spec.plain)
        return real(gm, inputs, live, opset, spec, *args)

    monkeypatch.setattr(backend, "_build", build)
    before = dict(backend.stats)
    with paddle.no_grad():
        fast = jit_core.optimize(flip_through_reshape, backend="tvm", tune="off", dynamic=False)
        np.testing.assert_array_equal(fast(x).numpy(), flip_through_reshape(x).numpy())
    assert plans[0] == ""
    if len(plans) > 1:  # the sampled schedule computed wrongly: the rebuild computes right
        assert plans == ["", "backward"]
        assert backend.stats["plain_rebuilds"] == before["plain_rebuilds"] + 1
        assert "built again with the backward-reading kernels as loop nests" in caplog.text

    # whatever TVM's version, a rebuild that still computes wrongly tries every kernel as
    # its loop nest, then raises the first build's error
    checks = []

    def wrong(compiled, gm, inputs):
        checks.append(1)
        raise backend.WrongResults(f"output 0 differs (build {len(checks)})")

    monkeypatch.setattr(backend, "_check", wrong)
    plans.clear()
    with paddle.no_grad(), pytest.raises(BackendCompileError, match=r"differs \(build 1\)"):
        jit_core.optimize(lambda a: a.flip(0) + 1, backend="tvm", tune="off")(x)
    assert plans == ["", "backward", "all"]
    # the kernel that reads backwards is the one the first rebuild keeps as its loop nest
    kernel = "\n".join(
        f"T.reads(src[T.int64({n}) - v_ax0])" if n else "T.reads(src[v_ax0])" for n in (0, 7)
    )
    assert schedules._BACKWARD_READ.search(kernel)
    assert not schedules._BACKWARD_READ.search("T.reads(src[v_ax0 - T.int64(1)])")
