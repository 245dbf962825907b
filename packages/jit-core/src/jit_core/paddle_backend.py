"""The embedded ``paddle`` backend: run the captured graph with Paddle itself.

``mode="eager"`` (the default) calls the generated ``forward`` directly: the same kernels
as eager Paddle, minus the Python around them (with ``kernels=True``, the default, API
calls whose wrappers only check and normalize their arguments call their kernels
directly: ``jit_core.kernel_calls``). ``mode="static"`` hands the GraphModule to
``paddle.jit.to_static(full_graph=True)`` and runs Paddle's static executor.
"""

from __future__ import annotations

import types
from typing import Any, Callable, List, cast

import paddle

from . import kernel_calls
from .hookspecs import hookimpl
from .kit.static_build import building

MODES = ("eager", "static")


def compile_graph(
    graph_module, example_inputs: List[Any], mode: str = "eager", kernels: bool = True
) -> Callable:
    if mode == "eager":
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
    if mode == "static":
        static = paddle.jit.to_static(graph_module, full_graph=True)

        def run_static(*args):
            # a call at a new shape builds a program: static_build says why it is held
            with building():
                return static(*args)

        return run_static
    raise ValueError(f"the paddle backend's mode must be one of {MODES}, got {mode!r}")


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
