"""Generators: the code of a generator expression or function that a captured frame
consumes runs in a child translator that collects what it yields
(``jit_core.variables.generators``). A captured frame that is itself a generator, and
coroutines, run eagerly (``yield from``/``await`` have no handler)."""

from __future__ import annotations

from jit_core.errors import GENERATOR, Unsupported
from jit_core.variables import ConstantVariable
from jit_core.variables.containers import ListIteratorVariable
from jit_core.variables.generators import LazyIteratorVariable

from .registry import handler, versions


@handler("RETURN_GENERATOR", versions=versions("3.11", "3.13"))
def return_generator(tx, inst):
    # the generator starts: the POP_TOP after it drops the None that the first send brings
    tx.push(ConstantVariable(None))


@handler("GEN_START", versions=versions("3.10", "3.10"))
def gen_start(tx, inst):
    # pops the None of the first send, which the translator never pushes
    pass


@handler("YIELD_VALUE")
def yield_value(tx, inst):
    if tx.yielded is None:
        raise Unsupported("a yield outside a generator the capture runs", category=GENERATOR)
    value = tx.pop()
    region = tx.stepwise_producer()
    if region is not None:
        # the consumer runs here in CPython, with the state the generator left
        if tx.output.grad_mode() != region[3]:
            raise Unsupported(
                f"a yield with the gradient mode changed inside {region[1]}, consumed step "
                "by step (the consumer would run in that mode)",
                category=GENERATOR,
            )
        if not all(isinstance(v, (ListIteratorVariable, LazyIteratorVariable)) for v in tx.stack):
            raise Unsupported(
                f"a yield inside a `with` block or an expression in {region[1]}, consumed "
                "step by step",
                category=GENERATOR,
            )
    tx.yielded.append(value)
    tx.push(ConstantVariable(None))  # what next() sends back
