"""Dynamic shapes: which dimensions of a frame's input tensors a capture treats as sizes
known only at run time, and the small language their guards are written in.

A dimension is *dynamic* when the graph must serve every size of it. Reading it
(``x.shape[0]``) gives a symbolic size (``variables.symbolic.SymIntVariable``): a graph
node that reads the size when the graph runs, plus an expression over the frame's inputs
(``L['x'].shape[0]``) that guards use when Python code needs to know something about the
size (a branch on ``x.shape[0] > 1`` guards that relation, not the value).

Which dimensions are dynamic (``ShapePolicy``), TorchDynamo's rules:

- ``optimize(dynamic=None)`` (the default): the first capture of a code is static; a
  recompile caused by a changed size marks the dimensions that changed dynamic;
- ``dynamic=True``: every dimension of every input tensor from the start;
- ``dynamic=False``: none (every size is its own capture);
- ``mark_dynamic(t, dim)`` / ``mark_static(t, dim)`` on a tensor passed in decide for that
  tensor, over the rules above.

A dimension whose size is 0 or 1 at capture is static all the same: size-1 dimensions
broadcast and size-0 tensors are empty, so a graph captured there may not hold for other
sizes (and one captured at other sizes guards ``>= 2``).

Ints and floats of the frame follow the same rules (``ShapePolicy.number_is_input``): one
whose value changed between captures becomes an input of the graph, a symbolic number
whose expression is ``("value", source)``, where the backend takes Python numbers
(``Backend.number_inputs``).

When the capture needs the concrete value of a size it cannot guard (a size of a tensor
the graph made, used where Python needs an int, such as ``range`` or a branch), it raises
``SpecializeShapes`` and the frame is captured again with every dimension static; the
code stays static from then on and ``explain()`` says why.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Dict, FrozenSet, Iterable, Optional, Set, Tuple

import paddle

from .fx.codegen import _INFIX
from .sources import names_through

#: what ``mark_dynamic``/``mark_static`` leave on a tensor
_DYNAMIC_ATTR = "_jit_core_dynamic_dims"
_STATIC_ATTR = "_jit_core_static_dims"


class SpecializeShapes(Exception):
    """The capture needs a concrete size it cannot guard: capture the frame again with
    static shapes. Not an ``Unsupported``: it must not become a graph break."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class SpecializeLayers(Exception):
    """A capture that serves every instance of a layer class (``ShapePolicy.shares_layer``)
    met something that belongs to one instance only: capture the frame again bound to
    the instances of this call. Not an ``Unsupported``: it must not become a graph break."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _dims(t: Any, dim, what: str) -> Tuple[int, ...]:
    if not isinstance(t, paddle.Tensor):
        raise TypeError(f"{what}() takes a paddle.Tensor, got {type(t).__name__}")
    ndim = len(t.shape)
    dims = [dim] if isinstance(dim, int) else dim
    if not isinstance(dims, (list, tuple)) or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in dims
    ):
        raise TypeError(f"{what}(): dim must be an int or a list of ints, got {dim!r}")
    out = []
    for d in dims:
        if not -ndim <= d < ndim:
            raise ValueError(f"dimension {d!r} is out of range for a tensor of shape {t.shape}")
        out.append(d % ndim)
    return tuple(out)


def mark_dynamic(t: Any, dim, min: Optional[int] = None, max: Optional[int] = None) -> None:
    """Make dimension ``dim`` (an int or several) of tensor ``t`` dynamic when ``t`` is
    passed to an optimized callable: the capture serves every size of it (between ``min``
    and ``max`` where given; the guards check the bounds), from the first capture on."""
    for name, bound in (("min", min), ("max", max)):
        if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool)):
            raise TypeError(f"mark_dynamic(): {name} must be an int or None, got {bound!r}")
    if min is not None and max is not None and min > max:
        raise ValueError(f"mark_dynamic: min ({min}) is greater than max ({max})")
    dims = _dims(t, dim, "mark_dynamic")
    marks: Dict[int, Tuple[Optional[int], Optional[int]]] = dict(getattr(t, _DYNAMIC_ATTR, {}))
    for d in dims:
        marks[d] = (min, max)
    setattr(t, _DYNAMIC_ATTR, marks)
    static = set(getattr(t, _STATIC_ATTR, ())) - set(marks)
    setattr(t, _STATIC_ATTR, frozenset(static))


def mark_static(t: Any, dim) -> None:
    """Keep dimension ``dim`` of tensor ``t`` static (each size its own capture), whatever
    ``optimize(dynamic=...)`` and the recompiles would decide."""
    dims = _dims(t, dim, "mark_static")
    setattr(t, _STATIC_ATTR, frozenset(getattr(t, _STATIC_ATTR, frozenset())) | set(dims))
    marks = dict(getattr(t, _DYNAMIC_ATTR, {}))
    for d in dims:
        marks.pop(d, None)
    setattr(t, _DYNAMIC_ATTR, marks)


class ShapePolicy:
    """Which input dimensions one capture treats as dynamic, and why the rest are not."""

    def __init__(
        self,
        dynamic: Optional[bool] = None,
        automatic: Optional[Dict[str, Set[int]]] = None,
        static_reason: Optional[str] = None,
        numbers: Optional[Set[str]] = None,
        layers: Optional[Set[str]] = None,
        layer_reason: Optional[str] = None,
        lists: Optional[Set[str]] = None,
    ):
        #: ``optimize(dynamic=...)``
        self.dynamic = dynamic
        #: source name -> dimensions the recompiles of this code made dynamic
        self.automatic = automatic or {}
        #: source names of the ints and floats whose value changed between captures of
        #: this code
        self.numbers = numbers or set()
        #: whether the backend takes Python numbers as graph inputs
        #: (``Backend.number_inputs``): set by the capture; without it every int and
        #: float is a constant of its graph
        self.number_inputs = False
        #: set when this code must stay static (an earlier capture needed a concrete size)
        self.static_reason = static_reason
        #: what the capture decided, for ``explain()``: (source name, dim, why static)
        self.specialized: list = []
        #: source names of the locals holding a layer where another instance of its class
        #: came to this code: the capture serves every instance (``shares_layer``)
        self.layers = layers or set()
        #: set when this code's captures stay bound to their layer instances (an earlier
        #: shared capture met something of one instance only)
        self.layer_reason = layer_reason
        #: source names of the lists from outside whose length changed between captures
        self.lists = lists or set()
        #: set when a capture of this code that took an exception to its handler could
        #: not finish the handler: its ``try`` blocks then run in Python
        #: (``errors.ExceptionsNotSimulated``)
        self.raise_reason: Optional[str] = None

    @classmethod
    def from_earlier_captures(cls, dynamic: Optional[bool], cache: Any) -> ShapePolicy:
        """The policy of a new capture of a code whose earlier captures learnt what
        ``cache`` (its ``frame_cache.CodeCache``) holds: the dimensions, numbers and lists
        that changed, the layers shared, and why shapes, layers or ``try`` blocks stay as
        they are."""
        policy = cls(
            dynamic=dynamic,
            automatic=cache.dynamic_dims,
            static_reason=cache.static_reason,
            numbers=cache.dynamic_numbers,
            layers=cache.shared_layers,
            layer_reason=cache.layer_reason,
            lists=cache.dynamic_lists,
        )
        policy.raise_reason = cache.raise_reason
        return policy

    def list_is_input(self, source_name: str) -> bool:
        """Whether a list of tensors read from ``source_name`` and passed whole to a Paddle
        operation (``paddle.stack(keys, 1)`` over a KV cache) is one input of the graph, of
        any length, rather than its items, one input each and their number guarded. The
        rules of numbers: once its length changed between two captures, on backends that
        take Python values as inputs."""
        if not self.number_inputs or self.static_reason is not None or self.dynamic is False:
            return False
        return source_name in self.lists

    def shares_layer(self, source: Any) -> bool:
        """Whether ``source`` is, or is read through, a layer that this capture shares
        between the instances of its class: its type and everything read through it are
        guarded instead of its identity, its parameters and buffers are graph inputs, and
        Paddle's own layers in it are inlined (a call_module node would bind one instance).
        """
        if not self.layers or self.layer_reason is not None:
            return False
        return not self.layers.isdisjoint(names_through(source))

    def number_is_input(self, source_name: str) -> bool:
        """Whether the int or float read from ``source_name`` is an input of the graph (a
        symbolic number: arithmetic on it is recorded, a Python use pins it with a guard)
        rather than a constant. The rules of dimensions: ``dynamic=True`` from the start,
        ``dynamic=None`` once its value changed between two captures."""
        if not self.number_inputs or self.static_reason is not None or self.dynamic is False:
            return False
        return bool(self.dynamic) or source_name in self.numbers

    def dims_for(self, source_name: str, tensor: Any) -> Dict[int, Tuple[Optional[int], ...]]:
        """dimension -> (min, max) bounds, for the dimensions of ``tensor`` (read from
        ``source_name``) that this capture treats as dynamic."""
        if self.static_reason is not None:
            return {}
        shape = list(tensor.shape)
        marked = dict(getattr(tensor, _DYNAMIC_ATTR, {}))
        static: FrozenSet[int] = getattr(tensor, _STATIC_ATTR, frozenset())
        wanted: Dict[int, Tuple[Optional[int], Optional[int]]] = {}
        if self.dynamic:
            wanted = {d: (None, None) for d in range(len(shape))}
        if self.dynamic is None:
            for d in self.automatic.get(source_name, ()):
                if d < len(shape):
                    wanted.setdefault(d, (None, None))
        wanted.update((d, b) for d, b in marked.items() if d < len(shape))
        out: Dict[int, Tuple[Optional[int], ...]] = {}
        for d, bounds in sorted(wanted.items()):
            if d in static:
                continue
            lo, hi = bounds
            if (lo is not None and shape[d] < lo) or (hi is not None and shape[d] > hi):
                self.specialized.append(
                    (source_name, d, f"size {shape[d]} is outside mark_dynamic's bounds")
                )
                continue
            if shape[d] in (0, 1):
                # broadcasting and emptiness differ at 0 and 1: a graph captured there may
                # not hold for other sizes
                self.specialized.append(
                    (source_name, d, f"size {shape[d]} specialises (0 and 1 are never dynamic)")
                )
                continue
            out[d] = bounds
        return out


# ------------------------------------------------------------------ size expressions
# An expression is a nested tuple: ("dim", source, d) | ("value", source) (a number input) |
# ("const", value) | ("op", fn, left, right) | ("neg", operand). Guards render it over
# the frame's values.

# the symbols are the graph code's own (fx.codegen), so guards and graphs read alike
ARITHMETIC: Dict[Callable, str] = {
    fn: _INFIX[fn]
    for fn in (
        operator.add,
        operator.sub,
        operator.mul,
        operator.floordiv,
        operator.mod,
        # always a float, whatever the values: the result's type never depends on them
        # (unlike ``**``: 2 ** -1 is a float, 2 ** 1 an int)
        operator.truediv,
    )
}
COMPARISONS: Dict[Callable, str] = {
    fn: _INFIX[fn]
    for fn in (operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne)
}
#: builtins over sizes that stay sizes
FUNCTIONS: Dict[Callable, str] = {max: "max", min: "min"}


def const(value: int) -> tuple:
    return ("const", value)


def render(expr: tuple, source_expr: Callable[[Any], str]) -> str:
    """Python source of ``expr``, with ``source_expr(source)`` for each tensor read."""
    kind = expr[0]
    if kind == "dim":
        return f"{source_expr(expr[1])}.shape[{expr[2]}]"
    if kind == "value":
        return source_expr(expr[1])
    if kind == "const":
        return repr(expr[1])
    if kind == "neg":
        return f"(-{render(expr[1], source_expr)})"
    fn, left, right = expr[1], render(expr[2], source_expr), render(expr[3], source_expr)
    if fn in FUNCTIONS:
        return f"{FUNCTIONS[fn]}({left}, {right})"
    sym = ARITHMETIC.get(fn) or COMPARISONS[fn]
    return f"({left} {sym} {right})"


def pinned_for_good(expr: tuple) -> Iterable[Any]:
    """The number inputs that a guard pinning ``expr`` to one value pins to values
    without end: ``i``, ``i + 1``, ``i // 2`` and ``max(i, 2)`` take another value as
    ``i`` grows (each value a capture of its own); ``i % 3``, ``min(i, 4)`` and ``i > 2``
    take a few (a few captures serve every ``i``)."""
    kind = expr[0]
    if kind == "value":
        yield expr[1]
    elif kind == "neg":
        yield from pinned_for_good(expr[1])
    elif kind == "op" and expr[1] not in (operator.mod, min) and expr[1] not in COMPARISONS:
        yield from pinned_for_good(expr[2])
        yield from pinned_for_good(expr[3])


def sources_of(expr: tuple, kinds: Tuple[str, ...] = ("dim", "value")) -> Iterable[Any]:
    """The sources ``expr`` reads: sizes of tensors (``"dim"``), number inputs
    (``"value"``), or those of ``kinds`` only."""
    if expr[0] in kinds:
        yield expr[1]
    elif expr[0] == "neg":
        yield from sources_of(expr[1], kinds)
    elif expr[0] == "op":
        yield from sources_of(expr[2], kinds)
        yield from sources_of(expr[3], kinds)


def _size(t: Any, dim: int) -> Any:
    """The size of dimension ``dim`` of ``t`` when the graph runs (a graph node). In a
    static program (an export) the size of a dynamic dimension is not known: there it is
    a 0-D tensor that the program computes, which Paddle's shape arguments accept."""
    if paddle.in_dynamic_mode():
        return t.shape[dim]
    n = t.shape[dim]
    if n is not None and n >= 0:
        return n
    return paddle.shape(t)[dim]


def _plain(fn: Callable) -> Callable:
    # run as it is inside an export: to_static would turn its ``if`` into a cond op
    not_to_static = getattr(paddle.jit, "not_to_static", None)
    return not_to_static(fn) if not_to_static is not None else fn


size = _plain(_size)
size.__name__ = size.__qualname__ = "size"


def describe_dims(dims: FrozenSet[int]) -> str:
    return ", ".join(str(d) for d in sorted(dims))
