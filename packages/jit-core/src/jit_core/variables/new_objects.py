"""Instances of plain Python classes made during the capture: the output and config
objects of library code (PaddleNLP's ``ModelOutput``, a dataclass that subclasses
``OrderedDict``; a ``namedtuple``-like record).

The capture runs the class's ``__init__`` (and ``__post_init__``) on a tracker that holds
the instance's attributes and, for a dict subclass, its items; the object is made for
real only where the generated code needs it (returned, handed to Python at a break),
from what the tracker holds at that point: ``rebuild_object`` makes the instance without
running ``__init__`` again and gives it those attributes and items. Nothing outside the
capture can see the object before then, so no code can observe the difference.

Only classes whose every base is a Python class, ``object``, ``dict`` or ``OrderedDict``
qualify (no ``__slots__``, no C-level state, no metaclass, no custom ``__new__``);
anything else breaks as before.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Type, cast

import paddle

from ..bytecode import compat
from ..errors import DYNAMIC_VALUE, RAISES, UNTRACED_CALL, Unsupported
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import ListVariable, TupleVariable

_PLAIN_BASES = (object, dict, OrderedDict)
_DEFAULT_GETATTRIBUTE = tuple(
    {id(k.__getattribute__): k.__getattribute__ for k in _PLAIN_BASES}.values()
)
_SIMPLE = (int, float, str, bool, type(None))


def can_make(cls: type) -> bool:
    """Whether an instance of ``cls`` can be made on a tracker (see the module's doc)."""
    if type(cls) is not type or not isinstance(cls, type):
        return False
    if issubclass(cls, (paddle.nn.Layer, paddle.Tensor, BaseException)):
        return False
    if cls.__new__ not in (object.__new__, dict.__new__, OrderedDict.__new__):
        return False
    # attribute reads go the default way (a __getattribute__ of its own would be skipped)
    if inspect.getattr_static(cls, "__getattribute__") not in _DEFAULT_GETATTRIBUTE:
        return False
    for klass in cls.__mro__:
        if klass in _PLAIN_BASES:
            continue
        if klass.__module__ == "builtins" or "__slots__" in vars(klass):
            return False
        for name, attr in vars(klass).items():
            if name in ("__dict__", "__weakref__"):
                continue
            if isinstance(attr, (types.MemberDescriptorType, types.GetSetDescriptorType)):
                return False
    init = inspect.getattr_static(cls, "__init__")
    return inspect.isfunction(init) or init in (object.__init__, dict.__init__)


def _dict_base(cls: type) -> Optional[type]:
    for klass in cls.__mro__:
        if klass in (OrderedDict, dict):
            return klass
    return None


def rebuild_object(cls: type, attrs: Dict[str, Any], items: Optional[Dict[Any, Any]]) -> Any:
    """The instance the captured code made: ``cls`` without its ``__init__`` (it ran in
    the capture), with the attributes and items it left."""
    obj = cast(Any, cls).__new__(cls)  # (the class's own __new__, not type.__new__)
    if items is not None:
        # (only a dict subclass keeps items: see NewObjectVariable)
        setitem = cast("Type[dict]", _dict_base(cls)).__setitem__
        for k, v in items.items():
            setitem(obj, k, v)
    obj.__dict__.update(attrs)
    return obj


class NewObjectVariable(VariableTracker):
    """An instance of ``cls`` made in the capture: its attributes and (dict subclasses)
    items as trackers."""

    def __init__(self, cls: type):
        super().__init__(None)
        self.cls = cls
        self.attrs: Dict[str, VariableTracker] = {}
        self.items: Optional[Dict[Any, VariableTracker]] = (
            {} if _dict_base(cls) is not None else None
        )

    @classmethod
    def create(cls, tx, klass: type, args, kwargs) -> NewObjectVariable:
        obj = cls(klass)
        init = inspect.getattr_static(klass, "__init__")
        if inspect.isfunction(init):
            tx.inline_function(init, [obj, *args], kwargs, fn_source=None)
        elif args or kwargs:
            raise Unsupported(
                f"{klass.__qualname__}(...) with arguments and no __init__ of its own",
                category=UNTRACED_CALL,
            )
        return obj

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"new object of type {self.cls.__qualname__}"

    # -- reading
    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .builder import wrap
        from .functions import UserMethodVariable

        attr = inspect.getattr_static(self.cls, name, _MISSING)
        if isinstance(attr, property):
            # a data descriptor comes before the instance's own attributes
            if not inspect.isfunction(attr.fget):
                raise Unsupported(f"property {name!r} of {self.describe()}", category=RAISES)
            return tx.inline_function(attr.fget, [self], {}, fn_source=None)
        if hasattr(attr, "__set__"):
            raise Unsupported(
                f"descriptor {name!r} of {self.describe()} ({type(attr).__name__})",
                category=DYNAMIC_VALUE,
            )
        if name in self.attrs:
            return self.attrs[name]
        if name == "__class__":
            return wrap(tx, self.cls, None)
        if inspect.isfunction(attr):
            return UserMethodVariable(attr, self)
        if isinstance(attr, staticmethod):
            return wrap(tx, attr.__func__, None)
        if self.items is not None and _is_dict_method(attr):
            return DictMethodVariable(self, name)
        if attr is not _MISSING and type(attr) in _SIMPLE:
            return ConstantVariable(attr)  # a class-level default (dataclass fields)
        if attr is _MISSING:
            getattr_fn = inspect.getattr_static(self.cls, "__getattr__", None)
            if inspect.isfunction(getattr_fn):
                return tx.inline_function(
                    getattr_fn, [self, ConstantVariable(name)], {}, fn_source=None
                )
            raise Unsupported(
                f"{self.describe()} has no attribute {name!r} (AttributeError)", category=RAISES
            )
        raise Unsupported(
            f"attribute {name!r} of {self.describe()} ({type(attr).__name__})",
            category=DYNAMIC_VALUE,
        )

    def has_attribute(self, name: str) -> Optional[bool]:
        """``hasattr`` where the answer is known without running code, else None."""
        if name in self.attrs:
            return True
        if inspect.getattr_static(self.cls, "__getattr__", None) is not None:
            return None
        return inspect.getattr_static(self.cls, name, _MISSING) is not _MISSING

    def truthy(self, tx) -> bool:
        for hook in ("__bool__", "__len__"):
            fn = inspect.getattr_static(self.cls, hook, None)
            if inspect.isfunction(fn):
                raise Unsupported(
                    f"truth value of {self.describe()} (it defines {hook})",
                    category=DYNAMIC_VALUE,
                )
        return bool(self.items) if self.items is not None else True

    # -- writing
    def store_attr(self, tx, name: str, value: VariableTracker) -> bool:
        setattr_fn = inspect.getattr_static(self.cls, "__setattr__")
        if setattr_fn is object.__setattr__:
            self.set_attribute(tx, name, value)
            return True
        if inspect.isfunction(setattr_fn):
            tx.inline_function(setattr_fn, [self, ConstantVariable(name), value], {}, None)
            return True
        return False

    def set_attribute(self, tx, name: str, value: VariableTracker) -> None:
        """What ``object.__setattr__`` does: a property's setter, else the instance's own
        attribute."""
        attr = inspect.getattr_static(self.cls, name, _MISSING)
        if isinstance(attr, property):
            if not inspect.isfunction(attr.fset):
                raise Unsupported(f"property {name!r} of {self.describe()}", category=RAISES)
            tx.inline_function(attr.fset, [self, value], {}, fn_source=None)
        elif hasattr(attr, "__set__"):
            raise Unsupported(
                f"storing through descriptor {name!r} of {self.describe()}",
                category=DYNAMIC_VALUE,
            )
        else:
            self.attrs[name] = value

    def base_method(self, name: str, attr: Any) -> Optional[VariableTracker]:
        """``super().<name>`` that resolved to ``object``'s or the dict base's ``attr``."""
        if name == "__setattr__" and attr is object.__setattr__:
            return _ObjectSetattr(self)
        if name == "__init__" and attr in (object.__init__, dict.__init__, OrderedDict.__init__):
            return BaseInit(self)
        if self.items is not None and _is_dict_method(attr):
            return DictMethodVariable(self, name)
        return None

    # -- the dict of a dict subclass
    def unpack_var_sequence(self, tx) -> List[VariableTracker]:
        if self.items is None or inspect.isfunction(
            inspect.getattr_static(self.cls, "__iter__", None)
        ):
            return super().unpack_var_sequence(tx)
        return [ConstantVariable(k) for k in self.items]

    # -- made for real
    def reconstruct(self, cg) -> None:
        def build() -> None:
            cg.extend(compat.load_callable_const(rebuild_object))
            cg.extend(compat.load_const(self.cls))
            for k, v in self.attrs.items():
                cg.extend(compat.load_const(k))
                cg(v)
            cg.extend(compat.build_map(len(self.attrs)))
            if self.items is None:
                cg.extend(compat.load_const(None))
            else:
                for k, v in self.items.items():
                    cg.extend(compat.load_const(k))
                    cg(v)
                cg.extend(compat.build_map(len(self.items)))
            cg.extend(compat.call(3))

        cg.new_object(self, build)


_MISSING = object()


def _is_dict_method(attr: Any) -> bool:
    return any(
        attr is vars(base).get(getattr(attr, "__name__", "")) for base in (dict, OrderedDict)
    )


class _ObjectSetattr(VariableTracker):
    """``object.__setattr__`` of a new object, reached through ``super()``."""

    def __init__(self, obj: NewObjectVariable):
        super().__init__(None)
        self.obj = obj

    def describe(self) -> str:
        return f"object.__setattr__ of {self.obj.describe()}"

    def call_function(self, tx, args, kwargs):
        if kwargs or len(args) != 2 or not args[0].is_python_constant():
            raise Unsupported(f"{self.describe()} with these arguments", category=RAISES)
        self.obj.set_attribute(tx, args[0].as_python_constant(), args[1])
        return ConstantVariable(None)


class BaseInit(VariableTracker):
    """``super().__init__()`` reaching ``object``'s or the dict base's: with no arguments
    it does nothing (the instance is made empty)."""

    def __init__(self, obj: VariableTracker):
        super().__init__(None)
        self.obj = obj

    def describe(self) -> str:
        return f"the base __init__ of {self.obj.describe()}"

    def call_function(self, tx, args, kwargs):
        if args or kwargs:
            raise Unsupported(f"{self.describe()} with arguments", category=UNTRACED_CALL)
        return ConstantVariable(None)


class DictMethodVariable(VariableTracker):
    """A method of ``dict``/``OrderedDict`` on a new dict-subclass object: its items."""

    def __init__(self, obj: NewObjectVariable, name: str):
        super().__init__(None)
        self.obj = obj
        self.name = name

    def describe(self) -> str:
        return f"dict.{self.name} of {self.obj.describe()}"

    def call_function(self, tx, args, kwargs):
        items = self.obj.items
        name = self.name
        if kwargs or any(not a.is_python_constant() for a in args[:1]):
            raise Unsupported(f"{self.describe()} with these arguments", category=DYNAMIC_VALUE)
        key = args[0].as_python_constant() if args else None
        if name == "__setitem__" and len(args) == 2:
            items[key] = args[1]
            return ConstantVariable(None)
        if name in ("__getitem__", "get") and args:
            if key in items:
                return items[key]
            if name == "get":
                return args[1] if len(args) > 1 else ConstantVariable(None)
            raise Unsupported(f"{self.describe()}[{key!r}] raises KeyError", category=RAISES)
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(key in items)
        if not args:
            if name == "keys" or name == "__iter__":
                return ListVariable([ConstantVariable(k) for k in items])
            if name == "values":
                return ListVariable(list(items.values()))
            if name == "items":
                return ListVariable(
                    [TupleVariable([ConstantVariable(k), v]) for k, v in items.items()]
                )
            if name == "__len__":
                return ConstantVariable(len(items))
        raise Unsupported(f"{self.describe()} is not captured", category=UNTRACED_CALL)


def dataclass_fields(obj: VariableTracker) -> Optional[VariableTracker]:
    """``dataclasses.fields(obj)`` of a new object: its class's fields, constants."""
    if isinstance(obj, NewObjectVariable) and dataclasses.is_dataclass(obj.cls):
        return TupleVariable([ConstantVariable(f) for f in dataclasses.fields(obj.cls)])
    return None


__all__ = ["BaseInit", "NewObjectVariable", "can_make", "dataclass_fields", "rebuild_object"]
