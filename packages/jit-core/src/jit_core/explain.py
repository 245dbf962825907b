"""``explain()``: what the JIT does with a call, in words a person can check."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, cast

from .api import OptimizedFunction, OptimizedLayer, _target_codes
from .codegen.frame import disassemble
from .codegen.resume import describe_resume
from .config import Options
from .errors import UNSUPPORTED
from .runtime.eval_frame import CompileContext


@dataclass
class BreakInfo:
    """A frame that runs eagerly, or a graph break inside a compiled frame, and why."""

    frame: str
    reason: str
    location: Optional[str]
    instruction: Optional[str]
    #: a graph break (the frame goes on in resume functions), not an eager frame
    graph_break: bool = False
    #: the resume functions the break calls: (name, ``dis`` of their code)
    resumes: List[tuple] = field(default_factory=list)
    #: the kind of break, stable across rewordings of ``reason``: one of
    #: ``jit_core.errors.CATEGORIES`` (``"tensor-branch"``, ``"side-effect"`` ...)
    category: str = UNSUPPORTED

    def __str__(self) -> str:
        where = f" at {self.location}" if self.location else ""
        inst = f" [{self.instruction}]" if self.instruction else ""
        kind = "graph break: " if self.graph_break else ""
        then = ""
        if self.resumes:
            then = "; resumes in " + ", ".join(name for name, _ in self.resumes)
        return f"{self.frame}: {kind}[{self.category}] {self.reason}{where}{inst}{then}"


@dataclass
class RecompileLimitInfo:
    """A frame that reached a recompile limit: calls that match none of its cache entries
    run eagerly (those that match one still run its graph)."""

    #: qualified name, file name and first line (``Block.forward (model.py:12)``)
    frame: str
    reason: str

    def __str__(self) -> str:
        return f"{self.frame}: {self.reason}"


@dataclass
class GraphInfo:
    frame: str
    location: str
    op_count: int
    code: str
    guard: str
    transformed_bytecode: str
    #: what each graph pass did (or why it was skipped), in the order they ran
    passes: List[str] = field(default_factory=list)
    #: the backend that compiled it, with the reason when it is not the one asked for
    backend: Optional[str] = None
    #: which input dimensions are dynamic, and which stay static and why
    shapes: List[str] = field(default_factory=list)
    #: the lists and dicts from outside the frame whose mutation the code writes back
    written_back: List[str] = field(default_factory=list)
    #: where the backend's compiled artifact came from: the local or remote compile cache,
    #: or built here; None for a backend that keeps none (paddle)
    artifact: Optional[str] = None
    #: the code the ``paddle`` backend runs when it lowered API calls to their kernels
    kernel_code: Optional[str] = None
    #: the training calls the graph runs after its operations, in order
    #: (``loss.backward()``, ``SGD.step()``: ``runtime.train_step``)
    training_calls: List[str] = field(default_factory=list)
    #: the training calls as they run (an optimizer's step as its update kernels)
    training_notes: List[str] = field(default_factory=list)
    #: the values NumPy code computes in the graph: "name: the NumPy operation (where)"
    numpy: List[str] = field(default_factory=list)


@dataclass
class ExplainOutput:
    result: Any
    graphs: List[GraphInfo] = field(default_factory=list)
    breaks: List[BreakInfo] = field(default_factory=list)
    #: frames that reached ``recompile_limit`` or ``accumulated_recompile_limit``
    recompile_limits: List[RecompileLimitInfo] = field(default_factory=list)

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def break_count(self) -> int:
        return len(self.breaks)

    @property
    def op_count(self) -> int:
        return sum(g.op_count for g in self.graphs)

    @property
    def guards(self) -> List[str]:
        return [g.guard for g in self.graphs]

    @property
    def graph_code(self) -> List[str]:
        return [g.code for g in self.graphs]

    def dump(self, directory: str) -> List[str]:
        """Write every artifact as a file a person can read; returns the paths written.

        Per graph: ``NN_<frame>.graph.py`` (the generated ``forward``),
        ``NN_<frame>.guard.py`` (the guard function and its constants) and
        ``NN_<frame>.bytecode.txt`` (``dis`` of the transformed code),
        ``NN_<frame>.kernels.py`` where the ``paddle`` backend runs the graph with API calls
        lowered to their kernels (``jit_core.kernel_calls``); per resume function
        of a graph break, ``<name>.resume.txt`` (``dis`` of its code: the original code with
        the prefix that enters it at the break); ``explain.txt`` holds the whole report,
        breaks included.
        """
        os.makedirs(directory, exist_ok=True)
        written = []

        def write(name: str, text: str) -> None:
            path = os.path.join(directory, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text if text.endswith("\n") else text + "\n")
            written.append(path)

        for i, g in enumerate(self.graphs, 1):
            stem = f"{i:02d}_{g.frame}"
            write(f"{stem}.graph.py", f"# {g.frame} ({g.location}), {g.op_count} ops\n{g.code}")
            write(f"{stem}.guard.py", g.guard)
            write(f"{stem}.bytecode.txt", g.transformed_bytecode)
            if g.kernel_code:
                write(f"{stem}.kernels.py", g.kernel_code)
        for b in self.breaks:
            for name, text in b.resumes:
                write(f"{name}.resume.txt", text)
        write("explain.txt", str(self))
        return written

    def __str__(self) -> str:
        out = [
            f"Graph count: {self.graph_count}",
            f"Graph break count: {self.break_count}",
            f"Op count: {self.op_count}",
        ]
        if self.breaks:
            out.append("Break reasons:")
            for i, b in enumerate(self.breaks, 1):
                out.append(f"  {i}. {b}")
        if self.recompile_limits:
            out.append(
                f"Recompile limit reached by {len(self.recompile_limits)} frame(s): calls "
                "that match none of their cache entries run eagerly:"
            )
            for i, r in enumerate(self.recompile_limits, 1):
                out.append(f"  {i}. {r}")
        for i, g in enumerate(self.graphs, 1):
            out.append("")
            out.append(f"Graph {i}: {g.frame} ({g.location}), {g.op_count} ops")
            if g.backend:
                out.append(f"  Backend: {g.backend}")
            if g.artifact:
                out.append(f"  Artifact: {g.artifact}")
            if g.shapes:
                out.append("  Shapes:")
                out.extend("    " + line for line in g.shapes)
            if g.training_calls:
                out.append("  Training calls after the graph, in order:")
                out.extend("    " + call for call in g.training_notes or g.training_calls)
            if g.written_back:
                out.append("  Written back after the graph:")
                out.extend("    " + line for line in g.written_back)
            if g.numpy:
                out.append("  NumPy operations computed in the graph:")
                out.extend("    " + line for line in g.numpy)
            if g.passes:
                out.append("  Passes:")
                out.extend("    " + p for p in g.passes)
            out.append("  Guards:")
            out.extend("    " + line for line in g.guard.splitlines())
            out.append("  Graph code:")
            out.extend("    " + line for line in g.code.strip().splitlines())
            if g.kernel_code:
                out.append("  Kernel code (what the paddle backend runs):")
                out.extend("    " + line for line in g.kernel_code.strip().splitlines())
        return "\n".join(out)


def _numpy_operations(gm) -> List[str]:
    if gm is None:
        return []
    return [
        f"{node.name}: {node.meta['numpy']}"
        + (f" ({node.meta['source_loc']})" if node.meta.get("source_loc") else "")
        for node in gm.graph.nodes
        if node.meta.get("numpy")
    ]


def explain(fn: Callable, *args, backend: Optional[str] = None, **kwargs) -> ExplainOutput:
    """Run ``fn(*args, **kwargs)`` once through a fresh JIT and report what it captured.

    ``fn`` may be a function, a layer, or something ``optimize()`` returned (its backend is
    used). Nothing is kept in the caches of existing optimized objects.
    """
    if not callable(fn):
        raise TypeError(
            "explain() takes a function, a paddle.nn.Layer or what optimize() returned, "
            f"got {type(fn).__name__}"
        )
    options = Options(backend=backend or "paddle")
    learned = None
    if isinstance(fn, OptimizedFunction):
        options = Options(**{**fn._options.__dict__})
        learned = fn._ctx
        fn = fn._orig_fn
    elif isinstance(fn, OptimizedLayer):
        options = Options(**{**fn._options.__dict__})
        learned = fn._ctx
        fn = fn._orig_layer
    if backend is not None:
        options.backend = backend
    ctx = CompileContext(options, _target_codes(fn))
    if learned is not None:
        # what the object's recompiles learned about shapes: explain() captures as its
        # next call would
        for code, cache in list(learned.cache.items()):
            if code in ctx.targets and (
                cache.dynamic_dims or cache.dynamic_numbers or cache.static_reason
            ):
                mine = ctx.cache_for(code)
                mine.dynamic_dims = {k: set(v) for k, v in cache.dynamic_dims.items()}
                mine.dynamic_numbers = set(cache.dynamic_numbers)
                mine.dynamic_notes = list(cache.dynamic_notes)
                mine.static_reason = cache.static_reason
    result = ctx.run(fn, args, kwargs)
    out = ExplainOutput(result=result)
    for ev in ctx.events:
        # (an event has a reason unless it is a capture's, which has its entry)
        if ev.recompile_limit:
            reason = cast(str, ev.reason)
            out.recompile_limits.append(RecompileLimitInfo(ev.key or ev.code_name, reason))
        elif ev.compiled:
            entry = ev.entry
            assert entry is not None
            gm = entry.graph_module
            out.graphs.append(
                GraphInfo(
                    frame=ev.code_name,
                    location=ev.location,
                    op_count=entry.op_count,
                    code=gm.code if gm is not None else "# no tensor work: no graph\n",
                    guard=entry.guard.readable(),
                    transformed_bytecode=disassemble(entry.code),
                    passes=[str(r) for r in entry.pass_records],
                    backend=_backend_line(entry),
                    shapes=list(entry.shapes),
                    written_back=list(entry.written_back),
                    artifact=_ARTIFACT.get(entry.artifact or ""),
                    kernel_code=getattr(entry.compiled, "kernel_code", None),
                    training_calls=[e.text for e in getattr(entry.compiled, "effects", ())],
                    training_notes=_training_notes(entry.compiled),
                    numpy=_numpy_operations(gm),
                )
            )
        else:
            out.breaks.append(
                BreakInfo(
                    ev.code_name,
                    cast(str, ev.reason),
                    ev.break_location,
                    ev.instruction,
                    ev.graph_break,
                    [describe_resume(code) for code in ev.resumes],
                    ev.category or UNSUPPORTED,
                )
            )
    return out


#: where the backend's artifact came from (``CacheEntry.artifact``), in words
_ARTIFACT = {
    "disk": "from the local compile cache",
    "remote": "from the remote compile cache",
    "built": "built here (and cached)",
    "miss": "built here (not cached)",
}


def _training_notes(compiled) -> List[str]:
    describe = getattr(compiled, "describe_effects", None)
    return describe() if callable(describe) else []


def _backend_line(entry) -> Optional[str]:
    if entry.backend is None:
        return None
    line = f"{entry.backend} ({entry.backend_note})" if entry.backend_note else entry.backend

    describe = getattr(entry.compiled, "describe", None)
    said = describe() if describe is not None else None
    return f"{line}; {said}" if said else line


__all__ = ["explain", "ExplainOutput", "BreakInfo", "GraphInfo", "RecompileLimitInfo"]
