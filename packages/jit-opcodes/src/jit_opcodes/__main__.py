"""``python -m jit_opcodes matrix [--rst] [--check]``: the opcode support matrix."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jit_opcodes")
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("matrix", help="opcode x Python version: what jit-core does with each")
    m.add_argument("--rst", action="store_true", help="as a reStructuredText table (the docs)")
    m.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if an opcode that can occur has no handler",
    )
    args = parser.parse_args(argv)

    import warnings

    warnings.filterwarnings("ignore")
    from .matrix import NO_HANDLER, build, render_rst, render_text

    table = build()
    sys.stdout.write(render_rst(table) if args.rst else render_text(table) + "\n")
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
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
