"""The native half of a TVM build: an ONNX model -> Relax -> tuned or sampled schedules ->
``tvm.compile`` -> a shared library (as bytes).

Nothing here touches Paddle, and everything it takes and gives is plain data, so that
it can run in the build worker (``build_worker``): TVM's importer, ONNX's shape
inference and LLVM can die of a signal on a graph, which in the user's process would end
the program.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from jit_core.errors import JitError, StaticShapesOnly

from . import schedules, tuning
from .intrinsics import import_tensor_intrinsics
from .target import TargetSpec, make_target


class TvmCompileError(JitError):
    """TVM cannot import or compile an exported graph; the message names the ONNX node or
    Relax operator at fault."""


@dataclass
class BuildSpec:
    """How to build: the backend's options that reach TVM, all of them JSON."""

    #: the user's ``target`` (None: the host CPU)
    target: TargetSpec
    layout: str
    winograd: bool
    #: ``tune``: "auto", "always" or "off"
    mode: str
    trials_per_task: int
    #: the tuning's time budget, or None
    seconds: Optional[float]
    #: the graph's name, in progress lines
    label: str
    #: the graph has dynamic dimensions (symbolic sizes in ``shapes``)
    symbolic: bool
    #: a kernel without a schedule over symbolic sizes is built as a plain loop nest
    #: (else the build raises ``StaticShapesOnly``)
    loop_nests: bool = True
    #: kernels kept as their loop nests, unscheduled (after a build that computed wrongly):
    #: "" none, "backward" those that read a buffer backwards, "all" every one
    plain: str = ""

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


#: the counters of ``backend.stats`` a build adds to
COUNTS = ("tuned_tasks", "reused_tasks", "sampled_kernels")


def build_library(
    model,
    shapes: Dict[str, List[Any]],
    dtypes: Dict[str, str],
    spec: BuildSpec,
    step: Callable[[str], None] = lambda name: None,
) -> Tuple[bytes, bool, Dict[str, int]]:
    """(the shared library, whether every kernel worth tuning has its record (False when
    the time budget ran out first), what to add to ``stats``). ``step(name)`` is told each
    step as it starts (for the reason of a failure)."""
    import tvm

    # what MetaSchedule imports at its first TuneContext, without its 14 s of stack scans
    import_tensor_intrinsics()
    target = make_target(spec.target)
    counts = dict.fromkeys(COUNTS, 0)
    step("import into Relax")
    mod = _to_relax(model, shapes, dtypes, spec.symbolic)
    step("Relax passes")
    mod = tuning.prepare(mod, target, spec.layout, spec.winograd)
    complete = True
    if spec.mode != "off":
        step("tuning")
        report = tuning.tune(
            mod,
            target,
            trials_per_task=spec.trials_per_task,
            seconds=spec.seconds,
            only_missing=spec.mode == "auto",
            label=spec.label,
        )
        counts["tuned_tasks"] += len(report.tuned)
        counts["reused_tasks"] += report.reused
        complete = report.complete
        mod = tuning.apply_records(mod, target)
    step("sampled schedules")
    unscheduled: List[str] = []
    mod, sampled = schedules.sample_unscheduled(
        mod, target, spec.symbolic, unscheduled, plain=spec.plain
    )
    counts["sampled_kernels"] += sampled
    if unscheduled and not spec.loop_nests:
        raise StaticShapesOnly(
            f"TVM has no schedule over symbolic sizes for the kernels "
            f"{', '.join(sorted(unscheduled))}: plain loop nests would run many times slower "
            "than builds per shape (symbolic=True accepts them)"
        )
    mod = schedules.fold_weight_layouts(mod, target)
    step("tvm.compile")
    try:
        executable = tvm.compile(mod, target)
    except Exception as e:  # TVM raises its own error types
        raise TvmCompileError(_compile_failure(e, mod)) from e
    # machine code is emitted once, into the shared library the cache keeps: running the
    # executable tvm.compile returns would JIT-compile every kernel first (densenet121:
    # 12 s), and exporting it afterwards would emit the code a second time
    step("export_library")
    return _export(executable), complete, counts


def _export(executable) -> bytes:
    """The shared library of a compiled executable."""
    with tempfile.TemporaryDirectory(prefix="jit_tvm_") as folder:
        path = os.path.join(folder, "graph.so")
        with without_stderr_lines(SCOPE_NOISE):
            executable.export_library(path)
        with open(path, "rb") as f:
            return f.read()


def _to_relax(model, shapes: Dict[str, List[Any]], dtypes: Dict[str, str], dynamic: bool):
    """The Relax module of ``model``, whose fed inputs have ``shapes`` (a string is the
    name of a symbolic size) and ``dtypes``."""
    import tvm
    from tvm.relax.frontend import onnx as onnx_frontend

    unsupported = _unsupported_ops(model)
    if unsupported:
        raise TvmCompileError(
            f"TVM's ONNX importer has no converter for the ONNX operators "
            f"{', '.join(unsupported)} (nodes {_nodes_of(model, unsupported)})"
        )
    # one symbolic size per dynamic dimension: Relax compiles kernels over it
    sized = {
        name: [tvm.tirx.Var(d, "int64") if isinstance(d, str) else d for d in dims]
        for name, dims in shapes.items()
    }
    if dynamic:
        # ONNX's shape inference, which both folds run, can die of SIGFPE on a model with
        # dynamic dimensions (conformance test_models, a vision model with a dynamic
        # batch); they only pay off on static shapes
        drop_identities(model)
    else:
        fold_static_shapes(model)
        fold_batch_norms(model)
    try:
        with warnings.catch_warnings():
            # parameter names hold dots, which Relax renames, one warning each
            warnings.filterwarnings("ignore", message="Renaming name", category=UserWarning)
            return onnx_frontend.from_onnx(model, shape_dict=sized, dtype_dict=dtypes, opset=None)
    except Exception as e:  # converters raise anything
        raise TvmCompileError(
            f"TVM's ONNX importer failed{_failing_node(e, model)}: {first_line(e)}"
        ) from e


def fold_static_shapes(model) -> int:
    """Fold the shape arithmetic of a model into constants; returns how many nodes.

    paddle2onnx computes some attributes at run time from shapes (``Max`` of a pooled
    map's shape and a constant, ``Concat``/``Gather`` into a ``Reshape`` target). TVM's
    importer turns ``Shape`` into a symbolic shape that most converters reject ("cannot
    handle ShapeExpr inputs"), but every shape here is static (each input shape is its own
    graph): each ``Shape`` of a statically shaped tensor becomes a constant, then every
    node whose inputs are all small constants is evaluated (ONNX's reference evaluator).
    Each round lets shape inference see more (a folded ``Reshape`` target gives the batch
    dimension back), so it repeats until nothing changes.
    """
    total = 0
    for _ in range(8):
        folded = _fold_once(model)
        total += folded
        if not folded:
            break
    return total


def drop_identities(model) -> int:
    """Remove the ``Identity`` nodes whose output is not a graph output (their readers
    read the input instead); returns how many. paddle2onnx passes shapes through them,
    and with dynamic dimensions TVM's importer gets a symbolic shape there, which its
    ``Identity`` converter rejects ("cannot handle ShapeExpr inputs")."""
    graph = model.graph
    outputs = {o.name for o in graph.output}
    renamed: Dict[str, str] = {}
    kept = []
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in renamed:
                node.input[i] = renamed[name]
        if node.op_type == "Identity" and node.domain in ("", "ai.onnx"):
            if node.output[0] not in outputs:
                renamed[node.output[0]] = node.input[0]
                continue
        kept.append(node)
    if renamed:
        # subgraphs (If, Loop) may read a dropped name too
        for node in kept:
            for attr in node.attribute:
                for sub in list(attr.g.node if attr.HasField("g") else []) + [
                    n for g in attr.graphs for n in g.node
                ]:
                    for i, name in enumerate(sub.input):
                        if name in renamed:
                            sub.input[i] = renamed[name]
        del graph.node[:]
        graph.node.extend(kept)
    return len(renamed)


def fold_batch_norms(model) -> int:
    """Replace each inference ``BatchNormalization`` whose statistics are constants by
    ``Mul`` and ``Add`` with two per-channel constants; returns how many.

    jit-core's ``freeze`` folds a BatchNorm that follows a convolution into its weights;
    one that comes first (DenseNet's pre-activation blocks) stays. TVM decomposes it into
    five operations on the constants, and its ``FoldConstant`` compiles a kernel for each
    to evaluate them: densenet121 spent 38 s of its build there. NumPy computes the two
    constants at once.
    """
    import numpy as np
    from onnx import helper, numpy_helper

    graph = model.graph
    wanted = {i for n in graph.node if n.op_type == "BatchNormalization" for i in n.input[1:5]}
    if not wanted:
        return 0
    # the statistics come as initializers or as Constant nodes (paddle2onnx, frozen)
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer if i.name in wanted}
    for node in graph.node:
        if node.op_type == "Constant" and node.output[0] in wanted and _is_tensor(node):
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    ranks: Dict[str, int] = {}
    inferred = _inferred_shapes(model)
    for info in list(inferred.value_info) + list(inferred.input):
        t = info.type.tensor_type
        if t.HasField("shape"):
            ranks[info.name] = len(t.shape.dim)
    nodes = []
    folded = 0
    for node in graph.node:
        if node.op_type != "BatchNormalization":
            nodes.append(node)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if (
            len(node.output) != 1
            or attrs.get("training_mode", 0)
            or not all(name in constants for name in node.input[1:5])
            or ranks.get(node.input[0], 0) < 2
        ):
            nodes.append(node)
            continue
        scale, bias, mean, var = (constants[name].astype(np.float64) for name in node.input[1:5])
        dtype = constants[node.input[1]].dtype
        factor = scale / np.sqrt(var + attrs.get("epsilon", 1e-5))
        shift = bias - mean * factor
        shape = [-1] + [1] * (ranks[node.input[0]] - 2)
        out = node.output[0]
        for suffix, value in (("factor", factor), ("shift", shift)):
            array = value.astype(dtype).reshape(shape)
            graph.initializer.append(numpy_helper.from_array(array, f"{out}.bn_{suffix}"))
        nodes.append(
            helper.make_node(
                "Mul", [node.input[0], f"{out}.bn_factor"], [f"{out}.bn_scaled"], name=node.name
            )
        )
        nodes.append(
            helper.make_node("Add", [f"{out}.bn_scaled", f"{out}.bn_shift"], [out], name=node.name)
        )
        folded += 1
    if folded:
        used = {name for node in nodes for name in node.input}
        used.update(o.name for o in graph.output)
        del graph.node[:]
        graph.node.extend(
            n for n in nodes if n.op_type != "Constant" or any(o in used for o in n.output)
        )
        kept = [i for i in graph.initializer if i.name in used]
        del graph.initializer[:]
        graph.initializer.extend(kept)
    return folded


def _fold_once(model) -> int:
    import numpy as np
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    graph = _inferred_shapes(model)
    static: Dict[str, List[int]] = {}
    for info in list(graph.value_info) + list(graph.input) + list(graph.output):
        t = info.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            static[info.name] = [d.dim_value for d in t.shape.dim]
    for init in model.graph.initializer:
        static[init.name] = list(init.dims)
    small: Dict[str, Any] = {
        i.name: numpy_helper.to_array(i) for i in model.graph.initializer if _numel(i.dims) <= 64
    }
    opsets = {o.domain: o.version for o in model.opset_import}
    folded = 0
    for node in model.graph.node:
        value = None
        if node.op_type == "Constant":
            value = numpy_helper.to_array(node.attribute[0].t) if _is_tensor(node) else None
            if value is not None and value.size <= 64:
                small[node.output[0]] = value
            continue
        if node.op_type == "Shape" and node.input[0] in static:
            dims = static[node.input[0]]
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            value = np.array(dims[attrs.get("start", 0) : attrs.get("end", len(dims))], np.int64)
        elif (
            len(node.output) == 1
            and node.input
            and node.domain in ("", "ai.onnx")
            and all(i in small for i in node.input if i)
        ):
            try:
                value = ReferenceEvaluator(node, opsets=opsets).run(
                    None, {i: small[i] for i in node.input if i}
                )[0]
            except Exception:  # noqa: BLE001 - leave the node to TVM
                value = None
        if value is None or np.asarray(value).size > 64:
            continue
        value = np.asarray(value)
        small[node.output[0]] = value
        node.CopyFrom(
            helper.make_node(
                "Constant",
                [],
                [node.output[0]],
                name=node.name,
                value=numpy_helper.from_array(value),
            )
        )
        folded += 1
    return folded


def _inferred_shapes(model):
    """The graph of ``model`` after ONNX shape inference, run on a copy whose large
    constants are inputs of the same type and shape: the inference copies the whole
    model, which for vgg11 (500 MB of weights) took 3 s a round."""
    from onnx import GraphProto, helper, shape_inference

    graph = model.graph
    lean = GraphProto(name=graph.name)
    lean.input.extend(graph.input)
    lean.output.extend(graph.output)
    lean.value_info.extend(graph.value_info)
    for init in graph.initializer:
        if _numel(init.dims) > 64:
            lean.input.append(helper.make_tensor_value_info(init.name, init.data_type, init.dims))
        else:
            lean.initializer.append(init)
    for node in graph.node:
        if (
            node.op_type == "Constant"
            and _is_tensor(node)
            and _numel(node.attribute[0].t.dims) > 64
        ):
            t = node.attribute[0].t
            lean.input.append(helper.make_tensor_value_info(node.output[0], t.data_type, t.dims))
        else:
            lean.node.append(node)
    light = helper.make_model(lean, opset_imports=model.opset_import)
    light.ir_version = model.ir_version
    return shape_inference.infer_shapes(light).graph


def _numel(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _is_tensor(node) -> bool:
    return len(node.attribute) == 1 and node.attribute[0].name == "value"


def _unsupported_ops(model) -> List[str]:
    from tvm.relax.frontend.onnx import onnx_frontend

    known = onnx_frontend._get_convert_map()
    missing: List[str] = []
    for node in model.graph.node:
        if node.op_type not in known and node.op_type not in missing:
            missing.append(node.op_type)
    return missing


def _nodes_of(model, op_types: Sequence[str]) -> str:
    names = [n.name or n.op_type for n in model.graph.node if n.op_type in op_types]
    return ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")


def _failing_node(error: Exception, model) -> str:
    text = str(error)
    for node in model.graph.node:
        if node.name and node.name in text:
            return f" at ONNX node {node.name} ({node.op_type})"
    for node in model.graph.node:
        if re.search(rf"\b{re.escape(node.op_type)}\b", text):
            return f" at an ONNX {node.op_type} node"
    return ""


def first_line(error: Exception) -> str:
    lines = [ln.strip() for ln in str(error).strip().splitlines() if ln.strip()]
    # TVM puts the C++ traceback first and the message last
    return (lines[-1] if lines else type(error).__name__)[:500]


def _relax_ops(mod) -> List[str]:
    found: List[str] = []
    for name in re.findall(r"\bR\.([a-z_][\w.]*)\(", mod.script(show_meta=False)):
        if name not in found and not name.startswith(("call_tir", "const", "tuple")):
            found.append(name)
    return found


def _compile_failure(error: Exception, mod) -> str:
    text = str(error)
    ops = _relax_ops(mod)
    named = [op for op in ops if op in text or op.split(".")[-1] in text]
    where = f" at Relax operator {', '.join(named)}" if named else ""
    return f"TVM failed to compile the graph{where}: {first_line(error)} (operators: " + (
        ", ".join(ops[:20]) + ")"
    )


#: TVM 0.27 logs one warning per function when it saves or loads a library ("Warning:
#: Scope Saving:", "Warning: Scope Loaded:"): a debugging leftover, not a problem of the graph
SCOPE_NOISE = re.compile(r"Warning: Scope (Saving|Loaded):")


@contextlib.contextmanager
def without_stderr_lines(noise: re.Pattern) -> Iterator[None]:
    """Drop the lines matching ``noise`` that C++ code writes to stderr meanwhile, and
    write the others back."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            for line in caught.read().decode(errors="replace").splitlines(keepends=True):
                if not noise.search(line):
                    sys.stderr.write(line)
