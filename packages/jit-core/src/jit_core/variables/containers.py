"""Tuples, lists, dicts, slices and iterators whose items are trackers."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..errors import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable


def _const(v: Any) -> ConstantVariable:
    return ConstantVariable(v)


class BaseListVariable(VariableTracker):
    container_type: type = list

    def __init__(self, items: List[VariableTracker], source=None):
        super().__init__(source)
        self.items = list(items)

    def python_type(self) -> type:
        return self.container_type

    def describe(self) -> str:
        return f"{self.container_type.__name__} of {len(self.items)}"

    def is_python_constant(self) -> bool:
        return all(i.is_python_constant() for i in self.items)

    def as_python_constant(self) -> Any:
        return self.container_type(i.as_python_constant() for i in self.items)

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
            raise Unsupported(f"indexing {self.describe()} with {index.describe()}")
        key = index.as_python_constant()
        if isinstance(key, slice):
            return type(self)(self.items[key])
        try:
            return self.items[key]
        except (IndexError, TypeError) as e:
            raise Unsupported(f"{self.describe()}[{key!r}] raises {type(e).__name__}") from e

    def call_method(self, tx, name: str, args, kwargs):
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__len__":
            return _const(len(self.items))
        if name == "index" and len(args) == 1 and args[0].is_python_constant():
            want = args[0].as_python_constant()
            for i, item in enumerate(self.items):
                if item.is_python_constant() and item.as_python_constant() == want:
                    return _const(i)
            raise Unsupported(f"{self.describe()}.index({want!r}) raises ValueError")
        if name == "count" and len(args) == 1 and args[0].is_python_constant():
            want = args[0].as_python_constant()
            return _const(
                sum(
                    1
                    for i in self.items
                    if i.is_python_constant() and i.as_python_constant() == want
                )
            )
        raise Unsupported(f"method {name!r} of {self.describe()}")


class TupleVariable(BaseListVariable):
    container_type = tuple


class ListVariable(BaseListVariable):
    container_type = list

    def _mutable(self, what: str) -> None:
        if self.source is not None:
            raise Unsupported(
                f"{what} mutates a list that exists outside the captured code "
                "(a side effect: it runs in Python between two graphs)"
            )

    def call_method(self, tx, name: str, args, kwargs):
        if name == "append" and len(args) == 1 and not kwargs:
            self._mutable("list.append")
            self.items.append(args[0])
            return _const(None)
        if name == "extend" and len(args) == 1 and not kwargs:
            self._mutable("list.extend")
            self.items.extend(args[0].unpack_var_sequence(tx))
            return _const(None)
        if name == "insert" and len(args) == 2 and args[0].is_python_constant():
            self._mutable("list.insert")
            self.items.insert(args[0].as_python_constant(), args[1])
            return _const(None)
        if name == "pop" and len(args) <= 1 and not kwargs:
            self._mutable("list.pop")
            idx = args[0].as_python_constant() if args else -1
            if not self.items:
                raise Unsupported("pop from an empty list raises IndexError")
            return self.items.pop(idx)
        if name == "reverse" and not args:
            self._mutable("list.reverse")
            self.items.reverse()
            return _const(None)
        if name == "clear" and not args:
            self._mutable("list.clear")
            self.items.clear()
            return _const(None)
        if name == "copy" and not args:
            return ListVariable(self.items)
        if name == "__setitem__" and len(args) == 2:
            self.setitem(tx, args[0], args[1])
            return _const(None)
        return super().call_method(tx, name, args, kwargs)

    def setitem(self, tx, index: VariableTracker, value: VariableTracker) -> None:
        self._mutable("list item assignment")
        key = index.as_python_constant()
        if isinstance(key, slice):
            self.items[key] = value.unpack_var_sequence(tx)
        else:
            self.items[key] = value

    def delitem(self, tx, index: VariableTracker) -> None:
        self._mutable("del list[...]")
        del self.items[index.as_python_constant()]


class DictVariable(VariableTracker):
    """A dict with constant keys (what models use for configs and named outputs)."""

    def __init__(self, items: Dict[Any, VariableTracker], source=None, dict_type: type = dict):
        super().__init__(source)
        self.items = dict(items)
        #: dict, or OrderedDict (what Paddle keeps sublayers in)
        self.dict_type = dict_type

    def python_type(self) -> type:
        return self.dict_type

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
            raise Unsupported(f"dict key {key.describe()} is not a constant")
        k = key.as_python_constant()
        try:
            hash(k)
        except TypeError as e:
            raise Unsupported(f"unhashable dict key {k!r}") from e
        return k

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        k = self._key(key)
        if k not in self.items:
            raise Unsupported(f"dict[{k!r}] raises KeyError")
        return self.items[k]

    def setitem(self, tx, key: VariableTracker, value: VariableTracker) -> None:
        if self.source is not None:
            raise Unsupported(
                "storing into a dict that exists outside the captured code "
                "(a side effect: it runs in Python between two graphs)"
            )
        self.items[self._key(key)] = value

    def delitem(self, tx, key: VariableTracker) -> None:
        if self.source is not None:
            raise Unsupported("deleting from a dict that exists outside the captured code")
        k = self._key(key)
        if k not in self.items:
            raise Unsupported(f"del dict[{k!r}] raises KeyError")
        del self.items[k]

    def call_method(self, tx, name: str, args, kwargs):
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "get" and 1 <= len(args) <= 2:
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
        if name == "copy" and not args:
            return DictVariable(self.items)
        if name in ("__setitem__", "update", "pop", "setdefault", "clear", "popitem"):
            if name == "__setitem__" and len(args) == 2:
                self.setitem(tx, args[0], args[1])
                return _const(None)
            if self.source is not None:
                raise Unsupported(f"dict.{name} on a dict that exists outside the captured code")
            if name == "update" and len(args) == 1 and isinstance(args[0], DictVariable):
                self.items.update(args[0].items)
                return _const(None)
            if name == "update" and not args:
                for k, v in kwargs.items():
                    self.items[k] = v
                return _const(None)
            if name == "pop" and 1 <= len(args) <= 2:
                k = self._key(args[0])
                if k in self.items:
                    return self.items.pop(k)
                if len(args) == 2:
                    return args[1]
                raise Unsupported(f"dict.pop({k!r}) raises KeyError")
            if name == "setdefault" and 1 <= len(args) <= 2:
                k = self._key(args[0])
                if k not in self.items:
                    self.items[k] = args[1] if len(args) == 2 else _const(None)
                return self.items[k]
        raise Unsupported(f"method {name!r} of {self.describe()}")


class SetVariable(VariableTracker):
    """A set made during the capture. Its items are Python constants (a set of tensors
    would hash them by identity, which capture cannot follow), kept in a real ``set`` built
    in the same insertion order as the eager run's, so iteration order matches."""

    _SAME_TYPE_RESULTS = {"union", "intersection", "difference", "symmetric_difference", "copy"}
    _CONSTANT_RESULTS = {"issubset", "issuperset", "isdisjoint", "__len__", "__contains__"}

    def __init__(self, items=()):
        super().__init__(None)
        self.value: set = set()
        for item in items:
            self.add(item)

    @staticmethod
    def _constant(item: VariableTracker) -> Any:
        if not item.is_python_constant():
            raise Unsupported(f"a set holding {item.describe()}: only Python constants")
        value = item.as_python_constant()
        try:
            hash(value)
        except TypeError:
            raise Unsupported(f"unhashable {type(value).__name__} in a set (TypeError)") from None
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
            raise Unsupported(f"set.{name} with keyword arguments")
        if name in ("add", "discard", "remove") and len(args) == 1:
            value = self._constant(args[0])
            if name == "remove" and value not in self.value:
                raise Unsupported("set.remove of a missing item raises KeyError")
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
        raise Unsupported(f"set.{name} is not captured yet")


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
