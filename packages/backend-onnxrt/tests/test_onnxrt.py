"""The onnxrt backend: what runs on ONNX Runtime, what does not and why, its options, its
errors, and its use of the on-disk compile cache."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import weakref

import jit_backend_onnxrt
import numpy as np
import paddle
import pytest
from jit_backend_onnxrt import first_load, plugin
from jit_backend_onnxrt.backend import OrtGraph, stats

import jit_core
from jit_core.cache import disk as compile_cache
from jit_core.cache.disk import ENV_VAR
from jit_core.errors import BackendCompileError, BackendUnavailableError, MissingDependencyError
from jit_core.kit.onnx.export import EXPORTER_ENV

#: why the backend cannot run here (onnx missing); what needs no
#: export (registration, the reasons, ONNX Runtime's own side) is tested everywhere
WHY_NOT = plugin.unavailable_reason()
needs_export = pytest.mark.skipif(
    bool(WHY_NOT), reason=f"the onnxrt backend cannot run here: {WHY_NOT}"
)
NO_PADDLE2ONNX = jit_core.kit.onnx.paddle2onnx_missing()
#: the tests of the paddle2onnx path, and of graphs that only it exports (paddle2onnx is
#: not installable on 3.13: such graphs run on the paddle backend there)
needs_paddle2onnx = pytest.mark.skipif(
    bool(NO_PADDLE2ONNX), reason=f"tests the paddle2onnx path: {NO_PADDLE2ONNX}"
)


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "cache"))
    return tmp_path / "cache"


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=tol, atol=tol)


def compiled_of(fast):
    """The callables the backend returned, one per cache entry."""
    return [e.built for c in fast._ctx.cache.values() for e in c.entries]


class Net(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(8, 16)
        self.bn = paddle.nn.BatchNorm1D(16)
        self.out = paddle.nn.Linear(16, 4)

    def forward(self, x):
        return self.out(paddle.nn.functional.relu(self.bn(self.fc(x))))


def make_net():
    paddle.seed(5)
    net = Net()
    net.eval()
    return net


def test_registered_as_a_plugin_with_its_version():
    assert ("onnxrt", "jit-backend-onnxrt", jit_backend_onnxrt.__version__) in (
        jit_core.list_plugins()
    )
    assert jit_core.backends()["onnxrt"].inference_only
    assert jit_core.backends()["onnxrt"].unavailable == WHY_NOT


def test_unavailable_says_why_and_falls_back_on_request(monkeypatch, paddle2onnx_at):
    from jit_core import plugins

    # the one way the backend is unavailable where onnx is installed: paddle2onnx asked
    # for and missing
    paddle2onnx_at(None)
    monkeypatch.setenv(EXPORTER_ENV, "paddle2onnx")
    monkeypatch.setattr(plugins, "_backends", None)  # registered again, then put back
    why = plugin.unavailable_reason()
    assert "paddle2onnx is not installed" in why or "no wheels" in why
    with pytest.raises(BackendUnavailableError, match="paddle2onnx") as e:
        jit_core.optimize(make_net(), backend="onnxrt")
    assert why in str(e.value)
    net = make_net()
    with pytest.warns(RuntimeWarning, match="paddle2onnx"), paddle.no_grad():
        x = paddle.rand([3, 8])
        close(jit_core.optimize(net, backend="onnxrt", fallback=True)(x), net(x))


def test_the_backend_needs_no_paddle2onnx_unless_asked_for(paddle2onnx_at, monkeypatch):
    from jit_core.kit.onnx.export import EXPORTER_ENV

    paddle2onnx_at(None)
    assert plugin.unavailable_reason((3, 13)) == plugin.unavailable_reason((3, 12)) == ""
    # JIT_CORE_ONNX_EXPORTER=paddle2onnx asks for it: its absence is then the reason
    monkeypatch.setenv(EXPORTER_ENV, "paddle2onnx")
    assert plugin.unavailable_reason((3, 13)) == (
        "JIT_CORE_ONNX_EXPORTER=paddle2onnx asks for paddle2onnx, and paddle2onnx 2.x has "
        "no wheels for Python 3.13 (its wheels cover Python 3.8 to 3.12)"
    )
    assert plugin.unavailable_reason((3, 12)) == (
        "JIT_CORE_ONNX_EXPORTER=paddle2onnx asks for paddle2onnx, and paddle2onnx is not "
        "installed: pip install 'jit-core[onnx]' (paddle2onnx and onnx)"
    )
    # 0.9.2, the only wheel 3.13 has, cannot read Paddle 3's programs; a 2.x serves anywhere
    paddle2onnx_at("0.9.2")
    assert "the installed paddle2onnx 0.9.2 cannot read Paddle 3's programs" in (
        plugin.unavailable_reason((3, 13))
    )
    assert "pip install 'paddle2onnx==2.1.0'" in plugin.unavailable_reason((3, 12))
    paddle2onnx_at("2.1.0")
    assert plugin.unavailable_reason((3, 13)) == plugin.unavailable_reason((3, 12)) == ""


@needs_export
def test_without_paddle2onnx_a_graph_no_lowering_serves_runs_on_paddle(monkeypatch, paddle2onnx_at):
    paddle2onnx_at(None)
    x = paddle.rand([3, 8])

    def f(t):
        return paddle.cumprod(t, dim=1) * 2

    fast = jit_core.optimize(f, backend="onnxrt")
    with paddle.no_grad():
        close(fast(x), f(x))
        (graph,) = jit_core.explain(fast, x).graphs
    assert graph.backend.startswith(
        "paddle (runs on the paddle backend: backend 'onnxrt' does not serve it: "
        "no ONNX lowering for"
    )
    assert "cumprod" in graph.backend and "paddle2onnx" in graph.backend
    # the export itself, asked directly, names the operation and the package missing
    gm = jit_core.capture(f, x)
    with pytest.raises(jit_core.errors.GraphDeclined, match="cumprod.*paddle2onnx"):
        jit_core.kit.onnx.export_onnx(gm, [x])
    # what the lowerings serve needs no paddle2onnx, and runs on onnxrt
    net = make_net()
    gm = jit_core.capture(net, x)
    assert jit_core.kit.onnx.export_onnx(gm, [x]).graph.node
    fast = jit_core.optimize(net, backend="onnxrt")
    with paddle.no_grad():
        close(fast(x), net(x), 1e-4)
        assert jit_core.explain(fast, x).graphs[0].backend == "onnxrt"


@needs_export
def test_graph_runs_on_onnx_runtime_and_equals_eager():
    net = make_net()
    fast = jit_core.optimize(net, backend="onnxrt")
    x = paddle.randn([4, 8])
    with paddle.no_grad():
        close(fast(x), net(x), 1e-4)
        close(fast(x), net(x), 1e-4)
    (compiled,) = compiled_of(fast)
    assert isinstance(compiled, OrtGraph)
    assert fast.jit_stats.captures == 1
    with paddle.no_grad():
        assert jit_core.explain(fast, x).graphs[0].backend == "onnxrt"


@needs_export
def test_parameters_stay_live_unless_frozen():
    net = make_net()
    x = paddle.randn([4, 8])
    fast = jit_core.optimize(net, backend="onnxrt")
    with paddle.no_grad():
        before = fast(x)
        net.set_state_dict({k: v * 0.5 for k, v in net.state_dict().items()})
        after = fast(x)
        close(after, net(x), 1e-4)
    assert not np.allclose(before.numpy(), after.numpy())
    assert fast.jit_stats.captures == 1, "new weights need no new model"

    frozen = jit_core.optimize(net, backend="onnxrt", freeze=True)
    with paddle.no_grad():
        close(frozen(x), net(x), 1e-4)
        (compiled,) = compiled_of(frozen)
        # the parameters are constants of the model: its only input is x
        assert [i.name for i in compiled.session.get_inputs()] == ["x"]
        net.set_state_dict({k: v * 2 for k, v in net.state_dict().items()})
        frozen.reset()  # the documented way to take new weights into a frozen model
        close(frozen(x), net(x), 1e-4)


@needs_export
def test_gradients_or_training_mode_run_on_the_paddle_backend():
    net = make_net()
    fast = jit_core.optimize(net, backend="onnxrt")
    x = paddle.randn([4, 8])
    with pytest.warns(RuntimeWarning, match="runs on the paddle backend: gradients are on"):
        out = fast(x)
    out.sum().backward()
    assert net.fc.weight.grad is not None
    with pytest.warns(RuntimeWarning, match="gradients are on"):  # explain: a new context
        report = jit_core.explain(fast, x)
    assert "Backend: paddle (runs on the paddle backend: gradients are on and parameter" in str(
        report
    )
    with paddle.no_grad():
        report = jit_core.explain(fast, x)
        assert report.graphs[0].backend == "onnxrt"
        net.train()  # BatchNorm statistics must move: only Paddle can do that
        with pytest.warns(RuntimeWarning, match="is in training mode"):
            report = jit_core.explain(fast, x)
        assert report.graphs[0].backend.startswith("paddle (runs on the paddle backend: layer")
        assert "is in training mode" in report.graphs[0].backend


@needs_paddle2onnx
def test_an_operator_paddle2onnx_lacks_is_named_and_can_fall_back():
    def f(x):
        return paddle.linalg.eigh(x)[0] + 1

    x = paddle.rand([4, 4])
    x = x + x.T
    with paddle.no_grad():
        with pytest.raises(BackendCompileError, match="cannot convert the operator eigh") as e:
            jit_core.optimize(f, backend="onnxrt")(x)
        assert "fallback=True) runs such graphs on the paddle backend" in str(e.value)
        # and why the direct exporter, tried first, did not take it
        assert "the direct exporter, first: no ONNX lowering for" in str(e.value)
        fast = jit_core.optimize(f, backend="onnxrt", fallback=True)
        with pytest.warns(RuntimeWarning, match="eigh.*runs on the paddle backend"):
            out = fast(x)
        close(out, f(x))
        # the worker that paddle2onnx took down is started again for the next export
        close(jit_core.optimize(lambda t: t * 3, backend="onnxrt")(x), x * 3)


@needs_paddle2onnx
def test_a_wrong_conversion_is_refused_and_never_cached(monkeypatch, cache_dir):
    # without its workaround, paddle2onnx 2.1 exports x + 1 as x: validation must see it
    from jit_core.kit.onnx import prepare

    monkeypatch.setenv(EXPORTER_ENV, "paddle2onnx")
    monkeypatch.setattr(prepare, "_scalar_add_sub", lambda graph: 0)

    def f(x):
        return x + 1

    with paddle.no_grad():
        with pytest.raises(BackendCompileError, match="differs from Paddle's result"):
            jit_core.optimize(f, backend="onnxrt")(paddle.rand([3]))
    assert not (cache_dir / "onnxrt").exists()


class WrongMultiply:
    """A plugin whose lowering of ``x * y`` writes an addition."""

    @jit_core.hookimpl
    def jit_register_onnx_lowerings(self, register):
        import operator

        def lower(ex, a):
            return ex.op(
                "Add", [ex.input(a["x"], ex.out_dtype()), ex.input(a["y"], ex.out_dtype())]
            )

        register(operator.mul, lower)


@needs_export
def test_a_wrong_lowering_is_refused_and_never_cached(install_plugin, cache_dir):
    install_plugin(WrongMultiply(), "wrong-multiply")
    with paddle.no_grad():
        with pytest.raises(BackendCompileError, match="differs from Paddle's result"):
            jit_core.optimize(lambda x: x * 3, backend="onnxrt")(paddle.rand([3]))
    assert not (cache_dir / "onnxrt").exists()


@needs_export
def test_outputs_keep_paddle_dtypes_and_shapes():
    def f(x):
        return x.argmax(axis=1), x > 0.5, x.sum(), x.astype("float64") * 2

    x = paddle.rand([3, 5])
    with paddle.no_grad():
        out = jit_core.optimize(f, backend="onnxrt")(x)
        expected = f(x)
    for a, e in zip(out, expected):
        assert a.dtype == e.dtype and list(a.shape) == list(e.shape)
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-6)


@needs_export
def test_outputs_bound_for_onnx_runtime_keep_dtypes_and_are_fresh_tensors():
    def f(x):
        return x.argmax(axis=1), x > 0.5, x.sum(), x.astype("float64") * 2

    fast = jit_core.optimize(f, backend="onnxrt")
    xs = [paddle.rand([3, 5]) for _ in range(4)]
    with paddle.no_grad():
        # the first call at a shape runs plainly; the others write into bound outputs
        outs = [fast(x) for x in xs]
        expected = [f(x) for x in xs]
    (compiled,) = compiled_of(fast)
    assert list(compiled._layouts) == [()], "one layout: every input shape is fixed"
    assert compiled._layouts[()] is not None, "every output was bound"
    # read only now: a later call must not have written into an earlier result
    for out, exp in zip(outs, expected):
        for a, e in zip(out, exp):
            assert a.dtype == e.dtype and list(a.shape) == list(e.shape)
            np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-6)


@needs_export
def test_bound_outputs_follow_dynamic_sizes():
    net = make_net()
    fast = jit_core.optimize(net, backend="onnxrt")
    with paddle.no_grad():
        for batch in (2, 3, 5, 2, 5, 3, 7, 7):
            x = paddle.randn([batch, 8])
            close(fast(x), net(x), 1e-4)
    assert fast.jit_stats.captures == 2
    compiled = compiled_of(fast)[-1]
    # (and the sizes the compile checked the model at)
    assert {((b, 8),) for b in (3, 5, 7)} <= set(compiled._layouts)
    assert all(layout is not None for layout in compiled._layouts.values())


@needs_export
@pytest.mark.parametrize("cached", [False, True], ids=["exported", "from the cache"])
def test_a_size_called_often_gets_a_session_of_fixed_shapes(cached):
    from jit_backend_onnxrt.backend import SPECIALIZE_AFTER

    net = make_net()
    if cached:  # the cache holds the model ONNX Runtime optimized with dynamic dimensions
        with paddle.no_grad():
            warm = jit_core.optimize(net, backend="onnxrt")
            for batch in (2, 3):
                warm(paddle.randn([batch, 8]))
    fast = jit_core.optimize(net, backend="onnxrt", specialize=2)
    with paddle.no_grad():
        for batch in (2, 3) + (5,) * SPECIALIZE_AFTER + (4, 4, 4, 6, 6, 6, 5, 7):
            x = paddle.randn([batch, 8])
            close(fast(x), net(x), 1e-4)
    assert fast.jit_stats.captures == 2
    compiled = compiled_of(fast)[-1]
    special = compiled.specializer
    # 2 and 3 were called once (the compile's own checks do not count); 5 and 4 got a
    # session; 6 came past the limit of 2
    assert sorted(special.graphs) == [((4, 8),), ((5, 8),)]
    fixed = special.graphs[((5, 8),)]
    assert [i.shape for i in fixed.session.get_inputs()][0] == [5, 8]
    assert fixed.session is not compiled.session
    assert "an input shape called 3 times in 8 calls also gets a session of fixed" in (
        compiled.describe()
    )


@needs_export
def test_sizes_that_each_come_back_rarely_keep_the_dynamic_session():
    """A decode loop's KV cache grows by one per step: each length comes back once per
    generated sequence. A session per length would be built, and used a few times."""
    net = make_net()
    fast = jit_core.optimize(net, backend="onnxrt", specialize=4)
    with paddle.no_grad():
        for _ in range(4):  # four "sequences" of twelve lengths
            for batch in range(2, 14):
                x = paddle.randn([batch, 8])
                close(fast(x), net(x), 1e-4)
    assert compiled_of(fast)[-1].specializer.graphs == {}


@needs_export
def test_a_session_of_fixed_shapes_that_disagrees_is_not_used(monkeypatch, caplog):
    from jit_backend_onnxrt import backend

    net = make_net()
    fast = jit_core.optimize(net, backend="onnxrt")
    # a fixed build that computes something else: the dynamic session keeps the shape
    real = backend._with_fixed_dims

    def wrong(model, shapes):
        import onnx

        proto = onnx.load_from_string(real(model, shapes))
        name = proto.graph.output[0].name
        for node in proto.graph.node:
            node.output[:] = ["before_neg" if o == name else o for o in node.output]
        proto.graph.node.append(onnx.helper.make_node("Neg", ["before_neg"], [name]))
        return proto.SerializeToString()

    monkeypatch.setattr(backend, "_with_fixed_dims", wrong)
    caplog.set_level("INFO", logger="jit_core.onnxrt")
    with paddle.no_grad():
        for batch in (2, 3) + (5,) * 6:
            x = paddle.randn([batch, 8])
            close(fast(x), net(x), 1e-4)
    special = compiled_of(fast)[-1].specializer
    assert special.graphs == {((5, 8),): None}
    assert "((5, 8),) keep the dynamic session: output 0 differs by up to" in caplog.text


@needs_export
def test_specialize_zero_keeps_one_session():
    net = make_net()
    fast = jit_core.optimize(net, backend="onnxrt", specialize=0)
    with paddle.no_grad():
        for batch in (2, 3) + (5,) * 5:
            x = paddle.randn([batch, 8])
            close(fast(x), net(x), 1e-4)
    assert compiled_of(fast)[-1].specializer is None


@needs_paddle2onnx
def test_an_output_whose_shape_depends_on_the_data_stops_the_binding():
    def f(x):
        return paddle.masked_select(x, x > 0) * 2

    fast = jit_core.optimize(f, backend="onnxrt")
    with paddle.no_grad():
        for x in (
            paddle.to_tensor([[1.0, -1.0], [2.0, 3.0]]),
            paddle.to_tensor([[1.0, -1.0], [-2.0, 3.0]]),
            paddle.to_tensor([[1.0, 1.0], [2.0, 3.0]]),
        ):
            out = fast(x)
            np.testing.assert_allclose(out.numpy(), f(x).numpy())
    (compiled,) = compiled_of(fast)
    assert compiled._layouts is None, "ONNX Runtime refused the buffer of the second call"


@needs_paddle2onnx
def test_an_output_that_is_an_input_of_the_model_is_a_copy_and_never_bound(monkeypatch):
    # x * 1 exports as a model whose output is its input. ONNX Runtime 1.32 ignores a
    # buffer bound for it (the second call returned garbage), and 1.19 hands back the
    # fed array itself, whose memory died with the feed (garbage on the first call)
    # (paddle2onnx writes x * 1 as x; the direct exporter writes the Mul)
    monkeypatch.setenv(EXPORTER_ENV, "paddle2onnx")
    fast = jit_core.optimize(lambda x: x * 1, backend="onnxrt")
    with paddle.no_grad():
        for _ in range(3):
            x = paddle.rand([2])
            y = fast(x)
            expected = x.numpy().copy()
            x.add_(paddle.ones([2]))  # the result does not share the input's memory
            np.testing.assert_array_equal(y.numpy(), expected)
    (compiled,) = compiled_of(fast)
    assert [o.name for o in compiled.session.get_outputs()] == ["x"]
    assert compiled._layouts is None


@needs_export
def test_a_bound_call_does_not_keep_its_inputs():
    # each thread's binding keeps the parameters bound between calls, but not the
    # arrays of the inputs (a large input's is a view of the caller's tensor)
    net = paddle.nn.Linear(200, 3)
    fast = jit_core.optimize(net, backend="onnxrt")
    with paddle.no_grad():
        x = paddle.randn([100, 200])
        fast(x)
        (compiled,) = compiled_of(fast)
        fed = []

        def kept(read):
            def reader(t):
                a = read(t)
                fed.append(weakref.ref(a))
                return a

            return reader

        compiled._feeds = [(n, i, kept(read)) for n, i, read in compiled._feeds]
        for _ in range(3):
            x = paddle.randn([100, 200])
            close(fast(x), net(x), 1e-4)
        gc.collect()
    assert compiled._layouts and compiled._honoured, "the calls were bound"
    assert len(fed) == 3 and all(ref() is None for ref in fed)


@needs_export
def test_parameters_changed_in_place_or_given_new_memory_are_read_at_each_call():
    net = make_net()
    fast = jit_core.optimize(net, backend="onnxrt")
    x = paddle.randn([4, 8])
    with paddle.no_grad():
        close(fast(x), net(x), 1e-4)
        net.fc.weight.set_value(np.full([8, 16], 0.1, "float32"))  # the same memory
        close(fast(x), net(x), 1e-4)
        paddle.assign(net.out.weight * 3, output=net.out.weight)
        close(fast(x), net(x), 1e-4)
        net.fc.bias.add_(paddle.ones([16]))
        close(fast(x), net(x), 1e-4)
        moved = net.out.bias.data_ptr()
        (paddle.ones([4]) * 5)._share_buffer_to(net.out.bias)  # new memory
        assert net.out.bias.data_ptr() != moved
        close(fast(x), net(x), 1e-4)
    sgd = paddle.optimizer.SGD(0.5, parameters=net.parameters())
    net(x).sum().backward()
    sgd.step()
    with paddle.no_grad():
        close(fast(x), net(x), 1e-4)
    assert fast.jit_stats.captures == 1


@needs_export
def test_an_update_in_place_that_reaches_no_output_is_not_exported():
    # found by the fuzzer: t3 is updated in place and never returned, so k reached no
    # output of the exported program, and paddle.jit.save refused it ("feed_var ... is
    # not involved in the target_vars calculation")
    def f(x, k):
        s1 = x.mean()
        t3 = x * paddle.cast(k, x.dtype)
        t3.scale_(1.5)
        return x, s1

    x, k = paddle.rand([4, 2, 1]), paddle.to_tensor(3)
    with paddle.no_grad():
        fast = jit_core.optimize(f, backend="onnxrt")
        for a, e in zip(fast(x, k), f(x, k)):
            close(a, e)
    (compiled,) = compiled_of(fast)
    assert isinstance(compiled, OrtGraph), "ran on ONNX Runtime, not on a fallback"


@needs_export
def test_options_are_checked_with_clear_errors():
    x = paddle.rand([2])
    with paddle.no_grad():
        with pytest.raises(BackendCompileError, match="graph_optimization_level must be one of"):
            jit_core.optimize(lambda t: t * 2, backend="onnxrt", graph_optimization_level="max")(x)
        with pytest.raises(BackendCompileError, match="has no provider NoSuchProvider"):
            jit_core.optimize(lambda t: t * 2, backend="onnxrt", providers=["NoSuchProvider"])(x)
        fast = jit_core.optimize(
            lambda t: t * 2,
            backend="onnxrt",
            intra_op_num_threads=1,
            graph_optimization_level="basic",
        )
        close(fast(x), x * 2)


@needs_export
def test_a_missing_runtime_names_the_package(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name)
    )
    with paddle.no_grad():
        with pytest.raises(BackendCompileError, match="pip install jit-backend-onnxrt") as info:
            jit_core.optimize(lambda t: t * 2, backend="onnxrt")(paddle.rand([2]))
    assert isinstance(info.value.__cause__, MissingDependencyError)


# ------------------------------------------------------------------ the compile cache

SCRIPT = textwrap.dedent(
    """
    import json, warnings
    warnings.filterwarnings("ignore")
    import paddle, jit_core
    from jit_backend_onnxrt.backend import stats
    paddle.seed(1)
    net = paddle.nn.Sequential(paddle.nn.Linear(6, 6), paddle.nn.Tanh())
    net.eval()
    with paddle.no_grad():
        y = jit_core.optimize(net, backend="onnxrt")(paddle.ones([2, 6]))
    print(json.dumps({"stats": stats, "y": y.numpy().tolist()}))
    """
)


def run_script(cache: str) -> dict:
    env = dict(os.environ, **{ENV_VAR: cache, "GLOG_minloglevel": "2"})
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@needs_export
def test_a_second_process_takes_the_model_from_the_cache(tmp_path):
    cache = str(tmp_path / "shared")
    first = run_script(cache)
    second = run_script(cache)
    assert first["stats"] == {"exports": 1, "cache_hits": 0, "fallbacks": 0, "checks_failed": 0}
    assert second["stats"] == {"exports": 0, "cache_hits": 1, "fallbacks": 0, "checks_failed": 0}
    assert first["y"] == second["y"]
    assert os.listdir(os.path.join(cache, "onnxrt"))


@needs_export
def test_a_corrupt_entry_is_rebuilt_with_a_warning(cache_dir):
    net = make_net()
    x = paddle.randn([4, 8])
    with paddle.no_grad():
        expected = net(x)
        jit_core.optimize(net, backend="onnxrt")(x)
        compile_cache.wait_for_writes()  # (written in the background)
        (entry,) = [
            os.path.join(d, f) for d, _, files in os.walk(cache_dir / "onnxrt") for f in files
        ]
        with open(entry, "r+b") as f:
            f.truncate(os.path.getsize(entry) // 2)
        exports = stats["exports"]
        with pytest.warns(RuntimeWarning, match="corrupt or truncated; it is rebuilt"):
            out = jit_core.optimize(net, backend="onnxrt")(x)
    close(out, expected, 1e-4)
    assert stats["exports"] == exports + 1
    compile_cache.wait_for_writes()
    assert os.path.getsize(entry) > 0


@needs_export
def test_a_forged_model_in_a_keyless_remote_cache_is_not_used(redis_server, monkeypatch, cache_dir):
    """Anyone who can write to a shared store can replace a model and fix its checksum;
    without a signing key it must not decide what the graph computes, nor reach the disk."""
    import hashlib
    import shutil
    import time

    from jit_core.cache import disk as compile_cache
    from jit_core.cache import redis_store
    from jit_core.cache import remote as remote_cache
    from jit_core.cache.remote import KEY_ENV, TRUST_ENV, set_remote_cache

    def f(t):
        return paddle.tanh(t) * 2

    def g(t):
        return paddle.tanh(t) * 3

    def wipe():
        compile_cache.wait_for_writes()
        shutil.rmtree(cache_dir, ignore_errors=True)

    x = paddle.linspace(-1, 1, 6).reshape([2, 3])
    db = redis_server.client()
    pattern = redis_store.PREFIX + "onnxrt/*"
    monkeypatch.delenv(TRUST_ENV, raising=False)
    monkeypatch.setenv(KEY_ENV, "team key")
    try:
        set_remote_cache(redis_server.url)
        with paddle.no_grad():
            jit_core.optimize(f, backend="onnxrt")(x)
            compile_cache.wait_for_writes()  # (written in the background)
            (name_f,) = db.keys(pattern)
            jit_core.optimize(g, backend="onnxrt")(x)
            compile_cache.wait_for_writes()
        (name_g,) = set(db.keys(pattern)) - {name_f}
        forged = b"".join(db.lrange(name_g, 1, -1))  # g's model under f's name
        digest = hashlib.sha256(forged).hexdigest()
        head = remote_cache.Head(len(forged), digest, time.time(), False)
        db.delete(name_f)
        db.rpush(name_f, head.to_bytes(), forged)
        wipe()

        monkeypatch.delenv(KEY_ENV)
        set_remote_cache(redis_server.url)
        exports = stats["exports"]
        with paddle.no_grad():
            close(jit_core.optimize(f, backend="onnxrt")(x), f(x))
        assert stats["exports"] == exports + 1  # exported here, not read
        wipe()

        # the opt-in trusts the store: then what is in it is computed, and kept nowhere
        set_remote_cache(redis_server.url, trust_unsigned=True)
        with paddle.no_grad(), pytest.warns(RuntimeWarning, match="read without a signing key"):
            close(jit_core.optimize(f, backend="onnxrt")(x), g(x))
        compile_cache.wait_for_writes()
        assert not [p for p in cache_dir.rglob("*") if p.is_file() and "onnxrt" in p.parts]
    finally:
        remote_cache.reset()


@needs_export
def test_the_environment_variable_moves_the_cache(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv(ENV_VAR, str(elsewhere))
    with paddle.no_grad():
        jit_core.optimize(lambda t: paddle.tanh(t) * 3, backend="onnxrt")(paddle.rand([5]))
    compile_cache.wait_for_writes()  # (written in the background)
    assert len(list((elsewhere / "onnxrt").rglob("*"))) >= 2  # a folder and an entry


@needs_export
def test_bad_options_are_named():
    def g(x):
        return x * 2

    with pytest.raises(TypeError, match="backend 'onnxrt' takes no option 'bogus'; its options: "):
        jit_core.optimize(g, backend="onnxrt", bogus=1)
    with paddle.no_grad(), pytest.raises(Exception, match="opset must be an ONNX opset number"):
        jit_core.optimize(g, backend="onnxrt", opset="x")(paddle.ones([2]))
    with paddle.no_grad(), pytest.raises(Exception, match="specialize must be how many input"):
        jit_core.optimize(g, backend="onnxrt", specialize=-1)(paddle.ones([2]))


#: a first-load worker whose ONNX Runtime aborts, as on an uncaught C++ exception, on
#: every model ("all") or on models with dynamic dimensions ("dynamic")
ABORTING_WORKER = """
import os, runpy, sys
import onnx, onnxruntime
real = onnxruntime.InferenceSession
def session(path, *args, **kwargs):
    dims = [d for i in onnx.load(path).graph.input for d in i.type.tensor_type.shape.dim]
    if sys.argv[1] == "all" or any(d.dim_param for d in dims):
        sys.stderr.write("terminate called after throwing an instance of 'std::length_error'\\n")
        sys.stderr.write("  what():  vector::reserve\\n")
        sys.stderr.flush()
        os.abort()
    return real(path, *args, **kwargs)
onnxruntime.InferenceSession = session
runpy.run_path(sys.argv[2], run_name="__main__")
"""


@pytest.fixture
def first_load_worker(monkeypatch):
    """Replace the first-load worker by one started with the given ``argv``."""
    workers = []

    def use(argv):
        worker = first_load.FirstLoads()
        worker.argv = argv
        workers.append(worker)
        monkeypatch.setattr(first_load, "WORKER", worker)
        return worker

    yield use
    for worker in workers:
        worker.close()


@needs_export
def test_onnx_runtime_dying_on_a_model_costs_the_graph_not_the_program(first_load_worker):
    first_load_worker([sys.executable, "-c", ABORTING_WORKER, "all", first_load.CHILD])

    def f(t):
        return paddle.tanh(t) * 2

    x = paddle.rand([2, 3])
    with paddle.no_grad():
        with pytest.raises(BackendCompileError) as error:
            jit_core.optimize(f, backend="onnxrt")(x)
        message = str(error.value)
        assert "died loading the exported graph in a worker process" in message
        assert "SIGABRT" in message and "what():  vector::reserve" in message
        assert "fallback=True" in message
        # the next graph's worker starts afresh; with fallback the graph runs on paddle
        g = jit_core.optimize(lambda t: paddle.sin(t) + 1, backend="onnxrt", fallback=True)
        with pytest.warns(RuntimeWarning, match="SIGABRT.*runs on the paddle backend"):
            (graph,) = jit_core.explain(g, x).graphs
        assert graph.backend.startswith("paddle (runs on the paddle backend: backend 'onnxrt'")
        assert "SIGABRT" in graph.backend
        with pytest.warns(RuntimeWarning, match="SIGABRT"):
            close(jit_core.optimize(f, backend="onnxrt", fallback=True)(x), f(x))

        # the verdict is kept: the next process neither exports nor loads the model again
        first_load_worker([sys.executable, "-c", "raise SystemExit(3)"])
        exports = stats["exports"]
        with pytest.raises(BackendCompileError, match="the verdict of an earlier process"):
            jit_core.optimize(f, backend="onnxrt")(x)
    assert stats["exports"] == exports


@needs_export
def test_a_dynamic_model_onnx_runtime_dies_on_is_exported_per_shape(first_load_worker):
    # ONNX Runtime 1.19 dies of SIGFPE loading VGG11 with a dynamic batch
    first_load_worker([sys.executable, "-c", ABORTING_WORKER, "dynamic", first_load.CHILD])
    net = make_net()
    fast = jit_core.optimize(net, backend="onnxrt")
    with paddle.no_grad():
        for batch in (2, 3, 3):
            x = paddle.randn([batch, 8])
            close(fast(x), net(x), 1e-4)
    from jit_core.kit.shape_dispatch import PerShape

    per_shape = compiled_of(fast)[-1]
    assert isinstance(per_shape, PerShape)
    assert "died loading the exported graph" in per_shape.describe()
    assert "SIGABRT" in per_shape.describe()
    (built,) = per_shape.builds.values()
    assert isinstance(built, OrtGraph)  # on ONNX Runtime, at fixed shapes
    assert [i.shape for i in built.session.get_inputs()][0] == [3, 8]


@needs_export
def test_onnx_runtime_loads_the_model_its_worker_optimized(monkeypatch):
    """What the worker optimized is loaded here with optimizations off: the optimizing is
    not paid twice."""
    import onnxruntime
    from jit_backend_onnxrt import backend

    levels = []
    real = onnxruntime.InferenceSession

    def session(model, options, **kwargs):
        levels.append((isinstance(model, str), options.graph_optimization_level))
        return real(model, options, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", session)
    net = make_net()
    x = paddle.randn([4, 8])
    with paddle.no_grad():
        close(jit_core.optimize(net, backend="onnxrt")(x), net(x), 1e-4)
    assert levels == [(True, onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL)]
    assert backend.first_load.WORKER.version == onnxruntime.__version__


@needs_export
def test_a_kernel_onnx_runtime_lacks_sends_the_graph_to_paddle(monkeypatch, cache_dir):
    # ONNX Runtime 1.19 (Python 3.8 and 3.9) has no float64 Cos: the model is right, the
    # runtime cannot load it
    import onnxruntime

    def refuse(*args, **kwargs):
        raise RuntimeError(
            "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation "
            "for Cos(7) node with name 'cos__Cos'"
        )

    monkeypatch.setattr(onnxruntime, "InferenceSession", refuse)
    x = paddle.rand([3], dtype="float64")
    with paddle.no_grad():
        report = jit_core.explain(lambda t: paddle.cos(t) * 2, x, backend="onnxrt")
    (graph,) = report.graphs
    assert "runs on the paddle backend: backend 'onnxrt' does not serve it" in graph.backend
    assert "has no kernel for Cos(7) with these dtypes" in graph.backend
    close(report.result, paddle.cos(x) * 2)


@needs_export
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")
def test_a_forked_process_starts_a_first_load_worker_of_its_own(first_load_worker):
    worker = first_load_worker(list(first_load.FirstLoads.argv))
    worker.start()
    parent_pid = worker._proc.pid
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own worker, the parent's left alone
        ok = False
        try:
            worker.start()
            ok = worker._proc.pid != parent_pid
            worker.close()
        finally:
            os.write(write, b"1" if ok else b"0")
            os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"
    assert worker._proc.pid == parent_pid and worker._proc.poll() is None
