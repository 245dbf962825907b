"""A long fuzzing run that keeps going past failures and files them by kind.

``python -m conformance.fuzz.hunt --backend paddle --examples 3000 --out fuzz_out``
writes each distinct failure (its first line, numbers masked) once, with the program, to
``OUT/NNN.txt`` and prints a summary. ``--shrink REGEX`` instead runs until a failure
whose message matches REGEX and lets Hypothesis shrink it to a minimal program.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import time

import paddle

# as in the conformance suite: every graph is linted after each pass
os.environ.setdefault("JIT_DEBUG", "1")

from hypothesis import HealthCheck, Phase, given, settings

import jit_core

from ..helpers import use_backend_tolerance
from . import programs
from .checker import Mismatch, check
from .programs import specs


def _signature(message: str) -> str:
    first = message.splitlines()[0] if message else ""
    first = re.sub(r"call \d+ \(x\[[\d, ]*\], m=\d+\)", "call", first)
    first = re.sub(r"0x[0-9a-f]+", "ADDR", first)
    return re.sub(r"\d+", "N", first)[:200]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="paddle")
    ap.add_argument("--examples", type=int, default=500)
    ap.add_argument("--seed", type=int, default=None, help="default: derandomized")
    ap.add_argument("--out", default="fuzz_out")
    ap.add_argument("--max-loop-depth", type=int, default=None)
    ap.add_argument("--save-all", action="store_true", help="every spec to OUT/specs.txt")
    ap.add_argument("--shrink", default=None, metavar="REGEX")
    args = ap.parse_args()
    use_backend_tolerance(args.backend)
    if args.max_loop_depth is not None:
        programs.MAX_LOOP_DEPTH = args.max_loop_depth
    os.makedirs(args.out, exist_ok=True)
    found: dict = {}
    count = [0]
    inference = jit_core.backends()[args.backend].inference_only
    start = time.time()

    def body(spec):
        count[0] += 1
        t0 = time.time()
        if args.save_all:
            with open(os.path.join(args.out, "specs.txt"), "a") as f:
                f.write(f"{spec!r}\n")
        try:
            check(spec, args.backend)
        except Mismatch as err:
            message = str(err)
            if args.shrink is not None:
                if re.search(args.shrink, message):
                    raise
                return
            sig = _signature(message)
            if sig not in found:
                found[sig] = len(found)
                with open(os.path.join(args.out, f"{found[sig]:03d}.txt"), "w") as f:
                    f.write(f"{message}\n\n--- spec ---\n{spec!r}\n")
                print(f"[{count[0]}] new failure {found[sig]:03d}: {sig}", flush=True)
        finally:
            if time.time() - t0 > 10:
                print(f"[{count[0]}] slow: {time.time() - t0:.0f} s", flush=True)

    phases = [Phase.generate] if args.shrink is None else [Phase.generate, Phase.shrink]
    run = settings(
        max_examples=args.examples,
        derandomize=args.seed is None,
        deadline=None,
        database=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
    )(given(spec=specs())(body))
    if args.seed is not None:
        from hypothesis import seed

        run = seed(args.seed)(run)
    with paddle.no_grad() if inference else contextlib.nullcontext():
        try:
            run()
        except Mismatch as err:
            print(err)
    print(f"{count[0]} programs in {time.time() - start:.0f} s, {len(found)} kinds of failure")
    for sig, i in found.items():
        print(f"  {i:03d}: {sig}")


if __name__ == "__main__":
    main()
