"""Facts about CPython's bytecode that jit-core's parts share, in one leaf package:
``compat`` (every difference between CPython 3.8 and 3.13 that jit-core cares about),
``opcode_info`` (jumps, terminals, generator flags) and ``flow`` (successors, liveness,
loops, try blocks). Nothing here imports the rest of jit-core."""
