"""The compiled tensor check of guards (``jit_core.runtime.native``): it decides exactly
as the Python checks do, and where it cannot be built the guards keep the Python checks
and say why."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import paddle
import pytest

import jit_core
from jit_core.runtime import native

#: set by the nox tests session, which installs a C++ compiler: there a missing build fails
REQUIRE_ENV = "JIT_REQUIRE_NATIVE_GUARDS"


@pytest.fixture
def compiled():
    if native.tensor_is() is None:
        why = native.status()
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(why)
        pytest.skip(why)


def scaled(x):
    return x * 2 + 1


def inputs():
    """Tensors that differ from a float32 [2, 3] in one respect each, and one that does not
    (twice: the same tensor again, and a new one)."""
    base = paddle.rand([2, 3])
    grad = paddle.rand([2, 3])
    grad.stop_gradient = False
    reshaped = paddle.rand([3, 2])
    reshaped.reshape_([2, 3])  # the same shape by another way
    return [
        base,
        base,
        paddle.rand([2, 3]),
        paddle.rand([3, 2]),
        paddle.rand([2, 3, 1]),
        paddle.rand([6]),
        paddle.rand([2, 3]).astype("float64"),
        paddle.ones([2, 3], dtype="int64"),
        paddle.ones([2, 3], dtype="float16"),
        paddle.zeros([0, 3]),
        paddle.to_tensor(1.5),
        paddle.rand([4, 6])[:2, :3],  # a view of that shape
        reshaped,
        grad,
        paddle.create_parameter([2, 3], "float32"),  # a subclass of Tensor
    ]


def run_all(monkeypatch, on: bool):
    monkeypatch.setenv(native.ENABLE_ENV, "1" if on else "0")
    opt = jit_core.optimize(scaled, dynamic=False, recompile_limit=32)
    results = []
    for x in inputs() * 2:
        got = opt(x)
        np.testing.assert_allclose(got.numpy(), scaled(x).numpy(), rtol=1e-3)
        results.append((tuple(got.shape), str(got.dtype), got.stop_gradient))
    guard = jit_core.explain(scaled, paddle.rand([2, 3])).guards[0]
    return results, opt.jit_stats.captures, guard


def test_the_compiled_check_decides_as_the_python_one(compiled, monkeypatch):
    results_on, captures_on, guard_on = run_all(monkeypatch, on=True)
    results_off, captures_off, guard_off = run_all(monkeypatch, on=False)
    assert results_on == results_off
    # one capture per kind of tensor, none again in the second round, either way
    assert captures_on == captures_off == 11
    assert "___tensor_is_" in guard_on and "(2, 3), ___dtype_float32)" in guard_on
    assert "is_same_shape" not in guard_on
    assert "is_same_shape" in guard_off and "___tensor_is_" not in guard_off


def test_the_check_itself(compiled):
    check = native.tensor_is()
    code = native.dtype_code(paddle.float32)
    x = paddle.rand([2, 3])
    assert check(x, paddle.Tensor, (2, 3), code) is True
    assert check(x, paddle.Tensor, (3, 2), code) is False
    assert check(x, paddle.Tensor, (2, 3, 1), code) is False
    assert check(x, paddle.Tensor, (2, 3), native.dtype_code(paddle.float64)) is False
    assert check(np.zeros([2, 3], "float32"), paddle.Tensor, (2, 3), code) is False
    assert check(None, paddle.Tensor, (), code) is False
    p = paddle.create_parameter([2, 3], "float32")
    assert check(p, paddle.Tensor, (2, 3), code) is False  # exactly the type
    assert check(p, type(p), (2, 3), code) is True
    # a type that is not a tensor's is never read as one
    assert check(x, int, (2, 3), code) is False
    with pytest.raises(TypeError):
        check(x, paddle.Tensor, [2, 3], code)


def test_a_list_of_tensors_is_checked_the_same_way(compiled):
    def total(xs):
        return paddle.add_n(xs) * 2

    opt = jit_core.optimize(total, dynamic=False)
    xs = [paddle.rand([3]) for _ in range(3)]
    opt(xs)
    ys = [paddle.rand([3]), paddle.rand([3]).astype("float64"), paddle.rand([3])]
    with pytest.raises(Exception):  # noqa: B017 - eager raises too: add_n of two dtypes
        total(ys)
    with pytest.raises(Exception):  # noqa: B017
        opt(ys)
    zs = [paddle.rand([3]) for _ in range(3)]
    np.testing.assert_allclose(opt(zs).numpy(), total(zs).numpy(), rtol=1e-6)


def test_a_dynamic_shape_keeps_the_python_check(compiled):
    def f(x):
        return x + 1

    opt = jit_core.optimize(f, dynamic=True)
    for n in (2, 3, 4):
        x = paddle.rand([n, 5])
        np.testing.assert_allclose(opt(x).numpy(), f(x).numpy())
    _, _, cache = opt._fast
    guard = cache.entries[-1].guard.source
    assert "___tensor_is_" not in guard and ">= 2" in guard  # the size of any length


def test_status_says_whether_it_is_on(monkeypatch):
    monkeypatch.setenv(native.ENABLE_ENV, "0")
    assert native.status().startswith("off")
    assert native.tensor_is() is None
    monkeypatch.setenv(native.ENABLE_ENV, "1")
    assert native.status().startswith(("on: ", "unavailable"))


def test_loading_it_draws_no_random_numbers(compiled, monkeypatch):
    """Its self-test makes tensors, a parameter among them: none of them may draw from the
    user's stream, which a process's first capture (or a call of ``status()``) would shift."""
    monkeypatch.setattr(native, "_module", None)
    monkeypatch.setattr(native, "_reason", None)
    paddle.seed(3)
    want = paddle.rand([4]).numpy()
    paddle.seed(3)
    assert native.status().startswith("on: ")
    np.testing.assert_array_equal(paddle.rand([4]).numpy(), want)


SCRIPT = textwrap.dedent(
    """
    import warnings
    warnings.filterwarnings("ignore")
    import paddle, jit_core
    from jit_core.runtime import native

    def f(x):
        return x * 2 + 1

    opt = jit_core.optimize(f)
    x = paddle.rand([2, 3])
    assert paddle.allclose(opt(x), f(x)).item()
    y = paddle.rand([2, 3]).astype("float64")
    assert paddle.allclose(opt(y), f(y)).item() and opt.jit_stats.captures == 2
    guard = jit_core.explain(f, x).guards[0]
    print(native.status())
    print("python checks" if "is_same_shape" in guard else "compiled checks")
    """
)


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """The module as a new process finds it, with its builds in ``tmp_path`` (the state
    of this process is put back afterwards)."""
    monkeypatch.setattr(native, "_module", None)
    monkeypatch.setattr(native, "_reason", None)
    monkeypatch.setattr(native, "_dtype_codes", {})
    monkeypatch.setenv(native.DIR_ENV, str(tmp_path))
    monkeypatch.delenv(native.ENABLE_ENV, raising=False)
    return tmp_path


def checks_in_a_guard() -> str:
    """Which checks the guards of a new capture use; its calls give eager's results."""

    def f(x):
        return x * 2 + 1

    opt = jit_core.optimize(f)
    x = paddle.rand([2, 3])
    np.testing.assert_allclose(opt(x).numpy(), f(x).numpy())
    y = paddle.rand([2, 3]).astype("float64")
    np.testing.assert_allclose(opt(y).numpy(), f(y).numpy())
    assert opt.jit_stats.captures == 2
    guard = jit_core.explain(f, x).guards[0]
    return "python checks" if "is_same_shape" in guard else "compiled checks"


def test_without_a_compiler_guards_stay_in_python(fresh, monkeypatch):
    monkeypatch.setenv("CXX", str(fresh / "no-such-compiler"))
    assert checks_in_a_guard() == "python checks"
    status = native.status()
    assert status.startswith("unavailable") and "no C++ compiler" in status


def test_a_failed_build_is_said_and_not_tried_again(fresh, monkeypatch):
    monkeypatch.setenv("CXX", "false")  # a "compiler" that fails
    assert checks_in_a_guard() == "python checks"
    assert "the build failed" in native.status()
    # the next process finds the failure and does not build again
    monkeypatch.setattr(native, "_reason", None)
    assert "its build failed before" in native.status()
    assert checks_in_a_guard() == "python checks"


def test_a_folder_that_cannot_be_written_keeps_the_python_checks(fresh, monkeypatch):
    blocker = fresh / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(native.DIR_ENV, str(blocker / "native"))
    assert checks_in_a_guard() == "python checks"
    status = native.status()
    assert status.startswith("unavailable") and "Error" in status


def test_two_processes_build_it_at_once(compiled, tmp_path):
    full = dict(os.environ, GLOG_minloglevel="2", JIT_CORE_NATIVE_DIR=str(tmp_path))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT], env=full, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300)[0].strip().splitlines() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    for out in outs:
        assert out[-2].startswith("on: ") and out[-1] == "compiled checks"
    built = [f for _, _, files in os.walk(tmp_path) for f in files]
    assert len([f for f in built if f.startswith(native.MODULE)]) == 1, built
    assert not [f for f in built if f.endswith(".tmp")], built
