"""``jit_core.profile()``: counts that match the calls made, compile phases, recompiles
and breaks by reason, a Chrome trace whose events carry the fields the Trace Event
Format requires, and the fast path given back when the profile ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import paddle
import pytest

import jit_core
from jit_core.runtime import profiling


class Branchy(paddle.nn.Layer):
    """One graph, a break on a tensor's truth, a resume function per branch."""

    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x)
        if y.sum() > 0:
            return y * 2
        return y - 1


def _graphs(prof, frame):
    return [g for g in prof.to_json()["graphs"] if g["frame"] == frame]


def test_counts_match_the_calls_made():
    paddle.seed(0)
    net = jit_core.optimize(Branchy())
    calls = 12
    with jit_core.profile() as prof:
        for _ in range(calls):
            net(paddle.randn([4, 8]))
    data = prof.to_json()
    assert data["calls"] == [
        {"object": "Branchy", "calls": calls, "total_ms": data["calls"][0]["total_ms"]}
    ]
    (forward,) = _graphs(prof, "forward")
    assert forward["calls"] == calls and forward["ops"] > 0 and forward["backend"] == "paddle"
    # the first run is a call, and the compile's last phase; the others are timed
    assert set(forward["compile_ms"]) == set(profiling.PHASES)
    assert forward["median_us"] > 0 and forward["total_ms"] > 0
    resumes = [g for g in data["graphs"] if "resume" in g["frame"]]
    assert sum(g["calls"] for g in resumes) == calls
    # every call of the entry that ends with the break took it
    (taken,) = data["graph_breaks"]
    assert taken["taken"] == calls and "tensor value decides a branch" in taken["reason"]
    assert data["recompiles"] == [] and data["eager_frames"] == []
    table = str(prof)
    assert "forward#1" in table and "graph breaks taken" in table


def test_a_recompile_is_counted_with_the_guard_that_failed():
    def f(x):
        return (x * 2).sum()

    fast = jit_core.optimize(f, dynamic=False)
    with jit_core.profile() as prof:
        for n in (3, 3, 5, 5, 5):
            fast(paddle.rand([n]))
    data = prof.to_json()
    (recompile,) = data["recompiles"]
    assert recompile["count"] == 1 and "(3,)" in recompile["guard_failed"]
    assert sorted(g["calls"] for g in _graphs(prof, "f")) == [2, 3]


def test_graphs_captured_before_the_profile_are_counted_without_a_first_run():
    def f(x):
        return x + 1

    fast = jit_core.optimize(f)
    fast(paddle.rand([2]))  # captured here, outside the profile
    with jit_core.profile() as prof:
        for _ in range(4):
            fast(paddle.rand([2]))
    (g,) = _graphs(prof, "f")
    assert g["calls"] == 4
    assert "first run" not in g["compile_ms"] and "capture" in g["compile_ms"]
    # no compile happened inside it: its trace has call and graph spans only
    assert {e["cat"] for e in prof.chrome_trace()["traceEvents"][1:]} == {"call", "graph"}


def test_the_chrome_trace_follows_the_trace_event_format(tmp_path):
    net = jit_core.optimize(Branchy())
    with jit_core.profile(str(tmp_path / "prof.json")) as prof:
        for _ in range(3):
            net(paddle.randn([2, 8]))
    trace = prof.chrome_trace()
    json.dumps(trace)  # serialisable as it is
    events = trace["traceEvents"]
    assert events[0]["ph"] == "M" and events[0]["name"] == "process_name"
    for e in events[1:]:
        assert (
            e["ph"] == "X"
            and isinstance(e["name"], str)
            and e["cat"] in {"call", "graph", "compile"}
        )
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
    calls = [e for e in events[1:] if e["cat"] == "call"]
    graphs = [e for e in events[1:] if e["cat"] == "graph"]
    assert len(calls) == 3 and len(graphs) == 6  # forward and a resume function per call
    # each graph span lies inside the call that ran it
    for g in graphs:
        assert any(
            c["ts"] <= g["ts"] and g["ts"] + g["dur"] <= c["ts"] + c["dur"] + 1 for c in calls
        )
    written = sorted(os.listdir(tmp_path))
    assert written == ["prof.json", "prof.trace.json", "prof.txt"]
    with open(tmp_path / "prof.trace.json") as f:
        assert json.load(f)["traceEvents"][1:] == json.loads(json.dumps(events[1:]))
    with open(tmp_path / "prof.json") as f:
        assert json.load(f)["calls"][0]["calls"] == 3


def test_the_fast_path_is_given_back_when_the_profile_ends():
    def f(x):
        return x * 3

    fast = jit_core.optimize(f)
    x = paddle.rand([4])
    fast(x), fast(x)
    generated = type(fast).__dict__.get("__call__")
    assert generated is not None  # the call a hit runs, generated for the entry
    with jit_core.profile():
        assert type(fast).__dict__["__call__"].__name__ == "_profiled_call"
        fast(x)
        with pytest.raises(RuntimeError, match="do not nest"):
            with jit_core.profile():
                pass
    assert "__call__" not in type(fast).__dict__
    fast(x)  # the next hit generates it again
    assert type(fast).__dict__["__call__"].__name__ != "_profiled_call"
    assert profiling.ACTIVE is None


def test_a_training_loop_is_profiled_step_by_step():
    paddle.seed(1)
    net = paddle.nn.Linear(4, 2)
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=net.parameters())

    def step(x):
        loss = net(x).mean()
        loss.backward()
        opt.step()
        opt.clear_grad()
        return loss

    fast = jit_core.optimize(step)
    x = paddle.rand([3, 4])
    steps = 5
    with jit_core.profile() as prof:
        for _ in range(steps):
            fast(x)
    (g,) = _graphs(prof, "step")
    assert g["calls"] == steps and prof.to_json()["calls"][0]["calls"] == steps


def test_jit_profile_profiles_a_whole_program(tmp_path):
    script = textwrap.dedent(
        """
        import paddle, jit_core
        f = jit_core.optimize(lambda x: x * 2 + 1)
        for _ in range(7):
            f(paddle.rand([3]))
        """
    )
    env = dict(os.environ, JIT_PROFILE=str(tmp_path / "whole"), PYTHONWARNINGS="ignore")
    subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True)
    with open(tmp_path / "whole.json") as f:
        data = json.load(f)
    (g,) = data["graphs"]
    assert g["calls"] == 7 and "first run" in g["compile_ms"]
    assert (tmp_path / "whole.trace.json").exists()
    assert "<lambda>#1" in (tmp_path / "whole.txt").read_text()
