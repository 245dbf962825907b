"""Sizes of the tensors a graph makes, as expressions over the frame's inputs.

``shape_infer`` asks Paddle which sizes of a made tensor are fixed numbers; a size that
follows a dynamic input (the key cache of a decoder, ``concat([past, k], axis=1)``) comes
back unknown, and a capture that needs it as a Python value (``attn.shape != [b, h, q,
kv]``) used to give up its dynamic shapes. Here each operation says how its result's
sizes follow from its arguments' (``concat`` adds them, ``matmul`` takes rows from one
and columns from the other, ``reshape`` takes its shape argument), so such a size gets
an expression (``shapes`` language: ``L['past'].shape[1] + 1``) that guards can state.

Every rule is exact wherever the operation succeeds: where a size could take one of two
forms depending on values the guards do not pin (a broadcast of two symbolic sizes, a
``squeeze`` of a symbolic size), the rule answers None (unknown) rather than guess, and
the capture falls back to static shapes as before. Each answer is also evaluated at the
capture's own sizes and dropped if it disagrees with the example (a rule that is wrong
would otherwise reach a guard).
"""

from __future__ import annotations

import logging
import operator
from typing import Any, Callable, Dict, List, Optional

import paddle
import paddle.nn as nn
import paddle.nn.functional as F

from . import shape_infer, shapes
from .fx import Node

log = logging.getLogger("jit_core.recompiles")

Expr = Optional[tuple]
Dims = Optional[List[Expr]]

_ONE = shapes.const(1)


# ------------------------------------------------------------------ expressions
def _op(fn: Callable, a: Expr, b: Expr) -> Expr:
    if a is None or b is None:
        return None
    if a[0] == "const" and b[0] == "const":
        return shapes.const(fn(a[1], b[1]))
    # keep the common forms short: x + 0, x * 1
    if fn in (operator.add, operator.sub) and b == shapes.const(0):
        return a
    if fn is operator.add and a == shapes.const(0):
        return b
    if fn in (operator.mul, operator.floordiv) and b == _ONE:
        return a
    if fn is operator.mul and a == _ONE:
        return b
    return ("op", fn, a, b)


def _product(exprs: List[Expr]) -> Expr:
    out: Expr = _ONE
    for e in exprs:
        out = _op(operator.mul, out, e)
    return out


def evaluate(expr: tuple, value_of: Callable[[tuple], Any]) -> Any:
    """``expr``'s value, with ``value_of(leaf)`` for each ``("dim", ...)``/``("value", ...)``."""
    kind = expr[0]
    if kind == "const":
        return expr[1]
    if kind in ("dim", "value"):
        return value_of(expr)
    if kind == "neg":
        return -evaluate(expr[1], value_of)
    return expr[1](evaluate(expr[2], value_of), evaluate(expr[3], value_of))


def linear_form(expr: tuple) -> Optional[Dict[Any, int]]:
    """``expr`` as integer coefficients of its leaves (key ``None``: the constant), or
    None where it is not a sum of multiples of sizes (``min``, ``//``, a product of two
    sizes)."""
    kind = expr[0]
    if kind == "const":
        return {None: expr[1]} if type(expr[1]) is int else None
    if kind in ("dim", "value"):
        key = (kind, expr[1].name()) + tuple(expr[2:])
        return {key: 1}
    if kind == "neg":
        inner = linear_form(expr[1])
        return None if inner is None else {k: -v for k, v in inner.items()}
    fn = expr[1]
    a, b = linear_form(expr[2]), linear_form(expr[3])
    if a is None or b is None:
        return None
    if fn in (operator.add, operator.sub):
        sign = 1 if fn is operator.add else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
        return {k: v for k, v in out.items() if v or k is None}
    if fn is operator.mul:
        if set(a) == {None}:
            a, b = b, a
        if set(b) == {None}:
            return {k: v * b[None] for k, v in a.items() if v * b[None] or k is None}
    return None


def always_holds(fn: Callable, a: tuple, b: tuple) -> bool:
    """Whether comparing ``a`` with ``b`` by ``fn`` gives one answer at every size: they
    differ by a constant (``L['x'].shape[1] + 1`` against ``1 + L['x'].shape[1]``), or,
    for ``>=``/``>``, by dynamic sizes (each at least 2) plus a constant that decides it."""
    la, lb = linear_form(a), linear_form(b)
    if la is None or lb is None:
        return False
    if fn in (operator.le, operator.lt):
        la, lb = lb, la
        fn = operator.ge if fn is operator.le else operator.gt
    diff = dict(la)
    for k, v in lb.items():
        diff[k] = diff.get(k, 0) - v
    terms = {k: v for k, v in diff.items() if k is not None and v != 0}
    if not terms:
        return True
    if fn in (operator.ge, operator.gt) and all(k[0] == "dim" and v > 0 for k, v in terms.items()):
        # a dynamic dimension is at least 2 (its tensor's guard checks it)
        return fn(diff.get(None, 0) + 2 * sum(terms.values()), 0)
    return False


# ------------------------------------------------------------------ the inference
class SymbolicShapes:
    """The size expressions of one capture's graph, computed on demand and kept per node."""

    def __init__(self, output):
        self.output = output
        self._shapes: Dict[Any, Dims] = {}
        self._scalars: Dict[Any, Expr] = {}
        self._sources: Dict[Any, Any] = {}
        self._examples: Dict[str, Any] = {}

    def _source_of(self, node) -> Any:
        if node not in self._sources:
            # inputs are added while the capture goes on
            for source, n, example in self.output.inputs:
                self._sources[n] = source
                self._examples[source.name()] = example
        return self._sources.get(node)

    # -- what the rules use
    def dims(self, node) -> Dims:
        """The size expressions of tensor ``node`` (None for a size with no expression),
        or None where nothing is known about it."""
        if node not in self._shapes:
            self._shapes[node] = None  # (a cycle cannot happen; this guards recursion)
            self._shapes[node] = self._checked(node, self._infer(node))
        return self._shapes[node]

    def scalar(self, value: Any) -> Expr:
        """The expression of an int argument: a constant, or a node computing a size."""
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return shapes.const(value)
        if not isinstance(value, Node):
            return None
        if value not in self._scalars:
            self._scalars[value] = self._scalar(value)
        return self._scalars[value]

    def relation(self, fn: Callable, a: Expr, b: Expr) -> Optional[bool]:
        """Whether ``fn(a, b)`` holds in this capture, guarded so that it holds on every
        call the capture serves; None where an expression is missing."""
        if a is None or b is None:
            return None
        holds = bool(fn(self._value(a), self._value(b)))
        if not always_holds(fn, a, b):
            self.output.guards.add_relation(("op", fn, a, b), holds)
        return holds

    # -- internals
    def _value(self, expr: tuple) -> Any:
        def leaf(e):
            if e[0] == "dim":
                return int(self._examples[e[1].name()].shape[e[2]])
            return self._examples[e[1].name()]

        return evaluate(expr, leaf)

    def _scalar(self, node) -> Expr:
        if node.op == "placeholder" and node.meta.get("number_input"):
            source = self._source_of(node)
            return None if source is None else ("value", source)
        if node.op != "call_function":
            return None
        if node.target is shapes.size:
            dims = self.dims(node.args[0])
            dim = node.args[1]
            return None if dims is None else dims[dim]
        if node.target is operator.getitem and isinstance(node.args[1], int):
            # ``paddle.shape(x)[1]``: a 0-D tensor holding a size
            base = node.args[0]
            if isinstance(base, Node) and _name_of(base, self.output) == "shape":
                dims = self.dims(base.args[0])
                index = node.args[1]
                if dims is not None and -len(dims) <= index < len(dims):
                    return dims[index]
            return None
        if node.target in shapes.ARITHMETIC or node.target in shapes.FUNCTIONS:
            a, b = (self.scalar(x) for x in node.args)
            return _op(node.target, a, b)
        if node.target is operator.neg:
            a = self.scalar(node.args[0])
            return None if a is None else _op(operator.sub, shapes.const(0), a)
        return None

    def _infer(self, node) -> Dims:
        shape = node.meta.get("shape")
        if shape is None:
            return None
        if node.op == "placeholder":
            source = self._source_of(node)
            dynamic = set(node.meta.get("dynamic_dims", ()))
            if source is None:
                return None
            return [
                ("dim", source, d) if d in dynamic else shapes.const(int(n))
                for d, n in enumerate(shape)
            ]
        if node.op == "get_attr":
            return [shapes.const(int(n)) for n in shape]
        rule = _rule_for(node, self.output)
        if rule is None:
            return None
        try:
            return rule(self, node, list(node.args), dict(node.kwargs))
        except _Unknown:
            return None

    def _checked(self, node, dims: Dims) -> Dims:
        """``dims`` with what Paddle's own inference knows filled in, each answer checked
        against the example's sizes."""
        shape = node.meta.get("shape")
        if shape is None:
            return None
        if dims is None or len(dims) != len(shape):
            dims = [None] * len(shape)
        else:
            dims = list(dims)
        for d, expr in enumerate(dims):
            if expr is not None and self._value(expr) != int(shape[d]):
                log.warning(
                    "size expression %s of %s dimension %d disagrees with the example (%s): "
                    "not used",
                    shapes.render(expr, lambda s: s.name()),
                    node.name,
                    d,
                    shape[d],
                )
                dims[d] = None
        if any(e is None for e in dims) and node.op not in ("placeholder", "get_attr"):
            fixed = self._static(node)
            if fixed is not None and len(fixed) == len(dims):
                for d, n in enumerate(fixed):
                    if dims[d] is None and n >= 0 and n == int(shape[d]):
                        dims[d] = shapes.const(n)
        return dims

    def _static(self, node) -> Optional[List[int]]:
        """Paddle's own inference (``shape_infer``), asked once for the whole graph so
        far rather than once per node (each answer is a static build)."""
        cache = self.output.static_shapes
        if node not in cache:
            last = node
            for n in self.output.graph.nodes:
                if "shape" in n.meta and n.op not in ("placeholder", "get_attr", "output"):
                    last = n
            shape_infer.static_shapes(self.output, last)
        return shape_infer.static_shapes(self.output, node)


def dim_expr(output, node, dim: int) -> Expr:
    """The expression of size ``dim`` of ``node``, a tensor of ``output``'s graph, or None."""
    table = output.symbolic_shapes
    if table is None:
        table = output.symbolic_shapes = SymbolicShapes(output)
    dims = table.dims(node)
    return None if dims is None else dims[dim]


# ------------------------------------------------------------------ the rules
class _Unknown(Exception):
    """A rule cannot say (an argument it does not read): nothing is known."""


def _arg(args: list, kwargs: dict, index: int, name: str, default: Any = _Unknown) -> Any:
    if index < len(args):
        return args[index]
    if name in kwargs:
        return kwargs[name]
    if default is _Unknown:
        raise _Unknown(name)
    return default


def _tensor_dims(ctx: SymbolicShapes, value: Any) -> List[Expr]:
    """The dims of a tensor argument (a rank-0 list for a Python number)."""
    if isinstance(value, Node):
        if "shape" not in value.meta:
            raise _Unknown(value.name)
        dims = ctx.dims(value)
        if dims is None:
            raise _Unknown(value.name)
        return dims
    if isinstance(value, (bool, int, float)):
        return []
    raise _Unknown(type(value).__name__)


def _axis(axis: Any, rank: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise _Unknown("axis")
    if not -rank <= axis < max(rank, 1):
        raise _Unknown("axis")
    return axis % rank if rank else 0


def _same(ctx, node, args, kwargs) -> Dims:
    return list(_tensor_dims(ctx, _arg(args, kwargs, 0, "x")))


def _broadcast(ctx, node, args, kwargs) -> Dims:
    # (a node without a shape is a Python number: a number input, a size)
    operands = [
        a for a in list(args) + list(kwargs.values()) if isinstance(a, Node) and "shape" in a.meta
    ]
    return _broadcast_dims(ctx, [_tensor_dims(ctx, a) for a in operands])


def _broadcast_dims(ctx, all_dims: List[List[Expr]]) -> Dims:
    rank = max((len(d) for d in all_dims), default=0)
    out: List[Expr] = []
    for i in range(rank):
        column = [d[len(d) - rank + i] for d in all_dims if len(d) - rank + i >= 0]
        known = [e for e in column if e is not None]
        if len(known) != len(column):
            out.append(None)
            continue
        distinct: List[tuple] = []
        for e in known:
            if e != _ONE and e not in distinct:
                distinct.append(e)
        consts = [e for e in distinct if e[0] == "const"]
        if not distinct:
            out.append(_ONE)
        elif consts:
            # a fixed size other than 1 is the result's wherever the broadcast succeeds
            out.append(consts[0])
        elif len(distinct) == 1:
            out.append(distinct[0])
        elif all(ctx.relation(operator.ne, e, _ONE) for e in distinct):
            # two symbolic sizes: which one wins would depend on which is 1 at run time;
            # guarded as none, any of them is the result wherever the broadcast succeeds
            out.append(distinct[0])
        else:
            out.append(None)
    return out


def _shape_list(ctx, value: Any) -> List[Expr]:
    if isinstance(value, (list, tuple)):
        return [ctx.scalar(v) for v in value]
    raise _Unknown("shape")


def _reshape(ctx, node, args, kwargs) -> Dims:
    x = _tensor_dims(ctx, _arg(args, kwargs, 0, "x"))
    wanted = _shape_list(ctx, _arg(args, kwargs, 1, "shape"))
    out: List[Expr] = []
    infer = None
    for i, e in enumerate(wanted):
        if e == shapes.const(0):
            out.append(x[i] if i < len(x) else None)
        elif e == shapes.const(-1):
            infer = i
            out.append(None)
        elif e is not None and e[0] != "const" and not ctx.relation(operator.ge, e, _ONE):
            # a symbolic entry that is 0 or -1 at run time means "copy" or "infer"
            return [None] * len(wanted)
        else:
            out.append(e)
    if infer is not None:
        known = [e for i, e in enumerate(out) if i != infer]
        if all(e is not None for e in known) and all(e is not None for e in x):
            out[infer] = _op(operator.floordiv, _product(x), _product(known))
    return out


def _transpose(ctx, node, args, kwargs) -> Dims:
    x = _tensor_dims(ctx, _arg(args, kwargs, 0, "x"))
    perm = _arg(args, kwargs, 1, "perm")
    if not isinstance(perm, (list, tuple)) or sorted(p % len(x) for p in perm) != list(
        range(len(x))
    ):
        raise _Unknown("perm")
    return [x[p] for p in perm]


def _agreed(column: List[Expr]) -> Expr:
    """One size that several tensors must share for ``concat``/``stack`` to succeed: a
    fixed one if any says it, else any known one."""
    known = [e for e in column if e is not None]
    consts = [e for e in known if e[0] == "const"]
    return consts[0] if consts else (known[0] if known else None)


def _concat(ctx, node, args, kwargs) -> Dims:
    items = _arg(args, kwargs, 0, "x")
    if not isinstance(items, (list, tuple)) or not items:
        raise _Unknown("x")
    all_dims = [_tensor_dims(ctx, t) for t in items]
    rank = len(all_dims[0])
    axis = _axis(_arg(args, kwargs, 1, "axis", 0), rank)
    out = []
    for i in range(rank):
        column = [d[i] for d in all_dims]
        if i == axis:
            total: Expr = shapes.const(0)
            for e in column:
                total = _op(operator.add, total, e)
            out.append(total)
        else:
            out.append(_agreed(column))
    return out


def _stack(ctx, node, args, kwargs) -> Dims:
    items = _arg(args, kwargs, 0, "x")
    if not isinstance(items, (list, tuple)) or not items:
        raise _Unknown("x")
    all_dims = [_tensor_dims(ctx, t) for t in items]
    rank = len(all_dims[0])
    axis = _axis(_arg(args, kwargs, 1, "axis", 0), rank + 1)
    out = [_agreed([d[i] for d in all_dims]) for i in range(rank)]
    out.insert(axis, shapes.const(len(items)))
    return out


def _matmul(ctx, node, args, kwargs) -> Dims:
    x = list(_tensor_dims(ctx, _arg(args, kwargs, 0, "x")))
    y = list(_tensor_dims(ctx, _arg(args, kwargs, 1, "y")))
    tx = _arg(args, kwargs, 2, "transpose_x", False)
    ty = _arg(args, kwargs, 3, "transpose_y", False)
    if not isinstance(tx, bool) or not isinstance(ty, bool) or not x or not y:
        raise _Unknown("matmul")
    if len(x) == 1 or len(y) == 1:
        raise _Unknown("vector matmul")
    if tx:
        x[-1], x[-2] = x[-2], x[-1]
    if ty:
        y[-1], y[-2] = y[-2], y[-1]
    batch = _broadcast_dims(ctx, [x[:-2], y[:-2]]) or []
    return list(batch) + [x[-2], y[-1]]


def _linear(ctx, node, args, kwargs) -> Dims:
    x = _tensor_dims(ctx, _arg(args, kwargs, 0, "x"))
    w = _tensor_dims(ctx, _arg(args, kwargs, 1, "weight"))
    return list(x[:-1]) + [w[-1]]


def _embedding(ctx, node, args, kwargs) -> Dims:
    ids = _tensor_dims(ctx, _arg(args, kwargs, 0, "x"))
    w = _tensor_dims(ctx, _arg(args, kwargs, 1, "weight"))
    return list(ids) + [w[-1]]


def _unsqueeze(ctx, node, args, kwargs) -> Dims:
    out = list(_tensor_dims(ctx, _arg(args, kwargs, 0, "x")))
    axes = _arg(args, kwargs, 1, "axis")
    axes = [axes] if isinstance(axes, int) else axes
    if not isinstance(axes, (list, tuple)) or not all(isinstance(a, int) for a in axes):
        raise _Unknown("axis")
    for a in axes:
        rank = len(out) + 1
        out.insert(_axis(a, rank), _ONE)
    return out


def _squeeze(ctx, node, args, kwargs) -> Dims:
    x = _tensor_dims(ctx, _arg(args, kwargs, 0, "x"))
    axes = _arg(args, kwargs, 1, "axis", None)
    if axes is None:
        axes = list(range(len(x)))
    axes = [axes] if isinstance(axes, int) else axes
    if not isinstance(axes, (list, tuple)) or not all(isinstance(a, int) for a in axes):
        raise _Unknown("axis")
    picked = {_axis(a, len(x)) for a in axes}
    out = []
    for i, e in enumerate(x):
        if i not in picked:
            out.append(e)
        elif e is None or e[0] != "const":
            raise _Unknown("squeeze of a symbolic size")  # removed only where it is 1
        elif e != _ONE:
            out.append(e)
    return out


def _expand(ctx, node, args, kwargs) -> Dims:
    x = _tensor_dims(ctx, _arg(args, kwargs, 0, "x"))
    wanted = _shape_list(ctx, _arg(args, kwargs, 1, "shape"))
    out = []
    for i, e in enumerate(wanted):
        j = i - (len(wanted) - len(x))
        if e is not None and e[0] != "const" and not ctx.relation(operator.ge, e, _ONE):
            raise _Unknown("a symbolic size that may be -1 (keep the input's)")
        out.append(x[j] if e == shapes.const(-1) and j >= 0 else e)
    return out


def _full(ctx, node, args, kwargs) -> Dims:
    return _shape_list(ctx, _arg(args, kwargs, 0, "shape"))


def _reduce(default_keepdim: bool = False):
    def rule(ctx, node, args, kwargs) -> Dims:
        x = _tensor_dims(ctx, _arg(args, kwargs, 0, "x"))
        axis = _arg(args, kwargs, 1, "axis", None)
        keepdim = _arg(args, kwargs, 2, "keepdim", default_keepdim)
        if not isinstance(keepdim, bool):
            raise _Unknown("keepdim")
        if axis is None:
            axes = set(range(len(x)))
        else:
            axes_list = [axis] if isinstance(axis, int) else axis
            if not isinstance(axes_list, (list, tuple)):
                raise _Unknown("axis")
            axes = {_axis(a, len(x)) for a in axes_list}
        out = []
        for i, e in enumerate(x):
            if i not in axes:
                out.append(e)
            elif keepdim:
                out.append(_ONE)
        return out

    return rule


def _slice_size(ctx, n: Expr, s: slice) -> Expr:
    """The length of ``range(n)[s]`` as an expression. Where a bound's clamping depends
    on ``n`` (``x[:4]`` is 4 long only where ``n >= 4``), the capture's side of it is
    guarded, so the expression stays a plain sum (``n - 3`` for ``x[-3:]``)."""
    if n is None:
        return None
    step = 1 if s.step is None else s.step
    if not isinstance(step, int) or isinstance(step, bool) or step <= 0:
        return None
    zero = shapes.const(0)

    def bound(b, default: Expr) -> Expr:
        if b is None:
            return default
        e = ctx.scalar(b)
        if e is None:
            return None
        if ctx.relation(operator.ge, e, zero):
            # min(e, n)
            return e if ctx.relation(operator.le, e, n) else n
        # max(n + e, 0)
        back = _op(operator.add, n, e)
        return back if ctx.relation(operator.ge, back, zero) else zero

    start = bound(s.start, zero)
    stop = bound(s.stop, n)
    if start is None or stop is None:
        return None
    span = _op(operator.sub, stop, start)
    if step != 1:
        span = _op(
            operator.floordiv, _op(operator.add, span, shapes.const(step - 1)), shapes.const(step)
        )
    return span if ctx.relation(operator.ge, span, zero) else zero


def _t(ctx, node, args, kwargs) -> Dims:
    x = _tensor_dims(ctx, _arg(args, kwargs, 0, "input"))
    return list(reversed(x)) if len(x) == 2 else list(x)


def _tile(ctx, node, args, kwargs) -> Dims:
    x = list(_tensor_dims(ctx, _arg(args, kwargs, 0, "x")))
    times = _shape_list(ctx, _arg(args, kwargs, 1, "repeat_times"))
    one: List[Expr] = [_ONE]
    x = one * (len(times) - len(x)) + x
    times = one * (len(x) - len(times)) + times
    return [_op(operator.mul, a, b) for a, b in zip(x, times)]


def _getitem(ctx, node, args, kwargs) -> Dims:
    base, index = args[0], args[1]
    if isinstance(base, Node) and "shape" not in base.meta:
        return _item_of_results(ctx, base, index)
    x = _tensor_dims(ctx, base)
    index = index if isinstance(index, tuple) else (index,)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise _Unknown("index")
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    out: List[Expr] = []
    pos = 0
    for item in index:
        if item is None:
            out.append(_ONE)
        elif item is Ellipsis:
            skip = len(x) - used
            out.extend(x[pos : pos + skip])
            pos += skip
        elif isinstance(item, slice):
            if pos >= len(x):
                raise _Unknown("index")
            if item == slice(None):
                out.append(x[pos])
            else:
                out.append(_slice_size(ctx, x[pos], item))
            pos += 1
        elif isinstance(item, int) and not isinstance(item, bool):
            pos += 1
        elif (
            isinstance(item, Node)
            and len(index) == 1
            and item.meta.get("dtype") in ("int32", "int64")
            and x
        ):
            # gathering rows by an integer tensor: its shape, then the rest of a row
            return list(_tensor_dims(ctx, item)) + list(x[1:])
        else:
            raise _Unknown("index")  # tensors and lists as indices
    out.extend(x[pos:])
    return out


def _item_of_results(ctx, base, index) -> Dims:
    """One result of an operation that returns several tensors (``split``, ``chunk``)."""
    if not isinstance(index, int) or base.op not in ("call_function", "call_method"):
        raise _Unknown("results")
    name = _name_of(base, ctx.output)
    args, kwargs = list(base.args), dict(base.kwargs)
    if name not in ("split", "chunk"):
        raise _Unknown(name or "results")
    x = list(_tensor_dims(ctx, _arg(args, kwargs, 0, "x")))
    sections = _arg(args, kwargs, 1, "num_or_sections" if name == "split" else "chunks")
    axis = _axis(_arg(args, kwargs, 2, "axis", 0), len(x))
    if isinstance(sections, int) and not isinstance(sections, bool):
        if name == "chunk":
            raise _Unknown("chunk")  # uneven chunks are sized by a ceiling
        x[axis] = _op(operator.floordiv, x[axis], shapes.const(sections))
        return x
    if not isinstance(sections, (list, tuple)) or not 0 <= index < len(sections):
        raise _Unknown("sections")
    parts = [ctx.scalar(s) for s in sections]
    if parts[index] == shapes.const(-1):
        rest = [p for i, p in enumerate(parts) if i != index]
        total: Expr = x[axis]
        for p in rest:
            total = _op(operator.sub, total, p)
        x[axis] = total
    else:
        x[axis] = parts[index]
    return x


def _flatten(ctx, node, args, kwargs) -> Dims:
    x = _tensor_dims(ctx, _arg(args, kwargs, 0, "x"))
    if not x:
        return [_ONE]
    start = _axis(_arg(args, kwargs, 1, "start_axis", 0), len(x))
    stop = _axis(_arg(args, kwargs, 2, "stop_axis", -1), len(x))
    if stop < start:
        raise _Unknown("axes")
    merged = x[start : stop + 1]
    size = None if any(e is None for e in merged) else _product(merged)
    return list(x[:start]) + [size] + list(x[stop + 1 :])


def _arange(ctx, node, args, kwargs) -> Dims:
    start = _arg(args, kwargs, 0, "start", 0)
    end = _arg(args, kwargs, 1, "end", None)
    step = _arg(args, kwargs, 2, "step", 1)
    if end is None:
        start, end = 0, start
    if not isinstance(step, int) or isinstance(step, bool) or step <= 0:
        raise _Unknown("step")
    a, b = ctx.scalar(start), ctx.scalar(end)
    span = _op(operator.sub, b, a)
    if step != 1:
        span = _op(
            operator.floordiv, _op(operator.add, span, shapes.const(step - 1)), shapes.const(step)
        )
    return [_op(max, span, shapes.const(0))]


# operations whose result has the shape of their first argument
_SAME = (
    "abs astype cast clip clone contiguous cos detach dropout elu erf exp floor "
    "gelu hardsigmoid hardswish layer_norm leaky_relu log log_softmax logical_not neg "
    "normalize pow relu relu6 round rsqrt scale sigmoid sign silu sin softmax softplus "
    "sqrt square swish tanh tril triu __neg__ __invert__ rms_norm"
).split()
_BROADCAST = (
    "add subtract multiply divide floor_divide remainder mod maximum minimum where "
    "equal not_equal less_than less_equal greater_than greater_equal logical_and "
    "logical_or bitwise_and bitwise_or masked_fill __add__ __radd__ __sub__ __rsub__ "
    "__mul__ __rmul__ __truediv__ __rtruediv__ __floordiv__ __mod__ __pow__ __rpow__ "
    "__eq__ __ne__ __lt__ __le__ __gt__ __ge__ __and__ __or__ __xor__"
).split()

_RULES: Dict[str, Callable] = {name: _same for name in _SAME}
_RULES.update({name: _broadcast for name in _BROADCAST})
_RULES.update(
    reshape=_reshape,
    view=_reshape,
    transpose=_transpose,
    concat=_concat,
    stack=_stack,
    matmul=_matmul,
    bmm=_matmul,
    linear=_linear,
    embedding=_embedding,
    unsqueeze=_unsqueeze,
    squeeze=_squeeze,
    expand=_expand,
    broadcast_to=_expand,
    ones=_full,
    zeros=_full,
    full=_full,
    empty=_full,
    ones_like=_same,
    zeros_like=_same,
    full_like=_same,
    empty_like=_same,
    sum=_reduce(),
    mean=_reduce(),
    max=_reduce(),
    min=_reduce(),
    prod=_reduce(),
    amax=_reduce(),
    amin=_reduce(),
    argmax=_reduce(),
    argmin=_reduce(),
    logsumexp=_reduce(),
    all=_reduce(),
    any=_reduce(),
    flatten=_flatten,
    t=_t,
    tile=_tile,
    arange=_arange,
    getitem=_getitem,
)

#: Python operators on tensors: their results broadcast like Paddle's functions'
_OPERATORS = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.floordiv,
    operator.mod,
    operator.pow,
    operator.eq,
    operator.ne,
    operator.lt,
    operator.le,
    operator.gt,
    operator.ge,
    operator.and_,
    operator.or_,
    operator.xor,
}


def _name_of(node, output) -> Optional[str]:
    """The Paddle operation a node runs, by name, or None for anything else."""
    target = node.target
    if node.op == "call_method":
        return target if isinstance(target, str) else None
    if node.op == "call_function":
        if target is operator.getitem:
            return "getitem"
        if target in _OPERATORS:
            return "__add__"  # (any broadcasting operator)
        if target is operator.neg:
            return "neg"
        module = getattr(target, "__module__", None) or ""
        if module.startswith("paddle"):
            # its own name where a rule knows it, else the public one (``paddle.matmul``
            # is a generated ``_matmul`` in Paddle 3.x; ``concat`` has aliases)
            own = getattr(target, "__name__", None)
            if own in _RULES or own == "shape":
                return own
            return _public_names().get(id(target)) or own
    return None


_NAMES: Dict[int, str] = {}


def _public_names() -> Dict[int, str]:
    """id -> public name of Paddle's functions (``paddle.matmul`` is a generated
    ``_matmul`` in Paddle 3.x)."""
    if not _NAMES:
        for namespace in (F, paddle):  # paddle's own name wins
            for name, obj in vars(namespace).items():
                if callable(obj) and not name.startswith("_"):
                    _NAMES[id(obj)] = name
    return _NAMES


def _module_rule(node, output) -> Optional[Callable]:
    layer = output.root.get(node.target)
    if layer is None:
        return None
    if isinstance(layer, nn.Linear):
        w = layer.weight

        def linear(ctx, node, args, kwargs):
            x = _tensor_dims(ctx, _arg(args, kwargs, 0, "x"))
            return list(x[:-1]) + [shapes.const(int(w.shape[-1]))]

        return linear
    if isinstance(layer, nn.Embedding):
        dim = int(layer.weight.shape[-1])

        def embedding(ctx, node, args, kwargs):
            ids = _tensor_dims(ctx, _arg(args, kwargs, 0, "x"))
            return list(ids) + [shapes.const(dim)]

        return embedding
    same = (
        nn.LayerNorm,
        nn.Dropout,
        nn.ReLU,
        nn.GELU,
        nn.Silu,
        nn.Sigmoid,
        nn.Tanh,
        nn.Softmax,
        nn.Identity,
    )
    if isinstance(layer, same):
        return _same
    return None


def _rule_for(node, output) -> Optional[Callable]:
    if node.op == "call_module":
        return _module_rule(node, output)
    name = _name_of(node, output)
    return None if name is None else _RULES.get(name)
