"""Lists, dicts and layer attributes from outside the frame that the captured code changes.

Eager Python mutates such a container where the code says so; the capture instead keeps
the new contents in the container's tracker and the generated code gives the real object
those contents once, after the graph ran (at the frame's return, or just before the
instruction a graph break runs in Python). No code runs between the mutation and that
point that could see the difference: anything that could (a call the capture cannot
follow, a print, a branch on a tensor) is itself a graph break, which writes back first.

One object must be one tracker, whichever path the code reaches it by (``self.cache`` and
a local holding the same list): the capture keeps a tracker per object identity here, and
the guards pin what it relied on. Two paths that led to one object must lead to one object
again, and a mutated container must not be the same object as another container the
capture read as a different one.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, cast

import paddle

from ..runtime.guards import LAYER_STORES
from ..sources import Source
from ..variables.base import VariableTracker
from ..variables.containers import extend_list, replace_dict, replace_list


class AttributeWriteBack(VariableTracker):
    """``layer.<name> = value`` of the captured code, written back as a container's new
    contents are: the same point in the generated code, ``setattr`` on the real object."""

    #: the layer's (``LayerVariable.store_attr`` stores only on a layer that has a source)
    source: Source

    def __init__(self, obj: VariableTracker, name: str, value: VariableTracker, pinned: Any = None):
        assert obj.source is not None
        super().__init__(obj.source)
        self.obj = obj
        self.name = name
        self.value = value
        #: the object, where an identity guard holds it: the generated code sets the
        #: attribute on it instead of walking ``self.decoder.layers[0].attn`` again
        #: (``Layer.__getattr__`` and ``LayerList.__getitem__`` are Python: 4-8 us)
        self.pinned = pinned

    def python_type(self) -> type:
        return AttributeWriteBack  # never taken for one of the containers

    def describe(self) -> str:
        return f"{self.source.name()}.{self.name} = {self.value.describe()}"

    def build_new(self, cg) -> None:
        cg(self.value)

    def written_back_by(self) -> Callable[[Any, Any], None]:
        return attribute_setter(self.name)


_SETTERS: Dict[str, Callable[[Any, Any], None]] = {}

#: values whose identity is their value for the store: storing the one a layer holds
#: again changes nothing
_PLAIN = (type(None), bool, int, float, str)


def _already_set(obj: Any, name: str, value: Any) -> bool:
    """Whether ``setattr(obj, name, value)`` would change nothing: a layer whose instance
    dict holds this very value of a plain type under ``name``, which no data descriptor
    of its class takes over and none of its parameter, sublayer and buffer dicts holds.

    Paddle's ``Layer.__setattr__`` is Python (3-5 us): a flag a model's ``forward``
    stores on its sublayers on every call (PaddleNLP's BART stores ``need_weights`` on
    four) would cost that per call, where it almost always holds the value already.
    """
    cls = type(obj)
    if type(value) not in _PLAIN or cls.__setattr__ is not paddle.nn.Layer.__setattr__:
        return False
    d = obj.__dict__
    if d.get(name, d) is not value:
        return False
    for store in LAYER_STORES:
        if name in d.get(store, ()):
            return False
    # (not guards' _read_through_dict: its walk of the class's MRO costs as much as the
    # store it would save; a data descriptor is found on the class all the same)
    on_class = getattr(cls, name, None)
    return on_class is None or not hasattr(type(on_class), "__set__")


def attribute_setter(name: str) -> Callable[[Any, Any], None]:
    """``set_<name>(obj, value)``: one function per attribute name, named so in dumps."""
    fn = _SETTERS.get(name)
    if fn is None:

        def fn(obj: Any, value: Any) -> None:
            if not _already_set(obj, name, value):
                setattr(obj, name, value)

        fn.__name__ = fn.__qualname__ = f"set_{name}"
        _SETTERS[name] = fn
    return fn


def describe(tracker: VariableTracker) -> str:
    """How an outside container is written back, in words (``explain()``)."""
    if isinstance(tracker, AttributeWriteBack):
        return f"{tracker.describe()}: set after the graph, as the code stored it"
    # a list or dict from outside (only those are marked mutated: ``mutate_outside``)
    fn = cast(Any, tracker).written_back_by()
    if fn is extend_list:
        how = "what the code appended is appended (its items and length were not read)"
    else:
        how = f"it gets its new contents ({tracker.describe()})"
    return f"{cast(Source, tracker.source).name()}: {how}"


class SideEffects:
    """The outside containers of one capture: which tracker stands for which object, and
    which of them the captured code mutated (in the order it first did)."""

    def __init__(self, guards):
        self._guards = guards
        #: id(object) -> (object, tracker): the object is held so that its id stays its own
        self._outside: Dict[int, Tuple[Any, VariableTracker]] = {}
        self.mutated: List[VariableTracker] = []
        #: (id of the object, attribute name) -> its write-back, holding the value stored
        self._attributes: Dict[Tuple[int, str], AttributeWriteBack] = {}

    def known(self, value: Any, source: Optional[Source]) -> Optional[VariableTracker]:
        """The tracker already made for ``value`` (read again, maybe by another path), or
        None. Reached by another path, the guard pins that both paths lead to one object."""
        held = self._outside.get(id(value))
        if held is None:
            return None
        tracker = held[1]
        if source is not None and tracker.source is not None:
            if source.name() != tracker.source.name():
                self._guards.add_identity(source, tracker.source, same=True)
        return tracker

    def register(self, value: Any, tracker: VariableTracker) -> None:
        """``tracker`` stands for ``value``, a list or dict from outside the frame."""
        self._outside[id(value)] = (value, tracker)
        for m in self.mutated:
            self._keep_apart(m, tracker)

    def mark_mutated(self, tracker: VariableTracker) -> None:
        """The captured code changes ``tracker``'s object: its contents are written back."""
        if any(m is tracker for m in self.mutated):
            return
        self.mutated.append(tracker)
        for _, other in self._outside.values():
            if other is not tracker:
                self._keep_apart(tracker, other)

    def store_attribute(self, obj: VariableTracker, value: Any, name: str, new: VariableTracker):
        """``obj.<name> = new`` (``value`` is the real object): later reads in the capture
        see ``new``, and the generated code sets it after the graph."""
        key = (id(value), name)
        held = self._attributes.get(key)
        if held is not None:
            held.value = new
            return
        pinned = self._guards.pinned_object(obj.source) if obj.source is not None else None
        pinned = pinned if pinned is value else None
        held = self._attributes[key] = AttributeWriteBack(obj, name, new, pinned)
        self.mutated.append(held)

    def stored_attribute(self, value: Any, name: str) -> Optional[VariableTracker]:
        """What the captured code stored in ``value.<name>``, or None."""
        held = self._attributes.get((id(value), name))
        return None if held is None else held.value

    def _keep_apart(self, mutated: VariableTracker, other: VariableTracker) -> None:
        # the capture treated them as two objects: a later call that passes one object
        # twice would see the mutation through the other, which the graph did not model
        if mutated.python_type() is not other.python_type():
            return
        if mutated.source is not None and other.source is not None:
            self._guards.add_identity(mutated.source, other.source, same=False)


__all__ = [
    "AttributeWriteBack",
    "SideEffects",
    "attribute_setter",
    "describe",
    "extend_list",
    "replace_dict",
    "replace_list",
]
