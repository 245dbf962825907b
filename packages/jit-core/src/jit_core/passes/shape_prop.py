"""Recompute ``meta["shape"]``/``meta["dtype"]`` of every node by running the graph once.

Passes that insert nodes without knowing their shapes (``replace_pattern`` copies the
replacement's nodes, whose examples had other shapes) invalidate the ``shapes`` property;
the pass manager calls this before the next pass that requires it.
"""

from __future__ import annotations

from typing import Any, List

import paddle

from .. import rng
from ..fx import Interpreter
from ..fx.interpreter import run_leaf_layer


class _ShapeProp(Interpreter):
    def run_node(self, node):
        value = super().run_node(node)
        if isinstance(value, paddle.Tensor):
            node.meta["shape"] = list(value.shape)
            node.meta["dtype"] = str(value.dtype).replace("paddle.", "")
        else:
            node.meta.pop("shape", None)
            node.meta.pop("dtype", None)
        return value

    def call_module(self, target, args, kwargs):
        # a training-mode BatchNorm must not update its statistics here
        return run_leaf_layer(getattr(self.gm, target), args, kwargs)


def propagate_shapes(gm, example_inputs: List[Any]) -> None:
    with rng.preserved(), paddle.no_grad():
        _ShapeProp(gm).run(*example_inputs)
