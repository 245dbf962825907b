"""A backend that builds for fixed shapes gets a graph with dynamic dimensions once per
input shape (``jit_core.kit.shape_dispatch.PerShape``); one that serves dynamic dimensions
gets it once, and may hand it back (``StaticShapesOnly``)."""

from __future__ import annotations

import warnings

import numpy as np
import paddle
import pytest

import jit_core
from jit_core.errors import StaticShapesOnly


class FixedShapeBackend:
    """Builds a graph for the shapes of its examples: a build refuses other shapes, as
    an exported static model would; ``fail_at`` makes the build for one batch size fail."""

    def __init__(self, dynamic_shapes=False, refuse=False):
        self.builds = []  # the input shapes of each build
        self.fail_at = None
        self.dynamic_shapes = dynamic_shapes
        self.refuse = refuse

    @jit_core.hookimpl
    def jit_register_backends(self, register):
        def compile_fn(gm, examples, **options):
            shapes = [list(x.shape) for x in examples]
            if self.refuse and any(n.meta.get("dynamic_dims") for n in gm.graph.nodes):
                raise StaticShapesOnly("this test backend serves one shape at a time")
            if self.fail_at is not None and shapes[0][0] == self.fail_at:
                raise RuntimeError(f"no build at batch {self.fail_at}")
            self.builds.append(shapes)

            def run(*args):
                if not self.dynamic_shapes:
                    assert [list(a.shape) for a in args] == shapes, "a build ran at another shape"
                return gm.forward(*args)

            return run

        register("fixed-shape", compile_fn, dynamic_shapes=self.dynamic_shapes)


@pytest.fixture
def register(install_plugin):
    made = []

    def make(**kwargs):
        made.append(install_plugin(FixedShapeBackend(**kwargs), f"fixed-shape-test-{len(made)}"))
        return made[-1]

    return make


def f(x):
    return paddle.nn.functional.relu(x) * x.shape[0]


def _run(fast, sizes):
    for b in sizes:
        x = paddle.randn([b, 3])
        np.testing.assert_allclose(fast(x).numpy(), f(x).numpy(), rtol=1e-6)


def test_one_build_per_shape_behind_one_capture(register):
    backend = register()
    fast = jit_core.optimize(f, backend="fixed-shape", dynamic=True)
    _run(fast, [2, 3, 2, 4, 3])
    assert fast.jit_stats.captures == 1
    assert backend.builds == [[[2, 3]], [[3, 3]], [[4, 3]]]


def test_past_the_limit_shapes_run_on_paddle_kernels(register):
    backend = register()
    fast = jit_core.optimize(f, backend="fixed-shape", dynamic=True)
    _run(fast, range(2, 14))
    assert len(backend.builds) == 8
    line = jit_core.explain(fast, paddle.randn([5, 3])).graphs[0].backend
    assert "one build per input shape (1 so far)" in line


def test_a_failed_build_runs_that_shape_on_paddle_kernels_with_a_warning(register):
    backend = register()
    backend.fail_at = 3
    fast = jit_core.optimize(f, backend="fixed-shape", dynamic=True)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        _run(fast, [2, 3, 3, 4])
    msgs = [str(w.message) for w in record if "could not build" in str(w.message)]
    assert len(msgs) == 1 and "no build at batch 3" in msgs[0]
    assert backend.builds == [[[2, 3]], [[4, 3]]]


def test_a_dynamic_backend_gets_the_graph_once(register):
    backend = register(dynamic_shapes=True)
    fast = jit_core.optimize(f, backend="fixed-shape", dynamic=True)
    _run(fast, [2, 3, 4])
    assert backend.builds == [[[2, 3]]]


def test_a_dynamic_backend_may_hand_a_graph_back(register):
    backend = register(dynamic_shapes=True, refuse=True)
    fast = jit_core.optimize(f, backend="fixed-shape", dynamic=True)
    _run(fast, [2, 3, 2])
    assert backend.builds == [[[2, 3]], [[3, 3]]]
    line = jit_core.explain(fast, paddle.randn([5, 3])).graphs[0].backend
    assert "this test backend serves one shape at a time" in line


def test_placeholders_carry_mark_dynamic_bounds_for_backends():
    x = paddle.rand([4, 3, 5])
    jit_core.mark_dynamic(x, 0, min=3, max=9)
    jit_core.mark_dynamic(x, 2)
    gm = jit_core.capture(lambda t: t * 2.0, x)
    (node,) = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert node.meta["dynamic_dims"] == [0, 2]
    assert node.meta["dynamic_bounds"] == {0: (3, 9), 2: (None, None)}
