"""Stack shuffles and the no-ops of each version."""

from __future__ import annotations

from jit_core.variables import NullVariable

from .registry import handler, versions


@handler("NOP")
def nop(tx, inst):
    pass


@handler("RESUME", "MAKE_CELL", "COPY_FREE_VARS", versions=versions("3.11", "3.13"))
@handler("PRECALL", versions=("3.11",))
def nop_311(tx, inst):
    # RESUME does nothing observable; PRECALL's work is done by CALL; cells and free
    # variables are set up by the translator before the first instruction.
    pass


@handler("EXTENDED_ARG")
def extended_arg(tx, inst):
    # dis already folded the extended argument into the next instruction
    pass


@handler("POP_TOP")
def pop_top(tx, inst):
    tx.pop()


@handler("PUSH_NULL", versions=versions("3.11", "3.13"))
def push_null(tx, inst):
    tx.push(NullVariable())


@handler("ROT_TWO", "ROT_THREE", "ROT_FOUR", versions=versions("3.8", "3.10"))
def rot(tx, inst):
    n = {"ROT_TWO": 2, "ROT_THREE": 3, "ROT_FOUR": 4}[inst.opname]
    _rot_n(tx, n)


@handler("ROT_N", versions=versions("3.10", "3.10"))
def rot_n(tx, inst):
    _rot_n(tx, inst.arg)


def _rot_n(tx, n):
    top = tx.pop()
    rest = tx.popn(n - 1)
    tx.push(top)
    for v in rest:
        tx.push(v)


@handler("DUP_TOP", versions=versions("3.8", "3.10"))
def dup_top(tx, inst):
    tx.push(tx.peek())


@handler("DUP_TOP_TWO", versions=versions("3.8", "3.10"))
def dup_top_two(tx, inst):
    a, b = tx.peek(2), tx.peek(1)
    tx.push(a)
    tx.push(b)


@handler("COPY", versions=versions("3.11", "3.13"))
def copy(tx, inst):
    tx.push(tx.peek(inst.arg))


@handler("SWAP", versions=versions("3.11", "3.13"))
def swap(tx, inst):
    i = inst.arg
    tx.stack[-1], tx.stack[-i] = tx.stack[-i], tx.stack[-1]
