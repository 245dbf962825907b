"""``capture()``: a function or layer as a ``GraphModule``, for people and for passes.

It runs the same symbolic executor as ``optimize()`` on example inputs, but installs
nothing: the graph is returned so that it can be read, rewritten (``replace_pattern``,
passes) and exported by hand.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from . import rng
from .api import _target_codes
from .bytecode import compat
from .config import Options
from .errors import CaptureError, JitError, Unsupported
from .fx import GraphModule
from .runtime.eval_frame import CompileContext


def capture(
    fn: Callable,
    *example_args: Any,
    passes: Optional[Sequence[Any]] = (),
    freeze: bool = False,
    **example_kwargs: Any,
) -> GraphModule:
    """Capture ``fn(*example_args, **example_kwargs)`` into one ``GraphModule``.

    ``fn`` is a function, a method or a ``paddle.nn.Layer``. The graph's inputs are the
    tensors the call reads (``gm.meta["input_sources"]`` says where each comes from);
    parameters and sublayers stay shared with ``fn``. By default no graph pass runs, so the
    graph shows exactly what the code does; ``passes=None`` runs the default pipeline, or
    name the passes to run (``freeze=True`` as in ``optimize``). Raises ``CaptureError``
    naming the place when the call cannot be captured whole.
    """
    options = Options(backend="paddle", passes=passes, freeze=freeze)
    ctx = CompileContext(options, _target_codes(fn))
    direct = ctx.direct_entry(fn)
    name = getattr(fn, "__qualname__", type(fn).__name__)
    if direct is None:
        raise CaptureError(
            f"cannot capture {name}: only plain functions, methods and layers whose call is "
            "their forward (no forward hooks) can be captured; generators cannot"
        )
    func, lead = direct
    code = func.__code__
    f_locals = ctx._bind(func, code, lead + tuple(example_args), example_kwargs)
    if f_locals is None:
        raise CaptureError(f"the example arguments do not fit the signature of {name}")
    frame = compat.EntryFrame(code, f_locals, func.__globals__)
    try:
        # (the example run's random ops draw nothing from the user's stream)
        with rng.preserved():
            traced = ctx.compiler.trace(frame, code, inputs_as_outputs=True)
    except Unsupported as e:
        raise CaptureError(f"cannot capture {name} into one graph: {e.describe()}") from None
    except JitError:
        raise
    except Exception as e:  # say which call failed, keep the cause
        raise CaptureError(f"cannot capture {name}: {type(e).__name__}: {e}") from e
    changed = [f"the cell {c[0]!r}" for c in traced.cells]
    changed += [f"{c.source.name()} ({c.describe()})" for c in traced.containers]
    # loss.backward(), opt.step(): what they change is not tensor work of the graph
    changed += [f"what {e.text} changes" for e in traced.output.effects]
    if changed:
        # a graph holds tensor work only: the frame's replacement code would write these
        # back, a graph on its own would lose them
        raise CaptureError(
            f"cannot capture {name} into one graph: it changes what exists outside it "
            f"({', '.join(changed)}), a side effect a graph cannot hold"
        )
    gm = traced.graph_module
    if gm is None:
        raise CaptureError(f"{name} returned no tensor computed by Paddle: there is no graph")
    gm.meta["input_sources"] = [s.name() for s in traced.sources]
    gm.meta["passes"] = traced.pass_records
    return gm


__all__ = ["capture"]
