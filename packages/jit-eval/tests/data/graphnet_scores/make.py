"""Regenerate this folder's test data: jit-eval results of a few small samples on backends
that are correct, wrong, broken, and crashing in a timed call (``results.json``; jit-core
runs a frame eagerly where its compiled graph raises, so that last one is the paddle
backend's results as the runner records a timed call that raised), the GraphNet-form logs
jit-eval writes for them (``<backend>.log``), and the S(t) and ES(t) that GraphNet's own
``graph_net_bench.analysis_util.calculate_scores`` (default interpretation, p = 0,
b = 0.1) computes from those logs (``expected.json``).

    python make.py /path/to/GraphNet    # a checkout of PaddlePaddle/GraphNet (needs scipy)

``test_eval.py::test_scores_are_graphnets_for_the_same_logs`` holds jit-eval's scores to
``expected.json`` and checks that the logs are what jit-eval writes for the results.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BACKENDS = ["paddle", "test-wrong", "test-broken", "test-crashing"]
#: the fixed path the results and logs name each sample by
SAMPLE_ROOT = "/samples"


def _results():
    import paddle

    import jit_core
    from jit_core import plugins
    from jit_eval.runner import EvalConfig, run_sample_in_process

    sys.path.insert(0, os.path.join(HERE, "..", ".."))
    from test_eval import INPUTS, MODEL, WEIGHTS, write

    class Backends:
        @jit_core.hookimpl
        def jit_register_backends(self, register):
            def wrong(gm, example_inputs):
                def run(*args):
                    out = gm.forward(*args)
                    return tuple(o * 1.001 if o.dtype == paddle.float32 else o for o in out)

                return run

            def broken(gm, example_inputs):
                raise RuntimeError("no kernel for this")

            register("test-wrong", wrong)
            register("test-broken", broken)

    plugins.register_plugin(Backends(), name="graphnet-scores-data")
    models = {
        "small": MODEL,
        "tiny": MODEL.replace("relu_0.mean()", "relu_0.sum()"),
        "eager-fails": MODEL.replace(
            "return paddle.gather", "raise KeyError('bad op')\n        return paddle.gather"
        ),
    }
    cfg = EvalConfig(backends=BACKENDS[:-1], tolerances=list(range(-10, 6)), warmup=1, trials=5)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in models.items():
            path = write(os.path.join(tmp, name), model=model, weights=WEIGHTS, inputs=INPUTS)

            def keep(message, name=name):
                if message[0] == "result":
                    message[1]["sample"] = f"{SAMPLE_ROOT}/{name}"
                    results.append(message[1])

            run_sample_in_process(path, name, cfg, keep)
    from jit_eval import scores
    from jit_eval.runner import RUN_ERROR, _fail

    for r in [r for r in results if r["backend"] == "paddle"]:
        crashed = json.loads(json.dumps(r))
        crashed["backend"] = BACKENDS[-1]
        if crashed["status"] == scores.CORRECT:
            for key in ("eager_ms", "compiled_ms", "eager_stats", "compiled_stats", "speedup"):
                crashed[key] = None
            _fail(crashed, scores.RUNTIME_FAIL, RUN_ERROR, "a timed call raised RuntimeError")
        results.append(crashed)
    return results


def _graphnet_scores(graphnet: str, logs: dict) -> dict:
    sys.path.insert(0, graphnet)
    from graph_net_bench.analysis_util import calculate_scores, parse_logs_to_data
    from graph_net_bench.default_positive_tolerance_interpretation import (
        DefaultPositiveToleranceInterpretation,
    )

    out = {}
    for backend, path in logs.items():
        with contextlib.redirect_stdout(io.StringIO()):
            samples = parse_logs_to_data(path)
            interpretation = DefaultPositiveToleranceInterpretation()
            s = calculate_scores(samples, interpretation, p=0, b=0.1, type="St")
            es = calculate_scores(samples, interpretation, p=0, b=0.1, type="ESt")
        out[backend] = {
            "S": {str(t): float(v) for t, v in s.items()},
            "ES": {str(t): float(v) for t, v in es.items()},
        }
    return out


def main() -> None:
    from jit_eval import report

    results = _results()
    with open(os.path.join(HERE, "results.json"), "w") as f:
        json.dump(results, f, indent=1)  # key order kept: the logs follow it
    config = {"warmup": 1, "trials": 5, "backends": BACKENDS}
    logs = dict(zip(BACKENDS, report.write_graphnet_logs(HERE, results, config)))
    expected = _graphnet_scores(sys.argv[1], logs)
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
