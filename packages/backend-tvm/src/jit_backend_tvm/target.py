"""The compilation target: the host CPU as LLVM sees it.

TVM 0.27 describes targets as dicts. The default names the host's triple and CPU (so LLVM
uses every vector extension the machine has: AVX2/FMA, AVX-512, NEON) and its physical
cores (MetaSchedule sizes parallel loops for them).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Dict, Union

TargetSpec = Union[str, Dict[str, Any], None]


def physical_cores() -> int:
    try:
        import psutil

        n = psutil.cpu_count(logical=False)
    except ImportError:  # psutil comes with the package on 3.10+; be lenient anyway
        n = None
    return int(n or os.cpu_count() or 1)


def host_target() -> Dict[str, Any]:
    """``{"kind": "llvm", "mtriple": ..., "mcpu": ..., "num-cores": ...}`` for this machine."""
    from tvm.target import codegen

    spec: Dict[str, Any] = {"kind": "llvm", "num-cores": physical_cores()}
    triple = codegen.llvm_get_system_triple()
    cpu = codegen.llvm_get_system_cpu()
    if triple:
        spec["mtriple"] = str(triple)
    if cpu and cpu != "generic":
        spec["mcpu"] = str(cpu)
    return spec


def make_target(spec: TargetSpec = None):
    """A ``tvm.target.Target`` from a dict, a string, or None (the host CPU)."""
    import tvm

    if spec is None:
        spec = host_target()
    try:
        target = tvm.target.Target(spec)
    except Exception as e:  # TVM raises its own error types
        raise ValueError(f"TVM cannot make a target of {spec!r}: {str(e).strip()[:300]}") from e
    if target.kind.name != "llvm":
        raise ValueError(
            f"the tvm backend compiles for CPUs (an 'llvm' target); {spec!r} is "
            f"{target.kind.name!r}"
        )
    return target


def target_key(target) -> str:
    """A short, stable name for a target and the TVM that compiles for it: tuning records
    and compiled libraries are only valid for both."""
    import tvm

    text = json.dumps([str(target), tvm.__version__], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
