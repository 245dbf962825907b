"""Sources: how a value seen during capture can be fetched again from a frame.

Every variable tracker that came from outside the captured code carries one. A source
gives the expression a guard evaluates (``L`` is the frame's locals dict, ``G`` its
globals) and the bytecode the transformed frame runs to load the value again.
"""

from __future__ import annotations

from typing import Any, FrozenSet, List, Optional

import paddle
from bytecode import Instr

from .bytecode import compat


class Source:
    def name(self) -> str:
        """A Python expression over ``L`` and ``G`` that evaluates to the value."""
        raise NotImplementedError

    def reconstruct(self, code) -> List[Instr]:
        """Bytecode that pushes the value, inside a replacement for ``code``."""
        raise NotImplementedError

    def is_local(self) -> bool:
        """True when the value comes from the frame's own locals (an input)."""
        return False

    def __repr__(self) -> str:
        return self.name()

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.name() == other.name()

    def __hash__(self) -> int:
        return hash(self.name())


class LocalSource(Source):
    def __init__(self, local_name: str):
        self.local_name = local_name

    def name(self) -> str:
        return f"L[{self.local_name!r}]"

    def reconstruct(self, code) -> List[Instr]:
        return [compat.load_local(self.local_name, code)]

    def is_local(self) -> bool:
        return True


class GlobalSource(Source):
    def __init__(self, global_name: str):
        self.global_name = global_name

    def name(self) -> str:
        return f"G[{self.global_name!r}]"

    def reconstruct(self, code) -> List[Instr]:
        return compat.load_global(self.global_name)


class AttrSource(Source):
    def __init__(self, base: Source, attr: str):
        self.base = base
        self.attr = attr

    def name(self) -> str:
        if self.attr.isidentifier():
            return f"{self.base.name()}.{self.attr}"
        return f"getattr({self.base.name()}, {self.attr!r})"

    def reconstruct(self, code) -> List[Instr]:
        return self.base.reconstruct(code) + compat.load_attr(self.attr)

    def is_local(self) -> bool:
        return self.base.is_local()


class ItemSource(Source):
    """``base[key]`` for a constant key (list/tuple index, dict key, Sequential index)."""

    def __init__(self, base: Source, key: Any):
        self.base = base
        self.key = key

    def name(self) -> str:
        return f"{self.base.name()}[{self.key!r}]"

    def reconstruct(self, code) -> List[Instr]:
        return self.base.reconstruct(code) + compat.load_const(self.key) + compat.subscr()

    def is_local(self) -> bool:
        return self.base.is_local()


class ClosureSource(Source):
    """The contents of cell ``index`` of a function's ``__closure__``."""

    def __init__(self, func: Source, index: int):
        self.func = func
        self.index = index

    def name(self) -> str:
        return f"{self.func.name()}.__closure__[{self.index}].cell_contents"

    def reconstruct(self, code) -> List[Instr]:
        return (
            self.func.reconstruct(code)
            + compat.load_attr("__closure__")
            + compat.load_const(self.index)
            + compat.subscr()
            + compat.load_attr("cell_contents")
        )

    def is_local(self) -> bool:
        return self.func.is_local()


class DefaultSource(Source):
    """Positional default ``index`` of a function (``__defaults__``) or a keyword default."""

    def __init__(self, func: Source, key: Any, kwonly: bool = False):
        self.func = func
        self.key = key
        self.kwonly = kwonly

    def name(self) -> str:
        attr = "__kwdefaults__" if self.kwonly else "__defaults__"
        return f"{self.func.name()}.{attr}[{self.key!r}]"

    def reconstruct(self, code) -> List[Instr]:
        attr = "__kwdefaults__" if self.kwonly else "__defaults__"
        return (
            self.func.reconstruct(code)
            + compat.load_attr(attr)
            + compat.load_const(self.key)
            + compat.subscr()
        )

    def is_local(self) -> bool:
        return self.func.is_local()


class ObjectSource(Source):
    """A fixed object the capture holds on to, e.g. the globals dict of an inlined
    function's module. Guards bind it as a constant; the transformed code loads it with
    LOAD_CONST."""

    def __init__(self, obj: Any, label: str):
        self.obj = obj
        self.label = label

    def name(self) -> str:
        return f"<{self.label}>"

    def reconstruct(self, code) -> List[Instr]:
        try:
            hash(self.obj)
        except TypeError:
            # a code object's constants are hashed (a list would make it unhashable):
            # an unhashable object is handed out by a constant that holds it
            return compat.load_callable_const(_Held(self.obj)) + compat.call(0)
        return compat.load_const(self.obj)


class _Held:
    """A constant of generated code that hands out one fixed object when called."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __call__(self) -> Any:
        return self.obj

    def __repr__(self) -> str:
        return f"<the {type(self.obj).__name__} at {id(self.obj):#x}>"


class CallSource(Source):
    """What a query function answers now: ``fn(*args)`` with constant arguments (Paddle's
    ``get_flags``, ``get_device``...). A guard calls it again."""

    def __init__(self, fn: Any, args: tuple = ()):
        self.fn = fn
        self.args = tuple(args)

    def name(self) -> str:
        mod = getattr(self.fn, "__module__", None) or "?"
        fname = getattr(self.fn, "__qualname__", None) or getattr(self.fn, "__name__", "?")
        return f"{mod}.{fname}({', '.join(repr(a) for a in self.args)})"

    def reconstruct(self, code) -> List[Instr]:
        out = compat.load_callable_const(self.fn)
        for a in self.args:
            out += compat.load_const(a)
        return out + compat.call(len(self.args))


class ArrayAsTensorSource(Source):
    """A NumPy array of the frame as the tensor a graph takes it as: ``paddle.to_tensor``
    of it, made on each call (its type, dtype and shape are guarded on the array)."""

    def __init__(self, base: Source):
        self.base = base

    def name(self) -> str:
        return f"paddle.to_tensor({self.base.name()})"

    def reconstruct(self, code) -> List[Instr]:
        return (
            compat.load_callable_const(_array_as_tensor)
            + self.base.reconstruct(code)
            + compat.call(1)
        )


def _array_as_tensor(array: Any) -> Any:
    return paddle.to_tensor(array)


def names_through(source: Optional[Source]) -> FrozenSet[str]:
    """The names of ``source`` and of everything it is read through (``L['self'].fc``
    through ``L['self']``)."""
    names = set()
    while source is not None:
        names.add(source.name())
        source = getattr(source, "base", None)
    return frozenset(names)


def attr_path(source: Source) -> str:
    """A readable identifier for a source, for node and sublayer names: ``self.layer1[0]``
    becomes ``layer1_0``."""
    parts: List[str] = []
    s = source
    while True:
        if isinstance(s, AttrSource):
            parts.append(s.attr)
            s = s.base
        elif isinstance(s, ItemSource):
            parts.append(str(s.key))
            s = s.base
        elif isinstance(s, LocalSource):
            if s.local_name != "self" or not parts:
                parts.append(s.local_name)
            break
        elif isinstance(s, GlobalSource):
            parts.append(s.global_name)
            break
        elif isinstance(s, ObjectSource):
            break
        else:
            parts.append("v")
            break
    raw = "_".join(reversed(parts))
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in raw).strip("_") or "v"
    if out[0].isdigit():
        out = "_" + out
    return out
