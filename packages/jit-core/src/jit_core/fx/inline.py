"""A ``GraphModule``'s generated ``forward``, as lines to run inside another generated
function (``runtime.fast_dispatch``).

On a cache hit the call of ``forward`` is one Python call between the user's call and the
graph's operators; on Python 3.8 a chain of Paddle operators runs measurably slower one
Python call deeper (0.5% of a 500-op chain, issue 35), so the optimized object's own
``__call__`` runs the graph's lines itself. The lines are ``forward``'s, with its names
renamed so that several graphs and the caller's own names can share one function::

    y = paddle_exp(x)            ->   ___l0_y = ___g0_paddle_exp(___a0)
    w = self.weight              ->   ___l0_w = ___m0.weight
    return (y,)                  ->   return ___l0_y
"""

from __future__ import annotations

import io
import re
import tokenize
import types
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .graph_module import GraphModule

#: beyond this many lines a graph is called, not inlined: one call is nothing next to its
#: operators, and compiling its lines again costs milliseconds
MAX_LINES = 2000

#: a returned tuple of names: ``(y,)``, ``(a, b)``
_NAMES = re.compile(r"\((\w+),\)|\((\w+(?:, \w+)+),?\)")


def inline_forward(
    compiled: Any, prefix: str, arg_names: Sequence[str], output: int
) -> Optional[Tuple[List[str], Dict[str, Any]]]:
    """``(lines, scope)``: what ``compiled(*arg_names)[output]`` does, as lines (indented
    for a function body, ending with ``return``) that read the names in ``scope``
    (``___g{prefix}_*`` for the code's globals, ``___m{prefix}`` for the module); None
    when ``compiled`` is not the current generated ``forward`` of a ``GraphModule``."""
    gm = getattr(compiled, "__self__", None)
    fn = getattr(compiled, "__func__", None)
    if not isinstance(fn, types.FunctionType) or not isinstance(gm, GraphModule):
        return None
    code, graph_globals = fn.__code__, fn.__globals__
    if type(gm).__dict__.get("forward") is not fn:
        return None
    if any(isinstance(c, types.CodeType) for c in code.co_consts):
        return None  # a nested function or comprehension: not what codegen writes
    lines = gm.run_code.splitlines()
    if len(lines) > MAX_LINES or not lines[-1].lstrip().startswith("return "):
        return None
    nparams = code.co_argcount
    if nparams - 1 != len(arg_names):
        return None
    names = code.co_varnames
    renames: Dict[str, str] = {names[0]: f"___m{prefix}"}
    renames.update(zip(names[1:nparams], arg_names))
    renames.update({name: f"___l{prefix}_{name}" for name in names[nparams:]})
    scope: Dict[str, Any] = {f"___m{prefix}": gm}
    for name, value in graph_globals.items():
        if name not in renames and not name.startswith("__"):
            renames[name] = f"___g{prefix}_{name}"
            scope[renames[name]] = value
    body = _renamed("\n".join(lines[1:]) + "\n", renames)
    if body is None:
        return None
    *run, last = body.splitlines()
    returned = last.strip()[len("return ") :]
    items = _NAMES.fullmatch(returned)
    names_out = (items.group(1) or items.group(2)).split(", ") if items is not None else []
    if output < len(names_out):
        picked = names_out[output]
    else:
        picked = f"({returned})[{output}]"
    return [line[4:] for line in run] + [f"return {picked}"], scope


def _renamed(source: str, renames: Dict[str, str]) -> Optional[str]:
    """``source`` with each name in ``renames`` replaced where it is a variable: not an
    attribute (after a dot), not a keyword argument's name, not inside a string. The
    rest of the text stays as it was."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError):
        return None
    edits: List[Tuple[Tuple[int, int], Tuple[int, int], str]] = []
    depth = 0
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.OP:
            if tok.string in "([{":
                depth += 1
            elif tok.string in ")]}":
                depth -= 1
            continue
        if tok.type != tokenize.NAME or tok.string not in renames:
            continue
        if i and tokens[i - 1].string == ".":
            continue
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if depth and nxt is not None and nxt.string == "=":
            continue  # f(x, axis=1): the keyword
        edits.append((tok.start, tok.end, renames[tok.string]))
    return replace_spans(source, edits)


def replace_spans(
    source: str, spans: Sequence[Tuple[Tuple[int, int], Tuple[int, int], str]]
) -> str:
    """``source`` with each span (``tokenize``'s (row, column) of its start and end, in
    the order they appear, none overlapping) replaced by its text."""
    lines = source.splitlines(True)
    for (row, col), (end_row, end), new in reversed(spans):
        lines[row - 1] = lines[row - 1][:col] + new + lines[end_row - 1][end:]
        del lines[row:end_row]
    return "".join(lines)


__all__ = ["MAX_LINES", "inline_forward", "replace_spans"]
