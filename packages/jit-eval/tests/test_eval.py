"""jit_eval: GraphNet-format samples, the S(t)/ES(t) scores, the runner and its error
classes, the GraphNet log form, and extract()."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import paddle
import pytest

import jit_core
from jit_core import plugins
from jit_core.graphnet.samples import (
    SampleError,
    check_signature,
    find_samples,
    load_sample,
)
from jit_eval import report, scores
from jit_eval.cli import main as jit_eval
from jit_eval.runner import EvalConfig, plan_limits, run, run_sample_in_process

# -- S(t) and ES(t) against values computed by hand ------------------------------------


def _made_up_results():
    every = [-5, 0, 1, 3]
    return [
        # correct at every level, twice as fast
        {"status": "correct", "correct_at": {str(t): True for t in every}, "speedup": 2.0},
        # a slowdown, correct only from t = 0 on
        {
            "status": "correct",
            "correct_at": {"-5": False, "0": True, "1": True, "3": True},
            "speedup": 0.5,
        },
        {"status": "compile_fail", "correct_at": {}, "speedup": None},
        {"status": "runtime_fail", "correct_at": {}, "speedup": None},
        {"status": "eager_fail", "correct_at": {}, "speedup": None},
        # wrong values at every level (an accuracy error), fast
        {"status": "correct", "correct_at": {str(t): False for t in every}, "speedup": 4.0},
    ]


def test_s_and_es_match_hand_computed_values():
    results = _made_up_results()
    s = scores.s_scores(results, [-5, 0, 1, 3])
    es = scores.es_scores(results, [-5, 0, 1, 3])
    # t=-5: only the first is correct: (2 * 0.1^5)^(1/6)
    assert s[-5] == pytest.approx((2 * 1e-5) ** (1 / 6))
    # t=0..3: the first two are correct: (2 * 0.5 * 0.1^4)^(1/6)
    for t in (0, 1, 3):
        assert s[t] == pytest.approx((1e-4) ** (1 / 6))
    # below t=1, ES is S
    assert es[-5] == pytest.approx(s[-5]) and es[0] == pytest.approx(s[0])
    # t=1 tolerates the accuracy error (counts 1), not the crash, the compile failure or
    # the eager failure: (2 * 0.5 * 0.1^3 * 1)^(1/6)
    assert es[1] == pytest.approx((1e-3) ** (1 / 6))
    # t=3 also tolerates the crash, the compile failure and (as GraphNet at HEAD does)
    # the eager failure: (2 * 0.5 * 1 * 1 * 1 * 1)^(1/6)
    assert es[3] == pytest.approx(1.0)


def test_slowdown_penalty_p_matches_the_aggregated_form():
    results = _made_up_results()
    s = scores.s_scores(results, [0], p=1.0)
    # GraphNet's aggregated form: alpha^lambda * beta^(lambda*eta*p) * b^(1-lambda), with
    # alpha = gmean(2, 0.5) = 1, lambda = 2/6, beta = 0.5, eta = 1/2
    aggregated = 1.0 ** (2 / 6) * 0.5 ** ((2 / 6) * 0.5 * 1.0) * 0.1 ** (1 - 2 / 6)
    assert s[0] == pytest.approx(aggregated)
    assert s[0] == pytest.approx((2 * 0.25 * 1e-4) ** (1 / 6))


def test_one_comparison_answers_every_tolerance_as_allclose_does(monkeypatch):
    monkeypatch.setattr(scores.Comparison, "CHUNK", 1000)  # several chunks
    rng = np.random.default_rng(0)
    dtypes = ("float16", "bfloat16", "float32", "float64")
    rows = [[scores.tolerance_pair(t, d) for t in range(-10, 6)] for d in dtypes]
    cases = []
    for dt in ("float32", "float64"):
        e = rng.standard_normal(5000).astype(dt)
        for noise in (0, 1e-9, 1e-6, 1e-3, 1e-1, 10):
            cases.append((e, (e + rng.standard_normal(5000) * noise).astype(dt)))
        nan, inf = e.copy(), e.copy()
        nan[3], inf[4500] = np.nan, np.inf
        cases += [(e, nan), (nan, nan.copy()), (inf, inf.copy()), (inf, -inf)]
    ints = rng.integers(0, 5, 100)
    cases += [(ints, ints.copy()), (ints, ints + (np.arange(100) == 7))]
    for e, a in cases:
        firsts = scores.Comparison(e, a).first_closes(rows)
        for row, first in zip(rows, firsts):
            for i, (rtol, atol) in enumerate(row):
                expected = np.allclose(a.astype("float64"), e.astype("float64"), rtol, atol, True)
                assert (i >= first) == expected, (e.dtype, rtol, atol)


GRAPHNET_SCORES = os.path.join(os.path.dirname(__file__), "data", "graphnet_scores")


def test_scores_are_graphnets_for_the_same_logs(tmp_path):
    """S(t) and ES(t) of recorded jit-eval results against what GraphNet's own
    ``analysis_util.calculate_scores`` (at HEAD, default interpretation) computed from the
    logs jit-eval wrote for them (``data/graphnet_scores/make.py`` regenerates both)."""
    with open(os.path.join(GRAPHNET_SCORES, "results.json")) as f:
        results = json.load(f)
    with open(os.path.join(GRAPHNET_SCORES, "expected.json")) as f:
        expected = json.load(f)
    backends = list(expected)
    config = {"warmup": 1, "trials": 5, "backends": backends}
    # the logs GraphNet read are what jit-eval writes for these results
    for path in report.write_graphnet_logs(str(tmp_path), results, config):
        with open(path) as ours, open(os.path.join(GRAPHNET_SCORES, os.path.basename(path))) as f:
            assert ours.read() == f.read()
    levels = range(-10, 5)  # GraphNet's levels for its default interpretation
    kinds = set()
    for backend in backends:
        mine = [r for r in results if r["backend"] == backend]
        kinds.update(r["status"] for r in mine)
        s, es = scores.s_scores(mine, levels), scores.es_scores(mine, levels)
        for t in levels:
            # (the logs hold the speedups to 5 decimals)
            assert s[t] == pytest.approx(expected[backend]["S"][str(t)], rel=1e-4), (backend, t)
            assert es[t] == pytest.approx(expected[backend]["ES"][str(t)], rel=1e-4), (backend, t)
    assert {"correct", "compile_fail", "runtime_fail", "eager_fail"} <= kinds


def test_tolerance_pairs_per_dtype():
    assert scores.tolerance_pair(-5, "float32") == (float(f"{10 ** (-5 * 5.886 / 5):.3g}"), 1e-5)
    assert scores.tolerance_pair(-5, "float16") == (1e-3, 1e-5)
    # bfloat16 has its own row (a substring test would give it float16's)
    assert scores.tolerance_pair(-5, "bfloat16") != scores.tolerance_pair(-5, "float16")
    assert scores.tolerance_pair(-2, "float64") == (float(f"{10 ** (-2.8):.3g}"),) * 2
    assert scores.tolerance_pair(-3, "int64") == (0.0, 0.0)
    assert scores.tolerance_pair(-3, "bool") == (0.0, 0.0)
    e = np.array([1.0, 2.0], dtype="float32")
    assert scores.outputs_close([e], [e + 1e-4], -3) == [True]
    assert scores.outputs_close([e], [e + 1e-4], -6) == [False]
    assert scores.outputs_close([np.array([1, 2])], [np.array([1, 3])], 5) == [False]


def test_summary_counts_errors_and_geomean():
    results = [dict(r, backend="b", error=None) for r in _made_up_results()]
    for r, kind in zip(results[2:5], ("capture_error", "run_error", "eager_error")):
        r["error"] = {"kind": kind, "message": "x"}
    results[5]["error"] = {"kind": "wrong_result", "message": "x"}
    summary = report.summarize(results, ["b"], [-5, 1, 3])["b"]
    assert summary["samples"] == 6 and summary["ok"] == 2 and summary["slowdowns"] == 1
    assert summary["geomean_speedup"] == pytest.approx(1.0)
    assert summary["errors"] == {
        "capture_error": 1,
        "eager_error": 1,
        "run_error": 1,
        "wrong_result": 1,
    }
    assert summary["ES"]["3"] == pytest.approx(1.0)
    assert not math.isnan(summary["S"]["-5"])


# -- samples ---------------------------------------------------------------------------

MODEL = """
import paddle


class GraphModule(paddle.nn.Layer):
    def __init__(self):
        super().__init__()

    def forward(self, parameter_0, parameter_1, data_0, data_1):
        matmul_0 = paddle._C_ops.matmul(data_0, parameter_1, False, False)
        add_0 = paddle._C_ops.add(matmul_0, parameter_0)
        relu_0 = paddle._C_ops.relu(add_0)
        return paddle.gather(relu_0, data_1), relu_0.mean()
"""

WEIGHTS = """
class Program_weight_tensor_parameter_0:
    name = "parameter_0"
    shape = [8]
    dtype = "float32"
    min_val = float("-0.5")
    max_val = float("0.5")
    mean = float("0.01")
    std = float("0.2")
    data = None


class Program_weight_tensor_parameter_1:
    name = "parameter_1"
    shape = [16, 8]
    dtype = "float32"
    low = 0
    high = 0.5
    data = None
"""

INPUTS = """
class Program_weight_tensor_data_0:
    name = "data_0"
    shape = [4, 16]
    dtype = "float32"
    min_val = float("-1.0")
    max_val = float("1.0")
    data = None


class Program_weight_tensor_data_1:
    name = "data_1"
    shape = [3]
    dtype = "int64"
    data = [0, 3, 1]
"""


def write(folder, model=MODEL, weights=WEIGHTS, inputs=INPUTS, name="m"):
    os.makedirs(folder, exist_ok=True)
    for fname, text in (
        ("model.py", model),
        ("weight_meta.py", weights),
        ("input_meta.py", inputs),
    ):
        with open(os.path.join(folder, fname), "w") as f:
            f.write(textwrap.dedent(text))
    with open(os.path.join(folder, "graph_net.json"), "w") as f:
        json.dump({"framework": "paddle", "model_name": name}, f)
    return str(folder)


def test_load_sample_and_draw_inputs_from_a_seed(tmp_path):
    sample = load_sample(write(tmp_path / "s"))
    assert [m.name for m in sample.weights] == ["parameter_0", "parameter_1"]
    assert sample.weights[1].min_val == 0 and sample.weights[1].max_val == 0.5  # low/high
    assert sample.inputs[1].data == [0, 3, 1]
    assert sample.model_name == "m"
    a, b, c = sample.make_inputs(0), sample.make_inputs(0), sample.make_inputs(1)
    for k in a:
        np.testing.assert_array_equal(a[k].numpy(), b[k].numpy())
    assert not np.array_equal(a["data_0"].numpy(), c["data_0"].numpy())
    assert a["data_1"].numpy().tolist() == [0, 3, 1] and a["data_1"].dtype == paddle.int64
    p0 = a["parameter_0"].numpy()
    assert p0.shape == (8,) and p0.min() >= -0.5 and p0.max() <= 0.5
    d0 = a["data_0"].numpy()
    assert d0.shape == (4, 16) and d0.min() >= -1 and d0.max() <= 1
    module = sample.load_module()
    check_signature(sample, module)
    out = module(**a)
    assert list(out[0].shape) == [3, 8]


def test_nested_samples_are_found_in_natural_order(tmp_path):
    for n in (10, 2, 1):
        write(tmp_path / "model" / f"subgraph_{n}")
    found = find_samples([str(tmp_path / "model")])
    assert [os.path.basename(p) for p in found] == ["subgraph_1", "subgraph_2", "subgraph_10"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(SampleError, match="no sample under it"):
        find_samples([str(tmp_path / "empty")])


@pytest.mark.parametrize(
    "weights, inputs, model, problem, file",
    [
        (
            WEIGHTS.replace("shape = [8]", "shape = 8"),
            INPUTS,
            MODEL,
            "'shape' must be",
            "weight_meta.py",
        ),
        (WEIGHTS, INPUTS.replace("[0, 3, 1]", "[0, 3]"), MODEL, "holds 2 values", "input_meta.py"),
        (WEIGHTS, INPUTS.replace('"int64"', '"int65"'), MODEL, "unknown dtype", "input_meta.py"),
        (
            WEIGHTS,
            INPUTS + "\nraise ValueError('boom')\n",
            MODEL,
            "raised ValueError",
            "input_meta.py",
        ),
        (WEIGHTS, INPUTS, MODEL.replace("data_1):", "data_1, data_2):"), "data_2", "model.py"),
        (
            WEIGHTS,
            INPUTS,
            MODEL.replace("class GraphModule", "class Other"),
            "no class GraphModule",
            "model.py",
        ),
    ],
)
def test_malformed_samples_name_the_file_and_the_problem(
    tmp_path, weights, inputs, model, problem, file
):
    folder = write(tmp_path / "bad", model=model, weights=weights, inputs=inputs)
    with pytest.raises(SampleError, match=problem) as info:
        sample = load_sample(folder)
        check_signature(sample, sample.load_module())
    assert info.value.path.endswith(file)


# -- the runner ------------------------------------------------------------------------


class _TestBackends:
    """A backend whose graphs give wrong values, and one that cannot compile."""

    @jit_core.hookimpl
    def jit_register_backends(self, register):
        def wrong(gm, example_inputs):
            def run(*args):
                out = gm.forward(*args)
                return tuple(o + 1 if o.dtype == paddle.float32 else o for o in out)

            return run

        def broken(gm, example_inputs):
            raise RuntimeError("no kernel for this")

        register("test-wrong", wrong)
        register("test-broken", broken)


@pytest.fixture
def test_backends():
    plugins.register_plugin(_TestBackends(), name="test-eval-backends")
    yield
    plugins.unregister_plugin("test-eval-backends")


def _run_in_process(path, backends, tolerances=(-6, -1), triage=False):
    cfg = EvalConfig(
        backends=backends, tolerances=list(tolerances), warmup=1, trials=2, triage=triage
    )
    results = []
    run_sample_in_process(
        path, "s", cfg, lambda m: results.append(m[1]) if m[0] == "result" else None
    )
    return {r["backend"]: r for r in results}


def test_results_are_classified(tmp_path, test_backends):
    good = write(tmp_path / "good")
    by = _run_in_process(good, ["paddle", "test-wrong", "test-broken"])
    ok = by["paddle"]
    assert ok["error"] is None and ok["status"] == "correct"
    assert ok["correct_at"] == {"-6": True, "-1": True}
    assert ok["graphs"] == 1 and ok["breaks"] == 0 and ok["eager_frames"] == 0
    assert ok["speedup"] > 0 and ok["compile_s"] > 0 and ok["outputs"] == 2
    # the untimed calls' profile: the first call compiles and runs the graph once, the
    # warmup calls run it once each
    (first,) = ok["profile"]["first_call"]["graphs"]
    assert first["calls"] == 1 and "first run" in first["compile_ms"]
    (warm,) = ok["profile"]["warmup"]["graphs"]
    assert warm["calls"] == ok["limits"]["warmup"] + ok.get("settle_calls", 0)
    assert by["test-wrong"]["error"]["kind"] == "wrong_result"
    assert by["test-wrong"]["correct_at"] == {"-6": False, "-1": False}
    broken = by["test-broken"]
    assert broken["error"]["kind"] == "backend_compile_error"
    assert broken["status"] == "compile_fail" and "no kernel for this" in broken["error"]["message"]

    raising = write(
        tmp_path / "raising",
        model=MODEL.replace(
            "return paddle.gather", "raise KeyError('bad op')\n        return paddle.gather"
        ),
    )
    r = _run_in_process(raising, ["paddle"])["paddle"]
    assert r["status"] == "eager_fail" and r["error"]["kind"] == "eager_error"
    assert "KeyError" in r["error"]["message"]

    malformed = write(tmp_path / "malformed", inputs=INPUTS.replace("[0, 3, 1]", "[0]"))
    r = _run_in_process(malformed, ["paddle"])["paddle"]
    assert r["error"]["kind"] == "bad_sample" and "input_meta.py" in r["error"]["message"]


def test_triage_names_the_node_a_wrong_backend_gets_wrong(tmp_path, test_backends):
    """``--triage``: a sample with wrong values is run through ``debug.compare``; the
    backend that adds 1 to every float result is wrong from the graph's first node on, a
    correct sample is not triaged."""
    by = _run_in_process(write(tmp_path / "good"), ["paddle", "test-wrong"], triage=True)
    assert "triage" not in by["paddle"]
    wrong = by["test-wrong"]
    assert wrong["error"]["kind"] == "wrong_result"
    report = wrong["triage"]
    assert report["backend"] == "test-wrong" and report["ok"] is False
    (graph,) = report["graphs"]
    assert graph["verdict"] == "over tolerance: node matmul"
    culprit = graph["culprit"]
    assert culprit["kind"] == "node" and "matmul" in culprit["op"], culprit
    assert "; triage: graph 1: node " in wrong["error"]["message"]
    json.dumps(wrong)  # (the result stays JSON)


def test_a_forward_of_args_and_kwargs_is_fed_by_name(tmp_path):
    # GraphNet calls model(**inputs); PaddleX/squeezenet1_1 has forward(self, *args, **kwargs)
    model = MODEL.replace(
        "def forward(self, parameter_0, parameter_1, data_0, data_1):",
        "def forward(self, *args, **kwargs):\n"
        "        parameter_0, parameter_1 = kwargs['parameter_0'], kwargs['parameter_1']\n"
        "        data_0, data_1 = kwargs['data_0'], kwargs['data_1']",
    )
    r = _run_in_process(write(tmp_path / "kwargs", model=model), ["paddle"])["paddle"]
    assert r["status"] == "correct", r["error"]


#: a sample that builds its own weights, as PaddleX/squeezenet1_1 does (its __init__
#: calls squeezenet1_1(pretrained=False)): each GraphModule() draws others
BUILDS_ITS_WEIGHTS = """
import numpy as np
import paddle


class GraphModule(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(16, 8)
        self.norm = paddle.nn.BatchNorm1D(8)
        self.register_buffer("shift", paddle.rand([8]), persistable=False)
        # drawn from numpy's generator, which paddle.seed does not reset
        self.scale = self.create_parameter(
            [8], default_initializer=paddle.nn.initializer.Assign(np.random.rand(8))
        )

    def forward(self, data_0, data_1):
        h = paddle.nn.functional.relu(self.norm(self.fc(data_0)) * self.scale + self.shift)
        return paddle.gather(h, data_1), h.mean()
"""


@pytest.mark.parametrize("copyable", [True, False], ids=["deep-copied", "built-again"])
def test_a_sample_that_builds_its_own_weights_is_compared_with_them(tmp_path, copyable):
    """Was: the reference, the eager and the compiled module were three GraphModule()s with
    three sets of weights, and a correct compile was scored wrong at every level. A module
    that cannot be deep-copied (it holds a lock) is built again and given the weights."""
    model = BUILDS_ITS_WEIGHTS
    if not copyable:
        model = model.replace(
            "super().__init__()", "super().__init__()\n        self.lock = threading.Lock()"
        ).replace("import numpy", "import threading\nimport numpy")
    folder = write(tmp_path / "built", model=model, weights="")
    r = _run_in_process(folder, ["paddle"], tolerances=(-10, -1))["paddle"]
    assert r["status"] == "correct" and r["error"] is None, r["error"]
    assert r["correct_at"] == {"-10": True, "-1": True}


def test_a_sample_that_draws_random_numbers_draws_the_same_eagerly_and_compiled(tmp_path):
    """Dropout in training mode, twice, and a draw of its own: the reference and the first
    compiled call (capture and compile included) are each made right after paddle.seed,
    so they draw the same numbers to the last bit."""
    model = MODEL.replace(
        "relu_0 = paddle._C_ops.relu(add_0)",
        "relu_0 = paddle.nn.functional.dropout(paddle._C_ops.relu(add_0), 0.5, training=True)\n"
        "        relu_0 = relu_0 + paddle.rand(relu_0.shape)\n"
        "        relu_0 = paddle.nn.functional.dropout(relu_0, 0.3, training=True)",
    )
    folder = write(tmp_path / "dropout", model=model)
    r = _run_in_process(folder, ["paddle"], tolerances=(-10, -1))["paddle"]
    assert r["status"] == "correct" and r["error"] is None, r["error"]
    assert r["correct_at"] == {"-10": True, "-1": True}


def test_limits_follow_the_eager_call_and_say_so():
    # default warmup 3, trials 10 and a 300 s limit
    cfg = EvalConfig()
    cheap = plan_limits(cfg, 0.001)
    assert (cheap["warmup"], cheap["trials"], cheap["timeout"]) == (3, 10, 300)
    assert not cheap["scaled"] and cheap["why"] is None
    # PaddleX/DETR-R50/subgraph_11 takes about 80 s per eager call on two cores: one timed
    # call of each, and a limit for the compile, the first call and those two
    slow = plan_limits(cfg, 80.0)
    assert (slow["warmup"], slow["trials"], slow["timeout"]) == (0, 1, 960)
    assert slow["scaled"] and "its eager call took 80 s" in slow["why"]
    assert "trials 1 (configured 3 and 10)" in slow["why"] and "960 s limit" in slow["why"]
    # in between: fewer calls, warmup first
    some = plan_limits(cfg, 10.0)
    assert (some["warmup"], some["trials"], some["timeout"]) == (1, 6, 360)
    # as many calls as configured, still within the configured limit
    assert not plan_limits(cfg, 5.0)["scaled"]


def test_a_slow_sample_gets_fewer_calls_and_a_longer_limit_not_a_timeout(tmp_path, capsys):
    """Was: warmup and trials as configured, and every step under the configured limit,
    for a sample that needs a minute per call: reported as a timeout on every backend.
    Here 0.6 s per call and a 1.5 s limit: 27 calls would take 16 s."""
    model = ("import time\n" + MODEL).replace(
        "return paddle.gather", "time.sleep(0.6)\n        return paddle.gather"
    )
    folder = write(tmp_path / "slow", model=model)
    out = tmp_path / "slow.json"
    args = [folder, "--timeout", "1.5", "--tolerance", "-1", "--json", str(out)]
    assert jit_eval(args) == 0
    captured = capsys.readouterr()
    (r,) = json.loads(out.read_text())["results"]
    assert r["error"] is None and r["status"] == "correct", r["error"]
    limits = r["limits"]
    assert (limits["warmup"], limits["trials"]) == (0, 1) and limits["scaled"]
    assert 1.5 < limits["timeout"] < 20 and limits["eager_s"] >= 0.6
    assert r["eager_stats"] is not None and r["speedup"] > 0
    # the report says so: on the progress line, and counted in the table
    assert "paddle: limits: its eager call took" in captured.err
    assert "(configured 3 and 10)" in captured.err and "(configured 1.5 s)" in captured.err
    head, row = captured.out.splitlines()[:2]
    assert row.split()[head.split().index("scaled")] == "1"


def test_paddle_import_warnings_stay_out_of_a_run(tmp_path):
    """Was: Paddle's 'No ccache found' UserWarning twice per run (this process and the
    workers' fork server); only that warning is filtered, others still show."""
    code = (
        "import sys, warnings\n"
        "from jit_eval.cli import main\n"
        "warnings.warn('other warnings still show')\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    folder = write(tmp_path / "s")
    args = [folder, "--warmup", "0", "--trials", "1", "--tolerance", "-1", "--quiet"]
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    assert "No ccache found" not in proc.stderr
    assert "other warnings still show" in proc.stderr


def test_log_lines_carry_graphnet_markers(tmp_path, test_backends):
    by = _run_in_process(write(tmp_path / "good"), ["paddle", "test-broken"])
    config = {"warmup": 1, "trials": 2, "backends": ["paddle"]}
    ok = "\n".join(report.graphnet_log_lines(by["paddle"], config))
    assert "[Processing]" in ok and "[Datatype][compiled]: float32 float32" in ok
    assert "[Shape]" in ok and "match:True" in ok and "[Speedup][e2e]:" in ok
    assert "[Correctness][equal]: 1 1" in ok and "[Correctness][all_close_atol_1.00E-05" in ok
    broken = "\n".join(report.graphnet_log_lines(by["test-broken"], config))
    # GraphNet reads a missing compiled datatype line as a compile failure
    assert "[Datatype][eager]" in broken and "[Datatype][compiled]" not in broken


def test_a_crash_or_a_hang_costs_one_sample(tmp_path):
    """Each sample runs in a worker process: a sample that kills its process, one that
    hangs past the limit and a good one, run two at a time; the good one is scored."""
    root = tmp_path / "set"
    write(root / "a_good")
    write(
        root / "b_crash",
        model=MODEL.replace(
            "return paddle.gather", "import os; os._exit(3)\n        return paddle.gather"
        ),
    )
    write(
        root / "c_hang",
        model=MODEL.replace(
            "return paddle.gather", "while True: pass\n        return paddle.gather"
        ),
    )
    paths = find_samples([str(root)])
    cfg = EvalConfig(backends=["paddle"], tolerances=[-1], warmup=0, trials=1, timeout=3, jobs=2)
    results = run(paths, ["good", "crash", "hang"], cfg)
    good, crash, hang = results
    assert good["error"] is None and good["speedup"] > 0
    assert crash["error"]["kind"] == "crash" and "exit code 3" in crash["error"]["message"]
    assert hang["error"]["kind"] == "timeout" and "3 s limit" in hang["error"]["message"]
    assert crash["status"] == hang["status"] == "eager_fail"


class _CrashingBackend:
    @jit_core.hookimpl
    def jit_register_backends(self, register):
        def crash(gm, example_inputs):
            os._exit(7)  # ONNX Runtime aborting the process, say

        register("test-crash", crash)


def test_a_backend_that_kills_its_process_costs_only_its_result(tmp_path, monkeypatch):
    import multiprocessing

    from jit_eval import runner

    # forked workers inherit this process's plugins (the fork server's would not)
    monkeypatch.setattr(runner, "_context", lambda: multiprocessing.get_context("fork"))
    plugins.register_plugin(_CrashingBackend(), name="test-crash-backend")
    try:
        paths = find_samples([write(tmp_path / "good")])
        cfg = EvalConfig(backends=["test-crash", "paddle"], tolerances=[-1], warmup=0, trials=1)
        arrived = []
        crashed, ok = run(paths, ["good"], cfg, on_result=arrived.append)
    finally:
        plugins.unregister_plugin("test-crash-backend")
    assert crashed["error"]["kind"] == "crash" and "exit code 7" in crashed["error"]["message"]
    assert crashed["status"] == "runtime_fail"
    # the backend after it ran in a worker of its own
    assert ok["error"] is None and ok["status"] == "correct"
    assert sorted(r["backend"] for r in arrived) == ["paddle", "test-crash"]


def test_cli_refuses_unknown_backends_and_bad_ranges(tmp_path, capsys):
    folder = write(tmp_path / "s")
    with pytest.raises(SystemExit):
        jit_eval([folder, "--backend", "nope"])
    err = capsys.readouterr().err
    assert "unknown backend 'nope'" in err and "paddle" in err and "sot" in err
    with pytest.raises(SystemExit):
        jit_eval([folder, "--tolerance", "-1..-5"])
    assert "is empty" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        jit_eval([str(tmp_path / "missing")])
    assert "no such folder" in capsys.readouterr().err


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path, capsys):
    root = tmp_path / "set"
    write(root / "a")
    write(root / "b")
    out = str(tmp_path / "run.json")
    args = [str(root), "--json", out, "--tolerance", "-1", "--warmup", "0", "--trials", "1"]
    assert jit_eval(args + ["--quiet"]) == 0
    assert not os.path.exists(out + ".partial")  # removed once the JSON is written
    with open(out) as f:
        first = json.load(f)["results"]
    # as if the run had been stopped after sample a: its journal, no final JSON
    os.remove(out)
    with open(out + ".partial", "w") as f:
        f.write(json.dumps({"settings": {"tolerances": [-1], "warmup": 0, "trials": 1}}) + "\n")
        f.write(json.dumps(first[0]) + "\n" + '{"cut sho')
    capsys.readouterr()
    assert jit_eval(args + ["--resume"]) == 0
    err = capsys.readouterr().err
    assert "resuming, 1 results kept" in err
    with open(out) as f:
        resumed = json.load(f)["results"]
    # a was not run again (its timing would differ), b was
    assert resumed[0] == first[0] and resumed[1]["name"].endswith("b")
    assert resumed[1]["status"] == "correct"
    # other settings: refused, saying which
    with pytest.raises(SystemExit):
        jit_eval(args[:-1] + ["2", "--resume"])
    assert "run with trials=1, this run has 2" in capsys.readouterr().err


def test_json_to_stdout_is_the_json_alone(tmp_path, capsys):
    root = tmp_path / "set"
    write(root / "a")
    write(root / "b")
    args = [str(root), "--json", "-", "--tolerance", "-1", "--warmup", "0", "--trials", "1"]
    assert jit_eval(args) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)  # nothing else on stdout
    assert [r["status"] for r in data["results"]] == ["correct", "correct"]
    assert "S(t) paddle" in captured.err  # the table went to stderr
    assert "left)" in captured.err  # the progress line says the time left
    assert not list(tmp_path.glob("*.partial"))


# -- extract() -------------------------------------------------------------------------


class Branchy(paddle.nn.Layer):
    """Two graph breaks (a tensor-dependent branch, a print) and layers of each kind
    extract() writes functionally."""

    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(6, 8)
        self.bn = paddle.nn.BatchNorm1D(8)
        self.emb = paddle.nn.Embedding(10, 8)
        self.norm = paddle.nn.LayerNorm(8)

    def forward(self, x, ids):
        h = self.bn(self.fc(x)) + self.emb(ids)
        if h.sum() > 0:
            h = paddle.nn.functional.gelu(h)
        else:
            h = h * 0.5
        print("", end="")
        return self.norm(h).mean(axis=-1), ids * 2


def test_extract_writes_each_graph_and_the_samples_rerun_eager_equal(tmp_path):
    paddle.seed(1)
    model = Branchy()
    model.eval()
    x = paddle.randn([4, 6])
    ids = paddle.to_tensor([1, 5, 0, 9])
    expected = model(x, ids)
    res = jit_core.extract(model, x, ids, out=str(tmp_path), name="branchy")
    np.testing.assert_allclose(res.result[0].numpy(), expected[0].numpy(), rtol=1e-6)
    assert len(res.graphs) == 3 and res.order == [0, 1, 2]
    index = json.load(open(os.path.join(res.path, "extract_index.json")))
    assert index["order"] == ["subgraph_0", "subgraph_1", "subgraph_2"]
    assert index["graphs"][0]["frame"] == "forward"
    assert "resume" in index["graphs"][1]["frame"]
    assert find_samples([res.path]) == [g.path for g in res.graphs]
    for g in res.graphs:
        sample = load_sample(g.path)
        module = sample.load_module()
        check_signature(sample, module)
        # the small integer input keeps its values, as GraphNet keeps them
        for meta in sample.inputs:
            if meta.dtype == "int64":
                assert meta.data == [1, 5, 0, 9]
        out = module(**sample.make_inputs(0, overrides=g.values))
        out = out if isinstance(out, (list, tuple)) else [out]
        got = [t for t in out if isinstance(t, paddle.Tensor)]
        assert len(got) == len(g.outputs)
        for a, b in zip(got, g.outputs):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        # and on inputs drawn from its metas it runs, correct on the paddle backend
        r = _run_in_process(g.path, ["paddle"])["paddle"]
        assert r["error"] is None, r["error"]
    # the recording backend was registered only while extract() ran
    assert "jit-extract" not in jit_core.backends()


def test_plots_show_every_sample_failures_included(tmp_path):
    from jit_eval import plots

    pytest.importorskip("matplotlib")
    results = [
        {"name": "a", "backend": "paddle", "error": None, "speedup": 1.5},
        {"name": "b", "backend": "paddle", "error": {"kind": "run_error"}, "speedup": None},
        {"name": "a", "backend": "onnxrt", "error": None, "speedup": 3.0},
        {"name": "b", "backend": "onnxrt", "error": None, "speedup": 0.5},
    ]
    points = plots.speedup_points(results, ["paddle", "onnxrt"])
    assert points == [
        {"backend": "paddle", "speedups": [1.5], "failed": 1},
        {"backend": "onnxrt", "speedups": [3.0, 0.5], "failed": 0},
    ]
    summary = {b: {"S": {"0": 1.0}, "ES": {"0": 1.0}} for b in ("paddle", "onnxrt")}
    written = plots.plot_all(str(tmp_path), results, summary, [0])
    assert [os.path.basename(p) for p in written] == ["scores.png", "speedups.png"]
    assert all(os.path.getsize(p) > 1000 for p in written)


def test_plots_without_matplotlib_name_the_package(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(SystemExit):
        jit_eval([write(tmp_path / "s"), "--plot", str(tmp_path / "plots")])
    err = capsys.readouterr().err
    assert "needs the 'matplotlib' package: pip install matplotlib" in err


def test_a_worker_that_finishes_between_two_looks_is_not_a_crash(tmp_path, monkeypatch):
    """The runner is woken without this worker's pipe being ready (by another worker, or a
    deadline), while the worker sends its last results and exits: they are in the pipe
    still, so the sample is scored, not reported as a worker that died (exit code 0).
    It happened under load in CI."""
    from multiprocessing.connection import wait as real_wait

    from jit_eval import runner

    def late_wait(objects, timeout=None):
        # let the worker finish and exit first, then report nothing ready
        sentinels = [o for o in objects if isinstance(o, int)]
        real_wait(sentinels, 60)
        return []

    monkeypatch.setattr(runner, "wait", late_wait)
    paths = find_samples([write(tmp_path / "good")])
    cfg = EvalConfig(backends=["paddle"], tolerances=[-1], warmup=0, trials=1, timeout=30, jobs=1)
    (good,) = run(paths, ["good"], cfg)
    assert good["error"] is None and good["speedup"] > 0
