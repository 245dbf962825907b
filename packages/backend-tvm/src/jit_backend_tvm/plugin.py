"""Registers the backend through jit-core's hook, like any plugin."""

from __future__ import annotations

import sys

from jit_core import hookimpl

#: apache-tvm 0.27 publishes wheels for these Pythons only
MIN_PYTHON = (3, 10)


def unavailable_reason() -> str:
    """Why the backend cannot run on this Python; empty when it can."""
    if sys.version_info[:2] < MIN_PYTHON:
        return (
            f"apache-tvm 0.27 has wheels for Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]}+ only; "
            f"this is Python {sys.version_info[0]}.{sys.version_info[1]}"
        )
    return ""


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
        unavailable=unavailable_reason(),
    )
