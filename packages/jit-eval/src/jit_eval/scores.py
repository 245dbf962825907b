"""GraphNet's scores: correctness at tolerance levels, the Speedup Score S(t) and the
Error-aware Speedup Score ES(t) (PaddlePaddle/GraphNet, arXiv 2510.24035).

A tolerance level ``t`` (an integer, -10 strictest) gives each floating dtype an
``(rtol, atol)`` pair; integer and boolean outputs must be equal. Per backend and level,
each sample contributes its speedup when it is correct at ``t``, and the penalty ``b``
otherwise (a slowdown ``s < 1`` counts as ``s ** (p + 1)``); S(t) is the geometric mean.
ES(t) is S(t) below ``t = 1``; from ``t = 1`` on a sample keeps what it had at ``t = 1``
when it was correct there, and an error that the level tolerates counts as 1 instead of
``b``: an accuracy error from ``t = 1``; any other failure (a crash, a compile failure,
a shape/dtype mismatch, an eager run that fails) from ``t = 3``. That is GraphNet's
default interpretation at HEAD (``graph_net_bench``'s
``DefaultPositiveToleranceInterpretation``, whose levels run to ``t = 4``), tested against
the numbers its ``analysis_util.calculate_scores`` prints for the same logs.
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

#: GraphNet's status names, the ``status`` of a result
CORRECT = "correct"
EAGER_FAIL = "eager_fail"
COMPILE_FAIL = "compile_fail"
RUNTIME_FAIL = "runtime_fail"
SHAPE_MISMATCH = "shape_mismatch"
TYPE_MISMATCH = "type_mismatch"
#: the failure at a level where a correct-status sample's values are not close
ACCURACY = "accuracy"

DEFAULT_B = 0.1
DEFAULT_P = 0.0
DEFAULT_TOLERANCES = tuple(range(-10, 6))


def _three_digits(x: float) -> float:
    return float(f"{x:.3g}")


def tolerance_pair(t: int, dtype: str) -> Tuple[float, float]:
    """``(rtol, atol)`` at level ``t`` for an output of ``dtype`` (GraphNet's table, to
    three significant digits); ``(0, 0)`` means equal."""
    d = str(dtype).replace("paddle.", "")
    if d == "bfloat16":
        rtol, atol = 10 ** (t * 1.796 / 5), 10.0**t
    elif d == "float16":
        rtol, atol = 10 ** (t * 3 / 5), 10.0**t
    elif d == "float32" or d == "complex64":
        rtol, atol = 10 ** (t * 5.886 / 5), 10.0**t
    elif d == "float64" or d == "complex128":
        rtol = atol = 10 ** (t * 7 / 5)
    else:
        return 0.0, 0.0
    return _three_digits(rtol), _three_digits(atol)


def tolerated(t: int, fail_type: Optional[str]) -> bool:
    """Whether level ``t`` tolerates a sample failing with ``fail_type`` (GraphNet's
    default interpretation)."""
    if fail_type in (None, CORRECT):
        return True
    if fail_type == ACCURACY:
        return t >= 1
    return t >= 3


def timing_stats(times_ms: Sequence[float]) -> Dict[str, float]:
    """GraphNet's statistics of a list of call times (``test_compiler_util``): median,
    interquartile range, mean, standard deviation, min and max, to 6 digits. Its speedup
    is the ratio of the medians."""
    import numpy as np

    arr = np.asarray(times_ms, dtype="float64")
    q1, median, q3 = (float(np.percentile(arr, q)) for q in (25, 50, 75))
    stats = {
        "median": median,
        "iqr": q3 - q1,
        "mean": float(arr.mean()),
        "std": float(arr.std()),
        "min": float(arr.min()),
        "max": float(arr.max()),
    }
    return {k: float(f"{v:.6g}") for k, v in stats.items()}


def _rectified(speedup: float, p: float) -> float:
    return speedup ** (p + 1) if speedup < 1 else speedup


def geomean(values: Iterable[float]) -> Optional[float]:
    vals = [v for v in values if v is not None]
    if not vals or any(v <= 0 for v in vals):
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def fail_type_at(result: dict, t: int) -> Optional[str]:
    """None when ``result`` is correct at level ``t``, else why not (its status, or
    ``"accuracy"``). ``result`` holds ``status`` and, when that is ``"correct"``,
    ``correct_at``: level -> bool (levels as ints or strings)."""
    status = result.get("status")
    if status != CORRECT:
        return status or RUNTIME_FAIL
    at = result.get("correct_at") or {}
    ok = at.get(t, at.get(str(t)))
    return None if ok else ACCURACY


def s_scores(
    results: Sequence[dict],
    tolerances: Sequence[int] = DEFAULT_TOLERANCES,
    p: float = DEFAULT_P,
    b: float = DEFAULT_B,
) -> Dict[int, Optional[float]]:
    """S(t) for each level over ``results`` (dicts with ``status``, ``correct_at`` and
    ``speedup``); None for a level when there are no results."""
    scores: Dict[int, Optional[float]] = {}
    for t in tolerances:
        vals = []
        for r in results:
            if fail_type_at(r, t) is None:
                vals.append(_rectified(r["speedup"], p))
            else:
                vals.append(b)
        scores[t] = geomean(vals)
    return scores


def es_scores(
    results: Sequence[dict],
    tolerances: Sequence[int] = DEFAULT_TOLERANCES,
    p: float = DEFAULT_P,
    b: float = DEFAULT_B,
) -> Dict[int, Optional[float]]:
    """ES(t) for each level (see the module's docstring)."""
    scores: Dict[int, Optional[float]] = {}
    for t in tolerances:
        vals = []
        for r in results:
            if t < 1:
                fail = fail_type_at(r, t)
                vals.append(b if fail is not None else _rectified(r["speedup"], p))
                continue
            fail = fail_type_at(r, 1)
            if fail is None:
                vals.append(_rectified(r["speedup"], p))
            else:
                vals.append(1.0 if tolerated(t, fail) else b)
        scores[t] = geomean(vals)
    return scores


def outputs_close(
    expected: List, actual: List, t: int, dtypes: Optional[Sequence[str]] = None
) -> List[bool]:
    """Per output: ``actual`` is within level ``t`` of ``expected`` (numpy arrays of the
    same shape; NaN equals NaN). ``dtypes`` names the outputs' Paddle dtypes where numpy
    has none (bfloat16 arrives as float32)."""
    out = []
    for i, (e, a) in enumerate(zip(expected, actual)):
        rtol, atol = tolerance_pair(t, dtypes[i] if dtypes else str(e.dtype))
        out.append(close(e, a, rtol, atol))
    return out


class Comparison:
    """One compiled output against eager's, for many tolerances at the cost of a few
    passes: GraphNet's log alone asks for 64 (rtol, atol) pairs, and an ``allclose`` per
    pair (each copying both arrays to float64) took most of 141 s on a 155M-element
    output. ``first_close`` takes a chain of pairs, each at least as loose as the one
    before (a dtype's row of levels), and finds where the chain starts to pass by binary
    search, a chunk of elements at a time."""

    #: elements per chunk (two float64 arrays of it stay within tens of MB)
    CHUNK = 1 << 22

    def __init__(self, expected, actual):
        self.expected, self.actual = expected, actual
        self.same_shape = expected.shape == actual.shape

    def first_close(self, chain: Sequence[Tuple[float, float]]) -> int:
        """The index of the first pair of ``chain`` at which ``actual`` is all-close to
        ``expected`` (``|a - e| <= atol + rtol * |e|``, NaN equal to NaN, as
        ``np.allclose(a, e, equal_nan=True)``); ``len(chain)`` where none is."""
        return self.first_closes([chain])[0]

    def first_closes(self, chains: Sequence[Sequence[Tuple[float, float]]]) -> List[int]:
        """``first_close`` of each chain, in one pass over the elements."""
        import numpy as np

        ends = [len(chain) for chain in chains]
        if not self.same_shape:
            return ends
        e, a = self.expected.reshape(-1), self.actual.reshape(-1)
        firsts = [0] * len(chains)
        for start in range(0, e.size, self.CHUNK):
            if firsts == ends:
                break
            prepared = _differences(e[start : start + self.CHUNK], a[start : start + self.CHUNK])
            if prepared is None:
                return ends
            diff, mag = prepared
            for k, chain in enumerate(chains):
                low, high = firsts[k], ends[k]
                while low < high:  # the first pair from firsts[k] on this chunk passes
                    mid = (low + high) // 2
                    rtol, atol = chain[mid]
                    if bool(np.all(diff <= atol + rtol * mag)):
                        high = mid
                    else:
                        low = mid + 1
                firsts[k] = low
        return firsts

    def close(self, rtol: float, atol: float) -> bool:
        return self.first_close([(rtol, atol)]) == 0


def _differences(e, a):
    """``(|a - e|, |e|)`` in float64 with NaN == NaN and equal infinities as 0 difference;
    None where a difference is not finite otherwise (no tolerance covers it)."""
    import numpy as np

    wide = "complex128" if np.iscomplexobj(e) or np.iscomplexobj(a) else "float64"
    e64, a64 = e.astype(wide), a.astype(wide)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, seen to below
        diff = np.abs(a64 - e64)
    mag = np.abs(e64)
    odd = ~np.isfinite(diff)
    if odd.any():
        same = (a64[odd] == e64[odd]) | (np.isnan(a64[odd]) & np.isnan(e64[odd]))
        if not same.all():
            return None
        diff[odd] = 0.0
        mag[odd] = 0.0
    return diff, mag


def close(e, a, rtol: float, atol: float) -> bool:
    """``a`` equals ``e`` (``rtol == atol == 0``) or is all-close to it."""
    import numpy as np

    if e.shape != a.shape:
        return False
    if not e.size:
        return True
    if rtol == 0 and atol == 0:
        return bool(np.array_equal(e, a))
    return Comparison(e, a).close(rtol, atol)


__all__ = [
    "timing_stats",
    "tolerance_pair",
    "tolerated",
    "geomean",
    "s_scores",
    "es_scores",
    "outputs_close",
    "close",
    "Comparison",
    "fail_type_at",
    "DEFAULT_TOLERANCES",
]
