"""Modules, classes and other Python objects the captured code reads from."""

from __future__ import annotations

import contextlib
import inspect
import types
from typing import Any

import paddle

from ..errors import DYNAMIC_VALUE, RAISES, SIDE_EFFECT, UNTRACED_CALL, Unsupported
from ..sources import AttrSource
from .base import KnownValueVariable, VariableTracker
from .constant import ConstantVariable
from .exceptions import made_exception, simulated_exception_class
from .training import training_call
from .values import check_numpy_result, constant_arguments, is_numpy_scalar_type, is_place_class


class ModuleVariable(KnownValueVariable):
    def describe(self) -> str:
        return f"module {self.value.__name__}"

    def truthy(self, tx) -> bool:
        return True

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .builder import is_library_module, wrap

        try:
            value = getattr(self.value, name)
        except AttributeError as e:
            raise Unsupported(
                f"module {self.value.__name__} has no attribute {name!r}", category=RAISES
            ) from e
        # Library modules (paddle, math, the standard library) are not monkeypatched between
        # calls in practice; guarding each function read from them would cost every call.
        src = AttrSource(self.source, name) if self.source is not None else None
        if is_library_module(self.value.__name__):
            src = None
        return wrap(tx, value, src)


class UserObjectVariable(VariableTracker):
    """Any other object: attributes are read statically, methods are inlined."""

    def __init__(self, value: Any, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def describe(self) -> str:
        return f"object of type {type(self.value).__qualname__}"

    def truthy(self, tx) -> bool:
        t = type(self.value)
        if getattr(t, "__bool__", None) is None and getattr(t, "__len__", None) is None:
            return True
        raise Unsupported(
            f"truth value of {self.describe()} (it defines __bool__/__len__)",
            category=DYNAMIC_VALUE,
        )

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .builder import wrap
        from .functions import UserMethodVariable

        obj = self.value
        if tx.output.changed_by_effect(obj) and (
            training_call(inspect.getattr_static(type(obj), name, None), obj) is None
        ):
            # (a further training call of the same object is one more effect)
            raise Unsupported(
                f"attribute {name!r} of {self.describe()}, which a training call of the graph "
                "changes (it is read after the graph)",
                category=SIDE_EFFECT,
            )
        if inspect.isfunction(inspect.getattr_static(type(obj), "__getattribute__", None)):
            return self._computed_attribute(tx, name)
        stored = tx.output.side_effects.stored_attribute(obj, name)
        if stored is not None:
            return stored
        src = AttrSource(self.source, name) if self.source is not None else None
        cls_attr = inspect.getattr_static(type(obj), name, None)
        if isinstance(cls_attr, property):
            if cls_attr.fget is None:
                raise Unsupported(f"property {name!r} has no getter", category=RAISES)
            if not isinstance(cls_attr.fget, types.FunctionType):
                # a getter written in C (a pybind11 property) has no bytecode to follow
                raise Unsupported(
                    f"property {name!r} of {self.describe()} is computed in C",
                    category=UNTRACED_CALL,
                )
            return tx.inline_function(cls_attr.fget, [self], {}, fn_source=None)
        d = getattr(obj, "__dict__", None)
        if d is not None and name in d:
            return wrap(tx, d[name], src)
        if cls_attr is not None:
            if inspect.isfunction(cls_attr):
                return UserMethodVariable(cls_attr, self)
            if isinstance(cls_attr, staticmethod):
                return wrap(tx, cls_attr.__func__, None)
            if isinstance(cls_attr, (classmethod, types.MemberDescriptorType)) or hasattr(
                cls_attr, "__get__"
            ):
                raise Unsupported(
                    f"descriptor {name!r} of {self.describe()}", category=DYNAMIC_VALUE
                )
            return wrap(tx, cls_attr, src)
        if hasattr(type(obj), "__getattr__"):
            raise Unsupported(
                f"{self.describe()} computes attribute {name!r} in __getattr__",
                category=DYNAMIC_VALUE,
            )
        raise Unsupported(f"{self.describe()} has no attribute {name!r}", category=RAISES)

    def _computed_attribute(self, tx, name: str) -> VariableTracker:
        """An attribute of an object whose class has a ``__getattribute__`` of its own
        (PaddleNLP's ``PretrainedConfig`` maps aliases): read for real, through it, and
        guarded the same way, so the guard compares what the code saw."""
        from .builder import wrap

        if self.source is None:
            raise Unsupported(
                f"{self.describe()} computes its attributes in __getattribute__",
                category=DYNAMIC_VALUE,
            )
        try:
            value = getattr(self.value, name)
        except Exception as e:  # eager raises it too, at this line
            raise Unsupported(
                f"reading {name!r} of {self.describe()} raises {type(e).__name__}",
                category=RAISES,
            ) from e
        return wrap(tx, value, AttrSource(self.source, name))

    def store_attr(self, tx, name: str, value: VariableTracker) -> bool:
        """``obj.<name> = value`` on a plain Python object from outside the frame (one a
        break handed on, a config): later reads in the capture see ``value``, and the code
        after the graph sets it, where outside containers get their new contents. Only
        where ``object.__setattr__`` does the store and the class has no descriptor of
        that name."""
        obj = self.value
        cls = type(obj)
        if self.source is None or inspect.getattr_static(cls, "__setattr__") is not (
            object.__setattr__
        ):
            return False
        if inspect.isfunction(inspect.getattr_static(cls, "__getattribute__", None)):
            return False  # reads after the store would go through it
        if not hasattr(obj, "__dict__") or hasattr(
            inspect.getattr_static(cls, name, None), "__set__"
        ):
            return False
        tx.output.side_effects.store_attribute(self, obj, name, value)
        return True

    def call_function(self, tx, args, kwargs):
        call = inspect.getattr_static(type(self.value), "__call__", None)
        if inspect.isfunction(call):
            return tx.inline_function(call, [self] + list(args), kwargs, fn_source=None)
        raise Unsupported(f"calling {self.describe()}", category=UNTRACED_CALL)


class ClassVariable(KnownValueVariable):
    """A class: its attributes can be read; creating instances is not captured yet."""

    def describe(self) -> str:
        return f"class {self.value.__qualname__}"

    def truthy(self, tx) -> bool:
        return True

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .builder import wrap

        if name in ("__name__", "__qualname__", "__module__"):
            # on a class they come from type's descriptors: the class's own values
            return ConstantVariable(getattr(self.value, name))
        attr = inspect.getattr_static(self.value, name, None)
        if attr is None:
            raise Unsupported(f"{self.describe()} has no attribute {name!r}", category=RAISES)
        if isinstance(attr, (staticmethod, classmethod)):
            attr = getattr(self.value, name)
        src = AttrSource(self.source, name) if self.source is not None else None
        return wrap(tx, attr, src)

    def call_function(self, tx, args, kwargs):
        from .contexts import GradModeVariable, is_grad_mode_class

        cls = self.value
        if is_grad_mode_class(cls):
            return GradModeVariable.create(tx, cls, args, kwargs)
        if cls is contextlib.nullcontext:
            from .contexts import make_null_context

            return make_null_context(args, kwargs)
        if is_place_class(cls) or is_numpy_scalar_type(cls):
            # value objects: made now, from constants, they are constants of the graph
            consts = constant_arguments(args, kwargs)
            if consts is not None:
                try:
                    value = cls(*consts[0], **consts[1])
                except Exception as e:
                    raise Unsupported(
                        f"{cls.__qualname__}(...) raises {type(e).__name__}: {e}", category=RAISES
                    ) from e
                return ConstantVariable(check_numpy_result(value, cls.__qualname__))
        from .containers import NamedTupleVariable, is_namedtuple_class
        from .new_objects import NewObjectVariable, can_make

        if is_namedtuple_class(cls):
            return NamedTupleVariable.create(tx, cls, args, kwargs)
        if can_make(cls):
            return NewObjectVariable.create(tx, cls, args, kwargs)
        if simulated_exception_class(cls) and tx.output.shape_policy.raise_reason is None:
            # to be raised: the capture takes it to the handler of its try block, as
            # CPython would (Translator._to_handler)
            consts = constant_arguments(args, kwargs)
            if consts is not None and not consts[1]:
                return made_exception(cls, tuple(consts[0]))
        raise Unsupported(
            f"creating an instance of {self.describe()} during capture", category=UNTRACED_CALL
        )


class SuperVariable(VariableTracker):
    """``super(cls, obj)``: attribute lookups start after ``cls`` in the MRO of ``obj``'s
    type. The type is pinned by the guards on ``obj`` (layers by identity), so the lookup
    is done once, at capture."""

    def __init__(self, cls: type, obj: VariableTracker):
        super().__init__(None)
        self.cls = cls
        self.obj = obj

    def describe(self) -> str:
        return f"super({self.cls.__qualname__}, {self.obj.describe()})"

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from .functions import UserMethodVariable

        mro = self.obj.python_type().__mro__
        if self.cls not in mro:
            raise Unsupported(
                f"{self.describe()}: the object is not an instance of the class", category=RAISES
            )
        for klass in mro[mro.index(self.cls) + 1 :]:
            if name in vars(klass):
                attr = vars(klass)[name]
                break
        else:
            raise Unsupported(f"{self.describe()} has no attribute {name!r}", category=RAISES)
        if name == "__setattr__" and attr is paddle.nn.Layer.__setattr__:
            from .layers import LayerSetattr, LayerVariable

            if isinstance(self.obj, LayerVariable):
                return LayerSetattr(self.obj)
        from .new_objects import BaseInit, NewObjectVariable

        if isinstance(self.obj, NewObjectVariable) and not isinstance(attr, types.FunctionType):
            method = self.obj.base_method(name, attr)
            if method is not None:
                return method
        if name == "__init__" and attr is object.__init__:
            # object's __init__ takes no arguments and does nothing
            return BaseInit(self.obj)

        if isinstance(attr, types.FunctionType):
            return UserMethodVariable(attr, self.obj)
        raise Unsupported(
            f"{self.describe()}.{name} is a {type(attr).__name__}, not a method",
            category=DYNAMIC_VALUE,
        )


def constant_or_none(value: Any):
    return ConstantVariable(value)
