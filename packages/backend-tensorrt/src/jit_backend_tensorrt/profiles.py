"""TensorRT optimization profiles from jit-core's dynamic-shape ranges.

An engine serves the input shapes of its profile: for each input a minimum, an optimum
(the shape TensorRT tunes its kernels for) and a maximum. A static dimension is the same in
all three. A dynamic one (``meta["dynamic_dims"]`` of a placeholder, bounds from
``jit_core.mark_dynamic(t, d, min=, max=)`` in ``meta["dynamic_bounds"]``) spans its bounds:
the minimum is ``min`` (at least 2: jit-core never makes sizes 0 and 1 dynamic, its guards
send them to another capture), the optimum the example's size, the maximum ``max`` or,
without one, ``UNBOUNDED_FACTOR`` times the example's size. A call outside the profile runs
on the paddle backend (``runtime.TrtGraph``), with one warning that says to pass ``max=``.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

Shape = Tuple[int, ...]
#: input name -> (min, opt, max) shapes
Profile = Dict[str, Tuple[Shape, Shape, Shape]]
Bounds = Dict[int, Tuple[Optional[int], Optional[int]]]

#: the maximum of a dynamic dimension without ``mark_dynamic(max=...)``, in multiples of
#: the example's size (TensorRT needs a finite one; it sizes the engine's memory for it)
UNBOUNDED_FACTOR = 4
#: jit-core's guards keep sizes below this out of a dynamic capture (shapes.ShapePolicy)
SMALLEST_DYNAMIC = 2


def dimension_range(size: int, bounds: Tuple[Optional[int], Optional[int]]) -> Tuple[int, ...]:
    """(min, opt, max) of one dynamic dimension whose example size is ``size``."""
    lo, hi = bounds
    low = max(SMALLEST_DYNAMIC, lo if lo is not None else SMALLEST_DYNAMIC)
    high = hi if hi is not None else UNBOUNDED_FACTOR * size
    opt = min(max(size, low), high)
    if low > high:
        raise ValueError(f"dimension bounds {bounds} leave no size between {low} and {high}")
    return (low, opt, high)


def optimization_profile(
    inputs: Sequence[Tuple[str, Sequence[int], Sequence[int], Optional[Bounds]]],
) -> Profile:
    """The profile of inputs given as (name, example shape, dynamic dims, their bounds)."""
    profile: Profile = {}
    for name, shape, dims, bounds in inputs:
        lows: List[int] = []
        opts: List[int] = []
        highs: List[int] = []
        for d, size in enumerate(shape):
            if d in dims:
                low, opt, high = dimension_range(int(size), (bounds or {}).get(d, (None, None)))
            else:
                low = opt = high = int(size)
            lows.append(low)
            opts.append(opt)
            highs.append(high)
        profile[name] = (tuple(lows), tuple(opts), tuple(highs))
    return profile


def is_static(profile: Profile) -> bool:
    return all(low == high for low, _, high in profile.values())


def outside(profile: Profile, name: str, shape: Sequence[int]) -> Optional[str]:
    """Why ``shape`` is outside the profile of input ``name``; None when inside."""
    low, _, high = profile[name]
    shape = tuple(int(s) for s in shape)
    if len(shape) != len(low):
        return f"input {name} has rank {len(shape)}, the engine's {len(low)}"
    for d, (s, lo, hi) in enumerate(zip(shape, low, high)):
        if not lo <= s <= hi:
            return f"dimension {d} of input {name} is {s}, the engine serves {lo} to {hi}"
    return None


def graph_inputs(gm, example_inputs: Sequence) -> List[tuple]:
    """(name, shape, dynamic dims, bounds) of a graph's placeholders, for
    ``optimization_profile``."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return [
        (
            n.name,
            list(x.shape),
            list(n.meta.get("dynamic_dims", ())),
            dict(n.meta.get("dynamic_bounds", {})),
        )
        for n, x in zip(placeholders, example_inputs)
    ]
