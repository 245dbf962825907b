"""arithmetic family: binary, in-place and unary operators and comparisons, on tensors
(graph nodes) and on Python numbers (folded), in one graph with eager results."""

from __future__ import annotations

import paddle
import pytest

import jit_core
from jit_opcodes.coverage import covers_cases

from ..helpers import assert_same


def binary(x, y):
    a = x + y
    b = x - y
    c = x * y
    d = x / (y + 1)
    e = x // (y + 1)
    f = x % (y + 1)
    g = x**2
    h = x @ y.T
    return a + b + c + d + e + f + g + h.sum()


def inplace(x, y, n=13):
    z = x * 1
    z += y
    z -= y * 0.5
    z *= 2
    z /= 3
    z //= 1
    z %= 7
    z **= 1
    k = n
    k &= 7
    k |= 8
    k ^= 1
    k <<= 2
    k >>= 1
    k //= 2
    k %= 5
    k **= 2
    m = x
    m @= y.T
    return z + m.sum() + k


def bitwise_and_unary(x, n=6, flag=False):
    a = (n & 3) + (n | 4) + (n ^ 1) + (n << 2) + (n >> 1) + ~n
    b = -x + (+x)
    return b * a if not flag else b


def comparisons(x, k=3, opt=None):
    y = (x > 0.5).astype("float32") + (x <= 0.2).astype("float32")
    is_none = opt is None  # a value, so IS_OP on every version (3.11+ jumps on `if x is None`)
    if is_none and k in (1, 2, 3) and k != 4:
        y = y + 1
    return y


CASES = [
    (
        binary,
        (
            "BINARY_ADD|BINARY_OP",
            "BINARY_SUBTRACT",
            "BINARY_MULTIPLY",
            "BINARY_TRUE_DIVIDE",
            "BINARY_FLOOR_DIVIDE",
            "BINARY_MODULO",
            "BINARY_POWER",
            "BINARY_MATRIX_MULTIPLY",
        ),
    ),
    (
        inplace,
        (
            "INPLACE_ADD|BINARY_OP",
            "INPLACE_SUBTRACT",
            "INPLACE_MULTIPLY",
            "INPLACE_TRUE_DIVIDE",
            "INPLACE_FLOOR_DIVIDE",
            "INPLACE_MODULO",
            "INPLACE_POWER",
            "INPLACE_AND",
            "INPLACE_OR",
            "INPLACE_XOR",
            "INPLACE_LSHIFT",
            "INPLACE_RSHIFT",
            "INPLACE_MATRIX_MULTIPLY",
        ),
    ),
    (
        bitwise_and_unary,
        (
            "BINARY_AND|BINARY_OP",
            "BINARY_OR",
            "BINARY_XOR",
            "BINARY_LSHIFT",
            "BINARY_RSHIFT",
            "UNARY_INVERT",
            "UNARY_NEGATIVE",
            "UNARY_POSITIVE|CALL_INTRINSIC_1",
            "UNARY_NOT|POP_JUMP_IF_TRUE|POP_JUMP_FORWARD_IF_TRUE",
        ),
    ),
    (comparisons, ("COMPARE_OP", "IS_OP", "CONTAINS_OP")),
]


@covers_cases(CASES)
@pytest.mark.parametrize("fn", [fn for fn, _ in CASES], ids=lambda fn: fn.__name__)
def test_operators_in_one_graph(fn, backend):
    paddle.seed(0)
    x, y = paddle.rand([4, 4]), paddle.rand([4, 4])
    args = (x, y) if fn in (binary, inplace) else (x,)
    report = jit_core.explain(jit_core.optimize(fn, backend=backend), *args)
    assert report.graph_count == 1 and report.break_count == 0, str(report)
    assert_same(report.result, fn(*args), rtol=1e-5, atol=1e-5)
