"""`mind run`: execute a function of a .mind or .mir file and print or save its results.

Files it writes go into output folders (``--out``, ``--probe``) under the rules of
``mind.output_dir``: each holds exactly one run's files, MIND writes and removes only files it
wrote there, and a folder is checked before the program runs.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from mind.backends import BACKENDS, DEFAULT_BACKEND, compile_for
from mind.diagnostics import MindError, error
from mind.driver_io import OutputFolder, read_array

NAME = "run"
HELP = "run a function and print its results"
_FOLDER_RULES = ("(created if absent; an existing folder must be empty or hold only an earlier run's "
                 "files, which are replaced)")


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a MIND source (.mind), Core IR (.mir) or public MIND IR (.ir) file, or the "
                                "folder of a `mind build` artifact (run by mind.runtime)")
    p.add_argument("--fn", dest="fn", metavar="NAME", help="function to run (default: main, or the only one)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=PATH.npy",
                   help="an argument from a .npy file (repeatable)")
    p.add_argument("--backend", default=None, choices=sorted(BACKENDS),
                   help=f"where to run (default: {DEFAULT_BACKEND}; `reference` with --probe)")
    p.add_argument("--out", metavar="DIR",
                   help=f"write results as DIR/result0.npy, DIR/result1.npy, … {_FOLDER_RULES}")
    p.add_argument("--probe", metavar="DIR",
                   help=f"save every parameter and intermediate value as .npy with DIR/manifest.json "
                        f"(reference backend) {_FOLDER_RULES}")
    p.add_argument("--json", action="store_true", help="print results as JSON")


def load_inputs(specs: list[str]) -> dict[str, object]:
    inputs: dict[str, object] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise error("E7002", f"--input `{spec}` is not of the form NAME=PATH.npy")
        if name in inputs:
            raise error("E7002", f"--input names `{name}` twice")
        inputs[name] = read_array(path)
    return inputs


class ProbeFolder:
    """``--probe DIR``: every value the reference interpreter computes, saved as it is computed
    (``NNNNN_<value>.npy``, in program order), then ``manifest.json`` describing them."""

    MANIFEST = "manifest.json"

    def __init__(self, path: str, fn: Any) -> None:
        self.fn = fn
        values = [(p, "param") for p in fn.params] + [(op.result, op.op) for op in fn.ops]
        self.files = {id(v): f"{i:05d}_{_safe(v.name)}.npy" for i, (v, _) in enumerate(values)}
        self.folder = OutputFolder(path, [*self.files.values(), self.MANIFEST])
        self.entries: list[dict[str, Any]] = []

    def __call__(self, value: Any, op: str, arr: Any) -> None:
        import numpy as np

        name = self.files[id(value)]
        self.folder.write(name, lambda fh: np.save(fh, arr, allow_pickle=False))
        self.entries.append({"index": len(self.entries), "value": value.name, "op": op, "file": name,
                             "dtype": str(value.type.dtype), "shape": list(np.shape(arr))})

    def finish(self) -> None:
        import json

        text = json.dumps({"function": self.fn.name, "values": self.entries}, indent=1, sort_keys=True)
        self.folder.write(self.MANIFEST, lambda fh: fh.write(text), "w")
        self.folder.finish()


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)


def run(args: argparse.Namespace) -> int:
    from mind.cli.program import load_program

    if os.path.isdir(args.file):
        return _run_artifact(args)
    module, sources = load_program(args.file)
    try:
        return _run(args, module)
    except MindError as exc:  # run-time diagnostics point into the program's text
        exc.sources.update(sources)
        raise


def _run_artifact(args: argparse.Namespace) -> int:
    """A ``mind build`` artifact, checked and run by ``mind.runtime`` (its function and sizes are fixed)."""
    import mind.runtime

    if args.fn or args.backend or args.probe:
        raise error("E7002", "--fn, --backend and --probe do not apply to an artifact folder",
                    help="an artifact holds one function, built for one target")
    artifact = mind.runtime.load(args.file)
    inputs = load_inputs(args.input)
    out = OutputFolder(args.out, [f"result{i}.npy" for i in range(len(artifact.function.results))]) \
        if args.out else None
    return _report(args, artifact.function, f"artifact ({artifact.manifest['target']})", artifact.run(inputs), out)


def _run(args: argparse.Namespace, module: Any) -> int:
    from mind.calling import select_function

    fn = select_function(module, args.fn)
    backend = args.backend or ("reference" if args.probe else DEFAULT_BACKEND)
    if args.probe and backend != "reference":
        raise error("E7002", "--probe is available with --backend reference",
                    help="locate a backend mismatch with mind.bisect.first_divergence")
    if args.probe and args.out and _same_place(args.probe, args.out):
        raise error("E7002", "--out and --probe name the same folder", help="give each its own folder")
    inputs = load_inputs(args.input)
    # output folders are checked before anything runs
    out = OutputFolder(args.out, [f"result{i}.npy" for i in range(len(fn.results))]) if args.out else None
    probe = ProbeFolder(args.probe, fn) if args.probe else None
    options = {"probe": probe} if probe else {}
    results = compile_for(fn, backend, **options)(inputs)
    if probe is not None:
        probe.finish()
    return _report(args, fn, backend, results, out)


def _report(args: argparse.Namespace, fn: Any, backend: str, results: list[Any], out: OutputFolder | None) -> int:
    """Save (``--out``) and print the results of ``fn`` run on ``backend``."""
    from mind.cli.output import emit_json, format_result, json_value

    if out is not None:
        import numpy as np

        for i, arr in enumerate(results):
            out.write(f"result{i}.npy", lambda fh, arr=arr: np.save(fh, arr, allow_pickle=False))
        out.finish()
    if args.json:
        emit_json({"ok": True, "function": fn.name, "backend": backend,
                   "results": [{"index": i, "dtype": t.dtype.value, "shape": list(r.shape),
                                "values": json_value(r)}
                               for i, (r, t) in enumerate(zip(results, fn.result_types))]})
    else:
        print("\n".join(format_result(i, r, t.dtype.value) for i, (r, t) in enumerate(zip(results, fn.result_types))))
    return 0


def _same_place(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)
