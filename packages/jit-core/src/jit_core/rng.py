"""The user's random stream: whatever jit-core runs for itself (the capture's example
values, guard self-tests, shape propagation, export checks, a backend's build and its
timing runs) runs under ``preserved()``, so that the first compiled call draws exactly
the numbers eager Paddle would have drawn under the same ``paddle.seed``.

Three kinds of state are saved and restored: the CPU generator, every generator of the
current device (CUDA, XPU, custom devices), and, where a program uses it, the named
states of Paddle's model-parallel ``RNGStatesTracker`` (``get_rng_state_tracker()``),
with the index of the generator state that is current."""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator, Optional, Tuple

import paddle

#: the module of Paddle's RNG-state tracker; read only where the program imported it
#: (importing it would import paddle.distributed)
_TRACKER_MODULE = "paddle.distributed.fleet.layers.mpu.random"


def _on_device() -> bool:
    """Whether the current place is a device (CUDA, XPU, a custom one), not the CPU."""
    return not isinstance(paddle.framework._current_expected_place_(), paddle.CPUPlace)


def _tracker() -> Any:
    module = sys.modules.get(_TRACKER_MODULE)
    return module.get_rng_state_tracker() if module is not None else None


class RngState:
    """One snapshot of every generator state jit-core can disturb."""

    __slots__ = ("cpu", "device_states", "tracker")

    def __init__(self) -> None:
        # (the CPU generator itself: paddle.get_rng_state("cpu") fails on Paddle 3.0)
        self.cpu = paddle.base.core.default_cpu_generator().get_state()
        # the current device's generators, every one of them (no device: the CPU's)
        self.device_states = paddle.get_rng_state() if _on_device() else None
        tracker = _tracker()
        self.tracker: Optional[Tuple[Any, dict, dict, Any]] = None
        if tracker is not None and tracker.states_:
            self.tracker = (
                tracker,
                dict(tracker.states_),
                tracker.get_states_tracker(),
                paddle.incubate.get_rng_state(use_index=True),
            )

    def restore(self) -> None:
        if self.tracker is not None:
            tracker, indices, states, current = self.tracker
            tracker.states_ = dict(indices)
            tracker.set_states_tracker(states)
            paddle.incubate.set_rng_state(current, use_index=True)
        if self.device_states is not None:
            paddle.set_rng_state(self.device_states)
        paddle.base.core.default_cpu_generator().set_state(self.cpu)


@contextlib.contextmanager
def preserved() -> Iterator[RngState]:
    """Runs the block, then puts every generator back as it was on entry, also when the
    block raises: what the block draws is not drawn from the user's stream. The block
    gets the state it started from."""
    state = RngState()
    try:
        yield state
    finally:
        state.restore()


def _position() -> Optional[tuple]:
    """Where the generators stand, as a value that compares equal exactly when they stand
    at the same place (the engines' whole state); None where a model-parallel tracker
    is in use, whose named states are not followed."""
    tracker = _tracker()
    if tracker is not None and tracker.states_:
        return None
    cpu = paddle.base.core.default_cpu_generator().get_state().__getstate__()
    if not _on_device():
        return (cpu,)
    return (cpu,) + tuple(s.__getstate__() for s in paddle.get_rng_state())


class Draws:
    """The random operations a capture ran on its example values, in order, and whether
    the generators moved through them alone: then the capture's results are the ones
    eager Paddle draws from the same state, and ``end()`` is where eager leaves the
    generators. Where anything else drew (a layer made in the frame, a retried inline),
    or the generators cannot be followed, ``end()`` is None."""

    __slots__ = ("nodes", "_last")

    def __init__(self) -> None:
        #: the graph's random nodes, in the order their examples ran
        self.nodes: list = []
        self._last = _position()

    def before(self) -> None:
        """Called before an operation that may draw runs."""
        if self._last is not None and _position() != self._last:
            self._last = None

    def after(self, node: Any) -> None:
        """Called after a random operation's example run, with its node."""
        if self._last is not None:
            self.nodes.append(node)
            self._last = _position()

    def end(self) -> Optional[RngState]:
        """Where the capture left the generators, if only its random operations moved them."""
        if self._last is None or _position() != self._last:
            return None
        return RngState()
