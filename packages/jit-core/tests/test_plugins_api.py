"""The public API surface: backends as plugins, optimize() forms and errors, OptimizedLayer,
and the logging channels."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import paddle
import pytest

import jit_core
from jit_core import logs, plugins
from jit_core.errors import (
    BackendNotFoundError,
    BackendUnavailableError,
    JitError,
)


def close(a, b):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def add_one(x):
    return x + 1


# ---------------------------------------------------------------------------- backends


def test_paddle_backend_is_installed():
    found = jit_core.backends()
    assert "paddle" in found
    backend = found["paddle"]
    assert backend.name == "paddle"
    assert callable(backend.compile)
    assert backend.plugin == "paddle"  # the entry point that registered it
    assert backend.description


def test_unknown_backend_lists_installed_ones():
    with pytest.raises(BackendNotFoundError) as info:
        jit_core.optimize(add_one, backend="nope")
    msg = str(info.value)
    assert "'nope'" in msg
    assert "paddle" in msg
    assert isinstance(info.value, JitError)
    assert isinstance(info.value, LookupError)


def test_unknown_backend_in_decorator_form_raises_at_once():
    with pytest.raises(BackendNotFoundError, match="paddle"):
        jit_core.optimize(backend="nope-either")


def test_list_plugins_names_distributions_and_versions():
    found = jit_core.list_plugins()
    assert found == sorted(found)
    names = {}
    versions = {}
    for name, dist, version in found:
        names.setdefault(dist, []).append(name)
        versions[dist] = version
    import jit_opcodes

    assert versions["jit-core"] == jit_core.__version__
    assert versions["jit-opcodes"] == jit_opcodes.__version__
    # the embedded backends, the built-in passes, the ONNX lowerings and the Redis cache
    # store register like outside plugins
    assert names["jit-core"] == ["auto", "onnx_lowerings", "paddle", "passes", "redis_store"]
    assert names["jit-opcodes"] == ["opcodes"]


class RecordingBackend:
    """A backend plugin registered through the real hookspec."""

    def __init__(self):
        self.calls = []
        self.runs = 0

    @jit_core.hookimpl
    def jit_register_backends(self, register):
        def compile_fn(graph_module, example_inputs, **options):
            self.calls.append((graph_module, list(example_inputs), dict(options)))

            def run(*args):
                self.runs += 1
                return graph_module.forward(*args)

            return run

        register("recording", compile_fn, description="records its calls")


@pytest.fixture
def recording(install_plugin):
    yield install_plugin(RecordingBackend(), "recording-test")


def test_extra_backend_plugin_is_used(recording):
    assert "recording" in jit_core.backends()
    assert jit_core.backends()["recording"].plugin == "recording-test"
    assert ("recording-test", "", "") in jit_core.list_plugins()

    def f(x, y):
        return paddle.matmul(x, y) * 2

    of = jit_core.optimize(f, backend="recording", answer=42)
    x, y = paddle.randn([4, 4]), paddle.randn([4, 4])
    close(of(x, y), f(x, y))
    assert len(recording.calls) == 1
    gm, examples, options = recording.calls[0]
    assert isinstance(gm, jit_core.fx.GraphModule)
    assert "paddle_matmul" in gm.code
    assert options == {"answer": 42}
    assert len(examples) == 2
    assert [list(e.shape) for e in examples] == [[4, 4], [4, 4]]
    assert recording.runs == 1

    close(of(y, x), f(y, x))  # a cache hit runs the backend's callable, no compile
    assert len(recording.calls) == 1
    assert recording.runs == 2
    assert "recording" in repr(of)


def test_unregistering_removes_the_backend(recording):
    assert "recording" in jit_core.backends()
    plugins.get_plugin_manager().unregister(recording)
    plugins.reset_plugins()
    assert "recording" not in jit_core.backends()
    assert "paddle" in jit_core.backends()  # the entry points load again
    with pytest.raises(BackendNotFoundError):
        jit_core.optimize(add_one, backend="recording")


def test_unknown_paddle_backend_option():
    # refused by optimize() itself, naming the option and those the backend takes
    with pytest.raises(TypeError, match="takes no option 'no_such_option'; its options: mode"):
        jit_core.optimize(add_one, no_such_option=1)
    prev = paddle.framework.core.set_eval_frame(None)
    assert prev is None


def test_paddle_backend_compile_rejects_options_directly():
    from jit_core.paddle_backend import compile_graph

    g = jit_core.fx.Graph()
    g.output(g.placeholder("x"))
    gm = jit_core.fx.GraphModule({}, g)
    with pytest.raises(TypeError, match="bogus"):
        compile_graph(gm, [paddle.ones([2])], bogus=True)
    with pytest.raises(ValueError, match="mode"):
        compile_graph(gm, [paddle.ones([2])], mode="turbo")
    assert compile_graph(gm, [paddle.ones([2])]) == gm.forward


def test_paddle_backend_explicit_eager_mode():
    of = jit_core.optimize(add_one, backend="paddle", mode="eager")
    close(of(paddle.ones([4])), paddle.full([4], 2.0))


# ---------------------------------------------------------------------------- optimize()


def test_decorator_forms():
    @jit_core.optimize
    def plain(x):
        return x * 2

    @jit_core.optimize(backend="paddle")
    def configured(x):
        return x * 3

    assert isinstance(plain, jit_core.OptimizedFunction)
    assert isinstance(configured, jit_core.OptimizedFunction)
    x = paddle.ones([4])
    close(plain(x), x * 2)
    close(configured(x), x * 3)
    assert plain.__name__ == "plain" and configured.__name__ == "configured"
    assert plain.jit_stats.compiled == 1 and configured.jit_stats.compiled == 1


def test_decorated_method_binds_self():
    class Scaler:
        def __init__(self, k):
            self.k = k

        @jit_core.optimize
        def apply(self, x):
            return x * self.k

    x = paddle.ones([4])
    close(Scaler(2).apply(x), x * 2)
    close(Scaler(5).apply(x), x * 5)


def test_non_callable_is_rejected():
    with pytest.raises(TypeError, match="int"):
        jit_core.optimize(3)
    with pytest.raises(TypeError):
        jit_core.optimize("add_one")


def test_optimizing_twice_is_rejected():
    of = jit_core.optimize(add_one)
    with pytest.raises(TypeError, match="already optimized"):
        jit_core.optimize(of)
    ol = jit_core.optimize(paddle.nn.Linear(4, 4))
    with pytest.raises(TypeError, match="already optimized"):
        jit_core.optimize(ol)


class Small(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)
        self.k = 2.0

    def forward(self, x):
        return self.fc(x) * self.k


def test_optimized_layer_keeps_the_layer_state():
    paddle.seed(5)
    layer = Small()
    ol = jit_core.optimize(layer)
    assert isinstance(ol, jit_core.OptimizedLayer)
    assert [id(p) for p in ol.parameters()] == [id(p) for p in layer.parameters()]
    sd = ol.state_dict()
    assert set(sd) == {"fc.weight", "fc.bias"}
    assert sd["fc.weight"] is layer.fc.weight or np.array_equal(
        sd["fc.weight"].numpy(), layer.fc.weight.numpy()
    )
    assert ol.fc is layer.fc
    assert "Small" in repr(ol) and "paddle" in repr(ol)

    x = paddle.randn([4, 4])
    close(ol(x), layer.fc(x) * 2.0)
    close(ol.forward(x), layer.fc(x) * 2.0)

    # setattr goes through to the layer, and the result follows it
    ol.k = 3.0
    assert layer.k == 3.0
    close(ol(x), layer.fc(x) * 3.0)

    # loading a state dict changes what the compiled graph computes
    new_sd = {"fc.weight": paddle.eye(4), "fc.bias": paddle.zeros([4])}
    ol.set_state_dict(new_sd)
    close(ol(x), x * 3.0)

    # gradients flow to the layer's own parameters
    ol(x).sum().backward()
    assert layer.fc.weight.grad is not None
    assert ol.train() is ol and ol.eval() is ol
    assert layer.training is False


# ---------------------------------------------------------------------------- logging


@pytest.fixture
def restore_log_levels():
    names = ["jit_core"] + [f"jit_core.{c}" for c in logs.CHANNELS]
    levels = {n: logging.getLogger(n).level for n in names}
    handlers = list(logging.getLogger("jit_core").handlers)
    yield
    for n, lvl in levels.items():
        logging.getLogger(n).setLevel(lvl)
    logging.getLogger("jit_core").handlers[:] = handlers


def test_channels_are_quiet_by_default():
    if os.environ.get(logs.ENV_VAR):
        pytest.skip("JIT_LOGS is set for this run")
    for channel in logs.CHANNELS:
        assert not logs.get_logger(channel).isEnabledFor(logging.INFO)


def test_set_logs_turns_on_named_channels(restore_log_levels, caplog):
    jit_core.set_logs("graphs, guards")
    assert logs.get_logger("graphs").isEnabledFor(logging.DEBUG)
    assert logs.get_logger("guards").isEnabledFor(logging.DEBUG)
    if not os.environ.get(logs.ENV_VAR):
        assert not logs.get_logger("bytecode").isEnabledFor(logging.DEBUG)

    def f(x):
        return paddle.nn.functional.sigmoid(x) - 1

    jit_core.optimize(f)(paddle.ones([4]))
    graphs = [r.getMessage() for r in caplog.records if r.name == "jit_core.graphs"]
    guards = [r.getMessage() for r in caplog.records if r.name == "jit_core.guards"]
    assert len(graphs) == 1
    assert "def forward(self, x):" in graphs[0]
    # the public name Paddle exports the function under (it varies by Paddle version)
    assert re.search(r"sigmoid = (paddle|F)_sigmoid\(x\)", graphs[0])
    assert "sub = sigmoid - 1" in graphs[0]
    assert len(guards) == 1 and "def guard_f_" in guards[0]


def test_set_logs_all_and_unknown(restore_log_levels):
    jit_core.set_logs(["all"])
    for channel in logs.CHANNELS:
        assert logs.get_logger(channel).isEnabledFor(logging.DEBUG)
    with pytest.raises(ValueError, match="unknown log channel"):
        jit_core.set_logs("graphs,nonsense")


_SCRIPT = textwrap.dedent(
    """
    import paddle, jit_core

    def f(x, n):
        return paddle.nn.functional.relu(x) * n

    of = jit_core.optimize(f)
    of(paddle.ones([4, 4]), 2)
    of(paddle.ones([4, 4]), 2)

    def branchy(x):
        if x.sum() > 0:
            return x
        return -x

    jit_core.optimize(branchy)(paddle.ones([2]))
    print("DONE")
    """
)


def _run(env_extra):
    env = {k: v for k, v in os.environ.items() if k != "JIT_LOGS"}
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-c", _SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_jit_logs_env_var_prints_graph_code():
    proc = _run({"JIT_LOGS": "graphs"})
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout + proc.stderr
    assert "DONE" in proc.stdout
    assert text.count("graph of f:") == 1  # one capture, then cache hits
    assert "relu = F_relu(x)" in text
    assert "graph of f" in text
    assert "guard_" not in text  # only the channel asked for


def test_no_jit_logs_means_no_output():
    proc = _run({})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "DONE"
    assert "jit_core" not in proc.stderr
    assert "def forward" not in proc.stderr
    assert "runs eagerly" not in proc.stderr


class UnavailableBackend:
    @jit_core.hookimpl
    def jit_register_backends(self, register):
        def compile_graph(gm, example_inputs):
            raise AssertionError("an unavailable backend is never asked to compile")

        register("nowhere", compile_graph, unavailable="its library has no build for this machine")


def test_unavailable_backend_is_listed_and_refused_with_its_reason(install_plugin):
    install_plugin(UnavailableBackend(), "unavailable-test")
    assert jit_core.backends()["nowhere"].unavailable
    with pytest.raises(BackendUnavailableError, match="'nowhere'.*no build for this machine"):
        jit_core.optimize(add_one, backend="nowhere")


class UnavailableBackendWithFallback:
    @jit_core.hookimpl
    def jit_register_backends(self, register):
        def compile_graph(gm, example_inputs, *, fallback=False):
            raise AssertionError("an unavailable backend is never asked to compile")

        register("faraway", compile_graph, unavailable="no accelerator here")


def test_unavailable_backend_with_fallback_runs_on_paddle_with_one_warning():
    plugin = UnavailableBackendWithFallback()
    plugins.register_plugin(plugin, name="unavailable-fallback-test")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fast = jit_core.optimize(add_one, backend="faraway", fallback=True)
            x = paddle.ones([3])
            for _ in range(2):
                np.testing.assert_array_equal(fast(x).numpy(), add_one(x).numpy())
        messages = [str(w.message) for w in caught if w.category is RuntimeWarning]
        assert messages == [
            "jit_core: backend 'faraway' cannot run here: no accelerator here. Everything "
            "runs on the paddle backend (fallback=True)."
        ]
        assert caught[0].filename == __file__  # it points at the optimize() call
        with pytest.raises(BackendUnavailableError, match="no accelerator here"):
            jit_core.optimize(add_one, backend="faraway", fallback=False)
        with pytest.raises(TypeError, match="takes no option 'mode'"):
            jit_core.optimize(add_one, backend="faraway", fallback=True, mode="x")
        # a backend that takes no fallback option is refused, not silently replaced
        plugins.register_plugin(UnavailableBackend(), name="unavailable-test")
        with pytest.raises(TypeError, match="'nowhere' takes no option 'fallback'"):
            jit_core.optimize(add_one, backend="nowhere", fallback=True)
    finally:
        plugins.reset_plugins()
