"""``python -m jit_opcodes matrix [--rst] [--check] [--coverage DIR]``: the opcode support
matrix, and which of its cells the conformance tests exercise on the running Python."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jit_opcodes")
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("matrix", help="opcode x Python version: what jit-core does with each")
    m.add_argument("--rst", action="store_true", help="as a reStructuredText table (the docs)")
    m.add_argument(
        "--coverage",
        metavar="DIR",
        help="also list, for the running Python, the tests of DIR (a package of test "
        "modules, e.g. conformance/opcodes) that exercise each opcode",
    )
    m.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if an opcode that can occur has no handler, or (with --coverage) no "
        "test on the running Python",
    )
    args = parser.parse_args(argv)

    import warnings

    warnings.filterwarnings("ignore")
    from .matrix import NO_HANDLER, build, render_coverage, render_rst, render_text, untested

    table = build()
    sys.stdout.write(render_rst(table) if args.rst else render_text(table) + "\n")
    failed = False
    if args.coverage:
        from . import coverage

        version = "{}.{}".format(*sys.version_info[:2])
        coverage.load_tests(args.coverage)
        covered = coverage.covered()
        sys.stdout.write("\n" + render_coverage(table, version, covered) + "\n")
        failed = bool(untested(table, version, covered))
    if args.check:
        missing = sorted(
            f"{name} ({v})"
            for name, row in table.items()
            for v, cell in row.items()
            if cell.status == NO_HANDLER
        )
        if missing:
            print(
                f"\n{len(missing)} cells without a handler: {', '.join(missing)}", file=sys.stderr
            )
            failed = True
        return int(failed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
