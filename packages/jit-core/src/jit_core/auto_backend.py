"""``backend="auto"``: per graph, the fastest installed backend that computes what Paddle does.

No backend is fastest everywhere: ONNX Runtime runs a convolution net 4-14x faster than
Paddle's kernels but loses on graphs of a few small ops, where what a session run costs
around the kernels dominates. ``auto`` decides per graph, by measuring:

1. it compiles the graph on every installed backend that can take it (``candidates``);
2. it checks each one's results against the ``paddle`` backend's on the capture's own
   inputs (``RTOL`` and ``SCALED_ATOL``, the loosest tolerance a backend documents): one
   that disagrees, or fails to compile, is never chosen;
3. it times the rest on those inputs, in interleaved rounds, for at most ``max_calls``
   calls each or ``budget_s`` seconds in all, whichever comes first; the fastest median
   wins.

The choice and the timings are in ``explain()`` (the graph's backend line), and in the
compile cache (namespace ``auto``), keyed by the graph, the candidates and the machine:
the next process compiles only the chosen backend, checks it again and times nothing.

A graph that updates tensors in place, draws random numbers or calls a layer in training
mode is never run more than once here: it goes to the ``paddle`` backend (jit-core
already gives a graph that needs gradients or layer state to it, since ``auto`` registers
as inference-only when another backend could be chosen).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, cast

import paddle

from .errors import BackendNotFoundError
from .fx import Node
from .hookspecs import hookimpl

AUTO = "auto"
#: timed calls of each candidate at most, and seconds of timing in all at most
MAX_CALLS = 30
BUDGET_S = 0.5
#: how close a candidate's results must be to the paddle backend's: ``rtol`` of each value
#: plus ``SCALED_ATOL`` times the largest magnitude of Paddle's result (onnxrt documents
#: 1e-4 and 2e-5, tvm 1e-4 and 1e-4)
RTOL = 1e-4
SCALED_ATOL = 1e-4
CACHE_NAMESPACE = "auto"


@dataclass
class Trial:
    """What ``auto`` found for one backend on one graph."""

    backend: str
    #: median microseconds per call on the capture's inputs, when it was timed
    us: Optional[float] = None
    calls: int = 0
    #: why it was not timed (not a candidate, failed, disagreed with paddle), or ""
    refused: str = ""

    def describe(self) -> str:
        if self.us is not None:
            return f"{self.backend} {self.us:.1f} us"
        return f"{self.backend}: {self.refused}"


@dataclass
class Choice:
    backend: str
    trials: List[Trial] = field(default_factory=list)
    #: the choice was read from the compile cache (nothing timed in this process)
    from_cache: bool = False

    def describe(self) -> str:
        """``chose onnxrt: onnxrt 30.2 us, paddle 121.0 us, tvm: not a candidate ...``"""
        where = " (from the compile cache)" if self.from_cache else ""
        trials = sorted(self.trials, key=lambda t: (t.us is None, t.us or 0.0))
        return f"chose {self.backend}{where}: " + ", ".join(t.describe() for t in trials)


_last = threading.local()


def take_choice() -> Optional[Choice]:
    """The choice this thread's latest ``auto`` compile made, once (None after that)."""
    choice = getattr(_last, "choice", None)
    _last.choice = None
    return choice


def repeatable(gm) -> str:
    """Why running ``gm`` again would change something outside it (so it is never
    timed), or "": it updates an input, a parameter or a buffer in place, draws random
    numbers, or calls a layer in training mode. (An update of a value the graph made
    itself changes nothing a second run would see.)"""
    from .passes.effects import is_mutated, is_random, target_name

    outside = ("placeholder", "get_attr")
    for node in gm.graph.nodes:
        if node.op in outside and is_mutated(node):
            return f"it updates {node.name} in place"
        if node.op == "call_module" and getattr(gm, node.target).training:
            return f"layer {node.target} is in training mode"
        if node.op not in ("call_function", "call_method"):
            continue
        out = node.kwargs.get("out", node.kwargs.get("output"))
        if isinstance(out, Node) and out.op in outside:
            return f"{target_name(node)} writes into {out.name}"
        if is_random(node):
            return f"{target_name(node)} draws random numbers"
    return ""


def _disagreement(got: Any, expected: Any) -> str:
    """Why ``got`` (a candidate's outputs) is not ``expected`` (the paddle backend's), or
    "" when they agree."""
    from .kit.onnx.check import output_difference

    found = output_difference(got, expected, rtol=RTOL, scaled_atol=SCALED_ATOL)
    return "" if found is None else f"{found[0]} {found[1]}"


def _takes(backend, gm, example_inputs: Sequence[Any]) -> str:
    """Why ``backend`` cannot take ``gm`` as ``auto`` hands it over, or ""."""
    from .kit.shape_dispatch import dynamic_dims

    if backend.unavailable:
        return f"n/a here ({backend.unavailable})"
    if not backend.number_inputs and any(not isinstance(x, paddle.Tensor) for x in example_inputs):
        return "it takes no Python numbers as inputs"
    if not backend.dynamic_shapes and dynamic_dims(gm):
        return "it builds for one input shape at a time"
    return ""


def _candidates(names: Optional[Sequence[str]]) -> Dict[str, Any]:
    """The backends ``auto`` may choose from: ``names`` (all of them tried, even one that
    registered ``auto_candidate=False``), else every installed backend that can run here
    and is a default candidate; ``paddle`` is always one."""
    from . import plugins

    found = plugins.backends()
    if names is not None:
        unknown = [n for n in names if n not in found or n == AUTO]
        if unknown:
            raise BackendNotFoundError(
                f"backend 'auto': unknown candidate {unknown[0]!r}; installed backends: "
                f"{', '.join(sorted(n for n in found if n != AUTO))}"
            )
        chosen = {n: found[n] for n in names}
    else:
        chosen = {
            n: b for n, b in found.items() if n != AUTO and b.auto_candidate and not b.unavailable
        }
    chosen.setdefault("paddle", found["paddle"])
    return chosen


_fingerprints: Dict[str, str] = {}


def _source_fingerprint(fn: Callable) -> str:
    """A hash of the Python sources of the top-level package that defines ``fn`` (with
    jit_core's own, which runs every graph's guards and the paddle backend's code)."""
    module = getattr(fn, "__module__", None) or ""
    digest = hashlib.sha256()
    for top in sorted({module.split(".")[0], __name__.split(".")[0]}):
        if top not in _fingerprints:
            h = hashlib.sha256()
            path = getattr(sys.modules.get(top), "__file__", None)
            if path:
                root = os.path.dirname(path)
                for folder, _, files in sorted(os.walk(root)):
                    for name in sorted(f for f in files if f.endswith(".py")):
                        with open(os.path.join(folder, name), "rb") as f:
                            h.update(name.encode() + b"\0" + f.read())
            _fingerprints[top] = h.hexdigest()[:16]
        digest.update(_fingerprints[top].encode())
    return digest.hexdigest()[:16]


def _cache_key(gm, example_inputs: Sequence[Any], names: Sequence[str]) -> str:
    from . import plugins
    from .cache import disk as compile_cache

    versions = {name: (dist, version) for name, dist, version in plugins.list_plugins()}
    found = plugins.backends()
    # a version number stays while the code under it changes (an editable install, a
    # development tree): the code itself decides how fast a backend runs a graph
    used = sorted(
        (n, versions.get(found[n].plugin, ("", "")), _source_fingerprint(found[n].compile))
        for n in names
    )
    tensors = [x for x in example_inputs if isinstance(x, paddle.Tensor)]
    numbers = [
        (i, type(x).__name__)
        for i, x in enumerate(example_inputs)
        if not isinstance(x, paddle.Tensor)
    ]
    extra = ("auto", used, numbers, compile_cache.machine_fingerprint())
    return compile_cache.graph_key(gm, tensors, extra, values=False, tensor_names=False)


def compile_auto(
    gm,
    example_inputs: Sequence[Any],
    candidates: Optional[Sequence[str]] = None,
    budget_s: float = BUDGET_S,
    max_calls: int = MAX_CALLS,
    cache: bool = True,
) -> Callable:
    """The backend's ``compile``: what the fastest candidate that agrees with Paddle built
    for ``gm`` (the module docstring says how it is chosen). ``candidates``: the backend
    names to choose from (default: every installed one that can run here); ``cache``:
    read and keep the choice in the compile cache."""
    if not budget_s > 0:
        raise ValueError(f"budget_s must be positive, got {budget_s!r}")
    if not isinstance(max_calls, int) or max_calls < 1:
        raise ValueError(f"max_calls must be a positive int, got {max_calls!r}")
    backends = _candidates(candidates)
    trials: Dict[str, Trial] = {name: Trial(name) for name in backends}
    why_once = repeatable(gm)
    if why_once:
        for name, trial in trials.items():
            trial.refused = "not timed" if name == "paddle" else f"not tried: {why_once}"
        return _chosen(
            Choice("paddle", list(trials.values())), _on_paddle(backends, gm, example_inputs)
        )

    store = None
    key = ""  # set together with store
    if cache:
        from .cache.disk import DiskCache

        # a choice is a hint: what it names is built and checked against the graph again
        store = DiskCache(CACHE_NAMESPACE, kind="hint")
        key = _cache_key(gm, example_inputs, sorted(backends))
        kept = _read(store, key, backends)
        if kept is not None:
            # built and checked again (the cache only spares the timing); a backend that
            # no longer builds here or agrees is chosen again from scratch
            fn = _build(backends[kept.backend], gm, example_inputs)
            if not isinstance(fn, str) and _agrees_now(fn, gm, example_inputs):
                return _chosen(kept, fn)

    on_paddle = _on_paddle(backends, gm, example_inputs)

    expected = gm.forward(*example_inputs)
    runs: Dict[str, Callable] = {}
    for name, backend in backends.items():
        trial = trials[name]
        if name == "paddle":
            runs[name] = on_paddle
            continue
        why = _takes(backend, gm, example_inputs)
        if why:
            trial.refused = f"not tried: {why}"
            continue
        fn = _build(backend, gm, example_inputs)
        if isinstance(fn, str):
            trial.refused = fn
            continue
        try:
            got = fn(*example_inputs)
        except Exception as e:  # noqa: BLE001 - a candidate that cannot run is refused
            trial.refused = f"its first run failed: {type(e).__name__}: {e}"
            continue
        why = _disagreement(got, expected)
        if why:
            trial.refused = f"disagrees with paddle: {why}"
            continue
        runs[name] = fn
    if len(runs) > 1:
        _time(runs, trials, example_inputs, budget_s, max_calls)
    else:  # nothing to choose between: no time spent measuring
        trials["paddle"].refused = "the only candidate left, not timed"
    timed = [t for t in trials.values() if t.us is not None]
    best = min(timed, key=lambda t: cast(float, t.us)).backend if timed else "paddle"
    choice = Choice(best, list(trials.values()))
    if store is not None:
        store.put(key, json.dumps(_encode(choice)).encode())
    return _chosen(choice, runs.get(best, on_paddle))


def _on_paddle(backends, gm, example_inputs) -> Callable:
    """The paddle backend's own build (its graph code with API calls lowered to their
    kernels): what runs once paddle is chosen, so what is timed; the graph's forward
    where that build fails."""
    fn = _build(backends["paddle"], gm, example_inputs)
    return gm.forward if isinstance(fn, str) else fn


def _build(backend, gm, example_inputs) -> Any:
    """What ``backend`` builds for ``gm``, or why it could not (a str)."""
    try:
        return backend.compile(gm, example_inputs)
    except Exception as e:  # noqa: BLE001 - a candidate that cannot compile is refused
        text = str(e).splitlines()[0] if str(e) else ""
        if len(text) > 200:
            text = text[:197] + "..."
        return f"failed to compile: {type(e).__name__}: {text}"


def _agrees_now(fn: Callable, gm, example_inputs) -> bool:
    try:
        got = fn(*example_inputs)
    except Exception:  # noqa: BLE001 - then it is chosen again
        return False
    return not _disagreement(got, gm.forward(*example_inputs))


def _time(runs, trials, example_inputs, budget_s: float, max_calls: int) -> None:
    """Median time per call of each of ``runs``, in rounds that call each once (so that
    the machine's drift hits them alike), into ``trials``."""
    samples: Dict[str, List[float]] = {name: [] for name in runs}
    clock = time.perf_counter
    # (no warm-up: each ran once already, paddle for the expected outputs, the others
    # for their check)
    deadline = clock() + budget_s
    rounds = 0
    while rounds < max_calls and (rounds == 0 or clock() < deadline):
        for name, fn in runs.items():
            start = clock()
            fn(*example_inputs)
            samples[name].append(clock() - start)
        rounds += 1
    for name, s in samples.items():
        trials[name].us = statistics.median(s) * 1e6
        trials[name].calls = len(s)


def _chosen(choice: Choice, fn: Callable) -> Callable:
    _last.choice = choice
    return fn


def _encode(choice: Choice) -> dict:
    return {
        "backend": choice.backend,
        "trials": [[t.backend, t.us, t.calls, t.refused] for t in choice.trials],
    }


def _read(store, key: str, backends: Dict[str, Any]) -> Optional[Choice]:
    data = store.get(key)
    if data is None:
        return None
    try:
        kept = json.loads(data.decode())
        trials = [Trial(str(b), us, int(n), str(why)) for b, us, n, why in kept["trials"]]
        choice = Choice(str(kept["backend"]), trials, from_cache=True)
    except (ValueError, KeyError, TypeError):
        return None  # written by another version: choose again
    return choice if choice.backend in backends else None


@hookimpl
def jit_register_backends(register):
    register(
        AUTO,
        compile_auto,
        description="per graph, the fastest installed backend that agrees with paddle",
        # what needs gradients, layer state or Paddle's random numbers goes to paddle
        inference_only=True,
        dynamic_shapes=True,
        number_inputs=True,
        auto_candidate=False,
    )


__all__ = ["AUTO", "Choice", "Trial", "compile_auto", "repeatable", "take_choice"]
