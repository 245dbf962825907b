"""NumPy inside captured code: arrays made from tensors (``t.numpy()``, ``np.asarray(t)``),
NumPy's operators and functions on them, and the way back (``paddle.to_tensor``, or an
ndarray returned) are computed in the graph, with NumPy's dtypes (its promotion rules and
float64 defaults). Each program is checked against eager for values, types and dtypes,
with exact graph and break counts; what the graph does not compute breaks it, saying why."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

import jit_core

from .helpers import BACKEND_TOLERANCE


def x_input():
    return paddle.to_tensor(np.linspace(-2.0, 3.0, 12, dtype="float32").reshape([3, 4]))


def i_input():
    return paddle.to_tensor(np.arange(-5, 7, dtype="int32").reshape([3, 4]))


# each program: a function of a float32 [3, 4] tensor (or an int32 one: ``_int``)
def exp_plus_one(x):
    return np.exp(x.numpy()) + 1


def float64_default(x):
    # a Python float keeps float32 (NumPy's rules); a float64 array promotes
    a = x.numpy()
    return a * 2.5 + np.ones(4)


def back_to_tensor(x):
    a = x.numpy()
    return paddle.to_tensor(np.tanh(a) * 3) + x


def asarray_of_tensor(x):
    return np.asarray(x) ** 2 - np.sqrt(np.abs(np.asarray(x)))


def array_with_dtype(x):
    return np.array(x, dtype="float64") / 3


def int_true_division_int(i):
    return i.numpy() / 2  # float64 in NumPy, an int kernel's rounding in Paddle


def int_floor_division_int(i):
    a = i.numpy()
    return a // 3, a % 3, a // -4


def int_plus_float(i):
    return i.numpy() + 0.5


def int_sum_is_int64(i):
    return np.sum(i.numpy()), i.numpy().sum(axis=0)


def int_mean_is_float64(i):
    return i.numpy().mean(), np.mean(i.numpy(), axis=1, keepdims=True)


def reductions(x):
    a = x.numpy()
    return a.max(), a.min(axis=1), np.prod(a, axis=0), a.std(), np.var(a, axis=1, ddof=1)


def argmax_argmin(x):
    a = x.numpy()
    return a.argmax(), np.argmin(a, axis=1), np.argmax(a, axis=0)


def argmax_with_nan(x):
    a = x.numpy() / x.numpy()  # 0/0 is NaN: NumPy's argmax gives the first NaN
    return np.argmax(a), np.argmax(a, axis=1)


def maximum_with_nan(x):
    a = np.log(x.numpy())  # NaN where x < 0
    return np.maximum(a, 0.5), np.minimum(0.5, a)


def comparisons(x):
    a = x.numpy()
    return a > 0, a <= 1.0, a == a, np.not_equal(a, 0)


def logical(x):
    a = x.numpy()
    return np.logical_and(a > -1, a < 1), (a > 0) | (a < -1), ~(a > 0)


def where_and_clip(x):
    a = x.numpy()
    return np.where(a > 0, a, 0.0), np.clip(a, -1, 1)


def where_broadcasting(x):
    a = x.numpy()
    return np.where(a[:, :1] > 0, a, np.zeros(4, dtype="float32"))


def shape_functions(x):
    a = x.numpy()
    return a.reshape(4, 3), a.T, np.transpose(a), a.reshape(-1), np.expand_dims(a, 0)


def squeeze_and_flatten(x):
    a = x.numpy()[:1]
    return np.squeeze(a), a.flatten(), a.ravel()


def concatenate_and_stack(x):
    a = x.numpy()
    return np.concatenate([a, a * 2], axis=0), np.stack([a, -a], axis=1), np.concatenate((a, a), 1)


def concatenate_with_a_constant(x):
    return np.concatenate([x.numpy(), np.zeros((1, 4), dtype="float32")])


def indexing(x):
    a = x.numpy()
    return a[0], a[1, 2], a[:, 1:3], a[None, ::2], a[..., -1]


def astype_chain(x):
    a = x.numpy()
    return (a * 10).astype("int64") % 7, a.astype(np.float64).dtype


def matmul_and_dot(x):
    a = x.numpy()
    return a @ a.T, np.dot(a, np.ones(4, dtype="float32")), np.matmul(a.T, a)


def shape_attributes(x):
    a = x.numpy()
    return a.shape, a.ndim, a.size, a.dtype, len(a), np.shape(a)


def unary_functions(x):
    a = x.numpy()
    return np.sin(a), np.cos(a), np.floor(a), np.ceil(a), np.sign(a), np.square(a), -a


def expm1_log1p(x):
    a = np.abs(x.numpy())
    return np.expm1(a), np.log1p(a), np.log2(a + 1), np.log10(a + 1)


def mixed_with_tensor_ops(x):
    h = paddle.nn.functional.relu(x) * 2
    a = h.numpy()
    s = float(3)  # a Python constant
    b = paddle.to_tensor(a * s + 1, dtype="float32")
    return paddle.matmul(b, b.T).mean() + x.sum()


def scalar_results(x):
    a = x.numpy()
    total = a.sum()
    return total * 2, total > 0, np.float64(1.5) + a.mean()


def a_scalar_from_indexing(i):
    a = i.numpy()
    return a[0, 0] + a[2, 3], a[1] * a[1, 1]


def int_power_and_bitwise(i):
    a = i.numpy()
    return a**2, a & 3, a | 8, a ^ 5, np.abs(a)


def arrays_in_a_dict(x):
    a = x.numpy()
    return {"exp": np.exp(a), "n": a.shape[0], "rows": [a[0], a[1]]}


def through_a_helper(x):
    def normalize(arr):
        return (arr - arr.mean(axis=1, keepdims=True)) / (arr.std(axis=1, keepdims=True) + 1e-6)

    return paddle.to_tensor(normalize(x.numpy()))


def isnan_and_isfinite(x):
    a = np.log(x.numpy())
    return np.isnan(a), np.isfinite(a), np.where(np.isnan(a), 0.0, a)


def any_and_all(x):
    a = x.numpy()
    return np.any(a > 2), (a > -3).all(), np.all(a > 0, axis=1)


def copy_is_a_new_array(x):
    a = x.numpy()
    b = a.copy()
    return a is b, b + 1


def nan_clipped(x):
    a = np.log(x.numpy())
    return np.clip(a, -1.0, 0.5)


PROGRAMS = [
    exp_plus_one,
    float64_default,
    back_to_tensor,
    asarray_of_tensor,
    array_with_dtype,
    int_true_division_int,
    int_floor_division_int,
    int_plus_float,
    int_sum_is_int64,
    int_mean_is_float64,
    reductions,
    argmax_argmin,
    argmax_with_nan,
    maximum_with_nan,
    comparisons,
    logical,
    where_and_clip,
    where_broadcasting,
    shape_functions,
    squeeze_and_flatten,
    concatenate_and_stack,
    concatenate_with_a_constant,
    indexing,
    astype_chain,
    matmul_and_dot,
    shape_attributes,
    unary_functions,
    expm1_log1p,
    mixed_with_tensor_ops,
    scalar_results,
    a_scalar_from_indexing,
    int_power_and_bitwise,
    arrays_in_a_dict,
    through_a_helper,
    isnan_and_isfinite,
    any_and_all,
    copy_is_a_new_array,
    nan_clipped,
]
_INT_PROGRAMS = {
    int_true_division_int,
    int_floor_division_int,
    int_plus_float,
    int_sum_is_int64,
    int_mean_is_float64,
    a_scalar_from_indexing,
    int_power_and_bitwise,
}


def assert_numpy_same(actual, expected, rtol: float) -> None:
    """Types, dtypes and shapes exactly; values to ``rtol`` (NaN where eager has NaN)."""
    assert type(actual) is type(expected), (type(actual), type(expected))
    if isinstance(expected, (np.ndarray, np.generic)):
        assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
        assert np.shape(actual) == np.shape(expected), (np.shape(actual), np.shape(expected))
        if expected.dtype.kind in "fc":
            np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol, equal_nan=True)
        else:
            np.testing.assert_array_equal(actual, expected)
    elif isinstance(expected, paddle.Tensor):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=rtol, atol=rtol)
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_numpy_same(a, e, rtol)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected)
        for k in expected:
            assert_numpy_same(actual[k], expected[k], rtol)
    else:
        assert actual == expected, (actual, expected)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # eager's log and 0/0 of negatives
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_numpy_program_is_one_graph_equal_to_eager(program, backend):
    make = i_input if program in _INT_PROGRAMS else x_input
    rtol = max(1e-6, BACKEND_TOLERANCE.get(backend, (0.0, 0.0))[0])
    with np.errstate(all="ignore"):
        expected = program(make())
        report = jit_core.explain(program, make(), backend=backend)
        assert (report.graph_count, report.break_count) == (1, 0), str(report)
        assert_numpy_same(report.result, expected, rtol)
        fast = jit_core.optimize(program, backend=backend)
        for _ in range(2):
            assert_numpy_same(fast(make()), expected, rtol)
        other = make() * 2
        assert_numpy_same(fast(other), program(other), rtol)
    assert fast.jit_stats.captures == 1
    assert not fast.jit_stats.eager_frames


def test_explain_names_the_numpy_operations(backend):
    report = jit_core.explain(exp_plus_one, x_input(), backend=backend)
    text = str(report)
    assert "NumPy operations computed in the graph:" in text, text
    assert "NumPy's exp" in text and "operator add" in text, text
    assert "test_numpy.py" in text, text


def pinned_numbers(x):
    a = x.numpy()
    b = a.copy()
    b += 1  # NumPy updates b itself: every name of it sees it
    return b


def unknown_numpy_function(x):
    y = x * 2
    a = np.fft.fft(y.numpy())
    return np.abs(a)


def array_decides_a_branch(x):
    a = x.numpy()
    if a.sum() > 0:
        return a * 2
    return a


def integer_division_by_an_array(i):
    a = i.numpy()
    return a // (a + 6)


def asarray_of_a_list_of_arrays(x):
    a = x.numpy()
    return np.asarray([a, a + 1])


@pytest.mark.parametrize(
    "program, reason",
    [
        (pinned_numbers, "updated in place by an augmented assignment"),
        (unknown_numpy_function, "numpy.fft"),
        (array_decides_a_branch, "decides a branch"),
        (asarray_of_a_list_of_arrays, "holding arrays computed in the graph"),
        (integer_division_by_an_array, "of integers by an array that may hold 0"),
    ],
    ids=["augmented-assignment", "fft", "branch", "asarray-of-a-list", "int-division"],
)
def test_what_the_graph_does_not_compute_breaks_it_with_the_reason(program, reason, backend):
    make = i_input if program is integer_division_by_an_array else x_input
    expected = program(make())
    report = jit_core.explain(program, make(), backend=backend)
    assert report.break_count >= 1, str(report)
    assert any(reason in str(b) for b in report.breaks), str(report)
    assert_numpy_same(report.result, expected, 1e-5)
    fast = jit_core.optimize(program, backend=backend)
    assert_numpy_same(fast(make()), expected, 1e-5)


#: a global array the captured code reads (its values may change between calls)
SCALE = np.array([0.5, 1.0, 2.0, 4.0])


def with_arrays_passed_in(x, arr):
    b = arr * SCALE + 1  # float64: arr is
    return x + paddle.to_tensor(b.astype("float32")), arr, np.maximum(b, arr.mean())


def test_arrays_passed_in_are_inputs_of_the_graph(backend):
    x = x_input()
    fast = jit_core.optimize(with_arrays_passed_in, backend=backend)
    report = jit_core.explain(with_arrays_passed_in, x, np.ones(4))
    assert (report.graph_count, report.break_count) == (1, 0), str(report)
    rtol = max(1e-6, BACKEND_TOLERANCE.get(backend, (0.0, 0.0))[0])
    for k in range(3):
        arr = np.linspace(-1.0, 1.0, 4) * (k + 1)
        SCALE[0] = k  # a global changed in place: read on every call
        out = fast(x, arr)
        assert out[1] is arr  # the very array, as eager hands it back
        assert_numpy_same(out, with_arrays_passed_in(x, arr), rtol)
    assert fast.jit_stats.captures == 1
    # another dtype or shape is another capture (both are guarded)
    assert_numpy_same(
        fast(x, np.ones(4, "float32")), with_arrays_passed_in(x, np.ones(4, "float32")), rtol
    )
    assert fast.jit_stats.captures == 2
    SCALE[0] = 0.5


def resumed_with_an_array(x):
    a = np.exp(x.numpy())
    print("a break: the rest of the frame is a function of its own, given the array")
    return -a + a.sum()


def test_an_array_alive_at_a_break_is_an_input_of_the_resumed_graph(backend, capsys):
    expected = resumed_with_an_array(x_input())
    report = jit_core.explain(resumed_with_an_array, x_input(), backend=backend)
    assert (report.graph_count, report.break_count) == (2, 1), str(report)
    fast = jit_core.optimize(resumed_with_an_array, backend=backend)
    rtol = max(1e-6, BACKEND_TOLERANCE.get(backend, (0.0, 0.0))[0])
    assert_numpy_same(fast(x_input()), expected, rtol)
    assert not fast.jit_stats.eager_frames
