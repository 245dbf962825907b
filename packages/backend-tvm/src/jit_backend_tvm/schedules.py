"""A schedule for every kernel that has no tuning record, found without measuring.

Without a schedule TVM compiles a kernel as its plain loop nest: one thread, no vectors,
no tiling (ResNet18: 2.2 s per image on two cores). MetaSchedule's search space for the
target already holds only reasonable programs (multi-level tiling, parallel outer loops,
vectorized inner ones, unrolling); one sample of it, drawn with a fixed seed and checked
by the same postprocessors as a tuning candidate, is a large step from the loop nest at
the cost of no measurement. Tuning then picks the best of many such samples.
"""

from __future__ import annotations

import logging
import re
from typing import List, Optional, Tuple

log = logging.getLogger("jit_core.tvm")

#: the seed of the samples: a build is the same program every time
SEED = 20261123
#: further draws for a kernel whose first samples a postprocessor rejects
ATTEMPTS = 3
#: the most explicit unrolling a sampled schedule keeps (ResNet18: compiles in 2.8 s
#: instead of 11.7 s, runs at 439 ms instead of 409 ms)
MAX_UNROLL = 16
_SCHEDULED = "tirx.is_scheduled"


def sample_unscheduled(
    mod,
    target,
    symbolic: bool = False,
    unscheduled: Optional[List[str]] = None,
    plain: str = "",
) -> Tuple[object, int]:
    """``mod`` with each kernel not yet scheduled (by a record) given a sampled schedule;
    returns it and how many kernels were sampled. A kernel the search space cannot
    serve keeps its loop nest. ``symbolic``: the module has symbolic sizes (dynamic
    dimensions), where a kernel whose sampling fails keeps its loop nest too, and its
    name goes to ``unscheduled``. ``plain``: kernels that keep their loop nest whatever
    the search space offers, "backward" (``reads_backward``) or "all"."""
    import tvm_ffi
    from tvm import tirx

    from .tuning import tuning_environment

    sampled = {}
    by_structure = {}
    with target, tuning_environment(target):
        for gv, func in mod.functions_items():
            if not isinstance(func, tirx.PrimFunc) or _is_scheduled(func):
                continue
            if plain == "all" or (plain == "backward" and reads_backward(func)):
                log.info("%s: kept as its loop nest (%s)", gv.name_hint, plain)
                continue
            # a kernel used twice (two blocks of one shape) is sampled once
            same = by_structure.setdefault(tvm_ffi.structural_hash(func), [])
            scheduled = next((s for f, s in same if tvm_ffi.structural_equal(f, func)), None)
            if scheduled is None:
                if symbolic:
                    scheduled = _sample_symbolic(func, target, gv.name_hint)
                else:
                    scheduled = _sample(func, target, gv.name_hint)
                same.append((func, scheduled))
            if scheduled is not None:
                sampled[gv] = scheduled
            elif symbolic and unscheduled is not None:
                unscheduled.append(gv.name_hint)
    for gv, func in sampled.items():
        mod[gv] = func
    return mod, len(sampled)


def _sample_symbolic(func, target, name: str) -> Optional[object]:
    """A schedule for a kernel that may have symbolic sizes: MetaSchedule's search space where it
    can sample one (its tiling needs fixed extents, and fails on most), else the loop
    nest."""
    try:
        return _sample(func, target, name)
    except Exception as e:  # noqa: BLE001 - MetaSchedule's checks fail on symbolic loops
        log.debug("%s: no sampled schedule over symbolic sizes (%s)", name, str(e)[:200])
        return None


#: a read whose index walks down as a block iterator walks up (``T.int64(7) - v_ax0``: a
#: flip, a slice with a negative step), in a kernel's TVMScript
_BACKWARD_READ = re.compile(r"T\.reads\(.*\[[^\]]*-\s*v_\w+")


def reads_backward(func) -> bool:
    """Whether a block of the unscheduled kernel ``func`` reads a buffer backwards. TVM
    0.27's vectorizer miscomputes such a read once it is inlined into a reshape's
    ``floordiv``/``floormod`` indexing (``x.reshape([-1]).flip(0).reshape(x.shape)``:
    half the values wrong, the rest read out of bounds); the kernel's loop nest is right.
    Read from the script: TVM's Python API has no visitor over TIR statements."""
    return bool(_BACKWARD_READ.search(func.script()))


def fold_weight_layouts(mod, target):
    """Compute, once at compile time, the weight layouts that schedules chose for
    constant (layout-free) arguments, instead of in every call."""
    import tvm
    from tvm import relax

    with target:
        return tvm.transform.Sequential(
            [relax.transform.SplitLayoutRewritePreproc(), relax.transform.FoldConstant()]
        )(mod)


def _is_scheduled(func) -> bool:
    return bool(func.attrs is not None and func.attrs.get(_SCHEDULED, False))


def _sample(func, target, name: str) -> Optional[object]:
    import tvm
    from tvm.s_tir import meta_schedule as ms

    for attempt in range(ATTEMPTS):
        context = ms.TuneContext(
            mod=tvm.IRModule({"main": func}),
            target=target,
            space_generator="post-order-apply",
            task_name=name,
            rand_state=SEED + attempt,
            num_threads=1,
        )
        # weights keep their layout: repacking them costs a compiled kernel per weight at
        # build time (densenet121: 32 s), worth it for a measured schedule only
        postprocs = [
            p
            for p in context.space_generator.postprocs
            if not isinstance(p, ms.postproc.RewriteLayout)
        ]
        for space in context.generate_design_space():
            space = _capped_unrolling(space, func)
            if all(p.apply(space) for p in postprocs):
                return space.mod["main"].with_attr(_SCHEDULED, True)
    log.debug("%s: no sampled schedule passed the postprocessors; loop nest kept", name)
    return None


def _capped_unrolling(space, func):
    """The sampled schedule with its explicit unrolling capped at ``MAX_UNROLL`` steps:
    MetaSchedule draws up to 512, which LLVM then compiles for seconds per kernel; a
    measured search may find that worth it, an unmeasured sample should not pay for it."""
    import tvm
    from tvm import s_tir

    trace = space.trace
    changed = False
    for inst in trace.insts:
        if inst.kind.name != "SampleCategorical":
            continue
        values = [int(v) for v in inst.attrs[0]]
        chosen = values[int(trace.get_decision(inst))]
        if chosen > MAX_UNROLL:
            allowed = [i for i, v in enumerate(values) if v <= MAX_UNROLL]
            best = max(allowed, key=lambda i: values[i]) if allowed else 0
            trace = trace.with_decision(inst, best, remove_postproc=True)
            changed = True
    if not changed:
        return space
    capped = s_tir.Schedule(tvm.IRModule({"main": func}))
    trace.apply_to_schedule(capped, remove_postproc=True)
    return capped


__all__ = ["SEED", "fold_weight_layouts", "sample_unscheduled"]
