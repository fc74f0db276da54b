"""`mind run`: execute a function of a .mind or .mir file and print or save its results."""

from __future__ import annotations

import argparse
import os

from mind.backends import BACKENDS, DEFAULT_BACKEND, compile_for
from mind.diagnostics import error
from mind.driver_io import atomic_write

NAME = "run"
HELP = "run a function and print its results"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a MIND source (.mind), Core IR (.mir) or public MIND IR (.ir) file")
    p.add_argument("--fn", dest="fn", metavar="NAME", help="function to run (default: main, or the only one)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=PATH.npy",
                   help="an argument from a .npy file (repeatable)")
    p.add_argument("--backend", default=None, choices=sorted(BACKENDS),
                   help=f"where to run (default: {DEFAULT_BACKEND}; `reference` with --probe)")
    p.add_argument("--out", metavar="DIR", help="write results as DIR/result0.npy, DIR/result1.npy, …")
    p.add_argument("--probe", metavar="DIR", help="save every intermediate value as .npy (reference backend)")
    p.add_argument("--json", action="store_true", help="print results as JSON")


def load_inputs(specs: list[str]) -> dict[str, object]:
    import numpy as np

    inputs: dict[str, object] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise error("E7002", f"--input `{spec}` is not of the form NAME=PATH.npy")
        if name in inputs:
            raise error("E7002", f"--input names `{name}` twice")
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise error("E7001", f"input file `{path}` not found") from None
        except (OSError, ValueError, EOFError) as exc:
            raise error("E6011", f"cannot read `{path}` as a NumPy .npy array: {exc}",
                        help="save arrays with numpy.save (object arrays are refused)") from None
    return inputs


def run(args: argparse.Namespace) -> int:
    from mind.cli.output import emit_json, format_result, json_value
    from mind.cli.program import load_program
    from mind.reference.interpreter import select_function

    module, _sources = load_program(args.file)
    fn = select_function(module, args.fn)
    inputs = load_inputs(args.input)
    backend = args.backend or ("reference" if args.probe else DEFAULT_BACKEND)
    options = {"probe_dir": args.probe} if args.probe else {}
    if args.probe and backend != "reference":
        raise error("E7002", "--probe is available with --backend reference",
                    help="locate a backend mismatch with mind.reference.bisect.first_divergence")
    results = compile_for(fn, backend, **options)(inputs)
    if args.out:
        import numpy as np

        for i, arr in enumerate(results):  # atomic_write creates the folder, or reports E7003
            atomic_write(os.path.join(args.out, f"result{i}.npy"), lambda fh, arr=arr: np.save(fh, arr))
    if args.json:
        emit_json({"ok": True, "function": fn.name, "backend": backend,
                   "results": [{"index": i, "dtype": t.dtype.value, "shape": list(r.shape),
                                "values": json_value(r)}
                               for i, (r, t) in enumerate(zip(results, fn.result_types))]})
    else:
        print("\n".join(format_result(i, r, t.dtype.value) for i, (r, t) in enumerate(zip(results, fn.result_types))))
    return 0
