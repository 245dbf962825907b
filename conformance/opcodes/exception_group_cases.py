"""A function with ``except*`` (3.11+ syntax: imported by test_exceptions_and_generators.py
only on 3.11 and later)."""

from __future__ import annotations


def handle_group(x, fail=False):
    try:
        if fail:
            raise ExceptionGroup("two", [ValueError(1), TypeError(2)])
        y = x + 1
    except* ValueError:
        y = x - 1
    except* TypeError:
        y = x * 2
    return y
