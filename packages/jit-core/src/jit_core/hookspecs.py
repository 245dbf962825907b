"""The whole plugin contract of jit-core.

A plugin is a module or object with functions marked ``@jit_core.hookimpl`` and is found
through the ``jit_core`` entry-point group. The built-in ``paddle`` backend and the
jit-opcodes handlers register through these same hooks.

Each hook receives a ``register`` callable; pluggy lets an implementation take fewer
arguments than the spec, so new arguments can be added without breaking plugins.
"""

from __future__ import annotations

import pluggy

PROJECT = "jit_core"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def jit_register_backends(register):
    """Register backends:
    ``register(name, compile_fn, description="", inference_only=False, unavailable="",
    dynamic_shapes=False, number_inputs=False, auto_candidate=True)``.

    ``compile_fn(graph_module, example_inputs, **options) -> callable`` returns a callable
    that takes the graph's inputs positionally and returns the same tuple of tensors as
    ``graph_module.forward``. A backend that runs inference only (its results carry no
    gradients, it cannot update layer state such as BatchNorm statistics, it has its own
    random numbers) registers with ``inference_only=True``: jit-core then compiles a graph
    that needs any of that (gradients on while an input or parameter requires them, a
    layer in training mode, a random operation) with the ``paddle`` backend instead, says
    so in ``explain()``, and guards every entry on the gradient mode. A backend that is
    installed but cannot run in this environment (its library has no build for this
    Python, say) registers with ``unavailable="why"``: it is listed, and ``optimize`` with
    it raises ``BackendUnavailableError`` with that reason (or, where ``compile_fn`` takes
    a ``fallback`` option and it is ``True``, runs on the ``paddle`` backend with one
    warning). A graph with dynamic dimensions (``node.meta["dynamic_dims"]`` on its
    placeholders, their ``mark_dynamic`` bounds in ``node.meta["dynamic_bounds"]``) is
    handed to a backend registered
    with ``dynamic_shapes=True`` once, for every size; any other backend gets it once per
    distinct input shape (the examples have that shape). A backend registered with
    ``number_inputs=True`` may get placeholders that are Python ints or floats
    (``node.meta["number_input"]``): frame numbers whose value changed between calls,
    such as a loop counter or a time step, which the graph reads as inputs rather than as
    constants; every other backend gets a graph per value. ``backend="auto"`` compiles
    each graph on every backend that can take it and keeps the fastest that agrees with
    ``paddle``; a backend whose builds take minutes (tuning) registers with
    ``auto_candidate=False`` and is tried only when named in ``auto``'s ``candidates``.
    """


@hookspec
def jit_register_opcodes(register):
    """Register bytecode handlers:
    ``register(opname, handler, versions, priority=10, break_as=None)``.

    ``handler(tx, inst)`` simulates one instruction on the translator ``tx``. ``versions``
    is an iterable of "3.X" strings it serves. When two handlers claim the same opcode on
    the running version, the higher priority wins (jit-opcodes uses 0, so any plugin
    overrides it by default).

    ``break_as`` says how the graph breaks at the instruction when the capture cannot
    simulate it (the handler raises ``Unsupported``): one of the kinds of
    ``jit_core.codegen.breaks`` (``RunsInPython(pops, pushes)`` for an instruction that
    runs as it is between two graphs, ``BreaksAtCall(decode)`` for a call,
    ``BreaksAtBranch(jump_if_true, keeps_value)`` for a conditional jump). Without one,
    a frame whose capture stops at the instruction runs eagerly.
    """


@hookspec
def jit_register_passes(register):
    """Register graph passes: ``register(graph_pass)`` with a ``jit_core.passes.GraphPass``
    (the ``@jit_core.passes.graph_pass(...)`` decorator makes one).

    A pass rewrites a captured ``GraphModule`` in place before the backend compiles it. A
    pass with the name of an earlier one replaces it; ``default=False`` makes a pass run
    only when asked for by name (``optimize(..., passes=[...])``).
    """


@hookspec
def jit_register_cache_stores(register):
    """Register remote stores for the compile cache:
    ``register(scheme, factory, description="")``.

    ``factory(url, timeout) -> jit_core.cache.remote.CacheStore`` opens the store a URL with
    that scheme names (``JIT_CORE_REMOTE_CACHE`` or ``jit_core.set_remote_cache``); each call
    to the store should give up after ``timeout`` seconds. The factory imports the store's
    client library, and raises ``ImportError`` naming the package to install when it is
    missing. The built-in Redis store (``redis://``, ``rediss://``) registers through this
    hook too.
    """


@hookspec
def jit_register_onnx_lowerings(register):
    """Register ONNX lowerings for the direct exporter (``jit_core.kit.onnx.direct``):
    ``register(target, lowering)``.

    ``target`` is what a graph node calls: a Paddle function (``paddle.add``,
    ``paddle.nn.functional.conv2d``, ``operator.add``), a tensor method by name
    (``"Tensor.reshape"``) or a layer class (``paddle.nn.Conv2D``, matched exactly, not its
    subclasses). ``lowering(ex, a)`` gets the ``Exporter`` and the call's arguments by
    parameter name (``a["layer"]`` for a layer, whose input is ``a["x"]``), adds ONNX nodes
    with ``ex.op(op_type, inputs, **attributes)`` and returns the name of the result;
    ``ex.decline(why)`` refuses arguments it does not serve, and the graph is then exported
    through paddle2onnx, ``why`` shown in ``explain()``. A later registration of the same
    target replaces an earlier one; jit-core's own lowerings register through this hook too.
    """
