"""An opcode plugin: ``-tensor`` becomes ``paddle.neg(tensor)`` in the graph."""

from __future__ import annotations

import operator

import paddle

from jit_core import hookimpl
from jit_core.variables import TensorVariable

__version__ = "0.2.0"

#: how many instructions this handler simulated (the test reads it)
calls = 0


def unary_negative(tx, inst) -> None:
    """``tx`` is jit-core's symbolic executor, ``inst`` the ``dis.Instruction``."""
    global calls
    calls += 1
    value = tx.pop()
    if isinstance(value, TensorVariable):
        # a node of the graph, run once on the example value for its shape and dtype
        tx.push(tx.output.call_function(tx, paddle.neg, [value], {}))
    else:
        # anything else (ints, constants...) the way jit-opcodes does it
        tx.push(tx.unary_op(operator.neg, value))


@hookimpl
def jit_register_opcodes(register):
    # the default priority (10) wins over jit-opcodes' handlers (priority 0)
    register(
        "UNARY_NEGATIVE", unary_negative, versions=("3.8", "3.9", "3.10", "3.11", "3.12", "3.13")
    )
