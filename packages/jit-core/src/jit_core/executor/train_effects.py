"""Training calls while a graph is recorded (``variables.training``): ``loss.backward()``,
``opt.step()``, ``opt.clear_grad()``, ``scheduler.step()``, a ``GradScaler``'s calls.

Each becomes an ``Effect`` of the graph instead of a graph break: the graph's operations
run first, then its effects, in the order the code made them, as Paddle's own calls on the
graph's outputs and on the objects the capture found (identity-guarded). A step
``loss = net(x).mean(); loss.backward(); opt.step(); opt.clear_grad()`` is one graph.

Nothing of them runs at capture: they would change the model. So once a graph has an
effect, what follows in the same frame must not depend on what the effect changed:

- a further tensor operation would read parameters the update changed, or gradients the
  backward wrote, as the capture cannot know them: the graph ends before it (a break);
- an attribute of an object an effect changed (the optimizer's learning rate after the
  scheduler's step) would be the value before the call: read after the graph instead.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Set

import paddle

from ..errors import DYNAMIC_VALUE, SIDE_EFFECT, Unsupported
from ..runtime import guards
from ..variables.base import VariableTracker
from ..variables.constant import ConstantVariable
from ..variables.containers import BaseListVariable, TupleVariable
from ..variables.tensor import TensorVariable
from ..variables.training import EffectValueVariable


class EffectInput(NamedTuple):
    """An argument of an effect that is a tensor of the graph: its position among the
    effects' tensors (``TrainingEffects.effect_tensors``)."""

    position: int


class EffectResult(NamedTuple):
    """An argument of an effect that an earlier effect returned (``scaler.scale(loss)``):
    that effect's position."""

    position: int


class Effect(NamedTuple):
    """One training call: ``fn(*args, **kwargs)``, with ``EffectInput`` arguments taken
    from the graph's outputs and ``EffectResult`` ones from earlier effects."""

    fn: Callable
    args: tuple
    kwargs: Dict[str, Any]
    #: how the code wrote it, for explain(): ``opt.step()``
    text: str


class TrainingEffects:
    """The effects half of ``OutputGraph`` (a mixin; it reads ``guards``)."""

    guards: Any

    def _init_effects(self) -> None:
        self.effects: List[Effect] = []
        #: the tensors the effects take, in order: outputs of the graph after the frame's
        self.effect_tensors: List[TensorVariable] = []
        #: where each of ``effect_tensors`` is among the graph's outputs (``set_outputs``)
        self.effect_outputs: List[int] = []
        #: ids of the objects an effect changes (their attributes are not read after it)
        self._changed: Set[int] = set()

    def record_effect(
        self,
        tx,
        fn: Callable,
        args: List[VariableTracker],
        kwargs: Dict[str, VariableTracker],
        text: str,
        returns_value: bool = False,
    ) -> VariableTracker:
        """``fn(*args, **kwargs)`` run after the graph's operations (a method's object is
        its first argument: what it changes). Returns what the call returns to the code:
        None, or with ``returns_value`` its result, which other effects may take."""
        effect = Effect(
            fn,
            tuple(self._effect_argument(a, text) for a in args),
            {k: self._effect_argument(v, text) for k, v in kwargs.items()},
            text,
        )
        self.effects.append(effect)
        for obj in list(args) + list(kwargs.values()):
            value = getattr(obj, "value", None)
            if value is not None and not isinstance(obj, (TensorVariable, ConstantVariable)):
                self._changed.add(id(value))
                # the scheduler an optimizer reads its learning rate from changes with it
                lr = getattr(value, "_learning_rate", None)
                if lr is not None and not isinstance(lr, (int, float)):
                    self._changed.add(id(lr))
        if returns_value:
            return EffectValueVariable(len(self.effects) - 1, text)
        return ConstantVariable(None)

    def _effect_argument(self, var: VariableTracker, text: str) -> Any:
        if isinstance(var, EffectValueVariable):
            return EffectResult(var.index)
        if isinstance(var, TensorVariable):
            for i, t in enumerate(self.effect_tensors):
                if t.node is var.node:
                    return EffectInput(i)
            self.effect_tensors.append(var)
            return EffectInput(len(self.effect_tensors) - 1)
        if isinstance(var, BaseListVariable):
            items = [self._effect_argument(v, text) for v in var.items]
            return tuple(items) if isinstance(var, TupleVariable) else items
        if var.is_python_constant():
            return var.as_python_constant()
        value = getattr(var, "value", None)
        if value is not None and var.source is not None:
            # the object the code passes: the same one on every call of this entry
            self.guards.add(var.source, guards.ID_MATCH, value)
            return value
        raise Unsupported(
            f"{text}: its argument {var.describe()} is not a tensor, a constant or an "
            "object from outside the frame",
            category=DYNAMIC_VALUE,
        )

    def refuse_after_effects(self, what: str) -> None:
        """Raise where a graph that has effects would record ``what`` after them."""
        if self.effects:
            raise Unsupported(
                f"{what} after {self.effects[-1].text}: the graph ends with its training "
                "calls, and what follows them reads what they changed",
                category=SIDE_EFFECT,
            )

    def runs_backward(self) -> bool:
        """Whether an effect computes gradients through the graph's outputs."""
        backwards = (paddle.Tensor.backward, getattr(paddle.autograd, "backward", None))
        return any(e.fn in backwards for e in self.effects)

    def changed_by_effect(self, obj: Any) -> bool:
        """Whether an effect of this graph changes ``obj`` (its attributes then differ
        from what the capture would read)."""
        return id(obj) in self._changed


__all__ = ["Effect", "EffectInput", "EffectResult", "TrainingEffects"]
