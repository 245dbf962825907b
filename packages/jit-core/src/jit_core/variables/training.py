"""The calls of a training step that the capture keeps in the graph as its *training
calls*: ``loss.backward()``, an optimizer's ``step()``, ``clear_grad()`` and
``minimize()``, a learning-rate scheduler's ``step()``, a ``GradScaler``'s ``step()``,
``update()``, ``unscale_()`` and ``minimize()``, a parameter's ``clear_grad()``.

They run where the step runs them, as Paddle's own code, in order, right after the
graph's operations (``runtime.train_step``): the gradients they compute and the updates
they make are eager Paddle's, bit for bit. What the capture needs to know of them is
only which objects they change (their state is not read again in the same graph:
``TrainingEffects``)."""

from __future__ import annotations

import types
from typing import Any, Optional, Tuple

import paddle

from ..errors import SIDE_EFFECT, Unsupported
from .base import VariableTracker

#: (the base class, the Paddle modules its methods come from, the method names)
_KINDS: Tuple[Tuple[str, Tuple[str, ...], frozenset], ...] = (
    (
        "optimizer",
        ("paddle.optimizer",),
        frozenset({"step", "clear_grad", "clear_gradients", "minimize"}),
    ),
    ("scheduler", ("paddle.optimizer.lr",), frozenset({"step"})),
    ("scaler", ("paddle.amp",), frozenset({"scale", "step", "update", "unscale_", "minimize"})),
)

#: training calls whose result the code uses (``scaler.scale(loss).backward()``): a value
#: of the effects, which only other training calls take (``EffectValueVariable``)
RETURN_VALUES = frozenset({"scale"})


def _bases() -> dict:
    return {
        "optimizer": paddle.optimizer.Optimizer,
        "scheduler": paddle.optimizer.lr.LRScheduler,
        "scaler": paddle.amp.AmpScaler,
    }


def training_call(fn: Any, obj: Any) -> Optional[str]:
    """``"optimizer"``, ``"scheduler"`` or ``"scaler"`` when ``fn(obj, ...)`` is Paddle's own
    implementation of one of the training calls of that kind of object; None otherwise (a
    subclass's own ``step`` is inlined like any method, and reaches Paddle's through
    ``super()``)."""
    if not isinstance(fn, types.FunctionType):
        return None
    module = getattr(fn, "__module__", "") or ""
    bases = _bases()
    for kind, modules, names in _KINDS:
        if fn.__name__ in names and module.startswith(modules) and isinstance(obj, bases[kind]):
            return kind
    return None


def is_training_object(obj: Any) -> bool:
    """An optimizer, a learning-rate scheduler or a loss scaler of Paddle's (a scheduler
    is callable, but it is an object whose methods are training calls, not an operator)."""
    return isinstance(obj, tuple(_bases().values()))


class EffectValueVariable(VariableTracker):
    """What a training call returned (``scaler.scale(loss)``): it exists only when the
    effects run, after the graph, so it is only passed on to other training calls
    (``.backward()`` on it, ``scaler.minimize(opt, scaled)``)."""

    def __init__(self, index: int, text: str):
        super().__init__(None)
        #: which effect's result (``executor.train_effects.EffectResult``)
        self.index = index
        self.text = text

    def describe(self) -> str:
        return f"the result of {self.text}"

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in TENSOR_CALLS:
            from .functions import BoundMethodVariable

            return BoundMethodVariable(self, name)
        raise Unsupported(
            f"attribute {name!r} of {self.describe()}, which exists only after the graph",
            category=SIDE_EFFECT,
        )

    def call_method(self, tx, name: str, args, kwargs) -> VariableTracker:
        if name not in TENSOR_CALLS:
            raise Unsupported(
                f"method {name!r} of {self.describe()}, which exists only after the graph",
                category=SIDE_EFFECT,
            )
        fn = getattr(paddle.Tensor, name)
        text = f"{self.text}.{name}()"
        return tx.output.record_effect(tx, fn, [self] + list(args), dict(kwargs), text)


#: tensor methods that are training calls (on a parameter, or any leaf tensor)
TENSOR_CALLS = frozenset({"backward", "clear_grad", "clear_gradient"})


def is_autograd_backward(fn: Any) -> bool:
    """``paddle.autograd.backward(tensors, grad_tensors, retain_graph)``."""
    autograd = getattr(paddle, "autograd", None)
    return fn is getattr(autograd, "backward", None)


__all__ = [
    "RETURN_VALUES",
    "EffectValueVariable",
    "TENSOR_CALLS",
    "is_autograd_backward",
    "is_training_object",
    "training_call",
]
