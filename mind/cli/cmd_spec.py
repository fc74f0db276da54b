"""`mind spec`: the op table (name, operands, attributes, dtypes, constraint labels)."""

from __future__ import annotations

import argparse

NAME = "spec"
HELP = "print the Core IR op table"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.add_argument("--op", metavar="NAME", help="show one op in full")


def run(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.diagnostics import error
    from mind.spec.table import op_record, op_table_text
    from mind.spec.ops import OPS

    ops = list(OPS.values())
    if args.op:
        if args.op not in OPS:  # a command-line argument, so a usage error (exit 2)
            import difflib

            close = difflib.get_close_matches(args.op, list(OPS), n=1)
            raise error("E7002", f"--op {args.op}: unknown op",
                        help=(f"did you mean `{close[0]}`? " if close else "") + "ops: " + ", ".join(OPS))
        ops = [OPS[args.op]]
    if args.json:
        emit_json({"ok": True, "ops": [op_record(op) for op in ops]})
    else:
        print(op_table_text(ops, full=bool(args.op)))
    return 0
