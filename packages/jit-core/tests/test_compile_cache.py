"""The on-disk compile cache: round trips, corrupt entries, relocation, concurrent writers,
and the key's sensitivity to what a compiled artifact depends on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import paddle
import pytest

import jit_core
from jit_core.cache.disk import ENV_VAR, DiskCache, cache_root, graph_key


def test_round_trip_and_layout(tmp_path):
    cache = DiskCache("demo", root=str(tmp_path))
    assert cache.get("ab" * 32) is None
    path = cache.put("ab" * 32, b"payload")
    assert path == str(tmp_path / "demo" / "ab" / ("ab" * 32))
    assert cache.get("ab" * 32) == b"payload"
    assert not [f for f in os.listdir(os.path.dirname(path)) if f.startswith(".tmp-")]


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],  # truncated
        lambda b: b[:-1] + bytes([b[-1] ^ 1]),  # one bit flipped
        lambda b: b"garbage",  # not an entry at all
    ],
)
def test_a_damaged_entry_is_reported_removed_and_missed(tmp_path, damage):
    cache = DiskCache("demo", root=str(tmp_path))
    path = cache.put("k1", b"x" * 1000)
    with open(path, "rb") as f:
        blob = f.read()
    with open(path, "wb") as f:
        f.write(damage(blob))
    with pytest.warns(RuntimeWarning, match="corrupt or truncated; it is rebuilt"):
        assert cache.get("k1") is None
    assert not os.path.exists(path)
    cache.put("k1", b"y")
    assert cache.get("k1") == b"y"


def test_environment_variable_and_platform_default(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "moved"))
    assert cache_root() == str(tmp_path / "moved")
    assert DiskCache("b").directory == str(tmp_path / "moved" / "b")
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert cache_root() == str(tmp_path / "xdg" / "jit_core")


def test_an_unwritable_cache_warns_and_does_not_fail(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = DiskCache("demo", root=str(blocker))
    with pytest.warns(RuntimeWarning, match="cannot write cache entry"):
        assert cache.put("k", b"data") is None
    assert cache.get("k") is None


WRITER = textwrap.dedent(
    """
    import sys
    from jit_core.cache.disk import DiskCache
    cache = DiskCache("race", root=sys.argv[1])
    payload = bytes([int(sys.argv[2])]) * 2_000_000
    for _ in range(20):
        cache.put("same-key", payload)
        got = cache.get("same-key")
        assert got is not None and len(got) == len(payload) and len(set(got)) == 1, "torn"
    """
)


def test_concurrent_processes_never_see_a_torn_entry(tmp_path):
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(i)], stderr=-1)
        for i in (1, 2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]
    got = DiskCache("race", root=str(tmp_path)).get("same-key")
    assert got in (b"\x01" * 2_000_000, b"\x02" * 2_000_000)


def test_graph_key_follows_code_values_specs_and_extra():
    lin = paddle.nn.Linear(3, 3)
    x = paddle.rand([2, 3])
    gm = jit_core.capture(lin, x)
    base = graph_key(gm, [x], ("v1",))
    assert graph_key(gm, [x], ("v1",)) == base
    assert graph_key(gm, [x], ("v2",)) != base
    assert graph_key(gm, [paddle.rand([4, 3])], ("v1",)) != base
    no_values = graph_key(gm, [x], ("v1",), values=False)
    with paddle.no_grad():
        lin.weight.set_value(lin.weight * 2)
    assert graph_key(gm, [x], ("v1",)) != base
    assert graph_key(gm, [x], ("v1",), values=False) == no_values
    other = jit_core.capture(lambda t: paddle.tanh(lin(t)), x)
    assert graph_key(other, [x], ("v1",)) != graph_key(gm, [x], ("v1",))


class _Holder(paddle.nn.Layer):
    def __init__(self, act):
        super().__init__()
        self.act = act

    def forward(self, x):
        return self.act(x)


def test_graph_key_tells_apart_layers_called_under_one_name():
    # the generated code is the same (self.act(x)) and there are no parameters: the
    # called layer's class and settings are what differ
    x = paddle.rand([2, 3])

    def key(act):
        return graph_key(jit_core.capture(_Holder(act), x), [x], tensor_names=False)

    relu = key(paddle.nn.ReLU())
    assert key(paddle.nn.ReLU()) == relu  # a twin, made apart, holds
    assert key(paddle.nn.Sigmoid()) != relu
    assert key(paddle.nn.LeakyReLU(0.1)) != key(paddle.nn.LeakyReLU(0.2))
    assert key(paddle.nn.GELU(approximate=True)) != key(paddle.nn.GELU())


def test_graph_key_without_tensor_names_holds_for_a_twin_layer():
    # two layers made alike: the same graph and state-dict names, but Paddle numbered their
    # tensors apart (linear_0.w_0, linear_1.w_0)
    x = paddle.rand([2, 3])
    first, second = paddle.nn.Linear(3, 3), paddle.nn.Linear(3, 3)
    assert first.weight.name != second.weight.name
    a, b = jit_core.capture(first, x), jit_core.capture(second, x)
    assert graph_key(a, [x], values=False) != graph_key(b, [x], values=False)
    assert graph_key(a, [x], values=False, tensor_names=False) == graph_key(
        b, [x], values=False, tensor_names=False
    )
    # still a key of the parameters' shapes
    wider = jit_core.capture(paddle.nn.Linear(3, 4), x)
    assert graph_key(wider, [x], values=False, tensor_names=False) != graph_key(
        a, [x], values=False, tensor_names=False
    )


class _Graph:
    def __init__(self, exporter=None):
        self.meta = {} if exporter is None else {"onnx_exporter": exporter}


def test_a_build_from_a_direct_model_is_keyed_apart_from_paddle2onnx_and_onnx(
    tmp_path, monkeypatch
):
    """Python 3.13 has no paddle2onnx and a newer onnx: a build made elsewhere from the
    direct exporter's model serves it, a build from paddle2onnx's does not."""
    from jit_core.kit.onnx import ExportKeys, keys

    cache = DiskCache("demo", root=str(tmp_path))
    installed = {"paddle2onnx": "2.1.0", "onnx": "1.17.0"}
    monkeypatch.setattr(keys, "installed_version", installed.get)
    monkeypatch.setattr(keys, "paddle2onnx_missing", lambda: "")
    with_paddle2onnx = ExportKeys("graph")
    with_paddle2onnx.put(cache, _Graph(), b"from the direct model")
    ExportKeys("declined graph").put(cache, _Graph("exported through paddle2onnx"), b"p2o")
    assert with_paddle2onnx.get(cache)[1] == b"from the direct model"
    assert ExportKeys("declined graph").get(cache)[1] == b"p2o"
    # another onnx, no paddle2onnx: the direct model's build is found, paddle2onnx's not
    installed.update(paddle2onnx=None, onnx="1.23.2")
    monkeypatch.setattr(keys, "paddle2onnx_missing", lambda: "no wheels")
    assert ExportKeys("graph").get(cache)[1] == b"from the direct model"
    assert ExportKeys("declined graph").get(cache) is None
    # another paddle2onnx: its own builds are not served, the direct model's still are
    installed.update(paddle2onnx="2.2.0", onnx="1.17.0")
    monkeypatch.setattr(keys, "paddle2onnx_missing", lambda: "")
    assert ExportKeys("declined graph").get(cache) is None
    assert ExportKeys("graph").get(cache)[1] == b"from the direct model"
    # paddle2onnx asked for: no direct model is made, none is loaded
    monkeypatch.setenv("JIT_CORE_ONNX_EXPORTER", "paddle2onnx")
    assert ExportKeys("graph").get(cache) is None
    only = ExportKeys("graph")
    only.put(cache, _Graph(), b"p2o, asked for")
    assert only.get(cache)[1] == b"p2o, asked for"
    # without paddle2onnx then, there is no key to store under
    monkeypatch.setattr(keys, "paddle2onnx_missing", lambda: "no wheels")
    assert ExportKeys("graph").of(_Graph()) is None


def test_python_m_jit_core_cache_is_the_cli(tmp_path):
    # jit_core.cache is a package (disk, remote, the CLI): its __main__ keeps the command
    env = dict(os.environ, JIT_CORE_CACHE_DIR=str(tmp_path / "c"), GLOG_minloglevel="2")
    env.pop("JIT_CORE_REMOTE_CACHE", None)
    run = subprocess.run(
        [sys.executable, "-m", "jit_core.cache", "info"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert f"local cache {tmp_path / 'c'}" in run.stdout and "(empty)" in run.stdout
