#!/usr/bin/env python3
"""Tally what MIND makes of a corpus of MIND programs and IR dumps written by others.

    python tools/public_corpus.py DIR [DIR ...] [--list]

Every distinct ``*.mind`` file under the folders (by content: copies count once) goes through the
frontend (``compile_source``: parse, check, lower, canonicalize); every distinct ``*.ir`` file
through ``mind verify``'s dump verifier (any public encoding).  The tally counts the programs that
compile and the dumps that verify, and the others by the code of their first diagnostic; ``--list``
adds one line per file.  Why a tool: the language issue measured acceptance of the public MIND
material (the spec's examples, the public compiler's examples, tests and benchmarks), which does not
live in this repository; this makes that count repeatable on any checkout of it
(``docs/frontend.md``, "Corpus").  It reads the files and writes nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from collections import Counter
from typing import Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def distinct_files(folders: list[str], suffix: str) -> Iterator[tuple[str, bytes]]:
    """(path, content) of each file ending in ``suffix`` under ``folders``, the first of each content,
    in sorted path order."""
    seen: set[str] = set()
    paths = sorted(os.path.join(d, f) for top in folders for d, _, fs in os.walk(top) for f in fs
                   if f.endswith(suffix))
    for path in paths:
        with open(path, "rb") as fh:
            data = fh.read()
        digest = hashlib.sha256(data).hexdigest()
        if digest not in seen:
            seen.add(digest)
            yield path, data


def program_outcome(path: str, data: bytes) -> str:
    """``ok`` or the code of the frontend's first diagnostic."""
    from mind.compiler.frontend.api import compile_source
    from mind.diagnostics import MindError

    try:
        compile_source(data, path)
    except MindError as exc:
        return exc.diagnostics[0].code if exc.diagnostics else "error"
    return "ok"


def dump_outcome(path: str, data: bytes) -> str:
    """``ok`` or the code of the dump verifier's first finding."""
    from mind.verify.dump import verify_text

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "E1001"
    report = verify_text(text, path)
    return "ok" if report.ok else report.findings[0].diag.code


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", metavar="DIR")
    ap.add_argument("--list", action="store_true", help="one line per file")
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.dirname(ROOT))
    for suffix, outcome, what in ((".mind", program_outcome, "programs"), (".ir", dump_outcome, "IR dumps")):
        tally: Counter[str] = Counter()
        for path, data in distinct_files(args.folders, suffix):
            result = outcome(path, data)
            tally[result] += 1
            if args.list:
                print(f"{result:6} {path}")
        total = sum(tally.values())
        rest = ", ".join(f"{code} {n}" for code, n in sorted(tally.items()) if code != "ok")
        print(f"{total} distinct {what}: {tally['ok']} {'compile' if suffix == '.mind' else 'verify'}"
              + (f"; refused: {rest}" if rest else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
