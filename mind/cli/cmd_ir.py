"""`mind ir`: print the Core IR of a .mind or .mir file in canonical text (or a later stage)."""

from __future__ import annotations

import argparse
import sys

NAME = "ir"
HELP = "parse, verify and print Core IR (canonical text)"

EMIT_STAGES = ("core", "mlir", "llvm", "ptx")


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a MIND source (.mind), Core IR (.mir) or public MIND IR (.ir) file")
    p.add_argument("--check", action="store_true", help="verify the module (always done; kept for clarity)")
    p.add_argument("--fn", dest="fn", metavar="NAME", help="print only this function")
    p.add_argument("--emit", choices=EMIT_STAGES, default="core", help="the stage to print")
    p.add_argument("--shapes", action="append", default=[], metavar="NAME=DTYPE[d,...]",
                   help="the shape of a parameter, which gives its symbolic dims values (repeatable; "
                        "--emit mlir/llvm/ptx of a function with symbolic dims needs them)")
    p.add_argument("--hash", action="store_true", help="also print the module's SHA-256 content hash")
    p.add_argument("--json", action="store_true", help="print as JSON")


def run(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.ir.core import Module
    from mind.cli.program import load_program
    from mind.calling import select_function

    module, _ = load_program(args.file)
    if args.fn:
        module = Module([select_function(module, args.fn)])
    if args.shapes:
        from mind.cli.program import specialize

        module = specialize(module, args.shapes)
    if args.emit == "core":
        text = module.text()
    else:
        from mind.compiler.backend.cpu.api import emit_stage
        from mind.diagnostics import Diagnostic, MindError

        try:
            if args.emit == "ptx":
                from mind.compiler.backend.cuda.api import emit_ptx

                text = emit_ptx(module)
            else:
                text = emit_stage(module, args.emit)
        except MindError as exc:  # symbolic dims: say how to give them values
            exc.diagnostics = [Diagnostic(d.code, d.message, d.span, d.label,
                                          "give each parameter with symbolic dims a shape: "
                                          "`--shapes x=f32[4,3]`", d.notes)
                               if d.code == "E6003" else d for d in exc.diagnostics]
            raise
    if args.json:
        emit_json({"ok": True, "stage": args.emit, "text": text, "sha256": module.sha256()})
    else:
        sys.stdout.write(text)
        if args.hash:
            sys.stdout.write(f"// sha256: {module.sha256()}\n")
    return 0
