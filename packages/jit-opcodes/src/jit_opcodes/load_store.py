"""Loads and stores of locals, constants, globals and attributes."""

from __future__ import annotations

from jit_core.bytecode import compat
from jit_core.errors import SIDE_EFFECT, Unsupported
from jit_core.spi import RunsInPython
from jit_core.variables import NullVariable, wrap_static

from .registry import handler, versions


@handler("LOAD_FAST", versions=versions("3.8", "3.12"))
def load_fast(tx, inst):
    tx.push(tx.load_local(inst.argval))


@handler("LOAD_FAST", versions=versions("3.13"))
def load_fast_313(tx, inst):
    name = inst.argval
    if name in tx.code.co_cellvars or name in tx.code.co_freevars:
        # 3.13 loads the cell itself this way (what LOAD_CLOSURE did), for a closure
        tx.push(tx.cell(name))
    else:
        tx.push(tx.load_local(name))


@handler("LOAD_FAST_LOAD_FAST", versions=versions("3.13"))
def load_fast_load_fast(tx, inst):
    first, second = inst.argval
    tx.push(tx.load_local(first))
    tx.push(tx.load_local(second))


@handler("STORE_FAST_LOAD_FAST", versions=versions("3.13"))
def store_fast_load_fast(tx, inst):
    stored, loaded = inst.argval
    store_fast_named(tx, stored)
    tx.push(tx.load_local(loaded))


@handler("STORE_FAST_STORE_FAST", versions=versions("3.13"))
def store_fast_store_fast(tx, inst):
    first, second = inst.argval
    store_fast_named(tx, first)
    store_fast_named(tx, second)


@handler("LOAD_FAST_CHECK", versions=versions("3.12", "3.13"))
def load_fast_check(tx, inst):
    tx.push(tx.load_local(inst.argval))


@handler("LOAD_FAST_AND_CLEAR", versions=versions("3.12", "3.13"))
def load_fast_and_clear(tx, inst):
    # 3.12 inlined comprehensions save the outer binding of their loop variable here
    name = inst.argval
    value = tx.symbolic_locals.pop(name, None)
    tx.push(value if value is not None else NullVariable())


@handler("STORE_FAST")
def store_fast(tx, inst):
    store_fast_named(tx, inst.argval)


def store_fast_named(tx, name: str) -> None:
    value = tx.pop()
    if isinstance(value, NullVariable):
        # restoring a 3.12+ comprehension variable that was unbound before
        tx.symbolic_locals.pop(name, None)
        return
    tx.store_local(name, value)


@handler("DELETE_FAST")
def delete_fast(tx, inst):
    tx.delete_local(inst.argval)


@handler("LOAD_CONST")
def load_const(tx, inst):
    tx.push(wrap_static(inst.argval))


@handler("LOAD_GLOBAL", versions=versions("3.8", "3.10"))
def load_global(tx, inst):
    tx.push(tx.load_global(inst.argval))


@handler("LOAD_GLOBAL", versions=versions("3.11", "3.12"))
def load_global_null(tx, inst):
    # 3.11+: the low bit of the argument asks for a NULL before the value
    if inst.arg & 1:
        tx.push(NullVariable())
    tx.push(tx.load_global(inst.argval))


@handler("LOAD_GLOBAL", versions=versions("3.13"))
def load_global_null_after(tx, inst):
    # 3.13: the NULL goes after the value
    tx.push(tx.load_global(inst.argval))
    if inst.arg & 1:
        tx.push(NullVariable())


_GLOBAL_STORE = "assigning or deleting a global: a side effect, run between two graphs"
_ATTR_STORE = "storing or deleting an attribute: a side effect, run between two graphs"


@handler("STORE_GLOBAL", breaks=_GLOBAL_STORE, break_as=RunsInPython(pops=1))
@handler("DELETE_GLOBAL", breaks=_GLOBAL_STORE, break_as=RunsInPython(pops=0))
def store_global(tx, inst):
    raise Unsupported(f"{_GLOBAL_STORE} ({inst.argval})", category=SIDE_EFFECT)


@handler("LOAD_ATTR", versions=versions("3.8", "3.11"))
def load_attr(tx, inst):
    obj = tx.pop()
    tx.push(tx.getattr(obj, inst.argval))


@handler("LOAD_ATTR", versions=versions("3.12", "3.12"))
def load_attr_312(tx, inst):
    obj = tx.pop()
    if inst.arg & 1:
        # method form: NULL + bound callable is equivalent to method + self
        tx.push(NullVariable())
    tx.push(tx.getattr(obj, inst.argval))


@handler("LOAD_ATTR", versions=versions("3.13"))
def load_attr_313(tx, inst):
    obj = tx.pop()
    tx.push(tx.getattr(obj, inst.argval))
    if inst.arg & 1:
        # method form: bound callable + NULL is equivalent to method + self
        tx.push(NullVariable())


@handler("LOAD_SUPER_ATTR", versions=versions("3.12", "3.13"))
def load_super_attr(tx, inst):
    # STACK: the global `super`, the class (the __class__ cell), the object
    obj = tx.pop()
    cls = tx.pop()
    sup = tx.call(tx.pop(), [cls, obj], {})
    method = inst.arg & 1  # the method form, as in LOAD_ATTR: a NULL next to the value
    if method and not compat.NULL_AFTER_CALLABLE:
        tx.push(NullVariable())
    tx.push(tx.getattr(sup, inst.argval))
    if method and compat.NULL_AFTER_CALLABLE:
        tx.push(NullVariable())


@handler("LOAD_METHOD", versions=versions("3.8", "3.11"))
def load_method(tx, inst):
    obj = tx.pop()
    tx.push(NullVariable())
    tx.push(tx.getattr(obj, inst.argval))


@handler("STORE_ATTR", breaks=_ATTR_STORE, break_as=RunsInPython(pops=2))
@handler("DELETE_ATTR", breaks=_ATTR_STORE, break_as=RunsInPython(pops=1))
def store_attr(tx, inst):
    obj = tx.peek()
    if inst.opname == "STORE_ATTR" and obj.store_attr(tx, inst.argval, tx.peek(2)):
        tx.pop()
        tx.pop()
        return
    raise Unsupported(f"{_ATTR_STORE} ({obj.describe()}.{inst.argval})", category=SIDE_EFFECT)
