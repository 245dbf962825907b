"""A graph that fills a tensor it made in place (``_C_ops.full_``, ``assign_value_``: what
Paddle's own program dumps and GraphNet samples write, Co-DINO's anchors among them) and
goes through paddle2onnx (``gather_nd`` has no direct lowering): its export must not take
the process down. The out-of-place twins of those updates take no tensor to fill, and
Paddle's static program builder aborts (an uncaught ``std::length_error``) when handed
one, where eager Paddle raises a TypeError: the export runs in a process of its own here,
so that a regression fails the test instead of ending it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from jit_backend_onnxrt import plugin

WHY_NOT = plugin.unavailable_reason()
pytestmark = pytest.mark.skipif(
    bool(WHY_NOT), reason=f"the onnxrt backend cannot run here: {WHY_NOT}"
)

SCRIPT = textwrap.dedent(
    """
    import warnings
    warnings.filterwarnings("ignore")
    import numpy as np, paddle, jit_core
    from paddle import _C_ops

    def anchors(x, index):
        place = paddle.framework._current_expected_place()
        sizes = _C_ops.full([4], 0.0, paddle.int64, place)
        sizes = _C_ops.assign_value_(sizes, [4], paddle.int64, [640.0, 853.0, 640.0, 853.0], place)
        scale = _C_ops.full([1], 0.0, paddle.float32, place)
        scale = _C_ops.full_(scale, [1], 0.5, paddle.float32, place)
        picked = paddle.gather_nd(x, index)
        return picked * scale + _C_ops.cast(sizes, paddle.float32).sum()

    x = paddle.rand([3, 4])
    index = paddle.to_tensor([[0, 1], [2, 3]])
    with paddle.no_grad():
        fast = jit_core.optimize(anchors, backend="onnxrt")
        np.testing.assert_allclose(fast(x, index).numpy(), anchors(x, index).numpy(), rtol=1e-6)
        entry = next(e for c in fast._ctx.cache.values() for e in c.entries)
        print("backend:", entry.backend)
    """
)


def test_a_graph_that_fills_tensors_in_place_exports_without_killing_the_process(tmp_path):
    env = {"JIT_CORE_CACHE_DIR": str(tmp_path), "GLOG_minloglevel": "2"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "backend: " in done.stdout, done.stdout
