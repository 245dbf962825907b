"""Bad input to the public API: an error that names the argument and what is allowed,
raised where the mistake is made (``optimize()``, not the first call), never a traceback
from deep inside."""

from __future__ import annotations

import paddle
import pytest

import jit_core
from jit_core.errors import BackendCompileError, BackendNotFoundError


def f(x):
    return x + 1


X = paddle.ones([2])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"backend": 3}, TypeError, "backend must be the name of a backend"),
        ({"backend": "nope"}, BackendNotFoundError, "installed backends: .*paddle"),
        ({"full_graph": "yes"}, TypeError, "full_graph must be True or False, got 'yes'"),
        ({"recompile_limit": 0}, ValueError, "recompile_limit must be a positive int, got 0"),
        ({"accumulated_recompile_limit": "8"}, ValueError, "accumulated_recompile_limit must"),
        ({"passes": 3}, TypeError, "passes must be None .* got 3"),
        ({"passes": "cse"}, TypeError, "passes must be None .* got 'cse'"),
        ({"disable_passes": [3]}, TypeError, "disable_passes must be a list of pass names"),
        ({"freeze": 1}, TypeError, "freeze must be True or False, got 1"),
        ({"debug": "x"}, TypeError, "debug must be None, True or False, got 'x'"),
        ({"dynamic": "x"}, TypeError, "dynamic must be None, True or False, got 'x'"),
        ({"share_layers": None}, TypeError, "share_layers must be True or False, got None"),
        ({"bogus": 1}, TypeError, "backend 'paddle' takes no option 'bogus'; its options: mode"),
    ],
)
def test_optimize_refuses_bad_options_at_once(kwargs, error, message):
    with pytest.raises(error, match=message):
        jit_core.optimize(f, **kwargs)


def test_optimize_refuses_what_it_cannot_optimize():
    with pytest.raises(TypeError, match="takes a function or a paddle.nn.Layer, got int"):
        jit_core.optimize(3)


def test_a_bad_option_value_names_the_option_when_the_backend_compiles():
    with pytest.raises(BackendCompileError, match="mode must be one of .* got 'fast'"):
        jit_core.optimize(f, mode="fast")(X)


def test_unknown_passes_are_named_with_the_registered_ones():
    from jit_core.passes.manager import PassError

    with pytest.raises(PassError, match="unknown graph pass 'nope'; registered passes: "):
        jit_core.optimize(f, passes=["nope"])(X)


def test_explain_capture_and_replace_pattern_name_what_they_take():
    with pytest.raises(TypeError, match="explain\\(\\) takes a function, a paddle.nn.Layer"):
        jit_core.explain(3)
    with pytest.raises(BackendNotFoundError, match="unknown backend 'nope'"):
        jit_core.explain(f, X, backend="nope")
    with pytest.raises(jit_core.CaptureError, match="cannot capture int"):
        jit_core.capture(3)
    with pytest.raises(jit_core.CaptureError, match="do not fit the signature of f"):
        jit_core.capture(f)
    with pytest.raises(TypeError, match="replace_pattern\\(\\) takes a jit_core GraphModule"):
        jit_core.replace_pattern(3, f, f)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: jit_core.mark_dynamic(3, 0), TypeError, "takes a paddle.Tensor, got int"),
        (lambda: jit_core.mark_dynamic(X, "a"), TypeError, "dim must be an int or a list"),
        (lambda: jit_core.mark_dynamic(X, 1), ValueError, "dimension 1 is out of range"),
        (lambda: jit_core.mark_dynamic(X, 0, min="a"), TypeError, "min must be an int or None"),
        (lambda: jit_core.mark_dynamic(X, 0, min=5, max=2), ValueError, "min \\(5\\) is greater"),
        (lambda: jit_core.mark_static(X, [0, 4]), ValueError, "dimension 4 is out of range"),
        (lambda: jit_core.set_logs("nope"), ValueError, "unknown log channel 'nope'; known: "),
    ],
)
def test_shape_marks_and_logs_refuse_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()
