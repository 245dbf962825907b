"""Graph passes on whole models, on every backend: the default pipeline is on in every
other conformance test; here the inference passes (``freeze=True`` under ``no_grad``) fold
each BatchNorm into the layer before it and the results still equal eager Paddle."""

from __future__ import annotations

import paddle
import pytest
from paddle.nn.layer.norm import _BatchNormBase

import jit_core

from .helpers import assert_same
from .test_models import MODELS, example, make


def _batch_norms(net: paddle.nn.Layer) -> int:
    return sum(isinstance(layer, _BatchNormBase) for layer in net.sublayers())


#: vgg11 has no batch norm to fold, and frozen, its 480 MB of weights become constants that
#: the exporting backends write into their models and read back (20 s a Python on 2 cores);
#: it runs with live weights on every backend in test_models.py
FROZEN_MODELS = sorted(name for name in MODELS if name != "vgg11")


@pytest.mark.parametrize("name", FROZEN_MODELS)
def test_frozen_inference_folds_every_batch_norm(name, backend):
    net = make(name)
    x = example(name, batch=2)
    with paddle.no_grad():
        expected = net(x)
        report = jit_core.explain(jit_core.optimize(net, backend=backend, freeze=True), x)
        fast = jit_core.optimize(net, backend=backend, freeze=True)
        # folding reassociates float arithmetic: random-weight ResNets reach |y| ~ 500, so
        # the absolute tolerance follows the output's magnitude
        atol = 1e-4 + 1e-5 * float(expected.abs().max())
        assert_same(fast(x), expected, rtol=1e-4, atol=atol)
        assert_same(fast(x), expected, rtol=1e-4, atol=atol)
    assert fast.jit_stats.captures == 1
    assert report.graph_count == 1 and report.break_count == 0, str(report)
    records = {line.split(":")[0]: line for line in report.graphs[0].passes}
    folded = _batch_norms(net)
    assert records["bn_fold"].startswith(f"bn_fold: {folded} rewrite"), str(report)
    assert "batch_norm" not in report.graphs[0].code and ".bn" not in report.graphs[0].code
    assert_same(report.result, expected, rtol=1e-4, atol=atol)


def test_passes_off_and_on_agree(backend):
    net = make("resnet18")
    x = example("resnet18")
    plain = jit_core.explain(jit_core.optimize(net, backend=backend, passes=False), x)
    default = jit_core.explain(jit_core.optimize(net, backend=backend), x)
    assert plain.graphs[0].passes == []
    assert [p.split(":")[0] for p in default.graphs[0].passes] == [
        "cse",
        "bn_fold",
        "constant_fold",
        "fuse_patterns",
        "dce",
    ]
    assert_same(default.result, plain.result)
