"""GraphModule -> ONNX, shared by every ONNX-based backend.

``export_onnx`` lowers a graph directly (``direct``) where every call has a lowering. The
other graphs take the older path where paddle2onnx is installed (without it, they run on
the paddle backend: ``GraphDeclined``): the GraphModule ->
``paddle.jit.to_static(full_graph=True)`` with the example inputs' shapes and dtypes ->
``paddle.jit.save`` into a temporary folder -> paddle2onnx (opset ``DEFAULT_OPSET``,
``optimize_tool="None"``), run in a worker process -> an ``onnx.ModelProto`` whose inputs
are named like the graph's placeholders.

Shapes are those of the example inputs, except the dynamic dimensions of a graph's inputs
(``meta["dynamic_dims"]``), which the model serves at every size (sizes the graph reads
become shape operators of the program: ``shapes.size``).
"""

from __future__ import annotations

import atexit
import importlib.metadata
import importlib.util
import logging
import os
import re
import sys
import tempfile
import warnings
from typing import Any, List, Optional, Sequence, Tuple

import paddle

from ...errors import GraphDeclined, JitError, MissingDependencyError, StaticShapesOnly
from ...fx import GraphModule
from ...workers import Worker, WorkerDied
from ..static_build import building
from .prepare import prepare_graph

log = logging.getLogger("jit_core.kit.onnx")

#: ONNX opset of exported models (ONNX Runtime 1.19+ runs it; paddle2onnx raises it for an
#: operator that needs a newer one)
DEFAULT_OPSET = 17
PADDLE2ONNX_VERSION = "2.1.0"
#: part of every cache key of an exported model: raised whenever what a graph is exported
#: to changes for the same paddle2onnx (the rewrites of ``prepare``), so that no model
#: exported the old way is loaded (revision 2: activations whose attributes paddle2onnx
#: 2.1 dropped, e.g. ``gelu(approximate=True)``, are spelt out; revision 3: graphs are
#: lowered directly where every call has a lowering, ``direct.DIRECT_EXPORTER_VERSION``;
#: revision 4: ``relu`` is ``where(x > 0, x, 0)``, as Paddle maps NaN to 0)
EXPORT_REVISION = 4
_INSTALL = "'jit-core[onnx]' (paddle2onnx and onnx)"
#: the first paddle2onnx major release that reads Paddle 3's programs (PIR); 0.9 and 1.x
#: do not
PADDLE2ONNX_MIN_MAJOR = 2
#: the first Python that paddle2onnx 2.x has no wheels for (2.1.0: CPython 3.8 to 3.12), so
#: that ``jit-core[onnx]`` leaves it out there (an environment marker): graphs the direct
#: exporter has no lowering for then run on the paddle backend, saying why
PADDLE2ONNX_NO_WHEELS = (3, 13)


class OnnxExportError(JitError):
    """The graph cannot be exported to ONNX; the message names the operators at fault."""

    def __init__(self, message: str, operators: Sequence[str] = ()):
        super().__init__(message)
        self.operators = list(operators)


def require(module: str, feature: str = "the ONNX export", install: str = _INSTALL):
    """Import an optional dependency, or raise an error that says what to install."""
    if importlib.util.find_spec(module) is None:
        raise MissingDependencyError(feature, module, install)
    return importlib.import_module(module)


def installed_version(dist: str) -> Optional[str]:
    """The version of an installed distribution, from its metadata (nothing is imported);
    None when it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def exporter_versions() -> Tuple[str, str]:
    """The versions of paddle2onnx and onnx ("missing" where one is not installed), for
    the cache keys of what the ONNX-based backends build from an export."""
    return installed_version("paddle2onnx") or "missing", installed_version("onnx") or "missing"


def _major(version: str) -> int:
    try:
        return int(version.split(".")[0])
    except ValueError:
        return 0


def paddle2onnx_missing(python: Optional[Tuple[int, int]] = None) -> str:
    """Why paddle2onnx cannot serve an export on ``python`` (a ``(major, minor)`` pair,
    default this one), saying what to install; empty when it can."""
    return _paddle2onnx_missing(tuple(python or sys.version_info[:2]))


def _paddle2onnx_missing(python: Tuple[int, ...]) -> str:
    """``python``: a ``(major, minor)`` version."""
    version = installed_version("paddle2onnx")
    if version is not None and _major(version) >= PADDLE2ONNX_MIN_MAJOR:
        return ""
    if version is not None:
        return (
            f"the installed paddle2onnx {version} cannot read Paddle 3's programs "
            f"({PADDLE2ONNX_MIN_MAJOR}.x can: pip install 'paddle2onnx=={PADDLE2ONNX_VERSION}')"
        )
    if python >= PADDLE2ONNX_NO_WHEELS:
        return (
            f"paddle2onnx {PADDLE2ONNX_MIN_MAJOR}.x has no wheels for Python "
            f"{python[0]}.{python[1]} (its wheels cover Python 3.8 to 3.12)"
        )
    return f"paddle2onnx is not installed: pip install {_INSTALL}"


def unavailable_reason(python: Optional[Tuple[int, int]] = None) -> str:
    """Why the ONNX export cannot run on this Python, naming each missing package; empty
    when it can.

    The direct exporter needs onnx alone; paddle2onnx only serves the graphs it has no
    lowering for (without it, such a graph runs on the paddle backend, saying why), and
    always where ``JIT_CORE_ONNX_EXPORTER=paddle2onnx`` asks for it. Read from the installed
    distributions' metadata, without importing them: cheap enough for the ONNX-based
    backends to call when they register. ``python`` (a ``(major, minor)`` pair, default this
    one) is for tests.
    """
    reasons = []
    if os.environ.get(EXPORTER_ENV, "").strip().lower() == "paddle2onnx":
        missing = _paddle2onnx_missing(tuple(python or sys.version_info[:2]))
        if missing:
            reasons.append(f"{EXPORTER_ENV}=paddle2onnx asks for paddle2onnx, and {missing}")
    if installed_version("onnx") is None:
        reasons.append(
            f"onnx is not installed, and the ONNX export needs it: pip install {_INSTALL}"
        )
    return "; ".join(r for r in reasons if r)


#: which exporter ONNX-based backends use first: ``direct`` (``jit_core.kit.onnx.direct``, the
#: paddle2onnx path for graphs it has no lowering for) or ``paddle2onnx`` (always the static
#: program and paddle2onnx)
EXPORTER_ENV = "JIT_CORE_ONNX_EXPORTER"
EXPORTERS = ("direct", "paddle2onnx")
DEFAULT_EXPORTER = "direct"


def exporter_choice() -> str:
    """The exporter ``JIT_CORE_ONNX_EXPORTER`` names (read on each export), or the
    default; an unknown name is an error that lists the known ones."""
    value = os.environ.get(EXPORTER_ENV, "").strip().lower() or DEFAULT_EXPORTER
    if value not in EXPORTERS:
        raise ValueError(
            f"{EXPORTER_ENV}={value!r} names no ONNX exporter; one of {', '.join(EXPORTERS)}"
        )
    return value


def export_onnx(
    gm, example_inputs: Sequence[Any], opset: int = DEFAULT_OPSET, acts_on_checks: bool = False
):
    """The ONNX model of ``gm`` for inputs shaped like ``example_inputs``. A backend that
    computes a call whose run-time checks fail another way passes ``acts_on_checks``
    (lowerings may then take faster forms, ``direct.Exporter.require``); for any other, a
    model with checks is declined (``errors.GraphDeclined``: the graph runs on paddle).

    The direct exporter (``direct.export_direct``) lowers the graph itself; a graph with a
    call it has no lowering for is exported through a static program and paddle2onnx.
    ``gm.meta["onnx_exporter"]`` then says why (``explain()`` shows it).
    """
    from .direct import MissingLowering, export_direct, refuse_runtime_checks

    onnx = require("onnx")
    _check_updates(gm.graph)
    lacking: Optional[Exception] = None
    if exporter_choice() == "direct":
        try:
            model = export_direct(gm, example_inputs, opset, acts_on_checks)
        except MissingLowering as e:
            lacking = e
        else:
            if not acts_on_checks:
                # exact only where its checks hold, for a backend that would not look
                refuse_runtime_checks(model)
            return model
    missing = _paddle2onnx_missing(tuple(sys.version_info[:2]))
    if missing and lacking is None:
        raise MissingDependencyError(
            "the ONNX export",
            "paddle2onnx",
            _INSTALL,
            message=f"{EXPORTER_ENV}=paddle2onnx asks for paddle2onnx, and {missing}",
        )
    if missing:
        from ..shape_dispatch import dynamic_dims

        why = f"{lacking}, and {missing}"
        if dynamic_dims(gm):
            # one build per input shape: each may be lowered directly
            raise StaticShapesOnly(why)
        raise GraphDeclined(why)
    if lacking is not None:
        log.info("%s: exported through paddle2onnx: %s", type(gm).__name__, lacking)
        gm.meta["onnx_exporter"] = f"exported through paddle2onnx: {lacking}"
    try:
        _check_graph(gm.graph)
        with tempfile.TemporaryDirectory(prefix="jit_core_onnx_") as folder:
            prefix = os.path.join(folder, "graph")
            save_static(gm, example_inputs, prefix)
            model = prefix + ".json" if os.path.exists(prefix + ".json") else prefix + ".pdmodel"
            params = prefix + ".pdiparams" if os.path.exists(prefix + ".pdiparams") else ""
            out = os.path.join(folder, "graph.onnx")
            _WORKER.export(model, params, opset, out)
            return onnx.load(out)
    except OnnxExportError as e:
        if lacking is None:
            raise
        # paddle2onnx was the second try: what stopped the direct exporter is the cause a
        # lowering would remove
        raise OnnxExportError(
            f"{e}; the direct exporter, first: {lacking}",
            list(dict.fromkeys(e.operators + getattr(lacking, "operators", []))),
        ) from e


def _check_updates(graph) -> None:
    """Refuse, saying why, what an exported model cannot do: update a tensor of the
    caller (a training-mode batch norm's running statistics, ``meta["updates_inputs"]``
    set by the capture)."""
    for node in graph.nodes:
        if node.meta.get("updates_inputs"):
            name = getattr(node.target, "__name__", node.target)
            raise OnnxExportError(
                f"{name} ({node.name}) updates {', '.join(node.meta['updates_inputs'])} in "
                "place (the running statistics of a batch norm in training mode), which an "
                "exported inference model cannot do",
                [str(name)],
            )


def _check_graph(graph) -> None:
    """Refuse what paddle2onnx cannot export: an output without elements (it leaves it
    out of the model, which ONNX Runtime then refuses: "Graph output ... does not
    exist")."""
    for node in graph.nodes:
        if node.op != "output":
            continue
        for i, out in enumerate(graph.output_values()):
            shape = getattr(out, "meta", {}).get("shape")
            if shape is not None and 0 in shape:
                raise OnnxExportError(
                    f"graph output {i} ({out.name}, shape {shape}) has no elements, and "
                    "paddle2onnx leaves such outputs out of the model (the reserve space "
                    "of an inference batch_norm is one)"
                )


def save_static(gm, example_inputs: Sequence[Any], prefix: str) -> None:
    """``paddle.jit.save`` of ``gm`` as a static program with the example inputs' specs."""
    from ..shape_dispatch import dynamic_dims

    example = {n.name: x for n, x in zip(_placeholders(gm.graph), example_inputs)}
    dynamic = dynamic_dims(gm)
    graph = prepare_graph(gm, dynamic=bool(dynamic))

    def spec_shape(name: str) -> list:
        # None: a dimension the exported model serves at every size
        shape: list = list(example[name].shape)
        for d in dynamic.get(name, ()):
            shape[d] = None
        return shape

    # stop_gradient as the examples have it (True: the export is for inference), which
    # some static ops require (expand of a bool tensor refuses an input that needs one)
    specs = [
        paddle.static.InputSpec(
            spec_shape(p.name),
            example[p.name].dtype,
            name=p.name,
            stop_gradient=bool(example[p.name].stop_gradient),
        )
        for p in _placeholders(graph)
    ]
    # a copy that shares the parameters and layers (their modes untouched): to_static
    # replaces the forward of the layer it gets
    layer = GraphModule(gm, graph, class_name=type(gm).__name__ + "_export")
    static = paddle.jit.to_static(layer, input_spec=specs, full_graph=True)
    try:
        with building(), warnings.catch_warnings():
            # a graph without parameters is fine: nothing to save but the program
            warnings.filterwarnings("ignore", message="no variable in your model")
            # a graph's in-place update is read through the node it returns, so its
            # out-of-place static form computes the same values
            warnings.filterwarnings(
                "ignore", message="In static graph mode, .*_\\(\\) is the same as"
            )
            paddle.jit.save(static, prefix)
    except Exception as e:
        raise OnnxExportError(
            "paddle.jit.save could not turn the graph into a static program: " + _static_error(e)
        ) from e


def _static_error(e: Exception) -> str:
    """What ``to_static`` raised, in a line or two: its cause (the last ``XxxError: ...``
    line of the message, which Paddle writes after a listing of the code) and the graph's
    line it points at, which carries the user's own line as a comment."""
    text = str(e).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    cause = next(
        (line for line in reversed(lines) if re.match(r"^[A-Za-z_.]*(Error|Exception):", line)),
        None,
    )
    if cause is None:
        cause = f"{type(e).__name__}: {lines[-1] if lines else text}"
    where = [lines[i - 1] for i, line in enumerate(lines) if "<--- HERE" in line and i > 0]
    if where and " # " in where[0]:
        cause += f" (at {where[0].split(' # ', 1)[1]})"
    elif where:
        cause += f" (at the graph's line {where[0]!r})"
    return cause[:1000]


def _placeholders(graph) -> list:
    return [n for n in graph.nodes if n.op == "placeholder"]


# -------------------------------------------------------------------- the worker process
class _ExportWorker(Worker):
    """paddle2onnx in a worker process (``jit_core.workers``): it aborts the process on
    an operator it cannot convert."""

    def __init__(self):
        super().__init__([sys.executable, "-m", "jit_core.kit.onnx._worker"], "paddle2onnx")

    @property
    def version(self) -> str:
        return self.info.get("version", "")

    @property
    def supported(self) -> List[str]:
        return self.info.get("supported", [])

    def export(self, model: str, params: str, opset: int, out: str) -> None:
        req = {"model": model, "params": params, "opset": opset, "out": out}
        try:
            reply = self.request(req)
        except WorkerDied as e:
            if e.step == "its start":
                raise OnnxExportError(
                    f"the paddle2onnx worker did not start ({e.how}):\n{e.stderr}"
                ) from None
            ops = unsupported_operators(model, self.supported)
            reason = _reason(e.stderr)
            if ops:
                msg = (
                    f"paddle2onnx {self.version} cannot convert the operator"
                    f"{'s' if len(ops) > 1 else ''} {', '.join(ops)} (it aborted: {reason})"
                )
            else:
                msg = f"paddle2onnx {self.version} aborted: {reason}\n{e.stderr}"
            raise OnnxExportError(msg, ops) from None
        if not reply["ok"]:
            raise OnnxExportError(f"paddle2onnx {self.version} failed: {reply['error']}")


_WORKER = _ExportWorker()
atexit.register(_WORKER.close)


def _reason(tail: str) -> str:
    for line in tail.splitlines():
        if "[ERROR]" in line:
            return line.split("]")[-1].strip()
    return "no reason given"


# paddle2onnx lists the operators it converts under their pre-PIR names
_LEGACY_NAMES = {
    "add": "elementwise_add",
    "subtract": "elementwise_sub",
    "multiply": "elementwise_mul",
    "divide": "elementwise_div",
    "floor_divide": "elementwise_floordiv",
    "remainder": "elementwise_mod",
    "maximum": "elementwise_max",
    "minimum": "elementwise_min",
    "elementwise_pow": "pow",
    "matmul": "matmul_v2",
    "flatten": "flatten_contiguous_range",
    "expand": "expand_v2",
    "unsqueeze": "unsqueeze2",
    "squeeze": "squeeze",
    "topk": "top_k_v2",
    "argmax": "arg_max",
    "argmin": "arg_min",
    "mean": "reduce_mean",
    "max": "reduce_max",
    "min": "reduce_min",
    "prod": "reduce_prod",
    "all": "reduce_all",
    "any": "reduce_any",
    "sum": "reduce_sum",
    "hardswish": "hard_swish",
    "hardsigmoid": "hard_sigmoid",
    "tanh_shrink": "tanh_shrink",
    "pool2d": "pool2d",
}
_ALWAYS = {"data", "fetch", "parameter", "constant", "combine", "slice", "split", "full"}


def unsupported_operators(model_file: str, supported: Sequence[str]) -> List[str]:
    """Operators of a saved PIR program that paddle2onnx does not list as supported."""
    try:
        with open(model_file, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return []
    known = set(supported)
    found = []
    for full in re.findall(r'"#"\s*:\s*"(\d+\.[A-Za-z_0-9]+)"', text):
        name = full.split(".", 1)[1]
        if name in _ALWAYS or name.startswith(("t_", "a_")):
            continue
        base = name[:-1] if name.endswith("_") else name
        if {name, base, _LEGACY_NAMES.get(base, base)} & known:
            continue
        if base not in found:
            found.append(base)
    return found


__all__ = [
    "DEFAULT_OPSET",
    "OnnxExportError",
    "export_onnx",
    "require",
    "save_static",
    "unsupported_operators",
]
