"""The export worker: a child process that runs paddle2onnx.

paddle2onnx aborts the whole process (SIGABRT, from C++) when a graph holds an operator
it cannot convert, so it never runs inside the user's process. The parent sends one JSON
request per line on stdin and reads one JSON reply per line; everything paddle2onnx
prints goes to stderr, which the parent keeps for the error message.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # paddle2onnx prints to stdout: keep it off the protocol
    import warnings

    warnings.filterwarnings("ignore")
    import paddle2onnx
    from paddle2onnx import paddle2onnx_cpp2py_export as cpp

    supported = sorted(set(cpp.get_all_supported_operators_pir()))
    replies.write(
        json.dumps({"ready": True, "version": paddle2onnx.__version__, "supported": supported})
        + "\n"
    )
    for line in sys.stdin:
        req = json.loads(line)
        try:
            data = paddle2onnx.export(
                req["model"],
                req["params"],
                opset_version=req["opset"],
                auto_upgrade_opset=True,
                enable_onnx_checker=True,
                # "polygraphy", the default, pip-installs packages at run time
                optimize_tool="None",
            )
            with open(req["out"], "wb") as f:
                f.write(data)
            reply: Dict[str, Any] = {"ok": True}
        except Exception as e:  # noqa: BLE001 - every failure goes back to the parent
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        replies.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
