"""Indices a graph takes from its inputs, checked where the runtime does not check them.

Paddle raises on an index out of range (``gather``, ``index_select``, ``take_along_axis``,
``embedding``, ``x[index]``). A runtime that compiles the graph to native code (TVM) reads
out of bounds instead: garbage, not an error, where eager Paddle would have stopped. A
backend like that wraps what it built in ``IndexChecked``: each index of the graph is
followed back through the operations that only move values (slices, reshapes, transposes,
``concat``...) to the graph inputs it comes from, and a call whose inputs hold an index
outside ``[0, size)`` runs on Paddle's kernels instead, which raise Paddle's error where
eager raises it (and give eager's result where the value was not used after all, or a
negative index counts from the end).

An index computed otherwise (arithmetic on an input, say) cannot be checked before the
graph runs; ``unchecked`` lists such uses for ``explain()``.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

#: Paddle functions and tensor methods whose result holds the values of their first
#: argument (or of the tensors of a list there), only moved around
_MOVES_VALUES = {
    "getitem",
    "reshape",
    "squeeze",
    "unsqueeze",
    "flatten",
    "transpose",
    "expand",
    "expand_as",
    "broadcast_to",
    "tile",
    "clone",
    "contiguous",
    "concat",
    "stack",
    "detach",
}
#: functions whose result is an index into the axis they reduce: below that axis's size
_ARG_REDUCTIONS = {"argmax", "argmin"}


def _name(target: Any) -> str:
    if isinstance(target, str):
        return target
    if target is operator.getitem:
        return "getitem"
    return getattr(target, "__name__", "").lstrip("_")


def _shape(node) -> Optional[List[int]]:
    shape = getattr(node, "meta", {}).get("shape")
    if shape is None or any(not isinstance(d, int) or d < 0 for d in shape):
        return None  # unknown or dynamic
    return list(shape)


def _arg(node, i: int, name: str, default: Any = None) -> Any:
    if name in node.kwargs:
        return node.kwargs[name]
    return node.args[i] if len(node.args) > i else default


class _Origin:
    """Where an index's values come from: graph inputs (their positions), and values
    below ``bound`` made in the graph (an argmax's)."""

    def __init__(self, inputs: Set[int], bound: int = 0):
        self.inputs = inputs
        self.bound = bound


def _origin(node, positions: Dict[Any, int]) -> Optional[_Origin]:
    if node in positions:
        return _Origin({positions[node]})
    op = getattr(node, "op", None)
    if op not in ("call_function", "call_method"):
        return None
    name = _name(node.target)
    if name in _ARG_REDUCTIONS:
        shape = _shape(node.args[0])
        if shape is None:
            return None
        axis = _arg(node, 1, "axis")
        size = 1
        if axis is None:
            for d in shape:
                size *= d
        elif isinstance(axis, int) and -len(shape) <= axis < len(shape):
            size = shape[axis]
        else:
            return None
        return _Origin(set(), size)
    if name not in _MOVES_VALUES or not node.args:
        return None
    first = node.args[0]
    parts = list(first) if isinstance(first, (list, tuple)) else [first]
    found = _Origin(set())
    for part in parts:
        o = _origin(part, positions)
        if o is None:
            return None
        found.inputs |= o.inputs
        found.bound = max(found.bound, o.bound)
    return found


def _uses(gm) -> List[Tuple[str, Any, Optional[int]]]:
    """``(what, index node, size of the axis it indexes or None)`` of each index use."""
    out: List[Tuple[str, Any, Optional[int]]] = []
    for node in gm.graph.nodes:
        name = _name(node.target) if node.op in ("call_function", "call_method") else ""
        if node.op == "call_module":
            layer = getattr(gm, node.target, None)
            weight = getattr(layer, "weight", None)
            if type(layer).__name__ == "Embedding" and weight is not None and node.args:
                out.append(("Embedding", node.args[0], int(weight.shape[0])))
            continue
        if name in ("gather", "index_select", "take_along_axis") and len(node.args) >= 2:
            axis = _arg(node, 2, "axis", 0)
            shape = _shape(node.args[0])
            size = None
            if shape is not None and isinstance(axis, int) and -len(shape) <= axis < len(shape):
                size = shape[axis]
            out.append((name, node.args[1], size))
        elif name == "embedding" and len(node.args) >= 2:
            shape = _shape(node.args[1])
            out.append((name, node.args[0], shape[0] if shape else None))
        elif name == "getitem" and node.op == "call_function" and len(node.args) == 2:
            index = node.args[1]
            keys = list(index) if isinstance(index, tuple) else [index]
            shape = _shape(node.args[0])
            axes = _axes_of(keys, len(shape) if shape is not None else None)
            for key, axis in zip(keys, axes):
                if getattr(key, "op", None) is None:
                    continue
                if "int" not in _dtype_text(key):
                    continue  # a mask, or a number: not a tensor index
                size = shape[axis] if shape is not None and axis is not None else None
                out.append(("tensor index", key, size))
    return out


def _dtype_text(key) -> str:
    """The dtype a graph value was recorded with, as text ("" where none)."""
    return str(getattr(key, "meta", {}).get("dtype", ""))


def _is_mask(key) -> bool:
    return "bool" in _dtype_text(key)


def _consumed(key) -> Optional[int]:
    """How many axes of the data a key of ``x[...]`` (no ``None`` among them) indexes,
    None where that is not known."""
    if _is_mask(key):
        mask = getattr(key, "meta", {}).get("shape")
        return len(mask) if mask is not None else None
    return 1  # an int, a slice, an integer tensor


def _axes_of(keys: List[Any], rank: Optional[int]) -> List[Optional[int]]:
    """The axis of the data each key of ``x[k0, k1, ...]`` indexes, None where it cannot
    be told: keys before an ``...`` count from the first axis, keys after it from the
    last, a mask takes as many as it has dimensions. A key after a ``None`` (a new axis)
    is not told at all: Paddle applies a tensor index there to other axes than NumPy
    does, and 3.0 and 3.3 to different ones (``y[:, None, i]``)."""
    axes: List[Optional[int]] = [None] * len(keys)
    ellipsis = next((i for i, k in enumerate(keys) if k is Ellipsis), len(keys))
    first_none = next((i for i, k in enumerate(keys) if k is None), len(keys))
    at: Optional[int] = 0
    for i in range(min(ellipsis, first_none)):
        axes[i] = at
        n = _consumed(keys[i])
        at = at + n if at is not None and n is not None else None
    if rank is None or first_none < len(keys):
        return axes
    end: Optional[int] = rank
    for i in range(len(keys) - 1, ellipsis, -1):
        n = _consumed(keys[i])
        end = end - n if end is not None and n is not None else None
        axes[i] = end
    return axes


def plan(gm) -> Tuple[List[Tuple[int, int]], bool, List[str]]:
    """``(checks, always, unchecked)``: ``(input position, size)`` pairs to check before
    each run; ``always`` when an index made in the graph may exceed what it indexes (the
    graph then runs on Paddle's kernels every time); the uses that cannot be checked."""
    positions = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    checks: Dict[int, int] = {}
    always = False
    unchecked: List[str] = []
    for what, index, size in _uses(gm):
        origin = _origin(index, positions)
        if origin is None or size is None:
            unchecked.append(f"{what} with the index {getattr(index, 'name', index)}")
            continue
        if origin.bound > size:
            always = True
        for pos in origin.inputs:
            checks[pos] = min(size, checks.get(pos, size))
    return sorted(checks.items()), always, unchecked


class IndexChecked:
    """``run`` (what a backend built) behind the index checks of ``plan``; a call that
    fails them runs on ``on_paddle()``'s callable."""

    __slots__ = ("run", "_checks", "_always", "_make_paddle", "_paddle", "unchecked")

    def __init__(self, run: Callable, gm, on_paddle: Callable[[], Callable]):
        self.run = run
        self._checks, self._always, self.unchecked = plan(gm)
        self._make_paddle = on_paddle
        self._paddle: Optional[Callable] = None

    @property
    def needed(self) -> bool:
        return bool(self._checks) or self._always

    def _in_range(self, args: Sequence[Any]) -> bool:
        for pos, size in self._checks:
            a = args[pos].numpy()
            if a.size and (a.min() < 0 or a.max() >= size):
                return False
        return True

    def __call__(self, *args):
        if not self._always and self._in_range(args):
            return self.run(*args)
        if self._paddle is None:
            self._paddle = self._make_paddle()
        return self._paddle(*args)

    def describe(self) -> Optional[str]:
        describe = getattr(self.run, "describe", None)
        return describe() if describe is not None else None

    def __getattr__(self, name: str) -> Any:
        # what the backend's own callable offers (its lock, its library...)
        if name in IndexChecked.__slots__:
            raise AttributeError(name)
        return getattr(self.run, name)


__all__ = ["IndexChecked", "plan"]
