"""The opcode registry: declared versions, what the running interpreter gets, and plugins
that override a handler."""

from __future__ import annotations

import dis
import importlib
import sys

import numpy as np
import paddle
import pytest

import jit_core
import jit_opcodes
from jit_core import plugins
from jit_core.api import frame_key
from jit_core.bytecode import compat
from jit_core.errors import GraphBreakError, Unsupported
from jit_opcodes import plugin as opcodes_plugin
from jit_opcodes.registry import ALL_VERSIONS, HANDLERS, handler, versions

RUNNING = f"{sys.version_info[0]}.{sys.version_info[1]}"
ADD_OPNAME = "BINARY_OP" if sys.version_info >= (3, 11) else "BINARY_ADD"


@pytest.fixture
def fresh_plugins():
    """Plugins registered inside the test are gone afterwards."""
    registered = []

    def register(obj, name):
        plugins.register_plugin(obj, name=name)
        registered.append(obj)

    try:
        yield register
    finally:
        pm = plugins.get_plugin_manager()
        for obj in registered:
            if pm.is_registered(obj):
                pm.unregister(obj)
        plugins.reset_plugins()


def own_handlers():
    jit_opcodes.load_families()
    return [(d.opname, d.fn, d.versions, d.family) for d in HANDLERS]


# ---------------------------------------------------------------------------- registry


def test_running_version_is_known():
    assert RUNNING == compat.VERSION_STR
    assert RUNNING in ALL_VERSIONS


def test_registry_is_built_once():
    first = plugins.opcode_handlers()
    second = plugins.opcode_handlers()
    assert first is second
    assert len(first) > 40


def test_every_handler_declares_known_versions():
    entries = own_handlers()
    assert entries
    for opname, fn, vs, family in entries:
        assert vs, f"{opname} declares no version"
        assert isinstance(vs, tuple)
        assert set(vs) <= set(ALL_VERSIONS), (opname, vs)
        assert callable(fn)
        assert family in jit_opcodes.FAMILIES
        assert opname.isupper() and opname.isidentifier()


def test_only_running_version_handlers_are_registered():
    registry = plugins.opcode_handlers()
    serving = {}
    for opname, fn, vs, _ in own_handlers():
        if RUNNING in vs:
            assert opname not in serving, f"two handlers of {opname} on {RUNNING}"
            serving[opname] = fn
    declared_elsewhere = {op for op, _, vs, _ in own_handlers() if RUNNING not in vs}

    ours = {op: h for op, h in registry.items() if h.plugin == "opcodes"}
    # installed opcode plugins (examples/opcode-plugin in the test venvs) win over ours
    taken_over = {op for op, h in registry.items() if h.plugin != "opcodes"}
    assert set(ours) == set(serving) - taken_over
    for opname, h in ours.items():
        assert h.handler is serving[opname]
        assert h.priority == 0
    # an opcode declared only for other versions is absent here
    for opname in declared_elsewhere - set(serving):
        assert opname not in registry


def test_every_registered_opname_exists_in_this_python():
    registry = plugins.opcode_handlers()
    missing = sorted(op for op in registry if op not in dis.opmap)
    assert missing == []
    assert "RETURN_VALUE" in registry
    assert ADD_OPNAME in registry


def test_version_specific_opcodes():
    registry = plugins.opcode_handlers()
    if sys.version_info >= (3, 11):
        assert "BINARY_ADD" not in registry
        assert "BINARY_OP" in registry
    else:
        assert "BINARY_OP" not in registry
        assert "BINARY_ADD" in registry


def test_versions_helper():
    assert versions() == ALL_VERSIONS
    assert versions("3.11") == ("3.11", "3.12", "3.13")
    assert versions(last="3.10") == ("3.8", "3.9", "3.10")
    assert versions("3.9", "3.9") == ("3.9",)
    assert versions("3.10", "3.9") == ()
    with pytest.raises(ValueError):
        versions("2.7")


def test_handler_decorator_rejects_unknown_versions():
    before = len(HANDLERS)
    with pytest.raises(ValueError, match="3.99"):
        handler("NOP", versions=["3.99"])
    assert len(HANDLERS) == before


def test_handler_decorator_records_family_and_returns_function():
    before = list(HANDLERS)
    try:

        def fake(tx, inst):
            return None

        fake.__module__ = "jit_opcodes.somefamily"
        out = handler("FAKE_ONE", "FAKE_TWO", versions=versions("3.10", "3.11"))(fake)
        assert out is fake
        added = HANDLERS[len(before) :]
        assert added == [
            ("FAKE_ONE", fake, ("3.10", "3.11"), "somefamily", None),
            ("FAKE_TWO", fake, ("3.10", "3.11"), "somefamily", None),
        ]
    finally:
        HANDLERS[:] = before


def test_a_module_per_family():
    assert set(jit_opcodes.FAMILIES) == {
        "load_store",
        "stack",
        "arithmetic",
        "containers",
        "calls",
        "jumps",
        "closures",
        "exceptions",
        "imports",
        "matching",
        "generators",
    }
    per_family = {}
    for opname, _, _, family in own_handlers():
        per_family.setdefault(family, set()).add(opname)
    for family in jit_opcodes.FAMILIES:
        mod = importlib.import_module(f"jit_opcodes.{family}")
        assert mod.__name__ == f"jit_opcodes.{family}"
        assert per_family.get(family), f"family {family} declares no handler"
    assert set(per_family) == set(jit_opcodes.FAMILIES)
    # a few handlers sit where their family says
    fams = {op: fam for op, _, vs, fam in own_handlers() if RUNNING in vs}
    assert fams["LOAD_FAST"] == "load_store"
    assert fams[ADD_OPNAME] == "arithmetic"
    assert fams["BUILD_TUPLE"] == "containers"


def test_plugin_hook_registers_everything_at_priority_zero():
    calls = []
    opcodes_plugin.jit_register_opcodes(
        register=lambda op, fn, vs, priority=10, break_as=None: calls.append(
            (op, fn, tuple(vs), priority, break_as)
        )
    )
    assert len(calls) == len(own_handlers())
    assert {c[3] for c in calls} == {0}
    assert [(op, fn, vs) for op, fn, vs, _, _ in calls] == [
        (op, fn, vs) for op, fn, vs, _ in own_handlers()
    ]
    # the break kinds travel with the handlers: calls, branches and stores can break
    kinds = {c[0]: c[4] for c in calls if c[4] is not None}
    assert {"STORE_ATTR", "STORE_SUBSCR", "GET_ITER", "POP_JUMP_IF_FALSE"} <= set(kinds)
    assert {"CALL_FUNCTION", "CALL"} & set(kinds)


# ---------------------------------------------------------------------------- overrides


class AddRecorder:
    """Overrides the add opcode with a wrapper around the original handler."""

    def __init__(self, original, priority=None, serve=(RUNNING,)):
        self.original = original
        self.priority = priority
        self.serve = serve
        self.seen = []

    def wrapper(self, tx, inst):
        # only the test's own function: graph passes capture their pattern functions
        # through the same handlers the first time they run in a process
        if tx.code is add.__code__:
            self.seen.append(inst.opname)
        return self.original(tx, inst)

    @jit_core.hookimpl
    def jit_register_opcodes(self, register):
        if self.priority is None:
            register(ADD_OPNAME, self.wrapper, self.serve)
        else:
            register(ADD_OPNAME, self.wrapper, self.serve, priority=self.priority)


def add(x, y):
    return x + y


def test_plugin_overrides_an_opcode(fresh_plugins):
    original = plugins.opcode_handlers()[ADD_OPNAME]
    assert original.plugin == "opcodes"
    rec = AddRecorder(original.handler)
    fresh_plugins(rec, "add-recorder")

    registry = plugins.opcode_handlers()
    assert registry[ADD_OPNAME].handler == rec.wrapper
    assert registry[ADD_OPNAME].plugin == "add-recorder"
    assert registry[ADD_OPNAME].priority == 10  # the default beats jit-opcodes' 0
    assert registry["LOAD_FAST"].plugin == "opcodes"  # everything else untouched

    of = jit_core.optimize(add)
    x, y = paddle.randn([4, 4]), paddle.randn([4, 4])
    np.testing.assert_allclose(of(x, y).numpy(), (x + y).numpy())
    assert rec.seen == [ADD_OPNAME]
    assert of.jit_stats.compiled == 1
    of(x, y)  # a cache hit does not simulate bytecode again
    assert rec.seen == [ADD_OPNAME]


def test_lower_priority_plugin_does_not_override(fresh_plugins):
    original = plugins.opcode_handlers()[ADD_OPNAME]
    rec = AddRecorder(original.handler, priority=-1)
    fresh_plugins(rec, "add-recorder-low")
    assert plugins.opcode_handlers()[ADD_OPNAME].plugin == "opcodes"
    of = jit_core.optimize(add)
    x = paddle.ones([4])
    np.testing.assert_allclose(of(x, x).numpy(), (x + x).numpy())
    assert rec.seen == []


def test_plugin_for_another_version_is_ignored(fresh_plugins):
    original = plugins.opcode_handlers()[ADD_OPNAME]
    others = tuple(v for v in ALL_VERSIONS if v != RUNNING)
    rec = AddRecorder(original.handler, serve=others)
    fresh_plugins(rec, "add-recorder-other")
    assert plugins.opcode_handlers()[ADD_OPNAME].plugin == "opcodes"


def test_plugin_handler_raising_unsupported_runs_eagerly(fresh_plugins):
    class Refuse:
        @jit_core.hookimpl
        def jit_register_opcodes(self, register):
            def refuse(tx, inst):
                raise Unsupported("the test plugin refuses additions")

            register(ADD_OPNAME, refuse, [RUNNING])

    fresh_plugins(Refuse(), "refuse-add")
    x = paddle.full([4], 2.0)
    out = jit_core.explain(add, x, x)
    np.testing.assert_allclose(out.result.numpy(), (x + x).numpy())
    assert out.graph_count == 0 and out.break_count == 1
    brk = out.breaks[0]
    assert brk.reason == "the test plugin refuses additions"
    assert brk.location == f"{__file__}:{add.__code__.co_firstlineno + 1}"
    assert ADD_OPNAME in brk.instruction


# ---------------------------------------------------------------------------- unhandled


def set_display(x, n):
    s = {n, 1}
    return x * len(s)


@pytest.fixture
def unhandled_candidate(monkeypatch):
    """An opcode with no handler: every opcode of 3.8-3.12 has one now, so BUILD_SET's is
    taken away for the test (the situation of a new Python, or of an opcode nobody
    claimed yet)."""
    registry = dict(plugins.opcode_handlers())
    registry.pop("BUILD_SET", None)
    monkeypatch.setattr(plugins, "_opcodes", registry)
    assert "BUILD_SET" in {i.opname for i in dis.get_instructions(set_display)}
    return "BUILD_SET", set_display


def test_unhandled_opcode_runs_eagerly_and_is_named(unhandled_candidate):
    opname, fn = unhandled_candidate
    x = paddle.full([4, 4], 1.5)
    expected = fn(x, 3)
    out = jit_core.explain(fn, x, 3)
    np.testing.assert_allclose(out.result.numpy(), expected.numpy())
    assert out.graph_count == 0
    assert out.break_count == 1
    reason = out.breaks[0].reason
    assert opname in reason
    assert f"Python {RUNNING}" in reason
    assert opname in str(out)

    of = jit_core.optimize(fn)
    for n in (3, 4):
        np.testing.assert_allclose(of(x, n).numpy(), fn(x, n).numpy())
    assert opname in of.jit_stats.eager_frames[frame_key(fn)]
    assert of.jit_stats.captures == 1  # eager for good, no capture per call


def test_unhandled_opcode_under_full_graph(unhandled_candidate):
    opname, fn = unhandled_candidate
    with pytest.raises(GraphBreakError, match=opname):
        jit_core.optimize(fn, full_graph=True)(paddle.ones([4]), 3)


def test_unhandled_opcode_break_has_location(unhandled_candidate):
    opname, fn = unhandled_candidate
    out = jit_core.explain(fn, paddle.ones([4]), 3)
    brk = out.breaks[0]
    assert brk.location == f"{__file__}:{fn.__code__.co_firstlineno + 1}"
    assert brk.instruction is not None and opname in brk.instruction


def test_a_handler_taken_away_is_named_with_its_location(monkeypatch):
    # independent of which opcodes happen to lack a handler today
    add_op = "BINARY_OP" if "BINARY_OP" in dis.opmap else "BINARY_ADD"

    def add(x, y):
        return x + y

    table = dict(plugins.opcode_handlers())
    del table[add_op]
    monkeypatch.setattr(plugins, "_opcodes", table)
    x, y = paddle.rand([3]), paddle.rand([3])
    fast = jit_core.optimize(add)
    np.testing.assert_allclose(fast(x, y).numpy(), (x + y).numpy())
    assert f"no handler for opcode {add_op}" in fast.jit_stats.eager_frames[frame_key(add)]
    brk = jit_core.explain(add, x, y).breaks[0]
    assert brk.location == f"{__file__}:{add.__code__.co_firstlineno + 1}"
    assert brk.instruction.startswith(add_op)


# ---------------------------------------------------------------------------- break kinds


class StoreAttrOverride:
    """Takes STORE_ATTR over with the handler of jit-opcodes, with its own break kind."""

    def __init__(self, break_as):
        self.break_as = break_as
        self.original = plugins.opcode_handlers()["STORE_ATTR"].handler

    @jit_core.hookimpl
    def jit_register_opcodes(self, register):
        register("STORE_ATTR", self.original, (RUNNING,), break_as=self.break_as)


class Box:
    # no __dict__: a store on it is a side effect the capture leaves to Python (one on a
    # plain object is written back after the graph instead)
    __slots__ = ("value",)


def stores_an_attribute(x, box):
    y = x + 1
    box.value = y
    return y * 2


def test_the_break_at_an_opcode_is_what_its_handler_registers(fresh_plugins):
    from jit_core.spi import RunsInPython

    x = paddle.ones([3])
    ours = jit_core.explain(stores_an_attribute, x, Box())
    assert ours.breaks[0].graph_break and ours.graph_count == 2

    # a handler that registers no break kind: a frame that stops there runs eagerly
    fresh_plugins(StoreAttrOverride(None), "store-attr-no-break")
    box = Box()
    report = jit_core.explain(stores_an_attribute, x, box)
    assert not report.breaks[0].graph_break and report.graph_count == 0, str(report)
    np.testing.assert_allclose(box.value.numpy(), (x + 1).numpy())

    # with one, it breaks as it says
    fresh_plugins(StoreAttrOverride(RunsInPython(pops=2)), "store-attr-breaks")
    box = Box()
    report = jit_core.explain(stores_an_attribute, x, box)
    assert report.breaks[0].graph_break and report.graph_count == 2, str(report)
    np.testing.assert_allclose(report.result.numpy(), ((x + 1) * 2).numpy())
    np.testing.assert_allclose(box.value.numpy(), (x + 1).numpy())


def test_a_plugin_break_kind_must_be_one_jit_core_knows(fresh_plugins):
    fresh_plugins(StoreAttrOverride("after the graph"), "store-attr-bad")
    with pytest.raises(TypeError, match="store-attr-bad.*STORE_ATTR.*BreakKind"):
        plugins.opcode_handlers()
