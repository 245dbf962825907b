"""Every other model of ``paddle.vision.models`` is captured whole, too.

Random weights, ``eval()``, batch 1; inputs as small as each architecture allows.
"""

from __future__ import annotations

import paddle
import pytest
from paddle.vision import models

import jit_core

from .helpers import assert_same

#: model -> input size
ZOO = {
    "alexnet": 224,
    "resnet34": 64,
    "resnext50_32x4d": 64,
    "wide_resnet50_2": 64,
    "densenet121": 64,
    "squeezenet1_0": 224,
    "shufflenet_v2_x0_5": 64,
    "mobilenet_v1": 64,
    "mobilenet_v3_small": 64,
    "mobilenet_v3_large": 64,
    "googlenet": 224,
    "inception_v3": 299,
}


@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_model_is_one_graph(name, backend):
    paddle.seed(11)
    net = getattr(models, name)()
    net.eval()
    x = paddle.rand([1, 3, ZOO[name], ZOO[name]])
    report = jit_core.explain(net, x, backend=backend)
    assert report.graph_count == 1 and report.break_count == 0, str(report)
    with paddle.no_grad():
        assert_same(report.result, net(x), rtol=1e-4, atol=1e-5)
