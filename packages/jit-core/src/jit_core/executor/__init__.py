"""The symbolic executor: translator, inlining and the graph a capture builds."""
