"""The capture of one frame, on a cache miss: the symbolic executor over its bytecode, the
graph passes and the backend over its graph, and the code that replaces it, either
whole or up to a graph break, with the resume functions and loop bodies that go on from
there."""

from __future__ import annotations

import logging
import os
import time
import types
import warnings
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Optional, Set

import paddle

from .. import auto_backend, plugins, rng
from ..bytecode import compat
from ..cache import disk as compile_cache
from ..codegen import breaks as graph_breaks
from ..codegen import loops
from ..codegen.frame import build_code, collect_return, disassemble
from ..config import Options
from ..errors import (
    INTERNAL,
    BackendCompileError,
    ExceptionsNotSimulated,
    GraphDeclined,
    StaticShapesOnly,
    Unsupported,
)
from ..executor import side_effects
from ..executor.inplace_updates import may_share_memory
from ..executor.output_graph import OutputGraph
from ..executor.translator import Translator, root_locals
from ..fx import GraphModule
from ..kit.shape_dispatch import PerShape
from ..logs import breaks_log, bytecode_log, graphs_log, guards_log, recompiles_log
from ..passes.builtin import BUILTIN_PASSES
from ..passes.effects import draws_only, is_mutated, is_pure, is_random, target_name
from ..passes.manager import PassContext, PassManager, PassRecord
from ..passes.manager import op_count as op_count_of
from ..shapes import ShapePolicy, SpecializeLayers, SpecializeShapes, describe_dims
from .convert_break import BreakCompiler
from .frame_cache import CacheEntry, FrameResult, pinned_locals
from .train_step import TrainingStep

if TYPE_CHECKING:  # pragma: no cover
    from .eval_frame import CompileContext


def _identifier(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name).strip("_") or "code"


@dataclass
class Traced:
    """The result of the symbolic executor on one frame, before the backend sees it."""

    number: int
    output: OutputGraph
    ret: Any
    tensors: list
    graph_module: Optional[GraphModule] = None
    #: where each graph input comes from, and its example value, in placeholder order
    sources: list = field(default_factory=list)
    examples: list = field(default_factory=list)
    pass_records: List[PassRecord] = field(default_factory=list)
    #: set when the capture stopped at a graph break
    point: Optional[graph_breaks.BreakPoint] = None
    #: the cells of the frame's closure it assigned (``graph_breaks.written_cells``)
    cells: list = field(default_factory=list)
    #: the lists and dicts from outside the frame it mutated (``executor.side_effects``)
    containers: list = field(default_factory=list)
    #: the objects made in the frame that the replacement code rebuilds in more than one
    #: place (``PyCodegen.shared_objects``)
    shared: list = field(default_factory=list)
    #: what the graph returns: ``tensors``, then what its training calls take besides
    outputs: list = field(default_factory=list)
    #: where the capture left the random generators, where its graph's random operations
    #: alone moved them (``rng.Draws``): where eager's run of the frame leaves them
    rng_after: Optional[rng.RngState] = None


def _needs_training_backend(
    gm, traced: Traced, grad_on: bool, random_ok: bool = False
) -> Optional[str]:
    """Why ``gm`` cannot run on an inference-only backend, or None (``random_ok``: its
    random operations are no reason)."""
    if grad_on:
        # (a number input, a loop counter, has no gradient)
        wants = [
            i
            for i, x in enumerate(traced.examples)
            if isinstance(x, paddle.Tensor) and not x.stop_gradient
        ]
        if wants:
            return f"gradients are on and input {traced.sources[wants[0]].name()} requires them"
        params = [n for n, p in gm.named_parameters() if not p.stop_gradient]
        if params:
            return f"gradients are on and parameter {params[0]} requires them"
    if traced.output.effects:
        return f"it runs training calls ({traced.output.effects[0].text})"
    for node in gm.graph.nodes:
        if node.op == "call_module" and getattr(gm, node.target).training:
            return f"layer {node.target} is in training mode"
        if not random_ok and node.op in ("call_function", "call_method") and is_random(node):
            return f"{target_name(node)} draws random numbers"
    aliased = _aliased_output(gm, traced)
    if aliased is not None:
        return aliased
    for i, t in enumerate(traced.tensors):
        if 0 in t.example.shape:
            # exported models leave such outputs out (paddle2onnx)
            return f"graph output {i} has no elements (shape {list(t.example.shape)})"
    return None


#: whether the call that captures a graph returns the capture's results where it can
#: (``FirstFromCapture``); ``JIT_FIRST_CALL_FROM_CAPTURE=0`` makes every first call run
#: the compiled graph (test suites that check the compiled graph on a first call)
FIRST_CALL_FROM_CAPTURE = os.environ.get("JIT_FIRST_CALL_FROM_CAPTURE", "1") != "0"
#: the passes whose rewrites keep what the graph computes (a plugin's may not)
_BUILTIN_PASS_NAMES = frozenset(p.name for p in BUILTIN_PASSES)


class FirstFromCapture:
    """The graph of a paddle-backend entry on the call that captured it: the capture ran
    each of its operations once, eagerly, on this call's own inputs (``OutputGraph``'s
    example runs), so its outputs are this call's results already, and running the
    compiled graph again would pay for the graph a second time (ResNet50's first call:
    a capture of 1.0 s, then a first run of 0.9 s). Only where that run is exactly
    what the graph would compute (``first_from_capture``); given other inputs than the
    capture's (the very objects), it runs the graph."""

    __slots__ = ("compiled", "inputs", "outputs", "rng_after")

    def __init__(
        self,
        compiled: Callable,
        inputs: list,
        outputs: tuple,
        rng_after: Optional[rng.RngState] = None,
    ):
        self.compiled = compiled
        self.inputs: Optional[list] = inputs
        self.outputs: Optional[tuple] = outputs
        #: for a graph that draws random numbers: where its run leaves the generators
        self.rng_after = rng_after

    def __call__(self, *args):
        inputs, outputs = self.inputs, self.outputs
        self.inputs = self.outputs = None  # (once: the outputs belong to this call)
        if (
            outputs is not None
            and inputs is not None
            and len(args) == len(inputs)
            and all(a is b for a, b in zip(args, inputs))
        ):
            if self.rng_after is not None:
                # the capture drew what the graph draws, from the state this call started
                # with (restored since): the generators go on from where its draws ended
                self.rng_after.restore()
                self.rng_after = None
            return outputs
        return self.compiled(*args)


def first_from_capture(result: FrameResult, built: _Built, traced: Traced):
    """The result the call that captured an entry runs: its code with the graph called
    through ``FirstFromCapture``, where the capture's example run is what the graph
    computes: on the paddle backend (another backend's values are its own, and its first
    run is checked against Paddle's), with no gradients, training calls, training-mode
    layers, in-place updates or impure calls, no output that shares memory with an input
    or a parameter, and no rewrite by a plugin's pass; random operations only where the
    graph's are the ones the capture ran, in the same order, and nothing else drew
    (``rng.Draws``). None elsewhere."""
    gm, compiled = traced.graph_module, built.compiled
    if not FIRST_CALL_FROM_CAPTURE:
        return None
    if gm is None or compiled is None or built.backend.name != "paddle":
        return None
    if _needs_training_backend(gm, traced, paddle.is_grad_enabled(), random_ok=True) is not None:
        return None
    drawn = []
    for node in gm.graph.nodes:
        if is_mutated(node):
            return None
        if node.op in ("call_function", "call_method") and not is_pure(node):
            if not draws_only(node):
                return None
            drawn.append(node)
    if drawn and (traced.rng_after is None or drawn != traced.output.draws.nodes):
        return None  # (a pass moved or dropped one, or something else drew)
    if any(r.rewrites and r.name not in _BUILTIN_PASS_NAMES for r in traced.pass_records):
        return None  # a pass of a plugin's may compute otherwise, as its author wants
    outputs = tuple(t.example for t in traced.outputs)
    if not all(isinstance(t, paddle.Tensor) for t in outputs):
        return None
    shim = FirstFromCapture(
        compiled, list(traced.examples), outputs, traced.rng_after if drawn else None
    )

    def swapped(code: Optional[types.CodeType]) -> Optional[types.CodeType]:
        if code is None or not any(c is compiled for c in code.co_consts):
            return None
        return code.replace(co_consts=tuple(shim if c is compiled else c for c in code.co_consts))

    first = swapped(result.code)
    if first is None:
        return None
    if result.hooked is result:
        return FrameResult(first, result.disable_eval_frame)
    hooked = swapped(result.hooked.code)
    if hooked is None:
        return None
    return FrameResult(
        first, result.disable_eval_frame, FrameResult(hooked, result.hooked.disable_eval_frame)
    )


def _aliased_output(gm, traced: Traced) -> Optional[str]:
    """Why the outputs of ``gm`` must be Paddle's own tensors: one is a view of an input,
    a parameter or another output. An inference backend hands back new tensors, so an
    in-place update after the graph (eager, past a break; or the caller's) would not
    reach what eager Paddle's view shares memory with."""
    outs = [t.example for t in traced.tensors]
    if not outs:
        return None
    held = [(traced.sources[i].name(), x) for i, x in enumerate(traced.examples)]
    held += [(f"parameter {n}", p) for n, p in gm.named_parameters()]
    held += [(f"buffer {n}", b) for n, b in gm.named_buffers()]
    for i, out in enumerate(outs):
        for name, t in held:
            if may_share_memory(out, t):
                return f"graph output {i} is a view of {name}"
        for j in range(i):
            if may_share_memory(out, outs[j]):
                return f"graph outputs {j} and {i} share memory (one is a view of the other)"
    return None


def _shape_notes(output: OutputGraph, policy: ShapePolicy) -> List[str]:
    """What ``explain()`` says about this entry's shapes."""
    notes = []
    for src, node, ex in output.inputs:
        if node.meta.get("number_input"):
            kind = type(ex).__name__
            notes.append(f"{src.name()}: an {kind} input (its value changed between calls)")
        dims = node.meta.get("dynamic_dims")
        if dims:
            notes.append(f"{src.name()}: dimension(s) {describe_dims(frozenset(dims))} dynamic")
    for name, dim, why in policy.specialized:
        notes.append(f"{name}: dimension {dim} static ({why})")
    if policy.static_reason is not None:
        notes.append(f"every dimension static: {policy.static_reason}")
    return list(dict.fromkeys(notes))


def wrong_outputs(outs: Any, expected: List[tuple]) -> Optional[str]:
    """How ``outs``, what a compiled graph returned, differs from the ``(shape, dtype)``
    of each output the graph computes (a shape of None: its rank only, the graph has
    dynamic dimensions); None when it does not."""
    if not isinstance(outs, (tuple, list)):
        return f"it returned {type(outs).__name__}, not a tuple of tensors"
    if len(outs) != len(expected):
        return f"it returned {len(outs)} outputs where the graph has {len(expected)}"
    for i, (out, (shape, dtype)) in enumerate(zip(outs, expected)):
        got = (list(getattr(out, "shape", [])), getattr(out, "dtype", None))
        if isinstance(shape, int):  # a rank
            same = len(got[0]) == shape and got[1] == dtype
        else:
            same = got == (shape, dtype)
        if not isinstance(out, paddle.Tensor) or not same:
            return (
                f"its output {i} is {type(out).__name__} {got[0]} {got[1]}, where the "
                f"graph computes Tensor {shape} {dtype}"
            )
    return None


#: ``gm.meta`` key of ``(example inputs, eager outputs)`` while a backend compiles
EXAMPLE_RUN = "example_run"


class CheckedFirstRun:
    """What an outside backend compiled, checked on its first run: when that run raises,
    or returns other outputs than the graph's (their number, shapes, dtypes), the graph
    runs on the paddle backend from then on, that call included, with a warning. A
    backend that returns wrong shapes would otherwise make every result wrong.

    (Checked on the first real call rather than on an extra run at capture: a backend's
    runs are its own to count, and an extra run costs a whole model's time.) It is a
    constant of generated code, which the gc cannot see into: it holds its cache entry,
    to note the fallback for ``explain()``, only weakly."""

    __slots__ = (
        "run",
        "_graph",
        "_expected",
        "_frame",
        "_backend",
        "checked",
        "entry",
        "_on_paddle",
        "_warned",
    )

    def __init__(self, run: Callable, gm: GraphModule, traced: Traced, frame: str, backend: str):
        self.run = run
        self._graph = gm
        # with dynamic dimensions the first run may be at another size: ranks only
        dynamic = traced.output.dynamic_inputs
        self._expected = [
            (len(t.example.shape) if dynamic else list(t.example.shape), t.example.dtype)
            for t in traced.tensors
        ]
        self._frame = frame
        self._backend = backend
        self.checked = False
        self.entry: Optional[Callable[[], Optional[CacheEntry]]] = None
        self._on_paddle: Optional[Callable] = None
        self._warned = False

    def __call__(self, *args):
        if self.checked:
            try:
                return self.run(*args)
            except Exception as e:  # noqa: BLE001 - Paddle says whether the call is wrong
                failed = e
            # (outside the except block: Paddle's own error, if any, is not chained to
            # the runtime's)
            return self._run_on_paddle(failed, args)
        try:
            outs = self.run(*args)
        except Exception as e:  # noqa: BLE001 - the graph runs on paddle, which says it
            why = f"its first run raised {type(e).__name__}: {e}"
        else:
            why = wrong_outputs(outs, self._expected)
            if why is None:
                self.checked = True
                return outs
        self._fall_back(why)
        return self.run(*args)

    @property
    def built(self) -> Callable:
        """The backend's own callable (the paddle backend's after a fallback)."""
        return self.run

    def describe(self) -> Optional[str]:
        """What the backend's own callable says of itself (``PerShape``), if anything."""
        describe = getattr(self.run, "describe", None)
        return describe() if describe is not None else None

    def _paddle_run(self) -> Callable:
        """The graph compiled by the paddle backend, made once."""
        if self._on_paddle is None:
            self._on_paddle = plugins.get_backend("paddle").compile(self._graph, [])
        return self._on_paddle

    def _run_on_paddle(self, failed: Exception, args: tuple):
        """A later run of the backend raised (an index out of range in its gather, say):
        the call runs again on Paddle's kernels, so that the user sees the error eager
        Paddle raises, at their line (``fx.graph_module``), not the runtime's; where
        Paddle raises nothing, its results are the call's, with one warning."""
        outs = self._paddle_run()(*args)
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"jit_core: the graph of {self._frame} raised in backend {self._backend!r} "
                f"({type(failed).__name__}: {failed}) where Paddle does not: such calls run "
                "on the paddle backend",
                RuntimeWarning,
                stacklevel=3,
            )
        return outs

    def _fall_back(self, why: str) -> None:
        note = f"runs on the paddle backend: backend {self._backend!r} is wrong for it: {why}"
        self.run = self._paddle_run()
        self.checked = True
        entry = self.entry() if self.entry is not None else None
        if entry is not None:
            entry.backend, entry.backend_note = "paddle", note
        breaks_log.info("graph of %s %s", self._frame, note)
        warnings.warn(f"jit_core: the graph of {self._frame} {note}", RuntimeWarning, stacklevel=3)


class _Built(NamedTuple):
    """A traced graph as a backend built it (``FrameCompiler._compile_traced``)."""

    #: what runs the graph (None without a graph)
    compiled: Optional[Callable]
    #: the backend that built it: the one asked for, or the one that took the graph over
    backend: Any
    #: why another backend took it, or how ``auto`` chose (None when neither)
    backend_note: Optional[str]
    #: where the build came from (``compile_cache.last_origin``)
    artifact: Any
    #: the graph's operations
    op_count: int


class FrameCompiler(BreakCompiler):
    """Captures and compiles the frames of one ``CompileContext`` (its options, backend and
    passes); keeps the resume functions and loop bodies it made, one per place."""

    def __init__(self, ctx: CompileContext, options: Options):
        self.ctx = ctx
        self.options = options
        self.backend = plugins.get_backend(options.backend)
        self.passes = PassManager.from_options(
            options.passes, options.disable_passes, options.debug
        )
        self._counter = 0
        self._warned_training = False
        #: during ``capture()``: the random generators' state the call came with, which
        #: every trace of its frame starts from (a second trace, after a break or a
        #: withdrawn promise, draws what eager draws again)
        self._rng_at_entry: Optional[rng.RngState] = None
        #: (code, offset, stack size, live locals) -> the resume callable
        self._resumes: Dict[tuple, Any] = {}
        #: (code, loop head) -> the code of the loop's body function (codegen.loops)
        self._loop_bodies: Dict[tuple, types.CodeType] = {}
        #: resume code made for a break of a loop body -> that body's code
        self._body_roots: Dict[types.CodeType, types.CodeType] = {}

    def trace(
        self,
        frame,
        code: types.CodeType,
        stop: Optional[Unsupported] = None,
        where: Optional[graph_breaks.Where] = None,
        inputs_as_outputs: bool = False,
        policy: Optional[ShapePolicy] = None,
    ) -> Traced:
        """Run the symbolic executor over ``frame`` and the graph passes over its graph.

        Raises ``Unsupported`` when the frame cannot be captured. With ``stop`` (what
        stopped an earlier capture of the same frame), the capture ends just before the
        instruction where that happened, or before the loop around it (``where``): the
        graph of a frame that breaks there. ``inputs_as_outputs`` (``capture()``): the
        graph returns every tensor the frame returns, its inputs too."""
        if self._rng_at_entry is not None:
            self._rng_at_entry.restore()
        output = OutputGraph(policy)
        f_globals = frame.f_globals
        tx = Translator(code, f_globals, output, f_globals)
        # capture() makes a graph of what the function returns, its inputs too
        tx.unread_pass_through = not inputs_as_outputs
        root_locals(code, compat.frame_locals(frame), tx, getattr(frame, "f_closure", None))
        point = None
        stop_offset = where.before_loop if where is not None else None
        before_loop = stop_offset is not None
        if stop_offset is not None:
            tx.stop_at_offset = stop_offset
        elif stop is not None:
            tx.stop_at_step = stop.root_step
        ret = tx.run()
        rng_after = output.draws.end()
        tensors: list = []
        cells: list = []
        containers: list = []
        if tx.stopped:
            inst = tx.instructions[tx.ip]
            if not before_loop:
                # it stopped at stop.root_step, set together with its root_instruction
                assert stop is not None and stop.root_instruction is not None
                if inst.offset != stop.root_instruction.offset:
                    raise Unsupported(
                        "the capture did not stop where it broke before", category=INTERNAL
                    )
            point = graph_breaks.break_point(tx, inst, before_loop)
            rebuilt = graph_breaks.collect_break(code, point)
        else:
            cells = graph_breaks.written_cells(tx)
            containers = list(output.side_effects.mutated)
            assert ret is not None  # run() returns None only when it stopped
            rebuilt = collect_return(code, ret, inputs_as_outputs, cells, containers)
        tensors = rebuilt.tensors
        self._counter += 1
        n = self._counter
        traced = Traced(
            n,
            output,
            ret,
            tensors,
            point=point,
            cells=cells,
            containers=containers,
            shared=rebuilt.shared_objects(),
            rng_after=rng_after,
        )
        # a graph none of whose values are live still runs where it draws random numbers:
        # eager's draws advance the generator, and what runs after the frame reads it
        if (
            tensors
            or output.effects
            or any(nd.op.startswith("call_") and is_random(nd) for nd in output.graph.nodes)
        ):
            traced.outputs = output.set_outputs(tensors)
            gm = GraphModule(output.root, output.graph, class_name=f"Graph_{code.co_name}_{n}")
            placeholders = [nd for nd in output.graph.nodes if nd.op == "placeholder"]
            by_node = {nd: (s, ex) for s, nd, ex in output.inputs}
            traced.graph_module = gm
            # backends that bake parameters into what they build may do so only then
            gm.meta["frozen"] = self.options.freeze
            # a graph whose own code runs the backward of what it computes is a training
            # step's forward: the paddle backend times its executors on it
            gm.meta["runs_backward"] = output.runs_backward()
            traced.sources = [by_node[nd][0] for nd in placeholders]
            traced.examples = [by_node[nd][1] for nd in placeholders]
            ctx = PassContext(traced.examples, facts=self._facts())
            traced.pass_records = self.passes.run(gm, ctx)
            if "no_grad" in ctx.relied_on:
                # a pass used that gradients were off: they must be off on a hit too
                output.guards.grad_enabled = False
        return traced

    def _facts(self) -> Set[str]:
        facts = set()
        if self.options.freeze:
            facts.add("frozen")
        if not paddle.is_grad_enabled():
            facts.add("no_grad")
        return facts

    def capture(
        self, frame, code: types.CodeType, policy: Optional[ShapePolicy] = None
    ) -> CacheEntry:
        """The cache entry for ``frame``: its graph compiled, its guard, and the code that
        replaces it (raises ``Unsupported`` when it runs eagerly). ``policy`` says which
        input dimensions are dynamic; where the capture needs a size it cannot guard, the
        frame is captured again with static shapes (``policy.static_reason`` says why)."""
        if policy is None:
            policy = ShapePolicy(self.options.dynamic)
        policy.number_inputs = self.backend.number_inputs
        # what the capture and the build run (example values, checks, timings) must not
        # draw from the user's stream: the first call's own run draws what eager draws
        with rng.preserved() as entry:
            outer, self._rng_at_entry = self._rng_at_entry, entry
            try:
                return self._capture_as_promised(frame, code, policy)
            finally:
                self._rng_at_entry = outer

    def _capture_as_promised(self, frame, code: types.CodeType, policy: ShapePolicy):
        while True:
            # each promise of the policy a capture could not keep is withdrawn once, and
            # the frame captured again (a second time is a bug: it propagates)
            try:
                return self._capture(frame, code, policy)
            except SpecializeShapes as e:
                if policy.static_reason is not None:
                    raise
                policy.static_reason = e.reason
                recompiles_log.info("%s: static shapes: %s", code.co_name, e.reason)
            except SpecializeLayers as e:
                if policy.layer_reason is not None:
                    raise
                policy.layer_reason = e.reason
                recompiles_log.info("%s: bound to its layer instances: %s", code.co_name, e.reason)
            except ExceptionsNotSimulated as e:
                if policy.raise_reason is not None:
                    raise
                policy.raise_reason = e.reason
                recompiles_log.info("%s: try blocks run in Python: %s", code.co_name, e.reason)

    def _capture(self, frame, code: types.CodeType, policy: ShapePolicy) -> CacheEntry:
        started = time.perf_counter()
        traced, stop, where = self._trace_or_break(frame, code, policy)
        traced_at = time.perf_counter()
        built = self._compile_traced(code, traced)
        built_at = time.perf_counter()
        if stop is None:
            new_code = build_code(
                code,
                built.compiled,
                traced.sources,
                traced.tensors,
                traced.ret,
                traced.cells,
                traced.shared,
                traced.containers,
            )
            result, resumes = FrameResult(new_code, True), []
        else:
            result, resumes = self._break_code(frame, code, traced, built.compiled, stop, where)
        entry = self._entry(code, policy, traced, built, stop, result, resumes)
        entry.first_result = first_from_capture(result, built, traced)
        passes = sum(r.seconds for r in traced.pass_records)
        entry.compile_times = {
            "capture": traced_at - started - passes,
            "passes": passes,
            "backend": built_at - traced_at,
            "codegen": time.perf_counter() - built_at,
        }
        return entry

    def _trace_or_break(self, frame, code: types.CodeType, policy: ShapePolicy):
        """``(traced, stop, where)``: the whole frame traced (``stop`` None), or, where the
        capture stopped at an instruction the graph can break at, the frame traced up to
        it (``stop`` the ``Unsupported`` that stopped it, ``where`` the break's place).
        Raises the ``Unsupported`` when the frame cannot break there: it runs eagerly."""
        try:
            return self.trace(frame, code, policy=policy), None, None
        except Unsupported as e:
            stop = e
        where = self._where_to_break(code, stop)
        if not isinstance(where, graph_breaks.Where):
            if where:
                stop.reason = f"{stop.reason}; {where}"
            raise stop
        try:
            traced = self.trace(frame, code, stop=stop, where=where, policy=policy)
        except Unsupported as again:
            raise stop.could_not_break(again.reason) from None
        if where.before_loop is not None and traced.graph_module is None:
            if where.kind == "block":
                # nothing to capture before the block: the frame runs as it is
                stop.reason = f"{stop.reason}; {graph_breaks.IN_BLOCK}"
                raise stop
            if where.kind == "raises":
                # nothing to capture before it: the frame runs as it is, and raises
                raise stop
            plan = loops.plan_loop(code, where.before_loop)
            if not isinstance(plan, loops.LoopPlan):
                # nothing to capture before a loop that cannot be outlined: a resume
                # function at the loop would be this frame again
                stop.reason = f"{stop.reason}; {graph_breaks.IN_LOOP} ({plan})"
                raise stop
        return traced, stop, where

    def _compile_traced(self, code: types.CodeType, traced: Traced) -> _Built:
        """The traced graph built by the backend, or by the one that takes it instead (an
        inference-only backend's graph that needs gradients, a graph declined, a backend's
        fallback), checked against the graph's own code on its first run."""
        gm = traced.graph_module
        backend, backend_note = self.backend, None
        if gm is None:
            return _Built(None, backend, None, None, 0)
        op_count = op_count_of(gm.graph)
        if backend.inference_only:
            backend, backend_note = self._inference_backend(gm, traced)
        options = self.options.backend_options if backend is self.backend else {}
        compile_cache.clear_origin()
        auto_backend.take_choice()
        artifact = None
        try:
            compiled = self._compile(backend, gm, traced, options)
            artifact = compile_cache.last_origin()
        except Unsupported:
            raise
        except GraphDeclined as e:
            backend, backend_note = self._declined(backend, code.co_name, e)
            compiled = backend.compile(gm, traced.examples)
        except Exception as e:
            raise BackendCompileError(
                f"backend {backend.name!r} failed to compile the graph of "
                f"{code.co_name}: {type(e).__name__}: {e}"
            ) from e
        refused = gm.meta.pop("fallback_reason", None)
        if refused is not None:  # the backend's fallback=True: the graph's own code
            backend_note = (
                f"runs on the paddle backend: backend {backend.name!r} failed on it "
                f"(fallback=True): {refused}"
            )
            backend = plugins.get_backend("paddle")
        choice = auto_backend.take_choice() if backend.name == auto_backend.AUTO else None
        if choice is not None:
            backend_note = choice.describe()
        # (auto compared its choice's values with paddle's already)
        if backend.name not in ("paddle", auto_backend.AUTO):
            compiled = CheckedFirstRun(compiled, gm, traced, code.co_name, backend.name)
        if traced.output.effects:
            compiled = TrainingStep(
                compiled, traced.output.effects, len(traced.tensors), traced.output.effect_outputs
            )
        if graphs_log.isEnabledFor(logging.INFO):  # (the readable code is made on demand)
            graphs_log.info("graph of %s:\n%s", code.co_name, gm.code)
        return _Built(compiled, backend, backend_note, artifact, op_count)

    def _entry(
        self,
        code: types.CodeType,
        policy: ShapePolicy,
        traced: Traced,
        built: _Built,
        stop: Optional[Unsupported],
        result: FrameResult,
        resumes: List[types.CodeType],
    ) -> CacheEntry:
        """The cache entry of a capture: its guard, the replacement code, and what
        ``explain()`` reports of it."""
        gm = traced.graph_module
        new_code = result.code
        assert new_code is not None  # a capture's result runs its replacement code
        guard = traced.output.guards.build(f"guard_{_identifier(code.co_name)}_{traced.number}")
        guards_log.info("%s", guard.readable())
        if bytecode_log.isEnabledFor(10):
            bytecode_log.debug(
                "original %s:\n%s\ntransformed:\n%s",
                code.co_name,
                disassemble(code),
                disassemble(new_code),
            )
        entry = CacheEntry(
            guard=guard,
            code=new_code,
            graph_module=gm,
            compiled=built.compiled,
            result=result,
            original=code,
            op_count=built.op_count,
            pass_records=traced.pass_records,
            backend=built.backend.name if gm is not None else None,
            backend_note=built.backend_note,
            artifact=built.artifact,
            graph_break=stop,
            resumes=resumes,
            owner=pinned_locals(traced.output.guards),
            shared_layers=frozenset(policy.layers) if policy.layer_reason is None else frozenset(),
            pinned_numbers=frozenset(traced.output.pinned_numbers),
            shapes=_shape_notes(traced.output, policy),
            written_back=[
                side_effects.describe(c)
                for c in (traced.point.containers if traced.point else traced.containers)
            ],
        )
        if isinstance(built.compiled, CheckedFirstRun):
            built.compiled.entry = weakref.ref(entry)
        return entry

    def _compile(self, backend, gm, traced: Traced, options) -> Callable:
        """The backend's build of ``gm``; once per input shape (``PerShape``) where the
        graph has dynamic dimensions the backend cannot serve. While it builds,
        ``gm.meta["example_run"]`` holds the example inputs and eager Paddle's outputs
        for them, as the capture computed them: a backend that checks its build against
        Paddle need not run the graph again (``jit_core.kit.onnx.check``)."""
        outputs = [t.example for t in traced.outputs]
        if all(isinstance(t, paddle.Tensor) for t in outputs):
            gm.meta[EXAMPLE_RUN] = (list(traced.examples), outputs)
        try:
            return self._build(backend, gm, traced, options)
        finally:
            # (not kept: it holds the outputs' memory)
            gm.meta.pop(EXAMPLE_RUN, None)

    def _build(self, backend, gm, traced: Traced, options) -> Callable:
        if not traced.output.dynamic_inputs:
            return backend.compile(gm, traced.examples, **options)
        if not backend.dynamic_shapes:
            return PerShape(backend, gm, traced.examples, options)
        try:
            return backend.compile(gm, traced.examples, **options)
        except StaticShapesOnly as e:
            recompiles_log.info("%s: one build per input shape: %s", type(gm).__name__, e)
            return PerShape(backend, gm, traced.examples, options, why=str(e))

    def _declined(self, backend, frame: str, e: GraphDeclined):
        """The paddle backend and the note ``explain()`` shows, for a graph ``backend``
        does not serve (no warning: the results are eager Paddle's, and the note says why
        the graph is not faster)."""
        note = f"runs on the paddle backend: backend {backend.name!r} does not serve it: {e}"
        breaks_log.info("graph of %s %s", frame, note)
        return plugins.get_backend("paddle"), note

    def _inference_backend(self, gm, traced: Traced):
        """The backend for a graph when the chosen one is for inference only (computes no
        gradients, keeps no layer state, has its own random numbers): the paddle backend
        when the graph needs any of that, else the chosen one. The entry is only valid in
        the gradient mode it was captured in (layer modes are guarded anyway)."""
        grad_on = paddle.is_grad_enabled()
        traced.output.guards.grad_enabled = grad_on
        why = _needs_training_backend(gm, traced, grad_on)
        if why is None:
            return self.backend, None
        if self.backend.name == auto_backend.AUTO:  # nothing to warn about: its choice
            return plugins.get_backend("paddle"), f"auto: {why}, which only paddle can run"
        note = (
            f"runs on the paddle backend: {why}, which {self.backend.name!r} cannot do "
            "(it is for inference: eval() under paddle.no_grad())"
        )
        if not self._warned_training:
            self._warned_training = True
            warnings.warn(f"jit_core: a graph {note}", RuntimeWarning, stacklevel=3)
        return plugins.get_backend("paddle"), note
