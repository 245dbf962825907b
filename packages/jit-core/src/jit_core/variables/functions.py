"""Callables: Python builtins, Paddle functions, user functions (inlined) and methods."""

from __future__ import annotations

import builtins
import functools
import math
import operator
import sys
import types
import weakref
from typing import Any, Callable, Dict, List, Optional

import paddle

from ..bytecode import compat
from ..errors import (
    CONTEXT_MANAGER,
    DATA_LEAVES_GRAPH,
    DYNAMIC_VALUE,
    INPLACE_OUTSIDE,
    IO_CALL,
    RAISES,
    RECONSTRUCT,
    TENSOR_BRANCH,
    UNTRACED_CALL,
    Raised,
    Unsupported,
    raised_at_capture,
)
from ..runtime import guards
from ..sources import AttrSource, CallSource
from . import symbolic
from .base import CellVariable, KnownValueVariable, VariableTracker
from .constant import FOLDABLE, ConstantVariable
from .containers import (
    BaseListVariable,
    DictVariable,
    ListIteratorVariable,
    ListVariable,
    SetVariable,
    SliceVariable,
    TupleVariable,
    sort_items,
)
from .generators import LazyIteratorVariable, filter_iterator, map_iterator
from .ndarrays import NdarrayVariable, to_tensor
from .symbolic import SymIntVariable
from .tensor import TensorVariable, is_inplace_name
from .training import RETURN_VALUES, is_autograd_backward, training_call
from .values import constant_arguments, is_build_query, is_state_query, is_type_info


def _consts(args) -> Optional[list]:
    if all(a.is_python_constant() for a in args):
        return [a.as_python_constant() for a in args]
    return None


#: builtins without side effects: folded when every argument is a constant
PURE_BUILTINS = (
    {
        abs,
        all,
        any,
        bin,
        bool,
        callable,
        chr,
        complex,
        divmod,
        float,
        format,
        hash,
        hex,
        int,
        isinstance,
        issubclass,
        len,
        max,
        min,
        oct,
        ord,
        pow,
        repr,
        round,
        sorted,
        str,
        sum,
        tuple,
        type,
        list,
        dict,
        range,
        slice,
        frozenset,
        reversed,
        enumerate,
        zip,
    }
    | {getattr(math, n) for n in dir(math) if callable(getattr(math, n))}
    | FOLDABLE
)

#: pure builtins whose first argument is an iterable they consume
_CONSUME_ITERABLE = {sorted, sum, min, max, any, all, frozenset}


def _consumes_iterable(fn: Any) -> bool:
    if fn in _CONSUME_ITERABLE:
        return True
    # "".join(...), b",".join(...): a method of a str or bytes constant
    return getattr(fn, "__name__", None) == "join" and isinstance(
        getattr(fn, "__self__", None), (str, bytes)
    )


_IO_BUILTINS = {
    print: "print writes output (I/O)",
    input: "input reads from stdin (I/O)",
    open: "open touches the file system (I/O)",
}


def _reads_frame(fn: Callable, args, kwargs) -> bool:
    """Whether calling builtin ``fn`` so reads the variables of the frame that calls it
    (``'{name}'.format(**locals())``, ``eval(text)``, ``sys._getframe()``)."""
    if fn is locals or fn is sys._getframe:
        return True
    if fn in (vars, dir):
        return not args and not kwargs
    if fn in (eval, exec):
        return len(args) < 2 and "globals" not in kwargs
    return False


class BuiltinVariable(KnownValueVariable):
    def __init__(self, fn: Callable, source=None, pure: bool = False):
        super().__init__(fn, source)
        self.pure = pure

    def describe(self) -> str:
        return f"builtin {getattr(self.fn, '__name__', self.fn)!r}"

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if self.fn is dict and name == "fromkeys":
            return BuiltinVariable(_dict_fromkeys)
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        fn = self.fn
        if fn in _IO_BUILTINS:
            raise Unsupported(_IO_BUILTINS[fn], category=IO_CALL)
        if _reads_frame(fn, args, kwargs):
            e = Unsupported(
                f"{getattr(fn, '__name__', fn)}() reads the frame's own variables",
                category=UNTRACED_CALL,
            )
            e.reads_frame = True
            raise e
        special = _SPECIAL.get(fn)
        if special is not None:
            out = special(tx, args, kwargs)
            if out is not None:
                return out
        if not kwargs:
            if (
                fn is int
                and len(args) == 1
                and isinstance(args[0], SymIntVariable)
                and args[0].python_type() is int
            ):
                return args[0]
            sized = symbolic.call_builtin(tx, fn, args)
            if sized is not None:
                return sized
        if any(isinstance(a, TensorVariable) for a in list(args) + list(kwargs.values())):
            if fn in (abs, pow, operator.neg, operator.pos, operator.invert) or fn in FOLDABLE:
                if fn is operator.not_:
                    raise Unsupported(
                        "`not tensor` needs the tensor's value", category=TENSOR_BRANCH
                    )
                return tx.output.call_function(tx, fn, args, kwargs)
            raise Unsupported(
                f"builtin {getattr(fn, '__name__', fn)!r} on a tensor", category=DATA_LEAVES_GRAPH
            )
        arrays = [a for a in list(args) + list(kwargs.values()) if isinstance(a, NdarrayVariable)]
        if arrays:
            if fn in (abs, operator.neg, operator.pos, operator.invert) and len(args) == 1:
                return tx.unary_op(fn, args[0])
            if fn is len and len(args) == 1:
                return args[0].call_method(tx, "__len__", [], {})
            raise Unsupported(
                f"builtin {getattr(fn, '__name__', fn)!r} on a {arrays[0].describe()} (its "
                "value leaves the graph)",
                category=DATA_LEAVES_GRAPH,
            )
        if _consumes_iterable(fn) and args and not args[0].is_python_constant():
            # sorted(d.keys()), max(x for x in ...): fold over the items when they are
            # constants; the iterable is consumed, as Python would consume it
            items = _iter_items(tx, args[0])
            if all(i.is_python_constant() for i in items):
                folded = ConstantVariable([i.as_python_constant() for i in items])
                args = [folded, *args[1:]]
        consts = _consts(args)
        kw = _consts(list(kwargs.values()))
        if consts is not None and kw is not None and (self.pure or fn in PURE_BUILTINS):
            try:
                value = fn(*consts, **dict(zip(kwargs, kw)))
            except Exception as e:
                raise Unsupported(
                    f"{getattr(fn, '__name__', fn)}(...) raises {type(e).__name__}: {e}",
                    category=RAISES,
                ) from e
            return _wrap_folded(value)
        raise Unsupported(
            f"call to builtin {getattr(fn, '__name__', fn)!r} with these arguments",
            category=UNTRACED_CALL,
        )


def _wrap_folded(value: Any) -> VariableTracker:
    if isinstance(value, set):  # mutable: never a shared constant of the generated code
        return SetVariable(ConstantVariable(v) for v in value)
    if isinstance(value, tuple):
        return TupleVariable([_wrap_folded(v) for v in value])
    if isinstance(value, list):
        return ListVariable([_wrap_folded(v) for v in value])
    if isinstance(value, dict):
        return DictVariable({k: _wrap_folded(v) for k, v in value.items()})
    if isinstance(value, (zip, enumerate, map, filter, type(reversed([])))) or type(
        value
    ).__name__.endswith("iterator"):
        return ListIteratorVariable([_wrap_folded(v) for v in value])
    return ConstantVariable(value)


# ---------------------------------------------------------------- builtins over trackers


def _len(tx, args, kwargs):
    (obj,) = args
    if isinstance(obj, TensorVariable):
        if not obj.example.shape:
            raise Unsupported("len() of a 0-d tensor raises TypeError", category=RAISES)
        return tx.output.size_of(obj, 0)
    if isinstance(obj, (BaseListVariable, DictVariable)):
        return ConstantVariable(len(obj.items))
    if obj.is_python_constant():
        return ConstantVariable(len(obj.as_python_constant()))
    return obj.call_method(tx, "__len__", [], {})


def _isinstance(tx, args, kwargs):
    obj, cls = args
    if not cls.is_python_constant():
        cls_value = getattr(cls, "value", None)
        if cls_value is None:
            raise Unsupported(
                "isinstance() with a class that is not a constant", category=DYNAMIC_VALUE
            )
    else:
        cls_value = cls.as_python_constant()
    return ConstantVariable(isinstance_type(obj.python_type(), cls_value))


def isinstance_type(t: type, cls) -> bool:
    try:
        return issubclass(t, cls)
    except TypeError as e:
        raise Unsupported(f"isinstance() check raised {e}", category=RAISES) from e


def _iter_items(tx, v: VariableTracker) -> List[VariableTracker]:
    """The items of an iterable a builtin consumes at once (list(), sum()...)."""
    return v.unpack_var_sequence(tx)


def lazy_items(tx, v: VariableTracker) -> List[VariableTracker]:
    """The items of an iterable that a lazy iterator (zip, enumerate, map, filter) reads:
    one at a time in CPython, between the steps of its own consumer, so a generator's
    code must have no side effects to run at once (``variables.generators``)."""
    if isinstance(v, LazyIteratorVariable):
        return v.force(tx, stepwise=True).unpack_var_sequence(tx)
    return v.unpack_var_sequence(tx)


def _enumerate(tx, args, kwargs):
    start = kwargs["start"].as_python_constant() if "start" in kwargs else 0
    if len(args) == 2:
        start = args[1].as_python_constant()
    items = lazy_items(tx, args[0])
    return ListIteratorVariable(
        [TupleVariable([ConstantVariable(start + i), v]) for i, v in enumerate(items)]
    )


def _zip(tx, args, kwargs):
    if kwargs:
        raise Unsupported("zip(strict=...)", category=UNTRACED_CALL)
    seqs = [lazy_items(tx, a) for a in args]
    return ListIteratorVariable([TupleVariable(list(t)) for t in zip(*seqs)])


def _list(tx, args, kwargs):
    if not args:
        return ListVariable([])
    return ListVariable(_iter_items(tx, args[0]))


def _tuple(tx, args, kwargs):
    if not args:
        return TupleVariable([])
    return TupleVariable(_iter_items(tx, args[0]))


def _dict(tx, args, kwargs):
    items: Dict[Any, VariableTracker] = {}
    if args:
        src = args[0]
        if isinstance(src, DictVariable):
            items.update(src.items)
        else:
            for pair in _iter_items(tx, src):
                k, v = pair.unpack_var_sequence(tx)
                items[k.as_python_constant()] = v
    items.update(kwargs)
    return DictVariable(items)


def _reversed(tx, args, kwargs):
    if isinstance(args[0], (LazyIteratorVariable, ListIteratorVariable)):
        raise Unsupported(f"reversed() of {args[0].describe()} raises TypeError", category=RAISES)
    return ListIteratorVariable(list(reversed(_iter_items(tx, args[0]))))


def _iter(tx, args, kwargs):
    if len(args) == 1:
        if isinstance(args[0], (LazyIteratorVariable, ListIteratorVariable)):
            return args[0]  # iter() of an iterator is the iterator itself
        return ListIteratorVariable(_iter_items(tx, args[0]))
    return None


def _next(tx, args, kwargs):
    it = args[0]
    if isinstance(it, (ListIteratorVariable, LazyIteratorVariable)):
        item = it.next_item(tx)
        if item is None:
            if len(args) == 2:
                return args[1]
            raise Unsupported(
                "next() on an exhausted iterator raises StopIteration", category=RAISES
            )
        return item
    return None


def _range(tx, args, kwargs):
    consts = _consts(args)
    if consts is None:
        raise Unsupported(
            "range() over values that are not constants (a tensor?)", category=DYNAMIC_VALUE
        )
    return ConstantVariable(range(*consts))


def _getattr(tx, args, kwargs):
    obj, name = args[0], args[1].as_python_constant()
    if len(args) == 3:
        try:
            return obj.var_getattr(tx, name)
        except Unsupported:
            if _hasattr_value(tx, obj, name) is False:
                return args[2]
            raise
    return obj.var_getattr(tx, name)


def _hasattr_value(tx, obj, name) -> Optional[bool]:
    from .new_objects import NewObjectVariable

    if isinstance(obj, NewObjectVariable):
        return obj.has_attribute(name)
    real = getattr(obj, "value", None)
    if real is not None and not isinstance(obj, (ConstantVariable, TensorVariable)):
        found = hasattr(real, name)
        if obj.source is not None:
            # the answer holds for the calls the entry serves: an attribute set later
            # (``obj.total = getattr(obj, "total", 0) + x``) is another entry
            tx.output.guards.add(AttrSource(obj.source, name), guards.HASATTR, found)
        return found
    if isinstance(obj, TensorVariable):
        return hasattr(obj.example, name)
    if isinstance(obj, ConstantVariable):
        return hasattr(obj.value, name)
    return None


def _hasattr(tx, args, kwargs):
    obj, name = args[0], args[1].as_python_constant()
    found = _hasattr_value(tx, obj, name)
    if found is None:
        raise Unsupported(f"hasattr() on {obj.describe()}", category=DYNAMIC_VALUE)
    return ConstantVariable(found)


def _sum(tx, args, kwargs):
    items = _iter_items(tx, args[0])
    total = args[1] if len(args) > 1 else ConstantVariable(0)
    for item in items:
        total = tx.binary_op(operator.add, total, item)
    return total


def _minmax(fn):
    def impl(tx, args, kwargs):
        seq = _iter_items(tx, args[0]) if len(args) == 1 else list(args)
        if kwargs or any(isinstance(a, TensorVariable) for a in seq):
            raise Unsupported(
                f"{fn.__name__}() over tensors compares their values", category=TENSOR_BRANCH
            )
        # (the iterable is consumed: fold here, it cannot be read twice)
        values = _consts(seq)
        if values is None:
            raise Unsupported(
                f"{fn.__name__}() over values that are not constants", category=DYNAMIC_VALUE
            )
        try:
            return _wrap_folded(fn(values))
        except Exception as e:
            raise Unsupported(
                f"{fn.__name__}(...) raises {type(e).__name__}: {e}", category=RAISES
            ) from e

    return impl


def _slice(tx, args, kwargs):
    parts = list(args) + [ConstantVariable(None)] * (3 - len(args))
    if len(args) == 1:
        parts = [ConstantVariable(None), args[0], ConstantVariable(None)]
    return SliceVariable(*parts[:3])


def _type(tx, args, kwargs):
    if len(args) == 1:
        from .builder import wrap_static

        return wrap_static(args[0].python_type())
    return None


def _callable(tx, args, kwargs):
    (obj,) = args
    try:
        return ConstantVariable(callable(getattr(obj, "value", None) or obj.python_type()))
    except Unsupported:
        return None


def _super(tx, args, kwargs):
    from .objects import SuperVariable

    if kwargs:
        return None
    if not args:
        # zero-argument form: the compiler gave the method a __class__ cell, and the object
        # is the frame's first argument
        code = tx.code
        if "__class__" not in code.co_freevars or not code.co_argcount:
            raise Unsupported("super() without arguments outside a method", category=RAISES)
        cell = tx.cell("__class__").contents
        args = [cell, tx.load_local(code.co_varnames[0])]
    if len(args) != 2:
        return None
    cls = args[0].as_python_constant() if args[0].is_python_constant() else None
    if not isinstance(cls, type):
        raise Unsupported(
            f"super() of {args[0].describe()}, which is not a known class", category=DYNAMIC_VALUE
        )
    return SuperVariable(cls, args[1])


def _set(tx, args, kwargs):
    if kwargs or len(args) > 1:
        return None
    out = SetVariable()
    if args:
        for item in _iter_items(tx, args[0]):
            out.add(item)
    return out


def _map(tx, args, kwargs):
    if kwargs or len(args) < 2:
        return None
    return map_iterator(tx, args[0], list(args[1:]))


def _filter(tx, args, kwargs):
    if kwargs or len(args) != 2:
        return None
    return filter_iterator(tx, args[0], args[1])


def _sorted(tx, args, kwargs):
    if len(args) != 1 or not set(kwargs) <= {"key", "reverse"}:
        return None
    items = _iter_items(tx, args[0])
    return ListVariable(
        sort_items(tx, items, kwargs.get("key"), kwargs.get("reverse", ConstantVariable(False)))
    )


def _dict_fromkeys(iterable, value=None):
    """``dict.fromkeys``, as the capture sees it (see ``BuiltinVariable.var_getattr``)."""
    return dict.fromkeys(iterable, value)


def _fromkeys(tx, args, kwargs):
    if kwargs or not 1 <= len(args) <= 2:
        return None
    value = args[1] if len(args) == 2 else ConstantVariable(None)
    out = DictVariable({})
    for key in _iter_items(tx, args[0]):
        out.items[out._key(key)] = value
    return out


_SPECIAL: Dict[Any, Callable] = {
    map: _map,
    filter: _filter,
    sorted: _sorted,
    _dict_fromkeys: _fromkeys,
    len: _len,
    isinstance: _isinstance,
    enumerate: _enumerate,
    zip: _zip,
    list: _list,
    tuple: _tuple,
    dict: _dict,
    reversed: _reversed,
    iter: _iter,
    next: _next,
    range: _range,
    getattr: _getattr,
    hasattr: _hasattr,
    sum: _sum,
    min: _minmax(min),
    max: _minmax(max),
    slice: _slice,
    type: _type,
    super: _super,
    set: _set,
}


# ---------------------------------------------------------------- Paddle functions

#: Paddle functions that look only at metadata pinned by the guards, not at tensor data,
#: and the mode queries (captured code always runs in dynamic mode: the JIT only runs there)
_METADATA_FNS = {
    "is_tensor",
    "is_floating_point",
    "is_complex",
    "is_integer",
    "in_dynamic_mode",
    "in_dygraph_mode",
    "in_dynamic_or_pir_mode",
    "in_pir_mode",
    "in_static_mode",
}


def _argument(args, kwargs, index: int, name: str, default: Any = None) -> Any:
    v = kwargs.get(name, args[index] if len(args) > index else None)
    if v is None:
        return default
    return v.as_python_constant() if v.is_python_constant() else v


def _updated_arguments(fn: Any, args, kwargs) -> List[TensorVariable]:
    """The tensor arguments that ``fn`` writes into though its name has no trailing ``_``:
    a batch norm in training mode updates its running mean and variance in place."""
    if fn is getattr(paddle._C_ops, "batch_norm", None):
        # (x, mean, variance, scale, bias, is_test, momentum, epsilon, data_format,
        # use_global_stats, trainable_statistics), as program dumps write it
        training = _argument(args, kwargs, 5, "is_test", True) is False
    elif fn is paddle.nn.functional.batch_norm:
        training = _argument(args, kwargs, 5, "training", False) is True
    else:
        return []
    if not training or _argument(args, kwargs, 9, "use_global_stats", False) is True:
        return []
    found = [
        _argument(
            args, kwargs, 1, "running_mean" if fn is paddle.nn.functional.batch_norm else "mean"
        ),
        _argument(
            args, kwargs, 2, "running_var" if fn is paddle.nn.functional.batch_norm else "variance"
        ),
    ]
    return [t for t in found if isinstance(t, TensorVariable)]


def _is_rng_state_tracker(fn: Any) -> bool:
    return getattr(fn, "__name__", "") == "get_rng_state_tracker" and (
        getattr(fn, "__module__", "") or ""
    ).startswith("paddle.distributed")


def _is_layer_method_call(fn: Any, args) -> bool:
    """Whether ``fn(*args)`` calls a method of Paddle's layer classes, unbound, on a layer
    of that class (its first argument)."""
    from .layers import LayerVariable

    if not args or not isinstance(args[0], LayerVariable) or not isinstance(fn, types.FunctionType):
        return False
    name = fn.__name__
    return any(
        fn in (attr, getattr(attr, "__wrapped__", None))
        for attr in (vars(k).get(name) for k in type(args[0].value).__mro__)
    )


def _is_deprecation_wrapper(fn) -> bool:
    """Whether ``fn`` is Paddle's ``@deprecated`` wrapper, which only warns and calls
    the function it wraps (``paddle.incubate.nn.functional.swiglu`` in Paddle 3.3)."""
    code = getattr(fn, "__code__", None)
    return (
        code is not None
        and callable(getattr(fn, "__wrapped__", None))
        and code.co_filename.replace("\\", "/").endswith("paddle/utils/deprecated.py")
    )


def _is_getter(fn) -> bool:
    """A Paddle query of its own state by name (``get_hybrid_communicate_group``): calling
    it again (in a guard) changes nothing."""
    name = getattr(fn, "__name__", "") or ""
    module = getattr(fn, "__module__", "") or ""
    return name.startswith("get_") and module.startswith("paddle.") and callable(fn)


def called_from(tx, fn):
    """``fn``, called from a frame at ``tx``'s line of ``tx``'s module: a warning it gives
    with ``stacklevel=2`` is shown as eager shows it, at that line and through that
    module's once-per-line registry (not at jit_core's line, nor again per graph)."""
    filename, lineno = tx.code.co_filename, max(tx.lineno or 1, 1)
    key = (filename, lineno)
    code = _CALLERS.get(key)
    if code is None:
        source = "\n" * (lineno - 1) + "def call(fn, a, k): return fn(*a, **k)\n"
        module = compile(source, filename, "exec")
        code = _CALLERS[key] = next(c for c in module.co_consts if isinstance(c, types.CodeType))
    call = types.FunctionType(code, tx.f_globals, "call")
    return lambda *a, **k: call(fn, a, k)


#: (filename, line) -> the code of ``called_from``'s caller there
_CALLERS: Dict[tuple, types.CodeType] = {}


class PaddleFunctionVariable(KnownValueVariable):
    def describe(self) -> str:
        mod = getattr(self.fn, "__module__", "") or ""
        return f"paddle function {mod}.{getattr(self.fn, '__name__', '?')}"

    def var_getattr(self, tx, name: str) -> VariableTracker:
        # ``paddle.tensor`` is a callable that is also a module (``paddle.tensor.transpose``
        # inside nn.RNN): its attributes are Paddle's, read like a library module's
        from .builder import wrap

        if isinstance(self.fn, types.FunctionType) or not hasattr(self.fn, name):
            return super().var_getattr(tx, name)
        return wrap(tx, getattr(self.fn, name), None)

    def call_function(self, tx, args, kwargs):
        from .contexts import is_auto_cast, make_auto_cast

        name = getattr(self.fn, "__name__", "")
        arrays = [v for v in list(args) + list(kwargs.values()) if isinstance(v, NdarrayVariable)]
        if arrays:
            if self.fn is paddle.to_tensor and args and args[0] is arrays[0]:
                return to_tensor(tx, arrays[0], dict(kwargs))
            raise Unsupported(
                f"a {arrays[0].describe()} passed to paddle's {name}() (only "
                "paddle.to_tensor() takes one)",
                category=DYNAMIC_VALUE,
            )
        if _is_layer_method_call(self.fn, args):
            # ``nn.Embedding.forward(self, ids)``, unbound, in a subclass that overrides
            # forward (BART's positional embedding): that function's body, on that layer
            from .layers import unaliased

            fn = unaliased(self.fn, bool(kwargs))
            return tx.inline_function(fn, list(args), kwargs, fn_source=None)
        if is_auto_cast(self.fn):
            return make_auto_cast(self.fn, args, kwargs)
        if _is_rng_state_tracker(self.fn) and not args and not kwargs:
            # the process-wide tracker of model-parallel RNG states (PaddleNLP asks it
            # whether a state is registered before each dropout): an object read through
            # the call, which the guards make again
            from .builder import wrap

            return wrap(tx, self.fn(), CallSource(self.fn, ()))
        if is_autograd_backward(self.fn):
            # paddle.autograd.backward(tensors, grad_tensors): an effect, as t.backward()
            if not (tx.output.grad_mode() and tx.output.may_track_gradients()):
                raise Unsupported(
                    "paddle.autograd.backward() where no input or parameter of the graph "
                    "requires gradients (it runs in Python between two graphs)",
                    category=DATA_LEAVES_GRAPH,
                )
            text = "paddle.autograd.backward()"
            return tx.output.record_effect(tx, self.fn, list(args), kwargs, text)
        value = self._python_value(tx, name, args, kwargs)
        if value is not None:
            return value
        if is_inplace_name(name) and not ({"output", "out"} & set(kwargs)):
            # paddle.tanh_(x), F.relu_(x)...: an update of the first argument
            if args and isinstance(args[0], TensorVariable):
                what = f"{self.describe()} (in place)"
                return tx.output.record_inplace(
                    tx, "call_function", self.fn, self.fn, list(args), kwargs, what
                )
        if is_inplace_name(name) or "output" in kwargs or "out" in kwargs:
            raise Unsupported(
                f"{self.describe()} writes into a tensor in place (it runs in Python between two graphs)",
                category=INPLACE_OUTSIDE,
            )
        updated = _updated_arguments(self.fn, args, kwargs)
        if updated:
            return tx.output.call_updating(tx, self.fn, args, kwargs, updated)
        if _is_deprecation_wrapper(self.fn):
            # warned once at capture, at the captured line, as eager warns once there;
            # the graph calls the function itself, so it does not warn again per graph
            run = called_from(tx, self.fn)
            return tx.output.call_function(tx, self.fn.__wrapped__, args, kwargs, run=run)
        return tx.output.call_function(tx, self.fn, args, kwargs)

    def _python_value(self, tx, name: str, args, kwargs) -> Optional[VariableTracker]:
        """The result of a call that answers a Python value (the gradient mode, a dtype's
        info, a build or state query, a tensor's metadata) as a constant, guarded where
        it may change between calls; None for any other call."""
        if name == "is_grad_enabled" and not args and not kwargs:
            # the mode at this point of the captured code (a no_grad block changes it)
            tx.output.guards.grad_enabled = tx.output.entry_grad_mode
            return ConstantVariable(tx.output.grad_mode())
        if is_type_info(self.fn):
            consts = constant_arguments(args, kwargs)
            if consts is None:
                raise Unsupported(
                    f"{self.describe()} of a dtype that is not a constant", category=DYNAMIC_VALUE
                )
            try:
                return ConstantVariable(self.fn(*consts[0], **consts[1]))
            except Exception as e:  # eager raises it too, at this line
                raise Unsupported(
                    f"{self.describe()} raises {type(e).__name__}: {e}", category=RAISES
                ) from e
        if _is_getter(self.fn) and not kwargs and all(a.is_python_constant() for a in args):
            # ``fleet.get_hybrid_communicate_group()`` outside a distributed run raises
            # (PaddleNLP asks inside ``try``): a guard asks again on every call, so the
            # capture may take the exception to its handler
            consts = tuple(a.as_python_constant() for a in args)
            try:
                self.fn(*consts)
            except Exception as e:  # what it raises is what eager raises
                tx.output.guards.add(CallSource(self.fn, consts), guards.RAISES, type(e))
                raise Raised(e, raised_at_capture(name, e)) from e
        if is_build_query(self.fn) or is_state_query(self.fn):
            if name == "amp_state" and tx.output.amp_blocks:
                # the capture does not stay inside the auto_cast it captured: the state
                # read now is the one outside
                raise Unsupported(
                    "amp_state() inside a captured auto_cast block", category=CONTEXT_MANAGER
                )
            consts = constant_arguments(args, kwargs)
            if consts is None or consts[1]:
                raise Unsupported(
                    f"{self.describe()} with arguments that are not constants",
                    category=DYNAMIC_VALUE,
                )
            value = self.fn(*consts[0])
            if is_state_query(self.fn):
                # set_flags, set_device... may change the answer: a guard asks again
                tx.output.guards.add(
                    CallSource(self.fn, tuple(consts[0])), guards.CONSTANT_MATCH, value
                )
            return _wrap_folded(value)
        if name in _METADATA_FNS:
            from .arguments import example_of

            return ConstantVariable(
                self.fn(
                    *[example_of(a) for a in args], **{k: example_of(v) for k, v in kwargs.items()}
                )
            )
        return None


# ---------------------------------------------------------------- user functions


class UserFunctionVariable(KnownValueVariable):
    """A Python function of the user's (or of a model zoo): its bytecode is inlined."""

    def describe(self) -> str:
        return f"function {self.fn.__qualname__}"

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            return ConstantVariable(getattr(self.fn, name))
        raise Unsupported(f"attribute {name!r} of {self.describe()}", category=DYNAMIC_VALUE)

    def call_function(self, tx, args, kwargs):
        return tx.inline_function(self.fn, args, kwargs, fn_source=self.source)


#: the functions that code made at a graph break made again (``codegen.frame``): a new
#: object on every call, so guarded by what they are made of, not by identity
REBUILT_FUNCTIONS: weakref.WeakSet = weakref.WeakSet()


def _make_function(code, f_globals, qualname, defaults, kwdefaults, annotations, closure):
    """What MAKE_FUNCTION makes, for a function the capture made and a break hands on."""
    fn = types.FunctionType(code, f_globals, code.co_name, defaults, closure)
    fn.__qualname__ = qualname
    if kwdefaults is not None:
        fn.__kwdefaults__ = kwdefaults
    if isinstance(annotations, tuple):  # 3.10+: name, value, name, value ...
        annotations = dict(zip(annotations[::2], annotations[1::2]))
    if annotations is not None:
        fn.__annotations__ = annotations
    REBUILT_FUNCTIONS.add(fn)
    return fn


class NestedFunctionVariable(VariableTracker):
    """A function created by MAKE_FUNCTION during the capture (a closure or a lambda)."""

    def __init__(self, code, name: str, f_globals, defaults, kwdefaults, closure, annotations=None):
        super().__init__(None)
        self.code = code
        self.name = name
        self.f_globals = f_globals
        self.defaults = defaults  # TupleVariable or None
        self.kwdefaults = kwdefaults  # DictVariable or None
        self.closure = closure  # list of CellVariable or None
        #: as MAKE_FUNCTION took them (a dict, or on 3.10+ a flat tuple of name, value pairs)
        self.annotations = annotations

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"nested function {self.name}"

    def reconstruct(self, cg) -> None:
        """Made again, over the very cells of the frame; only at a break, whose code
        gives those cells what the capture left in them first."""
        if not cg.at_break:
            raise Unsupported(
                f"cannot rebuild the returned {self.describe()}", category=RECONSTRUCT
            )
        cells = self.closure or []
        for cell in cells:
            if not isinstance(cell, CellVariable) or cell.root_name is None:
                # a cell of a function inlined in the capture has no real counterpart
                raise Unsupported(
                    f"cannot rebuild {self.describe()}: it holds a cell of a function inlined "
                    "in the capture",
                    category=RECONSTRUCT,
                )

        def build():
            make = functools.partial(_make_function, self.code, self.f_globals, self.name)
            cg.extend(compat.load_callable_const(make))
            for part in (self.defaults, self.kwdefaults, self.annotations):
                if part is None:
                    cg.extend(compat.load_const(None))
                else:
                    cg(part)
            if self.closure is None:
                cg.extend(compat.load_const(None))
            else:
                cg.extend([compat.load_cell(c.root_name, cg.code) for c in cells])
                cg.extend(compat.build_tuple(len(cells)))
            cg.extend(compat.call(4))

        cg.new_object(self, build)

    def call_function(self, tx, args, kwargs):
        return tx.inline_nested(self, args, kwargs)


class UserMethodVariable(VariableTracker):
    """A user function bound to an object (``self.helper``)."""

    def __init__(self, fn: types.FunctionType, obj: VariableTracker, source=None):
        super().__init__(source)
        self.fn = fn
        self.obj = obj

    def python_type(self) -> type:
        return types.MethodType

    def describe(self) -> str:
        return f"method {self.fn.__qualname__}"

    def call_function(self, tx, args, kwargs):
        obj = getattr(self.obj, "value", None)
        if training_call(self.fn, obj) is not None:
            # opt.step(), scheduler.step(), scaler.update(): Paddle's own call, run after
            # the graph's operations (executor.train_effects)
            name = self.fn.__name__
            text = f"{type(obj).__name__}.{name}()"
            return tx.output.record_effect(
                tx, self.fn, [self.obj] + list(args), kwargs, text, name in RETURN_VALUES
            )
        return tx.inline_function(self.fn, [self.obj] + list(args), kwargs, fn_source=None)

    def reconstruct(self, cg) -> None:
        cg.extend(compat.load_callable_const(types.MethodType))
        cg.extend(compat.load_const(self.fn))
        cg(self.obj)
        cg.extend(compat.call(2))


class BoundMethodVariable(VariableTracker):
    """``obj.name`` for an object whose tracker implements the method itself."""

    def __init__(self, obj: VariableTracker, name: str):
        super().__init__(None)
        self.obj = obj
        self.name = name

    def describe(self) -> str:
        return f"method {self.name!r} of {self.obj.describe()}"

    def call_function(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, list(args), dict(kwargs))

    def reconstruct(self, cg) -> None:
        cg(self.obj)
        cg.extend(compat.load_attr(self.name))


def is_python_builtin(value: Any) -> bool:
    return isinstance(value, types.BuiltinFunctionType) and getattr(value, "__module__", None) in (
        "builtins",
        "math",
        "_operator",
        "operator",
    )


BUILTIN_NAMES = {name: getattr(builtins, name) for name in dir(builtins)}
