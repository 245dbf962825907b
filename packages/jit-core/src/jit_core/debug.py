"""``debug.compare()``: when a compiled result differs from eager Paddle, name the culprit.

Each graph of a call is run three ways on the inputs it was fed: compiled (the chosen
backend, after the chosen passes), eager float32 (the graph's own code with no pass) and a
float64 reference (the same code with float inputs, parameters and buffers in float64).
Errors are measured against the reference and scaled by its largest magnitude, so that the
JIT is blamed only for error beyond what eager float32 makes itself. A graph over
tolerance is bisected: first by the passes that ran (each disabled in turn), then by its
nodes (the graph cut after each node, compiled, and compared with eager's value there).
"""

from __future__ import annotations

import copy
import json
import linecache
import logging
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import paddle

from . import plugins, rng
from .api import OptimizedFunction, OptimizedLayer, _target_codes
from .config import Options, check_backend_options
from .errors import GraphDeclined
from .fx import Graph, GraphModule
from .fx.interpreter import Interpreter
from .fx.node import Node
from .hookspecs import hookimpl
from .passes.base import PassContext
from .passes.manager import PassManager
from .runtime.eval_frame import CompileContext

log = logging.getLogger("jit_core.debug")

#: a compiled error within this (scaled by the reference's largest magnitude) is fine
DEFAULT_RTOL = 1e-5
#: ... and so is one within this many times eager float32's own error
DEFAULT_EAGER_FACTOR = 10.0

_FLOATS = ("float16", "bfloat16", "float32", "float64")


# ------------------------------------------------------------------------ the report


@dataclass
class OutputCheck:
    """One float output of a graph: its errors against the float64 reference, scaled by
    the reference's largest magnitude (None where the compiled graph gave no value)."""

    index: int
    dtype: str
    shape: List[int]
    #: compiled vs the float64 reference
    compiled_error: Optional[float]
    #: eager float32 (the graph's own code, no pass) vs the float64 reference
    eager_error: float
    #: compiled vs eager float32
    compiled_vs_eager: Optional[float]
    #: max(rtol, eager_factor * eager_error)
    tolerance: float
    reference_max: float

    @property
    def ok(self) -> bool:
        return self.compiled_error is not None and self.compiled_error <= self.tolerance

    def __str__(self) -> str:
        got = "none" if self.compiled_error is None else f"{self.compiled_error:.3g}"
        vs = "" if self.compiled_vs_eager is None else f", vs eager {self.compiled_vs_eager:.3g}"
        return (
            f"output {self.index} ({self.dtype}{self.shape}): compiled error {got}, eager "
            f"float32 error {self.eager_error:.3g}{vs}; tolerance {self.tolerance:.3g} "
            f"(max |reference| {self.reference_max:.3g}) -> {'ok' if self.ok else 'OVER'}"
        )


@dataclass
class Culprit:
    """What bisection found: a pass (``kind="pass"``) or a node whose compiled value
    leaves tolerance first (``kind="node"``: a lowering, or the backend's handling of
    the node)."""

    kind: str
    name: str
    #: the node's operation (``call_function operator.mul``); None for a pass
    op: Optional[str] = None
    #: ``file:line`` of the user's code that made the node, and that line's text
    location: Optional[str] = None
    source_line: Optional[str] = None
    #: the dtypes of the node's tensor inputs, in eager's run
    input_dtypes: List[str] = field(default_factory=list)
    #: the scaled error of the compiled value there, and the tolerance it broke
    error: Optional[float] = None
    tolerance: Optional[float] = None
    detail: str = ""

    def __str__(self) -> str:
        if self.kind == "pass":
            return f"pass {self.name!r}: {self.detail}"
        text = f"node {self.name} ({self.op})"
        if self.input_dtypes:
            text += f", inputs {', '.join(self.input_dtypes)}"
        if self.location:
            text += f", at {self.location}"
            if self.source_line:
                text += f": {self.source_line}"
        return f"{text}: {self.detail}"


@dataclass
class GraphCheck:
    """One graph of the call, as ``compare()`` found it."""

    frame: str
    location: str
    backend: str
    #: the passes that ran on the compiled graph, in order
    passes: List[str]
    outputs: List[OutputCheck]
    #: ``ok``, ``ok: eager's own error``, ``over tolerance``, ``compile failed``
    verdict: str
    culprit: Optional[Culprit] = None
    #: why the backend gave no result (its build or run raised), if it did not
    compile_error: Optional[str] = None
    #: what a person should know about the numbers (ops the float64 run kept in float32)
    notes: List[str] = field(default_factory=list)
    #: the graph's code before passes
    code: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict.startswith("ok")


@dataclass
class CompareReport:
    """What ``compare()`` found, per graph; ``str()`` reads like ``explain()``."""

    backend: str
    rtol: float
    eager_factor: float
    graphs: List[GraphCheck] = field(default_factory=list)
    #: what the call returned (run on the paddle backend)
    result: Any = None

    @property
    def ok(self) -> bool:
        return all(g.ok for g in self.graphs)

    def to_json(self) -> Dict[str, Any]:
        """The report as a JSON-serialisable dict (the call's result left out)."""
        graphs = []
        for g in self.graphs:
            d = asdict(g)
            for out, check in zip(d["outputs"], g.outputs):
                out["ok"] = check.ok
            d["ok"] = g.ok
            graphs.append(_finite(d))
        return {
            "backend": self.backend,
            "rtol": self.rtol,
            "eager_factor": self.eager_factor,
            "ok": self.ok,
            "graphs": graphs,
        }

    def __str__(self) -> str:
        bad = sum(not g.ok for g in self.graphs)
        out = [
            f"Backend: {self.backend}",
            f"Tolerance: max(rtol={self.rtol:g}, {self.eager_factor:g} x eager float32's own "
            "error), errors scaled by the float64 reference's largest magnitude",
            f"Graph count: {len(self.graphs)}, over tolerance: {bad}",
        ]
        for i, g in enumerate(self.graphs, 1):
            out.append("")
            out.append(f"Graph {i}: {g.frame} ({g.location}): {g.verdict}")
            out.append(f"  Backend: {g.backend}")
            out.append(f"  Passes: {', '.join(g.passes) or 'none'}")
            if g.compile_error:
                out.append(f"  Compiled: failed: {g.compile_error}")
            if g.outputs:
                out.append("  Outputs:")
                out.extend(f"    {o}" for o in g.outputs)
            if g.culprit is not None:
                out.append(f"  Culprit: {g.culprit}")
            if g.notes:
                out.append("  Notes:")
                out.extend(f"    {n}" for n in g.notes)
            if not g.ok:
                out.append("  Graph code (before passes):")
                out.extend("    " + line for line in g.code.strip().splitlines())
        return "\n".join(out)


def _finite(value: Any) -> Any:
    # JSON has no inf or nan: an error that is infinite (nan where the reference has none)
    # is written as a string
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


# ------------------------------------------------------------------------ numbers


def _is_float_tensor(value: Any) -> bool:
    return isinstance(value, paddle.Tensor) and _dtype(value) in _FLOATS


def _dtype(t: paddle.Tensor) -> str:
    return str(t.dtype).replace("paddle.", "")


def _as_f64(value: Any) -> np.ndarray:
    t = value
    if _dtype(t) == "bfloat16":  # numpy has no bfloat16
        t = t.astype("float32")
    return np.asarray(t.numpy(), dtype=np.float64)


def _scaled_error(got: Any, ref: Any) -> Tuple[float, float]:
    """(max |got - ref| / max |ref|, max |ref|); inf where shapes differ or a nan or an
    infinity of one is not in the other."""
    a, r = _as_f64(got), _as_f64(ref)
    if a.shape != r.shape:
        return math.inf, 0.0
    finite = np.isfinite(r)
    scale = float(np.max(np.abs(r[finite]))) if finite.any() else 0.0
    same = (a == r) | (np.isnan(a) & np.isnan(r))
    if not np.array_equal(np.isfinite(a) | same, finite | same):
        return math.inf, scale
    diff = np.where(same, 0.0, np.abs(a - r))
    worst = float(np.max(diff)) if diff.size else 0.0
    if not math.isfinite(worst):
        return math.inf, scale
    # an all-zero reference: the error is absolute
    return worst / scale if scale > 0 else worst, scale


def _clone(values: Sequence[Any]) -> List[Any]:
    # every run gets its own copies: an in-place op of one run must not feed the next
    return [v.clone() if isinstance(v, paddle.Tensor) else v for v in values]


def _to64(value: Any) -> Any:
    if isinstance(value, paddle.Tensor) and _dtype(value) in ("float16", "bfloat16", "float32"):
        return value.astype("float64")
    return value


def _to32(value: Any) -> Any:
    if isinstance(value, paddle.Tensor) and _dtype(value) == "float64":
        return value.astype("float32")
    return value


def _is_float_cast(node: Node) -> bool:
    if node.op == "call_method":
        return node.target in ("astype", "cast")
    return node.op == "call_function" and getattr(node.target, "__name__", "") in (
        "cast",
        "_cast",
    )


def _map_values(value: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_map_values(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map_values(v, fn) for k, v in value.items()}
    return fn(value)


def _resolve(root: Any, path: str) -> Any:
    for part in path.split("."):
        root = getattr(root, part)
    return root


class _Recorder(Interpreter):
    """Runs a graph node by node and keeps every value; with ``float64``, float inputs,
    parameters and buffers are cast to float64 first, and an op that cannot run in float64
    runs in float32 (noted)."""

    def __init__(self, gm: GraphModule, float64: bool = False):
        super().__init__(gm)
        self.float64 = float64
        self.notes: List[str] = []
        self._layers: Dict[str, Any] = {}

    def run_node(self, node: Node) -> Any:
        args = self._fetch(node.args)
        kwargs = self._fetch(node.kwargs)
        try:
            value = getattr(self, node.op)(node.target, args, kwargs)
            if self.float64 and _is_float_cast(node) and _is_float_tensor(value):
                # a cast between float types keeps the reference in float64: rounding
                # to float32 there would hide the error the reference is to measure
                return _to64(args[0]) if args and _is_float_tensor(args[0]) else value
            return value
        except Exception as e:  # retried in float32 below, or raised
            if not self.float64 or node.op not in ("call_function", "call_method"):
                raise
            why = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:120] if str(e) else ''}"
        # (outside the except block: a failure here is not chained to the float64 one)
        args, kwargs = _map_values(args, _to32), _map_values(kwargs, _to32)
        value = getattr(self, node.op)(node.target, args, kwargs)
        self.notes.append(f"{node.name} ran in float32 in the float64 reference ({why})")
        return value

    def placeholder(self, target, args, kwargs):
        value = next(self._args)
        return _to64(value) if self.float64 else value

    def get_attr(self, target, args, kwargs):
        value = _resolve(self.gm, target)
        return _to64(value) if self.float64 else value

    def call_module(self, target, args, kwargs):
        layer = _resolve(self.gm, target)
        if self.float64:
            layer = self._layer64(target, layer)
        return layer(*args, **kwargs)

    def _layer64(self, target: str, layer: Any) -> Any:
        # a copy: the user's layer keeps its parameters' dtype
        if target not in self._layers:
            try:
                copied = copy.deepcopy(layer)
                copied.to(dtype="float64")
                self._layers[target] = copied
            except Exception as e:  # noqa: BLE001 - the layer then runs as it is
                self.notes.append(f"layer {target} kept its dtype ({type(e).__name__}: {e})")
                self._layers[target] = layer
        return self._layers[target]


# ------------------------------------------------------------------------ the graphs of a call


@dataclass
class _Recorded:
    gm: GraphModule
    inputs: List[Any]


class _RecordingBackend:
    """Stands in for the chosen backend during the capture: keeps each graph, before any
    pass, with the inputs it was first fed, and runs it as the paddle backend would."""

    def __init__(self, name: str, like: plugins.Backend):
        self.name = name
        self.like = like
        self.graphs: Dict[int, _Recorded] = {}

    def compile(self, gm, example_inputs, **options):
        self.graphs[id(gm)] = _Recorded(gm, _clone(example_inputs))
        return gm.forward

    @hookimpl
    def jit_register_backends(self, register):
        # capture as for the chosen backend: which numbers become inputs depends on it
        register(
            self.name,
            self.compile,
            "records graphs for jit_core.debug.compare",
            number_inputs=self.like.number_inputs,
        )


def _record_graphs(fn: Callable, args, kwargs, options: Options, backend: plugins.Backend):
    name = f"jit-core-debug-record-{id(options)}"
    recorder = _RecordingBackend(name, backend)
    plugins.register_plugin(recorder, name=name)
    try:
        record_options = Options(**{**options.__dict__})
        record_options.backend = name
        record_options.passes = ()
        record_options.disable_passes = ()
        record_options.backend_options = {}
        ctx = CompileContext(record_options, _target_codes(fn))
        result = ctx.run(fn, args, kwargs)
    finally:
        plugins.unregister_plugin(name)
    found = []
    for ev in ctx.events:
        entry = ev.entry
        if not ev.compiled or entry is None or entry.graph_module is None:
            continue
        rec = recorder.graphs.get(id(entry.graph_module))
        if rec is not None:
            found.append((ev.code_name, ev.location, rec))
    return result, found


# ------------------------------------------------------------------------ compare


class _GraphTriage:
    """Compiles, runs and bisects one recorded graph."""

    def __init__(self, rec: _Recorded, options: Options, backend, rtol: float, factor: float):
        self.gm = rec.gm
        self.inputs = rec.inputs
        self.options = options
        self.backend = backend
        self.rtol = rtol
        self.factor = factor
        self.facts = {"frozen"} if options.freeze else set()
        self.facts.add("no_grad")  # compare() runs without gradients

    # -- building
    def copy(self, graph: Optional[Graph] = None) -> GraphModule:
        graph = self.gm.graph.copy() if graph is None else graph
        gm = GraphModule(self.gm, graph, class_name=type(self.gm).__name__)
        gm.meta = dict(self.gm.meta)
        return gm

    def build(
        self,
        gm: GraphModule,
        passes: Optional[Sequence[Any]],
        disable: Sequence[str],
        ran: List[str],
    ) -> Tuple[Callable, Optional[str]]:
        """``gm`` (changed in place) after the passes, whose names are appended to ``ran``,
        built by the backend: (what runs it, a note where the backend declined it and
        paddle runs it)."""
        manager = PassManager.from_options(passes, tuple(disable), self.options.debug)
        records = manager.run(gm, PassContext(_clone(self.inputs), facts=set(self.facts)))
        ran.extend(r.name for r in records if r.ran)
        try:
            built = self.backend.compile(gm, _clone(self.inputs), **self.options.backend_options)
            return built, None
        except GraphDeclined as e:
            paddle_backend = plugins.get_backend("paddle")
            note = f"backend {self.backend.name!r} declined the graph, paddle runs it: {e}"
            return paddle_backend.compile(gm, _clone(self.inputs)), note

    def run_compiled(self, passes, disable, graph: Optional[Graph] = None):
        """(outputs, passes that ran, note, error): error where the build or run raised."""
        ran: List[str] = []
        try:
            built, note = self.build(self.copy(graph), passes, disable, ran)
            with rng.preserved():
                outs = built(*_clone(self.inputs))
            return list(outs), ran, note, None
        except Exception as e:  # a build that fails is what the report says
            log.debug("compiled run failed", exc_info=True)
            return None, ran, None, f"{type(e).__name__}: {_first_lines(str(e))}"

    # -- judging
    def tolerance(self, eager_error: float) -> float:
        return max(self.rtol, self.factor * eager_error)

    def within(self, got: Any, eager: Any, ref: Any) -> Tuple[bool, float, float, float]:
        """(ok, compiled error, eager error, tolerance) of one value."""
        eager_error, _ = _scaled_error(eager, ref)
        tol = self.tolerance(eager_error)
        if got is None or not isinstance(got, paddle.Tensor):
            return False, math.inf, eager_error, tol
        err, _ = _scaled_error(got, ref)
        return err <= tol, err, eager_error, tol

    def outputs_ok(self, outs: Optional[List[Any]], eager: List[Any], ref: List[Any]) -> bool:
        if outs is None or len(outs) != len(eager):
            return False
        for got, e, r in zip(outs, eager, ref):
            if _is_float_tensor(e):
                if not self.within(got, e, r)[0]:
                    return False
            elif isinstance(e, paddle.Tensor):
                if not isinstance(got, paddle.Tensor) or not np.array_equal(got.numpy(), e.numpy()):
                    return False
        return True

    # -- bisecting
    def bisect_passes(self, ran: List[str], eager, ref) -> Optional[Culprit]:
        for name in ran:
            disable = tuple(self.options.disable_passes) + (name,)
            outs, _, _, error = self.run_compiled(self.options.passes, disable)
            log.debug("without pass %s: %s", name, error or "ran")
            if error is None and self.outputs_ok(outs, eager, ref):
                return Culprit(
                    "pass",
                    name,
                    detail="the graph is within tolerance with this pass disabled "
                    f"(optimize(..., disable_passes=[{name!r}]))",
                )
        return None

    def bisect_nodes(self, notes: List[str]) -> Optional[Culprit]:
        # (on the graph itself: the values are kept by its nodes)
        eager_run = _Recorder(self.gm, float64=False)
        ref_run = _Recorder(self.gm, float64=True)
        with rng.preserved():
            eager_run.run(*_clone(self.inputs))
        with rng.preserved():
            ref_run.run(*_clone(self.inputs))
        for node in self.gm.graph.nodes:
            if not node.op.startswith("call_"):
                continue
            eager = eager_run.env.get(node)
            if not _is_float_tensor(eager):
                continue
            outs, _, _, error = self.run_compiled((), (), _prefix(self.gm.graph, node))
            got = outs[0] if outs else None
            ok, err, _, tol = self.within(got, eager, ref_run.env[node])
            if ok:
                continue
            if error is not None:
                detail = f"the graph cut after it fails on backend {self.backend.name!r}: {error}"
            else:
                detail = (
                    f"its compiled value has error {err:.3g} against float64, over the "
                    f"tolerance {tol:.3g} (eager float32's own error there: "
                    f"{_scaled_error(eager, ref_run.env[node])[0]:.3g}); every node before "
                    "it is within tolerance"
                )
            loc = node.meta.get("source_loc")
            return Culprit(
                "node",
                node.name,
                op=_describe_op(self.gm, node),
                location=loc,
                source_line=_source_line(loc),
                input_dtypes=[
                    _dtype(eager_run.env[n])
                    for n in _arg_nodes((node.args, node.kwargs))
                    if isinstance(eager_run.env.get(n), paddle.Tensor)
                ],
                error=err if error is None else None,
                tolerance=tol,
                detail=detail,
            )
        return None

    # -- the whole graph
    def check(self, frame: str, location: str) -> GraphCheck:
        with rng.preserved():
            eager = list(self.gm.forward(*_clone(self.inputs)))
        ref_run = _Recorder(self.gm, float64=True)
        with rng.preserved():
            ref = list(ref_run.run(*_clone(self.inputs)))
        notes = list(ref_run.notes)
        outs, ran, note, error = self.run_compiled(self.options.passes, self.options.disable_passes)
        if note:
            notes.append(note)
        checks = []
        for i, (e, r) in enumerate(zip(eager, ref)):
            if not _is_float_tensor(e):
                continue
            got = outs[i] if outs is not None and i < len(outs) else None
            _, err, eager_error, tol = self.within(got, e, r)
            vs = _scaled_error(got, e)[0] if isinstance(got, paddle.Tensor) else None
            checks.append(
                OutputCheck(
                    index=i,
                    dtype=_dtype(e),
                    shape=list(e.shape),
                    compiled_error=None if got is None else err,
                    eager_error=eager_error,
                    compiled_vs_eager=vs,
                    tolerance=tol,
                    reference_max=_scaled_error(r, r)[1],
                )
            )
        result = GraphCheck(
            frame=frame,
            location=location,
            backend=self.backend.name,
            passes=ran,
            outputs=checks,
            verdict="",
            compile_error=error,
            notes=notes,
            code=self.gm.code,
        )
        if error is None and self.outputs_ok(outs, eager, ref):
            result.verdict = self._fine_verdict(checks)
            return result
        result.verdict = "compile failed" if error is not None else "over tolerance"
        culprit = self.bisect_passes(ran, eager, ref)
        if culprit is None:
            culprit = self.bisect_nodes(notes)
        if culprit is None:
            result.verdict += ": no single pass or node found (passes together, or outputs)"
        else:
            result.verdict += f": {culprit.kind} {culprit.name}"
        result.culprit = culprit
        return result

    def _fine_verdict(self, checks: List[OutputCheck]) -> str:
        own = [
            c
            for c in checks
            if c.eager_error > self.rtol or (c.compiled_vs_eager or 0.0) > self.rtol
        ]
        if not own:
            return "ok"
        worst = max(c.eager_error for c in own)
        return (
            f"ok: eager's own error (eager float32 is {worst:.3g} from float64 too; "
            "the JIT is not to blame)"
        )


def _prefix(graph: Graph, last: Node) -> Graph:
    """The graph up to ``last`` (every placeholder kept, so it takes the same inputs),
    returning ``last``'s value."""
    new = graph.copy(until=last)
    new.eliminate_dead_code()
    return new


def _arg_nodes(value: Any) -> List[Node]:
    """The nodes among a node's arguments, in order, repeats kept (``z * z``: two)."""
    if isinstance(value, Node):
        return [value]
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in _arg_nodes(v)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _arg_nodes(v)]
    return []


def _describe_op(gm: GraphModule, node: Node) -> str:
    target = node.target
    if node.op == "call_method":
        return f"call_method Tensor.{target}"
    if node.op == "call_module":
        try:
            kind = type(_resolve(gm, target)).__name__
        except AttributeError:
            kind = "?"
        return f"call_module {target} ({kind})"
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    module = {"_operator": "operator"}.get(module, module)
    return f"{node.op} {module + '.' if module else ''}{name}"


def _source_line(location: Optional[str]) -> Optional[str]:
    if not location or ":" not in location:
        return None
    path, _, line = location.rpartition(":")
    if not line.isdigit():
        return None
    text = linecache.getline(path, int(line)).strip()
    return text or None


def _first_lines(text: str, limit: int = 400) -> str:
    text = " ".join(text.strip().split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def compare(
    fn: Callable,
    *args: Any,
    backend: str = "paddle",
    rtol: float = DEFAULT_RTOL,
    eager_factor: float = DEFAULT_EAGER_FACTOR,
    **optimize_options: Any,
) -> CompareReport:
    """Run ``fn(*args)`` through a fresh JIT and check every graph it captures: compiled by
    ``backend`` with the passes ``optimize_options`` choose, against eager float32 (the
    graph's own code, no pass) and a float64 reference, each error scaled by the
    reference's largest magnitude. A graph is fine when its compiled error is within
    ``max(rtol, eager_factor * eager's own error)``; one that is not is bisected over its
    passes, then its nodes, and the culprit named.

    ``fn`` may be a function, a layer or what ``optimize()`` returned (its options are the
    defaults). ``optimize_options`` are ``optimize()``'s (``passes``, ``disable_passes``,
    ``freeze``, backend options). The comparison runs without gradients; the call's result
    (``report.result``) is computed with every graph on the paddle backend.
    """
    if not callable(fn):
        raise TypeError(
            "compare() takes a function, a paddle.nn.Layer or what optimize() returned, "
            f"got {type(fn).__name__}"
        )
    if not rtol > 0 or not eager_factor > 0:
        raise ValueError(f"rtol and eager_factor must be positive, got {rtol}, {eager_factor}")
    base: Dict[str, Any] = {}
    if isinstance(fn, OptimizedFunction):
        base, fn = dict(fn._options.__dict__), fn._orig_fn
    elif isinstance(fn, OptimizedLayer):
        base, fn = dict(fn._options.__dict__), fn._orig_layer
    options = Options.from_kwargs(backend, False, optimize_options)
    if base and not optimize_options:
        options = Options(**{**base, "backend": backend})
    chosen = plugins.get_backend(options.backend)
    check_backend_options(chosen, options.backend_options)
    # fail here, not per graph, on an unknown pass
    PassManager.from_options(options.passes, options.disable_passes)
    report = CompareReport(backend=options.backend, rtol=rtol, eager_factor=eager_factor)
    with paddle.no_grad():
        result, graphs = _record_graphs(fn, args, {}, options, chosen)
        report.result = result
        for frame, location, rec in graphs:
            triage = _GraphTriage(rec, options, chosen, rtol, eager_factor)
            check = triage.check(frame, location)
            log.info("graph of %s: %s", frame, check.verdict)
            report.graphs.append(check)
    return report


def _json_default(value: Any) -> Any:  # pragma: no cover - to_json() holds plain values
    return str(value)


def dumps(report: CompareReport) -> str:
    """``report.to_json()`` as JSON text."""
    return json.dumps(report.to_json(), indent=2, default=_json_default)


__all__ = ["compare", "dumps", "CompareReport", "GraphCheck", "OutputCheck", "Culprit"]
