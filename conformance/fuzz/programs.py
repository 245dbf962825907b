"""Random small Python programs over Paddle tensors, as source text.

A program is drawn as a plain data structure (:class:`Spec`: a list of statements, each a
kind and a few small integers, blocks holding lists of their own) and *rendered* to source
by :func:`render`. Rendering keeps a typing environment and reads every integer modulo
what it indexes, so any structure Hypothesis draws, or shrinks to, renders to a program
that is valid for eager Paddle: dropping a statement, lowering an integer or picking an
earlier kind never makes an ill-typed program, which is what lets failures shrink to a
few lines. A statement that does not fit where it lands (``break`` outside a loop, a
layer attribute in a plain function) renders to nothing.

Every name keeps one type for its whole life (a reassignment only ever stores the same
type), and a name first bound inside a block is forgotten after it, so no path can read
an unbound or retyped local. Tensor names have one of three shape classes: ``T`` (the
shape of the input ``x``, varied between calls), ``s`` (0-d) and ``I`` (int64, the shape
of ``x``); anything of another shape is reduced or reshaped back within its statement.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple

from hypothesis import strategies as st

#: kinds of statements without a body, most basic first (Hypothesis shrinks towards the
#: front of a ``sampled_from``)
SIMPLE = (
    "t_binop",
    "t_unary",
    "s_reduce",
    "i_arith",
    "t_matmul",
    "t_where",
    "t_reshape",
    "t_transpose",
    "t_norm",
    "t_stack_comp",
    "t_concat_slice",
    "t_from_int",
    "t_helper",
    "t_closure_def",
    "t_closure_call",
    "t_lambda",
    "i_nonlocal",
    "s_genexpr",
    "f_item",
    "i_from_int_tensor",
    "I_arith",
    "I_compare",
    "list_op",
    "list_comp",
    "dict_op",
    "dict_comp",
    "unpack",
    "tlist_op",
    "inplace",
    "alias",
    "global_log",
    "global_count",
    "obj_attr",
    "obj_list",
    "print",
    "numpy_roundtrip",
    "break",
    "continue",
    "raise",
    "return",
    "layer_fc",
    "layer_param",
    "layer_gate",
    "layer_state",
    "t_random",
)

#: loops nested deeper than this render as ``if True:`` blocks; the hunt lowers it to step
#: around a known bug that would otherwise hide the others (``hunt.py --max-loop-depth``)
MAX_LOOP_DEPTH = 99

BLOCKS = ("if", "for_range", "for_tensor", "for_list", "while", "no_grad", "try")

_P = st.integers(0, 15)
_PARAMS = st.tuples(_P, _P, _P, _P)


def _simple() -> st.SearchStrategy:
    return st.tuples(st.sampled_from(SIMPLE), _PARAMS)


def _stmt(depth: int) -> st.SearchStrategy:
    if depth == 0:
        return _simple()
    block = st.tuples(st.sampled_from(BLOCKS), _PARAMS, _body(depth - 1), _body(depth - 1))
    return st.one_of(_simple(), block)


def _body(depth: int) -> st.SearchStrategy:
    return st.lists(_stmt(depth), max_size=4)


@dataclasses.dataclass(frozen=True)
class Spec:
    layer: bool  # the entry is a Layer's forward, not a function
    rank: int
    shapes: Tuple[Tuple[int, ...], ...]  # one per distinct input shape of the calls
    seed: int
    m_values: Tuple[int, int]  # the plain int argument, first and later calls
    stmts: tuple
    ret: int


@st.composite
def specs(draw) -> Spec:
    layer = draw(st.booleans())
    rank = draw(st.integers(1, 3))
    dim = st.integers(1, 5)
    first = tuple(draw(dim) for _ in range(rank))
    other = tuple(draw(dim) for _ in range(rank))
    # a third shape: calls on a dimension that changed (dynamic since the second
    # shape: ``jit_core.shapes``) run the dynamic entry at a size it was not captured at
    third = tuple(draw(dim) for _ in range(rank))
    if layer:  # a Linear fixes the last dimension
        other = other[:-1] + first[-1:]
        third = third[:-1] + first[-1:]
    return Spec(
        layer=layer,
        rank=rank,
        shapes=(first, other, third),
        seed=draw(st.integers(0, 2**16)),
        m_values=(draw(st.integers(0, 4)), draw(st.integers(0, 4))),
        stmts=tuple(draw(st.lists(_stmt(2), min_size=1, max_size=10))),
        ret=draw(_P),
    )


#: Python source common to every program (both the eager and the compiled copy get
#: their own, so module state never leaks from one run into the other)
PRELUDE = '''\
import paddle
import paddle.nn.functional as F

LOG = []
COUNT = 0


class Box:
    """The object argument: its attributes are side effects to compare."""

    def __init__(self):
        self.count = 0
        self.items = []
        self.last = None


class Gate(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.scale = self.create_parameter(
            [1], default_initializer=paddle.nn.initializer.Constant(1.5)
        )

    def forward(self, a):
        if a.mean() > 0:
            return a * self.scale
        return a - self.scale
'''

HELPERS = {
    "_h_scale": "def _h_scale(a, c):\n    return a * c + 1.0\n",
    "_h_branch": (
        "def _h_branch(a):\n    if a.sum() > 0:\n        return a * 2.0\n    return a - 1.0\n"
    ),
    "_h_log": "def _h_log(a, n):\n    LOG.append(n)\n    return a + n\n",
    "_h_rec": (
        "def _h_rec(a, n):\n    if n <= 0:\n        return a\n    return _h_rec(a * 0.5, n - 1)\n"
    ),
    "_h_kw": "def _h_kw(a, *, scale=2.0, shift=0.0):\n    return a * scale + shift\n",
    "_h_raise": (
        "def _h_raise(n, c):\n"
        "    if n > c:\n"
        "        raise ValueError('helper ' + str(n))\n"
        "    return n + 1\n"
    ),
    "_h_count": ("def _h_count(c):\n    global COUNT\n    COUNT += c\n    return COUNT\n"),
}

_TYPES_RETURNED = ("T", "s", "I", "i", "f", "L", "D", "TL")


class _Skip(Exception):
    """The statement does not fit here: render nothing for it."""


class _Renderer:
    def __init__(self, spec: Spec):
        self.spec = spec
        self.lines: List[str] = []
        self.helpers: Dict[str, None] = {}
        self.env: Dict[str, str] = {}
        self.made: set = set()  # tensors the program made itself: in-place ops allowed
        self.counter = 0
        self.loops = 0  # loops around the statement being rendered
        self.counters: set = set()  # counters of the while loops around it
        self.pending: List[Tuple[str, str, bool]] = []
        self.indent = 1 if not spec.layer else 2

    # ------------------------------------------------------------- environment

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def names(self, ty: str) -> List[str]:
        return [n for n, t in self.env.items() if t == ty]

    def pick(self, ty: str, p: int) -> str:
        names = self.names(ty)
        if not names:
            raise _Skip
        return names[p % len(names)]

    def target(self, ty: str, p: int, made: bool = True) -> str:
        """A new name, or (one time in three) an existing one of the same type."""
        names = [n for n in self.names(ty) if ty != "T" or n in self.made or not made]
        # a while loop's counter assigned in its body could loop for ever
        names = [n for n in names if n not in self.counters]
        if p % 3 == 2 and names:
            name = names[p % len(names)]
        else:
            name = self.fresh({"T": "t", "s": "s", "I": "q", "i": "n", "f": "g"}.get(ty, ty))
        # bound once the statement is rendered: its right-hand side must not read it
        self.pending.append((name, ty, made))
        return name

    def commit(self) -> None:
        for name, ty, made in self.pending:
            self.env[name] = ty
            if made:
                self.made.add(name)
            else:
                self.made.discard(name)
        self.pending = []

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def cond(self, p: int, q: int) -> str:
        c = q % 4
        options = [
            lambda: ("True", "False")[q % 2],
            lambda: f"m > {c}",
            lambda: f"{self.pick('i', q)} > {c}",
            lambda: f"{self.pick('s', q)} > 0",
            lambda: f"{self.pick('T', q)}.mean() > {c * 0.25 - 0.5}",
            lambda: f"({self.pick('T', q)} > 0).any()",
            lambda: f"len(lst) > {c}",
            lambda: f"'k{c}' in d",
            lambda: f"{self.pick('T', q)}.shape[0] > {c}",
            lambda: f"{c} in lst",
            lambda: f"obj.count > {c}",
            lambda: f"{self.pick('f', q)} > 0.0",
            lambda: f"{self.pick('I', q)}.sum() > {c * 3}",
            lambda: f"bool({self.pick('s', q)} < {self.pick('s', q + 1)})",
            lambda: "obj.last is None",
            lambda: f"any(v > {c} for v in lst)",
        ]
        return options[p % len(options)]()

    def tensor_or_scalar(self, p: int) -> str:
        """An operand that broadcasts against a ``T``."""
        which = p % 6
        if which == 4:
            return self.pick("s", p // 6)
        if which == 5:
            return ("0.5", "2.0", "m", self.pick("i", p))[p // 6 % 4]
        return self.pick("T", p // 6 + which)

    def ret_expr(self) -> str:
        names = [n for n, t in self.env.items() if t in _TYPES_RETURNED]
        return "(" + "".join(f"{n}, " for n in names) + ")"

    # -------------------------------------------------------------- statements

    def stmt(self, s) -> None:
        kind, p = s[0], s[1]
        if kind in BLOCKS:
            self.block(kind, p, s[2], s[3])
            return
        mark = len(self.lines)
        env, made, counter = dict(self.env), set(self.made), self.counter
        try:
            getattr(self, "k_" + kind)(*p)
        except _Skip:
            del self.lines[mark:]
            self.env, self.made, self.counter = env, made, counter
            self.pending = []
        self.commit()

    def body(self, stmts) -> None:
        """Statements of a block: names bound here are forgotten after it."""
        env, made = dict(self.env), set(self.made)
        self.indent += 1
        mark = len(self.lines)
        for s in stmts:
            self.stmt(s)
        if len(self.lines) == mark:
            self.emit("pass")
        self.indent -= 1
        self.env = {n: t for n, t in self.env.items() if n in env}
        self.made = {n for n in self.made if n in env} | (made & set(self.made))

    def block(self, kind, p, first, second) -> None:
        a, b, c, e = p
        if kind == "if":
            self.emit(f"if {self.cond(a, b)}:")
            self.body(first)
            if second:
                self.emit("else:")
                self.body(second)
        elif kind in ("for_range", "for_tensor", "for_list", "while"):
            if self.loops >= MAX_LOOP_DEPTH:
                self.emit("if True:")
                self.body(first)
            else:
                self.loop(kind, p, first)
        elif kind == "no_grad":
            self.emit("with paddle.no_grad():")
            self.body(first)
        elif kind == "try":
            self.try_block(p, first, second)

    def loop(self, kind, p, body) -> None:
        a, b, c, e = p
        var = self.fresh("j")
        if kind == "for_range":
            # ``m`` is an int like the others: a statement may have set it to ``len(lst)``
            bound = (str(c % 5), "m % 5", "len(lst) % 4", f"{self.pick_or('i', b, '2')} % 4")
            bound = bound[a % 4]
            self.emit(f"for {var} in range({bound}):")
        elif kind == "for_list":
            # a copy of at most four: the body may grow ``lst``, and a loop as long as the
            # list after another such loop multiplies its length at each statement
            self.emit(f"for {var} in lst[:4]:")
        elif kind == "for_tensor":
            acc = self.target("s", 0)
            self.emit(f"{acc} = paddle.zeros([])")
            self.commit()
            row = self.fresh("r")
            self.emit(f"for {var}, {row} in enumerate({self.pick('T', b)}):")
            self.emit(f"    {acc} = {acc} + {row}.sum() * {var}")
        else:
            self.emit(f"{var} = 0")
            self.emit(f"while {var} < {c % 4}:")
            self.emit(f"    {var} += 1")
        self.env[var] = "i"
        self.loops += 1
        if kind == "while":
            self.counters.add(var)
        self.body(body)
        self.counters.discard(var)
        self.loops -= 1
        if kind != "while":  # a for loop that never runs leaves its variable unbound
            self.env.pop(var, None)

    def pick_or(self, ty: str, p: int, default: str) -> str:
        try:
            return self.pick(ty, p)
        except _Skip:
            return default

    def try_block(self, p, first, second) -> None:
        a, b, c, e = p
        exc = ("ValueError", "(KeyError, ValueError)", "Exception")[a % 3]
        name = self.fresh("e")
        self.emit("try:")
        env, made = dict(self.env), set(self.made)
        self.indent += 1
        for s in first:
            self.stmt(s)
        how = b % 4
        if how == 0:
            self.emit(f"if {self.cond(c, e)}:")
            self.emit("    raise ValueError('fuzz')")
        elif how == 1:
            self.helpers["_h_raise"] = None
            n = self.pick_or("i", c, "m")
            self.emit(f"{self.target('i', 0)} = _h_raise({n}, {e % 4})")
            self.commit()
        elif how == 2 and a % 3:
            self.emit(f"{self.target('i', 0)} = d['missing{e % 2}']")
            self.commit()
        else:
            self.emit("pass")
        self.indent -= 1
        # the body may have stopped anywhere: what it bound is unbound after the try
        self.env = {n: t for n, t in self.env.items() if n in env}
        self.made = {n for n in self.made if n in env} | (made & self.made)
        self.emit(f"except {exc} as {name}:")
        self.indent += 1
        self.emit(f"LOG.append(type({name}).__name__)")
        self.indent -= 1
        self.body(second)
        if e % 2:
            self.emit("finally:")
            self.indent += 1
            self.emit("LOG.append('finally')")
            self.indent -= 1

    # simple statements: one method each, parameters are small ints

    def k_t_binop(self, a, b, c, e):
        x = self.pick("T", a)
        y = self.tensor_or_scalar(b)
        op = ("+", "-", "*", "/")[c % 4]
        if op == "/":
            y = f"({y}.abs() + 1.0)" if y[0] in "tsq" else f"(abs({y}) + 1)"
        expr = f"{x} {op} {y}" if e % 2 == 0 else f"{y} {op} {x}" if op != "/" else f"{x} / {y}"
        self.emit(f"{self.target('T', e)} = {expr}")

    def k_t_unary(self, a, b, c, e):
        x = self.pick("T", a)
        fn = (
            "F.relu({})",
            "paddle.tanh({})",
            "paddle.exp({}.clip(-3.0, 3.0))",
            "{}.abs()",
            "F.sigmoid({})",
            "-{}",
            "{} ** 2",
            "paddle.sqrt({}.abs() + 0.001)",
            "F.softmax({}, axis=-1)",
            "paddle.cumsum({}, axis=-1)",
            "F.gelu({})",
            "{}.clone()",
            "paddle.maximum({}, paddle.zeros_like({}))",
            "F.leaky_relu({}, 0.1)",
            "paddle.floor({} * 4.0)",
            "{} - {}.mean(axis=-1, keepdim=True)",
        )[b % 16]
        self.emit(f"{self.target('T', c)} = {fn.format(x, x)}")

    def k_t_random(self, a, b, c, e):
        # the checker seeds both sides alike before each call: every draw must match
        x = self.pick("T", a)
        fn = (
            "F.dropout({}, p=0.5, training=True)",
            "{} + paddle.rand({}.shape)",
            "{} * paddle.randn({}.shape)",
            "{} + paddle.uniform({}.shape, min=-1.0, max=1.0)",
            "{} + paddle.normal(0.0, 1.0, {}.shape)",
            "paddle.bernoulli(F.sigmoid({}))",
            "F.dropout({}, p=0.25, training=True, mode='downscale_in_infer')",
            "{} + paddle.randint(0, 5, {}.shape).astype('float32')",
        )[b % 8]
        self.emit(f"{self.target('T', c)} = {fn.format(x, x)}")

    def k_s_reduce(self, a, b, c, e):
        x = self.pick("T", a)
        fn = (
            "{}.sum()",
            "{}.mean()",
            "{}.max()",
            "{}.min()",
            "paddle.sum({} * {})",
            "{}.abs().sum()",
            "paddle.mean(F.relu({}))",
            "{}.sum(axis=0).sum()",
        )[b % 8]
        self.emit(f"{self.target('s', c)} = {fn.format(x, self.pick('T', e))}")

    def k_i_arith(self, a, b, c, e):
        n = self.pick_or("i", a, "m")
        rhs = (
            lambda: f"{n} + {c}",
            lambda: f"({n} * {c + 1} + 1) % 97",
            lambda: "len(lst)",
            lambda: f"{self.pick('T', b)}.shape[0] + {c}",
            lambda: "len(d)",
            lambda: "sum(lst) % 97",
            lambda: "max(lst, default=0)",
            lambda: f"{n} // {c % 3 + 1}",
            lambda: f"lst[-1] if lst else {c}",
            lambda: f"d.get('k{c % 4}', {n})",
            lambda: f"{self.pick('T', b)}.ndim + {self.pick('T', b)}.shape[-1]",
            lambda: f"len([v for v in lst if v > {c % 5}])",
        )[e % 12]()
        self.emit(f"{self.target('i', b)} = {rhs}")

    def k_t_matmul(self, a, b, c, e):
        x = self.pick("T", a)
        if self.spec.rank >= 2 and b % 2 == 0:
            rhs = f"paddle.matmul({x}, paddle.ones([{x}.shape[-1], {x}.shape[-1]]) * 0.25)"
        elif self.spec.rank >= 2:
            y = self.pick("T", c)
            rhs = f"paddle.matmul({x}, {y}, transpose_y=True).sum() * {x}"
        else:
            rhs = f"{x} * paddle.dot({x}, {self.pick('T', c)})"
        self.emit(f"{self.target('T', e)} = {rhs}")

    def k_t_where(self, a, b, c, e):
        x, y = self.pick("T", a), self.pick("T", b)
        cmp = (">", "<", ">=", "==")[c % 4]
        self.emit(f"{self.target('T', e)} = paddle.where({x} {cmp} {y}, {x}, {y} * 0.5)")

    def k_t_reshape(self, a, b, c, e):
        x = self.pick("T", a)
        rhs = (
            f"{x}.reshape([-1]).flip(0).reshape({x}.shape)",
            f"paddle.flatten({x}).reshape({x}.shape) * 2.0",
            f"{x}.unsqueeze(0).squeeze(0) + 1.0",
            f"paddle.reshape({x}, [-1, {x}.shape[-1]]).reshape({x}.shape)",
        )[b % 4]
        self.emit(f"{self.target('T', c)} = {rhs}")

    def k_t_transpose(self, a, b, c, e):
        import itertools

        x = self.pick("T", a)
        perms = list(itertools.permutations(range(self.spec.rank)))
        perm = list(perms[b % len(perms)])
        inv = [perm.index(i) for i in range(len(perm))]
        mid = ("F.relu({})", "{} * 3.0", "paddle.tanh({})")[c % 3]
        inner = mid.format(f"paddle.transpose({x}, {perm})")
        self.emit(f"{self.target('T', e)} = paddle.transpose({inner}, {inv})")

    def k_t_norm(self, a, b, c, e):
        x = self.pick("T", a)
        rhs = (
            f"{x} / ({x}.abs().max() + 1.0)",
            f"F.normalize({x}, axis=-1)",
            f"({x} - {x}.mean()) / ({x}.std() + 1.0)",
            f"paddle.clip({x}, min=-1.0, max=1.0)",
        )[b % 4]
        self.emit(f"{self.target('T', c)} = {rhs}")

    def k_t_stack_comp(self, a, b, c, e):
        x = self.pick("T", a)
        j = self.fresh("j")
        rhs = (
            f"paddle.stack([{x} * {j} for {j} in range({b % 4 + 1})]).sum(0)",
            f"paddle.add_n([{x} + {j} for {j} in range({b % 3 + 1})])",
            f"sum({x} * {j} for {j} in range({b % 3 + 1}))",
        )[c % 3]
        if c % 3 == 2:  # sum() of a tensor generator: 0 + t, a T
            rhs = f"{x} + {rhs}"
        self.emit(f"{self.target('T', e)} = {rhs}")

    def k_t_concat_slice(self, a, b, c, e):
        x, y = self.pick("T", a), self.pick("T", b)
        rhs = (
            f"paddle.concat([{x}, {y}], axis=0)[: {x}.shape[0]]",
            f"paddle.concat([{y}, {x}], axis=-1)[..., {x}.shape[-1]:]",
            f"paddle.split(paddle.concat([{x}, {y}]), 2)[{c % 2}]",
        )[c % 3]
        self.emit(f"{self.target('T', e)} = {rhs}")

    def k_t_from_int(self, a, b, c, e):
        x, q = self.pick("T", a), self.pick("I", b)
        rhs = (
            f"{x} + {q}.astype('float32')",
            f"{x} * paddle.cast({q}, {x}.dtype)",
        )[c % 2]
        self.emit(f"{self.target('T', e)} = {rhs}")

    def k_t_helper(self, a, b, c, e):
        x = self.pick("T", a)
        which = b % 5
        if which == 0:
            self.helpers["_h_scale"] = None
            rhs = f"_h_scale({x}, {self.tensor_or_scalar(c)})"
        elif which == 1:
            self.helpers["_h_branch"] = None
            rhs = f"_h_branch({x})"
        elif which == 2:
            self.helpers["_h_log"] = None
            rhs = f"_h_log({x}, {self.pick_or('i', c, 'm')})"
        elif which == 3:
            self.helpers["_h_rec"] = None
            rhs = f"_h_rec({x}, {c % 3})"
        else:
            self.helpers["_h_kw"] = None
            rhs = f"_h_kw({x}, shift={self.tensor_or_scalar(c)})"
        self.emit(f"{self.target('T', e)} = {rhs}")

    def k_t_closure_def(self, a, b, c, e):
        x = self.pick("T", a)
        name = self.fresh("fn")
        self.emit(f"def {name}(u):")
        if b % 2:
            self.emit(f"    return u * {x} + {self.tensor_or_scalar(c)}")
        else:
            self.emit(f"    if {x}.sum() > 0:")
            self.emit(f"        return u + {x}")
            self.emit(f"    return u - {x}")
        self.env[name] = "C"
        if e % 2:
            self.emit(f"{self.target('T', e)} = {name}({self.pick('T', c)})")

    def k_t_closure_call(self, a, b, c, e):
        fn = self.pick("C", a)
        self.emit(f"{self.target('T', c)} = {fn}({self.pick('T', b)})")

    def k_t_lambda(self, a, b, c, e):
        x = self.pick("T", a)
        name = self.fresh("lam")
        self.emit(f"{name} = lambda u: u * 2.0 + {x}")
        self.env[name] = "C"
        self.emit(f"{self.target('T', c)} = {name}({self.pick('T', b)})")

    def k_i_nonlocal(self, a, b, c, e):
        n = self.pick("i", a)
        name = self.fresh("bump")
        self.emit(f"def {name}():")
        self.emit(f"    nonlocal {n}")
        self.emit(f"    {n} = ({n} + {b % 4 + 1}) % 97")
        self.emit(f"    return {n}")
        self.emit(f"{self.target('i', c)} = {name}()")

    def k_s_genexpr(self, a, b, c, e):
        x = self.pick("T", a)
        r = self.fresh("r")
        rhs = (
            f"sum({r}.sum() for {r} in {x})",
            f"paddle.to_tensor(0.0) + sum({r}.mean() for {r} in {x})",
            f"max([{r}.max() for {r} in {x}])",
        )[b % 3]
        self.emit(f"{self.target('s', c)} = {rhs}")

    def k_f_item(self, a, b, c, e):
        s = self.pick("s", a)
        rhs = (
            f"float({s})",
            f"{s}.item()",
            f"{self.pick('f', c)} * 2.0 + 1.0" if self.names("f") else f"float({s})",
            f"float({s}.numpy())",
        )[b % 4]
        self.emit(f"{self.target('f', e)} = {rhs}")

    def k_i_from_int_tensor(self, a, b, c, e):
        q = self.pick("I", a)
        rhs = (f"int({q}.sum())", f"{q}.max().item()", f"int({q}.numpy().sum())")[b % 3]
        self.emit(f"{self.target('i', c)} = {rhs}")

    def k_I_arith(self, a, b, c, e):
        q, r = self.pick("I", a), self.pick("I", b)
        rhs = (
            f"{q} + {c % 5}",
            f"({q} * {r}) % 7",
            f"paddle.maximum({q}, {r})",
            f"{q} // 2 + {r}",
            f"paddle.where({self.pick('T', c)} > 0, {q}, {r} * 2) % 11",
        )[e % 5]
        self.emit(f"{self.target('I', c)} = {rhs}")

    def k_I_compare(self, a, b, c, e):
        x, y = self.pick("T", a), self.pick("T", b)
        rhs = (f"({x} > {y}).astype('int64')", f"paddle.cast({x} < 0.0, 'int64') * 3")[c % 2]
        self.emit(f"{self.target('I', e)} = {rhs}")

    def k_list_op(self, a, b, c, e):
        n = self.pick_or("i", b, "m")
        line = (
            lambda: f"lst.append({n})",
            lambda: f"lst.insert({c % 3}, {e % 5})",
            lambda: f"{self.target('i', c)} = lst.pop() if lst else {e % 3}",
            lambda: "lst.sort()",
            lambda: "lst.sort(reverse=True)",
            lambda: f"lst.extend([{n}, {c % 5}])",
            lambda: f"lst = sorted(lst)[:{c % 4 + 2}]",
            lambda: f"del lst[:{c % 2 + 1}]",
            lambda: f"lst.remove({n}) if {n} in lst else None",
            lambda: f"lst = lst + [{e % 5}]",
        )[a % 10]()
        self.emit(line)

    def k_list_comp(self, a, b, c, e):
        v = self.fresh("v")
        rhs = (
            f"[{v} * 2 % 97 for {v} in lst if {v} % 2 == 0]",
            f"[{v} + {b % 3} for {v} in lst]",
            f"list(range({c % 4}))",
        )[a % 3]
        self.emit(f"lst = {rhs}")

    def k_dict_op(self, a, b, c, e):
        n = self.pick_or("i", b, "m")
        line = (
            lambda: f"d['k{c % 4}'] = {n}",
            lambda: f"d.update({{'k{c % 4}': {e % 5}, 'z': {n}}})",
            lambda: f"{self.target('i', e)} = d.pop('k{c % 4}', {b % 3})",
            lambda: f"d.setdefault('k{c % 4}', {n})",
            lambda: f"d['k{c % 4}'] = d.get('k{c % 4}', 0) + {e % 3 + 1}",
            lambda: f"{self.target('i', e)} = sum(d.values()) % 97",
        )[a % 6]()
        self.emit(line)

    def k_dict_comp(self, a, b, c, e):
        k, v = self.fresh("k"), self.fresh("v")
        rhs = (
            f"{{{k}: {v} for {k}, {v} in d.items() if {v} > {c % 3}}}",
            f"{{'k' + str({v}): {v} for {v} in lst}}",
            f"dict(d, k{c % 4}={b % 5})",
        )[a % 3]
        self.emit(f"d = {rhs}")

    def k_unpack(self, a, b, c, e):
        kind = a % 4
        if kind == 0:
            x, y = self.pick("T", b), self.pick("T", c)
            if x == y or x not in self.made or y not in self.made:
                raise _Skip
            self.emit(f"{x}, {y} = {y}, {x}")
        elif kind == 1:
            n = self.pick_or("i", b, "m")
            self.emit(f"{self.target('i', c)}, {self.target('i', e)} = divmod({n}, 3)")
        elif kind == 2:
            x = self.pick("T", b)
            self.emit(f"{self.target('T', c)}, {self.target('s', e)} = {x} * 2.0, {x}.sum()")
        else:
            self.emit(f"{self.target('i', c)}, *{self.fresh('rest')} = lst + [{e % 5}]")

    def k_tlist_op(self, a, b, c, e):
        kind = a % 4
        if kind == 0 or not self.names("TL"):
            self.emit(f"{self.target('TL', 0)} = [{self.pick('T', b)}, {self.pick('T', c)}]")
        elif kind == 1:
            self.emit(f"{self.pick('TL', e)}.append({self.pick('T', b)} * 1.5)")
        elif kind == 2:
            self.emit(f"{self.target('T', c)} = paddle.add_n({self.pick('TL', e)})")
        else:
            # an alias of a list element: in-place ops on it show through the list
            self.emit(f"{self.target('T', c)} = {self.pick('TL', e)}[-1]")

    def k_inplace(self, a, b, c, e):
        made = [n for n in self.names("T") if n in self.made]
        if not made:
            raise _Skip
        y = made[a % len(made)]
        op = (
            f"{y}.add_({self.pick('T', b)})",
            f"{y}.scale_({c % 3 + 0.5})",
            f"{y}[0] = {float(c % 3)}",
            f"{y}.multiply_({self.pick('T', b)})",
            f"{y}[{y} > 0] = 0.0",
            f"{y}.clip_(-1.0, 1.0)",
            f"{y}.subtract_({self.pick('s', b)})",
            f"paddle.assign({self.pick('T', b)} * 2.0, output={y})",
        )[e % 8]
        self.emit(op)

    def k_alias(self, a, b, c, e):
        made = [n for n in self.names("T") if n in self.made]
        if not made:
            raise _Skip
        src = made[a % len(made)]
        self.emit(f"{self.target('T', b)} = {src}")

    def k_global_log(self, a, b, c, e):
        what = (
            lambda: self.pick_or("i", b, "m"),
            lambda: f"{self.pick('T', b)} * 1.0",
            lambda: "len(lst)",
            lambda: f"float({self.pick('s', b)})",
            lambda: "list(lst)",
            lambda: f"{self.pick('T', b)}.shape",
        )[a % 6]()
        self.emit(f"LOG.append({what})")

    def k_global_count(self, a, b, c, e):
        if a % 3 == 2:
            self.helpers["_h_count"] = None
            self.emit(f"{self.target('i', c)} = _h_count({b % 3 + 1})")
        else:
            self.emit(f"COUNT += {b % 3 + 1}")
            if a % 3 == 1:
                self.emit(f"{self.target('i', c)} = COUNT")

    def k_obj_attr(self, a, b, c, e):
        line = (
            lambda: f"obj.count += {b % 3 + 1}",
            lambda: f"obj.items.append({self.pick_or('i', b, 'm')})",
            lambda: f"obj.last = {self.pick('T', b)}",
            lambda: f"obj.total = getattr(obj, 'total', 0.0) + {self.pick('s', b)}",
            lambda: f"{self.target('i', c)} = obj.count * 2",
            lambda: f"obj.items = obj.items[-{c % 3 + 1}:]",
        )[a % 6]()
        self.emit(line)

    def k_obj_list(self, a, b, c, e):
        # ``lst`` becomes the object argument's own list (or the other way round): the
        # list operations after it mutate a list from outside the frame, through two paths.
        # The extend takes a few elements only: once the two names are one list, extending
        # it by itself doubles it, and in a loop that took a hunt to 24 GB (test_programs)
        line = ("lst = obj.items", "obj.items = lst", "obj.items.extend(lst[:3])")[a % 3]
        self.emit(line)

    def k_print(self, a, b, c, e):
        what = (
            lambda: "'n', " + self.pick_or("i", b, "m"),
            lambda: "lst, sorted(d.items())",
            lambda: f"{self.pick('T', b)}.shape, {self.pick('T', b)}.dtype",
            lambda: "'c', obj.count, COUNT",
            lambda: f"{self.pick('I', b)}.tolist()",
        )[a % 5]()
        self.emit(f"print({what})")

    def k_numpy_roundtrip(self, a, b, c, e):
        x = self.pick("T", a)
        rhs = (
            f"paddle.to_tensor({x}.numpy() * 2.0)",
            f"paddle.to_tensor({x}.numpy()) + {x}",
        )[b % 2]
        self.emit(f"{self.target('T', c)} = {rhs}")

    def k_break(self, a, b, c, e):
        if not self.loops:
            raise _Skip
        self.emit(f"if {self.cond(a, b)}:")
        self.emit("    break")

    def k_continue(self, a, b, c, e):
        if not self.loops:
            raise _Skip
        self.emit(f"if {self.cond(a, b)}:")
        self.emit("    continue")

    def k_raise(self, a, b, c, e):
        exc = ("ValueError", "KeyError", "RuntimeError")[c % 3]
        self.emit(f"if {self.cond(a, b)}:")
        self.emit(f"    raise {exc}('fuzz {e}')")

    def k_return(self, a, b, c, e):
        self.emit(f"if {self.cond(a, b)}:")
        self.emit(f"    return {self.ret_expr()}")

    def k_layer_fc(self, a, b, c, e):
        if not self.spec.layer:
            raise _Skip
        self.emit(f"{self.target('T', c)} = self.fc({self.pick('T', a)})")

    def k_layer_param(self, a, b, c, e):
        if not self.spec.layer:
            raise _Skip
        x = self.pick("T", a)
        rhs = (f"{x} * self.w + self.bias", f"self.act({x}) * self.w")[b % 2]
        self.emit(f"{self.target('T', c)} = {rhs}")

    def k_layer_gate(self, a, b, c, e):
        if not self.spec.layer:
            raise _Skip
        self.emit(f"{self.target('T', c)} = self.gate({self.pick('T', a)})")

    def k_layer_state(self, a, b, c, e):
        if not self.spec.layer:
            raise _Skip
        line = (
            lambda: f"self.calls += {b % 2 + 1}",
            lambda: f"self.hist.append({self.pick_or('i', b, 'm')})",
            lambda: f"{self.target('i', c)} = self.calls",
            lambda: f"self.last = {self.pick('T', b)} * 1.0",
        )[a % 4]()
        self.emit(line)

    # ------------------------------------------------------------------ whole

    def render(self) -> str:
        self.env = {"x": "T", "k": "I", "m": "i"}
        self.made = set()
        self.emit("global COUNT")
        self.emit(f"{self.target('s', 0)} = x.mean()")
        self.commit()
        self.emit("lst = [3, 1, 2]")
        self.emit("d = {'k0': 1}")
        self.emit("g0 = 0.5")
        self.env.update(lst="L", d="D", g0="f")
        for s in self.spec.stmts:
            self.stmt(s)
        self.emit(f"return {self.ret_expr()}")
        body = "\n".join(self.lines)
        helpers = "".join("\n\n" + HELPERS[h] for h in HELPERS if h in self.helpers)
        if self.spec.layer:
            d = self.spec.shapes[0][-1]
            entry = (
                "class Net(paddle.nn.Layer):\n"
                "    def __init__(self):\n"
                "        super().__init__()\n"
                f"        self.fc = paddle.nn.Linear({d}, {d})\n"
                "        self.w = self.create_parameter([1])\n"
                "        self.bias = self.create_parameter([1], is_bias=True)\n"
                "        self.act = paddle.nn.ReLU()\n"
                "        self.gate = Gate()\n"
                "        self.calls = 0\n"
                "        self.hist = []\n"
                "        self.last = None\n\n"
                "    def forward(self, x, k, m, obj):\n"
            )
        else:
            entry = "def f(x, k, m, obj):\n"
        return PRELUDE + helpers + "\n\n" + entry + body + "\n"


def render(spec: Spec) -> str:
    return _Renderer(spec).render()


def example_inputs(spec: Spec) -> List[Tuple[Optional[object], ...]]:
    """NumPy inputs of each call: the first twice (a cache hit), new values, a new shape
    and ``m``, then each further shape."""
    import numpy as np

    rng = np.random.RandomState(spec.seed)

    def one(shape):
        x = rng.standard_normal(shape).astype("float32")
        k = rng.randint(0, 5, size=shape).astype("int64")
        return x, k

    first = one(spec.shapes[0])
    m0, m1 = spec.m_values
    calls = [
        (*first, m0),
        (*first, m0),
        (*one(spec.shapes[0]), m0),
        (*one(spec.shapes[1]), m1),
    ]
    calls += [(*one(shape), m1) for shape in spec.shapes[2:]]
    return calls
