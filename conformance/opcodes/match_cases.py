"""Functions with ``match`` statements (3.10+ syntax: imported by test_matching.py only
on 3.10 and later)."""

from __future__ import annotations

import paddle


class Point:
    __match_args__ = ("x", "y")

    def __init__(self, x, y):
        self.x = x
        self.y = y


def sequence_pattern(x):
    match x.shape:
        case [n, c]:
            return x * c + n
        case [n, c, *rest]:
            return x * len(rest)
        case _:
            return x


def mapping_pattern(x, cfg={"act": "relu", "scale": 2.0, "bias": 1.0}):  # noqa: B006
    match cfg:
        case {"act": "relu", "scale": s, **rest}:
            return paddle.nn.functional.relu(x) * s + rest["bias"]
        case {"act": act}:
            return x if act else -x
    return -x


def many_captures(x, cfg={"w": 2.0, "b": 1.0, "act": "relu"}):  # noqa: B006
    # three captured values: 3.10 shuffles them with ROT_N
    match cfg:
        case {"w": w, "b": b, "act": act}:
            y = x * w + b
            return paddle.nn.functional.relu(y) if act == "relu" else y
    return x


def class_pattern(x, k=(1, "a"), p=Point(2, 3)):
    match k:
        case (int(a), str()):
            x = x + a
    match p:
        case Point(px, y=py):
            x = x * px + py
    return x


def literal_and_guard(x, mode="eval", depth=3):
    match mode:
        case "train" | "finetune":
            return x * 2
        case "eval" if depth > 2:
            return x + depth
        case _:
            return x


def tensor_value_pattern(x, t):
    match t:
        case 0:
            return x
        case _:
            return x + 1
