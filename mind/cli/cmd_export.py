"""`mind export`: write a function as StableHLO MLIR text or as an ONNX model.

    mind export --to stablehlo FILE [--fn NAME] [--bind N=4 ...] [-o OUT]
    mind export --to onnx FILE -o OUT.onnx [--fn NAME] [--bind N=4 ...]

Every op is exported with the MIND spec's semantics; an op the target cannot express is E6003,
naming the op and the spec label (docs/export.md).  Symbolic dims must be bound with ``--bind``.
"""

from __future__ import annotations

import argparse

NAME = "export"
HELP = "write a function as StableHLO MLIR text or an ONNX model"
TARGETS = {"stablehlo": "mind.compiler.export.stablehlo", "onnx": "mind.compiler.export.onnx"}


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a MIND source (.mind) or Core IR (.mir) file")
    p.add_argument("--to", required=True, choices=sorted(TARGETS), help="the target format")
    p.add_argument("--fn", metavar="NAME", help="function to export (default: main, or the only one)")
    p.add_argument("--bind", action="append", default=[], metavar="SYM=N", help="a value for a symbolic dim")
    p.add_argument("-o", "--output", metavar="OUT", help="write here (default for stablehlo: stdout)")
    p.add_argument("--json", action="store_true", help="report diagnostics as JSON")


def _bindings(specs: list[str]) -> dict[str, int]:
    from mind.diagnostics import error

    out: dict[str, int] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name.isidentifier() or not value.strip().isdigit():
            raise error("E7002", f"--bind `{spec}` is not of the form SYMBOL=N (N ≥ 0)")
        out[name] = int(value)
    return out


def run(args: argparse.Namespace) -> int:
    import importlib
    import sys

    from mind.compiler.export.common import specialize
    from mind.diagnostics import error
    from mind.driver_io import atomic_write
    from mind.loader import load_module
    from mind.calling import select_function

    module, _sources = load_module(args.file)
    fn = select_function(module, args.fn)
    env = _bindings(args.bind)
    missing = [s for s in fn.symbols() if s not in env]
    if missing:
        raise error("E6003", f"@{fn.name} has symbolic dims ({', '.join(missing)}); {args.to} export needs "
                             "concrete shapes", help="bind each with --bind " + " ".join(f"{s}=<n>" for s in missing))
    out = importlib.import_module(TARGETS[args.to]).export_function(specialize(fn, env))
    data = out.encode("utf-8") if isinstance(out, str) else out
    if args.output:
        atomic_write(args.output, lambda fh: fh.write(data))
    elif isinstance(out, str):
        sys.stdout.write(out)
    else:
        raise error("E7002", f"--to {args.to} writes a binary model: name the file with -o OUT.onnx")
    return 0
