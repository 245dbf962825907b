"""Compare what a compiled ONNX model computes with Paddle's own result on the example
inputs: a model that paddle2onnx (or the backend's importer) converted wrongly is refused
before it gives a wrong answer; with ``fallback=True`` a backend runs such a graph on the
paddle backend instead (``run_on_paddle``)."""

from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Type

import numpy as np
import paddle

from ...fx import Node


def check_against_paddle(
    run: Callable,
    gm,
    example_inputs: Sequence,
    error: Type[Exception],
    who: str,
    *,
    rtol: float,
    scaled_atol: float,
) -> None:
    """Raise ``error`` when ``run(*example_inputs)`` differs from ``gm.forward``; ``who``
    names the converter blamed in the message.

    Float outputs must agree within the backend's documented tolerance: ``rtol`` of each
    value plus an absolute ``scaled_atol`` times the largest magnitude of Paddle's result
    (``numpy.allclose(got, expected, rtol, scaled_atol * max|expected|)``); other outputs
    must be equal."""
    with paddle.no_grad():
        expected = _known_outputs(gm, example_inputs)
        if expected is None:
            expected = gm.forward(*example_inputs)
        got = run(*example_inputs)
    found = output_difference(got, expected, rtol=rtol, scaled_atol=scaled_atol)
    if found is not None:
        where, what, in_values = found
        message = f"{where} of the exported model {what}: {who} converted an operator wrongly"
        if in_values:
            message += f". Operators of the graph: {', '.join(graph_operators(gm))}"
        raise error(message)


def _known_outputs(gm, inputs: Sequence) -> Optional[Sequence]:
    """Eager Paddle's outputs for ``inputs`` when the capture computed them (the same
    tensors it was given; ``convert_frame.EXAMPLE_RUN``), saving a run of the graph (35 ms
    of ResNet18's first call)."""
    from ...runtime.convert_frame import EXAMPLE_RUN

    known = gm.meta.get(EXAMPLE_RUN)
    if known is None:
        return None
    examples, outputs = known
    if len(examples) != len(inputs) or any(a is not b for a, b in zip(examples, inputs)):
        return None
    return outputs


def exporter_name(gm) -> str:
    """Who wrote ``gm``'s ONNX model, for an error that blames the conversion."""
    from .export import exporter_choice

    if gm.meta.get("onnx_exporter") or exporter_choice() == "paddle2onnx":
        return "paddle2onnx"
    return "the direct ONNX export"


def output_difference(
    got: Any, expected: Sequence, *, rtol: float, scaled_atol: float
) -> Optional[Tuple[str, str, bool]]:
    """The first of ``got``'s outputs that is not ``expected``'s (the graph's own, on the
    paddle backend), as ``(which output, how it differs, whether in its values)``; None
    when they agree. Float outputs agree within ``rtol`` of each value plus ``scaled_atol``
    times the largest magnitude of ``expected`` (``numpy.allclose(got, expected, rtol,
    scaled_atol * max|expected|)``); other outputs must be equal."""
    if not isinstance(got, (tuple, list)) or len(got) != len(expected):
        n = len(got) if isinstance(got, (tuple, list)) else type(got).__name__
        return "the result", f"is {n}, not the graph's {len(expected)} outputs", False
    for i, (g, e) in enumerate(zip(got, expected)):
        where = f"output {i}"
        if not isinstance(e, paddle.Tensor):
            if g != e:
                return where, f"is {g!r}, Paddle computes {e!r}", True
            continue
        if not isinstance(g, paddle.Tensor):
            return where, f"is a {type(g).__name__}, not a Tensor", False
        if list(g.shape) != list(e.shape) or g.dtype != e.dtype:
            what = f"is {g.dtype} {list(g.shape)}, Paddle computes {e.dtype} {list(e.shape)}"
            return where, what, False
        a, b = g.numpy(), e.numpy()
        if a.dtype.kind in "fc":
            scale = float(np.max(np.abs(b[np.isfinite(b)]), initial=0.0))
            atol = scaled_atol * scale
            ok = np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        else:
            ok = np.array_equal(a, b)
        if not ok:
            with np.errstate(invalid="ignore"):
                diff = np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))
            bound = f"; allowed: rtol {rtol:g} + {atol:.3g}" if a.dtype.kind in "fc" else ""
            what = (
                f"differs from Paddle's result on the example inputs (max abs difference "
                f"{diff:.3g}{bound})"
            )
            return where, what, True
    return None


def graph_operators(gm) -> List[str]:
    """The distinct operators a graph calls, in order of first use."""
    names: List[str] = []
    for n in gm.graph.nodes:
        if n.op in ("call_function", "call_method", "call_module"):
            t = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "?")
            if n.op == "call_module":
                t = type(getattr(gm, n.target)).__name__
            if t not in names:
                names.append(t)
    return names


def run_on_paddle(backend: str, error: Exception, gm) -> Callable:
    """What a backend called with ``fallback=True`` returns for a graph it refused: the
    graph's own ``forward`` (Paddle's kernels), with one warning naming the reason, which
    ``explain()`` shows too."""
    gm.meta["fallback_reason"] = str(error)
    warnings.warn(
        f"jit_core {backend}: {error}. This graph runs on the paddle backend (fallback=True).",
        RuntimeWarning,
        stacklevel=3,
    )
    return gm.forward


def restored_shapes(gm) -> List[Optional[List[int]]]:
    """The shape to put back on each graph output, or None: paddle2onnx gives 0-D results
    the shape [1]. The shapes recorded are the example's: with dynamic dimensions only a
    0-D one holds at every size (an output of as many elements at another size, [5, 3]
    where the example's was [3, 5], must not be bent into the example's shape), and so
    where sizes follow the data."""
    from ..shape_dispatch import dynamic_dims
    from .direct import data_dependent_sizes

    shapes = [getattr(n, "meta", {}).get("shape") for n in gm.graph.output_values()]
    if dynamic_dims(gm) or data_dependent_sizes(gm):
        shapes = [s if s == [] else None for s in shapes]
    return shapes


def input_free_outputs(gm) -> List[bool]:
    """For each graph output, whether it reads no graph input (computed from parameters
    and constants alone). A backend may compute such a result once, when it builds, and
    hand out the same memory on every call: it must be copied before the caller can
    update it in place (eager makes a new tensor at each call)."""
    # one pass in graph order (inputs come before their users): no recursion, which a
    # long chain of nodes would take past Python's limit
    reads: Dict[Node, bool] = {}
    for node in gm.graph.nodes:
        reads[node] = node.op == "placeholder" or any(reads[n] for n in node.all_input_nodes)
    return [not (isinstance(n, Node) and reads[n]) for n in gm.graph.output_values()]
