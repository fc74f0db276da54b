#!/usr/bin/env python3
"""Write the rule table of docs/rewrites.md from the rule data and a proof of every rule.

    python tools/gen_rewrites.py           # prove every rule (ranks ≤ 6) and rewrite the table
    python tools/gen_rewrites.py --check   # exit 1 if the committed table is not in step

Only the part between the table markers is generated; the rest of docs/rewrites.md is prose.
``tests/verify/test_rewrites.py`` checks the committed table against its own proof run.
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "rewrites.md")


def render(text: str, table: str) -> str:
    from mind.verify.rewrites import TABLE_BEGIN, TABLE_END

    start, end = text.index(TABLE_BEGIN), text.index(TABLE_END) + len(TABLE_END)
    return text[:start] + table + text[end:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--rank-bound", type=int, default=6)
    args = ap.parse_args(argv)
    from mind.verify.rewrites import markdown_table, prove_rules

    rep = prove_rules(rank_bound=args.rank_bound)
    with open(DOC, encoding="utf-8") as fh:
        old = fh.read()
    new = render(old, markdown_table(rep))
    if args.check:
        if new != old:
            print(f"{DOC} is not in step with the rules; run tools/gen_rewrites.py", file=sys.stderr)
            return 1
        return 0
    if new != old:
        from mind.driver_io import atomic_write

        atomic_write(DOC, lambda fh: fh.write(new), mode="w")
        print(f"wrote {DOC}")
    return 0 if rep.ok else 1


if __name__ == "__main__":
    sys.exit(main())
