"""Guards: the conditions under which a cache entry may run, generated as readable code.

A capture records guards on the sources it read; ``GuardSet.build()`` turns them into one
Python function ``guard(L, G) -> bool`` per cache entry. Identity-matched objects are
bound as constants, and guards on their attributes start from that constant instead of
walking the whole attribute chain again: ``___o3.training is False`` rather than
``L['self'].layer1[0].conv1.training is False``.
"""

from __future__ import annotations

import itertools
import math
import re
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple, Type, cast

import numpy as np
import paddle

from .. import shapes
from ..bytecode import compat
from ..sources import (
    AttrSource,
    CallSource,
    ClosureSource,
    DefaultSource,
    ItemSource,
    LocalSource,
    ObjectSource,
    Source,
    names_through,
)
from . import native

TYPE_MATCH = "TYPE_MATCH"
ID_MATCH = "ID_MATCH"
#: a function that a graph break made again (``codegen.frame``): a new object on every
#: call, as eager makes one; the same code, globals and number of defaults, and what the
#: capture read of its cells and defaults is guarded through it on its own
FUNCTION_MATCH = "FUNCTION_MATCH"
CONSTANT_MATCH = "CONSTANT_MATCH"
TENSOR_MATCH = "TENSOR_MATCH"
LEN_MATCH = "LEN_MATCH"
DICT_KEYS = "DICT_KEYS"
#: whether an object has an attribute (``getattr(obj, name, default)``, ``hasattr``): the
#: guard's source is ``AttrSource(obj, name)``, its value the answer at capture
HASATTR = "HASATTR"
#: a layer without forward hooks whose ``forward`` is its class's: what a capture of its
#: call relied on
NO_HOOKS = "NO_HOOKS"
#: a layer whose ``forward`` is its class's, not one set on the instance
#: (``layer.forward = f``): what a capture of ``layer.forward(...)`` relied on
CLASS_FORWARD = "CLASS_FORWARD"
#: a list of at least one tensor, all of one ``TensorSpec`` (a graph input of any length)
TENSOR_LIST = "TENSOR_LIST"
#: a query (``CallSource``) that raised at capture: it raises an exception of exactly the
#: type ``value`` again (the capture took that exception to a handler)
RAISES = "RAISES"

# Ordered so that an object's identity is checked before anything read through it.
_KIND_ORDER = {
    ID_MATCH: 0,
    FUNCTION_MATCH: 0,
    TYPE_MATCH: 1,
    LEN_MATCH: 2,
    HASATTR: 2,
    DICT_KEYS: 3,
    NO_HOOKS: 3,
    CLASS_FORWARD: 3,
    CONSTANT_MATCH: 4,
    RAISES: 4,
    TENSOR_MATCH: 5,
    TENSOR_LIST: 5,
}


class Raises:
    """``fn(*args)`` raises an exception of exactly type ``exc_type``: a guard's check."""

    def __init__(self, fn, args: tuple, exc_type: type):
        self.fn, self.args, self.exc_type = fn, args, exc_type

    def __call__(self) -> bool:
        try:
            self.fn(*self.args)
        except Exception as e:  # noqa: BLE001 - which one is the question
            return type(e) is self.exc_type
        return False

    def __repr__(self) -> str:
        name = getattr(self.fn, "__qualname__", None) or getattr(self.fn, "__name__", "?")
        return f"<raises {self.exc_type.__name__}: {name}{self.args!r}>"


def _probe_dtype_identity() -> bool:
    # Paddle 3.3 hands out one dtype object per dtype, 3.0 makes a new one each time; an
    # identity check is ten times cheaper than ==, so use it where it is valid.
    a = paddle.zeros([1])
    b = paddle.zeros([1])
    return a.dtype is b.dtype and a.dtype is paddle.float32


DTYPE_IS_SINGLETON = _probe_dtype_identity()


def _probe_dtype_value() -> bool:
    # Where dtypes are fresh pybind enum objects, comparing their integer ``value`` costs
    # half of ``==`` (0.45 against 0.84 us on Paddle 3.0).
    d = paddle.zeros([1]).dtype
    return (
        isinstance(getattr(d, "value", None), int)
        and paddle.zeros([1], "int64").dtype.value != d.value
    )


DTYPE_BY_VALUE = not DTYPE_IS_SINGLETON and _probe_dtype_value()


def _dtype_check(e: str, dtype: Any, namer: _Namer) -> str:
    if DTYPE_IS_SINGLETON:
        return f"{e}.dtype is {namer.obj(dtype, 'dtype_')}"
    if DTYPE_BY_VALUE:
        return f"{e}.dtype.value == {int(dtype.value)}"
    return f"{e}.dtype == {namer.obj(dtype, 'dtype_')}"


def _needs_place_guard() -> bool:
    # A CPU-only build can only make CPU tensors; checking the place costs ~1 us a tensor.
    try:
        return bool(
            paddle.is_compiled_with_cuda()
            or paddle.is_compiled_with_xpu()
            or paddle.device.get_all_custom_device_type()
        )
    except Exception:  # noqa: BLE001 - very old builds lack the call
        return True


PLACE_GUARD = _needs_place_guard()


#: shape -> a tensor of that shape that holds one element (every stride 0)
_SHAPE_PROBES: Dict[Tuple[int, ...], Any] = {}


def shape_probe(shape: Tuple[int, ...]) -> Optional[Any]:
    """A tensor of ``shape`` for ``Tensor.is_same_shape``, or None where Paddle cannot
    make one.

    ``t.shape`` builds a new list on every read; ``t.is_same_shape(probe)`` compares the
    dimensions in C, 0.08 against 0.18 us a tensor on Paddle 3.3 (0.08 against 0.11 on
    3.0), and a guard reads it for every tensor argument of every call. The probe is a
    zero-stride view of one element, so it costs no memory whatever the shape.
    """
    probe = _SHAPE_PROBES.get(shape)
    if probe is None and shape not in _SHAPE_PROBES:
        try:
            with paddle.no_grad():
                probe = paddle.zeros([1]).as_strided(list(shape), [0] * len(shape))
            if tuple(probe.shape) != tuple(shape):
                probe = None
        except Exception:  # noqa: BLE001 - any Paddle without it keeps ``.shape ==``
            probe = None
        if len(_SHAPE_PROBES) < 4096:
            _SHAPE_PROBES[shape] = probe
    return probe


def _is_shape_probe(value: Any) -> bool:
    return isinstance(value, paddle.Tensor) and any(p is value for p in _SHAPE_PROBES.values())


def _native_check(v: str, spec: TensorSpec, namer: _Namer) -> Optional[str]:
    """``tensor_is(v, type, shape, dtype)``, the compiled check of a tensor's exact type,
    dtype and shape (``runtime/native``), or None where the guard checks them in Python:
    no compiled check here, a dynamic shape, a dtype it has no code for."""
    if spec.dynamic or not (isinstance(spec.type, type) and issubclass(spec.type, paddle.Tensor)):
        return None
    check = native.tensor_is()
    code = native.dtype_code(spec.dtype) if check is not None else None
    if check is None or code is None:
        return None
    fn = namer.obj(check, "tensor_is_")
    namer.notes[fn] = "the compiled check of a tensor's exact type, dtype and shape"
    dtype_name = re.sub(r"\W", "_", str(spec.dtype).rsplit(".", 1)[-1])
    dtype = namer.named(f"___dtype_{dtype_name}", code, f"{code}: {spec.dtype} in Paddle's C++")
    shape = repr(tuple(int(d) for d in spec.shape))
    return f"{fn}({v}, {namer.obj(spec.type, 't')}, {shape}, {dtype})"


@dataclass(frozen=True)
class TensorSpec:
    type: Type[Any]
    shape: Tuple[int, ...]
    dtype: Any
    stop_gradient: bool
    place: str
    #: ``((dim, min, max), ...)``: dimensions whose size is not pinned (dynamic shapes):
    #: at least 2, and within the bounds given to ``mark_dynamic``
    dynamic: Tuple[Tuple[int, Optional[int], Optional[int]], ...] = ()

    @classmethod
    def of(cls, t, dynamic: Optional[Dict[int, tuple]] = None) -> TensorSpec:
        dyn = tuple((d, lo, hi) for d, (lo, hi) in sorted((dynamic or {}).items()))
        return cls(type(t), tuple(t.shape), t.dtype, bool(t.stop_gradient), str(t.place), dyn)

    def shape_checks(self, v: str, namer: _Namer) -> List[str]:
        """The checks of the shape of the tensor ``v`` names."""
        if not self.dynamic:
            probe = shape_probe(self.shape)
            if probe is not None:
                return [f"{v}.is_same_shape({namer.obj(probe, 'shape_')})"]
            return [f"{v}.shape == {list(self.shape)!r}"]
        s = namer.local()
        checks = [f"len({s} := {v}.shape) == {len(self.shape)}"]
        dynamic = {d: (lo, hi) for d, lo, hi in self.dynamic}
        for d, size in enumerate(self.shape):
            if d not in dynamic:
                checks.append(f"{s}[{d}] == {size}")
                continue
            lo, hi = dynamic[d]
            checks.append(f"{s}[{d}] >= {max(2, lo or 2)}")
            if hi is not None:
                checks.append(f"{s}[{d}] <= {hi}")
        return checks


@dataclass
class Guard:
    source: Source
    kind: str
    value: Any = None

    def key(self) -> Tuple[str, str]:
        return (self.source.name(), self.kind)


LAYER_STORES = ("_parameters", "_sub_layers", "_buffers")


def _layer_store(obj: Any, attr: str) -> Optional[str]:
    """Where a layer keeps ``attr`` when ``Layer.__getattr__`` is what finds it.

    Reading ``layer.weight`` goes through that Python-level ``__getattr__`` (half a
    microsecond); ``layer._parameters['weight']`` is two dict lookups. Only used where
    the two are the same thing: the name is neither in the instance dict nor on the class.
    """
    if not isinstance(obj, paddle.nn.Layer):
        return None
    if attr in vars(obj) or hasattr(type(obj), attr):
        return None
    for store in LAYER_STORES:
        d = vars(obj).get(store)
        if isinstance(d, dict) and attr in d:
            return store
    return None


def _read_through_dict(obj: Any, attr: str) -> bool:
    """Whether ``obj.attr`` is exactly ``vars(obj)[attr]``: the name is in the instance
    dict, the type reads attributes the usual way, and no data descriptor on the type
    (a property, a slot) takes precedence over the instance dict.

    A layer's attribute read goes through ``Layer.__getattr__``'s slot even when the
    attribute is found (about 95 ns against 25 for the dict lookup): BART's guard reads
    some 250 attributes of its sublayers per call.
    """
    d = getattr(obj, "__dict__", None)
    if obj is None or isinstance(obj, type) or type(d) is not dict or attr not in d:
        return False
    cls = type(obj)
    if cls.__getattribute__ is not object.__getattribute__:
        return False
    for klass in cls.__mro__:
        if attr in vars(klass):
            kind = type(vars(klass)[attr])
            return not (hasattr(kind, "__set__") or hasattr(kind, "__delete__"))
    return True


def _plain_layer(obj: Any) -> bool:
    """A layer whose attribute lookup is Paddle's own: the instance dict, then the
    class, then ``Layer.__getattr__``'s parameters, sublayers and buffers."""
    cls = type(obj)
    return (
        isinstance(obj, paddle.nn.Layer)
        and cls.__getattribute__ is object.__getattribute__
        and cls.__getattr__ is paddle.nn.Layer.__getattr__
        and type(getattr(obj, "__dict__", None)) is dict
    )


def _layer_list(obj: Any) -> bool:
    """A ``LayerList`` whose ``ll[i]`` is ``ll._sub_layers[str(i)]`` for ``i >= 0``
    (Paddle keeps the keys ``'0'``...``'n-1'`` through insert and delete)."""
    return _plain_layer(obj) and type(obj).__getitem__ is paddle.nn.LayerList.__getitem__


class _Namer:
    """Hands out names for the objects a guard needs as constants."""

    def __init__(self):
        self.scope: Dict[str, Any] = {}
        #: what a constant is, where its repr would not say (``CompiledGuard.readable``)
        self.notes: Dict[str, str] = {}
        self._ids: Dict[int, str] = {}
        self._n = itertools.count()

    def named(self, name: str, value: Any, note: str) -> str:
        """``value`` as the constant ``name``, with what it is for ``readable()``."""
        self.scope[name] = value
        self.notes[name] = note
        return name

    def local(self) -> str:
        """A fresh name for a value the guard fetches once and checks several times."""
        return f"___v{next(self._n)}"

    def obj(self, value: Any, hint: str = "o") -> str:
        if id(value) in self._ids:
            return self._ids[id(value)]
        name = f"___{hint}{next(self._n)}"
        self._ids[id(value)] = name
        self.scope[name] = value
        return name


def _constant_literal(value: Any, namer: _Namer) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    # exact types only: a subclass's repr need not be code (NumPy 2 writes
    # np.float64(0.5), and the guard has no np)
    if type(value) in (int, str, bytes):
        return repr(value)
    if type(value) is float:
        if value != value or value in (float("inf"), float("-inf")):
            return namer.obj(value, "c")
        return repr(value)
    return namer.obj(value, "c")


def _zero_or_nan(value: Any) -> bool:
    """Whether ``value`` holds, at any depth, a float that == cannot pin: a zero (0.0 ==
    -0.0, but the sign reaches results: 1 / full([2], t)) or a NaN (equal to nothing, so
    a guard with == never holds and every call captures again)."""
    if isinstance(value, (float, np.floating)):
        return value == 0.0 or value != value
    if isinstance(value, (complex, np.complexfloating)):
        return _zero_or_nan(value.real) or _zero_or_nan(value.imag)
    if isinstance(value, (tuple, list, frozenset, set)):
        return any(_zero_or_nan(v) for v in value)
    if isinstance(value, dict):
        return any(_zero_or_nan(k) or _zero_or_nan(v) for k, v in value.items())
    return False


def exact_key(value: Any) -> Any:
    """``value`` as a key that is equal only for a value a capture may take for it:
    floats by repr, which writes the sign of a zero and one ``nan`` for every NaN, and the
    type of every item with it (``frozenset({1}) == frozenset({1.0})``, and a graph bakes
    in an int where it bakes in a float)."""
    t = type(value)
    if isinstance(value, (float, np.floating, complex, np.complexfloating)):
        return (t, repr(value))
    if isinstance(value, (tuple, list)):
        return (t, tuple(exact_key(v) for v in value))
    if isinstance(value, (frozenset, set)):
        return (t, frozenset(exact_key(v) for v in value))
    if isinstance(value, dict):
        return (t, tuple((exact_key(k), exact_key(v)) for k, v in value.items()))
    return (t, value)


class Exactly:
    """A guard's check that a value is the constant seen at capture, where == would also
    take another one (``_zero_or_nan``); only used there, == being several times faster."""

    __slots__ = ("value", "_key")

    def __init__(self, value: Any):
        self.value = value
        self._key = exact_key(value)

    def __call__(self, other: Any) -> bool:
        return exact_key(other) == self._key

    def __repr__(self) -> str:
        return f"exactly({self.value!r})"


class GuardSet:
    def __init__(self):
        self._guards: Dict[Tuple[str, str], Guard] = {}
        #: when not None, the entry is only valid with gradients on (True) or off (False)
        self.grad_enabled: Optional[bool] = None
        #: relations between dynamic sizes the capture relied on (``shapes`` expressions of
        #: a comparison) -> whether it held
        self.relations: Dict[tuple, bool] = {}
        #: pairs of sources that must (True) or must not (False) be one object: what the
        #: capture relied on about lists and dicts it reached twice or mutated
        #: (``executor.side_effects``)
        self.identities: Dict[Tuple[str, str], Tuple[Source, Source, bool]] = {}
        #: called with every guard added before it is kept (it may raise): how a capture
        #: shared between layer instances refuses a guard bound to one of them
        self.check: Optional[Callable[[Guard], None]] = None

    def add_identity(self, a: Source, b: Source, same: bool) -> None:
        first, second = sorted((a.name(), b.name()))
        self.identities.setdefault((first, second), (a, b, same))

    def add_relation(self, relation: tuple, holds: bool) -> None:
        self.relations.setdefault(relation, holds)

    def add(self, source: Optional[Source], kind: str, value: Any = None) -> None:
        if source is None:
            return
        g = Guard(source, kind, value)
        if self.check is not None:
            self.check(g)
        self._guards.setdefault(g.key(), g)

    def pinned_object(self, source: Source) -> Any:
        """The object an identity guard holds ``source`` to, held by the guard itself (not
        a layer passed in, which it holds weakly); None if no such guard."""
        g = self._guards.get((source.name(), ID_MATCH))
        return None if g is None or _held_weakly(g) else g.value

    def __len__(self) -> int:
        return len(self._guards)

    def __iter__(self):
        return iter(self._guards.values())

    def sorted(self) -> List[Guard]:
        def depth(src: Source) -> int:
            d = 0
            while isinstance(src, (AttrSource, ItemSource, ClosureSource, DefaultSource)):
                src = src.base if isinstance(src, (AttrSource, ItemSource)) else src.func
                d += 1
            return d

        return sorted(
            self._guards.values(),
            key=lambda g: (depth(g.source), _KIND_ORDER[g.kind], g.source.name()),
        )

    def build(self, fn_name: str) -> CompiledGuard:
        return _GuardWriter().write(self, fn_name)


class _GuardWriter:
    """Writes the checks of one guard function: one renderer per guard kind, each adding
    its parts (a comment and an expression) through ``add``, which records with each part
    the sources it reads more of than their type (``CompiledGuard.reads``). Besides the
    checks it collects what later calls are compared with: the tensors, numbers, layers
    and list lengths guarded."""

    def __init__(self):
        self.namer = _Namer()
        self.liveness = Liveness()
        #: (source name, expression, spec) of each tensor guarded: what automatic dynamic
        #: shapes compare a later call with
        self.tensors: List[Tuple[str, str, TensorSpec]] = []
        #: (source name, expression, value) of each int or float pinned: what automatic
        #: dynamic numbers compare a later call with
        self.numbers: List[Tuple[str, str, Any]] = []
        #: (source name, expression, weak reference, type) of each layer held weakly:
        #: what sharing a capture between instances compares a later call with
        self.layers: List[Tuple[str, str, Any, type]] = []
        #: (source name, expression, length) of each list whose length is pinned: what
        #: lists of any length compare a later call with
        self.lengths: List[Tuple[str, str, int]] = []
        # expression of each identity-matched source, replaced by its constant
        self.pinned: Dict[str, str] = {}
        # expression -> object, for identity-matched sources checked through their local
        self.weakly_held: Dict[str, Any] = {}
        self.parts: List[Tuple[str, str]] = []  # (comment, expression)
        #: per part, the sources it reads more of than their type
        self.reads: List[FrozenSet[str]] = []
        # what the parts added now read: the guard being rendered's (the class checks its
        # attribute reads add included)
        self._reading: FrozenSet[str] = frozenset()
        self.attributes = _AttributeReads(self.namer, self.add)

    def add(self, comment: str, check: str) -> None:
        self.parts.append((comment, check))
        self.reads.append(self._reading)

    def expr(self, src: Source) -> str:
        """The expression that fetches ``src`` in the guard."""
        namer, attribute = self.namer, self.attributes.read
        if src.name() in self.pinned:
            return self.pinned[src.name()]
        if isinstance(src, AttrSource):
            base = self.expr(src.base)
            obj = self.weakly_held.get(base, namer.scope.get(base))
            store = _layer_store(obj, src.attr)
            if store is not None:
                return f"{attribute(base, store)}[{src.attr!r}]"
            return attribute(base, src.attr)
        if isinstance(src, ItemSource):
            base = self.expr(src.base)
            if type(src.key) is int and src.key >= 0 and _layer_list(namer.scope.get(base)):
                return f"{attribute(base, '_sub_layers')}[{str(src.key)!r}]"
            return f"{base}[{src.key!r}]"
        if isinstance(src, ObjectSource):
            return namer.obj(src.obj, "g")
        if isinstance(src, ClosureSource):
            return f"{self.expr(src.func)}.__closure__[{src.index}].cell_contents"
        if isinstance(src, DefaultSource):
            attr = "__kwdefaults__" if src.kwonly else "__defaults__"
            return f"{self.expr(src.func)}.{attr}[{src.key!r}]"
        if isinstance(src, CallSource):
            args = ", ".join(_constant_literal(a, namer) for a in src.args)
            return f"{namer.obj(src.fn, 'f')}({args})"
        return src.name()

    def write(self, guards: GuardSet, fn_name: str) -> CompiledGuard:
        # a container's length or key guard checks its type first
        typed = {g.source.name() for g in guards if g.kind in (LEN_MATCH, DICT_KEYS)}
        for g in guards.sorted():
            if g.kind == TYPE_MATCH and g.source.name() in typed:
                continue
            self._reading = frozenset() if g.kind == TYPE_MATCH else names_through(g.source)
            e = self.expr(g.source)
            render = self._RENDERERS.get(g.kind)
            if render is None:  # pragma: no cover - programming error
                raise ValueError(g.kind)
            render(self, g, e)
        for a, b, same in guards.identities.values():
            self._reading = frozenset()  # (the class checks of their attribute reads)
            text = f"{self.expr(a)} {'is' if same else 'is not'} {self.expr(b)}"
            self._reading = names_through(a) | names_through(b)
            self.add("one object" if same else "two objects", text)
        for relation, holds in guards.relations.items():
            self._reading = frozenset()
            text = shapes.render(relation, self.expr)
            sources = shapes.sources_of(relation)
            self._reading = frozenset().union(*(names_through(s) for s in sources))
            self.add("size relation", text if holds else f"not {text}")
        if guards.grad_enabled is not None:
            self._reading = frozenset()
            fn = self.namer.obj(paddle.is_grad_enabled, "f")
            self.add("gradient mode", f"{fn}() is {guards.grad_enabled!r}")
        return self._compiled(fn_name)

    def _compiled(self, fn_name: str) -> CompiledGuard:
        text = self.attributes.text
        parts, reads = self.attributes.settle(self.parts, self.reads)
        parts, reads = _without_repeats(parts, reads)
        return CompiledGuard(
            fn_name,
            parts,
            self.namer.scope,
            [(n, text(e), spec) for n, e, spec in self.tensors],
            [(n, text(e), v) for n, e, v in self.numbers],
            self.liveness,
            [(n, text(e), ref, cls) for n, e, ref, cls in self.layers],
            [(n, text(e), length) for n, e, length in self.lengths],
            reads,
            self.namer.notes,
        )

    # -- one renderer per guard kind: ``(guard, expression of its source)``

    def _id_match(self, g: Guard, e: str) -> None:
        name = g.source.name()
        if _held_weakly(g):
            # a layer passed in: the entry must not keep it (and its weights) alive;
            # once it dies the check fails and ``liveness`` drops the entry
            ref = weakref.ref(g.value, self.liveness.died)
            check = f"{e} is {self.namer.obj(ref, 'w')}() is not None"
            self.layers.append((name, e, ref, type(g.value)))
            self.add(f"{name} is the layer seen at capture", check)
            self.weakly_held[e] = g.value
        else:
            obj = self.namer.obj(g.value)
            self.add(f"{name} is the object seen at capture", f"{e} is {obj}")
            self.pinned[name] = obj

    def _function_match(self, g: Guard, e: str) -> None:
        fn, namer = g.value, self.namer
        tname = namer.obj(type(fn), "t")
        code = namer.obj(fn.__code__, "c")
        glb = namer.obj(fn.__globals__, "g")
        kw = sorted(fn.__kwdefaults__ or ())
        check = (
            f"type({e}) is {tname} and {e}.__code__ is {code}"
            f" and {e}.__globals__ is {glb}"
            f" and len({e}.__defaults__ or ()) == {len(fn.__defaults__ or ())}"
            f" and sorted({e}.__kwdefaults__ or ()) == {kw!r}"
        )
        self.add("a function made at a graph break", check)

    def _type_match(self, g: Guard, e: str) -> None:
        self.add(f"type {g.value.__qualname__}", f"type({e}) is {self.namer.obj(g.value, 't')}")

    def _constant_match(self, g: Guard, e: str) -> None:
        v, namer = g.value, self.namer
        if type(v) in (int, float):
            self.numbers.append((g.source.name(), e, v))
        if v is None or isinstance(v, bool):
            self.add("constant", f"{e} is {v!r}")
            return
        fetch = e
        if isinstance(g.source, CallSource) or "." in e or self.attributes.reads_in(e):
            # fetched once for its type and its value: a query of Paddle's state (the
            # expected place, the AMP state) runs on every call, an attribute read can
            # take a Python-level __getattr__
            local = namer.local()
            fetch, e = f"{local} := {e}", local
        check = f"type({fetch}) is {namer.obj(type(v), 't')} and "
        if type(v) is float and v != v:
            # nan == nan is False: the entry would never be used again
            check += f"{namer.obj(math.isnan, 'f')}({e})"
        elif type(v) is not float and _zero_or_nan(v):
            # a frozenset, complex, NumPy float... holding one: == takes -0.0 for 0.0,
            # and never takes a NaN
            check += f"{namer.obj(Exactly(v), 'exactly')}({e})"
        elif type(v).__module__ not in ("builtins", "numpy"):
            # an object of a library's type (the expected place: a pybind Place, whose ==
            # costs 0.6 us): the object seen at capture, where the query hands out the
            # same one again, needs no ==
            same, tname = namer.obj(v, "c"), namer.obj(type(v), "t")
            check = f"({fetch}) is {same} or (type({e}) is {tname} and {e} == {same})"
        else:
            check += f"{e} == {_constant_literal(v, namer)}"
            if type(v) is float and v == 0.0:
                # 0.0 == -0.0, but the sign reaches results: 1 / full([2], t)
                sign = namer.obj(math.copysign, "f")
                check += f" and {sign}(1.0, {e}) == {math.copysign(1.0, v)!r}"
        self.add("constant", check)

    def _raises(self, g: Guard, e: str) -> None:
        src = cast(CallSource, g.source)  # a RAISES guard pins what a call raises
        raises = self.namer.obj(Raises(src.fn, src.args, g.value), "raises")
        self.add(f"{src.name()} raises {g.value.__name__}", f"{raises}()")

    def _hasattr(self, g: Guard, e: str) -> None:
        src = cast(AttrSource, g.source)  # a HASATTR guard pins whether an attribute exists
        base = self.expr(src.base)
        obj, attr = self.namer.scope.get(base), src.attr
        if not g.value and _plain_layer(obj):
            # hasattr answers False by way of an AttributeError raised inside
            # Layer.__getattr__ (2-4 us); ask the places it looks instead
            where = [self.attributes.instance_dict(base)]
            where += [self.attributes.read(base, s) for s in LAYER_STORES]
            found = " or ".join(f"{attr!r} in {w}" for w in where)
            check = f"not ({found} or hasattr({self.namer.obj(type(obj), 't')}, {attr!r}))"
        else:
            check = f"hasattr({base}, {attr!r}) is {bool(g.value)!r}"
        self.add("attribute presence", check)

    def _no_hooks(self, g: Guard, e: str) -> None:
        """No forward hooks, and the class's forward (``_class_forward``): a call of the
        layer runs what the capture inlined."""
        if _read_through_dict(self.namer.scope.get(e), "_forward_pre_hooks"):
            hooks = " or ".join(
                self.attributes.read(e, h) for h in ("_forward_pre_hooks", "_forward_post_hooks")
            )
            self.add("no forward hooks", f"not ({hooks})")
            self._class_forward(g, e)
            return
        # a layer reached by a path (a shared capture's): each read of it may go through
        # Layer.__getattr__, so it is read once
        v = self.namer.local()
        self.add(
            "no forward hooks, forward not replaced on the instance",
            f"not (({v} := {e})._forward_pre_hooks or {v}._forward_post_hooks"
            f" or 'forward' in {v}.__dict__)",
        )

    def _class_forward(self, g: Guard, e: str) -> None:
        # (``e.__dict__`` is the instance dict, read by a slot of ``object``: not
        # through ``Layer.__getattr__``, and whatever the layer's other reads go through)
        self.add("forward not replaced on the instance", f"'forward' not in {e}.__dict__")

    def _len_match(self, g: Guard, e: str) -> None:
        if type(g.value) is list:
            self.lengths.append((g.source.name(), e, len(g.value)))
        tname = self.namer.obj(type(g.value), "t")
        self.add("container", f"type({e}) is {tname} and len({e}) == {len(g.value)}")

    def _dict_keys(self, g: Guard, e: str) -> None:
        tname = self.namer.obj(type(g.value), "t")
        keys = list(g.value.keys())
        if _zero_or_nan(keys):
            # {-0.0: ...} has the keys of {0.0: ...} for ==, and a loop over it bakes the
            # key in
            same = f"{self.namer.obj(Exactly(keys), 'exactly')}(list({e}.keys()))"
        else:
            same = f"list({e}.keys()) == {self.namer.obj(keys, 'k')}"
        self.add("dict keys", f"type({e}) is {tname} and {same}")

    @staticmethod
    def _flag_checks(v: str, spec: TensorSpec) -> List[str]:
        """The checks of a tensor bound to the local ``v`` after its type, shape and dtype."""
        checks = [f"{v}.stop_gradient is {spec.stop_gradient!r}"]
        if PLACE_GUARD:
            checks.append(f"str({v}.place) == {spec.place!r}")
        return checks

    def _tensor_checks(self, fetch: str, v: str, spec: TensorSpec) -> List[str]:
        """The checks of one tensor: the first evaluates ``fetch`` (which binds ``v``),
        the others read ``v``."""
        namer = self.namer
        native_check = _native_check(fetch, spec, namer)
        if native_check is not None:
            return [native_check, *self._flag_checks(v, spec)]
        return [
            f"type({fetch}) is {namer.obj(spec.type, 't')}",
            *spec.shape_checks(v, namer),
            _dtype_check(v, spec.dtype, namer),
            *self._flag_checks(v, spec),
        ]

    def _tensor_match(self, g: Guard, e: str) -> None:
        spec: TensorSpec = g.value
        self.namer.obj(spec.type, "t")  # (named first, as guards always named it)
        # fetch the tensor once: its source may be a chain of lookups
        v = self.namer.local()
        self.add("tensor", " and ".join(self._tensor_checks(f"{v} := {e}", v, spec)))
        self.tensors.append((g.source.name(), e, spec))

    def _tensor_list(self, g: Guard, e: str) -> None:
        spec: TensorSpec = g.value
        v, t = self.namer.local(), self.namer.local()
        each = self._tensor_checks(t, t, spec)
        check = (
            f"type({v} := {e}) is list and len({v}) >= 1"
            f" and all({' and '.join(each)} for {t} in {v})"
        )
        self.add("a list of tensors of any length", check)

    _RENDERERS: Dict[str, Callable[[_GuardWriter, Guard, str], None]] = {
        ID_MATCH: _id_match,
        FUNCTION_MATCH: _function_match,
        TYPE_MATCH: _type_match,
        CONSTANT_MATCH: _constant_match,
        RAISES: _raises,
        HASATTR: _hasattr,
        NO_HOOKS: _no_hooks,
        CLASS_FORWARD: _class_forward,
        LEN_MATCH: _len_match,
        DICT_KEYS: _dict_keys,
        TENSOR_MATCH: _tensor_match,
        TENSOR_LIST: _tensor_list,
    }


class _AttributeReads:
    """How a guard reads the attributes of the objects it pins: by ``getattr``, or as
    items of the object's instance dict, bound as a constant after one check of the
    object's class (an object's class can be assigned; an object's ``__dict__`` is only
    replaced by assigning ``obj.__dict__``, which Paddle never does).

    The dict wins where the interpreter does not specialize the attribute read
    (``compat.attribute_reads_specialized``) and where the object is read often enough
    to pay for the class check. Both are known only once the whole guard is, so reads
    are written as placeholders and replaced by ``settle``.
    """

    #: the dict reads that pay for the class check: a layer's two hook dicts, read
    #: through ``vars()`` after a class check, cost 70-85% of two slow attribute reads on
    #: 3.10-3.12 and about the same on 3.8 and 3.9; one read does not pay
    MIN_READS = 2

    def __init__(self, namer: _Namer, add: Callable[[str, str], None]):
        self.namer = namer
        self._add = add
        self._reads: List[Tuple[str, str]] = []  # (base, attribute) per placeholder
        self._count: Dict[str, int] = {}
        self._forced: set = set()  # objects whose dict a check tests membership in
        self._through_dict: set = set()  # objects read through their dict (``settle``)

    def read(self, base: str, attr: str) -> str:
        """``base.attr`` as the guard reads it, a placeholder where it may be a dict item
        (``_read_through_dict``)."""
        if not _read_through_dict(self.namer.scope.get(base), attr):
            return _getattr_text(base, attr)
        self._typed(base)
        self._count[base] = self._count.get(base, 0) + 1
        self._reads.append((base, attr))
        return f"\x00{len(self._reads) - 1}\x00"

    def instance_dict(self, base: str) -> str:
        """The constant bound to the instance dict of the object ``base`` names (a real
        dict), for a check that tests membership in it."""
        self._typed(base)
        self._forced.add(base)
        return self._dict_name(base)

    def reads_in(self, text: str) -> bool:
        return "\x00" in text

    def text(self, text: str) -> str:
        """``text`` with its placeholders replaced (``settle`` first)."""
        return _PLACEHOLDER.sub(self._render, text)

    def settle(
        self, parts: List[Tuple[str, str]], reads: List[FrozenSet[str]]
    ) -> Tuple[List[Tuple[str, str]], List[FrozenSet[str]]]:
        """The final checks: the class check of every object read through its dict, and
        every placeholder replaced."""
        self._through_dict = {
            base
            for base, n in self._count.items()
            if (n >= self.MIN_READS or base in self._forced) and _slow_reads(self.namer.scope[base])
        }
        kept_parts, kept_reads = [], []
        for (comment, text), read in zip(parts, reads):
            base = text[1:] if text.startswith("\x01") else None
            if base is not None:
                if base not in self._through_dict and base not in self._forced:
                    continue
                text = f"type({base}) is {self.namer.obj(type(self.namer.scope[base]), 't')}"
            kept_parts.append((comment, self.text(text)))
            kept_reads.append(read)
        return kept_parts, kept_reads

    def _typed(self, base: str) -> None:
        if base not in self._count and base not in self._forced:
            # the class check goes before the first read, settled with the others
            cls = type(self.namer.scope[base])
            self._add(f"type {cls.__qualname__}", f"\x01{base}")
            self._count[base] = 0

    def _dict_name(self, base: str) -> str:
        name = self.namer.obj(vars(self.namer.scope[base]), "d")
        self.namer.notes[name] = f"{base}.__dict__"
        return name

    def _render(self, match) -> str:
        base, attr = self._reads[int(match.group(1))]
        if base in self._through_dict:
            return f"{self._dict_name(base)}[{attr!r}]"
        return _getattr_text(base, attr)


def _slow_reads(obj: Any) -> bool:
    """Whether reading an attribute of ``obj`` costs a slot call the instance dict saves:
    its class defines ``__getattr__`` (a ``Layer`` does), where the interpreter does not
    specialize the read. Without ``__getattr__`` the read is as cheap as the dict's."""
    return hasattr(type(obj), "__getattr__") and not compat.attribute_reads_specialized(vars(obj))


_PLACEHOLDER = re.compile("\x00([0-9]+)\x00")


def _getattr_text(base: str, attr: str) -> str:
    return f"{base}.{attr}" if attr.isidentifier() else f"getattr({base}, {attr!r})"


def _without_repeats(
    parts: List[Tuple[str, str]], reads: List[FrozenSet[str]]
) -> Tuple[List[Tuple[str, str]], List[FrozenSet[str]]]:
    """Each check once: a layer reached by two paths (an embedding shared by encoder and
    decoder) is one pinned object, and its checks read the same. The check kept reads
    what all of its copies read (``failure_through``)."""
    index: Dict[str, int] = {}
    kept: List[Tuple[str, str]] = []
    kept_reads: List[FrozenSet[str]] = []
    for part, read in zip(parts, reads):
        i = index.get(part[1])
        if i is None:
            index[part[1]] = len(kept)
            kept.append(part)
            kept_reads.append(read)
        else:
            kept_reads[i] = kept_reads[i] | read
    return kept, kept_reads


def _held_weakly(guard: Guard) -> bool:
    """Whether an identity-matched object is held by a weak reference: a layer found in
    a local (an argument, a loop's item), which the caller may drop while the optimized
    function lives on. Attributes of it are checked through the local, not a constant."""
    if not isinstance(guard.value, paddle.nn.Layer):
        return False
    source = guard.source
    while isinstance(source, ItemSource):
        source = source.base
    return isinstance(source, LocalSource)


class Liveness:
    """Tells a guard's cache entry that an object the guard holds weakly has died: the
    entry can never match again, and ``then`` (set by the cache that keeps the entry)
    drops it with its graph and what that holds."""

    __slots__ = ("then", "__weakref__")

    def __init__(self):
        self.then: Optional[Callable[[], None]] = None

    def died(self, _ref) -> None:
        then, self.then = self.then, None
        if then is not None:
            try:
                then()
            except Exception:  # noqa: BLE001 - a weakref callback must not raise
                pass


_guard_counter = itertools.count()


class CompiledGuard:
    """One generated guard function plus its source, for people and for diagnosis."""

    def __init__(
        self,
        fn_name: str,
        parts: List[Tuple[str, str]],
        scope: Dict[str, Any],
        tensors: Optional[List[Tuple[str, str, TensorSpec]]] = None,
        numbers: Optional[List[Tuple[str, str, Any]]] = None,
        liveness: Optional[Liveness] = None,
        layers: Optional[List[Tuple[str, str, Any, type]]] = None,
        lengths: Optional[List[Tuple[str, str, int]]] = None,
        reads: Optional[List[FrozenSet[str]]] = None,
        notes: Optional[Dict[str, str]] = None,
    ):
        self.notes = notes or {}
        self.liveness = liveness if liveness is not None else Liveness()
        #: per part, the names of the sources it reads more of than their type, and of
        #: what those are read through (``failure_through``)
        self.reads = reads if reads is not None else [frozenset()] * len(parts)
        if len(self.reads) != len(parts):  # pragma: no cover - programming error
            raise ValueError(f"{len(parts)} guard checks, {len(self.reads)} sets of reads")
        self.layers = layers or []
        self.lengths = lengths or []
        self.parts = parts
        self.tensors = tensors or []
        self.numbers = numbers or []
        self.scope = scope
        self.fn_name = fn_name
        lines = [f"def {fn_name}(L, G):"]
        if parts:
            lines.append("    return (")
            for i, (_, e) in enumerate(parts):
                lines.append(f"        {'and ' if i else ''}({e})")
            lines.append("    )")
        else:
            lines.append("    return True")
        self.source = "\n".join(lines) + "\n"
        filename = f"<jit_core guard {next(_guard_counter)}: {fn_name}>"
        self.fn: Callable[[dict, dict], bool] = compat.exec_source(
            self.source, filename, fn_name, dict(scope)
        )

    def __call__(self, L, G) -> bool:
        try:
            return bool(self.fn(L, G))
        except Exception:  # noqa: BLE001
            # A missing attribute or key means the object is not what we captured.
            return False

    def changed_sizes(self, L, G) -> List[Tuple[str, int, int, int]]:
        """``(source name, dim, size at capture, size now)`` of every static dimension of
        a guarded tensor whose size differs in this call while its rank and dtype do not:
        what automatic dynamic shapes makes dynamic on the next capture."""
        changed = []
        for name, e, spec in self.tensors:
            try:
                t = eval(e, dict(self.scope), {"L": L, "G": G})
                shape = list(t.shape)
                same_kind = type(t) is spec.type and t.dtype == spec.dtype
            except Exception:  # noqa: BLE001 - gone or another kind of object
                continue
            if not same_kind or len(shape) != len(spec.shape):
                continue
            dynamic = {d for d, _, _ in spec.dynamic}
            for d, (was, now) in enumerate(zip(spec.shape, shape)):
                if d not in dynamic and was != now:
                    changed.append((name, d, was, now))
        return changed

    def changed_numbers(self, L, G) -> List[Tuple[str, Any, Any]]:
        """``(source name, value at capture, value now)`` of every int or float the guard
        pins whose value differs in this call (still of the same type): what automatic
        dynamic numbers make graph inputs on the next capture."""
        changed = []
        for name, e, was in self.numbers:
            try:
                now = eval(e, dict(self.scope), {"L": L, "G": G})
            except Exception:  # noqa: BLE001 - gone: not a changed value
                continue
            # the same NaN is no change, a zero of the other sign is one
            if type(now) is type(was) and exact_key(now) != exact_key(was):
                changed.append((name, was, now))
        return changed

    def changed_lengths(self, L, G) -> List[Tuple[str, int, int]]:
        """``(source name, length at capture, length now)`` of every list whose length the
        guard pins and differs in this call: what lists of any length serve next."""
        changed = []
        for name, e, was in self.lengths:
            try:
                now = eval(e, dict(self.scope), {"L": L, "G": G})
            except Exception:  # noqa: BLE001 - gone: no changed length
                continue
            if type(now) is list and len(now) != was:
                changed.append((name, was, len(now)))
        return changed

    def changed_layers(self, L, G) -> List[Tuple[str, type]]:
        """``(source name, class)`` of every layer held weakly that is another instance of
        its class in this call: what a capture shared between instances serves next."""
        changed = []
        for name, e, ref, cls in self.layers:
            try:
                now = eval(e, dict(self.scope), {"L": L, "G": G})
            except Exception:  # noqa: BLE001 - gone: not another instance
                continue
            if type(now) is cls and now is not ref():
                changed.append((name, cls))
        return changed

    def first_failure(self, L, G) -> Optional[str]:
        """The text of the first check that fails for these locals/globals, or None."""
        failed = self._first_failure(L, G)
        return failed[1] if failed is not None else None

    def failure_through(self, L, G, names) -> Optional[str]:
        """The text of the first check that fails, where it reads more than the type of
        a source named in ``names`` or of something read through one (a layer shared
        between instances: its width, a flag, its hooks), else None."""
        failed = self._first_failure(L, G)
        if failed is None or not (self.reads[failed[0]] & set(names)):
            return None
        return failed[1]

    def _first_failure(self, L, G) -> Optional[Tuple[int, str]]:
        for i, (_, e) in enumerate(self.parts):
            try:
                ok = eval(e, dict(self.scope), {"L": L, "G": G})
            except Exception as exc:  # noqa: BLE001 - any failure is a failed guard
                return i, f"{e}  (raised {type(exc).__name__}: {exc})"
            if not ok:
                return i, e
        return None

    def readable(self) -> str:
        """The guard source, with the constants it refers to listed under it."""
        out = [self.source.rstrip()]
        for name, value in self.scope.items():
            if name in self.notes:
                out.append(f"#   {name} = {self.notes[name]}")
                continue
            r = repr(value)
            if isinstance(value, weakref.ref):
                r = f"weak reference to {value()!r}"
            elif _is_shape_probe(value):
                r = f"a tensor of shape {list(value.shape)} (only its shape is compared)"
            if len(r) > 80:
                r = r[:77] + "..."
            out.append(f"#   {name} = {r}")
        return "\n".join(out)
