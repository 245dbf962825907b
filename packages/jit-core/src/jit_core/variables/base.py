"""The base class of every value the symbolic executor puts on its stack or in its locals."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

from ..bytecode import compat
from ..errors import DYNAMIC_VALUE, RECONSTRUCT, UNTRACED_CALL, Unsupported
from ..sources import Source

if TYPE_CHECKING:  # pragma: no cover
    from ..codegen.pycodegen import PyCodegen
    from ..executor.translator import Translator


class VariableTracker:
    """A value during capture: what kind of thing it is and where it came from.

    ``source`` says how to fetch the value again from the frame (None for values created
    during the capture). Subclasses override the operations they support; the defaults
    refuse with a reason, which makes the frame run eagerly.
    """

    def __init__(self, source: Optional[Source] = None):
        self.source = source

    # -- what it is
    def python_type(self) -> type:
        raise Unsupported(
            f"type of {self.describe()} is not known during capture", category=DYNAMIC_VALUE
        )

    def is_python_constant(self) -> bool:
        return False

    def as_python_constant(self) -> Any:
        raise Unsupported(f"{self.describe()} is not a Python constant", category=DYNAMIC_VALUE)

    def describe(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        src = f" from {self.source.name()}" if self.source else ""
        return f"<{self.describe()}{src}>"

    # -- operations
    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        raise Unsupported(f"attribute {name!r} of {self.describe()}", category=DYNAMIC_VALUE)

    def call_function(
        self, tx: Translator, args: List[VariableTracker], kwargs: Dict[str, VariableTracker]
    ) -> VariableTracker:
        raise Unsupported(f"calling {self.describe()}", category=UNTRACED_CALL)

    def store_attr(self, tx: Translator, name: str, value: VariableTracker) -> bool:
        """Take ``obj.<name> = value`` into the capture, which then goes on past the store:
        True where the store changes nothing (with what makes it so guarded) or where the
        tracker now stands for what it leaves. By default a store is a side effect, and
        False makes the graph break there."""
        return False

    def call_method(
        self,
        tx: Translator,
        name: str,
        args: List[VariableTracker],
        kwargs: Dict[str, VariableTracker],
    ) -> VariableTracker:
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def unpack_var_sequence(self, tx: Translator) -> List[VariableTracker]:
        raise Unsupported(f"iterating over {self.describe()}", category=DYNAMIC_VALUE)

    def next_item(self, tx: Translator) -> Optional[VariableTracker]:
        """The next item of an iterator made during capture, or None when exhausted.

        An iterator that comes from outside (a real ``list_iterator`` in a frame's locals)
        cannot be stepped without consuming it for the eager run, so it is refused."""
        raise Unsupported(
            f"stepping {self.describe()}, an iterator made outside the capture",
            category=DYNAMIC_VALUE,
        )

    def truthy(self, tx: Translator) -> bool:
        """The value's truth, when capture can know it without running tensors."""
        raise Unsupported(f"truth value of {self.describe()}", category=DYNAMIC_VALUE)

    # -- after the graph
    def reconstruct(self, cg: PyCodegen) -> None:
        """Emit into ``cg`` the code that rebuilds this value after the graph ran (the
        frame returns it, or a resume function gets it). By default: loaded again from
        where it came from, or a constant."""
        if self.source is not None:
            cg.extend(self.source.reconstruct(cg.code))
        elif self.is_python_constant():
            cg.extend(compat.load_const(self.as_python_constant()))
        else:
            raise Unsupported(
                f"cannot rebuild {self.describe()} after the graph", category=RECONSTRUCT
            )


class KnownValueVariable(VariableTracker):
    """A Python object known at capture time and used as it is (a constant, a function, a
    module, a class). Its identity or value is what the guards check."""

    def __init__(self, value: Any, source=None):
        super().__init__(source)
        self.value = value

    @property
    def fn(self) -> Any:
        """The same object, under the name the function trackers read best with."""
        return self.value

    def python_type(self) -> type:
        return type(self.value)

    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return self.value


class LazyVariable(VariableTracker):
    """A value of the frame the capture has not looked at yet: an argument of the
    captured frame, wrapped (and guarded) only when the code reads it.

    A value the capture never reads adds no guard: a resume function or a loop body gets
    every local that is still needed, and most of them only pass through (a loop counter
    that is not read must not make each iteration a new graph). At a graph break such a
    value is loaded again from where it came from."""

    source: Source  # (always given: where the unread value is loaded from again)

    def __init__(self, value: Any, source: Source):
        super().__init__(source)
        self.value = value

    def describe(self) -> str:
        return f"unread value of {self.source.name() if self.source else '?'}"

    def realize(self, tx: Translator) -> VariableTracker:
        from .builder import wrap

        return wrap(tx, self.value, self.source)

    def reconstruct(self, cg: PyCodegen) -> None:
        # never read by the capture: the very value, from where it came from
        cg.extend(self.source.reconstruct(cg.code))


class NullVariable(VariableTracker):
    """The NULL that CPython pushes below a callable (LOAD_METHOD, 3.11+ PUSH_NULL)."""

    def describe(self) -> str:
        return "NULL"

    def reconstruct(self, cg: PyCodegen) -> None:
        # generated code cannot push a NULL: see call_first
        cg.extend(compat.load_const(call_first))


def call_first(fn, *args, **kwargs):
    """Stands where CPython expects a NULL below a callable: the code of a resume function
    cannot push a NULL, so it passes ``call_first``, and the method form of the call that
    follows, ``call_first(fn, *args)``, is ``fn(*args)``. A capture reads it as the NULL."""
    return fn(*args, **kwargs)


class CellVariable(VariableTracker):
    """A cell of a captured or inlined frame; ``contents`` is None while it is empty."""

    def __init__(self, contents: Optional[VariableTracker] = None, external: bool = False):
        super().__init__(None)
        self.contents = contents
        #: a cell of a function that exists outside the capture: writing it is a side effect
        self.external = external
        #: the name of this cell in the captured (root) frame, which holds the real cell:
        #: code made at a break reaches it there (``codegen.frame``)
        self.root_name: Optional[str] = None
        #: an external cell of the captured frame that the capture assigned or deleted:
        #: the code after the graph stores ``contents`` into the real cell
        self.written = False
        #: the real cell an external cell of the captured frame stands for, when known
        #: (entered through ``run_direct``): only then may the capture write it
        self.real_cell: Any = None

    def describe(self) -> str:
        return "cell"
