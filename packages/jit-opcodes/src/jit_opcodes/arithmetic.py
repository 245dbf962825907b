"""Arithmetic, comparisons, subscription: tensors become graph nodes, constants fold."""

from __future__ import annotations

import operator

from jit_core.errors import UNSUPPORTED_OPCODE, Unsupported
from jit_core.spi import RunsInPython
from jit_core.variables import ConstantVariable, SliceVariable, wrap_static

from .registry import handler, versions

_BINARY_38 = {
    "BINARY_ADD": operator.add,
    "BINARY_SUBTRACT": operator.sub,
    "BINARY_MULTIPLY": operator.mul,
    "BINARY_TRUE_DIVIDE": operator.truediv,
    "BINARY_FLOOR_DIVIDE": operator.floordiv,
    "BINARY_MODULO": operator.mod,
    "BINARY_POWER": operator.pow,
    "BINARY_MATRIX_MULTIPLY": operator.matmul,
    "BINARY_LSHIFT": operator.lshift,
    "BINARY_RSHIFT": operator.rshift,
    "BINARY_AND": operator.and_,
    "BINARY_OR": operator.or_,
    "BINARY_XOR": operator.xor,
}
# Neither paddle.Tensor nor the Python constants we fold define in-place dunders that
# differ from the plain operator on immutable values; lists do, and are handled apart.
_INPLACE_38 = {k.replace("BINARY_", "INPLACE_"): v for k, v in _BINARY_38.items()}

_BINARY_OP = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
    "@": operator.matmul,
    "<<": operator.lshift,
    ">>": operator.rshift,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
}

_COMPARE = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


def _binary(tx, fn, inplace=False):
    b = tx.pop()
    a = tx.pop()
    if inplace:
        from jit_core.errors import SIDE_EFFECT, Unsupported
        from jit_core.variables import ListVariable, NdarrayVariable

        if isinstance(a, NdarrayVariable):
            # NumPy updates the array itself, which every name of it sees
            raise Unsupported(
                f"{a.describe()} updated in place by an augmented assignment",
                category=SIDE_EFFECT,
            )
    if inplace and fn is operator.add:
        if isinstance(a, ListVariable):
            # list += iterable extends the same list object
            a.call_method(tx, "extend", [b], {})
            tx.push(a)
            return
    tx.push(tx.binary_op(fn, a, b))


@handler(*_BINARY_38, versions=versions("3.8", "3.10"))
def binary_38(tx, inst):
    _binary(tx, _BINARY_38[inst.opname])


@handler(*_INPLACE_38, versions=versions("3.8", "3.10"))
def inplace_38(tx, inst):
    _binary(tx, _INPLACE_38[inst.opname], inplace=True)


@handler("BINARY_OP", versions=versions("3.11", "3.13"))
def binary_op(tx, inst):
    sym = inst.argrepr
    inplace = sym.endswith("=")
    fn = _BINARY_OP.get(sym[:-1] if inplace else sym)
    if fn is None:
        raise Unsupported(f"BINARY_OP {sym!r}", category=UNSUPPORTED_OPCODE)
    _binary(tx, fn, inplace)


@handler("UNARY_NEGATIVE", "UNARY_INVERT", "UNARY_NOT")
@handler("UNARY_POSITIVE", versions=versions("3.8", "3.11"))  # 3.12: CALL_INTRINSIC_1
def unary(tx, inst):
    fn = {
        "UNARY_NEGATIVE": operator.neg,
        "UNARY_POSITIVE": operator.pos,
        "UNARY_INVERT": operator.invert,
        "UNARY_NOT": operator.not_,
    }[inst.opname]
    tx.push(tx.unary_op(fn, tx.pop()))


@handler("COMPARE_OP")
def compare_op(tx, inst):
    sym = inst.argval
    b = tx.pop()
    a = tx.pop()
    if sym in _COMPARE:
        tx.push(tx.binary_op(_COMPARE[sym], a, b))
    elif sym in ("is", "is not"):  # 3.8
        tx.push(tx.identity_compare(operator.is_ if sym == "is" else operator.is_not, a, b))
    elif sym in ("in", "not in"):  # 3.8
        res = tx.binary_op(operator.contains, b, a)
        tx.push(res if sym == "in" else tx.unary_op(operator.not_, res))
    elif sym == "exception match":  # 3.8: an `except` clause of a handler the capture entered
        from jit_core.variables.exceptions import except_matches

        tx.push(ConstantVariable(except_matches(a, b)))
    else:
        raise Unsupported(f"COMPARE_OP {sym!r}", category=UNSUPPORTED_OPCODE)


@handler("IS_OP", versions=versions("3.9", "3.13"))
def is_op(tx, inst):
    b = tx.pop()
    a = tx.pop()
    tx.push(tx.identity_compare(operator.is_not if inst.arg else operator.is_, a, b))


@handler("CONTAINS_OP", versions=versions("3.9", "3.13"))
def contains_op(tx, inst):
    b = tx.pop()
    a = tx.pop()
    res = tx.binary_op(operator.contains, b, a)
    tx.push(tx.unary_op(operator.not_, res) if inst.arg else res)


@handler("BINARY_SUBSCR")
def binary_subscr(tx, inst):
    key = tx.pop()
    obj = tx.pop()
    tx.push(tx.getitem(obj, key))


# a store the graph cannot hold (into an input, a parameter, a container from outside)
# runs as it is between two graphs
@handler("STORE_SUBSCR", break_as=RunsInPython(pops=3))
def store_subscr(tx, inst):
    key = tx.pop()
    obj = tx.pop()
    value = tx.pop()
    tx.setitem(obj, key, value)


@handler("DELETE_SUBSCR", break_as=RunsInPython(pops=2))
def delete_subscr(tx, inst):
    key = tx.pop()
    obj = tx.pop()
    tx.delitem(obj, key)


@handler("BINARY_SLICE", versions=versions("3.12", "3.13"))
def binary_slice(tx, inst):
    stop = tx.pop()
    start = tx.pop()
    obj = tx.pop()
    tx.push(tx.getitem(obj, SliceVariable(start, stop, wrap_static(None))))


@handler("STORE_SLICE", versions=versions("3.12", "3.13"), break_as=RunsInPython(pops=4))
def store_slice(tx, inst):
    stop = tx.pop()
    start = tx.pop()
    obj = tx.pop()
    value = tx.pop()
    tx.setitem(obj, SliceVariable(start, stop, wrap_static(None)), value)
