"""Two processes with empty local caches share one ONNX export through a real Redis (the
``redis_server`` fixture of the root conftest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from jit_core.cache.disk import ENV_VAR
from jit_core.cache.remote import KEY_ENV, URL_ENV
from jit_core.kit.onnx import unavailable_reason

#: where the ONNX export cannot run (onnx missing) there is no export to share
WHY_NOT = unavailable_reason()
pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=f"the ONNX export cannot run here: {WHY_NOT}")

SCRIPT = textwrap.dedent(
    """
    import json, warnings
    warnings.filterwarnings("ignore")
    import paddle, jit_core
    from jit_backend_onnxrt.backend import stats
    from jit_core.cache import disk as compile_cache
    paddle.seed(1)
    net = paddle.nn.Sequential(paddle.nn.Linear(6, 6), paddle.nn.Tanh())
    net.eval()
    with paddle.no_grad():
        said = str(jit_core.explain(net, paddle.ones([2, 6]), backend="onnxrt"))
        compile_cache.wait_for_writes()  # a remote hit is kept on disk in the background
        first = (dict(stats), dict(compile_cache.stats["onnxrt"]))
        y = jit_core.optimize(net, backend="onnxrt")(paddle.ones([2, 6]))
    backend = [line.strip() for line in said.splitlines() if "Artifact:" in line]
    print(json.dumps({
        "stats": first[0],
        "cache": first[1],
        "explain": backend,
        "y": y.numpy().tolist(),
    }))
    """
)


def run(local: str, url: str) -> dict:
    env = dict(
        os.environ,
        **{ENV_VAR: local, URL_ENV: url, KEY_ENV: "shared key", "GLOG_minloglevel": "2"},
    )
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_machine_takes_the_export_from_redis(redis_server, tmp_path):
    first = run(str(tmp_path / "machine-a"), redis_server.url)
    second = run(str(tmp_path / "machine-b"), redis_server.url)
    assert first["stats"]["exports"] == 1
    assert first["cache"] == {"misses": 1, "stores": 1, "remote_stores": 1}
    # the second exported nothing: the model came from Redis and is now on its disk
    assert second["stats"] == {"exports": 0, "cache_hits": 1, "fallbacks": 0, "checks_failed": 0}
    assert second["cache"] == {"remote": 1, "stores": 1}
    assert first["explain"] == ["Artifact: built here (and cached)"]
    assert second["explain"] == ["Artifact: from the remote compile cache"]
    assert second["y"] == first["y"]
    assert os.listdir(tmp_path / "machine-b" / "onnxrt")
