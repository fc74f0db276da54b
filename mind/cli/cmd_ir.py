"""`mind ir`: print the Core IR of a .mind or .mir file in canonical text (or a later stage)."""

from __future__ import annotations

import argparse
import sys

NAME = "ir"
HELP = "parse, verify and print Core IR (canonical text)"

EMIT_STAGES = ("core", "mlir", "llvm")


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a MIND source (.mind) or Core IR (.mir) file")
    p.add_argument("--check", action="store_true", help="verify the module (always done; kept for clarity)")
    p.add_argument("--fn", dest="fn", metavar="NAME", help="print only this function")
    p.add_argument("--emit", choices=EMIT_STAGES, default="core", help="the stage to print")
    p.add_argument("--hash", action="store_true", help="also print the module's SHA-256 content hash")
    p.add_argument("--json", action="store_true", help="print as JSON")


def run(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.ir.core import Module
    from mind.loader import load_module
    from mind.calling import select_function

    module, _ = load_module(args.file)
    if args.fn:
        module = Module([select_function(module, args.fn)])
    if args.emit == "core":
        text = module.text()
    else:
        from mind.compiler.backend.cpu.api import emit_stage

        text = emit_stage(module, args.emit)
    if args.json:
        emit_json({"ok": True, "stage": args.emit, "text": text, "sha256": module.sha256()})
    else:
        sys.stdout.write(text)
        if args.hash:
            sys.stdout.write(f"// sha256: {module.sha256()}\n")
    return 0
