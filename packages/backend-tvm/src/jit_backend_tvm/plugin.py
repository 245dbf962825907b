"""Registers the backend through jit-core's hook, like any plugin.

Where it cannot run (no TVM wheels before Python 3.10) the backend is still listed, with the
reason as ``unavailable``: ``optimize`` then raises it at once, or with ``fallback=True`` runs on the
paddle backend with one warning.
"""

from __future__ import annotations

import sys
from typing import List, Optional, Tuple

from jit_core import hookimpl

#: apache-tvm 0.27 publishes wheels for these Pythons only
MIN_PYTHON = (3, 10)
#: what the package installs with TVM (pyproject.toml's dependencies, on Python 3.10+)
TVM_PACKAGES = (
    "'apache-tvm==0.27.*' 'apache-tvm-ffi>=0.1.14,<0.1.15' psutil cloudpickle xgboost-cpu"
)


def unavailable_reason(python: Optional[Tuple[int, int]] = None) -> str:
    """Why the backend cannot run on this Python, each reason naming the missing package;
    empty when it can (``python``: a ``(major, minor)`` pair, default this one; for tests)."""
    from jit_core.kit.onnx import export

    python = tuple(python or sys.version_info[:2])
    reasons: List[str] = []
    if python < MIN_PYTHON:
        reasons.append(
            f"apache-tvm 0.27 has wheels for Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]}+ only; "
            f"this is Python {python[0]}.{python[1]}"
        )
    elif export.installed_version("apache-tvm") is None:
        # removed by hand, or the package installed with --no-deps
        reasons.append(
            "apache-tvm is not installed (jit-backend-tvm brings it on Python 3.10+): "
            f"pip install {TVM_PACKAGES}"
        )
    why_not_export = export.unavailable_reason(python)
    if why_not_export:
        reasons.append(why_not_export)
    return "; ".join(reasons)


@hookimpl
def jit_register_backends(register):
    def compile_graph(gm, example_inputs, **options):
        from .backend import compile_graph

        return compile_graph(gm, example_inputs, **options)

    register(
        "tvm",
        compile_graph,
        description="Apache TVM (Relax) for the host CPU, tuned with MetaSchedule",
        inference_only=True,
        dynamic_shapes=True,
        unavailable=unavailable_reason(),
        # a first build tunes its kernels for minutes: backend="auto" tries tvm only when
        # named in its candidates
        auto_candidate=False,
    )
