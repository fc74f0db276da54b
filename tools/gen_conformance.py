#!/usr/bin/env python3
"""Generate the Core IR conformance suite under ``conformance/suite/``.

    python tools/gen_conformance.py           # (re)write every file of the suite
    python tools/gen_conformance.py --check   # exit 1 if the files on disk are not exactly what
                                              # generation gives, or a released case changed

Tiers (``mind.conformance.generate``): the spec's worked examples, hand-written edge cases,
reference-computed seeded cases, the generated single-op tier (every op × dtype × value class, and
symbolic dims), generated programs, one negative case per constraint label, malformed IR and
arguments.  Every success case is checked against the reference through its accuracy class at
generation time; a disagreement aborts.  New case ids are appended to ``released.txt`` under the
current suite version; a released case that changed or disappeared aborts (ids are immutable).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: Sequence[str] | None = None) -> int:
    from mind.conformance.generate.build import GenerationError
    from mind.conformance.generate.suite_files import (RELEASED, check_released, manifest_hashes,
                                                       parse_released, released_text, render)
    from mind.conformance.suite import SUITE_DIR

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the files are in step")
    parser.add_argument("--out", default=SUITE_DIR, help="the suite folder")
    args = parser.parse_args(argv)
    try:
        files = render()
    except GenerationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    released_path = os.path.join(args.out, RELEASED)
    released_raw = open(released_path, encoding="utf-8").read() if os.path.exists(released_path) else ""
    released = parse_released(released_raw)
    current = manifest_hashes(files)
    problems = check_released(released, current)
    for p in problems[:10]:
        print(f"error: {p}", file=sys.stderr)
    if len(problems) > 10:
        print(f"error: … and {len(problems) - 10} more", file=sys.stderr)
    if problems:
        return 1
    files[RELEASED] = released_text(released, current)
    existing = set()
    for root, _dirs, names in os.walk(args.out):
        for n in names:
            existing.add(os.path.relpath(os.path.join(root, n), args.out))
    if args.check:
        stale = sorted(p for p, t in files.items() if not os.path.exists(os.path.join(args.out, p))
                       or open(os.path.join(args.out, p), encoding="utf-8").read() != t)
        extra = sorted(existing - set(files))
        for p in stale:
            print(f"out of date: {p}")
        for p in extra:
            print(f"not generated: {p}")
        return 1 if stale or extra else 0
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    for rel, text in files.items():
        path = os.path.join(args.out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
    print(f"wrote {len(current)} cases ({len(files)} files) to {os.path.relpath(args.out, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
