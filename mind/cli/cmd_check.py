"""`mind check`: parse, type-check and lower a .mind (or .mir) file; report every diagnostic."""

from __future__ import annotations

import argparse

NAME = "check"
HELP = "type-check a MIND source file (exit 0 ok, 1 diagnostics, 2 unreadable)"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a MIND source (.mind), Core IR (.mir) or public MIND IR (.ir) file")
    p.add_argument("--json", action="store_true", help="print the result (or the diagnostics) as JSON")


def run(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.ir.printer import format_signature
    from mind.cli.program import load_program

    module, _ = load_program(args.file)
    if args.json:
        emit_json({"ok": True, "file": args.file, "diagnostics": [],
                   "functions": [{"name": f.name, "signature": format_signature(f)}
                                 for f in module.functions]})
    else:
        for f in module.functions:
            print(format_signature(f))
        n = len(module.functions)
        print(f"ok: {args.file}: {n} function{'s' if n != 1 else ''}")
    return 0
