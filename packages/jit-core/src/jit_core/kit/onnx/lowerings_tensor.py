"""ONNX lowerings of the operations that make, index, join and split tensors: ``full``,
``zeros``, indexing (``x[1:, None, -1]``), ``stack``, ``split``, ``gather``, ``tile``,
``embedding``, ``cumsum``, ``interpolate``.

Registered with jit-core's other lowerings (``lowerings.builtin_lowerings``). Sizes come
from the recorded shapes; a result whose sizes follow the graph's dynamic dimensions is
declined where the lowering needs them.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import paddle
import paddle.nn.functional as F

from ...inplace import setitem_
from .direct import Exporter
from .lowerings import holds_runtime_sizes, reshaped_to_result, shape_list_tensor

_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)


# -- creation --------------------------------------------------------------------------------
def constant_result(ex: Exporter, value: Any) -> str:
    """The result as a constant: ``value`` broadcast to the recorded shape and dtype (a
    ``full`` of one number is remembered: ``ex.known`` gives it to its readers)."""
    shape, dtype = ex.out_shape(), ex.out_dtype()
    array = np.full(shape, value, dtype=np.dtype(dtype) if dtype != "bfloat16" else np.float32)
    return remembered_constant(ex, array, dtype)


def remembered_constant(ex: Exporter, array: np.ndarray, dtype: str) -> str:
    """``array`` as the result's constant; one of a single number is also remembered."""
    if array.size == 1:
        ex.remember(array.reshape(-1)[0].item())
    return ex.constant(array, dtype)


def _full(ex: Exporter, a: Dict[str, Any]) -> str:
    value = ex.known(a.get("fill_value", a.get("value")))
    if not isinstance(value, (int, float, bool)):
        ex.decline("a fill value that is not a number")
    if holds_runtime_sizes(ex, a.get("shape")):
        return _filled_to(ex, a["shape"], value)
    return constant_result(ex, value)


def _to_tensor(ex: Exporter, a: Dict[str, Any]) -> str:
    """``paddle.to_tensor(constant)``: a NumPy array or a number of the capture, as the
    recorded dtype (NumPy code in the graph makes its constants so)."""
    data = a.get("data")
    if not isinstance(data, (np.ndarray, np.generic, int, float, bool, list, tuple)):
        ex.decline(f"paddle.to_tensor() of a {type(data).__name__}")
    dtype = ex.out_dtype()
    if dtype == "bfloat16":
        ex.decline("a bfloat16 constant")
    array = np.asarray(data)
    if array.dtype.kind not in "biufc":
        ex.decline(f"paddle.to_tensor() of a {type(data).__name__} that is not of numbers")
    array = array.astype(np.dtype(dtype))
    if list(array.shape) != ex.out_shape():
        ex.decline("a constant whose shape is not the recorded one")
    return remembered_constant(ex, array, dtype)


def _filled(value: Any) -> Callable:
    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        if holds_runtime_sizes(ex, a.get("shape")):
            return _filled_to(ex, a["shape"], value)
        return constant_result(ex, value)

    return lower


def _filled_to(ex: Exporter, shape: Any, value: Any) -> str:
    """``value`` in a tensor of a shape the model computes (``paddle.ones([1, n + 1])``
    where ``n`` is a dynamic size): ``ConstantOfShape``."""
    fill = ex.tensor(np.asarray([value]), ex.out_dtype())
    return ex.op("ConstantOfShape", [shape_list_tensor(ex, shape)], value=fill)


def _arange(ex: Exporter, a: Dict[str, Any]) -> str:
    if any(ex.runtime_int(a.get(k)) for k in ("start", "end", "step")):
        return _range(ex, a.get("start"), a.get("end"), a.get("step"))
    start, end, step = (ex.known(a.get(k)) for k in ("start", "end", "step"))
    if end is None:
        start, end = 0, start
    values = np.arange(start, end, 1 if step is None else step)
    if list(values.shape) != ex.out_shape():
        ex.decline("a range whose length differs from the recorded one")
    return ex.constant(values, ex.out_dtype())


def _range(ex: Exporter, start: Any, end: Any, step: Any) -> str:
    """``arange`` with bounds only the model knows: ONNX's ``Range`` of 0-D tensors of
    the result's dtype."""
    if end is None:
        start, end = 0, start
    dtype = ex.out_dtype()
    if dtype not in ("int32", "int64"):
        ex.decline(f"a range of {dtype} with bounds the model computes")
    bounds = [
        ex.input(v, dtype) if ex.runtime_int(v) else ex.constant(np.asarray(ex.known(v)), dtype)
        for v in (start, end, 1 if step is None else step)
    ]
    return ex.op("Range", bounds)


# -- indexing --------------------------------------------------------------------------------
def _getitem(ex: Exporter, a: Dict[str, Any]) -> str:
    x, index = a["x"], a["y"]
    items = ex.items(x)
    if items is not None:
        # one result of a call with several (``split``)
        if not isinstance(index, int) or not -len(items) <= index < len(items):
            ex.decline("an index into a list of results that is not a constant int")
        if items[index] is None:
            ex.decline(f"result {index} of {x.name}, which its lowering does not compute")
        return items[index]
    if not ex.is_tensor(x):
        ex.decline("indexing something other than a tensor")
    index = index if isinstance(index, tuple) else (index,)
    tensors = [i for i in index if ex.is_tensor(i)]
    if tensors:
        return _gather_index(ex, x, index)
    return _basic_index(ex, x, index)


def _basic_index(ex: Exporter, x: Any, index: tuple) -> str:
    """Ints, slices, None and ``...``: one Slice, then a Reshape to the result's shape
    (which drops the dimensions an int took and adds those None made)."""
    rank = ex.rank(x)
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if used > rank or sum(1 for i in index if i is Ellipsis) > 1:
        ex.decline("more indices than dimensions")
    starts: List[int] = []
    ends: List[int] = []
    axes: List[int] = []
    steps: List[int] = []
    dim = 0
    for item in index:
        if item is None:
            continue
        if item is Ellipsis:
            dim += rank - used
            continue
        if isinstance(item, bool) or not isinstance(item, (int, slice)):
            ex.decline(f"an index of type {type(item).__name__}")
        if isinstance(item, int):
            size = ex.dim(x, dim)
            if not -size <= item < size:
                ex.decline(f"index {item} out of range for size {size}")
            starts.append(item)
            ends.append(item + 1 if item != -1 else _INT64_MAX)
            axes.append(dim)
            steps.append(1)
        else:
            # a bound may be a graph int (``cos[:seq_len]`` where the length is dynamic):
            # its value where this model fixes it, else read when the model runs
            item = slice(_bound(ex, item.start), _bound(ex, item.stop), item.step)
            parts = (item.start, item.stop, item.step)
            if not all(
                p is None or ex.runtime_int(p) or (isinstance(p, int) and not isinstance(p, bool))
                for p in parts
            ):
                ex.decline("a slice whose bounds are not ints")
            if ex.runtime_int(item.step):
                ex.decline("a slice step the model computes")
            step = 1 if item.step is None else item.step
            if step == 0:
                ex.decline("a slice step of 0")
            if item.start is not None or item.stop is not None or step != 1:
                first, last = (0, _INT64_MAX) if step > 0 else (-1, _INT64_MIN)
                starts.append(first if item.start is None else item.start)
                ends.append(last if item.stop is None else item.stop)
                axes.append(dim)
                steps.append(step)
        dim += 1
    out = ex.input(x)
    if axes:
        out = ex.op(
            "Slice", [out, _ints_of(ex, starts), _ints_of(ex, ends), ex.ints(axes), ex.ints(steps)]
        )
    return reshaped_to_result(ex, out)


def _setitem(ex: Exporter, a: Dict[str, Any]) -> str:
    """``x[key] = value`` (``inplace.setitem_``; the graph reads the node's result where
    eager reads the updated ``x``) for ints, slices and ``...`` of constant bounds into a
    tensor of fixed sizes, and a value of one element: ``Where(mask, value, x)``, the mask
    a constant computed with NumPy, whose indexing is Paddle's for these keys (Swin's
    shifted-window attention mask is built this way on a ``paddle.zeros``)."""
    x, key, value = a["x"], a["key"], a["value"]
    if not ex.is_tensor(x):
        ex.decline("an update of something other than a tensor")
    shape = ex.shape(x)
    items = key if isinstance(key, tuple) else (key,)
    index: List[Any] = []
    for item in items:
        if item is Ellipsis:
            index.append(item)
        elif isinstance(item, slice):
            parts = [_bound(ex, p) for p in (item.start, item.stop, item.step)]
            if not all(
                p is None or (isinstance(p, int) and not isinstance(p, bool)) for p in parts
            ):
                ex.decline("an update through a slice whose bounds are not constant ints")
            index.append(slice(*parts))
        elif isinstance(item, int) and not isinstance(item, bool):
            index.append(item)
        else:
            ex.decline(f"an update through an index of type {type(item).__name__}")
    mask = np.zeros(shape, dtype=bool)
    try:
        mask[tuple(index)] = True
    except (IndexError, ValueError, TypeError) as e:
        ex.decline(f"an update through an index NumPy refuses: {e}")
    if ex.is_tensor(value):
        sizes = ex.shape(value)
        if len(sizes) > len(shape) or any(d != 1 for d in sizes):
            ex.decline("an update with a tensor of more than one element")
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        ex.decline(f"an update with a value of type {type(value).__name__}")
    dtype = ex.dtype(x)
    return ex.op("Where", [ex.constant(mask, "bool"), ex.input(value, dtype), ex.input(x)])


def _bound(ex: Exporter, p: Any) -> Any:
    """A slice bound: a graph int's value where the model fixes it."""
    if p is not None and not isinstance(p, int) and ex.is_tensor(p) and not ex.runtime_int(p):
        try:
            return ex.known(p)
        except Exception:  # noqa: BLE001 - declined: not a constant, left as it is
            return p
    return p


def _ints_of(ex: Exporter, values: List[Any]) -> str:
    """A 1-D int64 tensor of ints and graph ints the model computes."""
    if not any(ex.runtime_int(v) for v in values):
        return ex.ints(values)
    return shape_list_tensor(ex, values)


def _gather_index(ex: Exporter, x: Any, index: tuple) -> str:
    """``x[ids]`` and ``x[:, ids]``: one integer tensor after full slices, a Gather."""
    position = next(i for i, item in enumerate(index) if ex.is_tensor(item))
    ids = index[position]
    before, after = index[:position], index[position + 1 :]
    if any(i != slice(None) for i in before) or any(
        i not in (slice(None), Ellipsis) for i in after
    ):
        ex.decline("an integer tensor index with other indices")
    if ex.dtype(ids) not in ("int32", "int64"):
        ex.decline(f"a {ex.dtype(ids)} tensor index")
    if ex.rank(ids) > 1:
        # (LLaMA's ``cos[position_ids]``) the index's shape takes the axis's place, as in
        # ONNX's Gather; Paddle's gather function takes 1-D indices only
        return ex.op("Gather", [ex.input(x), ex.input(ids)], axis=position)
    return _gather(ex, {"x": x, "index": ids, "axis": position})


def _gather(ex: Exporter, a: Dict[str, Any]) -> str:
    # Paddle's gather and index_select take an index along one axis; a 0-D index drops it
    x, index = a["x"], a["index"]
    axis = ex.known(a.get("axis"))
    axis = 0 if axis is None else axis
    if not isinstance(axis, int):
        ex.decline("an axis that is not an int")
    if ex.dtype(index) not in ("int32", "int64"):
        ex.decline(f"a {ex.dtype(index)} index")
    if ex.rank(index) > 1:
        ex.decline("an index of more than one dimension")
    out = ex.op("Gather", [ex.input(x), ex.input(index)], axis=axis % ex.rank(x))
    return reshaped_to_result(ex, out)


# -- joining and splitting ---------------------------------------------------------------------
def _stack(ex: Exporter, a: Dict[str, Any]) -> str:
    xs, axis = a["x"], ex.known(a.get("axis", 0))
    if not isinstance(xs, (list, tuple)) or not xs or not isinstance(axis, int):
        ex.decline("not a list of tensors along a constant axis")
    axis = axis % ex.rank(ex.node)
    out = ex.out_dtype()
    parts = [ex.op("Unsqueeze", [ex.input(x, out), ex.ints([axis])]) for x in xs]
    return ex.op("Concat", parts, axis=axis)


def _split(ex: Exporter, a: Dict[str, Any]) -> tuple:
    x = a["x"]
    sections = ex.known(a.get("num_or_sections", a.get("sections")))
    axis = ex.known(a.get("axis", 0))
    if not isinstance(axis, int):
        ex.decline("an axis that is not an int")
    axis = axis % ex.rank(x)
    size = ex.dim(x, axis)
    if isinstance(sections, int):
        if sections <= 0 or size % sections:
            ex.decline(f"{sections} parts of a size {size}")
        sizes = [size // sections] * sections
    elif isinstance(sections, (list, tuple)) and all(isinstance(s, int) for s in sections):
        sizes = list(sections)
        if sizes.count(-1) == 1:
            sizes[sizes.index(-1)] = size - (sum(sizes) + 1)
        if sum(sizes) != size or any(s < 0 for s in sizes):
            ex.decline(f"sections {sections} of a size {size}")
    else:
        ex.decline("sections that are not constants")
    return tuple(ex.op("Split", [ex.input(x), ex.ints(sizes)], outputs=len(sizes), axis=axis))


def _chunk(ex: Exporter, a: Dict[str, Any]) -> tuple:
    return _split(ex, {"x": a["x"], "num_or_sections": a["chunks"], "axis": a.get("axis", 0)})


def _tile(ex: Exporter, a: Dict[str, Any]) -> str:
    x, repeats = a["x"], ex.known(a["repeat_times"])
    if not isinstance(repeats, (list, tuple)) or not all(isinstance(r, int) for r in repeats):
        ex.decline("repeat times that are not constants")
    rank = ex.rank(x)
    name = ex.input(x)
    if len(repeats) > rank:
        # Paddle tiles a tensor of fewer dimensions as one with leading 1s
        name = ex.op("Unsqueeze", [name, ex.ints(list(range(len(repeats) - rank)))])
    repeats = [1] * (rank - len(repeats)) + list(repeats)
    return ex.op("Tile", [name, ex.ints(repeats)])


def _roll(ex: Exporter, a: Dict[str, Any]) -> str:
    """``paddle.roll`` along axes (Swin's shifted windows): per axis, the last ``shift``
    items, then the rest, two Slices and a Concat. Without axes Paddle rolls the
    flattened tensor: declined, as are sizes only the run knows."""
    x, shifts, axes = a["x"], ex.known(a["shifts"]), ex.known(a.get("axis"))
    if axes is None:
        ex.decline("a roll of the flattened tensor (no axis)")
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    axes = [axes] if isinstance(axes, int) else list(axes)
    if len(shifts) != len(axes) or not all(isinstance(v, int) for v in shifts + axes):
        ex.decline("shifts and axes that are not ints of one length")
    out = name = ex.input(x)
    sizes = ex.sizes(x)
    for shift, axis in zip(shifts, axes):
        size = sizes[axis]
        if size is None:
            ex.decline("a roll along a dynamic size")
        if size == 0 or shift % size == 0:
            continue
        cut = size - shift % size
        head = ex.op("Slice", [out, ex.ints([cut]), ex.ints([size]), ex.ints([axis])])
        tail = ex.op("Slice", [out, ex.ints([0]), ex.ints([cut]), ex.ints([axis])])
        out = ex.op("Concat", [head, tail], axis=axis % len(sizes))
    return ex.op("Identity", [out]) if out == name else out


# -- lookups and scans --------------------------------------------------------------------------
def _embedding(ex: Exporter, ids: Any, weight: Any, padding_idx: Optional[int]) -> str:
    """Paddle's lookup: the row of each id, and zeros for ``padding_idx``'s."""
    if ex.dtype(ids) not in ("int32", "int64"):
        ex.decline(f"{ex.dtype(ids)} ids")
    rows = ex.op("Gather", [ex.input(weight), ex.input(ids)], axis=0)
    if padding_idx is None:
        return rows
    padding = ex.op("Equal", [ex.input(ids), ex.constant(padding_idx, ex.dtype(ids))])
    padding = ex.op("Unsqueeze", [padding, ex.ints([-1])])
    return ex.op("Where", [padding, ex.constant(0, ex.out_dtype()), rows])


def _f_embedding(ex: Exporter, a: Dict[str, Any]) -> str:
    if a.get("max_norm") is not None:
        ex.decline("max_norm (it renormalizes the weight in place)")
    pad = a.get("padding_idx")
    if pad is not None and pad < 0:
        pad += ex.shape(a["weight"])[0]
    return _embedding(ex, a["x"], a["weight"], pad)


def _layer_embedding(ex: Exporter, a: Dict[str, Any]) -> str:
    layer = a["layer"]
    pad = layer._padding_idx
    if pad is not None and pad < 0:
        pad += layer.weight.shape[0]
    return _embedding(ex, a["x"], layer.weight, pad)


def _cumsum(ex: Exporter, a: Dict[str, Any]) -> str:
    x, axis = a["x"], ex.known(a.get("axis"))
    if a.get("dtype") is not None:
        ex.decline("a dtype argument")
    out = ex.out_dtype()
    name = ex.input(x, out)
    if axis is None:
        name, axis = ex.op("Reshape", [name, ex.ints([-1])]), 0
    if not isinstance(axis, int):
        ex.decline("an axis that is not an int")
    exclusive, reverse = bool(a.get("exclusive")), bool(a.get("reverse"))
    return ex.op(
        "CumSum",
        [name, ex.constant(axis, "int64")],
        exclusive=1 if exclusive else None,
        reverse=1 if reverse else None,
    )


# -- resizing --------------------------------------------------------------------------------------
def _interpolate(ex: Exporter, a: Dict[str, Any]) -> str:
    """``nearest`` and ``bilinear`` (NCHW) to the recorded size, with the source positions
    Paddle's kernels take."""
    x = a["x"]
    mode = str(a.get("mode", "nearest")).lower()
    if a.get("data_format") not in (None, "NCHW") or ex.rank(x) != 4:
        ex.decline(f"data_format={a.get('data_format')!r} on a rank-{ex.rank(x)} input")
    if a.get("antialias"):
        ex.decline("antialias=True")
    if mode not in ("nearest", "bilinear"):
        ex.decline(f"mode={mode!r}")
    if ex.dtype(x) != "float32":
        ex.decline(f"a {ex.dtype(x)} input (ONNX Runtime's Resize is float32 only)")
    in_hw, out_hw = ex.shape(x)[2:], ex.out_shape()[2:]
    scale = a.get("scale_factor")
    if scale is not None and a.get("size") is None:
        # Paddle maps positions by the scale given, ONNX by the sizes' ratio: they
        # agree where the scale gives the size exactly
        scales = [scale, scale] if not isinstance(scale, (list, tuple)) else list(scale)
        if not all(isinstance(s, (int, float)) for s in scales):
            ex.decline("a scale factor that is not a constant")
        if [float(i * s) for i, s in zip(in_hw, scales)] != [float(o) for o in out_hw]:
            ex.decline(f"scale_factor {scale}, which does not give the size exactly")
    align_corners = bool(a.get("align_corners", False))
    if mode == "nearest":
        if align_corners:
            ex.decline("nearest with align_corners=True")
        attrs: Dict[str, Any] = {
            "mode": "nearest",
            "coordinate_transformation_mode": "asymmetric",
            "nearest_mode": "floor",
        }
    elif align_corners:
        attrs = {"mode": "linear", "coordinate_transformation_mode": "align_corners"}
    else:
        half = int(a.get("align_mode", 0)) == 0
        attrs = {
            "mode": "linear",
            "coordinate_transformation_mode": "half_pixel" if half else "asymmetric",
        }
    sizes = ex.ints(ex.out_shape())
    return ex.op("Resize", [ex.input(x), "", "", sizes], **attrs)


def _upsample_layer(mode: Optional[str] = None, align_corners: bool = False) -> Callable:
    """``nn.Upsample`` (its own mode), or the layers of one mode: ``UpsamplingNearest2D``,
    and ``UpsamplingBilinear2D``, which aligns corners."""

    def lower(ex: Exporter, a: Dict[str, Any]) -> str:
        layer = a["layer"]
        args = {"x": a["x"], "size": layer.size, "scale_factor": layer.scale_factor}
        args["data_format"] = layer.data_format
        if mode is None:
            args.update(mode=layer.mode, align_corners=layer.align_corners)
            args["align_mode"] = layer.align_mode
        else:
            args.update(mode=mode, align_corners=align_corners)
        return _interpolate(ex, args)

    return lower


def tensor_lowerings() -> Dict[Any, Callable]:
    """The lowerings of this module, by target."""
    nn = paddle.nn
    table: Dict[Any, Callable] = {}

    def add(targets, fn):
        for t in targets if isinstance(targets, list) else [targets]:
            if t is not None:
                table[t] = fn

    add([paddle.full], _full)
    add([paddle.to_tensor], _to_tensor)
    add([paddle.zeros], _filled(0))
    add([paddle.ones], _filled(1))
    add([paddle.arange], _arange)
    add([operator.getitem, "Tensor.__getitem__"], _getitem)
    add([setitem_], _setitem)
    add([paddle.gather, paddle.index_select, "Tensor.gather", "Tensor.index_select"], _gather)
    add([paddle.stack], _stack)
    add([paddle.split, "Tensor.split"], _split)
    add([paddle.chunk, "Tensor.chunk"], _chunk)
    add([paddle.tile, "Tensor.tile"], _tile)
    add([paddle.roll, "Tensor.roll"], _roll)
    add([F.embedding], _f_embedding)
    add(nn.Embedding, _layer_embedding)
    add([paddle.cumsum, "Tensor.cumsum"], _cumsum)
    add([F.interpolate, F.upsample], _interpolate)
    add(nn.Upsample, _upsample_layer())
    add(nn.UpsamplingNearest2D, _upsample_layer("nearest"))
    add(nn.UpsamplingBilinear2D, _upsample_layer("bilinear", align_corners=True))
    return table
