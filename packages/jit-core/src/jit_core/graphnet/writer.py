"""Write GraphNet-format samples: tensor metas from real tensors, the meta files and
``graph_net.json``."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional

import numpy as np

from .samples import INFO_FILE, INPUT_META_FILE, MODEL_FILE, WEIGHT_META_FILE, TensorMeta

#: integer and boolean tensors up to this many elements keep their values (``data``), as
#: GraphNet keeps them: indices, masks and lengths drawn at random would mean another graph
INT_DATA_LIMIT = 1024
#: floating tensors this small keep their values too
FLOAT_DATA_LIMIT = 64


def meta_from_tensor(name: str, tensor, original_name: Optional[str] = None) -> TensorMeta:
    """A meta describing ``tensor``: its values when it is a small integer or boolean
    tensor (or a tiny floating one), else its range, mean and standard deviation."""
    dtype = str(tensor.dtype).replace("paddle.", "")
    array = (tensor.astype("float32") if dtype == "bfloat16" else tensor).numpy()
    meta = TensorMeta(name=name, shape=list(tensor.shape), dtype=dtype, original_name=original_name)
    floating = dtype.startswith(("float", "bfloat", "complex"))
    limit = FLOAT_DATA_LIMIT if floating else INT_DATA_LIMIT
    if array.size <= limit:
        meta.data = array.reshape(-1).tolist()
        return meta
    if dtype.startswith("complex"):
        array = np.abs(array)
    if dtype == "bool":
        meta.min_val, meta.max_val = 0, 1
        return meta
    meta.min_val = float(array.min())
    meta.max_val = float(array.max())
    if floating:
        meta.mean = float(array.astype("float64").mean())
        meta.std = float(array.astype("float64").std())
    return meta


def _num(value: float) -> str:
    return f'float("{value:.6g}")'


def render_metas(metas: List[TensorMeta]) -> str:
    """The text of a ``weight_meta.py`` or ``input_meta.py``: one class per tensor."""
    blocks = []
    for m in metas:
        lines = [f"class Program_weight_tensor_{m.name}:", f'    name = "{m.name}"']
        if m.original_name:
            lines.append(f"    original_name = {json.dumps(m.original_name)}")
        lines.append(f"    shape = {list(m.shape)}")
        lines.append(f'    dtype = "{m.dtype}"')
        for key in ("min_val", "max_val", "mean", "std"):
            value = getattr(m, key)
            if value is not None:
                lines.append(f"    {key} = {_num(value)}")
        if m.data is None:
            lines.append("    data = None")
        else:
            lines.append("    data = [" + ", ".join(_literal(v) for v in m.data) + "]")
        blocks.append("\n".join(lines) + "\n")
    return "\n\n".join(blocks)


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        if value != value:
            return 'float("nan")'
        if value in (float("inf"), float("-inf")):
            return f'float("{value}")'
        return repr(value)
    if isinstance(value, complex):
        return repr(value)
    return str(value)


def write_sample(
    directory: str,
    model_source: str,
    weights: List[TensorMeta],
    inputs: List[TensorMeta],
    info: Dict[str, Any],
) -> None:
    os.makedirs(directory, exist_ok=True)
    files = {
        MODEL_FILE: model_source,
        WEIGHT_META_FILE: render_metas(weights),
        INPUT_META_FILE: render_metas(inputs),
    }
    for name, text in files.items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            f.write(text)
    with open(os.path.join(directory, INFO_FILE), "w", encoding="utf-8") as f:
        json.dump(info, f, indent=4)
        f.write("\n")


def graph_net_info(model_name: str) -> Dict[str, Any]:
    """``graph_net.json`` as GraphNet writes it for a Paddle sample."""
    return {
        "framework": "paddle",
        "model_name": model_name,
        "num_devices_required": 1,
        "num_nodes_required": 1,
    }
