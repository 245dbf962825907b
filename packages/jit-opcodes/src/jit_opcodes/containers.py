"""Building and unpacking tuples, lists, sets, dicts, slices and strings."""

from __future__ import annotations

from jit_core.errors import DYNAMIC_VALUE, RAISES, Unsupported
from jit_core.variables import (
    ConstantVariable,
    DictVariable,
    ListVariable,
    SetVariable,
    SliceVariable,
    TupleVariable,
)

from .registry import handler, versions


@handler("BUILD_TUPLE")
def build_tuple(tx, inst):
    tx.push(TupleVariable(tx.popn(inst.arg)))


@handler("BUILD_LIST")
def build_list(tx, inst):
    tx.push(ListVariable(tx.popn(inst.arg)))


def _key(v):
    if not v.is_python_constant():
        raise Unsupported(f"dict key {v.describe()} is not a constant", category=DYNAMIC_VALUE)
    return v.as_python_constant()


@handler("BUILD_MAP")
def build_map(tx, inst):
    flat = tx.popn(2 * inst.arg)
    tx.push(DictVariable({_key(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}))


@handler("BUILD_CONST_KEY_MAP")
def build_const_key_map(tx, inst):
    keys = tx.pop().as_python_constant()
    values = tx.popn(inst.arg)
    tx.push(DictVariable(dict(zip(keys, values))))


@handler("BUILD_SLICE")
def build_slice(tx, inst):
    parts = tx.popn(inst.arg)
    if len(parts) == 2:
        parts.append(ConstantVariable(None))
    tx.push(SliceVariable(*parts))


@handler("LIST_APPEND")
def list_append(tx, inst):
    value = tx.pop()
    target = tx.peek(inst.arg)
    target.items.append(value)


@handler("BUILD_SET")
def build_set(tx, inst):
    tx.push(SetVariable(tx.popn(inst.arg)))


@handler("SET_ADD")
def set_add(tx, inst):
    value = tx.pop()
    _set_at(tx, inst.arg).add(value)


@handler("SET_UPDATE", versions=versions("3.9", "3.13"))
def set_update(tx, inst):
    seq = tx.pop()
    _set_at(tx, inst.arg).call_method(tx, "update", [seq], {})


@handler("BUILD_SET_UNPACK", versions=versions("3.8", "3.8"))
def build_set_unpack(tx, inst):
    out = SetVariable()
    for seq in tx.popn(inst.arg):
        out.call_method(tx, "update", [seq], {})
    tx.push(out)


def _set_at(tx, depth: int) -> SetVariable:
    target = tx.peek(depth)
    if not isinstance(target, SetVariable):
        raise Unsupported(
            f"adding to {target.describe()}, not a set made during the capture",
            category=DYNAMIC_VALUE,
        )
    return target


@handler("MAP_ADD")
def map_add(tx, inst):
    value = tx.pop()
    key = tx.pop()
    tx.peek(inst.arg).items[_key(key)] = value


@handler("LIST_EXTEND", versions=versions("3.9", "3.13"))
def list_extend(tx, inst):
    seq = tx.pop()
    tx.peek(inst.arg).items.extend(seq.unpack_var_sequence(tx))


@handler("LIST_TO_TUPLE", versions=versions("3.9", "3.11"))
def list_to_tuple(tx, inst):
    tx.push(TupleVariable(tx.pop().items))


@handler("DICT_MERGE", "DICT_UPDATE", versions=versions("3.9", "3.13"))
def dict_merge(tx, inst):
    other = tx.pop()
    if not isinstance(other, DictVariable):
        raise Unsupported(f"** unpacking of {other.describe()}", category=DYNAMIC_VALUE)
    target = tx.peek(inst.arg)
    for k, v in other.items.items():
        if inst.opname == "DICT_MERGE" and k in target.items:
            raise Unsupported(f"duplicate keyword argument {k!r} (TypeError)", category=RAISES)
        target.items[k] = v


@handler(
    "BUILD_TUPLE_UNPACK",
    "BUILD_TUPLE_UNPACK_WITH_CALL",
    "BUILD_LIST_UNPACK",
    versions=versions("3.8", "3.8"),
)
def build_unpack_38(tx, inst):
    items = []
    for seq in tx.popn(inst.arg):
        items.extend(seq.unpack_var_sequence(tx))
    cls = ListVariable if inst.opname == "BUILD_LIST_UNPACK" else TupleVariable
    tx.push(cls(items))


@handler("BUILD_MAP_UNPACK", "BUILD_MAP_UNPACK_WITH_CALL", versions=versions("3.8", "3.8"))
def build_map_unpack_38(tx, inst):
    out = {}
    for d in tx.popn(inst.arg):
        if not isinstance(d, DictVariable):
            raise Unsupported(f"** unpacking of {d.describe()}", category=DYNAMIC_VALUE)
        out.update(d.items)
    tx.push(DictVariable(out))


@handler("UNPACK_SEQUENCE")
def unpack_sequence(tx, inst):
    items = tx.pop().unpack_var_sequence(tx)
    if len(items) != inst.arg:
        raise Unsupported(
            f"unpacking {len(items)} values into {inst.arg} (ValueError)", category=RAISES
        )
    for item in reversed(items):
        tx.push(item)


@handler("UNPACK_EX")
def unpack_ex(tx, inst):
    before = inst.arg & 0xFF
    after = inst.arg >> 8
    items = tx.pop().unpack_var_sequence(tx)
    if len(items) < before + after:
        raise Unsupported("not enough values to unpack (ValueError)", category=RAISES)
    head = items[:before]
    middle = items[before : len(items) - after]
    tail = items[len(items) - after :]
    for item in reversed(tail):
        tx.push(item)
    tx.push(ListVariable(middle))
    for item in reversed(head):
        tx.push(item)


def _known(value, what: str):
    if not value.is_python_constant():
        raise Unsupported(f"{what} {value.describe()} into a string", category=DYNAMIC_VALUE)
    return value.as_python_constant()


#: the conversions of an f-string's ``!s``, ``!r`` and ``!a``, by their number
_CONVERSIONS = {1: str, 2: repr, 3: ascii}


@handler("FORMAT_VALUE", versions=versions("3.8", "3.12"))
def format_value(tx, inst):
    have_spec = (inst.arg & 0x04) == 0x04
    spec = tx.pop().as_python_constant() if have_spec else ""
    v = _known(tx.pop(), "formatting")
    conv = _CONVERSIONS.get(inst.arg & 0x03)
    if conv is not None:
        v = conv(v)
    tx.push(ConstantVariable(format(v, spec)))


# 3.13 splits FORMAT_VALUE: CONVERT_VALUE (!s, !r, !a), then FORMAT_SIMPLE or, with a
# format spec on top, FORMAT_WITH_SPEC


@handler("CONVERT_VALUE", versions=versions("3.13"))
def convert_value(tx, inst):
    tx.push(ConstantVariable(_CONVERSIONS[inst.arg](_known(tx.pop(), "converting"))))


@handler("FORMAT_SIMPLE", versions=versions("3.13"))
def format_simple(tx, inst):
    tx.push(ConstantVariable(format(_known(tx.pop(), "formatting"), "")))


@handler("FORMAT_WITH_SPEC", versions=versions("3.13"))
def format_with_spec(tx, inst):
    spec = _known(tx.pop(), "the format spec of")
    tx.push(ConstantVariable(format(_known(tx.pop(), "formatting"), spec)))


@handler("BUILD_STRING")
def build_string(tx, inst):
    parts = tx.popn(inst.arg)
    tx.push(ConstantVariable("".join(p.as_python_constant() for p in parts)))
