"""The first-load worker: a child process where ONNX Runtime first loads and runs each model.

ONNX Runtime can die of a signal on a model (an uncaught ``std::length_error`` aborts;
1.19's optimizer divides by zero on VGG11 with a dynamic batch), at load or at its first
run, which in the user's process would end the program. So each new model is first
loaded here, with the graph optimizations the user asked for, which writes the optimized
model to a file; that file is then loaded here as the parent will load it (optimizations
off), and run on the inputs the parent will run it on while it builds (the capture's, and
for a model with dynamic dimensions the other sizes it is checked at). The parent sends
one JSON request per line on stdin and reads one JSON reply per line; before it, a
``{"step": "running N"}`` line as run N starts (the parent loads its own session while
the first runs). What ONNX Runtime prints goes to stderr, which the parent keeps for the
message when this process dies.
"""

from __future__ import annotations

import json
import os
import sys


def _options(ort, req: dict, level: str):
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    # errors are logged: where ONNX Runtime then dies, the parent's message quotes the
    # node it names
    options.log_severity_level = 3
    for name in ("intra_op_num_threads", "inter_op_num_threads"):
        if req.get(name) is not None:
            setattr(options, name, req[name])
    return options


def _load(ort, req: dict, replies) -> dict:
    options = _options(ort, req, req["level"])
    optimized = req.get("optimized")
    if optimized:
        options.optimized_model_filepath = optimized
    try:
        session = ort.InferenceSession(req["model"], options, providers=req["providers"])
        if optimized and os.path.exists(optimized):
            # what the parent runs: the optimized model, loaded with optimizations off
            del session
            plain = _options(ort, req, "ORT_DISABLE_ALL")
            session = ort.InferenceSession(optimized, plain, providers=req["providers"])
    except Exception as e:  # noqa: BLE001 - the parent maps ORT's error to its own
        return {"ok": False, "error": str(e)}
    runs = req.get("runs") or []
    if not runs:
        return {"ok": True, "ran": 0}
    import numpy as np

    # memory-mapped: the parent wrote them to a memory file system where it could
    params = {name: np.load(path, mmap_mode="r") for name, path in req.get("params", [])}
    wanted = [i.name for i in session.get_inputs()]
    for index, run in enumerate(runs):
        feeds = dict(params)
        feeds.update((name, np.load(path, mmap_mode="r")) for name, path in run)
        missing = [n for n in wanted if n not in feeds]
        if missing:
            return {"ok": True, "ran": index, "not_run": f"no value for inputs {missing}"}
        # the parent learns which run ONNX Runtime died in, if it does
        replies.write(json.dumps({"step": f"running {index}"}) + "\n")
        try:
            session.run(None, {n: feeds[n] for n in wanted})
        except Exception as e:  # noqa: BLE001 - a run error is raised again in the parent
            return {"ok": True, "ran": index, "run_error": str(e)[:300]}
    return {"ok": True, "ran": len(runs)}


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # keep anything printed off the protocol
    import onnxruntime as ort

    replies.write(json.dumps({"ready": True, "version": ort.__version__}) + "\n")
    for line in sys.stdin:
        replies.write(json.dumps(_load(ort, json.loads(line), replies)) + "\n")


if __name__ == "__main__":
    main()
