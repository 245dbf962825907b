"""Winograd convolutions for the 3x3, stride-1 convolutions of frozen graphs.

A 3x3 convolution computes each output from nine products. Winograd's minimal filtering
algorithm F(m x m, 3 x 3) computes an m x m tile of outputs from (m + 2)^2 products
(16 for m = 2, 36 for m = 4 instead of 36 and 144): the input tile and the weights are
transformed, multiplied elementwise (one batched matrix product over the channels), and
the product is transformed back. The weight transform depends on the weights only: for a
frozen graph it is computed here once, with NumPy, and the compiled kernel reads the
transformed weights.

Measured on this project's 2-core machine (MetaSchedule, 64 trials each, ResNet18's four
3x3 shapes, NHWC): 56x56x64 6.2 ms direct, 2.3 ms with m = 4; 28x28x128 4.2 -> 2.0 ms;
14x14x256 4.8 -> 1.8 ms (m = 2 and 4 alike); 7x7x512 6.1 -> 2.7 ms (both alike).

Rounding: the transforms add a few float32 roundings per product; the interpolation points
are those Barabasz et al. found to keep the error smallest ("Error analysis and improving
the accuracy of Winograd convolution for deep neural networks", 2018, arXiv:1803.10986).
``optimize(..., winograd=False)`` keeps every convolution direct.
"""

from __future__ import annotations

import logging
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .layouts import apply_mutator

log = logging.getLogger("jit_core.tvm")

#: finite interpolation points of F(m, 3) (the last point is infinity)
POINTS: Dict[int, Tuple[float, ...]] = {2: (0.0, -1.0, 1.0), 4: (0.0, -1.0, 1.0, 0.5, -2.0)}
#: the smallest channel counts worth the transforms: with a handful of channels the
#: batched product is too small to pay for reading and writing the transformed tiles
MIN_CHANNELS = 16
#: outputs smaller than this (in height or width) use m = 2: with m = 4 a 7x7 or 14x14
#: output pads to 8x8 or 16x16 tiles, and the transformed weights are four times the
#: weights (m = 2: 1.8 times), which deep layers with few pixels read for little work
LARGE_TILE_FROM = 16


def transform_matrices(m: int, r: int = 3) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``A`` (alpha x m), ``B`` (alpha x alpha) and ``G`` (alpha x r) of F(m, r), float64,
    alpha = m + r - 1, such that the correlation of ``d`` (alpha) with ``g`` (r) is
    ``A.T @ ((G @ g) * (B.T @ d))``.

    Toom-Cook: a linear convolution is an evaluation of both polynomials at alpha points
    (the rows of a Vandermonde matrix, infinity giving the leading coefficient), a product
    and an interpolation (the inverse Vandermonde matrix); the correlation is its transpose.
    """
    points = POINTS[m]
    alpha = m + r - 1

    def evaluation(columns: int) -> np.ndarray:
        v = np.zeros((alpha, columns))
        for i, p in enumerate(points):
            v[i] = [p**k for k in range(columns)]
        v[alpha - 1, columns - 1] = 1.0
        return v

    a, b, g = evaluation(m), np.linalg.inv(evaluation(alpha)), evaluation(r)
    # The products are the same if a row of B.T is divided by a number and the row of G
    # multiplied by it. Dividing each finite point's row by its coefficient of the second
    # highest power leaves B.T with small, exactly representable entries (1, 2, 2.5, ...
    # instead of 1/3, 32/15, ...): fewer float32 roundings on the data, which is
    # transformed on every call, and the weights' transform runs once in float64.
    for j in range(alpha - 1):
        scale = b[alpha - 2, j]
        b[:, j] /= scale
        g[j] *= scale
    return a, b, g


def transform_weight(kernel_ohwi: np.ndarray, m: int) -> np.ndarray:
    """The weights of a 3x3 convolution (OHWI) in the Winograd domain: ``U[eps, nu, ci, co]
    = (G g G^T)[eps, nu]`` for each filter ``g = kernel[co, :, :, ci]``."""
    _, _, g = transform_matrices(m)
    u = np.einsum("ek,okwi,nw->enio", g, kernel_ohwi.astype(np.float64), g)
    return np.ascontiguousarray(u.astype(kernel_ohwi.dtype))


def tile_size(out_h: int, out_w: int) -> int:
    return 4 if min(out_h, out_w) >= LARGE_TILE_FROM else 2


def conv2d_nhwc(data, u, padding: Sequence[int], m: int, name: str = "conv2d_winograd"):
    """The TE computation of an NHWC 3x3 stride-1 convolution from transformed weights
    ``u`` (alpha, alpha, C, K). The stages carry the schedule rules MetaSchedule has for
    Winograd on CPUs (data_pack and inverse unrolled over the tile, the batched product
    tiled like a matmul)."""
    from tvm import te, topi
    from tvm.topi.utils import const_matrix

    n, h, w, c = (int(d) for d in data.shape)
    alpha, _, _, k = (int(d) for d in u.shape)
    pad_t, pad_l, pad_b, pad_r = (int(p) for p in padding)
    out_h, out_w = h + pad_t + pad_b - 2, w + pad_l + pad_r - 2
    tiles_h, tiles_w = -(-out_h // m), -(-out_w // m)
    tiles = n * tiles_h * tiles_w
    dtype = str(data.dtype)
    a_np, b_np, _ = transform_matrices(m)
    a = const_matrix(a_np.astype(dtype), "A")
    b = const_matrix(b_np.astype(dtype), "B")

    # the last tile reads past the padded input when the output is not a multiple of m
    extra_h = (tiles_h - 1) * m + alpha - (h + pad_t + pad_b)
    extra_w = (tiles_w - 1) * m + alpha - (w + pad_l + pad_r)
    padded = topi.nn.pad(
        data,
        (0, pad_t, pad_l, 0),
        (0, pad_b + max(extra_h, 0), pad_r + max(extra_w, 0), 0),
        name="data_pad",
    )
    per_image = tiles_h * tiles_w
    input_tile = te.compute(
        (alpha, alpha, tiles, c),
        lambda eps, nu, p, ci: padded[
            p // per_image, (p % per_image) // tiles_w * m + eps, p % tiles_w * m + nu, ci
        ],
        name="input_tile",
        attrs={"schedule_rule": "None"},
    )
    data_pack = _tile_transform(input_tile, b, "data_pack")
    r_c = te.reduce_axis((0, c), "ci")
    bgemm = te.compute(
        (alpha, alpha, tiles, k),
        lambda eps, nu, p, co: te.sum(data_pack[eps, nu, p, r_c] * u[eps, nu, r_c, co], axis=r_c),
        name="bgemm",
        attrs={"meta_schedule.write_cache_level": [2], "layout_free_placeholders": [u]},
    )
    inverse = _tile_transform(bgemm, a, "inverse")
    return te.compute(
        (n, out_h, out_w, k),
        lambda i, y, x, co: inverse[y % m, x % m, i * per_image + (y // m) * tiles_w + x // m, co],
        name=name,
    )


def _tile_transform(tiles, matrix, stage: str):
    """``matrix.T @ tile @ matrix`` for every tile of ``tiles`` (its first two axes; the
    other two are the tile's index and the channel): the input transform with ``B`` and
    the output transform with ``A``. ``stage`` names the stage and picks MetaSchedule's
    rule for it (``conv2d_nhwc_winograd_<stage>``)."""
    from tvm import te

    alpha, size = (int(d) for d in matrix.shape)
    r_a = te.reduce_axis((0, alpha), "r_a")
    r_b = te.reduce_axis((0, alpha), "r_b")
    return te.compute(
        (size, size, tiles.shape[2], tiles.shape[3]),
        lambda i, j, p, ch: te.sum(
            tiles[r_a, r_b, p, ch] * matrix[r_a, i] * matrix[r_b, j], axis=[r_a, r_b]
        ),
        name=stage,
        attrs={"schedule_rule": f"conv2d_nhwc_winograd_{stage}"},
    )


def _static_shape(expr) -> Optional[List[int]]:
    """The shape of a Relax tensor expression if every dimension is a known int."""
    shape = getattr(expr.ty, "shape", None)
    try:
        return [int(d) for d in shape.values]
    except (AttributeError, TypeError):
        return None


def _eligible(call, weight: np.ndarray) -> bool:
    attrs = call.attrs
    return (
        attrs.data_layout == "NHWC"
        and attrs.kernel_layout == "OHWI"
        and attrs.out_layout == "NHWC"
        and [int(s) for s in attrs.strides] == [1, 1]
        and [int(d) for d in attrs.dilation] == [1, 1]
        and int(attrs.groups) == 1
        and weight.ndim == 4
        and weight.shape[1:3] == (3, 3)
        and weight.dtype == np.float32
        and str(call.args[0].ty.dtype.dtype) == "float32"
        and _static_shape(call.args[0]) is not None
        and min(weight.shape[0], weight.shape[3]) >= MIN_CHANNELS
    )


def rewrite(mod) -> Tuple[object, int]:
    """``mod`` with each eligible ``relax.nn.conv2d`` (NHWC, OHWI, 3x3, stride 1, no
    dilation or groups, float32, constant weights, at least ``MIN_CHANNELS`` in and out)
    computed by Winograd; returns it and how many convolutions were rewritten. Weights
    are found as constants: run ``layouts.fold_constant_permutes`` first."""
    import tvm
    from tvm import relax
    from tvm.relax.expr_functor import PyExprMutator, mutator

    conv2d = tvm.ir.Op.get("relax.nn.conv2d")

    @mutator
    class Rewriter(PyExprMutator):
        def __init__(self, module):
            super().__init__(module)
            self.count = 0
            self.convolutions = 0

        def constant(self, expr):
            """The NumPy value of ``expr`` if it is a constant or a variable bound to one."""
            while isinstance(expr, relax.Var):
                expr = self.lookup_binding(expr)
            if isinstance(expr, tvm.ir.expr.Constant) and hasattr(expr.value, "numpy"):
                return expr.value.numpy()
            return None

        def visit_call_(self, call):
            call = self.visit_expr_post_order(call)
            if call.op != conv2d:
                return call
            self.convolutions += 1
            weight = self.constant(call.args[1])
            if weight is None or not _eligible(call, weight):
                return call
            padding = [int(p) for p in call.attrs.padding]
            shape = _static_shape(call.args[0])
            out_h = shape[1] + padding[0] + padding[2] - 2
            out_w = shape[2] + padding[1] + padding[3] - 2
            m = tile_size(out_h, out_w)
            u = relax.const(transform_weight(weight, m))
            self.count += 1
            return self.builder_.call_te(
                conv2d_nhwc, call.args[0], u, padding, m, primfunc_name_hint="conv2d_winograd"
            )

    rewriter = Rewriter(mod)
    mod = apply_mutator(mod, rewriter)
    if rewriter.convolutions:
        log.info(
            "%d of %d convolutions computed by Winograd", rewriter.count, rewriter.convolutions
        )
    return mod, rewriter.count


__all__ = [
    "POINTS",
    "conv2d_nhwc",
    "rewrite",
    "tile_size",
    "transform_matrices",
    "transform_weight",
]
