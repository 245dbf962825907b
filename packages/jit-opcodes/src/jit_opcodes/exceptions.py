"""Exception blocks on the paths where nothing raises.

The capture never simulates a raised exception: anything that would raise stops the
capture and the frame runs eagerly, so Python itself takes the except/finally paths.
What remains is the bookkeeping of the normal path through try/finally blocks.
"""

from __future__ import annotations

from jit_core.errors import Unsupported
from jit_core.variables import NullVariable

from .registry import handler, versions

_WITH = "`with` blocks are not captured yet"
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
        raise Unsupported("END_FINALLY with an exception pending")


@handler(
    "POP_FINALLY",
    "CALL_FINALLY",
    versions=versions("3.8", "3.8"),
    eager="return/break through a finally block is not captured yet",
)
def finally_jumps(tx, inst):
    raise Unsupported(f"{inst.opname}: return/break through a finally block is not captured yet")


@handler("SETUP_WITH", versions=versions("3.8", "3.10"), eager=_WITH)
@handler("BEFORE_WITH", versions=versions("3.11", "3.12"), eager=_WITH)
def with_block(tx, inst):
    raise Unsupported(_WITH)


@handler("RAISE_VARARGS", eager=_RAISES)
@handler("RERAISE", versions=versions("3.9", "3.12"), eager=_RAISES)
def raise_varargs(tx, inst):
    raise Unsupported(_RAISES)


@handler(
    "LOAD_ASSERTION_ERROR",
    versions=versions("3.9", "3.12"),
    eager=_ASSERT,
)
def load_assertion_error(tx, inst):
    raise Unsupported(_ASSERT)
