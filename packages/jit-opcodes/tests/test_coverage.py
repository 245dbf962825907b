"""jit_opcodes.coverage: a test's declared opcodes are checked with dis before it runs, and
the declarations tell which cells of the matrix no test exercises."""

from __future__ import annotations

import sys
import textwrap

import pytest

from jit_opcodes import coverage, matrix


def adds(a, b):
    return a + b


def builds_a_list(a):
    return [a, a]


ADD = "BINARY_ADD|BINARY_OP"  # 3.11 folded the binary operators into BINARY_OP


@pytest.fixture
def declarations(monkeypatch):
    fresh: list = []
    monkeypatch.setattr(coverage, "DECLARATIONS", fresh)
    return fresh


def test_opcodes_of_reads_nested_code():
    def outer(a):
        return [x for x in a]

    found = coverage.opcodes_of(outer)
    assert "LIST_APPEND" in found  # in the comprehension's own code before 3.12, inlined on 3.12
    assert coverage.opcodes_of(adds.__code__) == coverage.opcodes_of(adds)


def test_a_declared_test_runs_only_when_its_opcodes_occur(declarations):
    ran = []

    @coverage.covers(adds, ADD)
    def test_ok():
        ran.append("ok")

    @coverage.covers(builds_a_list, ADD)
    def test_stale():
        ran.append("stale")

    test_ok()
    with pytest.raises(AssertionError, match="contains none of"):
        test_stale()
    assert ran == ["ok"]
    assert [d.fn for d in declarations] == [adds, builds_a_list]


def test_a_test_must_cover_something_on_this_python(declarations):
    @coverage.covers(adds, "NO_SUCH_OPCODE")
    def test_nothing():
        pass

    with pytest.raises(AssertionError, match="covers nothing here"):
        test_nothing()


def test_covered_counts_the_alternatives_that_occur_and_skips_skipped_tests(declarations):
    @coverage.covers(builds_a_list, "BUILD_LIST", "BUILD_SET|BUILD_LIST")
    def test_lists():
        pass

    @pytest.mark.skipif(True, reason="never runs")
    @coverage.covers(adds, ADD)
    def test_skipped():
        pass

    covered = coverage.covered()
    assert covered["BUILD_LIST"] == ["test_coverage::" + test_lists.__qualname__]
    assert "BUILD_SET" not in covered
    assert not any(op in covered for op in ADD.split("|"))


def test_untested_lists_the_cells_that_can_occur_without_a_test():
    table = matrix.build()
    running = "{}.{}".format(*sys.version_info[:2])
    everything = {name: ["t"] for name in table}
    assert matrix.untested(table, running, everything) == []
    missing = matrix.untested(table, running, {})
    assert "LOAD_FAST" in missing
    assert "LOAD_NAME" not in missing  # n/a: module and class bodies only
    text = matrix.render_coverage(table, running, {"LOAD_FAST": ["t"]})
    assert "NOT TESTED" in text and "untested:" in text


def test_load_tests_imports_a_package_of_tests(tmp_path, declarations):
    pkg = tmp_path / "opcases"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "test_one.py").write_text(
        textwrap.dedent(
            """
            from jit_opcodes.coverage import covers

            def f(a):
                return [a]

            @covers(f, "BUILD_LIST")
            def test_f():
                pass
            """
        )
    )
    assert coverage.load_tests(str(pkg)) == ["opcases.test_one"]
    assert "BUILD_LIST" in coverage.covered()
    with pytest.raises(ValueError, match="not a package"):
        coverage.load_tests(str(tmp_path))
