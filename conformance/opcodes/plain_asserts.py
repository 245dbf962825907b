"""A function with an ``assert``, outside the test modules: pytest rewrites the ``assert``
statements of test modules into its own reporting code, which would hide the opcodes."""

from __future__ import annotations


def checked(x, limit=10):
    assert x.shape[0] < limit, "too long"
    return x + 1
