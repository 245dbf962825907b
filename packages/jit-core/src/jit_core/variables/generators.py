"""Iterators whose items come from running code: generator expressions, generator
functions called in the frame, ``map`` and ``filter``.

CPython runs that code lazily, one item per ``next()``. The capture runs it when the
iterator is first consumed, as a whole, and keeps the items:

- consumed at once (unpacking, ``tuple(...)``, ``list(...)``, ``sum(...)``, ``"".join``...),
  nothing runs between two items in CPython either: exact whatever the code does;
- consumed step by step (a ``for`` loop, ``next()``, or through ``zip``/``enumerate``/
  ``map``, which CPython also steps lazily), the consumer runs between two items in
  CPython. Running every item first is exact only when the producing code has no side
  effects the consumer could see: it may run Paddle operations and pure Python, and
  change only the containers it makes itself. Anything else (a change of a container,
  a cell or a tensor from before, an in-place update, a yield inside a ``with`` block)
  raises ``Unsupported``, and the frame runs eagerly.

Any error or unsupported operation while the code runs raises ``Unsupported`` too, so the
frame runs eagerly and Python raises the error itself. Such an iterator cannot be rebuilt
at a graph break (its code has not run): a frame that would break with one alive runs
eagerly instead.
"""

from __future__ import annotations

import types
from typing import Callable, List, Optional

from ..errors import DYNAMIC_VALUE, RAISES, SIDE_EFFECT, Unsupported
from .base import VariableTracker
from .containers import ListIteratorVariable


class LazyIteratorVariable(VariableTracker):
    """A generator, ``map`` or ``filter`` made during the capture, not run yet."""

    def __init__(
        self, what: str, produce: Callable[..., List[VariableTracker]], pytype: type, tx=None
    ):
        super().__init__(None)
        self.what = what
        #: produce(tx) -> every item, running the code in ``tx``
        self.produce = produce
        self.pytype = pytype
        self.forced: Optional[ListIteratorVariable] = None
        self.running = False
        #: how many containers of the frame had changed when it was made (see force)
        self.mutations_at_creation = _mutation_count(tx)

    def python_type(self) -> type:
        return self.pytype

    def describe(self) -> str:
        return self.what

    def truthy(self, tx) -> bool:
        return True

    def force(self, tx, stepwise: bool) -> ListIteratorVariable:
        """Run the code (once) and return the iterator over its items."""
        if self.forced is None:
            if self.running:
                raise Unsupported(f"{self.what} is already running (ValueError)", category=RAISES)
            if _mutation_count(tx) != self.mutations_at_creation:
                # a list iterator the code reads sees the change, when CPython runs it
                raise Unsupported(
                    f"a container of the frame changed between the creation of {self.what} "
                    "and its use",
                    category=SIDE_EFFECT,
                )
            self.running = True
            try:
                items = tx.run_producer(self.produce, self.what, stepwise)
            finally:
                self.running = False
            self.forced = ListIteratorVariable(items)
        return self.forced

    def next_item(self, tx) -> Optional[VariableTracker]:
        return self.force(tx, stepwise=True).next_item(tx)

    def unpack_var_sequence(self, tx) -> List[VariableTracker]:
        return self.force(tx, stepwise=False).unpack_var_sequence(tx)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        raise Unsupported(f"attribute {name!r} of {self.what}", category=DYNAMIC_VALUE)


def _mutation_count(tx) -> int:
    count = getattr(tx, "container_mutations", None)
    return count() if count is not None else 0


def generator(tx, code: types.CodeType, run: Callable[..., List[VariableTracker]]):
    """The generator object a call of a generator function (``code``) returns."""
    return LazyIteratorVariable(
        f"generator {getattr(code, 'co_qualname', code.co_name)}", run, types.GeneratorType, tx
    )


def map_iterator(tx, fn: VariableTracker, iterables: List[VariableTracker]):
    """``map(fn, *iterables)``: ``fn`` runs on the items when the map is consumed."""
    from .functions import lazy_items

    def produce(tx) -> List[VariableTracker]:
        seqs = [lazy_items(tx, it) for it in iterables]
        return [tx.call(fn, list(args), {}) for args in zip(*seqs)]

    return LazyIteratorVariable(f"map of {fn.describe()}", produce, map, tx)


def filter_iterator(tx, fn: VariableTracker, iterable: VariableTracker):
    """``filter(fn, iterable)`` (``fn`` None: the truthy items)."""
    from .functions import lazy_items

    keep_truthy = fn.is_python_constant() and fn.as_python_constant() is None

    def produce(tx) -> List[VariableTracker]:
        out = []
        for item in lazy_items(tx, iterable):
            test = item if keep_truthy else tx.call(fn, [item], {})
            if test.truthy(tx):
                out.append(item)
        return out

    return LazyIteratorVariable(f"filter of {fn.describe()}", produce, filter, tx)
