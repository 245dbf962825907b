"""Tuples, lists, dicts, slices and iterators whose items are trackers."""

from __future__ import annotations

import collections
import inspect
import itertools
import types
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Type, cast

from ..bytecode import compat
from ..errors import DYNAMIC_VALUE, RAISES, SIDE_EFFECT, UNTRACED_CALL, Unsupported
from .base import VariableTracker
from .constant import ConstantVariable

if TYPE_CHECKING:  # pragma: no cover
    from .tensor import TensorListVariable

#: containers are numbered as they are made: a generator consumed step by step may only
#: change the containers it made itself (see ``Translator.container_mutated``)
_BIRTHS = itertools.count()


def _const(v: Any) -> ConstantVariable:
    return ConstantVariable(v)


def note_mutation(tx, container: VariableTracker, what: str) -> None:
    """Tell the translator that ``container`` (made in the frame) changes."""
    hook = getattr(tx, "container_mutated", None)
    if hook is not None:
        hook(container, what)


def mutate_outside(tx, container: VariableTracker, what: str, kind: str) -> None:
    """``container`` changes: when it exists outside the captured code, its new contents
    are written back to it after the graph (``executor.side_effects``)."""
    if container.source is None:
        return
    side_effects = getattr(getattr(tx, "output", None), "side_effects", None)
    if side_effects is not None:
        # inside the code of an iterator consumed step by step the change would show
        # between the consumer's steps in CPython, not all at once
        tx.no_side_effect(f"{what} on {kind} from outside the frame")
    else:
        raise Unsupported(
            f"{what} mutates {kind} that exists outside the captured code "
            "(a side effect: it runs in Python between two graphs)",
            category=SIDE_EFFECT,
        )
    side_effects.mark_mutated(container)


def _same_item(tx, item: VariableTracker, want: VariableTracker) -> bool:
    """``item == want`` as ``list.index``/``remove``/``count`` test it (identity first),
    when capture can know it without reading a tensor's value."""
    from .tensor import TensorVariable

    if item is want:
        return True
    if isinstance(item, TensorVariable) and isinstance(want, TensorVariable):
        if item.node is want.node:
            return True
    if item.is_python_constant() and want.is_python_constant():
        try:
            return bool(item.as_python_constant() == want.as_python_constant())
        except Exception as e:
            raise Unsupported(
                f"comparing list items raises {type(e).__name__}", category=RAISES
            ) from e
    raise Unsupported(
        f"comparing {item.describe()} with {want.describe()} needs their values",
        category=DYNAMIC_VALUE,
    )


def _find(tx, items: List[VariableTracker], want: VariableTracker, what: str) -> int:
    for i, item in enumerate(items):
        if _same_item(tx, item, want):
            return i
    raise Unsupported(
        f"{what} of an item that is not in the list raises ValueError", category=RAISES
    )


def sort_items(
    tx, items: List[VariableTracker], key: Optional[VariableTracker], reverse: VariableTracker
) -> List[VariableTracker]:
    """``sorted(items, key=key, reverse=reverse)``: the keys (``key`` called on each item,
    inlined) must be Python constants; the order is CPython's (a stable sort)."""
    if not reverse.is_python_constant():
        raise Unsupported("sort(reverse=...) that is not a constant", category=DYNAMIC_VALUE)
    if key is not None and not (key.is_python_constant() and key.as_python_constant() is None):
        keys = [tx.call(key, [item], {}) for item in items]
    else:
        keys = list(items)
    if not all(k.is_python_constant() for k in keys):
        raise Unsupported(
            "sorting by values that are not Python constants (tensors?)", category=DYNAMIC_VALUE
        )
    values = [k.as_python_constant() for k in keys]
    try:
        order = sorted(
            range(len(items)), key=values.__getitem__, reverse=bool(reverse.as_python_constant())
        )
    except Exception as e:
        raise Unsupported(f"sorting raises {type(e).__name__}: {e}", category=RAISES) from e
    return [items[i] for i in order]


def replace_list(target: list, contents: list) -> None:
    """What the generated code calls to give an outside list its new contents: the same
    object (other references to it see the change), as eager's mutation leaves it."""
    target[:] = contents


def extend_list(target: list, appended: list) -> None:
    """For an outside list the captured code only appended to (it never read its items or
    length, so no guard pins them): what it appended, after whatever the list holds."""
    target.extend(appended)


def replace_dict(target: dict, contents: dict) -> None:
    """As ``replace_list``: the keys in the order the captured code left them, which is
    the order eager's item assignments, deletions and updates leave."""
    if list(target.keys()) == list(contents.keys()):
        target.update(contents)
    else:
        target.clear()
        target.update(contents)


class BaseListVariable(VariableTracker):
    container_type: type = list

    def __init__(self, items: List[VariableTracker], source=None):
        super().__init__(source)
        self.items = list(items)
        self.birth = next(_BIRTHS)

    def python_type(self) -> type:
        return self.container_type

    def describe(self) -> str:
        return f"{self.container_type.__name__} of {len(self.items)}"

    def is_python_constant(self) -> bool:
        return all(i.is_python_constant() for i in self.items)

    def as_python_constant(self) -> Any:
        return self.python_value([i.as_python_constant() for i in self.items])

    def python_value(self, items: List[Any]) -> Any:
        """The Python container of this kind holding ``items``."""
        return self.container_type(items)

    def with_items(self, items: List[VariableTracker]) -> BaseListVariable:
        """A new container of the kind a slice or a concatenation of this one makes."""
        return type(self)(items)

    def unpack_var_sequence(self, tx) -> List[VariableTracker]:
        return list(self.items)

    def truthy(self, tx) -> bool:
        return bool(self.items)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if hasattr(self.container_type, name):
            from .functions import BoundMethodVariable

            return BoundMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        if not index.is_python_constant():
            raise Unsupported(
                f"indexing {self.describe()} with {index.describe()}", category=DYNAMIC_VALUE
            )
        key = index.as_python_constant()
        if isinstance(key, slice):
            return self.with_items(self.items[key])
        try:
            return self.items[key]
        except (IndexError, TypeError) as e:
            raise Unsupported(
                f"{self.describe()}[{key!r}] raises {type(e).__name__}", category=RAISES
            ) from e

    def call_method(self, tx, name: str, args, kwargs):
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__len__":
            return _const(len(self.items))
        if name == "index" and len(args) == 1 and not kwargs:
            return _const(_find(tx, self.items, args[0], f"{self.container_type.__name__}.index"))
        if name == "count" and len(args) == 1 and not kwargs:
            return _const(sum(1 for i in self.items if _same_item(tx, i, args[0])))
        raise Unsupported(f"method {name!r} of {self.describe()}", category=UNTRACED_CALL)

    def build_new(self, cg) -> None:
        """A new object with the tracked items (``pycodegen.store_cells`` writes it into
        the outside list it stands for)."""
        self._build(cg)

    def _build(self, cg) -> None:
        subclass = self.container_type not in (list, tuple)
        if subclass:  # paddle.Size: a list subclass made from a list
            cg.extend(compat.load_callable_const(self.container_type))
        for item in self.items:
            cg(item)
        if self.container_type is tuple:
            cg.extend(compat.build_tuple(len(self.items)))
        else:
            cg.extend(compat.build_list(len(self.items)))
        if subclass:
            cg.extend(compat.call(1))


class TupleVariable(BaseListVariable):
    container_type: type = tuple

    def reconstruct(self, cg) -> None:
        # immutable: rebuilt from its items wherever it is held
        self._build(cg)


def _probe_tuplegetter() -> type:
    # (mypy does not see the field getters of a namedtuple made in an expression)
    return type(cast(Any, collections.namedtuple("_Probe", "a")).a)


_TUPLEGETTER = _probe_tuplegetter()


def is_namedtuple_class(cls: Any) -> bool:
    """A class ``collections.namedtuple`` (or ``typing.NamedTuple``) made: a direct tuple
    subclass whose fields are item getters in order and whose ``__new__`` is the
    generated one, ``tuple.__new__(cls, (field, ...))``. Subclasses of one (with methods
    of their own) are not."""
    if not (isinstance(cls, type) and type(cls) is type and cls.__bases__ == (tuple,)):
        return False
    fields = vars(cls).get("_fields")
    new = getattr(vars(cls).get("__new__"), "__func__", None)  # a staticmethod in the dict
    if type(fields) is not tuple or not isinstance(new, types.FunctionType):
        return False
    if new.__globals__.get("_tuple_new") is not tuple.__new__:
        return False
    for i, name in enumerate(fields):
        getter = vars(cls).get(name)
        if type(getter) is not _TUPLEGETTER or getter.__reduce__()[1][0] != i:
            return False
    return True


class NamedTupleVariable(TupleVariable):
    """A ``namedtuple`` (``is_namedtuple_class``): a tuple whose fields are also read by
    name. Made again as ``tuple.__new__(cls, items)``, which is what its ``__new__`` does.
    Its slices and sums are plain tuples, as in Python."""

    #: the namedtuple class (``is_namedtuple_class``), whose ``_fields`` are read
    container_type: Type[Any]

    def __init__(self, items: List[VariableTracker], cls: type, source=None):
        super().__init__(items, source)
        self.container_type = cls

    @classmethod
    def create(cls, tx, klass: Type[Any], args, kwargs) -> NamedTupleVariable:
        """``klass(*args, **kwargs)``, bound as its ``__new__`` binds them."""
        signature = inspect.signature(klass.__new__)
        try:
            bound = signature.bind(klass, *args, **kwargs)
        except TypeError as e:
            raise Unsupported(
                f"{klass.__qualname__}(...) raises TypeError: {e}", category=RAISES
            ) from e
        items = []
        for name in klass._fields:
            if name in bound.arguments:
                items.append(bound.arguments[name])
                continue
            default = signature.parameters[name].default
            if not isinstance(default, (int, float, str, bool, type(None))):
                raise Unsupported(
                    f"the default of {klass.__qualname__}.{name}, a {type(default).__name__}",
                    category=DYNAMIC_VALUE,
                )
            items.append(ConstantVariable(default))
        return cls(items, klass)

    def describe(self) -> str:
        return f"{self.container_type.__qualname__} (a namedtuple)"

    def python_value(self, items: List[Any]) -> Any:
        return tuple.__new__(self.container_type, items)

    def with_items(self, items: List[VariableTracker]) -> BaseListVariable:
        return TupleVariable(items)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        fields = self.container_type._fields
        if name in fields:
            return self.items[fields.index(name)]
        if name == "_fields":
            return ConstantVariable(fields)
        if name in vars(tuple):
            return super().var_getattr(tx, name)
        raise Unsupported(f"{self.describe()}.{name}", category=UNTRACED_CALL)

    def _build(self, cg) -> None:
        cg.extend(compat.load_callable_const(tuple.__new__))
        cg.extend(compat.load_const(self.container_type))
        for item in self.items:
            cg(item)
        cg.extend(compat.build_tuple(len(self.items)))
        cg.extend(compat.call(2))


class ListVariable(BaseListVariable):
    container_type = list

    def __init__(self, items: List[VariableTracker], source=None):
        #: a list from outside not read yet: how to wrap (and guard) its items when the
        #: captured code first reads them; until then only appends are known
        self._unread: Optional[Callable[[], List[VariableTracker]]] = None
        self._appended: List[VariableTracker] = []
        #: for a list from outside whose length changed between captures
        #: (``ShapePolicy.list_is_input``): the whole list, with what the capture appended,
        #: as one graph value (``OutputGraph.tensor_list``), or None where it cannot be
        self.as_input: Optional[Callable[[], Optional[TensorListVariable]]] = None
        super().__init__(items, source)

    @property
    def unread(self) -> bool:
        """Whether the items of this list from outside have not been read (nor guarded)."""
        return self._unread is not None

    @property
    def appended(self) -> List[VariableTracker]:
        """What the capture appended to a list from outside whose items it has not read."""
        return self._appended

    @classmethod
    def outside(cls, source, read_items: Callable[[], List[VariableTracker]]) -> ListVariable:
        """A list from outside the frame whose items (and length, which its guard pins)
        are read only when the captured code first needs them: code that only appends to
        it (a log, the outputs of a loop) serves a list of any length."""
        v = cls([], source)
        v._unread = read_items
        return v

    @property
    def items(self) -> List[VariableTracker]:
        if self._unread is not None:
            read, self._unread = self._unread, None
            self._items = read() + self._appended
            self._appended = []
        return self._items

    @items.setter
    def items(self, value: List[VariableTracker]) -> None:
        self._items = value

    def describe(self) -> str:
        if self._unread is not None:
            return "list from outside (its items not read)"
        return super().describe()

    def reconstruct(self, cg) -> None:
        cg.container(self, lambda: self._build(cg))

    def build_new(self, cg) -> None:
        if self._unread is not None:  # only appended to: what was appended
            for item in self._appended:
                cg(item)
            cg.extend(compat.build_list(len(self._appended)))
        else:
            super().build_new(cg)

    def written_back_by(self) -> Callable[[list, list], None]:
        """The function that gives the outside list what ``build_new`` built."""
        return extend_list if self._unread is not None else replace_list

    def _mutable(self, what: str, tx=None) -> None:
        mutate_outside(tx, self, what, "a list")
        note_mutation(tx, self, what)

    def call_method(self, tx, name: str, args, kwargs):
        if name == "append" and len(args) == 1 and not kwargs:
            self._mutable("list.append", tx)
            if self._unread is not None:
                self._appended.append(args[0])
            else:
                self.items.append(args[0])
            return _const(None)
        if name == "extend" and len(args) == 1 and not kwargs:
            self._mutable("list.extend", tx)
            new = args[0].unpack_var_sequence(tx)
            if self._unread is not None:
                self._appended.extend(new)
            else:
                self.items.extend(new)
            return _const(None)
        if name == "insert" and len(args) == 2 and not kwargs:
            self._mutable("list.insert", tx)
            self.items.insert(_int_index(args[0], "list.insert"), args[1])
            return _const(None)
        if name == "pop" and len(args) <= 1 and not kwargs:
            self._mutable("list.pop", tx)
            idx = _int_index(args[0], "list.pop") if args else -1
            if not -len(self.items) <= idx < len(self.items):
                raise Unsupported(
                    "list.pop of an empty list or out of range raises IndexError", category=RAISES
                )
            return self.items.pop(idx)
        if name == "remove" and len(args) == 1 and not kwargs:
            self._mutable("list.remove", tx)
            del self.items[_find(tx, self.items, args[0], "list.remove")]
            return _const(None)
        if name == "sort" and not args and set(kwargs) <= {"key", "reverse"}:
            self._mutable("list.sort", tx)
            self.items[:] = sort_items(
                tx, self.items, kwargs.get("key"), kwargs.get("reverse", _const(False))
            )
            return _const(None)
        if name == "reverse" and not args and not kwargs:
            self._mutable("list.reverse", tx)
            self.items.reverse()
            return _const(None)
        if name == "clear" and not args and not kwargs:
            self._mutable("list.clear", tx)
            self.items.clear()
            return _const(None)
        if name == "copy" and not args and not kwargs:
            return ListVariable(self.items)
        if name == "__setitem__" and len(args) == 2:
            self.setitem(tx, args[0], args[1])
            return _const(None)
        if name == "__delitem__" and len(args) == 1:
            self.delitem(tx, args[0])
            return _const(None)
        return super().call_method(tx, name, args, kwargs)

    def setitem(self, tx, index: VariableTracker, value: VariableTracker) -> None:
        self._mutable("list item assignment", tx)
        if not index.is_python_constant():
            raise Unsupported(
                f"list item assignment with index {index.describe()}", category=DYNAMIC_VALUE
            )
        key = index.as_python_constant()
        try:
            if isinstance(key, slice):
                self.items[key] = value.unpack_var_sequence(tx)
            else:
                self.items[key] = value
        except (IndexError, TypeError, ValueError) as e:
            raise Unsupported(
                f"list item assignment raises {type(e).__name__}: {e}", category=RAISES
            ) from e

    def delitem(self, tx, index: VariableTracker) -> None:
        self._mutable("del list[...]", tx)
        if not index.is_python_constant():
            raise Unsupported(
                f"del list[...] with index {index.describe()}", category=DYNAMIC_VALUE
            )
        try:
            del self.items[index.as_python_constant()]
        except (IndexError, TypeError, ValueError) as e:
            raise Unsupported(
                f"del list[...] raises {type(e).__name__}: {e}", category=RAISES
            ) from e


def _int_index(v: VariableTracker, what: str) -> int:
    value = v.as_python_constant() if v.is_python_constant() else None
    if type(value) not in (int, bool):
        raise Unsupported(
            f"{what} with index {v.describe()} that is not an int", category=DYNAMIC_VALUE
        )
    return int(cast(int, value))


class DictVariable(VariableTracker):
    """A dict with constant keys (what models use for configs and named outputs)."""

    def __init__(self, items: Dict[Any, VariableTracker], source=None, dict_type: type = dict):
        super().__init__(source)
        self.items = dict(items)
        self.birth = next(_BIRTHS)
        #: dict, or OrderedDict (what Paddle keeps sublayers in)
        self.dict_type = dict_type

    def python_type(self) -> type:
        return self.dict_type

    def reconstruct(self, cg) -> None:
        cg.container(self, lambda: self._build(cg))

    def build_new(self, cg) -> None:
        """A new dict with the tracked items (see ``BaseListVariable.build_new``)."""
        self._build(cg)

    def written_back_by(self) -> Callable[[dict, dict], None]:
        """The function that gives the outside dict what ``build_new`` built."""
        return replace_dict

    def _build(self, cg) -> None:
        if self.dict_type is not dict:
            cg.extend(compat.load_callable_const(self.dict_type))
        for k, item in self.items.items():
            cg.extend(compat.load_const(k))
            cg(item)
        cg.extend(compat.build_map(len(self.items)))
        if self.dict_type is not dict:
            cg.extend(compat.call(1))

    def describe(self) -> str:
        return f"dict of {len(self.items)}"

    def is_python_constant(self) -> bool:
        return all(v.is_python_constant() for v in self.items.values())

    def as_python_constant(self) -> Any:
        return self.dict_type((k, v.as_python_constant()) for k, v in self.items.items())

    def truthy(self, tx) -> bool:
        return bool(self.items)

    def unpack_var_sequence(self, tx) -> List[VariableTracker]:
        return [_const(k) for k in self.items]

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if hasattr(dict, name):  # what OrderedDict adds (move_to_end...) is not modelled
            from .functions import BoundMethodVariable

            return BoundMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def _key(self, key: VariableTracker) -> Any:
        if not key.is_python_constant():
            raise Unsupported(
                f"dict key {key.describe()} is not a constant", category=DYNAMIC_VALUE
            )
        k = key.as_python_constant()
        try:
            hash(k)
        except TypeError as e:
            raise Unsupported(f"unhashable dict key {k!r}", category=RAISES) from e
        return k

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        k = self._key(key)
        if k not in self.items:
            raise Unsupported(f"dict[{k!r}] raises KeyError", category=RAISES)
        return self.items[k]

    def _mutable(self, tx, what: str) -> None:
        mutate_outside(tx, self, what, "a dict")
        note_mutation(tx, self, what)

    def setitem(self, tx, key: VariableTracker, value: VariableTracker) -> None:
        k = self._key(key)
        self._mutable(tx, "dict item assignment")
        self.items[k] = value

    def delitem(self, tx, key: VariableTracker) -> None:
        k = self._key(key)
        if k not in self.items:
            raise Unsupported(f"del dict[{k!r}] raises KeyError", category=RAISES)
        self._mutable(tx, "del dict[...]")
        del self.items[k]

    def _pairs(self, tx, other: VariableTracker) -> List[tuple]:
        """The (key, value) pairs ``dict.update(other)`` adds, in order."""
        if isinstance(other, DictVariable):
            return list(other.items.items())
        out = []
        for pair in other.unpack_var_sequence(tx):
            kv = pair.unpack_var_sequence(tx)
            if len(kv) != 2:
                raise Unsupported(
                    "dict.update with an item that is not a pair (ValueError)", category=RAISES
                )
            out.append((self._key(kv[0]), kv[1]))
        return out

    def call_method(self, tx, name: str, args, kwargs):
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "get" and 1 <= len(args) <= 2 and not kwargs:
            k = self._key(args[0])
            if k in self.items:
                return self.items[k]
            return args[1] if len(args) == 2 else _const(None)
        if name == "keys" and not args:
            return ListIteratorVariable([_const(k) for k in self.items])
        if name == "values" and not args:
            return ListIteratorVariable(list(self.items.values()))
        if name == "items" and not args:
            return ListIteratorVariable(
                [TupleVariable([_const(k), v]) for k, v in self.items.items()]
            )
        if name == "__contains__" and len(args) == 1:
            return _const(self._key(args[0]) in self.items)
        if name == "__len__":
            return _const(len(self.items))
        if name == "copy" and not args and not kwargs:
            return DictVariable(self.items, dict_type=self.dict_type)
        if name == "__setitem__" and len(args) == 2:
            self.setitem(tx, args[0], args[1])
            return _const(None)
        if name == "__delitem__" and len(args) == 1:
            self.delitem(tx, args[0])
            return _const(None)
        if name == "update" and len(args) <= 1:
            self._mutable(tx, "dict.update")
            pairs = self._pairs(tx, args[0]) if args else []
            for k, v in pairs + list(kwargs.items()):
                self.items[k] = v
            return _const(None)
        if kwargs:
            raise Unsupported(f"dict.{name} with keyword arguments", category=UNTRACED_CALL)
        if name == "pop" and 1 <= len(args) <= 2:
            self._mutable(tx, "dict.pop")
            k = self._key(args[0])
            if k in self.items:
                return self.items.pop(k)
            if len(args) == 2:
                return args[1]
            raise Unsupported(f"dict.pop({k!r}) raises KeyError", category=RAISES)
        if name == "setdefault" and 1 <= len(args) <= 2:
            self._mutable(tx, "dict.setdefault")
            k = self._key(args[0])
            if k not in self.items:
                self.items[k] = args[1] if len(args) == 2 else _const(None)
            return self.items[k]
        if name == "popitem" and not args:
            self._mutable(tx, "dict.popitem")
            if not self.items:
                raise Unsupported("dict.popitem of an empty dict raises KeyError", category=RAISES)
            k, v = self.items.popitem()  # the last one, as dict and OrderedDict pop
            return TupleVariable([_const(k), v])
        if name == "clear" and not args:
            self._mutable(tx, "dict.clear")
            self.items.clear()
            return _const(None)
        raise Unsupported(f"method {name!r} of {self.describe()}", category=UNTRACED_CALL)


class SetVariable(VariableTracker):
    """A set made during the capture. Its items are Python constants (a set of tensors
    would hash them by identity, which capture cannot follow), kept in a real ``set`` built
    in the same insertion order as the eager run's, so iteration order matches."""

    _SAME_TYPE_RESULTS = {"union", "intersection", "difference", "symmetric_difference", "copy"}
    _CONSTANT_RESULTS = {"issubset", "issuperset", "isdisjoint", "__len__", "__contains__"}

    def __init__(self, items=()):
        super().__init__(None)
        self.birth = next(_BIRTHS)
        self.value: set = set()
        for item in items:
            self.add(item)

    def reconstruct(self, cg) -> None:
        def build():
            for item in self.value:
                cg.extend(compat.load_const(item))
            cg.extend(compat.build_set(len(self.value)))

        cg.new_object(self, build)

    @staticmethod
    def _constant(item: VariableTracker) -> Any:
        if not item.is_python_constant():
            raise Unsupported(
                f"a set holding {item.describe()}: only Python constants", category=DYNAMIC_VALUE
            )
        value = item.as_python_constant()
        try:
            hash(value)
        except TypeError:
            raise Unsupported(
                f"unhashable {type(value).__name__} in a set (TypeError)", category=RAISES
            ) from None
        return value

    def add(self, item: VariableTracker) -> None:
        self.value.add(self._constant(item))

    def python_type(self) -> type:
        return set

    def describe(self) -> str:
        return f"set of {len(self.value)}"

    def truthy(self, tx) -> bool:
        return bool(self.value)

    def unpack_var_sequence(self, tx) -> List[VariableTracker]:
        return [ConstantVariable(v) for v in self.value]

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if hasattr(set, name):
            from .functions import BoundMethodVariable

            return BoundMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def _operand(self, tx, other: VariableTracker) -> Any:
        if isinstance(other, SetVariable):
            return other.value
        if other.is_python_constant():
            return other.as_python_constant()
        return [self._constant(i) for i in other.unpack_var_sequence(tx)]

    def call_method(self, tx, name: str, args, kwargs):
        if kwargs:
            raise Unsupported(f"set.{name} with keyword arguments", category=UNTRACED_CALL)
        if name in ("add", "discard", "remove", "update", "clear"):
            note_mutation(tx, self, f"set.{name}")
        if name in ("add", "discard", "remove") and len(args) == 1:
            value = self._constant(args[0])
            if name == "remove" and value not in self.value:
                raise Unsupported("set.remove of a missing item raises KeyError", category=RAISES)
            getattr(self.value, name)(value)
            return _const(None)
        if name == "update":
            for other in args:
                self.value.update(self._operand(tx, other))
            return _const(None)
        if name == "clear" and not args:
            self.value.clear()
            return _const(None)
        operands = [self._operand(tx, a) for a in args]
        if name in self._SAME_TYPE_RESULTS:
            return SetVariable(ConstantVariable(v) for v in getattr(self.value, name)(*operands))
        if name in self._CONSTANT_RESULTS:
            if name == "__contains__":
                operands = [self._constant(args[0])]
            return _const(getattr(self.value, name)(*operands))
        raise Unsupported(f"set.{name} is not captured yet", category=UNTRACED_CALL)


class SliceVariable(VariableTracker):
    def __init__(self, start: VariableTracker, stop: VariableTracker, step: VariableTracker):
        super().__init__(None)
        self.parts = (start, stop, step)

    def python_type(self) -> type:
        return slice

    def is_python_constant(self) -> bool:
        return all(p.is_python_constant() for p in self.parts)

    def as_python_constant(self) -> Any:
        return slice(*(p.as_python_constant() for p in self.parts))

    def describe(self) -> str:
        return "slice"


class ListIteratorVariable(VariableTracker):
    """An iterator over a fixed list of trackers: how every loop is unrolled."""

    def __init__(self, items: List[VariableTracker]):
        super().__init__(None)
        self.items = list(items)
        self.index = 0

    def python_type(self) -> type:
        return type(iter([]))

    def describe(self) -> str:
        return "iterator"

    def reconstruct(self, cg) -> None:
        # a loop's iterator: the items it has not given yet, as a real iterator
        cg.extend(compat.load_callable_const(iter))
        TupleVariable(self.items[self.index :]).reconstruct(cg)
        cg.extend(compat.call(1))

    def next_item(self, tx) -> Optional[VariableTracker]:
        """The next item, or None when the iterator is exhausted."""
        if self.index >= len(self.items):
            return None
        item = self.items[self.index]
        self.index += 1
        return item

    def unpack_var_sequence(self, tx) -> List[VariableTracker]:
        rest = self.items[self.index :]
        self.index = len(self.items)
        return rest

    def truthy(self, tx) -> bool:
        return True
