"""The generator's own promises: programs stay small.

A hunt on Python 3.13 (seed 21) went to 24 GB at its 1743rd program, eager Paddle as much
as compiled: ``obj.items = lst`` made the two names one list, and ``obj.items.extend(lst)``
in a loop over that list doubled it at each step. Loops over ``lst`` now take a copy of at
most four elements and the extend at most three, so a list grows by a bounded number of
elements per call (``programs.py``). These tests run programs eagerly only, under a tracer
that stops them as soon as a list passes that bound, so a regression fails here instead of
taking the machine's memory."""

from __future__ import annotations

import sys

import paddle
import pytest

from . import checker
from .programs import Spec, example_inputs, render

#: executions of simple statements in one call, at most: ten top-level statements, each a
#: loop (five runs at most) of four loops (five each) of four statements; an ``if`` or a
#: ``try`` runs no more than a loop, and ``try`` has two bodies of four, as a loop of four
#: loops does
_RUNS_PER_CALL = 10 * 5 * 4 * 5 * 4
#: elements a statement may add to a list (``obj.items.extend(lst[:3])``)
_GROWTH = 3
#: a list the program keeps across its calls (``obj.items``, ``LOG``, ``self.hist``)
#: holds at most this many elements after all of them (``example_inputs``: five calls)
_BOUND = 3 + 5 * _RUNS_PER_CALL * _GROWTH


def _run_eager(spec: Spec) -> int:
    """Run every call of ``spec`` eagerly; return the longest list seen. Fails as soon as
    one is longer than ``_BOUND`` (checked at every line: one line at most doubles one)."""
    source = render(spec)
    path = checker._source_file(source)
    side = checker._Side(compile(source, path, "exec"), "fuzz_size", spec.layer)
    longest = [0]

    def watch(frame):
        lists = [side.ns["LOG"], side.obj.items, getattr(side.entry, "hist", [])]
        lists += [v for v in frame.f_locals.values() if isinstance(v, (list, dict))]
        n = max(len(v) for v in lists)
        longest[0] = max(longest[0], n)
        if n > _BOUND:
            raise AssertionError(f"a list of {n} elements (at most {_BOUND})\n{source}")

    def local(frame, event, arg):
        if event == "line":
            watch(frame)
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename == path else None

    before = sys.gettrace()
    sys.settrace(calls)
    try:
        for xn, kn, m in example_inputs(spec):
            _, exc, _ = side.call(side.entry, paddle.to_tensor(xn), paddle.to_tensor(kn), m)
            assert not isinstance(exc, (MemoryError, AssertionError)), exc
    finally:
        sys.settrace(before)
    assert len(example_inputs(spec)) == 5
    return longest[0]


#: the loop the hunt's program below holds twice: over a list whose body grows that list
_GROWING_LOOP = (
    "for_list",
    (9, 12, 5, 15),
    [
        ("layer_param", (5, 11, 10, 3)),
        (
            "for_tensor",
            (15, 0, 4, 7),
            [],
            [
                ("t_transpose", (7, 9, 15, 2)),
                ("t_helper", (7, 14, 7, 4)),
                ("t_where", (3, 7, 3, 7)),
                ("layer_state", (0, 0, 1, 6)),
            ],
        ),
        (
            "if",
            (5, 14, 15, 4),
            [
                ("global_count", (0, 15, 3, 14)),
                ("obj_list", (2, 13, 10, 2)),
                ("i_nonlocal", (12, 5, 4, 7)),
                ("I_arith", (0, 5, 4, 6)),
            ],
            [("dict_comp", (2, 8, 10, 11)), ("numpy_roundtrip", (12, 5, 11, 9))],
        ),
        ("obj_list", (2, 11, 7, 3)),
    ],
    [
        ("list_comp", (0, 7, 13, 2)),
        (
            "for_list",
            (12, 7, 1, 3),
            [("global_log", (10, 14, 15, 2)), ("global_count", (13, 15, 0, 3))],
            [("t_lambda", (5, 4, 12, 9))],
        ),
    ],
)

#: the program running when the hunt was killed (``specs.txt``, its last line)
HUNT_1743 = Spec(
    layer=True,
    rank=3,
    shapes=((4, 4, 4), (3, 3, 4), (4, 1, 4)),
    seed=2145,
    m_values=(1, 0),
    stmts=(
        ("t_stack_comp", (11, 1, 2, 12)),
        ("obj_list", (4, 1, 3, 5)),
        ("s_genexpr", (5, 14, 6, 9)),
        ("t_unary", (10, 7, 8, 9)),
        _GROWING_LOOP,
        ("t_concat_slice", (9, 10, 7, 3)),
        (
            "for_list",
            (10, 7, 4, 8),
            [("t_stack_comp", (7, 1, 2, 6))],
            [
                ("for_range", (4, 10, 0, 13), [("t_helper", (11, 10, 4, 5))], []),
                ("continue", (4, 9, 9, 13)),
                ("t_closure_def", (14, 9, 14, 3)),
            ],
        ),
        _GROWING_LOOP,
        ("t_closure_call", (5, 10, 3, 2)),
        ("t_reshape", (10, 4, 8, 13)),
    ),
    ret=11,
)


def _grower(kind: str) -> tuple:
    """A loop of four loops of four statements that each grow ``lst`` (and ``obj.items``,
    the same list) as much as one statement can."""
    grow = [("obj_list", (2, 0, 0, 0)), ("list_op", (5, 0, 0, 0))] * 2
    return (kind, (1, 0, 4, 0), [(kind, (1, 0, 4, 0), grow, [])] * 4, [])


#: the worst the generator can do to a list: one list under two names, ``m`` set to its
#: length, then nine nests of loops over it (or as long as it), each growing it at every
#: step
WORST = Spec(
    layer=False,
    rank=1,
    shapes=((5,), (5,), (5,)),
    seed=0,
    m_values=(4, 4),
    stmts=(
        ("obj_list", (1, 0, 0, 0)),  # obj.items = lst
        ("i_arith", (0, 2, 0, 2)),  # m = len(lst)
        *[_grower(kind) for kind in ("for_list", "for_range", "for_tensor") * 3],
    ),
    ret=0,
)


@pytest.mark.parametrize("spec", [HUNT_1743, WORST], ids=["hunt_1743", "worst"])
def test_lists_stay_bounded(spec):
    source = render(spec)
    if spec is WORST:  # it is the program it means to be
        assert "obj.items = lst" in source and "m = len(lst)" in source
        assert source.count("obj.items.extend(") == 9 * 4 * 2
    assert _run_eager(spec) <= _BOUND
