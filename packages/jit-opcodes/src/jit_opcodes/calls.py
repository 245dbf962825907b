"""Calls in every calling convention from 3.8 to 3.13, and MAKE_FUNCTION."""

from __future__ import annotations

from jit_core.errors import DYNAMIC_VALUE, INTERNAL, UNSUPPORTED_OPCODE, Unsupported
from jit_core.spi import BreaksAtCall, CallParts
from jit_core.variables import DictVariable, NestedFunctionVariable, NullVariable

from .registry import handler, versions


def _split_kwargs(args, names):
    if not names:
        return list(args), {}
    n = len(names)
    return list(args[:-n]), dict(zip(names, args[-n:]))


# Each calling convention is read from the stack by one decoder, which both the handler
# (to simulate the call) and jit-core (to break the graph at it, BreaksAtCall) use.


def _decode_call_function(stack, inst, kw_names) -> CallParts:
    n = inst.arg
    return CallParts(n + 1, stack[-n - 1], list(stack[len(stack) - n :]))


def _decode_call_function_kw(stack, inst, kw_names) -> CallParts:
    n = inst.arg
    pos, kw = _split_kwargs(stack[len(stack) - n - 1 : -1], stack[-1].as_python_constant())
    return CallParts(n + 2, stack[-n - 2], pos, kw)


def _decode_method_call(stack, inst, kw_names) -> CallParts:
    """CALL_METHOD (3.8-3.10) and CALL (3.11+): below the arguments, either NULL and the
    callable, or the method and ``self`` (LOAD_METHOD/LOAD_ATTR pushed them)."""
    n = inst.arg
    args = list(stack[len(stack) - n :])
    second, first = stack[-n - 1], stack[-n - 2]
    fn = second
    if not isinstance(first, NullVariable):
        fn, args = first, [second] + args
    pos, kw = _split_kwargs(args, kw_names)
    return CallParts(n + 2, fn, pos, kw)


def _decode_call_313(stack, inst, kw_names) -> CallParts:
    """CALL (3.13): below the arguments, the callable and then NULL or ``self`` (LOAD_ATTR
    pushed the method and ``self``; the capture pushes a bound method and NULL)."""
    n = inst.arg
    args = list(stack[len(stack) - n :])
    fn, self_or_null = stack[-n - 2], stack[-n - 1]
    if not isinstance(self_or_null, NullVariable):
        args = [self_or_null] + args
    pos, kw = _split_kwargs(args, kw_names)
    return CallParts(n + 2, fn, pos, kw)


def _decode_call_kw(stack, inst, kw_names) -> CallParts:
    """CALL_KW (3.13): CALL's stack with the tuple of keyword names on top."""
    names = tuple(stack[-1].as_python_constant())
    parts = _decode_call_313(stack[:-1], inst, names)
    parts.consumed += 1
    return parts


def _decode_call_ex(stack, inst, null_at: int) -> CallParts:
    """CALL_FUNCTION_EX: ``null_at`` is where a NULL sits: 0 nowhere (3.8-3.10), -1 below
    the callable (3.11, 3.12), 1 above it (3.13)."""
    i = 1
    kwargs_obj = None
    if inst.arg & 1:
        kwargs_obj = stack[-i]
        i += 1
    args_obj = stack[-i]
    if null_at == 1:
        fn, null = stack[-i - 2], stack[-i - 1]
    else:
        fn = stack[-i - 1]
        null = stack[-i - 2] if null_at else NullVariable()
    if not isinstance(null, NullVariable):
        raise Unsupported("CALL_FUNCTION_EX without the NULL it expects", category=INTERNAL)
    return CallParts(i + 1 + abs(null_at), fn, args_obj=args_obj, kwargs_obj=kwargs_obj)


def _decode_call_ex_38(stack, inst, kw_names) -> CallParts:
    return _decode_call_ex(stack, inst, null_at=0)


def _decode_call_ex_311(stack, inst, kw_names) -> CallParts:
    return _decode_call_ex(stack, inst, null_at=-1)


def _decode_call_ex_313(stack, inst, kw_names) -> CallParts:
    return _decode_call_ex(stack, inst, null_at=1)


def _simulate(tx, inst, decode) -> None:
    parts = decode(tx.stack, inst, tx.kw_names)
    tx.popn(parts.consumed)
    tx.kw_names = ()
    if parts.args_obj is None:
        tx.push(tx.call(parts.fn, parts.args, parts.kwargs))
        return
    kwargs = parts.kwargs_obj
    if kwargs is not None and not isinstance(kwargs, DictVariable):
        raise Unsupported(f"** unpacking of {kwargs.describe()}", category=DYNAMIC_VALUE)
    args = parts.args_obj.unpack_var_sequence(tx)
    tx.push(tx.call(parts.fn, args, dict(kwargs.items) if kwargs is not None else {}))


@handler(
    "CALL_FUNCTION",
    versions=versions("3.8", "3.10"),
    break_as=BreaksAtCall(_decode_call_function),
)
def call_function(tx, inst):
    _simulate(tx, inst, _decode_call_function)


@handler(
    "CALL_FUNCTION_KW",
    versions=versions("3.8", "3.10"),
    break_as=BreaksAtCall(_decode_call_function_kw),
)
def call_function_kw(tx, inst):
    _simulate(tx, inst, _decode_call_function_kw)


@handler(
    "CALL_METHOD", versions=versions("3.8", "3.10"), break_as=BreaksAtCall(_decode_method_call)
)
def call_method(tx, inst):
    _simulate(tx, inst, _decode_method_call)


@handler(
    "CALL_FUNCTION_EX",
    versions=versions("3.8", "3.10"),
    break_as=BreaksAtCall(_decode_call_ex_38),
)
def call_function_ex(tx, inst):
    _simulate(tx, inst, _decode_call_ex_38)


@handler(
    "CALL_FUNCTION_EX",
    versions=versions("3.11", "3.12"),
    break_as=BreaksAtCall(_decode_call_ex_311),
)
def call_function_ex_311(tx, inst):
    _simulate(tx, inst, _decode_call_ex_311)


@handler(
    "CALL_FUNCTION_EX",
    versions=versions("3.13"),
    break_as=BreaksAtCall(_decode_call_ex_313),
)
def call_function_ex_313(tx, inst):
    _simulate(tx, inst, _decode_call_ex_313)


@handler("KW_NAMES", versions=versions("3.11", "3.12"))
def kw_names(tx, inst):
    # the argument indexes co_consts; 3.11's dis shows it as "<unknown>", so never trust argval
    tx.kw_names = tuple(tx.code.co_consts[inst.arg])


@handler("CALL", versions=versions("3.11", "3.12"), break_as=BreaksAtCall(_decode_method_call))
def call_311(tx, inst):
    _simulate(tx, inst, _decode_method_call)


@handler("CALL", versions=versions("3.13"), break_as=BreaksAtCall(_decode_call_313))
def call_313(tx, inst):
    _simulate(tx, inst, _decode_call_313)


@handler("CALL_KW", versions=versions("3.13"), break_as=BreaksAtCall(_decode_call_kw))
def call_kw(tx, inst):
    _simulate(tx, inst, _decode_call_kw)


@handler("MAKE_FUNCTION", versions=versions("3.8", "3.12"))
def make_function(tx, inst):
    flags = inst.arg
    # 3.8/3.9/3.10 push the qualified name after the code; 3.11+ do not
    top = tx.pop()
    if top.is_python_constant() and isinstance(top.as_python_constant(), str):
        qualname = top.as_python_constant()
        code = tx.pop().as_python_constant()
    else:
        code = top.as_python_constant()
        qualname = code.co_qualname if hasattr(code, "co_qualname") else code.co_name
    closure = tx.pop() if flags & 0x08 else None
    # annotations do not change what the function computes; kept for a rebuild at a break
    annotations = tx.pop() if flags & 0x04 else None
    kwdefaults = tx.pop() if flags & 0x02 else None
    defaults = tx.pop() if flags & 0x01 else None
    cells = closure.items if closure is not None else None
    tx.push(
        NestedFunctionVariable(
            code, qualname, tx.f_globals, defaults, kwdefaults, cells, annotations
        )
    )


@handler("MAKE_FUNCTION", versions=versions("3.13"))
def make_function_313(tx, inst):
    # 3.13 makes a bare function; SET_FUNCTION_ATTRIBUTE adds defaults, closure and the rest
    code = tx.pop().as_python_constant()
    tx.push(NestedFunctionVariable(code, code.co_qualname, tx.f_globals, None, None, None, None))


#: SET_FUNCTION_ATTRIBUTE's flag -> the NestedFunctionVariable field it sets
_FUNCTION_ATTRIBUTES = {0x01: "defaults", 0x02: "kwdefaults", 0x04: "annotations", 0x08: "closure"}


@handler("SET_FUNCTION_ATTRIBUTE", versions=versions("3.13"))
def set_function_attribute(tx, inst):
    fn = tx.pop()
    value = tx.pop()
    field = _FUNCTION_ATTRIBUTES.get(inst.arg)
    if field is None or not isinstance(fn, NestedFunctionVariable):
        raise Unsupported(f"SET_FUNCTION_ATTRIBUTE {inst.arg}", category=UNSUPPORTED_OPCODE)
    # (the function was made by the MAKE_FUNCTION just before: no one else holds it yet)
    setattr(fn, field, value.items if field == "closure" else value)
    tx.push(fn)


@handler("CALL_INTRINSIC_1", versions=versions("3.12", "3.13"))
def call_intrinsic_1(tx, inst):
    from jit_core.variables import TupleVariable

    name = inst.argrepr
    if name == "INTRINSIC_LIST_TO_TUPLE":
        tx.push(TupleVariable(tx.pop().items))
    elif name == "INTRINSIC_UNARY_POSITIVE":
        import operator

        tx.push(tx.unary_op(operator.pos, tx.pop()))
    else:
        raise Unsupported(f"CALL_INTRINSIC_1 {name}", category=UNSUPPORTED_OPCODE)


@handler(
    "CALL_INTRINSIC_2",
    versions=versions("3.12", "3.13"),
    eager="except* re-raising and PEP 695 type parameters run eagerly",
)
def call_intrinsic_2(tx, inst):
    raise Unsupported(f"CALL_INTRINSIC_2 {inst.argrepr}: not captured", category=UNSUPPORTED_OPCODE)


@handler("LOAD_BUILD_CLASS", eager="a class statement inside the function runs eagerly")
def load_build_class(tx, inst):
    raise Unsupported("a class statement inside the captured function", category=UNSUPPORTED_OPCODE)
