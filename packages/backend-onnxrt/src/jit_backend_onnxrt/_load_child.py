"""The first-load worker: a child process where ONNX Runtime first loads each model.

ONNX Runtime can die of a signal on a model (an uncaught ``std::length_error`` aborts;
1.19's optimizer divides by zero on VGG11 with a dynamic batch), which in the user's
process would end the program. So each new model is first loaded here, with the graph
optimizations the user asked for, and run once on the capture's inputs; ONNX Runtime
writes the optimized model to a file, which the parent loads with optimizations off
(``first_load``). The parent sends one JSON request per line on stdin and reads one JSON
reply per line (before it, a line saying the model is being run); what ONNX Runtime
prints goes to stderr, which the parent keeps for the message when this process dies.
"""

from __future__ import annotations

import json
import os
import sys


def _load(ort, req: dict, replies) -> dict:
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, req["level"])
    options.log_severity_level = 3
    for name in ("intra_op_num_threads", "inter_op_num_threads"):
        if req.get(name) is not None:
            setattr(options, name, req[name])
    if req.get("optimized"):
        options.optimized_model_filepath = req["optimized"]
    try:
        session = ort.InferenceSession(req["model"], options, providers=req["providers"])
    except Exception as e:  # noqa: BLE001 - the parent maps ORT's error to its own
        return {"ok": False, "error": str(e)}
    if not req.get("feeds"):
        return {"ok": True, "ran": False}
    import numpy as np

    with np.load(req["feeds"]) as stored:
        named = {name: stored[f"a{i}"] for i, name in enumerate(req["names"])}
    wanted = [i.name for i in session.get_inputs()]
    if any(n not in named for n in wanted):
        return {"ok": True, "ran": False}
    # the parent learns which step ONNX Runtime died in, if it does
    replies.write(json.dumps({"step": "running"}) + "\n")
    try:
        session.run(None, {n: named[n] for n in wanted})
    except Exception as e:  # noqa: BLE001 - a run error is raised again in the parent
        return {"ok": True, "ran": False, "run_error": str(e)[:300]}
    return {"ok": True, "ran": True}


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # keep anything printed off the protocol
    import onnxruntime as ort

    replies.write(json.dumps({"ready": True, "version": ort.__version__}) + "\n")
    for line in sys.stdin:
        replies.write(json.dumps(_load(ort, json.loads(line), replies)) + "\n")


if __name__ == "__main__":
    main()
