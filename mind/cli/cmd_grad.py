"""`mind grad`: print the gradient function (Core IR) of a function of a .mind or .mir file."""

from __future__ import annotations

import argparse
import sys

NAME = "grad"
HELP = "generate and print the gradient IR of a function (reverse-mode autodiff at compile time)"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a MIND source (.mind) or Core IR (.mir) file")
    p.add_argument("--fn", dest="fn", metavar="NAME", help="function to differentiate (default: main, or the only one)")
    p.add_argument("--wrt", metavar="A,B", help="comma-separated parameters (default: every float parameter)")
    p.add_argument("--loss", type=int, default=0, metavar="INDEX", help="index of the scalar result to differentiate")
    p.add_argument("--hash", action="store_true", help="also print the SHA-256 of the gradient IR")
    p.add_argument("--json", action="store_true", help="print as JSON")


def run(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json
    from mind.compiler.autodiff import grad_function
    from mind.ir.core import Module
    from mind.loader import load_module
    from mind.calling import select_function

    from mind.diagnostics import MindError

    module, sources = load_module(args.file)
    fn = select_function(module, args.fn)
    wrt = [w.strip() for w in args.wrt.split(",") if w.strip()] if args.wrt else None
    try:
        gfn = grad_function(fn, args.loss, wrt)
    except MindError as exc:
        exc.sources.update(sources)
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
