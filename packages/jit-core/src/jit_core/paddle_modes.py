"""The ``paddle`` backend's ``mode="auto"`` (its default): for the forward of a captured
training step (``is_training_forward``), Paddle's eager kernels or its static executor,
whichever runs the forward *and its backward* faster on this machine.

Neither wins everywhere. The static executor (``paddle.jit.to_static``: forward and
backward as PIR programs) saves what eager Paddle spends per operator around its kernels,
which is most of a small model's step on a slow core (a 2-layer Transformer encoder ran at
0.65x eager's time on one machine) and nothing on a kernel-bound one (ResNet18: 1.00x);
on a small MLP it was slower (1.12x). So it is measured, per graph:

1. eager forward plus backward once (``paddle.grad`` of the sum of the outputs, so no
   ``.grad`` is written); a graph whose time the static executor cannot cut by
   ``MARGIN`` even if it saved ``SAVED_PER_OP_US`` per operator stays eager untimed;
2. the static build, run once from the same random state: its outputs and gradients must
   agree with eager's (``RTOL``, ``SCALED_ATOL``), or it is never chosen;
3. both timed in interleaved rounds (``MAX_ROUNDS``, ``BUDGET_S``), after the static
   program's warm-up (its runs get faster over the first ``WARMUP_CALLS``); static is
   chosen only when it is faster by ``MARGIN``.

Layer buffers (BatchNorm's statistics) are put back after the trial runs, and the random
stream is the user's (``jit_core.rng``). The choice is in ``explain()`` (the graph's
backend line) and in the compile cache (namespace ``paddle-mode``, keyed by the graph and
the machine): the next process builds the chosen mode and times nothing. Any other graph
runs eagerly (inference: the lowered kernel calls are fastest there).
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any, Callable, List, Optional, Sequence, Tuple

import paddle

from . import rng
from .cache import disk as compile_cache
from .cache.disk import DiskCache

#: most timed rounds (one forward and backward of each mode per round), and seconds
MAX_ROUNDS = 10
BUDGET_S = 1.0
#: untimed forward and backward runs of the static program before the rounds, at most,
#: and seconds at most
WARMUP_CALLS = 20
WARMUP_S = 1.0
#: the most a static program saves per operator of the forward (its backward included),
#: in microseconds: what eager Paddle spends around a kernel (Python, dispatch, the
#: autograd node), measured at 10-25 us on 2-core x86 machines
SAVED_PER_OP_US = 40.0
#: how much faster the static executor must be to be chosen (its builds per new input
#: shape cost seconds)
MARGIN = 0.03
#: how close static's outputs and gradients must be to eager's
RTOL = 1e-4
SCALED_ATOL = 1e-5
CACHE_NAMESPACE = "paddle-mode"


def is_training_forward(gm, example_inputs: Sequence[Any]) -> bool:
    """Whether ``gm`` is the forward of a training step: the captured code runs the
    backward of what it computes (``meta["runs_backward"]``), and running it now records
    gradients (they are on, and an input or a parameter of the graph requires them).

    A forward whose backward runs elsewhere is not timed: whether one will run is known
    only later, and most graphs called with gradients on are inference that forgot
    ``paddle.no_grad()``, where a static build would cost seconds for nothing."""
    if not gm.meta.get("runs_backward") or not paddle.is_grad_enabled():
        return False
    tensors = [x for x in example_inputs if isinstance(x, paddle.Tensor)]
    return any(not t.stop_gradient for t in tensors + list(gm.parameters()))


class Chosen:
    """The build a choice made, callable, saying what was chosen and why."""

    __slots__ = ("run", "mode", "why", "__weakref__")

    def __init__(self, run: Callable, mode: str, why: str):
        self.run = run
        self.mode = mode
        self.why = why

    def __call__(self, *args):
        return self.run(*args)

    def describe(self) -> str:
        inner = getattr(self.run, "describe", None)
        said = inner() if callable(inner) else None
        line = f"{self.mode} mode ({self.why})"
        return f"{line}; {said}" if said else line

    @property
    def kernel_code(self) -> Optional[str]:
        return getattr(self.run, "kernel_code", None)


def choose(
    gm,
    example_inputs: Sequence[Any],
    eager: Callable[[], Callable],
    static: Callable[[], Callable],
    cache: bool = True,
) -> Chosen:
    """What runs ``gm``: ``eager()``'s build or ``static()``'s, as the module docstring says."""
    store, key = None, ""
    if cache:
        store = DiskCache(CACHE_NAMESPACE, kind="hint")
        key = _cache_key(gm, example_inputs)
        kept = _read(store, key)
        if kept is not None:
            mode, why = kept
            build = static if mode == "static" else eager
            return Chosen(build(), mode, f"{why}, from the compile cache")
    with rng.preserved(), _state_kept(gm, _grad_targets(gm, example_inputs)):
        chosen = _measure(gm, example_inputs, eager, static)
    if store is not None:
        store.put(key, json.dumps([chosen.mode, chosen.why]).encode())
    return chosen


def _measure(gm, example_inputs, eager, static) -> Chosen:
    eager_run = eager()
    wrt = _grad_targets(gm, example_inputs)
    state = rng.RngState()
    start = time.perf_counter()
    expected = _forward_backward(eager_run, example_inputs, wrt)
    eager_s = time.perf_counter() - start
    if expected[1] is None:
        return Chosen(eager_run, "eager", "no output needs a gradient")
    ops = _op_count(gm)
    most_saved = ops * SAVED_PER_OP_US * 1e-6
    if most_saved < MARGIN * eager_s:
        why = (
            f"kernel-bound: {ops} operators, forward and backward {eager_s * 1e3:.1f} ms; "
            "the static executor could not save enough to matter"
        )
        return Chosen(eager_run, "eager", why)
    try:
        static_run = static()
        state.restore()
        got = _forward_backward(static_run, example_inputs, wrt)
    except Exception as e:  # noqa: BLE001 - a graph the static executor cannot run stays eager
        text = str(e).strip().splitlines()[-1] if str(e).strip() else ""
        return Chosen(eager_run, "eager", f"static failed: {type(e).__name__}: {text[:200]}")
    why = _disagreement(got, expected)
    if why:
        return Chosen(eager_run, "eager", f"static disagrees with eager: {why}")
    times = _time({"eager": eager_run, "static": static_run}, example_inputs, wrt)
    eager_t, static_t = times["eager"], times["static"]
    timings = f"forward and backward: static {static_t * 1e3:.2f} ms, eager {eager_t * 1e3:.2f} ms"
    if static_t < (1 - MARGIN) * eager_t:
        return Chosen(static_run, "static", timings)
    return Chosen(eager_run, "eager", timings)


def _grad_targets(gm, example_inputs) -> List[Any]:
    tensors = [x for x in example_inputs if isinstance(x, paddle.Tensor)]
    return [t for t in list(gm.parameters()) + tensors if not t.stop_gradient]


def _flat(value: Any) -> List[Any]:
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _flat(v)]
    return [value]


def _forward_backward(run: Callable, example_inputs, wrt) -> Tuple[Any, Optional[tuple]]:
    """``run``'s outputs, and the gradients of the sum of its float outputs that need
    them (None where none does), without writing any ``.grad``."""
    outs = run(*example_inputs)
    flat = [
        o
        for o in _flat(outs)
        if isinstance(o, paddle.Tensor) and not o.stop_gradient and o.is_floating_point()
    ]
    if not flat or not wrt:
        return outs, None
    total = flat[0].sum()
    for o in flat[1:]:
        total = total + o.sum()
    return outs, tuple(paddle.grad([total], wrt, allow_unused=True))


def _disagreement(got, expected) -> str:
    # (the ONNX kit is not loaded by the paddle backend unless a mode is chosen)
    from .kit.onnx.check import output_difference

    found = output_difference(_flat(got[0]), _flat(expected[0]), rtol=RTOL, scaled_atol=SCALED_ATOL)
    if found is not None:
        return f"{found[0]} {found[1]}"
    pairs = list(zip(got[1] or (), expected[1] or ()))
    if any((a is None) != (b is None) for a, b in pairs):
        return "a gradient is missing in one of them"
    present = [(a, b) for a, b in pairs if a is not None]
    found = output_difference(
        [a for a, _ in present], [b for _, b in present], rtol=RTOL, scaled_atol=SCALED_ATOL
    )
    return "" if found is None else f"gradient {found[0][len('output ') :]} {found[1]}"


def _time(runs, example_inputs, wrt) -> dict:
    """Median seconds of a forward and backward of each of ``runs``, interleaved."""
    samples: dict = {name: [] for name in runs}
    clock = time.perf_counter
    # a static program's runs after its build get faster for a while (a Transformer
    # encoder's from 10 to 7 ms over its first 20): timed before that, static would lose
    # where it wins
    for name, run in runs.items():
        calls = WARMUP_CALLS if name == "static" else 2
        until = clock() + WARMUP_S
        for _ in range(calls):
            _forward_backward(run, example_inputs, wrt)
            if clock() > until:
                break
    deadline = clock() + BUDGET_S
    rounds = 0
    while rounds < MAX_ROUNDS and (rounds < 2 or clock() < deadline):
        order = list(runs.items())
        for name, run in order if rounds % 2 == 0 else order[::-1]:
            start = clock()
            _forward_backward(run, example_inputs, wrt)
            samples[name].append(clock() - start)
        rounds += 1
    return {name: statistics.median(s) for name, s in samples.items()}


def _op_count(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


class _state_kept:
    """Puts back what the trial runs may change: what a forward updates (the graph's
    buffers, and the parameters no gradient reaches: BatchNorm's statistics are such
    parameters), and the ``.grad`` of what gradients reach (``paddle.grad`` through a
    static program drops the ones that exist; eager ``paddle.grad`` leaves them)."""

    def __init__(self, gm, wrt: List[Any]):
        self.saved = [
            (t, t.clone())
            for t in gm.state_dict().values()
            if t.stop_gradient and t._is_initialized()
        ]
        self.grads = [
            (t, t.grad.clone()) for t in wrt if t.grad is not None and t.grad._is_initialized()
        ]

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        with paddle.no_grad():
            for tensor, value in self.saved:
                tensor.set_value(value)
        for tensor, grad in self.grads:
            tensor.grad = grad


def _cache_key(gm, example_inputs) -> str:
    tensors = [x for x in example_inputs if isinstance(x, paddle.Tensor)]
    grads = [not t.stop_gradient for t in tensors]
    extra = (CACHE_NAMESPACE, grads, compile_cache.machine_fingerprint())
    return compile_cache.graph_key(gm, tensors, extra, values=False, tensor_names=False)


def _read(store, key: str) -> Optional[Tuple[str, str]]:
    data = store.get(key)
    if data is None:
        return None
    try:
        mode, why = json.loads(data.decode())
    except (ValueError, TypeError):
        return None  # written by another version: choose again
    return (mode, why) if mode in ("eager", "static") else None


__all__ = ["Chosen", "choose", "is_training_forward"]
