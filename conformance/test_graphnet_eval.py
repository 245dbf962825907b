"""``jit-eval`` over the GraphNet-format samples of ``conformance/graphs`` on the backend
under test (and, on the paddle run, Paddle's SOT as the peer): every sample compiles, runs
and is correct, and the JSON, the GraphNet logs and the plots are written."""

from __future__ import annotations

import json
import os

import pytest

from jit_core.graphnet.samples import find_samples
from jit_eval.cli import main as jit_eval

GRAPHS = os.path.join(os.path.dirname(__file__), "graphs")

#: the level each backend must be correct at (float32: rtol 10**(1.18 t), atol 10**t);
#: the paddle backend runs eager Paddle's kernels, so it must be equal to the last bit
LEVEL = {"paddle": -10, "onnxrt": -4, "tvm": -4, "tensorrt": -3}
#: tvm compiles a graph in about a minute on CI's two cores, tensorrt builds an engine
#: per graph: one small sample there (tvm's compile cache is shared by the Pythons of a
#: run), every sample elsewhere
SUBSET = {"tvm": ["branchy/subgraph_2"], "tensorrt": ["branchy/subgraph_2"]}


def test_jit_eval_on_the_conformance_graphs(backend, tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="--plot needs matplotlib (requirements-test.txt)")
    backends = [backend, "sot"] if backend == "paddle" else [backend]
    out = tmp_path / "eval"
    dirs = [os.path.join(GRAPHS, s) for s in SUBSET.get(backend, [])] or [GRAPHS]
    argv = [*dirs, "--backend", ",".join(backends), "--warmup", "1", "--trials", "3"]
    argv += ["--jobs", "2", "--json", str(out / "eval.json"), "--plot", str(out / "plots")]
    argv += ["--log", str(out / "logs"), "--quiet"]
    assert jit_eval(argv) == 0
    table = capsys.readouterr().out
    assert "ES(t) " + backend in table

    data = json.loads((out / "eval.json").read_text())
    assert len(find_samples([GRAPHS])) == 5
    samples = find_samples(dirs)
    assert len(data["results"]) == len(samples) * len(backends)
    for r in data["results"]:
        assert r["error"] is None, (r["name"], r["backend"], r["error"])
        assert r["status"] == "correct" and r["speedup"] > 0
        if r["backend"] == "sot":
            continue
        assert r["correct_at"][str(LEVEL.get(backend, -4))], (r["name"], r["correct_at"])
        # each sample is one graph: captured whole, no break, no eager frame
        assert (r["graphs"], r["breaks"], r["eager_frames"]) == (1, 0, 0), r["name"]
        assert r["fallbacks"] == [], (r["name"], r["fallbacks"])
    summary = data["summary"][backend]
    assert summary["samples"] == summary["ok"] == len(samples)
    assert summary["errors"] == {}
    # every sample correct: S(t) is the geometric-mean speedup at every level
    assert summary["S"]["-1"] == pytest.approx(summary["geomean_speedup"])
    assert summary["ES"]["3"] == pytest.approx(summary["geomean_speedup"])
    for name in ("scores.png", "speedups.png"):
        assert (out / "plots" / name).stat().st_size > 1000
    log = (out / "logs" / f"{backend}.log").read_text()
    assert log.count("[Processing]") == len(samples) and log.count("[Speedup][e2e]") == len(samples)
