"""Lists and dicts from outside the frame that the captured code mutates.

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

from typing import Any, Dict, List, Optional, Tuple

from ..sources import Source
from ..variables.base import VariableTracker


def replace_list(target: list, contents: list) -> None:
    """What the generated code calls to give an outside list its new contents: the same
    object (other references to it see the change), as eager's mutation leaves it."""
    target[:] = contents


def extend_list(target: list, appended: list) -> None:
    """For an outside list the captured code only appended to (it never read its items or
    length, so no guard pins them): what it appended, after whatever the list holds."""
    target.extend(appended)


def replace_dict(target: dict, contents: dict) -> None:
    """As ``replace_list``: the keys in the order the captured code left them, which is
    the order eager's item assignments, deletions and updates leave."""
    if list(target.keys()) == list(contents.keys()):
        target.update(contents)
    else:
        target.clear()
        target.update(contents)


def describe(tracker: VariableTracker) -> str:
    """How an outside container is written back, in words (``explain()``)."""
    fn = tracker.written_back_by()
    if fn is extend_list:
        how = "what the code appended is appended (its items and length were not read)"
    else:
        how = f"it gets its new contents ({tracker.describe()})"
    return f"{tracker.source.name()}: {how}"


class SideEffects:
    """The outside containers of one capture: which tracker stands for which object, and
    which of them the captured code mutated (in the order it first did)."""

    def __init__(self, guards):
        self._guards = guards
        #: id(object) -> (object, tracker): the object is held so that its id stays its own
        self._outside: Dict[int, Tuple[Any, VariableTracker]] = {}
        self.mutated: List[VariableTracker] = []

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

    def _keep_apart(self, mutated: VariableTracker, other: VariableTracker) -> None:
        # the capture treated them as two objects: a later call that passes one object
        # twice would see the mutation through the other, which the graph did not model
        if mutated.python_type() is not other.python_type():
            return
        if mutated.source is not None and other.source is not None:
            self._guards.add_identity(mutated.source, other.source, same=False)


__all__ = ["SideEffects", "describe", "extend_list", "replace_dict", "replace_list"]
