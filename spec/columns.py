"""Plain-text tables: the one way MIND's commands print rows of cells in aligned columns.

Why here: the op table (`mind spec`), the verifier's obligation table, the rewrite-rule table and the
autodiff check table all print the same shape of text; the spec layer is the lowest, so every layer
can use it without an import going up.
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["aligned_lines"]


def aligned_lines(rows: Sequence[Sequence[str]], aligned: int | None = None) -> list[str]:
    """``rows`` (the first is the header) as lines of two-space-separated columns, a rule of dashes
    under the header.  The first ``aligned`` columns (default: all) are padded to their widest cell;
    any further cells follow unpadded (a free-text detail column).  Trailing spaces are removed."""
    if not rows:
        return []
    n = len(rows[0]) if aligned is None else aligned
    widths = [max(len(row[i]) for row in rows) for i in range(n)]
    lines = [("  ".join(cell.ljust(w) for cell, w in zip(row[:n], widths))
              + "".join("  " + cell for cell in row[n:] if cell)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines
