"""Compile a captured graph for ONNX Runtime: export (or take from the on-disk cache), build
an ``InferenceSession``, and wrap it as a callable that takes and returns Paddle tensors."""

from __future__ import annotations

import collections
import logging
import os
import re
import tempfile
import threading
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence

import numpy as np
import paddle
from paddle import _C_ops

from jit_core.cache.disk import DiskCache, graph_key, machine_fingerprint
from jit_core.errors import GraphDeclined, JitError, StaticShapesOnly
from jit_core.kit.onnx import (
    DEFAULT_OPSET,
    OnnxExportError,
    check_against_paddle,
    export_onnx,
    exporter_fingerprint,
    exporter_name,
    exporter_versions,
    lift_parameters,
    live_tensors,
    require,
    restored_shapes,
    run_on_paddle,
    runtime_checks,
)
from jit_core.kit.shape_dispatch import check_other_sizes, dynamic_dims, other_sizes
from jit_core.workers import scratch_dir

from . import first_load

log = logging.getLogger("jit_core.onnxrt")

_CACHE = DiskCache("onnxrt")
#: models ONNX Runtime died on in the first-load worker (a refusal only costs speed: the
#: graph runs on the paddle backend)
_VERDICTS = DiskCache("onnxrt-refused", kind="hint")
LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}

#: how close a model's float results must be to eager Paddle's: ``rtol`` of each value plus
#: an absolute ``scaled_atol`` times the largest magnitude of the result (ONNX Runtime's
#: convolutions round differently). The check after each export refuses a model outside
#: it; docs/backends.rst states it and the conformance suite checks every graph with it.
RTOL = 1e-4
SCALED_ATOL = 2e-5

#: calls at one input shape before it gets a session of fixed shapes (``_Specializer``)
SPECIALIZE_AFTER = 3
#: input shapes per graph that may get one (the ``specialize`` option)
DEFAULT_SPECIALIZE = 4
#: models larger than this (frozen weights) are not kept for such sessions
SPECIALIZE_MAX_BYTES = 64 << 20

#: what this process did: models exported, models taken from the disk cache, graphs that
#: fell back to the paddle backend
stats: Dict[str, int] = {"exports": 0, "cache_hits": 0, "fallbacks": 0, "checks_failed": 0}


class OnnxRuntimeError(JitError):
    """ONNX Runtime cannot load or run an exported graph; the message names the node."""


def _session_options(ort, intra: Optional[int], inter: Optional[int], level: str):
    if level not in LEVELS:
        raise ValueError(f"graph_optimization_level must be one of {sorted(LEVELS)}, got {level!r}")
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVELS[level])
    for name, value in (("intra_op_num_threads", intra), ("inter_op_num_threads", inter)):
        if value is not None:
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
            setattr(so, name, value)
    # fatal only: ORT's warnings about unused initializers are noise here, and an error in
    # a run, which ORT logs before raising it, sends the call to Paddle's kernels, which
    # raise what eager raises (jit_core.runtime.convert_frame.CheckedFirstRun)
    so.log_severity_level = 4
    return so


def _providers(ort, providers: Optional[Sequence[str]]) -> List[str]:
    if providers is None:
        return ["CPUExecutionProvider"]
    providers = [providers] if isinstance(providers, str) else list(providers)
    available = ort.get_available_providers()
    missing = [p for p in providers if p not in available]
    if missing:
        raise ValueError(
            f"onnxruntime {ort.__version__} has no provider {', '.join(missing)}; "
            f"available: {', '.join(available)}"
        )
    return providers


def compile_graph(
    gm,
    example_inputs: Sequence[Any],
    *,
    providers: Optional[Sequence[str]] = None,
    intra_op_num_threads: Optional[int] = None,
    inter_op_num_threads: Optional[int] = None,
    graph_optimization_level: str = "all",
    opset: int = DEFAULT_OPSET,
    cache: bool = True,
    fallback: bool = False,
    specialize: int = DEFAULT_SPECIALIZE,
):
    """The backend's ``compile``: see the package README for the options."""
    ort = require("onnxruntime", "the onnxrt backend", "jit-backend-onnxrt")
    if not isinstance(opset, int) or isinstance(opset, bool) or opset < 7:
        raise ValueError(f"opset must be an ONNX opset number (an int, 7 or more), got {opset!r}")
    for name, flag in (("cache", cache), ("fallback", fallback)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {flag!r}")
    if not isinstance(specialize, int) or isinstance(specialize, bool) or specialize < 0:
        raise ValueError(
            f"specialize must be how many input shapes may get a session of their own "
            f"(an int, 0 or more), got {specialize!r}"
        )
    threads = (intra_op_num_threads, inter_op_num_threads)
    _session_options(ort, *threads, graph_optimization_level)  # its arguments are checked
    providers = _providers(ort, providers)
    frozen = bool(gm.meta.get("frozen"))
    setup = ("frozen" if frozen else "live parameters", graph_optimization_level, providers)
    try:
        model, key, from_cache = _model_bytes(gm, example_inputs, opset, ort, cache, setup)
        live = {} if frozen else live_tensors(gm)
        if from_cache:
            # the cached model is the one ONNX Runtime optimized when it was first built
            warm = _session_options(ort, *threads, "disable")
            compiled = OrtGraph(_session(ort, model, warm, providers), gm, live)
        else:
            # what this process runs while it builds, the worker runs first
            placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
            runs = [list(zip(placeholders, example_inputs))]
            if dynamic_dims(gm):
                runs += [list(zip(placeholders, x)) for x in other_sizes(example_inputs, gm)]
            size = len(model) + sum(first_load.feed_bytes(runs, live))
            scratch = scratch_dir(size)
            with tempfile.TemporaryDirectory(prefix="jit_onnxrt_", dir=scratch) as folder:
                feeds = first_load.trial_feeds(folder, runs, live, _trial_limit(scratch))
                session, optimized = _first_load(
                    ort, model, key, folder, threads, graph_optimization_level, providers, feeds
                )
                compiled = OrtGraph(session, gm, live)
                validate(compiled, gm, example_inputs)
                if dynamic_dims(gm):
                    check_other_sizes(
                        gm,
                        example_inputs,
                        lambda inputs: validate(compiled, gm, inputs),
                        "its model exported with dynamic dimensions",
                    )
                # only a model that passed the check is kept (and only if ORT wrote it in
                # one file: huge models get external data files)
                if key is not None and os.listdir(os.path.dirname(optimized)) == ["model.onnx"]:
                    with open(optimized, "rb") as f:
                        _CACHE.put_later(key, f.read())
        if dynamic_dims(gm) and specialize and len(model) <= SPECIALIZE_MAX_BYTES:
            level = graph_optimization_level
            compiled.specializer = _Specializer(ort, model, threads, level, providers, specialize)
    except (OnnxExportError, OnnxRuntimeError) as e:
        if dynamic_dims(gm):
            # what fails with dynamic dimensions may work for one shape at a time
            raise StaticShapesOnly(
                f"its export with dynamic dimensions failed: {type(e).__name__}: {str(e)[:300]}"
            ) from e
        if not fallback:
            # the whole message, and the way on: the graph can run on paddle instead
            raise type(e)(
                f"{e} (optimize(..., backend='onnxrt', fallback=True) runs such graphs on "
                "the paddle backend)"
            ) from e
        stats["fallbacks"] += 1
        return run_on_paddle("onnxrt", e, gm)
    return compiled


def _session(ort, model, options, providers):
    """An ``InferenceSession`` of ``model`` (its bytes or its file)."""
    try:
        return ort.InferenceSession(model, options, providers=providers)
    except Exception as e:  # ORT's own exception types differ between releases
        raise _load_error(ort, str(e)) from e


def _load_error(ort, message: str) -> JitError:
    """What ONNX Runtime's refusal to load a model means to the caller."""
    message = message.strip()
    if "Could not find an implementation" in message:
        # a kernel this release lacks (1.19 has no float64 Cos): nothing is wrong with
        # the program or the export, the graph runs on the paddle backend
        found = re.search(r"implementation for (\S+)", message)
        what = found.group(1) if found else "an operator"
        return GraphDeclined(
            f"onnxruntime {ort.__version__} has no kernel for {what} with these dtypes"
        )
    return OnnxRuntimeError(
        f"onnxruntime {ort.__version__} cannot load the exported graph: {message[:800]}"
    )


def _trial_limit(scratch: Optional[str]) -> int:
    return first_load.TRIAL_RUN_MAX_BYTES if scratch else first_load.DISK_TRIAL_RUN_MAX_BYTES


def _first_load(ort, model: bytes, key, folder: str, threads, level: str, providers, feeds):
    """Load ``model`` in the first-load worker (``first_load``) and run it there on
    ``feeds`` (``first_load.trial_feeds``); this process's session of it, loaded while the
    worker runs it, and where ONNX Runtime wrote the optimized model. A worker that dies
    becomes an ``OnnxRuntimeError``, kept under ``key`` so that later processes do not
    try again."""
    path = os.path.join(folder, "model.onnx")
    with open(path, "wb") as f:
        f.write(model)
    optimized = os.path.join(folder, "optimized", "model.onnx")
    os.mkdir(os.path.dirname(optimized))
    request = {
        "model": path,
        "level": LEVELS[level],
        "providers": list(providers),
        "intra_op_num_threads": threads[0],
        "inter_op_num_threads": threads[1],
        "optimized": optimized,
        **(feeds or {}),
    }
    sessions = []

    def load_here() -> None:
        # the worker loaded what this process loads: the optimized model with
        # optimizations off, or (an execution provider that compiles its nodes, which
        # writes no optimized model) the model itself
        if os.path.exists(optimized):
            options = _session_options(ort, *threads, "disable")
            sessions.append(_session(ort, optimized, options, providers))
        else:
            sessions.append(_session(ort, model, _session_options(ort, *threads, level), providers))

    try:
        reply = first_load.WORKER.load(request, on_run=load_here)
    except first_load.OrtAborted as e:
        message = _aborted(ort, e, feeds)
        if key is not None:
            _VERDICTS.put(key, message.encode())
        raise OnnxRuntimeError(message) from None
    if not reply["ok"]:
        raise _load_error(ort, reply["error"])
    if reply.get("not_run"):
        log.info("the first-load worker did not run the model: %s", reply["not_run"])
    if not sessions:
        load_here()
    return sessions[0], optimized


def _aborted(ort, e: first_load.OrtAborted, feeds: Optional[Dict]) -> str:
    """What ONNX Runtime's death in the first-load worker means to the caller."""
    if e.step == "loading":
        what = "loading the exported graph"
    elif not e.run:
        what = "running the exported graph on the capture's inputs"
    else:
        what = "running the exported graph at another input size"
        runs = (feeds or {}).get("runs") or []
        if e.run < len(runs):
            shapes = [list(np.load(p, mmap_mode="r").shape) for _, p in runs[e.run]]
            what += f" (input shapes {shapes})"
    node = e.node
    named = f"; the last node it named: {node}" if node else ""
    return (
        f"onnxruntime {ort.__version__} died {what} in a worker process, where each new "
        f"model is first loaded and run ({e.how}{named})"
    )


def _model_bytes(gm, example_inputs, opset: int, ort, use_cache: bool, setup: tuple):
    """(the serialized model, its cache key or None, whether it came from the cache)"""
    frozen = setup[0] == "frozen"
    key = None
    if use_cache:
        extra = (
            "onnxrt",
            setup,
            opset,
            exporter_fingerprint(),
            *exporter_versions(),
            ort.__version__,
            # ORT's optimized models may use kernels specific to this CPU
            machine_fingerprint(),
        )
        # a model with live parameters does not depend on their values
        key = graph_key(gm, example_inputs, extra, values=frozen)
        data = _CACHE.get(key)
        if data is not None:
            stats["cache_hits"] += 1
            log.info("%s: ONNX model from the cache (%s)", type(gm).__name__, key[:12])
            return data, key, True
        refused = _VERDICTS.get(key)
        if refused is not None:
            raise OnnxRuntimeError(
                f"{refused.decode(errors='replace')} (the verdict of an earlier process, kept "
                "in the compile cache: python -m jit_core.cache clear forgets it)"
            )
    # the worker starts while the graph is exported (see first_load)
    first_load.WORKER.start()
    model = export_onnx(gm, example_inputs, opset, acts_on_checks=True)
    stats["exports"] += 1
    if not frozen:
        lift_parameters(model, live_tensors(gm))
    return model.SerializeToString(), key, False


def _to_numpy(t: paddle.Tensor) -> np.ndarray:
    # a view of the tensor's memory where DLPack allows it (Paddle 3.3), else a copy
    try:
        return np.from_dlpack(t)
    except Exception:  # noqa: BLE001 - older Paddle, or a dtype DLPack lacks
        return t.numpy()


def _copy(t: paddle.Tensor) -> np.ndarray:
    return t.numpy()


#: a fixed-size feed up to this many elements is copied: ``Tensor.numpy()`` takes under
#: 2 us there, a DLPack view about 3 us at any size
SMALL_FEED = 16384


def _copy_if_small(t: paddle.Tensor) -> np.ndarray:
    n = 1
    for d in t.shape:
        n *= d
    return t.numpy() if n <= SMALL_FEED else _to_numpy(t)


def _feed_reader(shape) -> Callable[[paddle.Tensor], np.ndarray]:
    """How to read an input of the session with this ONNX shape (dimension names are
    strings: dynamic) as an array."""
    if not all(isinstance(d, int) for d in shape):
        return _copy_if_small
    if int(np.prod(shape, dtype=np.int64)) <= SMALL_FEED:
        return _copy
    return _to_numpy


def _view(t: paddle.Tensor) -> Optional[np.ndarray]:
    """An array sharing ``t``'s memory, or None where DLPack cannot give one."""
    try:
        return np.from_dlpack(t.detach())
    except Exception:  # noqa: BLE001 - older Paddle, a dtype DLPack lacks, not on the CPU
        return None


class _LiveFeed:
    """A parameter or buffer the model reads, fed as a view of its memory that is made
    once: an update in place is seen through the view, and a tensor that got new memory
    (``set_value`` of another shape, ``.to()``) has a new ``data_ptr``, which makes a new
    view. (The old view keeps the old memory alive, so the address cannot come back.)
    Where no view is possible the tensor is copied at every call."""

    __slots__ = ("name", "tensor", "ptr", "array")

    def __init__(self, name: str, tensor: paddle.Tensor):
        self.name = name
        self.tensor = tensor
        self.ptr = None
        self.array = None

    def read(self) -> np.ndarray:
        t = self.tensor
        ptr = t.data_ptr()
        if ptr != self.ptr or self.array is None:
            self.array = _view(t)
            self.ptr = ptr if self.array is not None else None
            if self.array is None:
                return t.detach().numpy()
        return self.array


def _dlpack_to_paddle():
    from paddle.utils import dlpack

    try:
        probe = np.zeros([2], np.float32)
        t = dlpack.from_dlpack(probe)
        probe[0] = 1.0
        if float(t[0]) == 1.0:  # shares memory: no copy
            return dlpack.from_dlpack
    except Exception:  # noqa: BLE001 - Paddle 3.0 takes capsules only
        pass
    return None


_FROM_DLPACK = _dlpack_to_paddle()


def _to_paddle(a: np.ndarray, dtype: Optional[str]) -> paddle.Tensor:
    t = None
    if _FROM_DLPACK is not None and a.flags.c_contiguous and a.dtype != np.bool_:
        try:
            t = _FROM_DLPACK(a)
        except Exception:  # noqa: BLE001 - fall back to a copy
            t = None
    if t is None:
        t = paddle.to_tensor(a)
    if dtype is not None and str(t.dtype).replace("paddle.", "") != dtype:
        t = t.astype(dtype)
    return t


#: how many calls of a graph may fail its model's run-time checks (each ran the model, then
#: Paddle) before the graph runs on Paddle alone (``OrtGraph``)
CHECK_FAILURES_LIMIT = 3

#: how many input shapes of one graph keep their output layouts (``OrtGraph``)
MAX_LAYOUTS = 256

_UNSEEN = object()


class OrtGraph:
    """A compiled graph: call it with the graph's input tensors, get its output tuple.

    ONNX Runtime's arrays cost more to turn into Paddle tensors (about 15 us each, right
    after a run) than the small model runs. So the first call at each input shape runs
    plainly and notes its outputs' shapes and dtypes (``_layouts``); later calls at that
    shape allocate the Paddle outputs and bind them for ONNX Runtime to write into. An
    output whose shape depends on the data makes ONNX Runtime refuse the buffer, and a
    buffer it left unwritten (handing out another value) is seen at the first bound run
    at each shape; either way the call runs plainly, as every later one does.

    A model with run-time checks (``jit_core.kit.onnx.runtime_checks``: a lowering exact only
    for some data, such as scores without ties) returns them as extra outputs; a call
    where one fails is computed by the graph's Paddle code instead.
    """

    def __init__(self, session, gm, live: Dict[str, paddle.Tensor]):
        self.session = session
        placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        names = [i.name for i in session.get_inputs()]
        # paddle2onnx drops inputs that nothing reads: feed by name
        shapes = {i.name: i.shape for i in session.get_inputs()}
        self._feeds = [
            (n, placeholders.index(n), _feed_reader(shapes[n])) for n in names if n in placeholders
        ]
        unknown = [n for n in names if n not in placeholders and live.get(n) is None]
        if unknown:
            raise OnnxRuntimeError(f"the exported model has inputs {unknown} the graph lacks")
        self._live = [_LiveFeed(n, live[n]) for n in names if n not in placeholders]
        self._outputs = [o.name for o in session.get_outputs()]
        #: the positions of the model's run-time checks among its outputs (the last ones)
        self.checks = runtime_checks(self._outputs)
        #: what computes a call where a check fails, and how many have
        self._paddle = gm.forward if self.checks else None
        self._failed = 0
        if self.checks:
            self.__class__ = _CheckedOrtGraph
        out = gm.graph.output_values()
        self._dtypes = [getattr(n, "meta", {}).get("dtype") for n in out]
        self._shapes = restored_shapes(gm)
        if len(self._dtypes) != len(self._outputs) - len(self.checks):
            raise OnnxRuntimeError(
                f"the exported model has {len(self._outputs) - len(self.checks)} outputs, "
                f"the graph {len(self._dtypes)}"
            )
        # the key of the layouts: nothing when every input's shape is fixed
        self._fixed = all(all(isinstance(d, int) for d in shapes[n]) for n, _, _ in self._feeds)
        # outputs that are inputs of the model (x * 1 exports as such): ONNX Runtime 1.19
        # hands back the fed array itself, whose memory dies with the feed, and ignores
        # a buffer bound for it
        self._echoes = [i for i, name in enumerate(self._outputs) if name in shapes]
        bindable = session.get_providers() == ["CPUExecutionProvider"]
        self._layouts: Optional[Dict[tuple, Any]] = (
            {} if bindable and not self._echoes and not self.checks else None
        )
        #: the input shapes at which ONNX Runtime was seen writing into every bound output
        self._honoured: set = set()
        self._threads = threading.local()
        #: sessions of fixed shapes for the sizes called most (models with dynamic dims)
        self.specializer: Optional[_Specializer] = None
        #: how the model was exported (direct lowering or paddle2onnx, and why), when it
        #: was exported here rather than read from the compile cache
        self.exporter: Optional[str] = gm.meta.get("onnx_exporter")

    def __call__(self, *tensors):
        inputs = [(name, read(tensors[i])) for name, i, read in self._feeds]
        key = () if self._fixed else tuple([a.shape for _, a in inputs])
        special = self.specializer
        if special is not None:
            fixed = special.graphs.get(key)
            if fixed is not None:
                return fixed._run(inputs, ())
            if special.count(key):
                return special.build(self, key, inputs)
        return self._run(inputs, key)

    def _run(self, inputs: list, key: tuple) -> tuple:
        layouts = self._layouts
        if layouts is not None:
            layout = layouts.get(key, _UNSEEN)
            if layout is not _UNSEEN and layout is not None:
                result = self._run_into(inputs, layout, key)
                if result is not None:
                    return result
        feeds = dict(inputs)
        for live in self._live:
            feeds[live.name] = live.read()
        outs = self.session.run(self._outputs, feeds)
        result = self._to_paddle(outs)
        if layouts is not None and layout is _UNSEEN and len(layouts) < MAX_LAYOUTS:
            layouts[key] = _layout(self._outputs, outs, result)
        return result

    def with_fixed_shapes(self, session) -> OrtGraph:
        """This graph on ``session``, a build of its model for one set of input shapes."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.session = session
        copy._fixed = True
        copy.specializer = None
        copy._layouts = None if self._layouts is None else {}
        copy._honoured = set()
        copy._threads = threading.local()
        return copy

    def describe(self) -> Optional[str]:
        said = [self.exporter] if self.exporter else []
        special = self.specializer
        if special is not None:
            said.append(
                f"one ONNX Runtime session serves every size; an input shape called "
                f"{SPECIALIZE_AFTER} times in {special._window} calls also gets a session of "
                f"fixed shapes (up to {special.limit} shapes, option specialize)"
            )
        return "; ".join(said) or None

    def _to_paddle(self, outs) -> tuple:
        for i in self._echoes:
            outs[i] = outs[i].copy()
        return tuple(
            _to_paddle(_reshaped(a, s), d) for a, s, d in zip(outs, self._shapes, self._dtypes)
        )

    def _run_into(self, inputs, layout, key: tuple) -> Optional[tuple]:
        # each thread keeps a binding whose parameters stay bound between calls (binding
        # an input costs about 1 us: 40 us a call for a small Transformer's parameters)
        state = getattr(self._threads, "state", None)
        if state is None:
            state = self._threads.state = (self.session.io_binding(), {})
        binding, bound = state
        result = []
        try:
            for live in self._live:
                a = live.read()
                if bound.get(live.name) is not a:
                    binding.bind_cpu_input(live.name, a)
                    bound[live.name] = a
            for name, a in inputs:
                binding.bind_cpu_input(name, a)
            for name, ort_shape, element, shape, dtype in layout:
                t = _C_ops.empty(shape, dtype, _CPU)
                binding.bind_output(name, "cpu", 0, element, ort_shape, t.data_ptr())
                result.append(t)
            try:
                self.session.run_with_iobinding(binding)
            finally:
                # the binding holds what it was given: not the caller's inputs
                for name, _ in inputs:
                    binding.bind_cpu_input(name, _NOTHING)
        except Exception as e:  # noqa: BLE001 - ORT's own exception types
            # an output whose shape depends on the data (or an input ORT cannot bind):
            # this graph runs plainly from now
            log.info("%s: outputs no longer bound (%s)", type(self).__name__, str(e)[:200])
            self._layouts = None
            return None
        if key not in self._honoured:
            # ONNX Runtime may leave a bound buffer unwritten and hand out another value
            # (it does for an output that is an input: _echoes); asking for the values
            # costs more than the binding saves, so this is checked once per shape
            written = binding.get_outputs()
            if any(o.data_ptr() != t.data_ptr() for o, t in zip(written, result)):
                log.info("%s: outputs not bound (ONNX Runtime aliases one)", type(self).__name__)
                self._layouts = None
                return None
            self._honoured.add(key)
        return tuple(result)


class _CheckFailed(Exception):
    """A run-time check of the model failed for this call."""


class _CheckedOrtGraph(OrtGraph):
    """An ``OrtGraph`` whose model has run-time checks (its last outputs): a call where one
    fails is computed by the graph's Paddle code, and after ``CHECK_FAILURES_LIMIT`` such
    calls every call is. (A class of its own, so that other graphs pay nothing for it; its
    outputs are not bound, sessions of fixed shapes are checked alike.)"""

    def __call__(self, *tensors):
        try:
            return OrtGraph.__call__(self, *tensors)
        except _CheckFailed:
            pass
        stats["checks_failed"] += 1
        self._failed += 1
        if self._failed >= CHECK_FAILURES_LIMIT:
            # the data keeps failing them (scores with ties): stop paying for both runs
            log.info(
                "%s: its run-time checks failed %d times: it runs on Paddle from now",
                type(self).__name__,
                self._failed,
            )
            self.__class__ = _OnPaddle
        else:
            log.info("%s: a run-time check failed: this call runs on Paddle", type(self).__name__)
        return self._paddle(*tensors)

    def _run(self, inputs: list, key: tuple) -> tuple:
        feeds = dict(inputs)
        for live in self._live:
            feeds[live.name] = live.read()
        outs = self.session.run(self._outputs, feeds)
        checks = self.checks
        if not all(bool(outs[i]) for i in checks):
            raise _CheckFailed()
        return self._to_paddle(outs[: checks[0]])


class _OnPaddle(OrtGraph):
    """An ``OrtGraph`` whose model's run-time checks kept failing: Paddle runs it (the
    class is swapped, so that the graphs whose checks hold pay nothing for this)."""

    def __call__(self, *tensors):
        return self._paddle(*tensors)


class _Specializer:
    """Sessions of fixed input shapes for a model with dynamic dimensions.

    ONNX Runtime fuses less in a model whose shapes are unknown (MatMul and Add into
    Gemm, Add and LayerNormalization into SkipLayerNormalization): a small Transformer
    encoder runs 1.14x slower than at fixed shapes. An input shape called
    ``SPECIALIZE_AFTER`` times among the last ``4 * limit`` calls therefore gets a
    session of the same model with those shapes written into its inputs (about 10 ms for
    that encoder), up to ``limit`` shapes; every other size keeps the one dynamic
    session, so a new size is never a build. A fixed session must agree with the
    dynamic one on the call that built it, or that shape stays on the dynamic session.
    """

    def __init__(self, ort, model: bytes, threads: tuple, level: str, providers, limit: int):
        self._ort = ort
        self._model = model
        self._threads = threads
        self._level = level
        self._providers = providers
        self.limit = limit
        #: input shapes -> their graph of fixed shapes, or None where it was refused
        self.graphs: Dict[tuple, Optional[OrtGraph]] = {}
        #: the input shapes of the last calls on the dynamic session, and how many of
        #: them each shape is
        self._window = 4 * max(limit, 1)
        self._recent: Deque[tuple] = collections.deque()
        self._in_window: Dict[tuple, int] = {}
        self._lock = threading.Lock()

    def count(self, key: tuple) -> bool:
        """Count a call at ``key``; True when it is the call that builds its session: the
        ``SPECIALIZE_AFTER``-th of the last ``4 * limit`` calls. Sizes that each come back
        rarely, such as the lengths of a growing KV cache (every length once per generated
        sequence), would spend every build on a session used a few times: they keep the
        dynamic session."""
        if len(self.graphs) >= self.limit:
            return False
        recent, counts = self._recent, self._in_window
        if len(recent) == self._window:
            old = recent.popleft()
            left = counts[old] - 1
            if left:
                counts[old] = left
            else:
                del counts[old]
        recent.append(key)
        calls = counts[key] = counts.get(key, 0) + 1
        return calls == SPECIALIZE_AFTER

    def build(self, owner: OrtGraph, key: tuple, inputs: list) -> tuple:
        """Build ``key``'s session, check it against ``owner``'s on this call's inputs, and
        return ``owner``'s results."""
        expected = owner._run(inputs, key)
        with self._lock:
            if key in self.graphs:
                return expected
            shapes = {name: shape for (name, _), shape in zip(inputs, key)}
            try:
                model = _with_fixed_dims(self._model, shapes)
                # its first run, on this call's inputs, is the worker's
                live = {f.name: f.tensor for f in owner._live}
                scratch = scratch_dir(len(model) + sum(first_load.feed_bytes([inputs], live)))
                with tempfile.TemporaryDirectory(prefix="jit_onnxrt_", dir=scratch) as folder:
                    feeds = first_load.trial_feeds(folder, [inputs], live, _trial_limit(scratch))
                    session, _ = _first_load(
                        self._ort,
                        model,
                        None,
                        folder,
                        self._threads,
                        self._level,
                        self._providers,
                        feeds,
                    )
                fixed = owner.with_fixed_shapes(session)
                problem = _disagreement(expected, fixed._run(inputs, ()))
            except Exception as e:  # noqa: BLE001 - the dynamic session serves this shape
                fixed, problem = None, f"{type(e).__name__}: {str(e)[:200]}"
            if problem:
                log.info("input shapes %s keep the dynamic session: %s", key, problem)
                fixed = None
            else:
                log.info("input shapes %s: a session of fixed shapes", key)
            self.graphs[key] = fixed
        return expected


def _with_fixed_dims(model: bytes, shapes: Dict[str, tuple]) -> bytes:
    """``model`` with the given sizes written into its inputs' dimensions."""
    import onnx

    proto = onnx.load_from_string(model)
    for value in proto.graph.input:
        shape = shapes.get(value.name)
        if shape is None:
            continue
        for dim, size in zip(value.type.tensor_type.shape.dim, shape):
            dim.Clear()
            dim.dim_value = int(size)
    return proto.SerializeToString()


def _disagreement(expected: tuple, got: tuple) -> str:
    """How two runs of one model differ beyond the backend's tolerance; empty if not."""
    for i, (a, b) in enumerate(zip(expected, got)):
        a, b = a.numpy(), b.numpy()
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"output {i} is {b.dtype}{list(b.shape)}, not {a.dtype}{list(a.shape)}"
        if a.dtype.kind == "f":
            atol = SCALED_ATOL * float(np.abs(a).max()) if a.size else 0.0
            if not np.allclose(b, a, rtol=RTOL, atol=atol, equal_nan=True):
                return f"output {i} differs by up to {float(np.abs(b - a).max()):.3g}"
        elif not np.array_equal(a, b):
            return f"output {i} differs"
    return ""


_CPU = paddle.CPUPlace()
#: what an input is bound to between calls
_NOTHING = np.zeros([0], np.float32)


def _layout(names, outs, result) -> Optional[list]:
    """How to allocate each output of a run like this one for ONNX Runtime to write into
    (its name, ORT's shape, element type, and the Paddle shape and dtype), or None where
    one cannot be (an empty or strided array, a dtype that differs from Paddle's)."""
    layout = []
    for name, a, t in zip(names, outs, result):
        dtype = str(t.dtype).replace("paddle.", "")
        if a.size == 0 or not a.flags.c_contiguous or dtype not in _BINDABLE:
            return None
        if np.dtype(dtype) != a.dtype:
            return None
        layout.append((name, list(a.shape), a.dtype.type, list(t.shape), t.dtype))
    return layout


#: the Paddle dtypes whose NumPy dtype of the same name ONNX Runtime can bind
_BINDABLE = frozenset(
    ("bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")
)


def _reshaped(a: np.ndarray, shape: Optional[List[int]]) -> np.ndarray:
    if shape is None or list(a.shape) == shape:
        return a
    if a.size == int(np.prod(shape, dtype=np.int64)):
        return a.reshape(shape)
    return a


def validate(compiled: OrtGraph, gm, example_inputs) -> None:
    """Refuse a model that was converted wrongly (see ``check_against_paddle``): its
    results must be within ``RTOL`` and ``SCALED_ATOL`` of Paddle's."""
    check_against_paddle(
        compiled,
        gm,
        example_inputs,
        OnnxRuntimeError,
        exporter_name(gm),
        rtol=RTOL,
        scaled_atol=SCALED_ATOL,
    )
