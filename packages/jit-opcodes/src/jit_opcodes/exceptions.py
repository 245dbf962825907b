"""Exception blocks: the normal path through try/finally blocks, and the handlers of
exceptions the capture raises itself.

Most of what would raise stops the capture (the graph breaks before the ``try`` block,
or the frame runs eagerly), so Python itself takes the except/finally paths. An
exception that would be raised at every call the guards admit (``errors.Raised``: a
Paddle getter that raises outside a distributed run) is taken to its ``except`` clause
by the executor (``Translator._to_handler``); the handlers below match it and leave the
handler. 3.8-3.10 keep the block stack that finds the handler (``tx.scratch["blocks"]``:
kind, handler offset, stack depth); 3.11+ read the exception table.
"""

from __future__ import annotations

from jit_core.bytecode.compat import HAS_EXCEPTION_TABLE
from jit_core.errors import INTERNAL, RAISES, UNSUPPORTED_OPCODE, Raised, Unsupported
from jit_core.variables import ConstantVariable, NullVariable
from jit_core.variables.contexts import enter_context
from jit_core.variables.exceptions import except_matches, exception_raised

from .registry import handler, versions

_RAISES = "raising: the frame runs eagerly so Python raises the exception itself"
_ASSERT = "a failing assert: the frame runs eagerly so Python raises AssertionError"


def _blocks(tx) -> list:
    return tx.scratch.setdefault("blocks", [])


@handler("SETUP_FINALLY", versions=versions("3.8", "3.10"))
def setup_finally(tx, inst):
    _blocks(tx).append(("finally", inst.argval, len(tx.stack)))


@handler("POP_BLOCK", versions=versions("3.8", "3.10"))
def pop_block(tx, inst):
    blocks = _blocks(tx)
    if blocks:
        blocks.pop()


@handler("PUSH_EXC_INFO", versions=versions("3.11", "3.13"))
def push_exc_info(tx, inst):
    exc = tx.pop()
    tx.push(ConstantVariable(None))  # the exception being handled before: none
    tx.push(exc)


@handler("CHECK_EXC_MATCH", versions=versions("3.11", "3.13"))
def check_exc_match(tx, inst):
    wanted = tx.pop()
    tx.push(ConstantVariable(except_matches(tx.peek(), wanted)))


@handler("JUMP_IF_NOT_EXC_MATCH", versions=versions("3.9", "3.10"))
def jump_if_not_exc_match(tx, inst):
    wanted = tx.pop()
    if not except_matches(tx.pop(), wanted):
        tx.jump(inst)


@handler("POP_EXCEPT")
def pop_except(tx, inst):
    if not tx.output.handlers_running:
        raise Unsupported("leaving an exception handler the capture did not enter", category=RAISES)
    if HAS_EXCEPTION_TABLE:
        tx.pop()  # the exception handled before this one
    else:
        blocks = _blocks(tx)
        if not blocks or blocks[-1][0] != "except-handler":
            raise Unsupported("POP_EXCEPT without its handler block", category=INTERNAL)
        blocks.pop()
        # the exception state before (traceback, value, type), which CPython restores: a
        # value returned from the handler was rotated below them (ROT_FOUR)
        tx.popn(3)
    tx.output.handlers_running -= 1


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
    if inst.opname == "SETUP_WITH":
        # (3.8-3.10) the block an exception inside would go to: __exit__ sees it
        _blocks(tx).append(("with", inst.argval, len(tx.stack)))
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
def raise_varargs(tx, inst):
    if inst.arg == 1:
        # ``raise E(...)`` of a built-in exception the frame made from constants: the
        # executor takes it to the handler of the try block around it, if this code or a
        # caller's has one (else the graph breaks here and Python raises it)
        exc = exception_raised(tx.peek())
        if exc is not None:
            raise Raised(exc, _RAISES, made_here=True)
    raise Unsupported(_RAISES, category=RAISES)


@handler("RERAISE", versions=versions("3.9", "3.13"), eager=_RAISES)
def reraise(tx, inst):
    raise Unsupported(_RAISES, category=RAISES)


@handler(
    "LOAD_ASSERTION_ERROR",
    versions=versions("3.9", "3.13"),
    eager=_ASSERT,
)
def load_assertion_error(tx, inst):
    raise Unsupported(_ASSERT, category=RAISES)
