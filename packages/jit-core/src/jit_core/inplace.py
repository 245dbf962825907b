"""Helpers the generated ``forward`` of a graph calls for in-place updates it captured.

Each returns the tensor it updated, so that the graph has a node for the updated value:
later reads use that node, and passes see the update as an operation with an effect
(its name ends in ``_``, see ``passes.effects``).
"""

from __future__ import annotations

import paddle


def setitem_(x, key, value):
    """``x[key] = value``; returns ``x``."""
    if paddle.in_dynamic_mode():
        x[key] = value
        return x
    # paddle.jit.to_static (the inference backends' export): a new value, used by the
    # nodes after this one in place of ``x``
    return paddle.static.setitem(x, key, value)


def zero_(x):
    """``x.zero_()``; returns ``x`` (a static program has no ``zero_``: a new value)."""
    if paddle.in_dynamic_mode():
        return x.zero_()
    return paddle.zeros_like(x)


def fill_(x, value):
    """``x.fill_(value)``; returns ``x`` (a static program has no ``fill_``: a new value)."""
    if paddle.in_dynamic_mode():
        return x.fill_(value)
    return paddle.full_like(x, value)


#: tensor methods a static program lacks, and the helpers the graph calls for them
METHOD_HELPERS = {"zero_": zero_, "fill_": fill_}

__all__ = ["METHOD_HELPERS", "fill_", "setitem_", "zero_"]
