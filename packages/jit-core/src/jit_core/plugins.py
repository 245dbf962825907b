"""Plugin manager: loads the ``jit_core`` entry points and collects what they register."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import pluggy

from . import hookspecs
from .bytecode import compat
from .errors import BackendNotFoundError, BackendUnavailableError
from .passes.base import GraphPass, PassError
from .spi import BreakKind

if sys.version_info >= (3, 10):
    from importlib.metadata import entry_points as _entry_points

    def _group(name):
        return list(_entry_points(group=name))
else:  # 3.8/3.9: the selectable API is missing
    from importlib.metadata import entry_points as _entry_points

    def _group(name):
        return list(_entry_points().get(name, []))


@dataclass
class Backend:
    name: str
    compile: Callable
    description: str
    plugin: str
    #: it runs inference only (no gradients, no layer state, no Paddle random numbers):
    #: jit-core gives graphs that need any of that to the paddle backend instead
    inference_only: bool = False
    #: why the backend is installed but cannot run here (e.g. its library has no build
    #: for this Python); empty when it can
    unavailable: str = ""
    #: what it builds serves every size of a graph's dynamic dimensions; otherwise
    #: jit-core builds once per input shape (``shape_dispatch.PerShape``)
    dynamic_shapes: bool = False
    #: what it builds takes Python ints and floats as inputs (``node.meta["number_input"]``
    #: placeholders); otherwise each value of such a number is a graph of its own
    number_inputs: bool = False
    #: ``backend="auto"`` tries it on every graph (False: only when named in its
    #: ``candidates``, for a backend whose builds take minutes)
    auto_candidate: bool = True


@dataclass
class OpcodeHandler:
    opname: str
    handler: Callable
    priority: int
    plugin: str
    #: how the graph breaks at this opcode, or None: a frame whose capture stops there
    #: runs eagerly
    break_as: Optional[BreakKind] = None


_lock = threading.Lock()
_pm: Optional[pluggy.PluginManager] = None
_backends: Optional[Dict[str, Backend]] = None
_opcodes: Optional[Dict[str, OpcodeHandler]] = None
_passes: Optional[Dict[str, GraphPass]] = None
_stores: Optional[Dict[str, Callable]] = None
_lowerings: Optional[Dict[Any, Callable]] = None


def get_plugin_manager() -> pluggy.PluginManager:
    """The plugin manager, with every ``jit_core`` entry point loaded (once)."""
    global _pm
    with _lock:
        if _pm is None:
            pm = pluggy.PluginManager(hookspecs.PROJECT)
            pm.add_hookspecs(hookspecs)
            pm.load_setuptools_entrypoints(hookspecs.PROJECT)
            _pm = pm
        return _pm


def _plugin_name(pm: pluggy.PluginManager, impl) -> str:
    return pm.get_name(impl.plugin) or repr(impl.plugin)


def _call_with_register(hook_name: str, make_register):
    pm = get_plugin_manager()
    caller = getattr(pm.hook, hook_name)
    # Call implementations one by one so each registration knows its plugin.
    for impl in caller.get_hookimpls():
        register = make_register(_plugin_name(pm, impl))
        kwargs = {"register": register} if "register" in impl.argnames else {}
        impl.function(**kwargs)


def backends() -> Dict[str, Backend]:
    global _backends
    if _backends is None:
        found: Dict[str, Backend] = {}

        def make_register(plugin):
            def register(
                name,
                compile_fn,
                description="",
                inference_only=False,
                unavailable="",
                dynamic_shapes=False,
                number_inputs=False,
                auto_candidate=True,
            ):
                found[name] = Backend(
                    name,
                    compile_fn,
                    description,
                    plugin,
                    bool(inference_only),
                    unavailable,
                    bool(dynamic_shapes),
                    bool(number_inputs),
                    bool(auto_candidate),
                )

            return register

        _call_with_register("jit_register_backends", make_register)
        _backends = found
    return _backends


def get_backend(name: str) -> Backend:
    found = backends()
    if name not in found:
        installed = ", ".join(sorted(found)) or "none"
        raise BackendNotFoundError(
            f"unknown backend {name!r}; installed backends: {installed}. "
            "Backends are plugins: install one, e.g. `pip install jit-backend-onnxrt`."
        )
    backend = found[name]
    if backend.unavailable:
        raise BackendUnavailableError(
            f"backend {name!r} is installed but cannot run here: {backend.unavailable}"
        )
    return backend


def _serves(versions) -> bool:
    return compat.VERSION_STR in set(versions)


def opcode_handlers() -> Dict[str, OpcodeHandler]:
    """opname -> the winning handler for the running Python version (built once)."""
    global _opcodes
    if _opcodes is None:
        found: Dict[str, OpcodeHandler] = {}

        def make_register(plugin):
            def register(opname, handler, versions, priority=10, break_as=None):
                if break_as is not None and not isinstance(break_as, BreakKind):
                    raise TypeError(
                        f"plugin {plugin!r} registered {opname} with break_as={break_as!r}, "
                        "which is not a jit_core.spi.BreakKind"
                    )
                if not _serves(versions):
                    return
                old = found.get(opname)
                if old is None or priority >= old.priority:
                    found[opname] = OpcodeHandler(opname, handler, priority, plugin, break_as)

            return register

        _call_with_register("jit_register_opcodes", make_register)
        _opcodes = found
    return _opcodes


def onnx_lowerings() -> Dict[Any, Callable]:
    """target -> the ONNX lowering registered for it (built once; see
    ``hookspecs.jit_register_onnx_lowerings``)."""
    global _lowerings
    if _lowerings is None:
        found: Dict[Any, Callable] = {}

        def make_register(plugin):
            def register(target, lowering):
                if not callable(lowering):
                    raise TypeError(
                        f"plugin {plugin!r} registered {lowering!r} for {target!r}, which is "
                        "not a function (ex, arguments) -> the name of its result"
                    )
                found[target] = lowering

            return register

        _call_with_register("jit_register_onnx_lowerings", make_register)
        _lowerings = found
    return _lowerings


def graph_passes() -> Dict[str, GraphPass]:
    """name -> ``GraphPass`` of every registered graph pass (built once)."""
    global _passes
    if _passes is None:
        found: Dict[str, GraphPass] = {}

        def make_register(plugin):
            def register(graph_pass):
                if not isinstance(graph_pass, GraphPass):
                    raise PassError(
                        f"plugin {plugin!r} registered {graph_pass!r}, which is not a "
                        "jit_core.passes.GraphPass (use @jit_core.passes.graph_pass)"
                    )
                found[graph_pass.name] = graph_pass

            return register

        _call_with_register("jit_register_passes", make_register)
        _passes = found
    return _passes


def cache_stores() -> Dict[str, Callable]:
    """URL scheme -> factory of every registered remote cache store (built once)."""
    global _stores
    if _stores is None:
        found: Dict[str, Callable] = {}

        def make_register(plugin):
            def register(scheme, factory, description=""):
                if (
                    not isinstance(scheme, str)
                    or not scheme.isidentifier()
                    or not callable(factory)
                ):
                    raise TypeError(
                        f"plugin {plugin!r} registered a cache store with scheme {scheme!r} "
                        f"and factory {factory!r}: a URL scheme and a callable are needed"
                    )
                found[scheme.lower()] = factory

            return register

        _call_with_register("jit_register_cache_stores", make_register)
        _stores = found
    return _stores


def list_plugins() -> List[Tuple[str, str, str]]:
    """(plugin name, distribution, version) of every loaded plugin."""
    pm = get_plugin_manager()
    dists = {id(plugin): dist for plugin, dist in pm.list_plugin_distinfo()}
    out = []
    for name, plugin in pm.list_name_plugin():
        dist = dists.get(id(plugin))
        if dist is not None:
            out.append((name, dist.project_name, dist.version))
        else:
            out.append((name, "", ""))
    return sorted(out)


def reset_plugins() -> None:
    """Forget what was loaded (tests that install plugins at run time use it)."""
    global _pm, _backends, _opcodes, _passes, _stores, _lowerings
    with _lock:
        _pm = None
        _backends = None
        _opcodes = None
        _passes = None
        _stores = None
        _lowerings = None


def _forget_registered() -> None:
    # what the hooks registered is collected again on next use
    global _backends, _opcodes, _passes, _stores, _lowerings
    _backends = None
    _opcodes = None
    _passes = None
    _stores = None
    _lowerings = None


def register_plugin(plugin, name: Optional[str] = None) -> None:
    """Register a plugin object directly (without an entry point), e.g. in a test."""
    get_plugin_manager().register(plugin, name=name)
    _forget_registered()


def unregister_plugin(name: str) -> None:
    """Remove a plugin that ``register_plugin`` registered under ``name``."""
    get_plugin_manager().unregister(name=name)
    _forget_registered()
