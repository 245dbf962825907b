"""Jumps, loops and returns. Branches on Python values follow the taken side (the values
are guarded); loops over containers and ranges are unrolled."""

from __future__ import annotations

from jit_core.bytecode import compat
from jit_core.spi import BreaksAtBranch, RunsInPython
from jit_core.variables import ConstantVariable, NullVariable

from .registry import handler, versions

# a branch on a value only known at run time (a tensor's truth) breaks the graph: the
# real value decides, each side goes on in a resume function of its own
_IF_TRUE = BreaksAtBranch(jump_if_true=True)
_IF_FALSE = BreaksAtBranch(jump_if_true=False)


@handler("RETURN_VALUE")
def return_value(tx, inst):
    tx.do_return(tx.pop())


@handler("RETURN_CONST", versions=versions("3.12", "3.13"))
def return_const(tx, inst):
    from jit_core.variables import wrap_static

    tx.do_return(wrap_static(inst.argval))


@handler("JUMP_FORWARD")
@handler("JUMP_ABSOLUTE", versions=versions("3.8", "3.10"))
@handler("JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", versions=versions("3.11", "3.13"))
def jump(tx, inst):
    tx.jump(inst)


def _is_none(v):
    return isinstance(v, ConstantVariable) and v.value is None


@handler("POP_JUMP_IF_TRUE", versions=("3.8", "3.9", "3.10", "3.12", "3.13"), break_as=_IF_TRUE)
@handler(
    "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE", versions=("3.11",), break_as=_IF_TRUE
)
def pop_jump_if_true(tx, inst):
    if tx.pop().truthy(tx):
        tx.jump(inst)


@handler("POP_JUMP_IF_FALSE", versions=("3.8", "3.9", "3.10", "3.12", "3.13"), break_as=_IF_FALSE)
@handler(
    "POP_JUMP_FORWARD_IF_FALSE",
    "POP_JUMP_BACKWARD_IF_FALSE",
    versions=("3.11",),
    break_as=_IF_FALSE,
)
def pop_jump_if_false(tx, inst):
    if not tx.pop().truthy(tx):
        tx.jump(inst)


def _none_check(tx, v):
    # only a constant None is None; tensors, layers and containers never are
    return _is_none(v)


@handler("POP_JUMP_IF_NONE", versions=("3.12", "3.13"))
@handler("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE", versions=("3.11",))
def pop_jump_if_none(tx, inst):
    if _none_check(tx, tx.pop()):
        tx.jump(inst)


@handler("POP_JUMP_IF_NOT_NONE", versions=("3.12", "3.13"))
@handler("POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE", versions=("3.11",))
def pop_jump_if_not_none(tx, inst):
    if not _none_check(tx, tx.pop()):
        tx.jump(inst)


@handler(
    "JUMP_IF_TRUE_OR_POP",
    versions=versions("3.8", "3.11"),
    break_as=BreaksAtBranch(jump_if_true=True, keeps_value=True),
)
def jump_if_true_or_pop(tx, inst):
    if tx.peek().truthy(tx):
        tx.jump(inst)
    else:
        tx.pop()


@handler(
    "JUMP_IF_FALSE_OR_POP",
    versions=versions("3.8", "3.11"),
    break_as=BreaksAtBranch(jump_if_true=False, keeps_value=True),
)
def jump_if_false_or_pop(tx, inst):
    if not tx.peek().truthy(tx):
        tx.jump(inst)
    else:
        tx.pop()


# a loop over what the capture cannot unroll: the iterator is made in CPython
@handler("GET_ITER", break_as=RunsInPython(pops=1, pushes=1))
def get_iter(tx, inst):
    tx.push(tx.iterate(tx.pop()))


@handler("FOR_ITER")
def for_iter(tx, inst):
    it = tx.peek()
    item = it.next_item(tx)
    if item is not None:
        tx.push(item)
        return
    if compat.FOR_ITER_JUMPS_TO_END_FOR:
        # END_FOR pops the iterator and the slot a value would have taken
        tx.push(NullVariable())
    else:
        tx.pop()
    tx.jump(inst)


@handler("END_FOR", versions=versions("3.12", "3.12"))
def end_for(tx, inst):
    tx.pop()
    tx.pop()


@handler("END_FOR", versions=versions("3.13"))
def end_for_313(tx, inst):
    # the POP_TOP after it pops the iterator
    tx.pop()


@handler("TO_BOOL", versions=versions("3.13"))
def to_bool(tx, inst):
    # only a conditional jump or UNARY_NOT reads what it makes, and both take the truth of
    # the value itself (as on 3.12, which has no TO_BOOL); a break at such a jump turns
    # the rebuilt value into a bool first (``compat.pop_jump_forward``)
    pass
