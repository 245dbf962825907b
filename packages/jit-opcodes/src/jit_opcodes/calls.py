"""Calls in every calling convention from 3.8 to 3.12, and MAKE_FUNCTION."""

from __future__ import annotations

from jit_core.errors import DYNAMIC_VALUE, INTERNAL, UNSUPPORTED_OPCODE, Unsupported
from jit_core.variables import DictVariable, NestedFunctionVariable, NullVariable

from .registry import handler, versions


def _split_kwargs(args, names):
    if not names:
        return list(args), {}
    n = len(names)
    return list(args[:-n]), dict(zip(names, args[-n:]))


@handler("CALL_FUNCTION", versions=versions("3.8", "3.10"))
def call_function(tx, inst):
    args = tx.popn(inst.arg)
    fn = tx.pop()
    tx.push(tx.call(fn, args, {}))


@handler("CALL_FUNCTION_KW", versions=versions("3.8", "3.10"))
def call_function_kw(tx, inst):
    names = tx.pop().as_python_constant()
    args = tx.popn(inst.arg)
    fn = tx.pop()
    pos, kw = _split_kwargs(args, names)
    tx.push(tx.call(fn, pos, kw))


@handler("CALL_METHOD", versions=versions("3.8", "3.10"))
def call_method(tx, inst):
    args = tx.popn(inst.arg)
    fn = tx.pop()
    self_or_null = tx.pop()
    if not isinstance(self_or_null, NullVariable):
        # LOAD_METHOD pushed (method, self): call method(self, *args)
        fn, args = self_or_null, [fn] + args
    tx.push(tx.call(fn, args, {}))


def _call_ex(tx, inst, pops_null):
    kwargs = tx.pop() if inst.arg & 1 else None
    args = tx.pop()
    fn = tx.pop()
    if pops_null:
        null = tx.pop()
        if not isinstance(null, NullVariable):
            raise Unsupported("CALL_FUNCTION_EX without the NULL it expects", category=INTERNAL)
    if kwargs is not None and not isinstance(kwargs, DictVariable):
        raise Unsupported(f"** unpacking of {kwargs.describe()}", category=DYNAMIC_VALUE)
    tx.push(tx.call(fn, args.unpack_var_sequence(tx), dict(kwargs.items) if kwargs else {}))


@handler("CALL_FUNCTION_EX", versions=versions("3.8", "3.10"))
def call_function_ex(tx, inst):
    _call_ex(tx, inst, pops_null=False)


@handler("CALL_FUNCTION_EX", versions=versions("3.11", "3.12"))
def call_function_ex_311(tx, inst):
    _call_ex(tx, inst, pops_null=True)


@handler("KW_NAMES", versions=versions("3.11", "3.12"))
def kw_names(tx, inst):
    # the argument indexes co_consts; 3.11's dis shows it as "<unknown>", so never trust argval
    tx.kw_names = tuple(tx.code.co_consts[inst.arg])


@handler("CALL", versions=versions("3.11", "3.12"))
def call_311(tx, inst):
    args = tx.popn(inst.arg)
    second = tx.pop()
    first = tx.pop()
    if isinstance(first, NullVariable):
        fn = second
    else:
        fn, args = first, [second] + args
    pos, kw = _split_kwargs(args, tx.kw_names)
    tx.kw_names = ()
    tx.push(tx.call(fn, pos, kw))


@handler("MAKE_FUNCTION")
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


@handler("CALL_INTRINSIC_1", versions=versions("3.12"))
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
    versions=versions("3.12"),
    eager="except* re-raising and PEP 695 type parameters run eagerly",
)
def call_intrinsic_2(tx, inst):
    raise Unsupported(f"CALL_INTRINSIC_2 {inst.argrepr}: not captured", category=UNSUPPORTED_OPCODE)


@handler("LOAD_BUILD_CLASS", eager="a class statement inside the function runs eagerly")
def load_build_class(tx, inst):
    raise Unsupported("a class statement inside the captured function", category=UNSUPPORTED_OPCODE)
