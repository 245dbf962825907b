"""Options of one ``optimize()`` call, with their defaults; and the process-wide controls
(``jit_core.set_stance``, ``error_on_graph_break``, ``disable``) the runtime reads."""

from __future__ import annotations

import inspect
import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence

DEFAULT_RECOMPILE_LIMIT = 8
DEFAULT_ACCUMULATED_RECOMPILE_LIMIT = 64


def _positive_int(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def check_backend_options(backend, options: Dict[str, Any]) -> None:
    """Refuse, at ``optimize()`` time, options the backend's compile function does not
    take: the error names them and lists those it does (a backend whose function takes
    ``**options`` checks its own when it compiles)."""
    try:
        params = inspect.signature(backend.compile).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check
        return
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    accepted = [p.name for p in named[2:]]  # after the graph module and its inputs
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise TypeError(
            f"backend {backend.name!r} takes no option {', '.join(map(repr, unknown))}; its "
            f"options: {', '.join(accepted) or 'none'} (jit_core's own: recompile_limit, "
            "accumulated_recompile_limit, passes, disable_passes, freeze, debug, dynamic, "
            "share_layers, error_on_graph_break, profitability)"
        )


@dataclass
class Options:
    backend: str = "paddle"
    full_graph: bool = False
    #: cache entries per code object (and per ``self`` or layer held by a local, for
    #: frames whose guards pin it) past which a call that matches none runs eagerly
    recompile_limit: int = DEFAULT_RECOMPILE_LIMIT
    #: cache entries per code object in all (every ``self`` together) past which a call
    #: that matches none runs eagerly
    accumulated_recompile_limit: int = DEFAULT_ACCUMULATED_RECOMPILE_LIMIT
    #: options handed to the backend unchanged
    backend_options: Dict[str, Any] = field(default_factory=dict)
    #: graph passes: None for the registered defaults, else names or GraphPass objects
    passes: Optional[Sequence[Any]] = None
    #: names of passes not to run
    disable_passes: Sequence[str] = ()
    #: parameters and buffers are constants: inference passes may fold them into the graph
    freeze: bool = False
    #: lint the graph after every pass (None: the JIT_DEBUG environment variable decides)
    debug: Optional[bool] = None
    #: dynamic shapes (``jit_core.shapes``): None makes a dimension dynamic when its size
    #: changing causes a recompile, True every dimension from the start, False none
    dynamic: Optional[bool] = None
    #: once another instance of a layer's class reaches a code captured for one, the next
    #: capture serves every instance, its parameters graph inputs
    #: (``ShapePolicy.shares_layer``); False keeps every capture bound to its instances,
    #: as ``freeze=True`` does (frozen parameters are folded into each instance's graph)
    share_layers: bool = True
    #: time each new entry of a target frame against the frame's original code on the
    #: calls it serves, and keep the faster (``runtime.profitability``); None: on under
    #: ``backend="auto"`` only
    profitability: Optional[bool] = None

    @classmethod
    def from_kwargs(cls, backend: str, full_graph: bool, options: Dict[str, Any]) -> Options:
        opts = dict(options)
        if not isinstance(backend, str):
            raise TypeError(f"backend must be the name of a backend (a str), got {backend!r}")
        if not isinstance(full_graph, bool):
            raise TypeError(f"full_graph must be True or False, got {full_graph!r}")
        # error_on_graph_break=True: full_graph=True's strictness under a name that says it
        strict = opts.pop("error_on_graph_break", False)
        if not isinstance(strict, bool):
            raise TypeError(f"error_on_graph_break must be True or False, got {strict!r}")
        full_graph = full_graph or strict
        limit = _positive_int(
            "recompile_limit", opts.pop("recompile_limit", DEFAULT_RECOMPILE_LIMIT)
        )
        accumulated = _positive_int(
            "accumulated_recompile_limit",
            opts.pop("accumulated_recompile_limit", DEFAULT_ACCUMULATED_RECOMPILE_LIMIT),
        )
        passes = opts.pop("passes", None)
        if passes is False:
            passes = ()
        if passes is not None and (isinstance(passes, str) or not _is_sequence(passes)):
            raise TypeError(
                "passes must be None (the default pipeline), False (none) or a list of pass "
                f"names and GraphPass objects, got {passes!r}"
            )
        disable = opts.pop("disable_passes", ())
        if isinstance(disable, str):
            disable = (disable,)
        if not _is_sequence(disable) or not all(isinstance(d, str) for d in disable):
            raise TypeError(f"disable_passes must be a list of pass names, got {disable!r}")
        freeze = opts.pop("freeze", False)
        if not isinstance(freeze, bool):
            raise TypeError(f"freeze must be True or False, got {freeze!r}")
        debug = opts.pop("debug", None)
        if debug not in (None, True, False):
            raise TypeError(f"debug must be None, True or False, got {debug!r}")
        dynamic = opts.pop("dynamic", None)
        if dynamic not in (None, True, False):
            raise TypeError(f"dynamic must be None, True or False, got {dynamic!r}")
        share_layers = opts.pop("share_layers", True)
        if not isinstance(share_layers, bool):
            raise TypeError(f"share_layers must be True or False, got {share_layers!r}")
        profitability = opts.pop("profitability", None)
        if profitability not in (None, True, False):
            raise TypeError(f"profitability must be None, True or False, got {profitability!r}")
        return cls(
            backend=backend,
            full_graph=full_graph,
            recompile_limit=limit,
            accumulated_recompile_limit=accumulated,
            backend_options=opts,
            passes=passes,
            disable_passes=tuple(disable),
            freeze=freeze,
            debug=debug,
            dynamic=dynamic,
            share_layers=share_layers and not freeze,
            profitability=profitability,
        )


#: what optimized code does (``jit_core.set_stance``)
STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")


class Controls:
    """The process-wide settings of ``jit_core.set_stance`` and ``error_on_graph_break``
    (process-wide as torch.compile's are: a stance set in one thread holds in all)."""

    __slots__ = ("stance", "error_on_graph_break")

    def __init__(self) -> None:
        self.stance = "default"
        #: None: each optimize() call's full_graph decides; True or False: it is overridden
        self.error_on_graph_break: Optional[bool] = None

    def full_graph(self, options: Options) -> bool:
        """Whether a graph break raises ``GraphBreakError`` for code optimized with
        ``options``."""
        if self.error_on_graph_break is None:
            return options.full_graph
        return self.error_on_graph_break


CONTROLS = Controls()

#: the code objects of functions ``jit_core.disable()`` keeps out of capture: the frame hook
#: runs them as they are, and a capture that reaches a call of one breaks the graph there
DISABLED_CODES: weakref.WeakSet = weakref.WeakSet()
#: the attribute that marks a function ``disable()`` made or marked
DISABLED_ATTR = "_jit_core_disabled"
