"""Structural pattern matching (``match``/``case``, Python 3.10+).

The subject's Python type is known at capture (and pinned by the guards), so the type
tests fold to constants and the branches are followed like any Python branch. Matching
the value of a tensor is not possible without running it: ``case`` against tensors runs
the frame eagerly (the comparisons say so).
"""

from __future__ import annotations

import collections.abc

from jit_core.errors import DYNAMIC_VALUE, RAISES, Unsupported
from jit_core.variables import (
    ConstantVariable,
    DictVariable,
    TupleVariable,
)

from .registry import handler, versions

_NOT_SEQUENCES = (str, bytes, bytearray)
#: builtins whose single positional sub-pattern is the subject itself (`case int(n)`)
_SELF_MATCHING = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)


def _type_of(v) -> type:
    try:
        return v.python_type()
    except Unsupported:
        raise Unsupported(
            f"matching {v.describe()}, whose type is not known", category=DYNAMIC_VALUE
        ) from None


@handler("MATCH_SEQUENCE", versions=versions("3.10", "3.13"))
def match_sequence(tx, inst):
    t = _type_of(tx.peek())
    ok = issubclass(t, collections.abc.Sequence) and not issubclass(t, _NOT_SEQUENCES)
    tx.push(ConstantVariable(ok))


@handler("MATCH_MAPPING", versions=versions("3.10", "3.13"))
def match_mapping(tx, inst):
    tx.push(ConstantVariable(issubclass(_type_of(tx.peek()), collections.abc.Mapping)))


@handler("GET_LEN", versions=versions("3.10", "3.13"))
def get_len(tx, inst):
    tx.push(ConstantVariable(len(tx.peek().unpack_var_sequence(tx))))


def _keys(tx, keys_var) -> tuple:
    if not keys_var.is_python_constant():
        raise Unsupported(
            f"mapping pattern keys {keys_var.describe()} are not constants", category=DYNAMIC_VALUE
        )
    return tuple(keys_var.as_python_constant())


def _mapping(tx, subject) -> DictVariable:
    if not isinstance(subject, DictVariable):
        raise Unsupported(f"a mapping pattern against {subject.describe()}", category=DYNAMIC_VALUE)
    return subject


@handler("MATCH_KEYS", versions=versions("3.10", "3.10"))
def match_keys_310(tx, inst):
    keys = _keys(tx, tx.peek())
    subject = _mapping(tx, tx.peek(2))
    if all(k in subject.items for k in keys):
        tx.push(TupleVariable([subject.items[k] for k in keys]))
        tx.push(ConstantVariable(True))
    else:
        tx.push(ConstantVariable(None))
        tx.push(ConstantVariable(False))


@handler("MATCH_KEYS", versions=versions("3.11", "3.13"))
def match_keys(tx, inst):
    keys = _keys(tx, tx.peek())
    subject = _mapping(tx, tx.peek(2))
    if all(k in subject.items for k in keys):
        tx.push(TupleVariable([subject.items[k] for k in keys]))
    else:
        tx.push(ConstantVariable(None))


@handler("COPY_DICT_WITHOUT_KEYS", versions=versions("3.10", "3.10"))
def copy_dict_without_keys(tx, inst):
    keys = _keys(tx, tx.pop())
    subject = _mapping(tx, tx.peek())
    tx.push(DictVariable({k: v for k, v in subject.items.items() if k not in keys}))


def _match_class(tx, subject, cls_var, names_var, count: int):
    """The tuple of extracted attributes when ``subject`` matches, else None."""
    if not cls_var.is_python_constant() or not isinstance(cls_var.as_python_constant(), type):
        raise Unsupported(f"a class pattern with {cls_var.describe()}", category=DYNAMIC_VALUE)
    cls = cls_var.as_python_constant()
    if not issubclass(_type_of(subject), cls):
        return None
    attrs = []
    if count:
        if cls in _SELF_MATCHING and count == 1:
            attrs.append(subject)
        else:
            match_args = getattr(cls, "__match_args__", None)
            if not isinstance(match_args, tuple) or len(match_args) < count:
                raise Unsupported(
                    f"{cls.__name__}() accepts no {count} positional sub-patterns", category=RAISES
                )
            attrs += [tx.getattr(subject, name) for name in match_args[:count]]
    for name in names_var.as_python_constant():
        attrs.append(tx.getattr(subject, name))
    return TupleVariable(attrs)


@handler("MATCH_CLASS", versions=versions("3.10", "3.10"))
def match_class_310(tx, inst):
    names = tx.pop()
    cls = tx.pop()
    subject = tx.pop()
    found = _match_class(tx, subject, cls, names, inst.arg)
    # 3.10: TOS1 becomes the attributes (or the subject on failure), TOS the result
    tx.push(found if found is not None else subject)
    tx.push(ConstantVariable(found is not None))


@handler("MATCH_CLASS", versions=versions("3.11", "3.13"))
def match_class(tx, inst):
    names = tx.pop()
    cls = tx.pop()
    subject = tx.pop()
    found = _match_class(tx, subject, cls, names, inst.arg)
    tx.push(found if found is not None else ConstantVariable(None))
