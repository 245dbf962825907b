"""The support matrix: its opmap snapshots, its cells, the docs table and the command."""

from __future__ import annotations

import dis
import os
import subprocess
import sys

from jit_opcodes import matrix
from jit_opcodes.registry import ALL_VERSIONS, HANDLERS

RUNNING = f"{sys.version_info[0]}.{sys.version_info[1]}"
DOCS_TABLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "opcode-matrix.inc")


def test_the_snapshot_of_this_python_is_its_opmap():
    assert matrix.opmaps()[RUNNING] == dict(dis.opmap)


def test_every_opcode_of_every_version_has_a_cell():
    table = matrix.build()
    maps = matrix.opmaps()
    for v in ALL_VERSIONS:
        for name, row in table.items():
            assert (row[v].status == matrix.ABSENT) == (name not in maps[v]), (name, v)
            if row[v].status in (matrix.EAGER, matrix.NOT_APPLICABLE):
                assert row[v].reason, (name, v)


def test_declared_handlers_are_symbolic_or_eager_with_their_reason():
    table = matrix.build()
    for opname, fn, versions, family in HANDLERS:
        for v in versions:
            cell = table[opname][v]
            if (opname, v) in matrix.NOT_EMITTED:
                assert cell == matrix.Cell(matrix.NOT_APPLICABLE, matrix.NOT_EMITTED[(opname, v)])
            elif getattr(fn, "eager_reason", None):
                assert cell == matrix.Cell(matrix.EAGER, fn.eager_reason)
            elif getattr(fn, "break_reason", None):
                assert cell == matrix.Cell(matrix.BREAKS, fn.break_reason)
            else:
                assert cell == matrix.Cell(matrix.SYMBOLIC, family)
    assert table["BEFORE_WITH"]["3.11"].status == matrix.SYMBOLIC
    assert table["LOAD_NAME"]["3.10"].status == matrix.NOT_APPLICABLE
    assert table["SETUP_FINALLY"]["3.12"].reason.startswith("a pseudo-instruction")
    assert table["YIELD_VALUE"]["3.8"].status == matrix.SYMBOLIC
    assert table["YIELD_FROM"]["3.8"].status == matrix.EAGER


def test_the_docs_show_the_current_table():
    with open(DOCS_TABLE, encoding="utf-8") as f:
        committed = f.read()
    assert committed == matrix.render_rst(matrix.build()), (
        "docs/opcode-matrix.inc is stale: python -m jit_opcodes matrix --rst > "
        "docs/opcode-matrix.inc"
    )


def test_the_command_prints_the_matrix_and_checks_for_gaps():
    env = dict(os.environ, GLOG_minloglevel="2")
    run = [sys.executable, "-m", "jit_opcodes", "matrix"]
    out = subprocess.run(run, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "RETURN_VALUE" in out.stdout and "3.12: " in out.stdout
    check = subprocess.run(run + ["--check"], capture_output=True, text=True, env=env, timeout=300)
    gaps = [
        n
        for n, row in matrix.build().items()
        if matrix.NO_HANDLER in (c.status for c in row.values())
    ]
    assert (check.returncode == 1) == bool(gaps)
    for name in gaps:
        assert name in check.stderr


def test_opcodes_declared_to_break_are_ones_jit_core_can_break_at():
    from jit_core.codegen import breaks

    breakable = set(breaks.NATIVE) | set(breaks.CALLS) | set(breaks.JUMPS)
    declared = {name for name, fn, _, _ in HANDLERS if getattr(fn, "break_reason", None)}
    assert declared and declared <= breakable, declared - breakable


def test_a_declared_break_the_core_cannot_make_is_eager(monkeypatch):
    # a plugin may declare breaks="..." for an opcode; the matrix says what jit-core does
    def handler(tx, inst):  # pragma: no cover - never run
        raise AssertionError

    handler.break_reason = "a side effect"
    extra = [("NOP", handler, ("3.12",), "plugin"), ("STORE_ATTR", handler, ("3.12",), "plugin")]
    monkeypatch.setattr(matrix, "HANDLERS", list(matrix.HANDLERS) + extra)
    table = matrix.build()
    assert table["NOP"]["3.12"].status == matrix.EAGER
    assert "cannot break the graph at NOP" in table["NOP"]["3.12"].reason
    assert table["STORE_ATTR"]["3.12"] == matrix.Cell(matrix.BREAKS, "a side effect")
