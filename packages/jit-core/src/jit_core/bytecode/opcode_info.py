"""One table of opcode and code-flag facts, for every Python version jit-core serves.

The executor, the frame hook and the code generators used to keep their own copies of
these sets; a name that 3.x adds now goes in one place."""

from __future__ import annotations

import dis

#: ``co_flags`` of a generator function
CO_GENERATOR = 0x20
#: generators, coroutines, iterable coroutines and async generators: a frame of one of
#: these suspends, so jit-core never captures it as a whole
GENERATOR_FLAGS = (
    CO_GENERATOR
    | 0x80  # CO_COROUTINE
    | 0x100  # CO_ITERABLE_COROUTINE
    | 0x200  # CO_ASYNC_GENERATOR
)

#: instructions after which control never falls through to the next one
TERMINAL = frozenset({"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"})
#: jumps that are always taken (3.8-3.10's JUMP_ABSOLUTE, 3.11+'s JUMP_BACKWARD...)
UNCONDITIONAL_JUMPS = frozenset(
    {"JUMP_FORWARD", "JUMP_ABSOLUTE", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"}
)
#: instructions whose next instruction never runs right after them
NO_FALL_THROUGH = TERMINAL | UNCONDITIONAL_JUMPS
#: the opcodes, of the running Python, whose argument is a jump target
JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)
