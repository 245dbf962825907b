"""The conformance suite every backend must pass: ``pytest conformance --backend NAME``."""

from __future__ import annotations

import os

import paddle
import pytest

# every graph of the suite is linted after each graph pass (jit_core.passes.manager)
os.environ.setdefault("JIT_DEBUG", "1")

import jit_core


def pytest_addoption(parser):
    parser.addoption(
        "--backend",
        default="paddle",
        help="the jit_core backend the conformance suite runs on (default: paddle)",
    )


def _unavailable(config) -> str:
    found = jit_core.backends().get(config.getoption("--backend"))
    return found.unavailable if found is not None else ""


def pytest_report_header(config):
    why = _unavailable(config)
    if why:
        return f"conformance on backend {config.getoption('--backend')!r}: n/a here ({why})"
    return None


def pytest_collection_modifyitems(config, items):
    """A backend that is installed but cannot run here (tvm on 3.8/3.9; tensorrt without
    TensorRT or a CUDA device) makes every cell of its column n/a: each test is skipped
    with the reason, never passed."""
    why = _unavailable(config)
    if not why:
        return
    mark = pytest.mark.skip(reason=f"n/a: backend {config.getoption('--backend')!r}: {why}")
    for item in items:
        item.add_marker(mark)


def pytest_terminal_summary(terminalreporter, config):
    why = _unavailable(config)
    if why:
        skipped = len(terminalreporter.stats.get("skipped", []))
        terminalreporter.write_line(
            f"backend {config.getoption('--backend')!r}: n/a here, {skipped} tests not run ({why})"
        )


@pytest.fixture(scope="session")
def backend(request) -> str:
    name = request.config.getoption("--backend")
    installed = jit_core.backends()
    if name not in installed:
        pytest.exit(f"--backend {name!r} is not installed; installed: {', '.join(installed)}", 2)
    from .helpers import use_backend_tolerance

    use_backend_tolerance(name)
    return name


@pytest.fixture(scope="session", autouse=True)
def _compile_cache(tmp_path_factory):
    """Backends that keep a compile cache on disk keep it in the test's own folder, or in
    ``$JIT_CONFORMANCE_CACHE_DIR`` when set (nox shares one between the Python versions of
    a run: what tvm compiled for 3.10 is loaded on 3.11 and 3.12, as a user's warm cache
    would be)."""
    from jit_core.cache.disk import ENV_VAR

    old = os.environ.get(ENV_VAR)
    shared = os.environ.get("JIT_CONFORMANCE_CACHE_DIR")
    os.environ[ENV_VAR] = shared or str(tmp_path_factory.mktemp("jit_core_cache"))
    yield
    if old is None:
        os.environ.pop(ENV_VAR, None)
    else:
        os.environ[ENV_VAR] = old


@pytest.fixture(autouse=True)
def _inference_backend(request, backend):
    """An inference-only backend (onnxrt, tvm, tensorrt) runs the suite under
    ``paddle.no_grad()``, else every graph would go to the paddle backend (jit-core does
    that when gradients may be needed). Tests marked ``autograd`` run with gradients on, on
    any backend, and check exactly that fallback."""
    if not jit_core.backends()[backend].inference_only or request.node.get_closest_marker(
        "autograd"
    ):
        yield
        return
    with paddle.no_grad():
        yield
