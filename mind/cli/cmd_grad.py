"""`mind grad`: print the gradient function (Core IR) of a function of a .mind or .mir file."""

from __future__ import annotations

import argparse
import sys

NAME = "grad"
HELP = "generate and print the gradient IR of a function (reverse-mode autodiff at compile time)"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a MIND source (.mind), Core IR (.mir) or public MIND IR (.ir) file")
    p.add_argument("--fn", dest="fn", metavar="NAME", help="function to differentiate (default: main, or the only one)")
    p.add_argument("--wrt", metavar="A,B", help="comma-separated parameters (default: every float parameter)")
    p.add_argument("--loss", type=int, default=0, metavar="INDEX", help="index of the scalar result to differentiate")
    p.add_argument("--hash", action="store_true", help="also print the SHA-256 of the gradient IR")
    p.add_argument("--json", action="store_true", help="print as JSON")


def run(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.compiler.autodiff import grad_function
    from mind.ir.core import Module
    from mind.cli.program import load_program
    from mind.calling import select_function

    from mind.diagnostics import Diagnostic, MindError

    module, sources = load_program(args.file)
    fn = select_function(module, args.fn)
    wrt = [w.strip() for w in args.wrt.split(",") if w.strip()] if args.wrt else None
    try:
        gfn = grad_function(fn, args.loss, wrt)
    except MindError as exc:
        exc.sources.update(sources)
        if fn.span is not None:  # a value of the function without a location: point at the function
            exc.diagnostics = [d if d.span is not None else
                               Diagnostic(d.code, d.message, fn.span, d.label, d.help, d.notes, d.severity)
                               for d in exc.diagnostics]
        raise
    out = Module([gfn])
    text = out.text()
    if args.json:
        emit_json({"ok": True, "function": fn.name, "gradient_function": gfn.name,
                   "wrt": wrt if wrt is not None else [p.name for p in fn.params if p.type.dtype.is_float],
                   "text": text, "sha256": out.sha256(), "ops": len(gfn.ops)})
    else:
        sys.stdout.write(text)
        if args.hash:
            sys.stdout.write(f"// sha256: {out.sha256()}\n")
    return 0
