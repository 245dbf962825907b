"""The sizes of dynamic dimensions while a graph is recorded: a size read from a tensor,
arithmetic on sizes, comparisons of sizes (a guard on the relation, not on the sizes),
and a size pinned where Python needs its value."""

from __future__ import annotations

import operator
from typing import Any, Optional, Set

from .. import shapes, sym_shapes
from ..variables.base import VariableTracker
from ..variables.constant import ConstantVariable
from ..variables.symbolic import SymIntVariable
from ..variables.tensor import TensorVariable


class SymbolicSizes:
    """The dynamic-size half of ``OutputGraph`` (a mixin: it reads the graph, the guards,
    ``dynamic_inputs``, ``sized_by_numbers`` and ``pinned_numbers`` of the output graph
    it is part of)."""

    # what it reads of the output graph it is part of
    graph: Any
    guards: Any
    dynamic_inputs: bool
    sized_by_numbers: bool
    pinned_numbers: Set[str]

    def size_is_pinned(self, t: TensorVariable, dim: int) -> bool:
        """Whether ``t.shape[dim]`` is pinned (by the guards, or by static inputs): a
        constant of the capture."""
        if dim in t.dynamic_dims:
            return False
        # a tensor the graph made after a dynamic input was read: its size may depend on
        # that input's (no expression over the inputs says how)
        return not ((self.dynamic_inputs or self.sized_by_numbers) and t.source is None)

    def size_of(self, t: TensorVariable, dim: int) -> VariableTracker:
        """``t.shape[dim]``: a constant where the size is pinned, else a symbolic size
        read when the graph runs."""
        n = int(t.example.shape[dim])
        if self.size_is_pinned(t, dim):
            return ConstantVariable(n)
        expr: Optional[tuple] = ("dim", t.source, dim) if dim in t.dynamic_dims else None
        node = self.graph.call_function(shapes.size, (t.node, dim))
        return SymIntVariable(self, node, n, expr, dim_of=None if expr else (t.node, dim))

    @staticmethod
    def _size_parts(v: VariableTracker):
        """(graph argument, example, expression) of an int or a dynamic size."""
        if isinstance(v, SymIntVariable):
            return v.node, v.example, v.expr
        value = v.as_python_constant()
        return value, value, shapes.const(value)

    def expr_of(self, v: VariableTracker) -> Optional[tuple]:
        """The expression of an int or a size over the frame's inputs, or None where no
        expression holds at every size. A size of a tensor the graph made gets one where
        Paddle's shape inference says it is fixed (``shape_infer``)."""
        if not isinstance(v, SymIntVariable):
            return shapes.const(v.as_python_constant())
        if v.expr is None and v.operands is not None:
            fn, a, b = v.operands
            xa, xb = self.expr_of(a), self.expr_of(b)
            if xa is not None and xb is not None:
                v.expr = ("op", fn, xa, xb)
        elif v.expr is None and v.dim_of is not None:
            node, dim = v.dim_of
            # an expression over the inputs, from each operation's rule (a fixed size
            # where Paddle's own shape inference says so)
            v.expr = sym_shapes.dim_expr(self, node, dim)
        return v.expr

    def specialize(self, sym: SymIntVariable, why: str) -> None:
        """Pin ``sym`` to its value in this capture (a guard), or, when no guard can
        say it, have the frame captured again with static shapes."""
        expr = self.expr_of(sym)
        if expr is None:
            raise shapes.SpecializeShapes(
                f"{sym.describe()}, a size of a tensor the graph made, is needed as a "
                f"Python value ({why})"
            )
        if expr[0] != "const":
            self.guards.add_relation(("op", operator.eq, expr, shapes.const(sym.example)), True)
            self.pinned_numbers.update(s.name() for s in shapes.pinned_for_good(expr))

    def guard_relation(self, fn, a: VariableTracker, b: VariableTracker, what: str) -> bool:
        """``fn(a, b)`` for a comparison of sizes: its value in this capture, which a
        guard on the relation (not on the sizes) makes hold for every call served."""
        _, ea, _ = self._size_parts(a)
        _, eb, _ = self._size_parts(b)
        holds = bool(fn(ea, eb))
        xa, xb = self.expr_of(a), self.expr_of(b)
        if xa is None or xb is None:
            unknown = a if xa is None else b
            raise shapes.SpecializeShapes(
                f"{unknown.describe()}, a size of a tensor the graph made, decides {what}"
            )
        if not sym_shapes.always_holds(fn, xa, xb):
            self.guards.add_relation(("op", fn, xa, xb), holds)
        return holds

    def size_op(self, fn, a: VariableTracker, b: VariableTracker) -> SymIntVariable:
        """Arithmetic on sizes, recorded in the graph (``n // 2`` of a dynamic ``n``)."""
        na, ea, xa = self._size_parts(a)
        nb, eb, xb = self._size_parts(b)
        node = self.graph.call_function(fn, (na, nb))
        if xa is not None and xb is not None:
            return SymIntVariable(self, node, fn(ea, eb), ("op", fn, xa, xb))
        return SymIntVariable(self, node, fn(ea, eb), None, operands=(fn, a, b))


__all__ = ["SymbolicSizes"]
