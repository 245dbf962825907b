"""The support matrix: its opmap snapshots, its cells, the docs table and the command."""

from __future__ import annotations

import dis
import os
import subprocess
import sys

import pytest

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
    for opname, fn, versions, family, _break_as in HANDLERS:
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


def test_every_declared_break_names_how_jit_core_breaks():
    import jit_opcodes
    from jit_core.spi import BreakKind

    # the families register their handlers when imported: in a pytest worker that ran
    # nothing else of jit-opcodes' yet, HANDLERS is still empty
    jit_opcodes.load_families()
    declared = [d for d in HANDLERS if getattr(d.fn, "break_reason", None)]
    assert declared
    for d in declared:
        assert isinstance(d.break_as, BreakKind), d
        assert matrix.build()[d.opname][d.versions[0]].status == matrix.BREAKS


def test_a_break_without_a_break_kind_is_refused_when_declared():
    # a plugin cannot declare a break jit-core does not know how to make
    from jit_opcodes.registry import handler

    with pytest.raises(ValueError, match="needs break_as"):
        handler("NOP", breaks="a side effect")
    with pytest.raises(TypeError, match="BreakKind"):
        handler("NOP", break_as="anywhere")
