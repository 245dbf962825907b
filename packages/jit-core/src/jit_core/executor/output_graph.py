"""The graph a capture builds, with its inputs, the objects it refers to and its guards.

Every Paddle operation is run once on example values while it is recorded, so that the
next operation knows the shapes and dtypes it gets. Those runs have no lasting effect:
in-place operations run only on tensors the graph made (on inputs, parameters, buffers and
anything that may share memory with them they are refused before they run), layer buffers
touched in training mode are restored, and the random generator state is put back at the
end of the capture.
"""

from __future__ import annotations

import enum
import keyword
import operator
import types
from typing import Any, Dict, List, Optional, Set, Tuple, Union, cast

import paddle

from .. import rng, shapes
from ..errors import (
    CONTEXT_MANAGER,
    DATA_LEAVES_GRAPH,
    RAISES,
    SIDE_EFFECT,
    UNTRACED_CALL,
    Unsupported,
    raised_at_capture,
)
from ..fx import Graph
from ..fx.interpreter import run_leaf_layer
from ..passes.effects import is_random, may_draw
from ..runtime import guards
from ..shapes import ShapePolicy
from ..sources import ArrayAsTensorSource, AttrSource, Source, attr_path
from ..variables.arguments import example_of, node_arg_of
from ..variables.base import VariableTracker
from ..variables.constant import ConstantVariable
from ..variables.containers import (
    BaseListVariable,
    DictVariable,
    ListVariable,
    SliceVariable,
    TupleVariable,
)
from ..variables.symbolic import SymIntVariable
from ..variables.tensor import TensorListVariable, TensorVariable
from .autograd_flags import AutogradFlags
from .inplace_updates import InplaceUpdates, buffer_key
from .side_effects import SideEffects
from .symbolic_sizes import SymbolicSizes
from .train_effects import TrainingEffects

#: operators whose result has the shape of their tensor operand whatever Python number
#: the other one is: the arithmetic and comparisons of symbolic numbers, and ``**``
_ELEMENTWISE = frozenset(shapes.ARITHMETIC) | frozenset(shapes.COMPARISONS) | {operator.pow}


def _reads_number_input(v: VariableTracker) -> bool:
    """Whether ``v`` (an argument, maybe a list or slice of them) is or is computed from
    a number input of the graph."""
    if isinstance(v, SymIntVariable):
        if v.source is not None:
            return True
        if v.expr is not None:
            return any(True for _ in shapes.sources_of(v.expr, kinds=("value",)))
        if v.operands is not None:
            return any(
                isinstance(o, VariableTracker) and _reads_number_input(o) for o in v.operands[1:]
            )
        return False
    if isinstance(v, ListVariable) and v.unread:  # items from outside: no number
        return any(_reads_number_input(i) for i in v.appended)
    if isinstance(v, BaseListVariable):
        return any(_reads_number_input(i) for i in v.items)
    if isinstance(v, DictVariable):
        return any(_reads_number_input(i) for i in v.items.values())
    if isinstance(v, SliceVariable):
        return any(_reads_number_input(p) for p in v.parts)
    return False


#: what an identity guard may pin in a capture shared between layer instances
_SHARED_KINDS = (types.FunctionType, type, types.ModuleType, enum.Enum)


def _identifier(hint: str) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "v"
    if name[0].isdigit():
        name = "_" + name
    if keyword.iskeyword(name):
        name += "_"
    return name


class OutputGraph(SymbolicSizes, InplaceUpdates, TrainingEffects, AutogradFlags):
    """The graph a capture records: its inputs (placeholders, with their sources), the
    objects it reads (layers, parameters), every Paddle operation run once on example
    values, and the guards the capture relied on. Sizes of dynamic dimensions are
    ``SymbolicSizes``'s, in-place updates ``InplaceUpdates``'s, training calls
    ``TrainingEffects``'s, what eager autograd says of a tensor ``AutogradFlags``'s."""

    def __init__(self, shape_policy: Optional[ShapePolicy] = None):
        self.graph = Graph()
        #: which input dimensions are dynamic (``jit_core.shapes``)
        self.shape_policy = shape_policy if shape_policy is not None else ShapePolicy()
        #: an input with a dynamic dimension was read: sizes of tensors made from then on
        #: may differ from call to call
        self.dynamic_inputs = False
        #: a number input (add_number_input) reached an operation other than elementwise
        #: arithmetic (a shape, an axis, a slice): sizes of tensors made from then on may
        #: depend on it
        self.sized_by_numbers = False
        #: tensor node -> its shape as Paddle infers it for every dynamic size
        #: (``shape_infer``), filled when a capture first needs one
        self.static_shapes: Dict[Any, Optional[List[int]]] = {}
        #: (``sym_shapes``) size expressions of the tensors the graph made, on demand
        self.symbolic_shapes = None
        #: exception handlers the capture took an exception to and has not left yet
        #: (``Translator._to_handler``)
        self.handlers_running = 0
        self.guards = guards.GuardSet()
        #: source names of number inputs the capture needed as Python values after all
        #: (``specialize``): it serves one value of each
        self.pinned_numbers: Set[str] = set()
        if self.shape_policy.layers:
            self.guards.check = self._refuse_one_instance
        #: lists and dicts from outside the frame: one tracker per object, and those the
        #: captured code mutates (written back after the graph)
        self.side_effects = SideEffects(self.guards)
        #: name -> object registered on the GraphModule (layers, parameters, buffers)
        self.root: Dict[str, Any] = {}
        self._root_ids: Dict[int, str] = {}
        #: name -> where the object registered under it comes from
        self._root_sources: Dict[str, Optional[Source]] = {}
        #: (source, placeholder node, example tensor) in input order
        self.inputs: List[Tuple[Source, Any, Any]] = []
        #: source name -> the tracker of that input: a tensor, a list of tensors taken
        #: whole (``tensor_list``) or a number (``add_number_input``); a source's value is
        #: of one kind in a capture (its guard checks the type)
        self._input_by_source: Dict[
            str, Union[TensorVariable, TensorListVariable, SymIntVariable]
        ] = {}
        self._attr_vars: Dict[int, TensorVariable] = {}
        #: node -> the allocation its example value lives in (see ``buffer_key``): which
        #: nodes a tensor updated in place is a view of
        self._buffers: Dict[Any, Any] = {}
        #: the gradient mode the frame was entered with, and the modes of the
        #: ``no_grad``-style blocks open at this point of the capture (innermost last)
        self.entry_grad_mode = paddle.is_grad_enabled()
        self._grad_modes: List[bool] = []
        #: how many captured ``auto_cast`` blocks the code is inside
        self.amp_blocks = 0
        #: the random operations run on the examples, and whether they alone drew
        self.draws = rng.Draws()
        self._init_effects()
        self._init_autograd_flags()

    def _refuse_one_instance(self, guard: guards.Guard) -> None:
        """In a capture shared between layer instances, an identity guard through a shared
        layer pins what belongs to one instance (an object of its own): that capture
        cannot serve the others, so the frame is captured bound to its instances."""
        if guard.kind != guards.ID_MATCH or not self.shape_policy.shares_layer(guard.source):
            return
        value = guard.value
        if isinstance(value, _SHARED_KINDS) and not isinstance(value, paddle.nn.Layer):
            return  # the same function, class or module for every instance
        if isinstance(value, types.BuiltinFunctionType) and isinstance(
            getattr(value, "__self__", None), (types.ModuleType, type(None))
        ):
            return
        raise shapes.SpecializeLayers(
            f"{guard.source.name()} is an object of one instance ({type(value).__name__})"
        )

    # ------------------------------------------------------------ gradient mode
    def grad_mode(self) -> bool:
        """The gradient mode at this point of the captured code."""
        return self._grad_modes[-1] if self._grad_modes else self.entry_grad_mode

    def may_track_gradients(self) -> bool:
        """Whether eager Paddle could be recording gradients for what the graph makes at
        this point: gradients on, and an input, parameter or layer parameter needs them."""
        # the answer depends on the mode: the entry holds only for the mode it saw
        self.guards.grad_enabled = self.entry_grad_mode
        if not self.grad_mode():
            return False
        tensors = [ex for _, _, ex in self.inputs if isinstance(ex, paddle.Tensor)]
        tensors += [v.example for v in self._attr_vars.values()]
        for obj in self.root.values():
            if isinstance(obj, paddle.nn.Layer):
                tensors += list(obj.parameters())
        return any(not t.stop_gradient for t in tensors)

    def push_grad_mode(self, mode: bool) -> None:
        if mode and not self.grad_mode():
            raise Unsupported(
                "turning gradients on inside a block where they are off is not captured yet",
                category=CONTEXT_MANAGER,
            )
        # the graph is valid only for the mode it was captured in
        self.guards.grad_enabled = self.entry_grad_mode
        self._grad_modes.append(mode)

    def pop_grad_mode(self) -> None:
        if not self._grad_modes:
            raise Unsupported(
                "leaving a gradient-mode block that was not entered in the capture",
                category=CONTEXT_MANAGER,
            )
        self._grad_modes.pop()

    def _detached(self, var: VariableTracker) -> VariableTracker:
        """What an operation gives inside ``no_grad`` while the graph runs with gradients
        on: the same values, detached (``stop_gradient``, no gradient flows back)."""
        if isinstance(var, TensorVariable):
            node = self.graph.call_method("detach", (var.node,))
            self._set_meta(node, var.example)
            return TensorVariable(node, var.example)
        if isinstance(var, (TupleVariable, ListVariable)):
            return type(var)([self._detached(v) for v in var.items])
        return var

    # ------------------------------------------------------------ inputs and attributes
    def add_input(self, tx, tensor, source: Source, static: bool = False) -> TensorVariable:
        """A tensor of the frame read by the graph as an input; ``static``: its dimensions
        are never dynamic (a parameter of a layer shared between instances)."""
        key = source.name()
        if key in self._input_by_source:
            return cast(TensorVariable, self._input_by_source[key])
        dynamic = {} if static else self.shape_policy.dims_for(key, tensor)
        self.guards.add(source, guards.TENSOR_MATCH, guards.TensorSpec.of(tensor, dynamic))
        node = self._placeholder(source)
        self._set_meta(node, tensor)
        var = TensorVariable(node, tensor, source)
        if dynamic:
            node.meta["dynamic_dims"] = sorted(dynamic)
            # (min, max) of each, from mark_dynamic (None: unbounded); the guards hold
            # every call to them, and a backend may size what it builds by them
            node.meta["dynamic_bounds"] = {d: tuple(b) for d, b in sorted(dynamic.items())}
            var.dynamic_dims = frozenset(dynamic)
            self.dynamic_inputs = True
        self.inputs.append((source, node, tensor))
        self._input_by_source[key] = var
        return var

    def tensor_list(
        self, var: ListVariable, value: list, source: Source
    ) -> Optional[TensorListVariable]:
        """A list from outside whose length changed between captures, passed whole to a
        Paddle operation: one graph input (the list), plus what the capture appended to
        it, so that one graph serves every length (``ShapePolicy.list_is_input``). Its
        guard checks that every item is a tensor of one type, shape and dtype. None where
        the items differ (they are then read one by one, their number guarded)."""
        key = source.name()
        whole = cast(Optional[TensorListVariable], self._input_by_source.get(key))
        if whole is None:
            if not value or not all(type(t) is paddle.Tensor for t in value):
                return None
            spec = guards.TensorSpec.of(value[0])
            if any(guards.TensorSpec.of(t) != spec for t in value[1:]):
                return None
            self.guards.add(source, guards.TENSOR_LIST, spec)
            node = self._placeholder(source)
            node.meta["tensor_list"] = True
            whole = TensorListVariable(node, list(value), source)
            self.inputs.append((source, node, list(value)))
            self._input_by_source[key] = whole
            # sizes of what is made from it depend on its length
            self.dynamic_inputs = True
        appended = var.appended
        if not appended:
            return whole
        tensors = [a for a in appended if isinstance(a, TensorVariable)]
        if len(tensors) != len(appended):
            return None
        node = self.graph.call_function(operator.add, (whole.node, [a.node for a in tensors]))
        return TensorListVariable(node, whole.example + [a.example for a in tensors])

    def add_number_input(self, value: Any, source: Source) -> SymIntVariable:
        """An int or float of the frame read by the graph as an input
        (``ShapePolicy.number_is_input``): its type is guarded, its value only where
        Python uses it (a guard per relation, as for dynamic sizes)."""
        key = source.name()
        if key in self._input_by_source:
            return cast(SymIntVariable, self._input_by_source[key])
        self.guards.add(source, guards.TYPE_MATCH, type(value))
        node = self._placeholder(source)
        node.meta["number_input"] = True
        var = SymIntVariable(self, node, value, ("value", source), source=source)
        self.inputs.append((source, node, value))
        self._input_by_source[key] = var
        return var

    def add_array_input(self, array: Any, source: Source) -> TensorVariable:
        """A NumPy array of the frame read by NumPy code in the graph: its type, dtype and
        shape are guarded, its values are an input (``paddle.to_tensor`` of it on each
        call), so one capture serves every value."""
        key = source.name()
        if key in self._input_by_source:
            return cast(TensorVariable, self._input_by_source[key])
        self.guards.add(source, guards.TYPE_MATCH, type(array))
        self.guards.add(AttrSource(source, "dtype"), guards.CONSTANT_MATCH, array.dtype)
        self.guards.add(AttrSource(source, "shape"), guards.CONSTANT_MATCH, array.shape)
        as_tensor = ArrayAsTensorSource(source)
        node = self._placeholder(source)
        example = paddle.to_tensor(array)
        self._set_meta(node, example)
        var = TensorVariable(node, example, as_tensor)
        self.inputs.append((as_tensor, node, example))
        self._input_by_source[key] = var
        return var

    def _placeholder(self, source: Source):
        # placeholders go first, in the order the inputs were met
        first = next(iter(self.graph.nodes), None)
        name = self._unique_placeholder_name(attr_path(source))
        if first is not None:
            anchor = self._last_placeholder()
            if anchor is None:
                with self.graph.inserting_before(first):
                    node = self.graph.placeholder(name)
            else:
                with self.graph.inserting_after(anchor):
                    node = self.graph.placeholder(name)
        else:
            node = self.graph.placeholder(name)
        node.meta["source"] = source.name()
        return node

    def _last_placeholder(self):
        last = None
        for n in self.graph.nodes:
            if n.op == "placeholder":
                last = n
            else:
                break
        return last

    def _unique_placeholder_name(self, hint: str) -> str:
        base = _identifier(hint)
        used = {n.name for n in self.graph.nodes}
        name, i = base, 1
        while name in used:
            name = f"{base}_{i}"
            i += 1
        return name

    def register_object(self, obj: Any, source: Optional[Source]) -> str:
        if id(obj) in self._root_ids:
            return self._root_ids[id(obj)]
        base = _identifier(attr_path(source) if source is not None else type(obj).__name__.lower())
        name, i = base, 1
        while name in self.root:
            name = f"{base}_{i}"
            i += 1
        self.root[name] = obj
        self._root_ids[id(obj)] = name
        self._root_sources[name] = source
        return name

    def get_attr(self, tx, tensor, source: Optional[Source]) -> TensorVariable:
        if id(tensor) in self._attr_vars:
            return self._attr_vars[id(tensor)]
        name = self.register_object(tensor, source)
        node = self.graph.get_attr(name)
        self._set_meta(node, tensor)
        var = TensorVariable(node, tensor, source)
        self._attr_vars[id(tensor)] = var
        return var

    # ------------------------------------------------------------ operations
    def _set_meta(self, node, example) -> None:
        node.meta["shape"] = list(example.shape)
        node.meta["dtype"] = str(example.dtype).replace("paddle.", "")
        self._buffers[node] = buffer_key(example)

    def call_function(
        self, tx, fn, args: List[VariableTracker], kwargs: Dict[str, VariableTracker], run=None
    ):
        """``fn(*args, **kwargs)`` as a node; ``run``, where given, is what the capture
        calls on the examples instead of ``fn`` (the deprecation wrapper of a function
        whose node calls it unwrapped)."""
        return self._record(tx, "call_function", fn, run or fn, args, kwargs)

    def call_method(self, tx, name: str, args: List[VariableTracker], kwargs):
        def run(obj, *a, **k):
            return getattr(obj, name)(*a, **k)

        return self._record(tx, "call_method", name, run, args, kwargs)

    def call_module(self, tx, layer_var, args, kwargs):
        layer = layer_var.value
        target = self.register_object(layer, layer_var.source)

        def run(*a, **k):
            return run_leaf_layer(layer, a, k)

        return self._record(tx, "call_module", target, run, args, kwargs)

    def _run_example(self, op: str, target, run, args, kwargs) -> Any:
        """The operation run once on the example values, without gradients."""
        if self.effects:
            self.refuse_after_effects(operation_words(op, target))
        ex_args = [example_of(a) for a in args]
        ex_kwargs = {k: example_of(v) for k, v in kwargs.items()}
        try:
            with paddle.no_grad():
                return run(*ex_args, **ex_kwargs)
        except Unsupported:
            raise
        except Exception as e:
            what = target if isinstance(target, str) else getattr(target, "__name__", repr(target))
            raise Unsupported(raised_at_capture(what, e), category=RAISES) from e

    def _create_node(self, tx, op: str, target, args, kwargs):
        if not self.sized_by_numbers and not (op == "call_function" and target in _ELEMENTWISE):
            # x * i keeps x's shape; zeros([i, 4]), x.sum(axis=i), x[:i] may not: sizes of
            # tensors made from then on are symbolic (each read where Python needs it
            # asks Paddle's shape inference, which costs a static build)
            if any(_reads_number_input(a) for a in list(args) + list(kwargs.values())):
                self.sized_by_numbers = True
        node_args = tuple(node_arg_of(a) for a in args)
        node_kwargs = {k: node_arg_of(v) for k, v in kwargs.items()}
        node = self.graph.create_node(op, target, node_args, node_kwargs)
        if tx is not None:
            node.meta["source_loc"] = tx.location()
        return node

    def _record(self, tx, op: str, target, run, args, kwargs) -> VariableTracker:
        drawing = may_draw(target)
        if drawing:
            self.draws.before()
        result = self._run_example(op, target, run, args, kwargs)
        node = self._create_node(tx, op, target, args, kwargs)
        if drawing and is_random(node):
            self.draws.after(node)
        out = self._wrap_result(node, result)
        if self.entry_grad_mode and not self.grad_mode():
            out = self._detached(out)
        return out

    def _wrap_result(self, node, result) -> VariableTracker:
        if isinstance(result, paddle.Tensor):
            self._set_meta(node, result)
            return TensorVariable(node, result)
        if isinstance(result, (tuple, list)) and all(
            isinstance(r, (paddle.Tensor, tuple, list)) for r in result
        ):
            items = []
            for i, r in enumerate(result):
                item_node = self.graph.call_function(operator.getitem, (node, i))
                items.append(self._wrap_result(item_node, r))
            return (TupleVariable if isinstance(result, tuple) else ListVariable)(items)
        what = _operation_name(node)
        if result is None:
            raise Unsupported(
                f"{what} returned None: it works by side effect, which is not captured yet",
                category=SIDE_EFFECT,
            )
        if not node.all_input_nodes:
            # no tensor went in: a Python object of Paddle's (a tracker, a config)
            raise Unsupported(
                f"{what} returned a Python {type(result).__name__}, which the capture does "
                "not follow",
                category=UNTRACED_CALL,
            )
        raise Unsupported(
            f"{what} returned a Python {type(result).__name__}, a value computed "
            "from tensor data that would leave the graph",
            category=DATA_LEAVES_GRAPH,
        )

    # ------------------------------------------------------------ results
    def set_outputs(self, tensors: List[TensorVariable]) -> List[TensorVariable]:
        """The graph returns ``tensors``, then what its effects take (``effect_tensors``)
        that is not among them; ``effect_outputs`` says where each of those is. Returns
        every output."""
        outputs = list(tensors)
        self.effect_outputs = []
        for t in self.effect_tensors:
            found = next((i for i, o in enumerate(outputs) if o.node is t.node), None)
            if found is None:
                outputs.append(t)
                found = len(outputs) - 1
            self.effect_outputs.append(found)
        self.graph.output(tuple(t.node for t in outputs))
        return outputs


def _operation_name(node) -> str:
    """A node's operation in words, for break reasons (never the raw node)."""
    return operation_words(node.op, node.target)


def operation_words(op: str, target) -> str:
    """An operation (a node's ``op`` and ``target``) in words."""
    if op == "call_method":
        return f"tensor method .{target}()"
    if op == "call_module":
        return f"layer {target}"
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    if name is None:
        return f"a call of {type(target).__name__}"
    return f"{mod}.{name}()" if mod else f"{name}()"


__all__ = ["OutputGraph", "ConstantVariable", "example_of", "node_arg_of"]
