"""Facts about CPython's bytecode that jit-core's parts share (issue 38's leaf package:
the version differences of ``_compat`` and the control-flow analysis of
``codegen.resume`` are to move here). Nothing here imports the rest of jit-core."""
