"""The embedded ``paddle`` backend: run the captured graph with Paddle itself.

``mode="eager"`` calls the generated ``forward`` directly: the same kernels as eager
Paddle, minus the Python around them (with ``kernels=True``, the default, API calls whose
wrappers only check and normalize their arguments call their kernels directly:
``jit_core.kernel_calls``). ``mode="static"`` hands the GraphModule to
``paddle.jit.to_static(full_graph=True)`` and runs Paddle's static executor.
``mode="auto"`` (the default) chooses between the two for the forward of a captured
training step (a graph whose code runs ``loss.backward()``), by timing its forward and
backward (``jit_core.paddle_modes``); any other graph runs eagerly.
"""

from __future__ import annotations

import types
from typing import Any, Callable, List, cast

import paddle

from . import kernel_calls, paddle_modes
from .hookspecs import hookimpl
from .kit.static_build import building

MODES = ("auto", "eager", "static")


def compile_graph(
    graph_module, example_inputs: List[Any], mode: str = "auto", kernels: bool = True
) -> Callable:
    if mode not in MODES:
        raise ValueError(f"the paddle backend's mode must be one of {MODES}, got {mode!r}")
    if mode == "auto":
        if not paddle_modes.is_training_forward(graph_module, example_inputs):
            return _eager(graph_module, example_inputs, kernels)
        return paddle_modes.choose(
            graph_module,
            example_inputs,
            lambda: _eager(graph_module, example_inputs, kernels),
            lambda: _static(graph_module),
        )
    if mode == "eager":
        return _eager(graph_module, example_inputs, kernels)
    return _static(graph_module)


def _eager(graph_module, example_inputs: List[Any], kernels: bool) -> Callable:
    if not kernels:
        # the bound generated function: Layer.__call__ would add microseconds per call
        return graph_module.forward
    forward, lowering = kernel_calls.lower(graph_module, example_inputs)
    # explain() asks the compiled callable; a bound method (lower gives a graph
    # module's forward) reads its function's attributes, and each graph module has a
    # class (and a forward) of its own
    func: Any = cast(types.MethodType, forward).__func__
    func.describe = lowering.describe
    func.kernel_code = lowering.code
    return forward


def _static(graph_module) -> Callable:
    static = paddle.jit.to_static(graph_module, full_graph=True)

    def run_static(*args):
        # a call at a new shape builds a program: static_build says why it is held
        with building():
            return static(*args)

    return run_static


@hookimpl
def jit_register_backends(register):
    # the generated forward reads dynamic sizes when it runs; to_static traces per shape
    register(
        "paddle",
        compile_graph,
        description="Paddle's own kernels (embedded, the default)",
        dynamic_shapes=True,
        number_inputs=True,
    )
