"""The proof that the opcode tests are complete: on the running Python, every opcode that
can occur in a captured function (a symbolic, eager or no-handler cell of the support
matrix) occurs in a function that a test of this package runs (checked with ``dis``);
the rest are n/a with their reason."""

from __future__ import annotations

import os
import subprocess
import sys

from jit_opcodes import coverage, matrix

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNING = "{}.{}".format(*sys.version_info[:2])


def test_every_opcode_that_can_occur_is_tested():
    coverage.load_tests(HERE)
    table = matrix.build()
    missing = matrix.untested(table, RUNNING, coverage.covered())
    assert not missing, f"no opcode test exercises these on {RUNNING}: {', '.join(missing)}"


def test_the_matrix_command_proves_it():
    env = dict(os.environ, GLOG_minloglevel="2")
    done = subprocess.run(
        [sys.executable, "-m", "jit_opcodes", "matrix", "--check", "--coverage", HERE],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"that can occur on {RUNNING} is tested" in done.stdout
    assert "NOT TESTED" not in done.stdout
