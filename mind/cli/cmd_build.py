"""`mind build`: compile a function ahead of time into a self-describing artifact folder.

The folder follows the rules of every output folder (``mind.output_dir``): it is checked before
anything is compiled, holds exactly one build's files and is written file by file atomically, the
manifest last, so a build that dies half-way leaves no artifact that loads (``docs/build.md``).
"""

from __future__ import annotations

import argparse
import sys

NAME = "build"
HELP = "compile a function into a portable artifact (kernels, launch plan, manifest)"
TARGET_CHOICES = ("cpu", "cuda")


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a MIND source (.mind), Core IR (.mir) or public MIND IR (.ir) file")
    p.add_argument("--fn", dest="fn", metavar="NAME", help="the function to build (default: main, or the only one)")
    p.add_argument("--target", default="cpu", choices=TARGET_CHOICES, help="what the artifact runs on")
    p.add_argument("--shapes", action="append", default=[], metavar="NAME=DTYPE[d,...]",
                   help="the shape of a parameter, which gives its symbolic dims values (repeatable; a "
                        "function with symbolic dims needs them: an artifact is built for concrete sizes)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="the artifact folder (created if absent; an existing folder must be empty or hold "
                        "only an earlier build's files, which are replaced)")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")


def run(args: argparse.Namespace) -> int:
    import json

    from mind.calling import select_function
    from mind.cli.program import load_program, specialize
    from mind.compiler.build import artifact_names, build_artifact
    from mind.diagnostics import MindError
    from mind.driver_io import OutputFolder
    from mind.ir.core import Module
    from mind.runtime.artifact import MANIFEST

    module, sources = load_program(args.file)
    try:
        fn = select_function(module, args.fn)
        if args.shapes:
            fn = specialize(Module([fn]), args.shapes).functions[0]
        names = artifact_names(args.target)
        OutputFolder(args.out, names)  # checked before anything is compiled
        files = build_artifact(fn, args.target)
    except MindError as exc:
        exc.sources.update(sources)
        raise
    out = OutputFolder(args.out, files)  # and with every file's name before the first write
    for name in sorted(files, key=lambda n: (n == MANIFEST, n)):  # the manifest last
        out.write(name, lambda fh, data=files[name]: fh.write(data))
    out.finish()
    manifest = json.loads(files[MANIFEST])
    if args.json:
        from mind.cli.output import emit_json

        emit_json({"ok": True, "out": args.out, "manifest": manifest})
    else:
        sys.stdout.write(f"built @{fn.name} for {args.target} into {args.out}: "
                         + ", ".join(f"{n} ({len(files[n])} bytes)" for n in sorted(files)) + "\n")
    return 0
