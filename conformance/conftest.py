"""The conformance suite every backend must pass: ``pytest conformance --backend NAME``."""

from __future__ import annotations

import os

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


@pytest.fixture(scope="session")
def backend(request) -> str:
    name = request.config.getoption("--backend")
    installed = jit_core.backends()
    if name not in installed:
        pytest.exit(f"--backend {name!r} is not installed; installed: {', '.join(installed)}", 2)
    return name
