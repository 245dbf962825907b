"""An optimizer's ``step()`` as the update kernels it calls, without its Python.

Paddle's ``opt.step()`` spends most of a small model's update in Python: per parameter it
walks the parameter groups, checks for sharding, fusion and AMP, looks up accumulators
and the learning rate, then calls one kernel (``_C_ops.sgd_``, ``momentum_``, ``adam_``,
``adamw_``) that does the update; on a 4-parameter MLP that Python is 60 of SGD's 80 us.
What those kernels receive is the same on every step of a training loop: the parameter,
its gradient, accumulators that live in the optimizer, the learning-rate tensor and
constants taken from the optimizer's settings.

So where a step's training call is ``opt.step()`` of SGD, Momentum, Adam or AdamW (the
classes themselves: a subclass may change the update), the step is recorded once as
Paddle runs it: each update kernel's arguments, and every C function Paddle's code calls
on the way (a profile hook). It is replayable only where that code called nothing but
the update kernels, the scheduler's set of the learning rate (``full_``) and a short list
of reads; each kernel's tensors are its parameter, that parameter's gradient (or what
the gradient clip returned for it) and tensors the optimizer holds. The multi-tensor
forms (``merged_adam_``, ``merged_momentum_``) take lists of these. Later steps call the
same kernels with the same arguments, each gradient taken anew (and clipped anew: the
clip is called as Paddle's step calls it, on the (parameter, gradient) pairs) and a
scheduler's rate read anew, so the update is Paddle's bit for bit. Regularizers,
parameter groups, anything calling other kernels is not replayable and runs Paddle's
``step()`` every time (``describe()`` says why).

Each replay first checks what decided the recorded path: the same learning-rate object
(``set_lr()`` and ``set_lr_scheduler()`` replace it), the same gradient clip, parameter
list and dict of master weights (``set_state_dict()`` replaces that), no ``found_inf``
from a loss scaler (which skips the update), and the same parameters trainable with
gradients. Where any differs, that step is recorded again as it runs Paddle's
``step()`` (at most ``MAX_RECORDINGS`` times per optimizer).
"""

from __future__ import annotations

import sys
import threading
import types
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

import paddle
from paddle import _C_ops
from paddle.base import core

#: the update kernels: where each takes its parameter and the parameter's gradient
UPDATE_KERNELS: Dict[str, Tuple[int, int]] = {
    "sgd_": (0, 2),
    "momentum_": (0, 1),
    "adam_": (0, 1),
    "adamw_": (0, 1),
}
#: the multi-tensor forms (``use_multi_tensor=True``): lists of parameters and gradients
MERGED_KERNELS = frozenset({"merged_adam_", "merged_momentum_"})
UPDATE_KERNELS.update({name: (0, 1) for name in MERGED_KERNELS})
#: where the multi-tensor forms keep their state, beside ``_accumulators``
_MULTI_TENSOR_STATE = (
    "_param_dict",
    "_moment1_dict",
    "_moment2_dict",
    "_moment2_max_dict",
    "_beta1_pow_acc_dict",
    "_beta2_pow_acc_dict",
    "_master_weight_dict",
    "_velocity_dict",
)

#: a scheduler's rate written into the optimizer's learning-rate tensor:
#: ``full_(lr, shape, value, dtype, place)``
LR_SET = "full_"
_LR_VALUE = 2

#: C functions Paddle's ``step()`` calls besides its kernels: reads of the parameters,
#: its ``no_grad`` guard, the static program's insertion point it saves and restores
_ALLOWED_C = frozenset(
    {
        "getattr",
        "hasattr",
        "isinstance",
        "issubclass",
        "len",
        "next",
        "iter",
        "id",
        "callable",
        "_has_grad",
        "_set_has_grad",
        "_set_warmup",
        "get_current_insertion_point",
        "set_insertion_point",
        "_grad_ivar",
        "_is_initialized",
        "is_selected_rows",
        "get_grads_types",
        "setprofile",
        "get_ident",  # (the recording's own check of its thread)
        "setattr",  # (as an assignment: the decorators some versions wrap calls in)
    }
)
#: a method of one of these is the optimizer's Python bookkeeping, not a kernel
_CONTAINERS = (dict, list, tuple, str, set, frozenset, types.MappingProxyType)

#: recordings per optimizer that could not be replayed, and recordings in all, before its
#: ``step()`` stays Paddle's for good (a loop whose path changes on every step would
#: otherwise record every step)
MAX_FAILED_RECORDINGS = 3
MAX_RECORDINGS = 8


def _classes() -> tuple:
    opt = paddle.optimizer
    return (opt.SGD, opt.Momentum, opt.Adam, opt.AdamW)


class _NotReplayable(Exception):
    """Why a recorded step cannot be replayed (for ``describe()``)."""


class _Recording:
    """The kernels one ``step()`` called with their arguments, and the C functions it
    called that are neither those kernels nor allowed."""

    def __init__(self) -> None:
        self.calls: List[Tuple[Callable, tuple, dict]] = []
        self.unexpected: List[str] = []
        self.thread = threading.get_ident()
        self.kernels: Dict[str, Callable] = {}
        #: what the optimizer's gradient clip was given and returned
        self.clipped: Optional[Tuple[list, list]] = None
        self._paused = False

    def _wrap(self, real: Callable) -> Callable:
        calls, thread = self.calls, self.thread

        def recorded(*args, **kwargs):
            if threading.get_ident() == thread and not self._paused:
                calls.append((real, args, kwargs))
            return real(*args, **kwargs)

        return recorded

    def _clip(self, clip: Callable) -> Callable:
        """The gradient clip, run as it is: it is called again as it is on each replay."""

        def clipping(params_grads):
            self._paused = True
            sys.setprofile(None)
            try:
                out = clip(params_grads)
            finally:
                sys.setprofile(self._profile)
                self._paused = False
            self.clipped = (list(params_grads), list(out))
            return out

        return clipping

    def _profile(self, frame, event: str, fn: Any) -> None:
        if event != "c_call":
            return
        if isinstance(getattr(fn, "__self__", None), _CONTAINERS):
            return
        name = getattr(fn, "__name__", "")
        if name in _ALLOWED_C or self.kernels.get(name) is fn:
            return
        self.unexpected.append(name or repr(fn))

    def run(self, step: Callable, opt: Any) -> Any:
        """``step(opt)`` with the kernels' calls recorded."""
        for name in (*UPDATE_KERNELS, LR_SET):
            real = getattr(_C_ops, name, None)
            if real is not None:
                self.kernels[name] = real
        clip = opt._grad_clip
        try:
            for name, real in self.kernels.items():
                setattr(_C_ops, name, self._wrap(real))
            if clip is not None:
                opt._grad_clip = self._clip(clip)
            sys.setprofile(self._profile)
            try:
                return step(opt)
            finally:
                sys.setprofile(None)
        finally:
            opt._grad_clip = clip
            for name, real in self.kernels.items():
                setattr(_C_ops, name, real)


class _Plan:
    """The recorded kernel calls, with what decided that path of ``step()``."""

    __slots__ = ("lr", "params", "masters", "clip", "pattern", "updated", "calls", "counts")

    def __init__(self, opt: Any, taking_part: List[bool], recording: _Recording, grads: list):
        self.lr = opt._learning_rate
        self.params = opt._parameter_list
        #: (``set_state_dict()`` replaces the dict of master weights)
        self.masters = getattr(opt, "_master_weights", None)
        self.clip = opt._grad_clip
        #: per parameter, whether the step updated it (trainable, with a gradient)
        self.pattern = list(zip(self.params, taking_part))
        #: (kernel, arguments, keywords, the index of the gradient among the updated
        #: parameters', a list of them for a multi-tensor kernel, or None for the learning
        #: rate's set; where it goes in the arguments)
        self.calls: List[Tuple[Callable, list, dict, Any, int]] = []
        self.counts: Dict[str, int] = {}
        updated = self.updated = [p for p, takes in self.pattern if takes]
        if self.clip is not None:
            grads = _clipped(recording, updated, grads)
        state = _state_tensors(opt)
        done = set()
        for fn, args, kwargs in recording.calls:
            name = fn.__name__
            self.counts[name] = self.counts.get(name, 0) + 1
            if name == LR_SET:
                self.calls.append(_lr_set(opt, fn, args, kwargs, state))
                continue
            at_param, at_grad = UPDATE_KERNELS[name]
            merged = name in MERGED_KERNELS
            params_in = args[at_param] if merged else [args[at_param]]
            grads_in = args[at_grad] if merged else [args[at_grad]]
            if not isinstance(params_in, list) or not isinstance(grads_in, list):
                raise _NotReplayable(f"{name} took something other than lists of tensors")
            if len(params_in) != len(grads_in):
                raise _NotReplayable(f"{name} took as many gradients as parameters")
            indices = []
            for param, grad in zip(params_in, grads_in):
                index = next((i for i, p in enumerate(updated) if p is param), None)
                if index is None or index in done:
                    raise _NotReplayable(
                        f"{name} updated a tensor that is not one of its parameters"
                    )
                if not grad._is_shared_buffer_with(grads[index]):
                    raise _NotReplayable(f"{name} took a gradient other than its parameter's")
                done.add(index)
                indices.append(index)
            for i, a in enumerate(list(args) + list(kwargs.values())):
                if i in (at_param, at_grad):
                    continue
                for t in a if isinstance(a, list) else [a]:
                    if isinstance(t, paddle.Tensor) and id(t) not in state:
                        raise _NotReplayable(f"{name} took a tensor the optimizer does not hold")
            self.calls.append(
                (fn, list(args), dict(kwargs), indices if merged else indices[0], at_grad)
            )
        if len(done) != len(updated):
            raise _NotReplayable("some parameters were updated by other means")

    def replay(self, opt: Any) -> bool:
        """The recorded update, where the step would take the recorded path; False (and
        nothing done) where it would not."""
        if opt._learning_rate is not self.lr or opt._parameter_list is not self.params:
            return False
        if len(self.params) != len(self.pattern) or opt._master_weights is not self.masters:
            return False
        aux = opt._auxiliary_vars
        if aux:
            found_inf = aux.get("found_inf")
            if found_inf is not None and found_inf is not False:
                return False
        if opt._grad_clip is not self.clip:
            return False
        grads = []
        for p, takes in self.pattern:
            g = None if p.stop_gradient else p._grad_ivar()
            if (g is not None) is not takes:
                return False
            if g is not None:
                grads.append(g)
        had_grad = core._has_grad()
        core._set_has_grad(False)  # as Paddle's step runs: under no_grad
        try:
            if self.clip is not None:
                # (as Paddle's step calls it, once, on the (parameter, gradient) pairs)
                out = self.clip(list(zip(self.updated, grads)))
                if len(out) != len(grads) or any(
                    q is not p for (q, _), p in zip(out, self.updated)
                ):
                    return False
                grads = [g for _, g in out]
            for fn, args, kwargs, index, at in self.calls:
                if index is None:
                    args[at] = float(opt._learning_rate())
                    fn(*args, **kwargs)
                    continue
                if type(index) is int:
                    args[at] = grads[index]
                else:
                    args[at] = [grads[i] for i in index]
                fn(*args, **kwargs)
                args[at] = None  # (the gradient is not kept past the step)
        finally:
            core._set_has_grad(had_grad)
        core._set_warmup(False)
        return True


def _clipped(recording: _Recording, updated: list, grads: list) -> list:
    """The gradients the update kernels take: what the clip returned for each updated
    parameter, where it was given each one's gradient, in order."""
    if recording.clipped is None:
        raise _NotReplayable("its gradient clip was not called")
    given, out = recording.clipped
    if len(given) != len(updated) or len(out) != len(updated):
        raise _NotReplayable("its gradient clip took or returned other parameters")
    for (p, g), (q, _), want, grad in zip(given, out, updated, grads):
        if p is not want or q is not want or not g._is_shared_buffer_with(grad):
            raise _NotReplayable("its gradient clip took or returned other parameters")
    return [g for _, g in out]


def _state_tensors(opt: Any) -> Dict[int, Any]:
    """The tensors an optimizer holds across steps, by id."""
    found: Dict[int, Any] = {}
    for per_param in getattr(opt, "_accumulators", {}).values():
        for t in per_param.values():
            found[id(t)] = t
    for t in getattr(opt, "_learning_rate_map", {}).values():
        found[id(t)] = t
    for t in getattr(opt, "_master_weights", {}).values():
        found[id(t)] = t
    for attr in _MULTI_TENSOR_STATE:
        _collect(getattr(opt, attr, None), found, depth=3)
    return found


def _collect(value: Any, found: Dict[int, Any], depth: int) -> None:
    if isinstance(value, paddle.Tensor):
        found[id(value)] = value
    elif depth and isinstance(value, dict):
        for v in value.values():
            _collect(v, found, depth - 1)
    elif depth and isinstance(value, (list, tuple)):
        for v in value:
            _collect(v, found, depth - 1)


def _lr_set(opt: Any, fn: Callable, args: tuple, kwargs: dict, state: Dict[int, Any]):
    lr_tensors = {id(t) for t in opt._learning_rate_map.values()}
    scheduler = opt._learning_rate
    if (
        kwargs
        or len(args) <= _LR_VALUE
        or id(args[0]) not in lr_tensors
        or not isinstance(scheduler, paddle.optimizer.lr.LRScheduler)
        or args[_LR_VALUE] != float(scheduler())
    ):
        raise _NotReplayable(f"{LR_SET} set a tensor other than the scheduler's learning rate")
    return (fn, list(args), {}, None, _LR_VALUE)


class UpdateReplay:
    """One optimizer's ``step()``: recorded, then replayed where it can be."""

    def __init__(self) -> None:
        self.plan: Optional[_Plan] = None
        self.recordings = 0
        self.failed_recordings = 0
        self.replayed = 0
        #: why the step is not replayed (None while it is, or may yet be)
        self.refused: Optional[str] = None
        #: why the last recording could not be replayed, where it may yet be
        self.last_reason: Optional[str] = None

    def step(self, fn: Callable, opt: Any) -> Any:
        plan = self.plan
        if plan is not None:
            if plan.replay(opt):
                self.replayed += 1
                return None
            self.plan = None  # what decided the path changed: record it again
        if self.refused is not None:
            return fn(opt)
        if self.recordings >= MAX_RECORDINGS:
            self.refused = f"what decides its path changed {self.recordings} times"
            return fn(opt)
        if sys.getprofile() is not None:  # (a profiler of the user's: not ours to replace)
            return fn(opt)
        return self._record(fn, opt)

    def _record(self, fn: Callable, opt: Any) -> Any:
        if not opt._learning_rate_map:
            return fn(opt)  # the first step: it makes the learning rate and accumulators
        self.recordings += 1
        params = opt._parameter_list
        if params is None or opt._param_groups is not params:
            self.refused = "its parameters are in groups"
            return fn(opt)
        taking_part, grads = [], []
        for p in params:
            g = None if p.stop_gradient else p._grad_ivar()
            taking_part.append(g is not None)
            if g is not None:
                grads.append(g)
        recording = _Recording()
        result = recording.run(fn, opt)
        if recording.unexpected:
            # (the first step also creates the accumulators: not a reason to give up)
            names = sorted(set(recording.unexpected))
            self.last_reason = f"it calls {', '.join(names[:4])}"
            self.failed_recordings += 1
            if self.failed_recordings >= MAX_FAILED_RECORDINGS:
                self.refused = self.last_reason
            return result
        try:
            self.plan = _Plan(opt, taking_part, recording, grads)
        except _NotReplayable as e:
            self.refused = str(e)
        return result

    def describe(self) -> str:
        if self.plan is not None:
            counts = dict(self.plan.counts)
            rate = " and the scheduler's rate" if counts.pop(LR_SET, 0) else ""
            kernels = ", ".join(f"{n} x{c}" for n, c in sorted(counts.items()))
            clip = f", after its {type(self.plan.clip).__name__}" if self.plan.clip else ""
            return f"its update kernels alone ({kernels}){rate}{clip}"
        if self.refused is not None:
            return f"Paddle's own step(): {self.refused}"
        if self.last_reason is not None:
            return f"Paddle's own step() ({self.last_reason}), recorded again on a later call"
        return "Paddle's own step() until its update kernels are recorded"


#: one replay per optimizer, whichever graphs step it
_REPLAYS: weakref.WeakKeyDictionary[Any, UpdateReplay] = weakref.WeakKeyDictionary()


def replay_of(opt: Any) -> Optional[UpdateReplay]:
    """The replay of ``opt.step()``, where one was made (``describe()`` says how it runs)."""
    return _REPLAYS.get(opt)


class ReplayedStep:
    """A training call ``opt.step()`` (``fn(opt)``) that runs as its update kernels once
    they are recorded."""

    __slots__ = ("fn", "replay")

    def __init__(self, fn: Callable, replay: UpdateReplay):
        self.fn = fn
        self.replay = replay

    def __call__(self, opt: Any) -> Any:
        return self.replay.step(self.fn, opt)


def replayed(fn: Callable, args: tuple, kwargs: dict) -> Callable:
    """What a training call ``fn(*args, **kwargs)`` runs: ``fn`` itself, or where it is
    the ``step()`` of an optimizer whose update can be replayed, a ``ReplayedStep``."""
    if kwargs or len(args) != 1 or getattr(fn, "__name__", None) != "step":
        return fn
    opt = args[0]
    if type(opt) not in _classes() or getattr(type(opt), "step", None) is not fn:
        return fn
    replay = _REPLAYS.get(opt)
    if replay is None:
        replay = _REPLAYS[opt] = UpdateReplay()
    return ReplayedStep(fn, replay)


__all__ = [
    "MAX_FAILED_RECORDINGS",
    "MAX_RECORDINGS",
    "ReplayedStep",
    "UpdateReplay",
    "replay_of",
    "replayed",
]
