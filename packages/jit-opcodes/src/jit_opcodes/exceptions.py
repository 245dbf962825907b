"""Exception blocks on the paths where nothing raises.

The capture never simulates a raised exception: anything that would raise stops the
capture and the frame runs eagerly, so Python itself takes the except/finally paths.
What remains is the bookkeeping of the normal path through try/finally blocks.
"""

from __future__ import annotations

from jit_core.errors import RAISES, UNSUPPORTED_OPCODE, Unsupported
from jit_core.variables import ConstantVariable, NullVariable
from jit_core.variables.contexts import enter_context

from .registry import handler, versions

_RAISES = "raising: the frame runs eagerly so Python raises the exception itself"
_ASSERT = "a failing assert: the frame runs eagerly so Python raises AssertionError"


@handler("SETUP_FINALLY", "POP_BLOCK", versions=versions("3.8", "3.10"))
def block_bookkeeping(tx, inst):
    pass


@handler("BEGIN_FINALLY", versions=versions("3.8", "3.8"))
def begin_finally(tx, inst):
    # entering a finally block normally: NULL marks "no exception, no return pending"
    tx.push(NullVariable())


@handler("END_FINALLY", versions=versions("3.8", "3.8"))
def end_finally(tx, inst):
    top = tx.pop()
    if not isinstance(top, NullVariable):
        raise Unsupported("END_FINALLY with an exception pending", category=RAISES)


@handler(
    "POP_FINALLY",
    "CALL_FINALLY",
    versions=versions("3.8", "3.8"),
    eager="return/break through a finally block is not captured yet",
)
def finally_jumps(tx, inst):
    raise Unsupported(
        f"{inst.opname}: return/break through a finally block is not captured yet",
        category=UNSUPPORTED_OPCODE,
    )


@handler("SETUP_WITH", versions=versions("3.8", "3.10"))
@handler("BEFORE_WITH", versions=versions("3.11", "3.13"))
def with_block(tx, inst):
    # gradient mode, auto_cast and plain-Python context managers are modelled; the
    # normal way out calls the __exit__ pushed here with (None, None, None)
    exit_fn, entered = enter_context(tx, tx.pop())
    tx.push(exit_fn)
    tx.push(entered)


@handler("WITH_CLEANUP_START", versions=versions("3.8", "3.8"))
def with_cleanup_start(tx, inst):
    # 3.8's normal way out of a with block: BEGIN_FINALLY pushed the NULL "nothing
    # pending"; __exit__(None, None, None) is called from below it
    marker = tx.pop()
    if not isinstance(marker, NullVariable):
        raise Unsupported("leaving a `with` block with an exception pending", category=RAISES)
    exit_fn = tx.pop()
    none = ConstantVariable(None)
    result = tx.call(exit_fn, [none, none, none], {})
    tx.push(marker)
    tx.push(none)
    tx.push(result)


@handler("WITH_CLEANUP_FINISH", versions=versions("3.8", "3.8"))
def with_cleanup_finish(tx, inst):
    tx.pop()  # what __exit__ returned: nothing to suppress on the normal way out
    tx.pop()  # the None that stands for "no exception"


@handler("RAISE_VARARGS", eager=_RAISES)
@handler("RERAISE", versions=versions("3.9", "3.13"), eager=_RAISES)
def raise_varargs(tx, inst):
    raise Unsupported(_RAISES, category=RAISES)


@handler(
    "LOAD_ASSERTION_ERROR",
    versions=versions("3.9", "3.13"),
    eager=_ASSERT,
)
def load_assertion_error(tx, inst):
    raise Unsupported(_ASSERT, category=RAISES)
