"""A compiled graph with training calls: its operations, then its effects (``loss.backward()``,
``opt.step()``, ``opt.clear_grad()`` ...: ``executor.train_effects``), in the order the code
made them, as Paddle's own calls (an optimizer's ``step()`` as the update kernels Paddle's
code calls, once recorded: ``update_kernels``)."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

from ..executor.train_effects import Effect, EffectInput, EffectResult
from .update_kernels import ReplayedStep, replayed


def _resolve(arg: Any, outs: Sequence[Any], results: List[Any]) -> Any:
    if type(arg) is EffectInput:
        return outs[arg.position]
    if type(arg) is EffectResult:
        return results[arg.position]
    if type(arg) in (list, tuple):
        return type(arg)(_resolve(a, outs, results) for a in arg)
    return arg


#: argument kinds an effect's call resolves first
_RESOLVED = (EffectInput, EffectResult, list, tuple)


class TrainingStep:
    """Calls ``graph`` (what the backend built), then each effect on the graph's outputs;
    returns the outputs the frame reads (the first ``n_outputs``: the tensors only the
    effects take follow them). ``positions``: where each effect tensor
    (``EffectInput``) is among the outputs."""

    __slots__ = ("graph", "effects", "n_outputs", "positions", "_plain")

    def __init__(
        self, graph: Callable, effects: List[Effect], n_outputs: int, positions: List[int]
    ):
        self.graph = graph
        self.effects = [e._replace(fn=replayed(e.fn, e.args, e.kwargs)) for e in effects]
        self.n_outputs = n_outputs
        self.positions = list(positions)
        #: effects whose arguments need no resolving, with them as they are
        self._plain = [
            not e.kwargs and all(type(a) not in _RESOLVED for a in e.args) for e in self.effects
        ]

    def __call__(self, *args):
        outs = self.graph(*args)
        tensors = [outs[i] for i in self.positions]
        results: List[Any] = []
        for effect, plain in zip(self.effects, self._plain):
            if plain:
                results.append(effect.fn(*effect.args))
            else:
                results.append(
                    effect.fn(
                        *[_resolve(a, tensors, results) for a in effect.args],
                        **{k: _resolve(v, tensors, results) for k, v in effect.kwargs.items()},
                    )
                )
        return outs if len(outs) == self.n_outputs else outs[: self.n_outputs]

    def describe_effects(self) -> List[str]:
        """Each effect as the code wrote it, with how an optimizer's step runs."""
        return [
            f"{e.text}: {e.fn.replay.describe()}" if type(e.fn) is ReplayedStep else e.text
            for e in self.effects
        ]

    @property
    def built(self) -> Callable:
        """What the backend built (explain() reads what it says of itself)."""
        return self.graph

    def describe(self) -> Optional[str]:
        """What the backend's build says of itself (explain() lists the effects apart)."""
        inner = getattr(self.graph, "describe", None)
        return inner() if callable(inner) else None

    @property
    def kernel_code(self) -> Optional[str]:
        return getattr(self.graph, "kernel_code", None)


__all__ = ["TrainingStep"]
