"""The conformance suite every backend must pass: ``pytest conformance --backend NAME``."""

from __future__ import annotations

import os
from typing import Dict, List

import paddle
import pytest

# every graph of the suite is linted after each graph pass (jit_core.passes.manager)
os.environ.setdefault("JIT_DEBUG", "1")

import jit_core

from .helpers import use_backend_tolerance


def _backends(config) -> List[str]:
    return [name.strip() for name in config.getoption("--backend").split(",") if name.strip()]


def _unavailable(name: str) -> str:
    found = jit_core.backends().get(name)
    return found.unavailable if found is not None else ""


def _n_a(config) -> Dict[str, str]:
    """The backends asked for that are installed but cannot run here, with the reason."""
    return {name: why for name in _backends(config) for why in [_unavailable(name)] if why}


def pytest_generate_tests(metafunc):
    """A test that takes ``backend`` (itself or through its fixtures) runs once per backend
    asked for; one that does not runs once, in the first backend's column: it would do the
    same in every column. (The autouse fixtures below read the column from the test's
    parameters instead of taking ``backend``, else every test would take it.)"""
    names = _backends(metafunc.config)
    if len(names) > 1 and "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", names, indirect=True, scope="session")


def _backend_of(item) -> str:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "backend" in callspec.params:
        return callspec.params["backend"]
    return _backends(item.config)[0]


def pytest_report_header(config):
    return [
        f"conformance on backend {name!r}: n/a here ({why})" for name, why in _n_a(config).items()
    ]


def pytest_collection_modifyitems(config, items):
    """A backend that is installed but cannot run here (tvm on 3.8/3.9; tensorrt without
    TensorRT or a CUDA device) makes every cell of its column n/a: each test is skipped
    with the reason, never passed."""
    n_a = _n_a(config)
    if not n_a:
        return
    marks = {
        name: pytest.mark.skip(reason=f"n/a: backend {name!r}: {why}") for name, why in n_a.items()
    }
    for item in items:
        if "backend" in getattr(item, "fixturenames", ()):
            mark = marks.get(_backend_of(item))
            if mark is not None:
                item.add_marker(mark)


def pytest_terminal_summary(terminalreporter, config):
    n_a = _n_a(config)
    if not n_a:
        return
    skipped = terminalreporter.stats.get("skipped", [])
    for name, why in n_a.items():
        count = sum(1 for report in skipped if f"n/a: backend {name!r}" in str(report.longrepr))
        terminalreporter.write_line(f"backend {name!r}: n/a here, {count} tests not run ({why})")


@pytest.fixture(scope="session")
def backend(request) -> str:
    return _installed(getattr(request, "param", None) or _backends(request.config)[0])


def _installed(name: str) -> str:
    installed = jit_core.backends()
    if name not in installed:
        pytest.exit(f"--backend {name!r} is not installed; installed: {', '.join(installed)}", 2)
    return name


#: a backend's compile cache for the whole run, in this folder where set (``NAME`` in
#: capitals: ``JIT_CONFORMANCE_CACHE_DIR_TVM``): nox shares tvm's between the Python
#: versions of a run (what tvm compiled for 3.10 is loaded on 3.11 and 3.12, as a user's
#: warm cache would be)
SHARED_CACHE_ENV = "JIT_CONFORMANCE_CACHE_DIR_{}"


@pytest.fixture(scope="session", autouse=True)
def _cache_dirs(tmp_path_factory):
    """Backends that keep a compile cache on disk keep it in a folder of the run's own,
    one per backend (or the shared one above): ``_compile_cache`` picks the test's. Until
    then (what a module's fixtures build), a folder of the run's too."""
    from jit_core.cache.disk import ENV_VAR

    old = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = str(tmp_path_factory.mktemp("jit_core_cache"))
    yield {}
    if old is None:
        os.environ.pop(ENV_VAR, None)
    else:
        os.environ[ENV_VAR] = old


@pytest.fixture(autouse=True)
def _compile_cache(request, _cache_dirs, tmp_path_factory, monkeypatch):
    """The test's backend's compile cache folder and tolerances."""
    from jit_core.cache.disk import ENV_VAR

    backend = _installed(_backend_of(request.node))
    folder = _cache_dirs.get(backend)
    if folder is None:
        shared = os.environ.get(SHARED_CACHE_ENV.format(backend.upper()))
        folder = shared or str(tmp_path_factory.mktemp(f"jit_core_cache_{backend}"))
        _cache_dirs[backend] = folder
    monkeypatch.setenv(ENV_VAR, folder)
    use_backend_tolerance(backend)


@pytest.fixture(autouse=True)
def _inference_backend(request):
    """An inference-only backend (onnxrt, tvm, tensorrt) runs the suite under
    ``paddle.no_grad()``, else every graph would go to the paddle backend (jit-core does
    that when gradients may be needed). Tests marked ``autograd`` run with gradients on, on
    any backend, and check exactly that fallback."""
    backend = _installed(_backend_of(request.node))
    if not jit_core.backends()[backend].inference_only or request.node.get_closest_marker(
        "autograd"
    ):
        yield
        return
    with paddle.no_grad():
        yield
