"""Sizes known only at run time (dynamic shapes, see ``jit_core.shapes``)."""

from __future__ import annotations

import operator
from typing import Any, Optional

from .. import shapes
from ..bytecode import compat
from .base import VariableTracker
from .constant import ConstantVariable


class SymIntVariable(VariableTracker):
    """A size of a dynamic dimension, a number input of the graph (a frame int or float
    whose value changed between calls: ``shapes.ShapePolicy.number_is_input``), or a
    number computed from such values.

    ``node`` computes it when the graph runs (so ``x.reshape([x.shape[0], -1])`` serves
    every size); ``example`` is its value in this capture; ``expr`` says how to compute it
    from the frame's inputs (``shapes`` expressions), None for sizes of tensors the graph
    made. Used where Python needs its value (``range(n)``, a dict key, ``int(n)``), it is
    specialised: a guard pins the value (``expr``), or, without ``expr``, the frame is
    captured again with static shapes (``shapes.SpecializeShapes``).
    """

    def __init__(
        self,
        output,
        node,
        example: int,
        expr: Optional[tuple],
        dim_of: Optional[tuple] = None,
        operands: Optional[tuple] = None,
        source=None,
    ):
        super().__init__(source)
        self.output = output
        self.node = node
        # an int, or a float where arithmetic with a float made one (``0.1 * i``)
        self.example = example if type(example) is float else int(example)
        self.expr = expr
        #: without ``expr``: ``(tensor node, dim)`` of a size read, or ``(fn, a, b)`` of
        #: arithmetic on sizes; what ``OutputGraph.expr_of`` resolves it from later
        self.dim_of = dim_of
        self.operands = operands

    def python_type(self) -> type:
        return type(self.example)

    def describe(self) -> str:
        if self.source is not None:
            kind = type(self.example).__name__
            return f"{kind} input {self.source.name()} (= {self.example} here)"
        return f"dynamic size {self.node.name} (= {self.example} here)"

    # Wherever a constant is accepted, a size is one: reading it as one specialises it.
    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        self.output.specialize(self, "its value is used as a Python int")
        return self.example

    def truthy(self, tx) -> bool:
        return self.output.guard_relation(operator.ne, self, ConstantVariable(0), "a branch")

    def reconstruct(self, cg) -> None:
        # computed again from the frame's inputs (``n + 1`` of an int input, a global
        # counter's ``STEP += 1``, a size): no guard pins the value
        expr = self.output.expr_of(self)
        if expr is not None and expr[0] != "const":
            cg.extend(_emit(expr, cg.code))
            return
        cg.extend(compat.load_const(self.as_python_constant()))


def _emit(expr: tuple, code) -> list:
    """Bytecode that computes the ``shapes`` expression ``expr`` from the frame's values
    (operators called as functions: no opcode differs between Python versions)."""
    kind = expr[0]
    if kind == "value":
        return expr[1].reconstruct(code)
    if kind == "const":
        return compat.load_const(expr[1])
    if kind == "dim":
        return (
            expr[1].reconstruct(code)
            + compat.load_attr("shape")
            + compat.load_const(expr[2])
            + compat.subscr()
        )
    if kind == "neg":
        return compat.load_callable_const(operator.neg) + _emit(expr[1], code) + compat.call(1)
    fn, left, right = expr[1], expr[2], expr[3]
    return compat.load_callable_const(fn) + _emit(left, code) + _emit(right, code) + compat.call(2)


def is_int_like(v: VariableTracker) -> bool:
    if isinstance(v, SymIntVariable):
        return True
    if isinstance(v, ConstantVariable):
        value = v.value
        return isinstance(value, int) and not isinstance(value, bool)
    return False


def _is_number_like(v: VariableTracker) -> bool:
    if isinstance(v, SymIntVariable):
        return True
    if isinstance(v, ConstantVariable):
        return type(v.value) in (int, float)
    return False


def binary(tx, fn, a: VariableTracker, b: VariableTracker) -> Optional[VariableTracker]:
    """``fn(a, b)`` where one of them is a dynamic size or int input, the other an int
    or a float (``t = i * dt``); None when that is not such an operation (the caller
    goes on as with constants, which specialises)."""
    if not (_is_number_like(a) and _is_number_like(b)):
        return None
    if fn in shapes.COMPARISONS:
        return ConstantVariable(tx.output.guard_relation(fn, a, b, "a comparison"))
    if fn in shapes.ARITHMETIC:
        return tx.output.size_op(fn, a, b)
    return None


def _elementwise_sequence(t: type) -> bool:
    return t in (list, tuple) or (t.__name__ == "Size" and t.__module__.startswith("paddle"))


def compare_sequences(tx, fn, a, b) -> Optional[VariableTracker]:
    """``a == b`` / ``a != b`` of two lists or tuples holding sizes (``attn.shape != [b,
    h, q, kv]``): item by item as Python compares them, each pair of sizes by a guarded
    relation rather than by pinning their values; None where that is not such a
    comparison."""
    from .containers import BaseListVariable

    if fn not in (operator.eq, operator.ne):
        return None
    if not (isinstance(a, BaseListVariable) and isinstance(b, BaseListVariable)):
        return None
    if not any(isinstance(v, SymIntVariable) for v in a.items + b.items):
        return None
    if not all(is_int_like(v) for v in a.items + b.items):
        return None
    ta, tb = a.python_type(), b.python_type()
    if not (_elementwise_sequence(ta) and _elementwise_sequence(tb)):
        return None  # other subclasses compare in their own ways
    if ta is not tb and {ta, tb} == {list, tuple}:
        equal = False  # a list never equals a tuple
    else:
        # (Paddle's ``Tensor.shape``, a list subclass, equals lists and tuples alike)
        equal = len(a.items) == len(b.items)
        for x, y in zip(a.items, b.items):
            if not equal:
                break
            equal = tx.output.guard_relation(operator.eq, x, y, "a comparison")
    return ConstantVariable(equal if fn is operator.eq else not equal)


def call_builtin(tx, fn, args) -> Optional[VariableTracker]:
    """``max``/``min`` of two sizes, or None."""
    if fn in shapes.FUNCTIONS and len(args) == 2 and all(is_int_like(a) for a in args):
        if any(isinstance(a, SymIntVariable) for a in args):
            return tx.output.size_op(fn, args[0], args[1])
    return None
