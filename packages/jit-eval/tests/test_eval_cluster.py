"""jit-eval --cluster: the run on a real local Ray cluster (a head and a second node, each a
raylet of its own on this machine) gives the verdicts of the run on one machine."""

from __future__ import annotations

import json
import os
import sys

import pytest

from jit_core.graphnet.samples import find_samples
from jit_eval import cluster
from jit_eval.cli import main as jit_eval
from jit_eval.runner import EvalConfig, run

GRAPHS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "conformance", "graphs")


def test_cluster_says_why_it_cannot_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cluster, "unavailable_reason", lambda: "Ray has no wheels for X")
    with pytest.raises(SystemExit):
        jit_eval([GRAPHS, "--cluster", "auto"])
    assert "--cluster is not available: Ray has no wheels for X" in capsys.readouterr().err


def test_the_reason_names_the_python_or_the_package():
    why = cluster.unavailable_reason()
    if sys.version_info[:2] < cluster.RAY_PYTHONS:
        assert "no wheels for Python" in why
    else:
        try:
            import ray  # noqa: F401
        except ImportError:
            assert "pip install 'jit-eval[cluster]'" in why
        else:
            assert why == ""


def test_a_two_node_ray_cluster_gives_the_local_verdicts(tmp_path, monkeypatch):
    pytest.importorskip("ray", reason="Ray is not installed (CI installs it for 3.12 only)")
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    paths = find_samples([GRAPHS])
    names = [os.path.relpath(p, GRAPHS) for p in paths]
    cfg = EvalConfig(backends=["paddle"], tolerances=[-6, -1], warmup=0, trials=2)
    local = run(paths, names, cfg)
    nodes = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    try:
        nodes.add_node(num_cpus=1)
        out = str(tmp_path / "cluster.json")
        args = [GRAPHS, "--cluster", nodes.address, "--json", out, "--tolerance", "-6..-1"]
        assert jit_eval(args + ["--warmup", "0", "--trials", "2", "--quiet"]) == 0
    finally:
        nodes.shutdown()
    with open(out) as f:
        remote = json.load(f)["results"]
    assert [r["sample"] for r in remote] == paths
    for mine, theirs in zip(local, remote):
        assert theirs["status"] == mine["status"] == "correct", theirs["error"]
        assert {t: theirs["correct_at"][t] for t in ("-6", "-1")} == mine["correct_at"]
        assert theirs["graphs"] == mine["graphs"] and theirs["breaks"] == mine["breaks"]
    assert len({r["node"] for r in remote}) == 2  # both nodes ran samples


def test_a_cluster_it_cannot_join_is_one_line_naming_it(monkeypatch, capsys):
    """Was: Ray's ConnectionError as a traceback from inside ray.init."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (CI installs it for 3.12 only)")

    def refuse(**kwargs):
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.9:6379\nmore detail")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    with pytest.raises(SystemExit):
        jit_eval([GRAPHS, "--cluster", "10.0.0.9:6379", "--quiet"])
    err = capsys.readouterr().err
    assert (
        "cannot join the Ray cluster at '10.0.0.9:6379': ConnectionError: Failed to connect" in err
    )
    assert "Traceback" not in err and "more detail" not in err
