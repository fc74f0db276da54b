"""Expectations files: the cases an implementation is known to fail or must skip, each with a reason.

One entry per line; ``#`` starts a comment::

    # kind   case id or glob          spec label          reason (required)
    xfail    gen/div/i32/zero/*       div.edge_cases      integer division by zero traps in the runtime
    skip     prog/0012                conv2d.semantics    hangs the compiler (issue 123)

``xfail``: the case runs and is expected to fail; if it passes, it is reported as ``xpass`` and the
run is not clean (strict, as wasmtime does: a stale expectation must be removed, not kept).
``skip``: the case is not run.  The label names the part of the spec the implementation departs
from (``mind conformance labels`` lists them); the first matching line wins.  Lines that match no
case are reported, so a file does not silently rot.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from dataclasses import dataclass, field

from mind.diagnostics import Diagnostic, MindError, Span

KINDS = ("xfail", "skip")
_LINE = re.compile(r"^(\s*)(\S+)(\s+)(\S+)(\s+)(\S+)(\s+)(\S.*?)\s*$")


@dataclass
class Expectation:
    kind: str
    pattern: str
    label: str
    reason: str
    line: int
    used: int = 0

    def matches(self, cid: str) -> bool:
        return fnmatch.fnmatchcase(cid, self.pattern)


@dataclass
class Expectations:
    path: str | None = None
    sha256: str | None = None
    entries: list[Expectation] = field(default_factory=list)

    def lookup(self, cid: str) -> Expectation | None:
        for e in self.entries:
            if e.matches(cid):
                e.used += 1
                return e
        return None

    def unused(self) -> list[Expectation]:
        return [e for e in self.entries if not e.used]


def parse(text: str, path: str, labels: set[str]) -> Expectations:
    """Parse an expectations file; every malformed line is an E7004 diagnostic with its location."""
    diags: list[Diagnostic] = []
    entries: list[Expectation] = []

    def bad(lineno: int, col: int, width: int, message: str, help: str) -> None:
        diags.append(Diagnostic("E7004", message, Span(path, lineno, col, lineno, col + max(1, width)), help=help))

    for lineno, raw in enumerate(text.split("\n"), start=1):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        m = _LINE.match(line)
        if m is None:
            start = len(line) - len(line.lstrip()) + 1
            bad(lineno, start, len(line.strip()), "an expectation needs four fields: kind, case, label, reason",
                "write e.g. `xfail gen/div/i32/zero/* div.edge_cases integer division by zero traps`")
            continue
        kind, pattern, label, reason = m.group(2), m.group(4), m.group(6), m.group(8)
        col_kind = len(m.group(1)) + 1
        col_label = col_kind + len(kind) + len(m.group(3)) + len(pattern) + len(m.group(5))
        if kind not in KINDS:
            bad(lineno, col_kind, len(kind), f"unknown expectation kind `{kind}`", "kinds: xfail, skip")
            continue
        if label not in labels:
            bad(lineno, col_label, len(label), f"`{label}` is not a spec label",
                "labels are `op.semantics`, `op.edge_cases`, `op.accuracy`, `op.C<n>`, `ir.parse`, `ir.verify`, "
                "`call.arguments`; `mind conformance labels` lists them")
            continue
        entries.append(Expectation(kind, pattern, label, reason, lineno))
    if diags:
        raise MindError(diags, {path: text})
    return Expectations(path, hashlib.sha256(text.encode("utf-8")).hexdigest(), entries)


def load(path: str, labels: set[str]) -> Expectations:
    from mind.driver_io import read_source

    return parse(read_source(path), path, labels)
