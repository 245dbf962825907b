"""Size expressions of made tensors (``jit_core.sym_shapes``): the rules are exact at
every size, not only at the capture's."""

from __future__ import annotations

import itertools
import operator

import pytest

from jit_core import shapes, sym_shapes


class _Source:
    def __init__(self, name):
        self._name = name

    def name(self):
        return self._name


N = ("dim", _Source("L['x']"), 0)


class _Sizes:
    """The part of ``SymbolicShapes`` a slice rule uses, at one value of ``N``."""

    def __init__(self, n):
        self.n = n
        self.relations = []

    def scalar(self, value):
        return shapes.const(value) if isinstance(value, int) else value

    def relation(self, fn, a, b):
        holds = fn(self.value(a), self.value(b))
        self.relations.append((fn, a, b, holds))
        return holds

    def value(self, expr):
        return sym_shapes.evaluate(expr, lambda leaf: self.n)


BOUNDS = (None, 0, 1, 2, 5, -1, -3, 100)


def _admitted(relations, value):
    """Whether every guarded relation has its captured answer at ``value(expr)``."""
    return all(bool(fn(value(a), value(b))) == holds for fn, a, b, holds in relations)


@pytest.mark.parametrize("step", [None, 1, 2, 3])
def test_a_slice_of_a_symbolic_size_is_exact_wherever_its_guards_hold(step):
    for start, stop in itertools.product(BOUNDS, BOUNDS):
        s = slice(start, stop, step)
        for captured in range(0, 12):
            ctx = _Sizes(captured)
            expr = sym_shapes._slice_size(ctx, N, s)
            served = 0
            for n in range(0, 12):
                at = _Sizes(n)
                if _admitted(ctx.relations, at.value):
                    served += 1
                    assert at.value(expr) == len(range(n)[s]), (s, captured, n)
            assert served >= 1  # (the captured size itself)


def test_a_slice_bound_that_is_a_size_guards_its_sign_and_its_clamp():
    k = ("dim", _Source("L['k']"), 1)  # a symbolic bound: ``x[:k.shape[1]]``
    ctx = _Sizes(7)
    ctx.value = lambda e: sym_shapes.evaluate(e, lambda leaf: 7 if leaf is N else 3)
    expr = sym_shapes._slice_size(ctx, N, slice(None, k))
    # k >= 0, and k <= n: the length is k itself
    assert [(fn, holds) for fn, _, _, holds in ctx.relations][:2] == [
        (operator.ge, True),
        (operator.le, True),
    ]
    assert expr == k


def test_linear_forms_decide_relations_that_hold_at_every_size():
    one = shapes.const(1)
    a = ("op", operator.add, N, one)
    b = ("op", operator.add, one, N)
    assert sym_shapes.always_holds(operator.eq, a, b)
    assert sym_shapes.always_holds(operator.ge, a, shapes.const(0))  # sizes are >= 0
    # a dynamic size is at least 2 (its tensor's guard says so), never known to be 3
    assert sym_shapes.always_holds(operator.ge, N, shapes.const(2))
    assert not sym_shapes.always_holds(operator.ge, N, shapes.const(3))
    assert not sym_shapes.always_holds(operator.eq, N, ("op", operator.mul, N, N))
    twice = ("op", operator.mul, shapes.const(2), N)
    assert sym_shapes.linear_form(twice) == {("dim", "L['x']", 0): 2}
    assert not sym_shapes.always_holds(operator.eq, twice, N)
