"""One generated function per frame that checks every cache entry's guard on the call's
positional arguments and calls the matching entry's function.

A guard is written for the frame's locals (``L['x']``) and globals (``G['paddle']``): on a
cache hit that means building a dict of the arguments, then one call per entry. The
dispatcher inlines the guards of every entry, in order, with the arguments as its own
parameters, and calls the entry itself, so a hit costs this call, the checks and the
entry's call. It takes the call's arguments as one tuple, which it hands on as it is::

    def ___dispatch(___args):
        ___a0, ___a1 = ___args
        ___ok = False
        try:
            if (type(___v1 := ___a0) is ___e0_t0 and ___v1.shape == [8, 16] ...):
                ___ok = True
        except Exception:
            pass
        if ___ok:
            return ___fn0(*___args)
        return ___miss(___args)

The entry is called outside the ``try``: what it raises is the user's error, not a failed
guard. ``___miss`` is what a call that no guard passed does (a capture); an entry without
an entry function of its own returns ``GENERAL`` (take the general path). It is rebuilt
when the frame's entries change. A guard that reads anything but the arguments by name is
not inlined: that frame keeps the general loop.
"""

from __future__ import annotations

import ast
import io
import itertools
import tokenize
import types
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..bytecode import compat

#: what the dispatcher returns for an entry without an entry function of its own: take
#: the general path
GENERAL = object()

_counter = itertools.count()


def _rewrite(expr: str, args: Dict[str, str], renames: Dict[str, str]) -> Optional[str]:
    """``expr`` with ``L['x']`` as the argument's parameter, ``G`` as ``___G`` and the
    guard's constants renamed; None when it reads ``L`` any other way."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(expr).readline))
    except (tokenize.TokenError, IndentationError):
        return None
    out: List[tuple] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        after_dot = bool(out) and out[-1][1] == "."
        if tok.type == tokenize.NAME and not after_dot:
            if tok.string == "L":
                if (
                    i + 3 >= len(tokens)
                    or tokens[i + 1].string != "["
                    or tokens[i + 3].string != "]"
                ):
                    return None
                try:
                    key = ast.literal_eval(tokens[i + 2].string)
                except (ValueError, SyntaxError):
                    return None
                if key not in args:
                    return None
                out.append((tokenize.NAME, args[key]))
                i += 4
                continue
            if tok.string == "G":
                out.append((tokenize.NAME, "___G"))
                i += 1
                continue
            if tok.string in renames:
                out.append((tokenize.NAME, renames[tok.string]))
                i += 1
                continue
        if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER):
            i += 1
            continue
        out.append((tok.type, tok.string))
        i += 1
    return tokenize.untokenize(out).strip()


def build(
    func: types.FunctionType,
    code: types.CodeType,
    entries: Sequence[Any],
    entry_function: Callable[[types.CodeType], Optional[Callable]],
    miss: Callable,
) -> Optional[Callable]:
    """The dispatcher for ``entries`` (each with ``.guard`` and ``.result``), or None when
    a guard cannot be inlined. ``entry_function(code)``: the function to call for an
    entry's transformed code; ``miss(args)``: what a call no guard passes returns."""
    names = code.co_varnames[: code.co_argcount]
    args = {name: f"___a{i}" for i, name in enumerate(names)}
    scope: Dict[str, Any] = {"___G": func.__globals__, "___miss": miss, "___GENERAL": GENERAL}
    lines = ["def ___dispatch(___args):"]
    if args:
        # the entry is called with the caller's tuple (CALL_FUNCTION_EX): no load per
        # argument, where a call of 64 named ones cost 0.5 us
        lines.append(f"    {', '.join(args.values())}, = ___args")
    for n, entry in enumerate(entries):
        guard = entry.guard
        renames = {name: f"___e{n}_{name.lstrip('_')}" for name in guard.scope}
        checks = []
        for _, expr in guard.parts:
            rewritten = _rewrite(expr, args, renames)
            if rewritten is None:
                return None
            checks.append(f"({rewritten})")
        for name, value in guard.scope.items():
            scope[renames[name]] = value
        result_code = entry.result.code
        fn = entry_function(result_code) if result_code is not None else None
        if fn is None:
            call = "___GENERAL"
        else:
            scope[f"___fn{n}"] = fn
            call = f"___fn{n}(*___args)"
        condition = " and ".join(checks) or "True"
        lines += [
            "    ___ok = False",
            "    try:",
            f"        if {condition}:",
            "            ___ok = True",
            "    except Exception:",  # a guard that cannot run has failed
            "        pass",
            "    if ___ok:",
            f"        return {call}",
        ]
    lines.append("    return ___miss(___args)")
    source = "\n".join(lines) + "\n"
    filename = f"<jit_core dispatch {next(_counter)}: {code.co_name}>"
    fn = compat.exec_source(source, filename, "___dispatch", scope)
    fn.source = source
    return fn


__all__ = ["GENERAL", "build"]
