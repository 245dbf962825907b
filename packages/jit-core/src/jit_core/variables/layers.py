"""``paddle.nn.Layer`` objects: Paddle's own layers become call_module nodes, user layers
and model-zoo layers are inlined down to them."""

from __future__ import annotations

import functools
import inspect
from typing import List, Set

import paddle

from ..errors import DYNAMIC_VALUE, RAISES, SIDE_EFFECT, UNTRACED_CALL, Unsupported
from ..runtime import guards
from ..shapes import SpecializeLayers
from ..sources import AttrSource, ItemSource
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import ListIteratorVariable, TupleVariable

_CONTAINERS = (paddle.nn.Sequential, paddle.nn.LayerList, paddle.nn.LayerDict)


#: the modules of Paddle's layers that are compositions of other layers written in Python
#: (``TransformerEncoder``, ``MultiHeadAttention``...): they are inlined like a user's
#: layer. As opaque calls, the ``paddle`` backend ran them through ``Layer.__call__`` as
#: eager does, their ``Linear`` and ``LayerNorm`` calls not lowered (BERT: 0.87-1.06x eager)
_COMPOSITES = ("paddle.nn.layer.transformer",)  # (its file is user code: skipfiles)


def is_leaf_layer(layer: paddle.nn.Layer) -> bool:
    """Paddle's own layers (Conv2D, BatchNorm2D, ReLU, Linear...) stay opaque calls."""
    if isinstance(layer, _CONTAINERS):
        return False
    module = type(layer).__module__
    return module.startswith("paddle.nn.") and module not in _COMPOSITES


@functools.lru_cache(maxsize=None)
def reads_training(cls: type) -> bool:
    """Whether the ``forward`` of Paddle's layer class ``cls``, or a method of the class it
    calls, reads ``self.training``. Only then does the layer compute something else in
    training mode (``Dropout``, ``BatchNorm``; not ``Linear`` or ``LayerNorm``), and only
    then is its mode guarded: each guard is paid on every call (BERT's encoder has 27
    such layers). Code it cannot read counts as reading it."""
    seen: Set[str] = set()

    def reads(fn, depth: int) -> bool:
        code = getattr(inspect.unwrap(fn), "__code__", None)
        if code is None or depth == 0:
            return True
        codes = [code] + [c for c in code.co_consts if inspect.iscode(c)]
        names = {n for c in codes for n in c.co_names}
        strings = {k for c in codes for k in c.co_consts if isinstance(k, str)}
        if "training" in names or "training" in strings:
            return True
        for name in names - seen:
            seen.add(name)
            attr = inspect.getattr_static(cls, name, None)
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            if inspect.isfunction(attr) and reads(attr, depth - 1):
                return True
        return False

    forward = inspect.getattr_static(cls, "forward", None)
    return forward is None or reads(forward, 4)


def _alias_wrappers() -> frozenset:
    """The codes of the wrappers Paddle's ``param_one_alias``/``param_two_alias`` put
    around many layers' ``forward`` (one code for every function they wrap)."""
    try:
        from paddle.utils import decorator_utils as d
    except ImportError:  # older Paddle: no such decorators
        return frozenset()
    codes = set()
    for make, args in (
        ("param_one_alias", (["x", "input"],)),
        ("param_two_alias", (["x", "input"], ["y", "other"])),
    ):
        decorate = getattr(d, make, None)
        if decorate is not None:
            codes.add(decorate(*args)(lambda x: x).__code__)
    return frozenset(codes)


_ALIAS_WRAPPERS = _alias_wrappers()


def chain(tx, layers: List[VariableTracker], args, kwargs) -> VariableTracker:
    """What ``Sequential.forward`` does: each layer's output is the next one's input."""
    if kwargs or len(args) != 1:
        raise Unsupported("Sequential called with more than one input", category=RAISES)
    out = args[0]
    for sub in layers:
        out = sub.call_function(tx, [out], {})
    return out


def _plain(value) -> bool:
    if isinstance(value, tuple):
        return all(_plain(v) for v in value)
    return type(value) in (int, float, str, bool, type(None))


def unaliased(fn, has_kwargs: bool):
    """``fn`` without Paddle's alias wrapper, where the call passes no keyword arguments
    (the wrapper only renames them; it would reach the function as an opaque call)."""
    if inspect.isfunction(fn) and fn.__code__ in _ALIAS_WRAPPERS and not has_kwargs:
        # (set by functools.wraps in the wrapper: mypy knows no such attribute of a function)
        return fn.__wrapped__  # type: ignore[attr-defined]
    return fn


_HOOK_DICTS = ("_forward_pre_hooks", "_forward_post_hooks")


def _has_hooks(layer: paddle.nn.Layer) -> bool:
    return any(getattr(layer, hooks, None) for hooks in _HOOK_DICTS)


class LayerVariable(VariableTracker):
    def __init__(self, layer: paddle.nn.Layer, source=None):
        super().__init__(source)
        self.value = layer

    def python_type(self) -> type:
        return type(self.value)

    def describe(self) -> str:
        return f"layer {type(self.value).__name__}"

    def truthy(self, tx) -> bool:
        if isinstance(self.value, _CONTAINERS):
            self.guard_members(tx)
            return len(self.value) > 0
        return True

    def _child_source(self, name):
        return AttrSource(self.source, name) if self.source is not None else None

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .builder import wrap

        layer = self.value
        stored = tx.output.side_effects.stored_attribute(layer, name)
        if stored is not None:
            return stored
        cls_attr = inspect.getattr_static(type(layer), name, None)
        if isinstance(cls_attr, property):
            if cls_attr.fget is None:
                raise Unsupported(f"property {name!r} has no getter", category=RAISES)
            return tx.inline_function(cls_attr.fget, [self], {}, fn_source=None)
        d = layer.__dict__
        src = self._child_source(name)
        if name in d:
            return wrap(tx, d[name], src, owned_by_layer=True)
        for store in ("_parameters", "_sub_layers", "_buffers"):
            table = d.get(store) or {}
            if name in table:
                return wrap(tx, table[name], src, owned_by_layer=True)
        if cls_attr is not None:
            if isinstance(cls_attr, staticmethod):
                return wrap(tx, cls_attr.__func__, None)
            if isinstance(cls_attr, classmethod):
                raise Unsupported(f"classmethod {name!r} of a layer", category=DYNAMIC_VALUE)
            if inspect.isfunction(cls_attr):
                from .functions import UserMethodVariable

                return UserMethodVariable(cls_attr, self)
            return wrap(tx, getattr(layer, name), src)
        raise Unsupported(f"{type(layer).__name__} has no attribute {name!r}", category=RAISES)

    def store_attr(self, tx, name: str, value: VariableTracker) -> bool:
        layer = self.value
        setattr_fn = inspect.getattr_static(type(layer), "__setattr__", None)
        if setattr_fn is paddle.nn.Layer.__setattr__:
            return self.store_plain(tx, name, value)
        if inspect.isfunction(setattr_fn) and self.source is not None:
            # a library's own __setattr__ around Layer's (PaddleNLP wraps the one of
            # Paddle's transformer layers): followed, down to Layer's (LayerSetattr)
            tx.inline_function(
                setattr_fn, [self, ConstantVariable(name), value], {}, fn_source=None
            )
            return True
        return False

    def store_plain(self, tx, name: str, value: VariableTracker) -> bool:
        """A plain value stored on a layer (``self.cache_len = n``, ``self._data_format =
        'NCHW'``): later reads in the capture see it, and the generated code sets it on the
        layer after the graph, where a container's new contents are written back. Only
        Python constants (numbers, strings, None, tuples of them), on a layer whose
        ``__setattr__`` is ``Layer``'s, under a name that is no parameter, sublayer,
        buffer or class attribute (those go through Paddle's bookkeeping)."""
        layer = self.value
        if not value.is_python_constant() or self.source is None:
            return False
        if not _plain(value.as_python_constant()):
            return False
        if inspect.getattr_static(type(layer), name, None) is not None:
            return False
        d = layer.__dict__
        if any(
            name in (d.get(table) or {}) for table in ("_parameters", "_sub_layers", "_buffers")
        ):
            return False
        new = value.as_python_constant()
        if tx.output.side_effects.stored_attribute(layer, name) is None and name in d:
            old = d[name]
            if not _plain(old):
                return False  # a tensor or an object replaced: what held it may see it
            if type(old) is type(new) and old == new:
                # the value it holds already (BatchNorm2D's forward stores its
                # _data_format again): with that guarded, nothing to write back
                held = self.var_getattr(tx, name)
                return held.is_python_constant() and held.as_python_constant() == new
        tx.output.side_effects.store_attribute(self, layer, name, value)
        return True

    # -- containers
    def guard_members(self, tx) -> None:
        """Pin which sublayers the container holds, by name and in order.

        The identity guard on the container says nothing about its contents:
        ``blocks.append(...)`` or ``add_sublayer`` keep the object and change what a loop
        over it, ``len()`` or a negative index see."""
        if tx is not None and self.source is not None:
            tx.output.guards.add(
                AttrSource(self.source, "_sub_layers"), guards.DICT_KEYS, self.value._sub_layers
            )

    def _items(self, tx=None):
        layer = self.value
        if isinstance(layer, (paddle.nn.Sequential, paddle.nn.LayerList)):
            self.guard_members(tx)
            return list(layer._sub_layers.values())
        raise Unsupported(f"iterating over {self.describe()}", category=DYNAMIC_VALUE)

    def unpack_var_sequence(self, tx) -> List[VariableTracker]:
        from .builder import wrap

        if isinstance(self.value, paddle.nn.LayerDict):
            self.guard_members(tx)
            return [ConstantVariable(k) for k in self.value._sub_layers]
        return [
            wrap(tx, sub, ItemSource(self.source, i) if self.source else None)
            for i, sub in enumerate(self._items(tx))
        ]

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        from .builder import wrap

        key = index.as_python_constant()
        layer = self.value
        if isinstance(layer, paddle.nn.LayerDict):
            if key not in layer._sub_layers:
                self.guard_members(tx)
                raise Unsupported(f"LayerDict[{key!r}] raises KeyError", category=RAISES)
            return wrap(tx, layer[key], ItemSource(self.source, key) if self.source else None)
        if isinstance(key, int):
            items = self._items()
            if key < 0 or key >= len(items):
                # what a negative index picks, and that an index is out of range, depend
                # on the length
                self.guard_members(tx)
            if not -len(items) <= key < len(items):
                raise Unsupported(f"{self.describe()}[{key}] raises IndexError", category=RAISES)
            if key < 0:
                key += len(items)
            return wrap(tx, items[key], ItemSource(self.source, key) if self.source else None)
        if isinstance(key, slice) and isinstance(
            layer, (paddle.nn.LayerList, paddle.nn.Sequential)
        ):
            # which layers a slice holds depends on how many there are
            self.guard_members(tx)
            return LayerSliceVariable(self, list(range(len(self._items())))[key])
        raise Unsupported(f"indexing {self.describe()} with {key!r}", category=DYNAMIC_VALUE)

    def call_method(self, tx, name: str, args, kwargs):
        from .builder import wrap

        layer = self.value
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__len__" and isinstance(layer, _CONTAINERS):
            self.guard_members(tx)
            return ConstantVariable(len(layer))
        if isinstance(layer, paddle.nn.LayerDict) and name in ("keys", "values", "items"):
            self.guard_members(tx)
            keys = list(layer._sub_layers)
            vals = [
                wrap(tx, layer[k], ItemSource(self.source, k) if self.source else None)
                for k in keys
            ]
            if name == "keys":
                return ListIteratorVariable([ConstantVariable(k) for k in keys])
            if name == "values":
                return ListIteratorVariable(vals)
            return ListIteratorVariable(
                [TupleVariable([ConstantVariable(k), v]) for k, v in zip(keys, vals)]
            )
        if name in ("children", "named_children") and not args:
            self.guard_members(tx)
            subs = list(layer._sub_layers.items())
            vals = [wrap(tx, sub, self._child_source(k)) for k, sub in subs]
            if name == "children":
                return ListIteratorVariable(vals)
            return ListIteratorVariable(
                [TupleVariable([ConstantVariable(k), v]) for (k, _), v in zip(subs, vals)]
            )
        if name == "forward":
            self._own_forward()
            if self.source is not None:
                tx.output.guards.add(self.source, guards.CLASS_FORWARD)
            return self._forward(tx, args, kwargs)
        return super().call_method(tx, name, args, kwargs)

    # -- calling
    def call_function(self, tx, args, kwargs):
        if _has_hooks(self.value):
            raise Unsupported(
                f"{self.describe()} has forward hooks; they are not captured yet",
                category=UNTRACED_CALL,
            )
        self._own_forward()
        # the graph does what the class's forward does (inlined, or exported with the
        # graph): a hook registered, or a forward set on the instance, later must reach
        # a new capture
        tx.output.guards.add(self.source, guards.NO_HOOKS)
        return self._forward(tx, args, kwargs)

    def _own_forward(self) -> None:
        if "forward" in vars(self.value):
            # eager runs what was set (``layer.forward = f``), not the class's forward
            raise Unsupported(
                f"{self.describe()} has its forward replaced on the instance",
                category=UNTRACED_CALL,
            )

    def _inline_leaf(self, tx, args, kwargs):
        """Paddle's own layer in a capture shared between instances: its forward inlined
        (its parameters are the graph inputs of this call's instance), or, where it cannot
        be, the frame captured again bound to its instances."""
        forward = inspect.getattr_static(type(self.value), "forward", None)
        what = f"{type(self.value).__name__}.forward"
        forward = unaliased(forward, bool(kwargs))
        if not inspect.isfunction(forward):
            raise SpecializeLayers(f"{what} is not a Python function")
        try:
            return tx.inline_function(forward, [self] + list(args), kwargs, fn_source=None)
        except Unsupported as e:
            raise SpecializeLayers(f"{what} cannot be inlined: {e.reason}") from None

    def _forward(self, tx, args, kwargs):
        layer = self.value
        if is_leaf_layer(layer):
            # (an opaque call of a layer with sublayers runs them in its mode too)
            if reads_training(type(layer)) or layer._sub_layers:
                tx.output.guards.add(
                    self._child_source("training"), guards.CONSTANT_MATCH, bool(layer.training)
                )
            if self.source is not None and tx.output.shape_policy.shares_layer(self.source):
                return self._inline_leaf(tx, args, kwargs)
            return tx.output.call_module(tx, self, args, kwargs)
        if (
            isinstance(layer, paddle.nn.Sequential)
            and type(layer).forward is paddle.nn.Sequential.forward
        ):
            return chain(tx, self.unpack_var_sequence(tx), args, kwargs)
        forward = inspect.getattr_static(type(layer), "forward", None)
        if not inspect.isfunction(forward):
            raise Unsupported(
                f"{self.describe()}.forward is not a Python function", category=UNTRACED_CALL
            )
        return tx.inline_function(forward, [self] + list(args), kwargs, fn_source=None)


class LayerSliceVariable(VariableTracker):
    """``layers[1:]`` of a ``LayerList`` or ``Sequential``: eager makes a new container of
    the same layers; the capture keeps which of the container's layers it holds (their
    sources stay the container's items, pinned by its member guard) and makes nothing,
    so Paddle's layer-name counters move as they would not. Iterated, indexed, sliced
    again, measured with ``len`` or, for a ``Sequential``, called; anything else breaks."""

    def __init__(self, container: LayerVariable, indices: List[int]):
        super().__init__(None)
        self.container = container
        self.indices = indices

    def python_type(self) -> type:
        return type(self.container.value)

    def describe(self) -> str:
        return f"a slice of {self.container.describe()}"

    def _item(self, tx, position: int) -> VariableTracker:
        from .builder import wrap

        i = self.indices[position]
        src = self.container.source
        return wrap(tx, self.container._items()[i], ItemSource(src, i) if src else None)

    def unpack_var_sequence(self, tx) -> List[VariableTracker]:
        return [self._item(tx, p) for p in range(len(self.indices))]

    def truthy(self, tx) -> bool:
        return bool(self.indices)

    def call_method(self, tx, name: str, args, kwargs):
        if name == "__len__" and not args and not kwargs:
            return ConstantVariable(len(self.indices))
        if name == "__getitem__" and len(args) == 1 and args[0].is_python_constant():
            key = args[0].as_python_constant()
            if isinstance(key, slice):
                return LayerSliceVariable(self.container, self.indices[key])
            if isinstance(key, int) and not isinstance(key, bool):
                if not -len(self.indices) <= key < len(self.indices):
                    raise Unsupported(
                        f"{self.describe()}[{key}] raises IndexError", category=RAISES
                    )
                return self._item(tx, key % len(self.indices))
        return super().call_method(tx, name, args, kwargs)

    def call_function(self, tx, args, kwargs):
        seq = self.container.value
        if not isinstance(seq, paddle.nn.Sequential) or type(seq).forward is not (
            paddle.nn.Sequential.forward
        ):
            raise Unsupported(f"calling {self.describe()}", category=UNTRACED_CALL)
        return chain(tx, self.unpack_var_sequence(tx), args, kwargs)


class LayerSetattr(VariableTracker):
    """``Layer.__setattr__`` reached through ``super()`` from a library's own
    ``__setattr__``: the store of a plain value, as ``LayerVariable.store_plain`` takes it."""

    def __init__(self, layer: LayerVariable):
        super().__init__(None)
        self.layer = layer

    def describe(self) -> str:
        return f"Layer.__setattr__ of {self.layer.describe()}"

    def call_function(self, tx, args, kwargs):
        if kwargs or len(args) != 2 or not args[0].is_python_constant():
            raise Unsupported(f"{self.describe()} with these arguments", category=SIDE_EFFECT)
        name = args[0].as_python_constant()
        if not self.layer.store_plain(tx, name, args[1]):
            raise Unsupported(
                f"storing {self.layer.describe()}.{name}: a side effect, run between two graphs",
                category=SIDE_EFFECT,
            )
        return ConstantVariable(None)
