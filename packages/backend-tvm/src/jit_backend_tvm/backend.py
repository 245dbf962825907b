"""Compile a captured graph with Apache TVM: ONNX export (shared with onnxrt) -> Relax
(``relax.frontend.onnx.from_onnx``) -> MetaSchedule records -> ``tvm.compile`` for the
host CPU -> Relax VM, wrapped as a callable on Paddle tensors.

Compiled libraries are kept in the compile cache, so a later process with the same graph
loads a shared library instead of exporting, tuning and compiling again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import tempfile
import threading
import time
import warnings
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import paddle

from jit_core.compile_cache import DiskCache, graph_key, machine_fingerprint
from jit_core.errors import JitError, StaticShapesOnly
from jit_core.index_bounds import IndexChecked
from jit_core.logs import get_logger
from jit_core.onnx import (
    DEFAULT_OPSET,
    ExportKeys,
    OnnxExportError,
    check_against_paddle,
    export_onnx,
    exporter_fingerprint,
    exporter_name,
    input_free_outputs,
    lift_parameters,
    live_tensors,
    require,
    restored_shapes,
    run_on_paddle,
)
from jit_core.shape_dispatch import check_other_sizes, dynamic_dims

from . import layouts, schedules, tuning
from .target import TargetSpec, make_target

log = logging.getLogger("jit_core.tvm")

_CACHE = DiskCache("tvm", executable=True)
_INSTALL = "jit-backend-tvm (it brings apache-tvm 0.27 on Python 3.10+)"
TUNE_MODES = ("auto", "always", "off")
#: the default of ``tune``; ``JIT_TVM_TUNE`` changes it for a whole process (CI runs the
#: conformance suite with ``off``: it checks correctness, not schedules)
TUNE_ENV = "JIT_TVM_TUNE"
DEFAULT_TRIALS_PER_TASK = 16
#: part of every cached library's key: raised whenever the way this package turns a graph
#: into kernels changes, so that no library built the old way is loaded
CODEGEN_REVISION = 2
#: how close a library's float results must be to eager Paddle's: ``rtol`` of each value
#: plus an absolute ``scaled_atol`` times the largest magnitude of the result (TVM's
#: schedules sum a convolution in their own tiled order, which drifts most on deep
#: networks). The check after each build refuses a library outside it; docs/backends.rst
#: states it and the conformance suite checks every graph with it.
RTOL = 1e-4
SCALED_ATOL = 1e-4

#: what this process did
stats: Dict[str, int] = {
    "builds": 0,
    "cache_hits": 0,
    "fallbacks": 0,
    "tuned_tasks": 0,
    "reused_tasks": 0,
    "sampled_kernels": 0,
    #: builds of graphs with dynamic dimensions: one library serves every size
    "symbolic_builds": 0,
    #: graphs with dynamic dimensions whose symbolic build failed (built per shape)
    "symbolic_failures": 0,
}


class TvmCompileError(JitError):
    """TVM cannot import or compile an exported graph; the message names the ONNX node or
    Relax operator at fault."""


def compile_graph(
    gm,
    example_inputs: Sequence[Any],
    *,
    tune: Optional[str] = None,
    trials_per_task: int = DEFAULT_TRIALS_PER_TASK,
    tune_seconds: Optional[float] = None,
    target: TargetSpec = None,
    layout: str = "NHWC",
    winograd: bool = True,
    progress: bool = True,
    opset: int = DEFAULT_OPSET,
    cache: bool = True,
    fallback: bool = False,
    symbolic: Union[bool, str] = "auto",
):
    """The backend's ``compile``: see the package README for the options. ``symbolic``:
    whether a graph with dynamic dimensions is built once over symbolic sizes: ``"auto"``
    where every kernel gets a schedule there, ``True`` even with plain loop nests,
    ``False`` never (once per input shape, each tuned like a static graph)."""
    tvm = require("tvm", "the tvm backend", _INSTALL)
    if not (isinstance(symbolic, bool) or symbolic == "auto"):
        raise ValueError(f"symbolic must be 'auto', True or False, got {symbolic!r}")
    mode = tune if tune is not None else os.environ.get(TUNE_ENV, "auto")
    if mode not in TUNE_MODES:
        raise ValueError(f"tune must be one of {', '.join(TUNE_MODES)}; got {mode!r}")
    if not isinstance(trials_per_task, int) or trials_per_task < 1:
        raise ValueError(f"trials_per_task must be a positive int, got {trials_per_task!r}")
    if tune_seconds is not None and not tune_seconds > 0:
        raise ValueError(f"tune_seconds must be positive, got {tune_seconds!r}")
    layouts.check_layout(layout)
    if not isinstance(winograd, bool):
        raise ValueError(f"winograd must be True or False, got {winograd!r}")
    tgt = make_target(target)
    dynamic = bool(dynamic_dims(gm))
    if dynamic and symbolic is False:
        raise StaticShapesOnly("symbolic=False asks for one TVM build per input shape")
    if dynamic:
        # MetaSchedule measures kernels of fixed sizes: a symbolic build takes the
        # sampled schedules (and the records of none)
        mode = "off"
    frozen = bool(gm.meta.get("frozen"))
    live = {} if frozen else live_tensors(gm)
    state_names = _state_names(gm, live)
    key = None
    if cache:
        extra = (
            "tvm",
            tvm.__version__,
            CODEGEN_REVISION,
            exporter_fingerprint(),
            str(tgt),
            "sampled schedules" if mode == "off" else f"tuned ({tuning.MEASUREMENT})",
            f"symbolic dimensions ({symbolic!r})" if dynamic else "static shapes",
            layout,
            "winograd" if winograd else "direct convolutions",
            "frozen" if frozen else "live parameters",
            opset,
            # the host target names the CPU model, but a machine (a VM) may lack some of
            # its features: a library shared through a remote cache must not meet a CPU
            # without the instructions it uses. An explicit target is the user's promise.
            machine_fingerprint() if target is None else "explicit target",
        )
        # live parameters are fed by position and stored under their state-dict names, so
        # an entry holds in any process (Paddle numbers tensor names per process)
        # one key per export route (paddle2onnx's and onnx's versions are part of only
        # the key of a model paddle2onnx wrote: jit_core.onnx.keys)
        key = ExportKeys(
            graph_key(gm, example_inputs, extra, values=frozen, tensor_names=state_names is None)
        )
    if dynamic:
        return _compile_dynamic(
            gm,
            example_inputs,
            key,
            tgt,
            live,
            state_names,
            opset,
            layout,
            winograd,
            progress,
            loop_nests=symbolic is True,
        )
    try:
        if key is not None and mode != "always":
            hit = key.get(_CACHE)
            if hit is not None:
                stats["cache_hits"] += 1
                log.info("%s: library from the cache (%s)", type(gm).__name__, hit[0][:12])
                return _indices_checked(TvmGraph.from_blob(hit[1], gm, live, state_names), gm)
        compiled, library, complete = _build(
            gm,
            example_inputs,
            tgt,
            live,
            opset,
            layout,
            winograd,
            mode,
            trials_per_task,
            tune_seconds,
            progress,
        )
        _check(compiled, gm, example_inputs)
        # a build that tuning left incomplete (time budget) is not kept: the next process
        # goes on tuning from the records instead of reusing it
        if key is not None and complete:
            key.put(_CACHE, gm, compiled.to_blob(library, state_names))
    except (OnnxExportError, TvmCompileError) as e:
        if not fallback:
            raise
        stats["fallbacks"] += 1
        return run_on_paddle("tvm", e, gm)
    return _indices_checked(compiled, gm)


def _compile_dynamic(
    gm,
    example_inputs,
    key,
    target,
    live,
    state_names,
    opset,
    layout,
    winograd,
    progress,
    loop_nests: bool,
):
    """One library for every size of the graph's dynamic dimensions: exported with them,
    imported into Relax with a symbolic ``tirx.Var`` for each, built with sampled
    schedules, and checked against Paddle at the example size and at other sizes
    (``shape_dispatch.other_sizes``). Any failure raises ``StaticShapesOnly`` naming the
    step, and jit-core builds the graph once per input shape instead: so does a kernel
    that gets no schedule over symbolic sizes (MetaSchedule samples none for a matmul), as
    its plain loop nest would run many times slower than a build per shape, unless
    ``loop_nests`` (``symbolic=True``) accepts it."""
    step = ["taking it from the cache"]
    try:
        hit = key.get(_CACHE) if key is not None else None
        if hit is not None:
            stats["cache_hits"] += 1
            log.info("%s: symbolic library from the cache (%s)", type(gm).__name__, hit[0][:12])
            compiled = TvmGraph.from_blob(hit[1], gm, live, state_names)
        else:
            compiled, library, _ = _build(
                gm,
                example_inputs,
                target,
                live,
                opset,
                layout,
                winograd,
                "off",
                DEFAULT_TRIALS_PER_TASK,
                None,
                progress,
                step=step,
                loop_nests=loop_nests,
            )
            step[0] = "check against Paddle at the example size"
            _check(compiled, gm, example_inputs)
            step[0] = "check against Paddle at another size"
            check_other_sizes(
                gm,
                example_inputs,
                lambda inputs: _check(compiled, gm, inputs),
                "its symbolic TVM build",
            )
            stats["symbolic_builds"] += 1
            if key is not None:
                key.put(_CACHE, gm, compiled.to_blob(library, state_names))
    except StaticShapesOnly:
        stats["symbolic_failures"] += 1
        raise
    except Exception as e:  # noqa: BLE001 - whatever fails here may work per shape
        stats["symbolic_failures"] += 1
        raise StaticShapesOnly(
            f"its symbolic TVM build failed ({step[0]}): {type(e).__name__}: {_first_line(e)[:300]}"
        ) from e
    return _indices_checked(compiled, gm)


def _check(compiled: TvmGraph, gm, inputs) -> None:
    """Refuse a library whose results on ``inputs`` differ from Paddle's."""
    check_against_paddle(
        compiled,
        gm,
        inputs,
        TvmCompileError,
        f"{exporter_name(gm)} or TVM's ONNX importer",
        rtol=RTOL,
        scaled_atol=SCALED_ATOL,
    )


def _indices_checked(compiled: TvmGraph, gm):
    """TVM does not check indices (an out-of-range gather reads out of bounds, with no
    error): calls whose index inputs are out of range run on Paddle's kernels, which raise
    eager's error (``jit_core.index_bounds``)."""
    from jit_core import plugins

    checked = IndexChecked(compiled, gm, lambda: plugins.get_backend("paddle").compile(gm, []))
    if checked.unchecked:
        log.info(
            "%s: indices TVM does not check and that cannot be checked before it runs: %s",
            type(gm).__name__,
            "; ".join(checked.unchecked),
        )
    return checked if checked.needed else compiled


def _build(
    gm,
    example_inputs,
    target,
    live,
    opset,
    layout,
    winograd,
    mode,
    trials_per_task,
    seconds,
    progress,
    step: Optional[List[str]] = None,
    loop_nests: bool = True,
) -> Tuple[TvmGraph, bytes, bool]:
    """The compiled graph, its shared library, and whether every kernel worth tuning has
    its record (False when ``seconds`` ran out first). ``step[0]`` names the step under
    way (for the reason of a failure)."""
    import tvm

    step = step if step is not None else [""]
    name = type(gm).__name__
    started = time.perf_counter()
    step[0] = "ONNX export"
    model = export_onnx(gm, example_inputs, opset)
    if live:
        lift_parameters(model, live)
    inputs = _model_inputs(model, gm)
    step[0] = "import into Relax"
    mod = _to_relax(model, inputs, gm, example_inputs, live)
    step[0] = "Relax passes"
    mod = tuning.prepare(mod, target, layout, winograd)
    complete = True
    if mode != "off":
        with _progress(progress):
            report = tuning.tune(
                mod,
                target,
                trials_per_task=trials_per_task,
                seconds=seconds,
                only_missing=mode == "auto",
                label=name,
            )
        stats["tuned_tasks"] += len(report.tuned)
        stats["reused_tasks"] += report.reused
        complete = report.complete
        mod = tuning.apply_records(mod, target)
    step[0] = "sampled schedules"
    symbolic = bool(dynamic_dims(gm))
    unscheduled: List[str] = []
    mod, sampled = schedules.sample_unscheduled(mod, target, symbolic, unscheduled)
    stats["sampled_kernels"] += sampled
    if unscheduled and not loop_nests:
        raise StaticShapesOnly(
            f"TVM has no schedule over symbolic sizes for the kernels "
            f"{', '.join(sorted(unscheduled))}: plain loop nests would run many times slower "
            "than builds per shape (symbolic=True accepts them)"
        )
    mod = schedules.fold_weight_layouts(mod, target)
    step[0] = "tvm.compile"
    try:
        executable = tvm.compile(mod, target)
    except Exception as e:  # noqa: BLE001 - TVM raises its own error types
        raise TvmCompileError(_compile_failure(e, mod)) from e
    # machine code is emitted once, into the shared library the cache keeps: running the
    # executable tvm.compile returns would JIT-compile every kernel first (densenet121:
    # 12 s), and exporting it afterwards would emit the code a second time
    library = _export(executable)
    stats["builds"] += 1
    step[0] = "loading the library"
    log.info("%s: built in %.1f s", name, time.perf_counter() - started)
    return TvmGraph.load(library, inputs, gm, live), library, complete


def _export(executable) -> bytes:
    """The shared library of a compiled executable."""
    with tempfile.TemporaryDirectory(prefix="jit_tvm_") as folder:
        path = os.path.join(folder, "graph.so")
        with _without_stderr_lines(_SCOPE_NOISE):
            executable.export_library(path)
        with open(path, "rb") as f:
            return f.read()


def _state_names(gm, live: Dict[str, paddle.Tensor]) -> Optional[Dict[str, str]]:
    """Paddle's name of each live parameter and buffer -> its state-dict name in ``gm``
    (the attribute path: the same in every process); None if one has none."""
    names = {t.name: key for key, t in gm.state_dict().items()}
    return names if all(name in names for name in live) else None


@contextlib.contextmanager
def _progress(enabled: bool) -> Iterator[None]:
    """The ``tuning`` channel on at INFO for the length of one tuning run (with a stderr
    handler if logging has none), unless the user configured it already."""
    channel = get_logger("tuning")
    if not enabled or channel.isEnabledFor(logging.INFO):
        yield
        return
    level = channel.level
    channel.setLevel(logging.INFO)
    handler = None
    if not logging.getLogger().handlers and not logging.getLogger("jit_core").handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[jit_core tvm] %(message)s"))
        channel.addHandler(handler)
    try:
        yield
    finally:
        channel.setLevel(level)
        if handler is not None:
            channel.removeHandler(handler)


def _model_inputs(model, gm) -> List[Tuple[str, Any]]:
    """The model's inputs in order: ("input", index of the graph placeholder) or
    ("param", name of a live parameter)."""
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    return [
        ("input", placeholders.index(name)) if name in placeholders else ("param", name)
        for name in _fed_names(model)
    ]


def _fed_names(model) -> List[str]:
    """The names of the model's inputs that are fed on each run (not initializers), in
    the order of the Relax function's parameters."""
    initializers = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


def _to_relax(model, inputs, gm, example_inputs, live):
    import tvm
    from tvm.relax.frontend import onnx as onnx_frontend

    unsupported = _unsupported_ops(model)
    if unsupported:
        raise TvmCompileError(
            f"TVM's ONNX importer has no converter for the ONNX operators "
            f"{', '.join(unsupported)} (nodes {_nodes_of(model, unsupported)})"
        )
    shapes: Dict[str, List[Any]] = {}
    dtypes: Dict[str, str] = {}
    dynamic = dynamic_dims(gm)
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    for (kind, ref), name in zip(inputs, _fed_names(model)):
        t = example_inputs[ref] if kind == "input" else live[ref]
        shapes[name] = list(t.shape)
        dtypes[name] = str(t.dtype).replace("paddle.", "")
        if kind == "input":
            for d in dynamic.get(placeholders[ref], ()):
                # one symbolic size per dynamic dimension: Relax compiles kernels over it
                shapes[name][d] = tvm.tirx.Var(f"{placeholders[ref]}_{d}", "int64")
    if dynamic:
        # ONNX's shape inference, which both folds run, can die of SIGFPE on a model with
        # dynamic dimensions (conformance test_models, a vision model with a dynamic
        # batch), taking the user's process with it; they only pay off on static shapes
        drop_identities(model)
    else:
        fold_static_shapes(model)
        fold_batch_norms(model)
    try:
        with warnings.catch_warnings():
            # parameter names hold dots, which Relax renames, one warning each
            warnings.filterwarnings("ignore", message="Renaming name", category=UserWarning)
            return onnx_frontend.from_onnx(model, shape_dict=shapes, dtype_dict=dtypes, opset=None)
    except Exception as e:  # noqa: BLE001 - converters raise anything
        raise TvmCompileError(
            f"TVM's ONNX importer failed{_failing_node(e, model)}: {_first_line(e)}"
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


def _first_line(error: Exception) -> str:
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
    return f"TVM failed to compile the graph{where}: {_first_line(error)} (operators: " + (
        ", ".join(ops[:20]) + ")"
    )


class TvmGraph:
    """A compiled graph: call it with the graph's input tensors, get its output tuple."""

    def __init__(self, executable, inputs, gm, live: Dict[str, paddle.Tensor]):
        import tvm
        from tvm import relax

        self.executable = executable
        self._inputs = inputs
        unknown = [ref for kind, ref in inputs if kind == "param" and ref not in live]
        if unknown:
            raise TvmCompileError(f"the exported model has inputs {unknown} the graph lacks")
        self._live = live
        #: per parameter: (its data_ptr, the TVM tensor over its memory, its span)
        self._params: Dict[str, tuple] = {}
        self.vm = relax.VirtualMachine(executable, tvm.cpu())
        self._main = self.vm["main"]
        # a Relax VM is not reentrant: two threads in one VM at once corrupt its register
        # file ("Check failed: reg < frame->register_file.size()")
        self._lock = threading.Lock()
        out = gm.graph.output_values()
        self._dtypes = [getattr(n, "meta", {}).get("dtype") for n in out]
        # paddle2onnx gives 0-D results the shape [1]: put Paddle's shape back (with
        # dynamic dimensions, only where it holds at every size)
        self._shapes = restored_shapes(gm)
        # TVM folds a result of parameters alone into a constant of the library, and
        # the VM hands out that constant's memory at every call
        self._copied = input_free_outputs(gm)

    def __call__(self, *tensors):
        args = []
        spans = []
        for kind, ref in self._inputs:
            if kind == "input":
                t = tensors[ref]
                a = _to_tvm(t)
                span = _span(a, t)
            else:
                a, span = self._param(ref)
            args.append(a)
            spans.append(span)
        with self._lock:
            out = self._main(*args)
            outs = list(out) if not hasattr(out, "shape") else [out]
            return tuple(
                _to_paddle(o, s, d, copy or _inside(o, spans))
                for o, s, d, copy in zip(outs, self._shapes, self._dtypes, self._copied)
            )

    def _param(self, ref: str):
        """A parameter as a TVM tensor over its memory and that memory's span, made again
        only when the parameter gets new memory (an update in place is seen as it is):
        making them took most of a small graph's call."""
        t = self._live[ref]
        ptr = t.data_ptr()
        made = self._params.get(ref)
        if made is None or made[0] != ptr:
            a = _to_tvm(t.detach())
            made = self._params[ref] = (ptr, a, _span(a, t))
            if a.data_ptr() != ptr:  # a copy (no DLPack): it cannot be kept
                del self._params[ref]
        return made[1], made[2]

    @classmethod
    def load(cls, library: bytes, inputs, gm, live) -> TvmGraph:
        """The graph whose shared library is ``library``."""
        import tvm

        folder = tempfile.mkdtemp(prefix="jit_tvm_")
        path = os.path.join(folder, "graph.so")
        try:
            with open(path, "wb") as f:
                f.write(library)
            with _without_stderr_lines(_SCOPE_NOISE):
                executable = tvm.runtime.load_module(path)
                return cls(executable, inputs, gm, live)
        finally:
            # the loaded library stays mapped; its file is not needed any more
            os.unlink(path)
            os.rmdir(folder)

    # -- the compile cache: metadata and the shared library in one entry --

    def to_blob(self, library: bytes, state_names: Optional[Dict[str, str]]) -> bytes:
        inputs = self._inputs
        if state_names is not None:
            inputs = [(k, state_names[r] if k == "param" else r) for k, r in inputs]
        meta = json.dumps({"inputs": inputs, "state_names": state_names is not None})
        meta_bytes = meta.encode()
        return len(meta_bytes).to_bytes(8, "big") + meta_bytes + library

    @classmethod
    def from_blob(cls, blob: bytes, gm, live, state_names: Optional[Dict[str, str]]):
        size = int.from_bytes(blob[:8], "big")
        meta = json.loads(blob[8 : 8 + size].decode())
        inputs = [(kind, ref) for kind, ref in meta["inputs"]]
        if meta.get("state_names"):
            tensor_names = {key: name for name, key in (state_names or {}).items()}
            inputs = [(k, tensor_names.get(r, r) if k == "param" else r) for k, r in inputs]
        return cls.load(blob[8 + size :], inputs, gm, live)


#: TVM 0.27 logs one warning per function when it saves or loads a library ("Warning:
#: Scope Saving:", "Warning: Scope Loaded:"): a debugging leftover, not a problem of the graph
_SCOPE_NOISE = re.compile(r"Warning: Scope (Saving|Loaded):")


@contextlib.contextmanager
def _without_stderr_lines(noise: re.Pattern) -> Iterator[None]:
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


def _to_tvm(t: paddle.Tensor):
    import tvm

    # shares the tensor's memory (DLPack) when Paddle can hand it out, else a copy
    try:
        return tvm.runtime.from_dlpack(t)
    except Exception:  # noqa: BLE001 - a non-contiguous view, or a dtype DLPack lacks
        return tvm.runtime.tensor(t.numpy())


def _span(a, t: paddle.Tensor) -> Tuple[int, int]:
    """The memory of the TVM tensor ``a`` made from ``t``, as (start, end)."""
    size = t.element_size()
    for d in t.shape:
        size *= d
    start = a.data_ptr()
    return start, start + size


def _inside(t, spans: List[Tuple[int, int]]) -> bool:
    """Whether a result lies in the memory of an input (an input returned as it is, or a
    reshaped view of one)."""
    return any(start <= t.data_ptr() < end for start, end in spans)


def _to_paddle(
    t, shape: Optional[List[int]], dtype: Optional[str], copy: bool = False
) -> paddle.Tensor:
    from paddle.utils import dlpack

    out = None
    # A result in an input's memory is copied: Paddle owning (through DLPack) a TVM tensor
    # that owns a Paddle tensor deadlocks when it is freed (Paddle's deleter takes a lock
    # that the inner deleter takes again)
    if not copy:
        try:
            out = dlpack.from_dlpack(t)
        except Exception:  # noqa: BLE001 - fall back to a copy
            out = None
    if out is None:
        out = paddle.to_tensor(t.numpy())
    if shape is not None and list(out.shape) != list(shape):
        size = 1
        for d in shape:
            size *= d
        if out.size == size:
            out = out.reshape(shape)
    if dtype is not None and str(out.dtype).replace("paddle.", "") != dtype:
        out = out.astype(dtype)
    return out
