"""The handler registry: versions, families, plugin overrides, and missing handlers."""

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
from jit_opcodes.registry import ALL_VERSIONS, HANDLERS, handler, versions

RUNNING = "{}.{}".format(*sys.version_info[:2])
ADD_OPCODE = "BINARY_OP" if sys.version_info >= (3, 11) else "BINARY_ADD"


@pytest.fixture(autouse=True)
def fresh_plugins():
    plugins.reset_plugins()
    yield
    plugins.reset_plugins()


def test_versions_helper():
    assert versions() == ALL_VERSIONS
    assert versions("3.11") == ("3.11", "3.12")
    assert versions("3.8", "3.10") == ("3.8", "3.9", "3.10")
    with pytest.raises(ValueError, match="unknown Python version"):
        handler("NOP", versions=["2.7"])


def test_registry_is_built_once_for_the_running_python():
    table = plugins.opcode_handlers()
    assert plugins.opcode_handlers() is table
    jit_opcodes.load_families()
    serving = {name for name, _, vs, _ in HANDLERS if RUNNING in vs}
    assert set(table) == serving
    for name, h in table.items():
        assert name in dis.opmap, f"{name} is not an opcode of Python {RUNNING}"
        assert h.plugin == "opcodes" and h.priority == 0
    # handlers declared only for other versions are not in the table
    foreign = {name for name, _, vs, _ in HANDLERS if RUNNING not in vs} - serving
    assert not foreign & set(table)


def test_one_module_per_family():
    jit_opcodes.load_families()
    families = {family for _, _, _, family in HANDLERS}
    assert families == set(jit_opcodes.FAMILIES)
    for family in jit_opcodes.FAMILIES:
        module = importlib.import_module(f"jit_opcodes.{family}")
        assert module.__doc__, f"jit_opcodes.{family} says what family it holds"


def add(x, y):
    return x + y


class CountingAdd:
    """A plugin that takes over the add opcode, delegating to the built-in handler."""

    def __init__(self):
        self.calls = 0
        jit_opcodes.load_families()
        self.original = next(
            fn for name, fn, vs, _ in HANDLERS if name == ADD_OPCODE and RUNNING in vs
        )

    @jit_core.hookimpl
    def jit_register_opcodes(self, register):
        def counting(tx, inst):
            self.calls += 1
            return self.original(tx, inst)

        register(ADD_OPCODE, counting, versions=ALL_VERSIONS)


def test_a_plugin_overrides_a_builtin_handler():
    plugin = CountingAdd()
    plugins.register_plugin(plugin, name="counting-add")
    assert plugins.opcode_handlers()[ADD_OPCODE].plugin == "counting-add"
    fast = jit_core.optimize(add)
    x, y = paddle.rand([3]), paddle.rand([3])
    np.testing.assert_allclose(fast(x, y).numpy(), (x + y).numpy())
    assert plugin.calls == 1
    fast(x, y)  # a cache hit does not run the executor again
    assert plugin.calls == 1


def test_an_opcode_without_handler_runs_eagerly_and_is_named(monkeypatch):
    table = dict(plugins.opcode_handlers())
    del table[ADD_OPCODE]
    monkeypatch.setattr(plugins, "_opcodes", table)
    x, y = paddle.rand([3]), paddle.rand([3])
    fast = jit_core.optimize(add)
    np.testing.assert_allclose(fast(x, y).numpy(), (x + y).numpy())
    reason = fast.jit_stats.eager_frames["add"]
    assert f"no handler for opcode {ADD_OPCODE}" in reason
    report = jit_core.explain(add, x, y)
    assert report.graph_count == 0 and report.break_count == 1
    assert ADD_OPCODE in str(report)
