"""ONNX lowerings of Paddle's detection operations: ``prior_box`` (SSD's anchors, a
constant at fixed shapes) and ``generate_proposals`` (the region proposals of
Faster/Mask R-CNN's RPN), written as Paddle's CPU kernel computes them.

Per image: the ``pre_nms_top_n`` best scores (``TopK``), their anchors decoded by the
deltas, clipped to the image, the boxes smaller than ``min_size`` dropped, then a greedy
non-maximum suppression with Paddle's overlap (the +1 of ``pixel_offset`` included) as an
ONNX ``Loop`` over the boxes in score order, and the first ``post_nms_top_n`` kept.
ONNX's own ``NonMaxSuppression`` measures overlap without the +1 and in float32 only, so
it is not used.

Paddle picks the best scores with ``std::nth_element``: where two candidate scores are
equal, which box comes first (and which one a suppression keeps) is up to the C++
library. The model is exact where the scores it ranks are distinct and no number is NaN,
and says so as a run-time check (``Exporter.require``): a call with ties runs on Paddle.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Tuple

import paddle

from .direct import Exporter, data_dependent, dtype_name, positional

#: the largest log-scale a delta may ask for, as Paddle clips it (``kBBoxClipDefault``)
_BBOX_CLIP = math.log(1000.0 / 16.0)


def _fewer_proposals(result: Any) -> Any:
    """``generate_proposals``'s results with one proposal fewer (of the last image that has
    one): how the exporter finds the sizes downstream that follow the number kept."""
    rois, probs, *rest = result
    if rois.shape[0] == 0:
        return result
    out = [rois[:-1], probs[:-1]]
    if rest:
        num = rest[0].clone()
        for i in range(num.shape[0] - 1, -1, -1):
            if int(num[i]) > 0:
                num[i] = num[i] - 1
                break
        out.append(num)
    return tuple(out)


def _at_least_one_box(ex: Exporter, const: Callable, boxes: str, top: str) -> Tuple[str, str, str]:
    """``(boxes, scores, rows)`` with one box of zeros, of score 0, where none is left (what
    Paddle returns then)."""
    count = ex.op("Shape", [boxes], start=0, end=1)
    rows = ex.op("Max", [count, ex.ints([1])])
    zero_box = ex.op("Expand", [const(0.0), ex.ints([1, 4])])
    boxes = ex.op("Concat", [boxes, zero_box], axis=0)
    boxes = ex.op("Slice", [boxes, ex.ints([0]), rows, ex.ints([0])])
    top = ex.op("Concat", [top, const([0.0])], axis=0)
    top = ex.op("Slice", [top, ex.ints([0]), rows, ex.ints([0])])
    return boxes, top, rows


@data_dependent(_fewer_proposals)
def _generate_proposals(ex: Exporter, a: Dict[str, Any]) -> Tuple[str, ...]:
    scores, deltas, im_shape = a["scores"], a["bbox_deltas"], a["img_size"]
    anchors, variances = a["anchors"], a["variances"]
    pre_n = int(ex.known(a.get("pre_nms_top_n", 6000)))
    post_n = int(ex.known(a.get("post_nms_top_n", 1000)))
    nms_thresh = float(ex.known(a.get("nms_thresh", 0.5)))
    min_size = float(ex.known(a.get("min_size", 0.1)))
    eta = float(ex.known(a.get("eta", 1.0)))
    pixel_offset = bool(ex.known(a.get("pixel_offset", False)))
    dtype = ex.dtype(scores)
    if dtype not in ("float32", "float64"):
        ex.decline(f"generate_proposals of {dtype} (Paddle's kernel takes float32 and float64)")
    if eta < 1:
        ex.decline("generate_proposals with eta < 1 (an adaptive suppression threshold)")
    if variances is None:
        ex.decline("generate_proposals without variances")
    n, c, h, w = ex.shape(scores)
    m = c * h * w
    if pre_n <= 0 or pre_n >= m:
        pre_n = m
    elif nms_thresh <= 0:
        # without suppression Paddle returns the boxes in std::nth_element's order
        ex.decline("generate_proposals with nms_thresh <= 0 and a pre_nms_top_n cut")
    if ex.shape(anchors)[-1] != 4 or ex.shape(variances)[-1] != 4:
        ex.decline("anchors or variances whose last dimension is not 4")

    def const(value: Any) -> str:
        return ex.constant(value, dtype)

    # the kernel's layout: per image, M = H*W*A candidates, A fastest
    all_scores = ex.op(
        "Reshape", [ex.op("Transpose", [ex.input(scores)], perm=[0, 2, 3, 1]), ex.ints([n, m])]
    )
    all_deltas = ex.op(
        "Reshape",
        [ex.op("Transpose", [ex.input(deltas)], perm=[0, 2, 3, 1]), ex.ints([n, m, 4])],
    )
    flat_anchors = ex.op("Reshape", [ex.input(anchors), ex.ints([-1, 4])])
    flat_variances = ex.op("Reshape", [ex.input(variances), ex.ints([-1, 4])])
    images = ex.input(im_shape, dtype)
    offset = 1.0 if pixel_offset else 0.0

    rois: List[str] = []
    probs: List[str] = []
    nums: List[str] = []
    for i in range(n):
        pick = ex.ints([i])
        s = ex.op("Reshape", [ex.op("Gather", [all_scores, pick], axis=0), ex.ints([m])])
        d = ex.op("Reshape", [ex.op("Gather", [all_deltas, pick], axis=0), ex.ints([m, 4])])
        size = ex.op("Reshape", [ex.op("Gather", [images, pick], axis=0), ex.ints([2])])
        ranked = min(pre_n + 1, m)  # one past the cut: a tie across it matters
        top, order = ex.op("TopK", [s, ex.ints([ranked])], outputs=2, axis=0, largest=1, sorted=1)
        # NaN scores leave std::nth_element's order undefined
        inexact = [ex.op("IsNaN", [s])]
        if ranked > pre_n:
            at_cut = ex.op("Slice", [top, ex.ints([pre_n - 1]), ex.ints([pre_n + 1]), ex.ints([0])])
            first, second = ex.op("Split", [at_cut, ex.ints([1, 1])], outputs=2, axis=0)
            inexact.append(ex.op("Equal", [first, second]))
            top = ex.op("Slice", [top, ex.ints([0]), ex.ints([pre_n]), ex.ints([0])])
            order = ex.op("Slice", [order, ex.ints([0]), ex.ints([pre_n]), ex.ints([0])])
        boxes = _decode(
            ex,
            const,
            ex.op("Gather", [flat_anchors, order], axis=0),
            ex.op("Gather", [d, order], axis=0),
            ex.op("Gather", [flat_variances, order], axis=0),
            offset,
        )
        # a NaN box: the kernel's comparisons and std::min/max need not treat it as ONNX's
        inexact.append(ex.op("IsNaN", [boxes]))
        ex.require_none(inexact, "generate_proposals: no NaN, no tie across pre_nms_top_n")
        boxes = _clip(ex, const, boxes, size, offset)
        kept = _large_enough(ex, const, boxes, size, min_size, offset, pixel_offset)
        keep = ex.op("Reshape", [ex.op("NonZero", [kept]), ex.ints([-1])])
        boxes = ex.op("Gather", [boxes, keep], axis=0)
        top = ex.op("Gather", [top, keep], axis=0)
        if nms_thresh > 0:
            chosen = _suppress(ex, const, boxes, top, nms_thresh, pixel_offset, post_n)
            boxes = ex.op("Gather", [boxes, chosen], axis=0)
            top = ex.op("Gather", [top, chosen], axis=0)
        else:
            # every box in score order (std::sort): its order among equal scores is the
            # C++ library's
            ex.require(_distinct(ex, top), "generate_proposals: the scores kept are distinct")
        boxes, top, rows = _at_least_one_box(ex, const, boxes, top)
        rois.append(boxes)
        probs.append(ex.op("Unsqueeze", [top, ex.ints([1])]))
        nums.append(ex.cast(rows, "int32"))
    out_rois = ex.op("Concat", rois, axis=0) if n > 1 else rois[0]
    out_probs = ex.op("Concat", probs, axis=0) if n > 1 else probs[0]
    out_nums = ex.op("Concat", nums, axis=0) if n > 1 else ex.op("Identity", [nums[0]])
    if a.get("return_rois_num") is False:
        return out_rois, out_probs
    return out_rois, out_probs, out_nums


def _distinct(ex: Exporter, ordered: str) -> str:
    """A bool scalar: no two neighbours of the 1-D ``ordered`` are equal."""
    upper = ex.op("Slice", [ordered, ex.ints([0]), ex.ints([-1]), ex.ints([0])])
    lower = ex.op("Slice", [ordered, ex.ints([1]), ex.ints([_BIG]), ex.ints([0])])
    return ex.none(ex.op("Equal", [upper, lower]))


#: "to the end" for a Slice
_BIG = 2**62


def _columns(ex: Exporter, boxes: str) -> List[str]:
    return list(ex.op("Split", [boxes, ex.ints([1, 1, 1, 1])], outputs=4, axis=1))


def _decode(ex: Exporter, const, anchors: str, deltas: str, variances: str, offset: float):
    """Paddle's ``BoxCoder``: the boxes the deltas make of the anchors, in its order of
    operations."""
    a0, a1, a2, a3 = _columns(ex, anchors)
    d0, d1, d2, d3 = _columns(ex, deltas)
    v0, v1, v2, v3 = _columns(ex, variances)
    off, half, two = const(offset), const(0.5), const(2.0)
    aw = ex.op("Add", [ex.op("Sub", [a2, a0]), off])
    ah = ex.op("Add", [ex.op("Sub", [a3, a1]), off])
    acx = ex.op("Add", [a0, ex.op("Mul", [half, aw])])
    acy = ex.op("Add", [a1, ex.op("Mul", [half, ah])])
    cx = ex.op("Add", [ex.op("Mul", [ex.op("Mul", [v0, d0]), aw]), acx])
    cy = ex.op("Add", [ex.op("Mul", [ex.op("Mul", [v1, d1]), ah]), acy])
    clip = const(_BBOX_CLIP)
    bw = ex.op("Mul", [ex.op("Exp", [ex.op("Min", [ex.op("Mul", [v2, d2]), clip])]), aw])
    bh = ex.op("Mul", [ex.op("Exp", [ex.op("Min", [ex.op("Mul", [v3, d3]), clip])]), ah])
    half_w, half_h = ex.op("Div", [bw, two]), ex.op("Div", [bh, two])
    x1 = ex.op("Sub", [cx, half_w])
    y1 = ex.op("Sub", [cy, half_h])
    x2 = ex.op("Sub", [ex.op("Add", [cx, half_w]), off])
    y2 = ex.op("Sub", [ex.op("Add", [cy, half_h]), off])
    return ex.op("Concat", [x1, y1, x2, y2], axis=1)


def _clip(ex: Exporter, const, boxes: str, size: str, offset: float) -> str:
    """Paddle's ``ClipTiledBoxes``: x into [0, width - offset], y into [0, height - offset]."""
    height = ex.op("Gather", [size, ex.ints([0])], axis=0)
    width = ex.op("Gather", [size, ex.ints([1])], axis=0)
    off = const(offset)
    high_x, high_y = ex.op("Sub", [width, off]), ex.op("Sub", [height, off])
    high = ex.op("Concat", [high_x, high_y, high_x, high_y], axis=0)
    return ex.op("Max", [ex.op("Min", [boxes, high]), const(0.0)])


def _large_enough(
    ex: Exporter, const, boxes: str, size: str, min_size: float, offset: float, centered: bool
) -> str:
    """Paddle's ``FilterBoxes``: a box at least ``max(min_size, 1)`` wide and high (and,
    with ``pixel_offset``, centred inside the image), as a bool per box."""
    x1, y1, x2, y2 = _columns(ex, boxes)
    off = const(offset)
    ws = ex.op("Add", [ex.op("Sub", [x2, x1]), off])
    hs = ex.op("Add", [ex.op("Sub", [y2, y1]), off])
    # the kernel's min_size is a float (float32), compared with the boxes' type
    smallest = const(float(paddle.to_tensor(max(min_size, 1.0), dtype="float32").item()))
    big = ex.op(
        "And",
        [ex.op("GreaterOrEqual", [ws, smallest]), ex.op("GreaterOrEqual", [hs, smallest])],
    )
    if centered:
        two = const(2.0)
        x_ctr = ex.op("Add", [x1, ex.op("Div", [ws, two])])
        y_ctr = ex.op("Add", [y1, ex.op("Div", [hs, two])])
        height = ex.op("Gather", [size, ex.ints([0])], axis=0)
        width = ex.op("Gather", [size, ex.ints([1])], axis=0)
        inside = ex.op(
            "And",
            [ex.op("LessOrEqual", [x_ctr, width]), ex.op("LessOrEqual", [y_ctr, height])],
        )
        big = ex.op("And", [big, inside])
    return ex.op("Reshape", [big, ex.ints([-1])])


def _suppress(
    ex: Exporter,
    const,
    boxes: str,
    scores: str,
    threshold: float,
    pixel_offset: bool,
    post_n: int,
) -> str:
    """The positions of the boxes (in score order) Paddle's greedy ``NMS`` keeps, the first
    ``post_n`` of them.

    ONNX's ``NonMaxSuppression`` picks them (in float32, fed the boxes grown by the +1 of
    ``pixel_offset``), and the model checks the pick against Paddle's rule with Paddle's
    overlap in the boxes' own type (``_greedy``); where rounding makes the two differ near
    the threshold, or equal scores make the C++ library's order matter, the check fails
    and the call runs on Paddle."""
    x1, y1, x2, y2 = _columns(ex, boxes)
    count = ex.op("Shape", [boxes], start=0, end=1)
    positions = ex.op(
        "Range", [ex.constant(0, "int64"), _scalar(ex, count), ex.constant(1, "int64")]
    )
    if pixel_offset:
        x2, y2 = ex.op("Add", [x2, const(1.0)]), ex.op("Add", [y2, const(1.0)])
    # ONNX's box is [y1, x1, y2, x2]; the boxes are in score order, which ranks them
    nms_boxes = ex.op("Concat", [y1, x1, y2, x2], axis=1)
    nms_boxes = ex.op("Unsqueeze", [ex.cast(nms_boxes, "float32"), ex.ints([0])])
    rank = ex.op("Neg", [ex.cast(positions, "float32")])
    most = ex.ints([post_n]) if post_n > 0 else count
    picked = ex.op(
        "NonMaxSuppression",
        [
            nms_boxes,
            ex.op("Unsqueeze", [rank, ex.ints([0, 1])]),
            most,
            ex.constant([float(threshold)], "float32"),
        ],
        center_point_box=0,
    )
    chosen = ex.op("Slice", [picked, ex.ints([2]), ex.ints([3]), ex.ints([1])])
    chosen = ex.op("Reshape", [chosen, ex.ints([-1])])
    if post_n > 0:
        chosen = ex.op("Slice", [chosen, ex.ints([0]), ex.ints([post_n]), ex.ints([0])])
    exact = _greedy(ex, const, boxes, scores, positions, chosen, threshold, pixel_offset, post_n)
    ex.require(exact, "generate_proposals: the suppression is Paddle's, whatever the ties")
    return chosen


def _scalar(ex: Exporter, one: str) -> str:
    return ex.op("Squeeze", [one, ex.ints([0])])


def _greedy(
    ex: Exporter,
    const,
    boxes: str,
    scores: str,
    positions: str,
    chosen: str,
    threshold: float,
    pixel_offset: bool,
    post_n: int,
) -> str:
    """Whether ``chosen`` is what Paddle's greedy suppression keeps (the first ``post_n``),
    whichever order the C++ library gives boxes of equal score.

    In score order, box i is kept exactly where no chosen box before it overlaps it by
    more than the threshold (a NaN overlap suppresses, as in the kernel): by induction
    over i the choice is then the greedy one in this order. It is the same in every order
    of equal scores where, among boxes of one score, at most one is left unsuppressed by
    the chosen boxes of higher scores (then at most that one can be kept, whatever its
    place among them, and the boxes kept have distinct scores, so their order is fixed)."""
    column = ex.op("Unsqueeze", [positions, ex.ints([1])])  # [K, 1]
    row = ex.op("Unsqueeze", [chosen, ex.ints([0])])  # [1, S]
    is_chosen = _count(ex, ex.op("Equal", [column, row]), 1)
    is_chosen = ex.op("Greater", [is_chosen, ex.constant(0, "int64")])
    exceeds = _overlap_exceeds(
        ex, const, boxes, ex.op("Gather", [boxes, chosen], axis=0), threshold, pixel_offset
    )  # [K, S]
    before = ex.op("Less", [row, column])
    free = ex.op("Equal", [_count(ex, ex.op("And", [exceeds, before]), 1), ex.constant(0, "int64")])
    agree = ex.op("Equal", [ex.cast(free, "int32"), ex.cast(is_chosen, "int32")])
    # the boxes that take part: all, or where post_n were chosen those up to the last one
    # chosen and those of its score (a tie there decides which is the last)
    chosen_scores = ex.op("Gather", [scores, chosen], axis=0)
    relevant = None
    if post_n > 0:
        full = ex.op("Equal", [ex.op("Shape", [chosen], start=0, end=1), ex.ints([post_n])])
        lowest = ex.op("ReduceMin", [ex.op("Concat", [chosen_scores, scores], axis=0)], keepdims=0)
        last = ex.op("ReduceMax", [ex.op("Concat", [chosen, ex.ints([-1])], axis=0)], keepdims=0)
        after = ex.op("And", [full, ex.op("Greater", [positions, last])])
        agree = ex.op("Or", [agree, after])
        relevant = ex.op("Not", [ex.op("And", [full, ex.op("Less", [scores, lowest])])])
    ok = ex.none(ex.op("Not", [agree]))
    # at most one box of each score free of the chosen boxes of higher scores
    higher = ex.op(
        "Greater",
        [
            ex.op("Unsqueeze", [chosen_scores, ex.ints([0])]),
            ex.op("Unsqueeze", [scores, ex.ints([1])]),
        ],
    )
    unsuppressed = ex.op(
        "Equal", [_count(ex, ex.op("And", [exceeds, higher]), 1), ex.constant(0, "int64")]
    )
    if relevant is not None:
        unsuppressed = ex.op("And", [unsuppressed, relevant])
    free_scores = ex.op(
        "Gather",
        [scores, ex.op("Reshape", [ex.op("NonZero", [unsuppressed]), ex.ints([-1])])],
        axis=0,
    )
    return ex.op("And", [ok, _distinct(ex, free_scores)])


def _count(ex: Exporter, flags: str, axis: int) -> str:
    """How many of ``flags`` are set along ``axis`` (int64; 0 along an empty one)."""
    return ex.op("ReduceSum", [ex.cast(flags, "int64"), ex.ints([axis])], keepdims=0)


def _overlap_exceeds(
    ex: Exporter, const, rows: str, cols: str, threshold: float, pixel_offset: bool
) -> str:
    """[R, C]: whether Paddle's ``JaccardOverlap`` of box r and box c is not ``<=
    threshold``, computed in its order of operations."""
    norm = const(1.0 if pixel_offset else 0.0)
    zero = const(0.0)
    x1, y1, x2, y2 = _columns(ex, rows)  # [R, 1]
    tr = [ex.op("Transpose", [c], perm=[1, 0]) for c in _columns(ex, cols)]  # [1, C]
    apart = ex.op(
        "Or",
        [
            ex.op("Or", [ex.op("Greater", [tr[0], x2]), ex.op("Less", [tr[2], x1])]),
            ex.op("Or", [ex.op("Greater", [tr[1], y2]), ex.op("Less", [tr[3], y1])]),
        ],
    )
    inter_w = ex.op(
        "Add", [ex.op("Sub", [ex.op("Min", [x2, tr[2]]), ex.op("Max", [x1, tr[0]])]), norm]
    )
    inter_h = ex.op(
        "Add", [ex.op("Sub", [ex.op("Min", [y2, tr[3]]), ex.op("Max", [y1, tr[1]])]), norm]
    )
    inter = ex.op("Mul", [inter_w, inter_h])

    def area(a0: str, a1: str, a2: str, a3: str) -> str:
        invalid = ex.op("Or", [ex.op("Less", [a2, a0]), ex.op("Less", [a3, a1])])
        full = ex.op(
            "Mul",
            [
                ex.op("Add", [ex.op("Sub", [a2, a0]), norm]),
                ex.op("Add", [ex.op("Sub", [a3, a1]), norm]),
            ],
        )
        return ex.op("Where", [invalid, zero, full])

    union = ex.op("Sub", [ex.op("Add", [area(x1, y1, x2, y2), area(*tr)]), inter])
    overlap = ex.op("Where", [apart, zero, ex.op("Div", [inter, union])])
    return ex.op("Not", [ex.op("LessOrEqual", [overlap, const(threshold)])])


#: ``prior_box``'s parameters, in the order ``paddle.vision.ops.prior_box`` passes them
_PRIOR_BOX = (
    "input",
    "image",
    "min_sizes",
    "max_sizes",
    "aspect_ratios",
    "variances",
    "flip",
    "clip",
    "step_w",
    "step_h",
    "offset",
    "min_max_aspect_ratios_order",
)


def _prior_box(ex: Exporter, a: Dict[str, Any]) -> Tuple[str, str]:
    """``prior_box``: its boxes and variances follow from the sizes of its inputs and its
    attributes alone, never their values, so they are constants of a model of fixed
    shapes, computed once by Paddle's own kernel."""
    shapes = [ex.shape(a["input"]), ex.shape(a["image"])]  # declines dynamic sizes
    dtype = ex.dtype(a["input"])
    attributes = [ex.known(a[name]) for name in _PRIOR_BOX[2:]]
    zeros = [paddle.zeros(shape, dtype=dtype) for shape in shapes]
    with paddle.no_grad():
        boxes, variances = paddle._C_ops.prior_box(*zeros, *attributes)
    return (
        ex.constant(boxes.numpy(), dtype_name(boxes.dtype)),
        ex.constant(variances.numpy(), dtype_name(variances.dtype)),
    )


def detection_lowerings() -> Dict[Any, Any]:
    """The lowerings of this module, by the Paddle callable they serve."""
    table: Dict[Any, Any] = {}
    c_op = getattr(paddle._C_ops, "generate_proposals", None)
    if c_op is not None:
        names = (
            "scores",
            "bbox_deltas",
            "img_size",
            "anchors",
            "variances",
            "pre_nms_top_n",
            "post_nms_top_n",
            "nms_thresh",
            "min_size",
            "eta",
            "pixel_offset",
        )
        table[c_op] = positional(*names)(_generate_proposals)
    table[paddle.vision.ops.generate_proposals] = _generate_proposals
    prior_box = getattr(paddle._C_ops, "prior_box", None)
    if prior_box is not None:
        table[prior_box] = positional(*_PRIOR_BOX)(_prior_box)
    return table
