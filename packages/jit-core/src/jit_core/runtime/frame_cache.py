"""What the frame hook keeps and hands back: the results it gives Paddle's C shim for a
frame, and per code object the cache entries behind their guards, with what the
recompile limits count; ``CaptureEvent`` records each capture for ``explain()``."""

from __future__ import annotations

import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Set

import paddle

from ..errors import Unsupported
from ..fx import GraphModule
from ..passes.manager import PassRecord
from ..sources import ItemSource, LocalSource
from .guards import ID_MATCH, CompiledGuard


class FrameResult:
    """What the hook hands back to Paddle's C shim for one frame."""

    __slots__ = ("code", "disable_eval_frame", "hooked")

    def __init__(
        self,
        code: Optional[types.CodeType],
        disable_eval_frame: bool,
        hooked: Optional[FrameResult] = None,
    ):
        self.code = code
        self.disable_eval_frame = disable_eval_frame
        #: what to hand Paddle's shim itself (the hook); ``run_direct`` runs ``code``
        self.hooked = hooked if hooked is not None else self


#: run the original code and keep watching the frames it calls
RUN_ORIGINAL = FrameResult(None, False)
#: run the original code with the hook off for what it calls: library code that has
#: not led to user code (``eval_frame.QUIET_AFTER``)
RUN_ORIGINAL_UNHOOKED = FrameResult(None, True)
#: past the recompile limit, a call that matches no entry runs its original code with
#: the hook off: nothing it calls has a cache of its own that could serve it
EAGER_PAST_LIMIT = FrameResult(None, True)
#: the same, when other frames have entries: through ``CompileContext.run_direct`` the
#: call runs under ``_limit_callback`` (those frames hit their caches, nothing new is
#: captured); seen by the hook, it is ``RUN_ORIGINAL``
EAGER_PAST_LIMIT_SEEING_CACHES = FrameResult(None, False)

#: an entry that profitability found slower than the frame's original code
#: (``runtime.profitability``): calls its guard matches run the original, watched by the hook
KEPT_EAGER = FrameResult(None, False)

#: what the recompile limit counts by (TorchDynamo's rule): an entry whose guard pins a
#: local by identity (``L['self'] is ___o1``) counts only against calls where that local is
#: the same object. Only ``self`` and locals that hold layers (a layer passed in, a loop's
#: item over a ``LayerList``) are counted so: they live as long as the model, while a
#: function made per call would, pinned by its guard, never count against any limit.
_SELF = "self"
#: stands for a local a call does not have
MISSING = object()


class _Strong:
    """A strong reference that reads like a weak one, for what weakref cannot reach."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __call__(self) -> Any:
        return self.obj


def _ref(obj: Any):
    try:
        return weakref.ref(obj)
    except TypeError:
        return _Strong(obj)


def pinned_locals(guards) -> tuple:
    """``((path, reference), ...)`` for the identity-matched locals the limit counts by
    (weak references where they can be: an entry must not keep a layer passed in alive);
    a path is ``(local name, item keys)``: an item of a local counts too (the layer of an
    ``enumerate`` loop's item, ``L['___loop_item'][1]``)."""
    found = []
    for g in guards:
        if g.kind != ID_MATCH:
            continue
        keys = []
        source = g.source
        while isinstance(source, ItemSource):
            keys.append(source.key)
            source = source.base
        if not isinstance(source, LocalSource):
            continue
        path = (source.local_name, tuple(reversed(keys)))
        if path == (_SELF, ()) or isinstance(g.value, paddle.nn.Layer):
            found.append((path, _ref(g.value)))
    return tuple(sorted(found, key=lambda item: repr(item[0])))


def owner_value(L: dict, path: tuple) -> Any:
    """The object at ``path`` (``pinned_locals``) in a call's locals, or ``MISSING``."""
    name, keys = path
    value = L.get(name, MISSING)
    for key in keys:
        try:
            value = value[key]
        except Exception:  # noqa: BLE001 - not the container it was: not the owner
            return MISSING
    return value


def owner_name(path: tuple) -> str:
    name, keys = path
    return name + "".join(f"[{key!r}]" for key in keys)


@dataclass
class CacheEntry:
    guard: CompiledGuard
    code: types.CodeType
    graph_module: Optional[GraphModule]
    compiled: Optional[Callable]
    #: prebuilt so that a cache hit allocates nothing
    result: FrameResult
    original: types.CodeType
    op_count: int
    #: what each graph pass did to this entry's graph
    pass_records: List[PassRecord] = field(default_factory=list)
    #: the backend that compiled the graph, and why it is not the one asked for
    backend: Optional[str] = None
    backend_note: Optional[str] = None
    #: where the backend's artifact came from: the compile cache's ``last_origin()`` after
    #: the build ("disk", "remote", "built", "miss": built and not kept), None when the
    #: backend used no cache
    artifact: Optional[str] = None
    #: the graph break this entry's code ends with (reason, location, instruction), and
    #: the resume functions it calls
    graph_break: Optional[Unsupported] = None
    resumes: List[types.CodeType] = field(default_factory=list)
    #: ``((name, reference), ...)``: the locals the guard identity-matches (``self``,
    #: layers; see ``pinned_locals``); the recompile limit counts this entry only for
    #: calls where each is the same object. Empty: it counts for every call
    owner: tuple = ()
    #: which input dimensions are dynamic, which are static and why (``jit_core.shapes``)
    shapes: List[str] = field(default_factory=list)
    #: the outside lists and dicts the code writes back, in words (``explain()``)
    written_back: List[str] = field(default_factory=list)
    #: ``((name, id), ...)`` of ``owner`` when the entry was added (``CodeCache``)
    owner_key: tuple = ()
    #: source names of the layers this entry serves every instance of
    #: (``ShapePolicy.shares_layer``)
    shared_layers: FrozenSet[str] = frozenset()
    #: source names of number inputs the capture needed as Python values after all: the
    #: entry serves one value of each (``OutputGraph.pinned_numbers``)
    pinned_numbers: FrozenSet[str] = frozenset()
    #: seconds each phase of the capture that made it took (``profiling.PHASES``)
    compile_times: Dict[str, float] = field(default_factory=dict)
    #: what the call that captured the entry runs, where it differs from ``result``: the
    #: entry's code with the graph's results the capture computed
    #: (``convert_frame.FirstFromCapture``); taken once
    first_result: Optional[FrameResult] = None

    def take_first_result(self) -> FrameResult:
        first, self.first_result = self.first_result, None
        return first if first is not None else self.result

    @property
    def built(self) -> Optional[Callable]:
        """What runs the graph now: the backend's own callable, without the wrapper that
        checks its first run (``convert_frame.CheckedFirstRun``)."""
        return getattr(self.compiled, "built", self.compiled)


class CodeCache:
    """The cache entries of one code object, and whether it is left alone."""

    __slots__ = (
        "entries",
        "eager_reason",
        "skipped",
        "hot",
        "dispatch",
        "on_change",
        "limit_reason",
        "limits_hit",
        "_per_owner",
        "dynamic_dims",
        "dynamic_numbers",
        "dynamic_notes",
        "static_reason",
        "shared_layers",
        "layer_reason",
        "dynamic_lists",
        "pinned_numbers",
        "raise_reason",
        "library_calls",
        "__weakref__",
    )

    def __init__(self):
        self.entries: List[CacheEntry] = []
        #: why this code runs eagerly for good (it cannot be captured)
        self.eager_reason: Optional[str] = None
        self.skipped = False
        #: for library code (``skipped``): how often it ran without user code below it
        #: (``eval_frame._Hook``); None once user code was seen below it, or for a code
        #: that is no library code
        self.library_calls: Optional[int] = None
        #: what the hook's fast path reads: (guard function, result) pairs, or None when
        #: the frame runs its original code
        self.hot: Optional[tuple] = ()
        #: ``(hot, function, dispatcher, its number of arguments, their names)``: what
        #: ``api._cache_hit`` built for ``hot`` (``fast_dispatch``; None, -1 and no names
        #: where the guards cannot be inlined); rebuilt when ``hot`` changes
        self.dispatch: Optional[tuple] = None
        #: called when the entries change (with ``dispatch`` dropped): the optimized
        #: object takes back the call it generated for the old ones (``api``)
        self.on_change: Optional[Callable[[], None]] = None
        #: why calls that match no entry run eagerly (the last recompile limit reached),
        #: and the limits reached so far (each is warned about once)
        self.limit_reason: Optional[str] = None
        self.limits_hit: Set[str] = set()
        #: ``((name, id), ...)`` of an entry's ``owner`` -> how many entries have it; an
        #: entry whose owner dies is removed (``remove``), so the ids stay theirs
        self._per_owner: Dict[tuple, int] = {}
        #: source names of number inputs that a capture of this code, or of a resume
        #: function of a loop body's breaks, needed as Python values (each capture serves
        #: one value): a loop that carries one runs whole instead (``LoopCall``)
        self.pinned_numbers: Set[str] = set()
        #: why this code's captures leave its ``try`` blocks to Python rather than take an
        #: exception raised during capture to its handler (``ShapePolicy.raise_reason``)
        self.raise_reason: Optional[str] = None
        self._reset_shapes()

    def _reset_shapes(self) -> None:
        #: source name -> the dimensions automatic dynamic shapes made dynamic, and why
        self.dynamic_dims: Dict[str, Set[int]] = {}
        #: source names of ints and floats whose value changed between calls (graph
        #: inputs now)
        self.dynamic_numbers: Set[str] = set()
        self.dynamic_notes: List[str] = []
        #: why this code's captures keep every dimension static (``shapes``)
        self.static_reason: Optional[str] = None
        #: source names of lists from outside whose length changed between calls (graph
        #: inputs of any length where passed whole to an operation)
        self.dynamic_lists: Set[str] = set()
        #: source names of layers another instance of whose class came here: captures
        #: from then on serve every instance (``ShapePolicy.shares_layer``)
        self.shared_layers: Set[str] = set()
        #: why this code's captures stay bound to their layer instances
        self.layer_reason: Optional[str] = None

    def mark_other_instances(self, L: dict, G: dict) -> List[str]:
        """Layers of this call that are other instances of the class an entry was
        captured for (twelve blocks of one class, each its own frame): the next capture
        serves them all; returns what was marked, in words."""
        if self.layer_reason is not None:
            return []
        for entry in self.entries:
            failed = (
                entry.guard.failure_through(L, G, entry.shared_layers)
                if entry.shared_layers
                else None
            )
            if failed is not None:
                # the instances differ in what the shared capture read (a size, a flag):
                # bound to their instances, each gets its own budget of recompiles
                self.layer_reason = f"its instances differ in what it read: {failed}"
                note = f"captures stay bound to their layer instances: {self.layer_reason}"
                self.dynamic_notes.append(note)
                return [note]
        marked = []
        for entry in self.entries:
            for name, cls in entry.guard.changed_layers(L, G):
                if name in self.shared_layers:
                    continue
                self.shared_layers.add(name)
                note = (
                    f"{name} is shared by every {cls.__qualname__}: another instance came, "
                    "so its parameters are graph inputs"
                )
                self.dynamic_notes.append(note)
                marked.append(note)
        return marked

    def mark_changed_sizes(self, L: dict, G: dict) -> List[str]:
        """Automatic dynamic shapes: the dimensions of guarded tensors whose size differs
        in this call from a capture's become dynamic; returns what was marked, in words."""
        if self.static_reason is not None:
            return []
        marked = []
        for entry in self.entries:
            for name, dim, was, now in entry.guard.changed_sizes(L, G):
                dims = self.dynamic_dims.setdefault(name, set())
                if dim in dims:
                    continue
                dims.add(dim)
                note = f"dimension {dim} of {name} is dynamic: its size changed from {was} to {now}"
                self.dynamic_notes.append(note)
                marked.append(note)
            for name, was, now in entry.guard.changed_lengths(L, G):
                if name in self.dynamic_lists:
                    continue
                self.dynamic_lists.add(name)
                note = (
                    f"the list {name} is an input of any length where an operation takes it "
                    f"whole: its length changed from {was} to {now}"
                )
                self.dynamic_notes.append(note)
                marked.append(note)
            for name, was, now in entry.guard.changed_numbers(L, G):
                if name in self.dynamic_numbers:
                    continue
                self.dynamic_numbers.add(name)
                kind = type(now).__name__
                note = f"the {kind} {name} is an input: its value changed from {was} to {now}"
                self.dynamic_notes.append(note)
                marked.append(note)
        return marked

    def add(self, entry: CacheEntry) -> None:
        self.entries.append(entry)
        self.hot = tuple((e.guard.fn, e.result) for e in self.entries)
        self._changed()
        key = entry.owner_key = tuple((name, id(ref())) for name, ref in entry.owner)
        self._per_owner[key] = self._per_owner.get(key, 0) + 1

    def remove(self, entry: CacheEntry) -> bool:
        """Drop an entry that can never match again (an object its guard holds weakly
        died); whether it was here. New containers, not changes to the old ones: another
        thread may be going through them."""
        if not any(e is entry for e in self.entries):
            return False
        self.entries = [e for e in self.entries if e is not entry]
        # the dispatcher holds what the dropped guard held
        self.refresh()
        per_owner = dict(self._per_owner)
        left = per_owner.get(entry.owner_key, 0) - 1
        if left > 0:
            per_owner[entry.owner_key] = left
        else:
            per_owner.pop(entry.owner_key, None)
        self._per_owner = per_owner
        return True

    def refresh(self) -> None:
        """The entries, or what one runs (``result``), changed: ``hot`` again from them
        (unless the frame runs eagerly), and what was generated for the old ones dropped."""
        if self.hot is not None:
            self.hot = tuple((e.guard.fn, e.result) for e in self.entries)
        self._changed()

    def _changed(self) -> None:
        """The entries changed: drop what was generated for the old ones."""
        self.dispatch = None
        on_change = self.on_change
        if on_change is not None:
            on_change()

    def match(self, L: dict, G: dict) -> Optional[FrameResult]:
        """The result of the first entry whose guard passes, or None.

        (The hook and ``api._cache_hit`` loop over ``hot`` inline: they run on every call.)
        """
        for entry in self.entries:
            if entry.guard(L, G):
                return entry.result
        return None

    def run_eagerly(self, reason: str) -> None:
        self.eager_reason = reason
        self.hot = None
        self._changed()

    def count_for(self, L) -> int:
        """The entries that count against the recompile limit for a call with locals
        ``L``: those whose pinned locals are the same objects here, and those that pin
        none."""
        n = 0
        for key, count in self._per_owner.items():
            if all(id(owner_value(L, path)) == oid for path, oid in key):
                n += count
        return n

    def clear(self) -> None:
        self.entries = []
        self.eager_reason = None
        self.hot = ()
        self._changed()
        self.limit_reason = None
        self.limits_hit = set()
        self._per_owner = {}
        self._reset_shapes()


@dataclass
class CaptureEvent:
    """One capture attempt, kept for ``explain()``."""

    code_name: str
    location: str
    compiled: bool
    entry: Optional[CacheEntry] = None
    reason: Optional[str] = None
    break_location: Optional[str] = None
    instruction: Optional[str] = None
    #: a graph break inside a compiled frame (not a capture of its own)
    graph_break: bool = False
    #: the code of the resume functions a graph break calls (``explain()`` shows them
    #: disassembled; ``dis`` on every capture was 5% of capture time)
    resumes: List[types.CodeType] = field(default_factory=list)
    #: a recompile limit reached (not a capture): calls that match no entry run eagerly
    recompile_limit: bool = False
    #: ``frame_key`` of the code
    key: Optional[str] = None
    #: the kind of break (one of ``errors.CATEGORIES``), for a frame that does not compile
    category: Optional[str] = None

    @classmethod
    def captured(cls, code: types.CodeType, location: str, entry: CacheEntry) -> CaptureEvent:
        """``code`` was captured into ``entry``."""
        return cls(code.co_name, location, True, entry)

    @classmethod
    def eager(
        cls,
        code: types.CodeType,
        location: str,
        reason: str,
        category: str,
        where: Optional[str] = None,
        instruction: Optional[str] = None,
    ) -> CaptureEvent:
        """``code`` runs as it is, for ``reason`` (met at ``where``, ``instruction``)."""
        return cls(
            code.co_name, location, False, None, reason, where, instruction, category=category
        )

    @classmethod
    def graph_break_in(cls, code: types.CodeType, location: str, entry: CacheEntry) -> CaptureEvent:
        """The graph break inside ``entry``, a capture of ``code``."""
        brk = entry.graph_break
        assert brk is not None, "graph_break_in is for an entry with a graph break"
        return cls(
            code.co_name,
            location,
            False,
            None,
            brk.reason,
            brk.location,
            brk.instruction,
            graph_break=True,
            resumes=list(entry.resumes),
            category=brk.category,
        )

    @classmethod
    def limit_reached(
        cls, code: types.CodeType, location: str, reason: str, key: str, category: str
    ) -> CaptureEvent:
        """A recompile limit of ``code`` was reached: calls that match no entry run as
        they are."""
        return cls(
            code.co_name,
            location,
            False,
            None,
            reason,
            recompile_limit=True,
            key=key,
            category=category,
        )
