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

``build_call`` writes the same checks as the optimized object's own ``__call__``
(``api._install_call``), with the binding of the call in front and, for an entry that
only returns what its graph returns, the graph's own lines in place of the entry's call
(``fx.inline``): a hit is then one Python frame, as the eager call is.
"""

from __future__ import annotations

import ast
import io
import itertools
import tokenize
import types
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..bytecode import compat
from ..codegen.frame import GRAPH_CALLS
from ..fx.inline import inline_forward, replace_spans

#: what the dispatcher returns for an entry without an entry function of its own: take
#: the general path
GENERAL = object()

_counter = itertools.count()


def _rewrite(expr: str, args: Dict[str, str], renames: Dict[str, str]) -> Optional[str]:
    """``expr`` with ``L['x']`` as the argument's parameter, ``G`` as ``___G`` and the
    guard's constants renamed, its text otherwise as it was; None when it reads ``L``
    any other way."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(expr).readline))
    except (tokenize.TokenError, IndentationError):
        return None
    #: (start, end, new text)
    edits: List[tuple] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type == tokenize.NAME and not (i and tokens[i - 1].string == "."):
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
                edits.append((tok.start, tokens[i + 3].end, args[key]))
                i += 4
                continue
            if tok.string == "G":
                edits.append((tok.start, tok.end, "___G"))
            elif tok.string in renames:
                edits.append((tok.start, tok.end, renames[tok.string]))
        i += 1
    return replace_spans(expr, edits).strip()


def _conditions(
    entries: Sequence[Any], args: Dict[str, str], scope: Dict[str, Any]
) -> Optional[List[str]]:
    """Each entry's guard as one expression over the argument parameters ``args``, its
    constants put into ``scope``; None when one cannot be inlined."""
    conditions = []
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
        conditions.append(" and ".join(checks) or "True")
    return conditions


def _checked(condition: str, run: List[str]) -> List[str]:
    """The lines that run ``run`` (lines at the function's indentation) when
    ``condition`` holds; a guard that cannot run has failed. ``run`` is outside the
    ``try``: what it raises is the caller's error, not a failed guard."""
    return [
        "    ___ok = False",
        "    try:",
        f"        if {condition}:",
        "            ___ok = True",
        "    except Exception:",
        "        pass",
        "    if ___ok:",
        *("        " + line for line in run),
    ]


def build(
    func: types.FunctionType,
    code: types.CodeType,
    entries: Sequence[Any],
    entry_function: Callable[[types.CodeType], Optional[Callable]],
    miss: Callable,
) -> Optional[Callable]:
    """The dispatcher for ``entries`` (each with ``.guard`` and ``.result``), or None when
    a guard cannot be inlined. ``entry_function(code)``: the function to call for an
    entry's transformed code (None for an entry's code of None, or one only the general
    path serves); ``miss(args)``: what a call no guard passes returns."""
    names = code.co_varnames[: code.co_argcount]
    args = {name: f"___a{i}" for i, name in enumerate(names)}
    scope: Dict[str, Any] = {"___G": func.__globals__, "___miss": miss, "___GENERAL": GENERAL}
    conditions = _conditions(entries, args, scope)
    if conditions is None:
        return None
    lines = ["def ___dispatch(___args):"]
    if args:
        # the entry is called with the caller's tuple (CALL_FUNCTION_EX): no load per
        # argument, where a call of 64 named ones cost 0.5 us
        lines.append(f"    {', '.join(args.values())}, = ___args")
    for n, (entry, condition) in enumerate(zip(entries, conditions)):
        result_code = entry.result.code
        fn = entry_function(result_code)
        if fn is None:
            call = "___GENERAL"
        else:
            scope[f"___fn{n}"] = fn
            call = f"___fn{n}(*___args)"
        lines += _checked(condition, [f"return {call}"])
    lines.append("    return ___miss(___args)")
    source = "\n".join(lines) + "\n"
    filename = f"<jit_core dispatch {next(_counter)}: {code.co_name}>"
    fn = compat.exec_source(source, filename, "___dispatch", scope)
    fn.source = source
    return fn


def build_call(
    func: types.FunctionType,
    code: types.CodeType,
    entries: Sequence[Any],
    entry_function: Callable[[types.CodeType], Optional[Callable]],
    miss: Callable,
    slow: Callable,
    cache: Any,
    hot: Any,
    layer: Optional[Tuple[Any, Callable]] = None,
) -> Optional[Callable]:
    """The ``__call__`` of an optimized function (of an optimized layer: ``layer`` is
    ``(the layer, layer_call_is_forward)``) for ``entries``, ``cache``'s entries while
    ``cache.hot`` is ``hot``; None where ``build`` would give None, or an entry has no
    entry function.

    It is the dispatcher with the call's front door in front: a call that binds as
    ``_front`` knows (positional arguments; every argument by keyword; positional ones,
    then keywords naming the rest in order) goes through the guards; any other call, or one after the entries changed, goes to ``slow(self,
    *args, **kwargs)``. An entry that only returns what its graph returns runs the
    graph right there (``fx.inline``): no Python call between the caller's and the
    graph's operators, as in eager code::

        def f(___self, *___args, **___kw):
            if ___cache.hot is not ___hot:
                return ___slow(___self, *___args, **___kw)
            if ___kw: ...
            ___a0, = ___p = ___args
            <the guards of entry 0, as in build()>
            if ___ok:
                ___l0_y = ___g0_paddle_exp(___a0)
                return ___l0_y
            return ___miss(___p)
    """
    names = code.co_varnames[: code.co_argcount]
    args = {name: f"___a{i}" for i, name in enumerate(names)}
    scope: Dict[str, Any] = {
        "___G": func.__globals__,
        "___miss": miss,
        "___slow": slow,
        "___cache": cache,
        "___hot": hot,
        # no keyword names a positional-only parameter
        "___names": (None,) * code.co_posonlyargcount + names[code.co_posonlyargcount :],
    }
    conditions = _conditions(entries, args, scope)
    if conditions is None or not args:
        return None
    lines = [f"def {_identifier(code.co_name)}(___self, *___args, **___kw):"]
    lines += _front(layer, scope["___names"], scope)
    arg_names = list(args.values())
    lines.append(f"    {', '.join(arg_names)}, = ___p")
    for k, (entry, condition) in enumerate(zip(entries, conditions)):
        result_code = entry.result.code
        fn = entry_function(result_code)
        if fn is None:
            return None
        lines += _checked(condition, _run(k, result_code, fn, arg_names, scope))
    lines.append("    return ___miss(___p)")
    source = "\n".join(lines) + "\n"
    filename = f"<jit_core call {next(_counter)}: {code.co_name}>"
    fn = compat.exec_source(source, filename, _identifier(code.co_name), scope)
    fn.source = source
    return fn


def _front(layer: Optional[Tuple[Any, Callable]], names: tuple, scope: Dict[str, Any]) -> List[str]:
    """The lines that bind a call's arguments as the frame's positional parameters
    ``names`` (None for a positional-only one) in ``___p`` (the layer first), or hand the
    call to ``___slow``."""
    slow = "return ___slow(___self, *___args, **___kw)"
    if layer is None:
        lead, lines = "", ["    if ___cache.hot is not ___hot:", f"        {slow}"]
    else:
        lead = "___layer, "
        scope["___layer"], scope["___is_forward"] = layer
        scope["___type"] = type(layer[0])
        lines = [
            "    if (",
            "        type(___layer) is not ___type",
            "        or ___cache.hot is not ___hot",
            "        or not ___is_forward(___layer)",
            "    ):",
            f"        {slow}",
        ]
        names = names[1:]
    nargs = len(names)
    rest = "___names[len(___args) + 1 :]" if lead else "___names[len(___args) :]"
    lines.append("    if ___kw:")
    if None not in names:
        # every argument by keyword, in any order (``model(**inputs)``): looked up by name
        scope["___keys"] = frozenset(names)
        looked_up = [f"___kw[{name!r}]" for name in names]
        lines += [
            "        if not ___args and ___kw.keys() == ___keys:",
            f"            ___p = {_tuple(([lead.rstrip(', ')] if lead else []) + looked_up)}",
            f"        elif len(___args) + len(___kw) != {nargs} or tuple(___kw) != {rest}:",
        ]
    else:
        lines.append(f"        if len(___args) + len(___kw) != {nargs} or tuple(___kw) != {rest}:")
    return lines + [
        f"            {slow}",
        "        else:",
        f"            ___p = ({lead}*___args, *___kw.values())",
        f"    elif len(___args) == {nargs}:",
        f"        ___p = ({lead}*___args)" if lead else "        ___p = ___args",
        "    else:",
        f"        {slow}",
    ]


def _tuple(items: List[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _run(
    k: int,
    result_code: Optional[types.CodeType],
    fn: Callable,
    arg_names: List[str],
    scope: Dict[str, Any],
) -> List[str]:
    """The lines that run entry ``k``: its graph's own lines, a call of its graph, or a
    call of its entry function ``fn``."""
    call = GRAPH_CALLS.get(result_code) if result_code is not None else None
    if call is None:
        scope[f"___fn{k}"] = fn
        return [f"return ___fn{k}(*___p)"]
    inputs = [arg_names[i] for i in call.args]
    inlined = inline_forward(call.compiled, str(k), inputs, call.output)
    if inlined is None:
        scope[f"___graph{k}"] = call.compiled
        return [f"return ___graph{k}({', '.join(inputs)})[{call.output}]"]
    lines, graph_scope = inlined
    scope.update(graph_scope)
    return lines


def _identifier(name: str) -> str:
    """``name`` where it can name the generated function (``<lambda>`` cannot)."""
    return name if name.isidentifier() and not name.startswith("___") else "___call"


__all__ = ["GENERAL", "build", "build_call"]
