"""``jit-eval --cluster``: the same run spread over a Ray cluster, one task per sample and
backend (``pip install 'jit-eval[cluster]'``; Ray has wheels for Python 3.10 and newer).

Each task ships the sample's files (a few KB of code and metas) to whichever node runs
it, and runs them there with the local runner: in a worker process of its own, under the
same timeout, so that a backend that crashes or hangs costs that result and never the
Ray worker. Results stream back as tasks finish, in the same form as a local run (JSON,
GraphNet logs, plots). ``JIT_*`` and ``GLOG_*`` variables of this process go to the
tasks, so a Redis compile-cache tier (``JIT_CORE_REMOTE_CACHE``) is shared by every node.
Ray is imported here only.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from jit_core.errors import MissingDependencyError

from .runner import CRASH, Done, EvalConfig, OnResult, OnSample, Results, _fail, _new_result
from .scores import RUNTIME_FAIL

#: the Pythons Ray has wheels for
RAY_PYTHONS = (3, 10)


def unavailable_reason() -> str:
    """Why ``--cluster`` cannot run here (empty when it can)."""
    if sys.version_info[:2] < RAY_PYTHONS:
        return (
            f"Ray has no wheels for Python {sys.version_info[0]}.{sys.version_info[1]} "
            "(3.10 or newer)"
        )
    try:
        import ray  # noqa: F401
    except ImportError:
        return "it needs the 'ray' package: pip install 'jit-eval[cluster]'"
    return ""


class ClusterUnreachable(ConnectionError):
    """``ray.init`` could not join the cluster at ``address``; the message says why."""

    def __init__(self, address: str, cause: BaseException):
        text = str(cause).strip().splitlines()
        why = f"{type(cause).__name__}: {text[0] if text else ''}".rstrip(": ")
        if "auth" in f"{cause} {cause.__cause__ or ''}".lower():
            why += " (a cluster with token authentication needs RAY_AUTH_TOKEN set here)"
        super().__init__(f"cannot join the Ray cluster at {address!r}: {why}")


def _require_ray():
    why = unavailable_reason()
    if why:
        if "pip install" in why:
            raise MissingDependencyError("jit-eval --cluster", "ray", "'jit-eval[cluster]'")
        raise RuntimeError(f"jit-eval --cluster is not available: {why}")
    import ray

    return ray


def _sample_files(path: str) -> Dict[str, bytes]:
    """The files of a sample folder (its code and metas), by path relative to it."""
    files = {}
    for folder, _, names in os.walk(path):
        for name in names:
            full = os.path.join(folder, name)
            with open(full, "rb") as f:
                files[os.path.relpath(full, path)] = f.read()
    return files


def _run_task(files: Dict[str, bytes], path: str, name: str, cfg: EvalConfig) -> Dict[str, Any]:
    """One sample on one backend, on a node: the files written to a folder there, run by the
    local runner (a worker process, the timeout), the result named by the original path."""
    from .runner import run

    with tempfile.TemporaryDirectory(prefix="jit_eval_") as folder:
        for rel, data in files.items():
            target = os.path.join(folder, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)
        (result,) = run([folder], [name], cfg)
    import ray

    result["sample"] = path
    result["node"] = ray.get_runtime_context().get_node_id()
    return result


def _task_env() -> Dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(("JIT_", "GLOG_"))}


def run_on_ray(
    address: str,
    paths: Sequence[str],
    names: Sequence[str],
    cfg: EvalConfig,
    on_sample: Optional[OnSample] = None,
    on_result: Optional[OnResult] = None,
    done: Optional[Done] = None,
    task_cpus: float = 1.0,
    task_gpus: float = 0.0,
) -> List[Dict[str, Any]]:
    """``runner.run`` on the Ray cluster at ``address`` (``ray://HOST:PORT``, a GCS
    address, or ``auto`` for a Ray started here), each task asking for ``task_cpus`` CPUs
    and ``task_gpus`` GPUs."""
    ray = _require_ray()
    started_here = not ray.is_initialized()
    if started_here:
        kwargs: Dict[str, Any] = {
            "log_to_driver": False,
            "runtime_env": {"env_vars": _task_env()},
        }
        if address != "auto":
            kwargs["address"] = address
        else:
            kwargs["include_dashboard"] = False
        try:
            ray.init(**kwargs)
        except Exception as e:  # Ray's errors differ by cause and release
            raise ClusterUnreachable(address, e) from e
    try:
        return _schedule(ray, paths, names, cfg, on_sample, on_result, done, task_cpus, task_gpus)
    finally:
        if started_here:
            ray.shutdown()


def _schedule(ray, paths, names, cfg, on_sample, on_result, done, task_cpus, task_gpus):
    task = ray.remote(_run_task).options(
        num_cpus=task_cpus, num_gpus=task_gpus, max_retries=0, scheduling_strategy="SPREAD"
    )
    results = Results(paths, names, cfg.backends, on_sample, on_result, done)
    todo = results.todo()
    files = {p: ray.put(_sample_files(p)) for p in {path for path, _, _ in todo}}
    pending: Dict[Any, Tuple[str, str, str]] = {}
    for path, name, backend in todo:
        one = replace(cfg, backends=[backend], jobs=1)
        pending[task.remote(files[path], path, name, one)] = (path, name, backend)
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            path, name, backend = pending.pop(ref)
            try:
                result = ray.get(ref)
            except Exception as e:  # noqa: BLE001 - the node or its worker was lost
                result = _fail(
                    _new_result(path, name, backend),
                    RUNTIME_FAIL,
                    CRASH,
                    f"the Ray task was lost: {type(e).__name__}: {str(e)[:300]}",
                )
            results.add(result)
    return results.ordered()


__all__ = ["RAY_PYTHONS", "run_on_ray", "unavailable_reason"]
