"""Compile a captured graph with Apache TVM: ONNX export (shared with onnxrt) -> Relax
(``relax.frontend.onnx.from_onnx``) -> MetaSchedule records -> ``tvm.compile`` for the
host CPU -> Relax VM, wrapped as a callable on Paddle tensors.

Compiled libraries are kept in the compile cache, so a later process with the same graph
loads a shared library instead of exporting, tuning and compiling again. A library is
built and first run in a worker process (``build_worker``); one that the worker died on
is refused, and the verdict is kept in the compile cache too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import tempfile
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import paddle

from jit_core.cache.disk import DiskCache, graph_key, machine_fingerprint
from jit_core.errors import StaticShapesOnly
from jit_core.kit.index_bounds import IndexChecked
from jit_core.kit.onnx import (
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
from jit_core.kit.shape_dispatch import check_other_sizes, dynamic_dims
from jit_core.logs import get_logger

from . import build_worker, layouts, tuning
from .library import (
    SCOPE_NOISE,
    BuildSpec,
    TvmCompileError,
    build_library,
    first_line,
    without_stderr_lines,
)
from .target import TargetSpec, make_target

log = logging.getLogger("jit_core.tvm")

_CACHE = DiskCache("tvm", executable=True)
#: graphs whose build or first run killed the build worker (a refusal only costs speed:
#: the graph runs on paddle; ``python -m jit_core.cache clear`` forgets them)
_VERDICTS = DiskCache("tvm-refused", kind="hint")
#: graphs with dynamic dimensions whose symbolic build failed in a way that would fail
#: again (a kernel with no schedule over symbolic sizes, an importer or compiler error),
#: with the reason: the next process builds them per shape at once instead of spending
#: the symbolic build's seconds (a minute with a large graph) to learn it again
_PER_SHAPE = DiskCache("tvm-per-shape", kind="hint")
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
    #: libraries that computed wrongly and were built again with kernels as loop nests
    #: (``PLAIN_REBUILDS``) until they computed right
    "plain_rebuilds": 0,
}


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
    isolate: bool = True,
):
    """The backend's ``compile``: see the package README for the options. ``symbolic``:
    whether a graph with dynamic dimensions is built once over symbolic sizes: ``"auto"``
    where every kernel gets a schedule there, ``True`` even with plain loop nests,
    ``False`` never (once per input shape, each tuned like a static graph). ``isolate``:
    TVM builds in a worker process, where a crash costs the graph, not the program
    (``False`` builds in this process: for a debugger)."""
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
    if not isinstance(isolate, bool):
        raise ValueError(f"isolate must be True or False, got {isolate!r}")
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
        # the key of a model paddle2onnx wrote: jit_core.kit.onnx.keys)
        key = ExportKeys(
            graph_key(gm, example_inputs, extra, values=frozen, tensor_names=state_names is None)
        )
    spec = BuildSpec(
        target=target,
        layout=layout,
        winograd=winograd,
        mode=mode,
        trials_per_task=trials_per_task,
        seconds=tune_seconds,
        label=type(gm).__name__,
        symbolic=dynamic,
        loop_nests=not dynamic or symbolic is True,
    )
    if dynamic:
        return _compile_dynamic(
            gm, example_inputs, key, live, state_names, opset, spec, progress, isolate
        )
    try:
        if key is not None and mode != "always":
            hit = key.get(_CACHE)
            if hit is not None:
                stats["cache_hits"] += 1
                log.info("%s: library from the cache (%s)", type(gm).__name__, hit[0][:12])
                return _indices_checked(TvmGraph.from_blob(hit[1], gm, live, state_names), gm)
        if key is not None:
            _refused_before(key)
        try:
            compiled, library, complete = _build_checked(
                gm, example_inputs, live, opset, spec, progress, isolate
            )
        except build_worker.WorkerDeath as e:
            _remember(key, gm, e)
            raise
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
    live,
    state_names,
    opset: int,
    spec: BuildSpec,
    progress: bool,
    isolate: bool,
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
            if key is not None:
                _per_shape_before(key)
                _refused_before(key)
            try:
                compiled, library, _ = _build(
                    gm, example_inputs, live, opset, spec, progress, isolate, step=step
                )
            except build_worker.WorkerDeath as e:
                _remember(key, gm, e)
                raise
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
    except StaticShapesOnly as e:
        stats["symbolic_failures"] += 1
        if not isinstance(e, _KeptPerShape):
            _keep_per_shape(key, gm, e)
        raise
    except Exception as e:  # whatever fails here may work per shape
        stats["symbolic_failures"] += 1
        per_shape = StaticShapesOnly(
            f"its symbolic TVM build failed ({step[0]}): {type(e).__name__}: {first_line(e)[:300]}"
        )
        # a worker killed from outside (the OOM killer, a user) says nothing of the graph
        if not (isinstance(e, build_worker.WorkerDeath) and not e.lasting):
            _keep_per_shape(key, gm, per_shape)
        raise per_shape from e
    return _indices_checked(compiled, gm)


class _KeptPerShape(StaticShapesOnly):
    """The verdict ``_keep_per_shape`` kept in an earlier process."""


def _per_shape_before(key: ExportKeys) -> None:
    """Raise the verdict an earlier process kept: this graph is built per shape."""
    _raise_kept(key, _PER_SHAPE, _KeptPerShape)


def _keep_per_shape(key: Optional[ExportKeys], gm, why: StaticShapesOnly) -> None:
    if key is not None:
        key.put(_PER_SHAPE, gm, str(why).encode())


def _refused_before(key: ExportKeys) -> None:
    """Raise the verdict an earlier process kept for this graph (``_remember``)."""
    _raise_kept(key, _VERDICTS, TvmCompileError)


def _raise_kept(key: ExportKeys, verdicts: DiskCache, error: type) -> None:
    kept = key.get(verdicts)
    if kept is not None:
        raise error(
            f"{kept[1].decode(errors='replace')} (the verdict of an earlier process, kept "
            "in the compile cache: python -m jit_core.cache clear forgets it)"
        )


def _remember(key: Optional[ExportKeys], gm, death: build_worker.WorkerDeath) -> None:
    """Keep the verdict on a graph the build worker died on, so that the next process
    does not build it (minutes with tuning) only to die again; not where the death says
    nothing of the graph (a signal from outside: the OOM killer, a user)."""
    if key is not None and death.lasting:
        key.put(_VERDICTS, gm, str(death).encode())


class WrongResults(TvmCompileError):
    """A library's results on the example inputs differ from Paddle's."""


#: the rebuilds of a library whose results were wrong, in turn: the kernels that read a
#: buffer backwards as loop nests (a TVM vectorizer bug), then every kernel
PLAIN_REBUILDS = ("backward", "all")


def _build_checked(gm, example_inputs, live, opset: int, spec: BuildSpec, progress, isolate):
    """``_build``, checked against Paddle on the example inputs. A library that computes
    wrongly is built again with fewer scheduled kernels (``PLAIN_REBUILDS``, no tuning
    records): TVM's schedules can miscompile what its loop nests compute right. Raises
    the first ``WrongResults`` when no rebuild passes the check either."""
    compiled, library, complete = _build(gm, example_inputs, live, opset, spec, progress, isolate)
    try:
        _check(compiled, gm, example_inputs)
        return compiled, library, complete
    except WrongResults as e:
        wrong = e
    for plain in PLAIN_REBUILDS:
        log.warning(
            "%s: TVM's library computed wrongly (%s); built again with %s kernels as loop nests",
            type(gm).__name__,
            first_line(wrong),
            "every" if plain == "all" else "the backward-reading",
        )
        retry = dataclasses.replace(spec, mode="off", plain=plain)
        compiled, library, _ = _build(gm, example_inputs, live, opset, retry, progress, isolate)
        try:
            _check(compiled, gm, example_inputs)
        except WrongResults:
            continue
        stats["plain_rebuilds"] += 1
        return compiled, library, True
    raise wrong


def _check(compiled: TvmGraph, gm, inputs) -> None:
    """Refuse a library whose results on ``inputs`` differ from Paddle's."""
    check_against_paddle(
        compiled,
        gm,
        inputs,
        WrongResults,
        f"{exporter_name(gm)} or TVM's ONNX importer",
        rtol=RTOL,
        scaled_atol=SCALED_ATOL,
    )


def _indices_checked(compiled: TvmGraph, gm):
    """TVM does not check indices (an out-of-range gather reads out of bounds, with no
    error): calls whose index inputs are out of range run on Paddle's kernels, which raise
    eager's error (``jit_core.kit.index_bounds``)."""
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
    live,
    opset: int,
    spec: BuildSpec,
    progress: bool,
    isolate: bool,
    step: Optional[List[str]] = None,
) -> Tuple[TvmGraph, bytes, bool]:
    """The compiled graph, its shared library, and whether every kernel worth tuning has
    its record (False when the tuning's time budget ran out first). ``step[0]`` names the
    step under way (for the reason of a failure). With ``isolate`` the native half runs
    in the build worker (``build_worker``), which also runs the library first, on the
    capture's inputs and the live parameters: a kernel that dies there costs the graph
    (``build_worker.WorkerDeath``), not this process."""
    step = step if step is not None else [""]
    name = type(gm).__name__
    started = time.perf_counter()
    if isolate:
        build_worker.WORKER.start()  # its imports overlap the export
    step[0] = "ONNX export"
    model = export_onnx(gm, example_inputs, opset)
    if live:
        lift_parameters(model, live)
    inputs = _model_inputs(model, gm)
    shapes, dtypes = _input_types(model, inputs, gm, example_inputs, live)

    def at(name: str) -> None:
        step[0] = name

    with _progress(progress and spec.mode != "off"):
        if isolate:
            feeds = [example_inputs[ref] if kind == "input" else live[ref] for kind, ref in inputs]
            built, complete, counts = build_worker.build(model, shapes, dtypes, spec, at, feeds)
        else:
            built, complete, counts = build_library(model, shapes, dtypes, spec, at)
    for counter, n in counts.items():
        stats[counter] += n
    stats["builds"] += 1
    step[0] = "loading the library"
    log.info("%s: built in %.1f s", name, time.perf_counter() - started)
    return TvmGraph.load(built, inputs, gm, live), built, complete


def _input_types(
    model, inputs, gm, example_inputs, live
) -> Tuple[Dict[str, List[Any]], Dict[str, str]]:
    """The shape and dtype of each input the model is fed, by name; a dynamic dimension is
    the name of its symbolic size."""
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
                shapes[name][d] = f"{placeholders[ref]}_{d}"
    return shapes, dtypes


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
            with without_stderr_lines(SCOPE_NOISE):
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
