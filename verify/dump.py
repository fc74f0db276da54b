"""``mind verify DUMP``: well-formedness and every shape/dtype constraint of an IR dump, proved for all
values of its symbolic dims that satisfy the declared assumptions.

A dump is parsed (Core IR text, with this layer's stricter ``Limits``) or legalized (the public
encoding, ``legalize_encodings``: every public encoding) and then checked by the IR verifier itself (``mind.ir.verify``), the
same checker ``mind ir`` and ``mind run`` use, with the decision procedure of ``mind.ir.decide``
under this run's solver limits: the cheap symbolic path first, sampling on plain ints, then Z3 for
what is left, every solver call bounded by an rlimit and a timeout.  So a dump is VALID here exactly
when every other entry point accepts it, and every counterexample shown has been re-checked on plain
ints.  This module adds only the report: findings with counterexamples, notes, statistics.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from mind.diagnostics import Diagnostic, MindError
from mind.ir.core import Module
from mind.ir.decide import DEFAULT_LIMITS, SolverLimits
from mind.ir.parser import IRParser, Limits
from mind.ir.verify import CheckStats, Finding, module_findings
from mind.spec.ops import OPS

# This layer's parser bounds: dumps come from anyone, so their sizes are bounded tighter than a local
# program's.  The nesting bound is the parser's default: `mind verify` and `mind ir` must give the
# same verdict on the same text (a dim with 64 unary minus signs was E1012 here and fine there).
VERIFY_LIMITS = Limits(max_bytes=32 * 1024 * 1024, max_ops=200_000, max_functions=1_000, max_rank=16,
                       max_dim=1 << 48, max_const_elements=1 << 22)


@dataclass
class Stats:
    functions: int = 0
    ops: int = 0
    decided_cheaply: int = 0
    z3_queries: int = 0
    proved: int = 0
    seconds: float = 0.0

    @staticmethod
    def of(check: CheckStats, seconds: float) -> "Stats":
        d = check.decider
        return Stats(check.functions, check.ops, check.decided_cheaply, d.solver_calls, d.proved, seconds)

    def to_json(self) -> dict[str, Any]:
        return {"functions": self.functions, "ops": self.ops, "decided_without_z3": self.decided_cheaply,
                "z3_queries": self.z3_queries, "z3_proved": self.proved, "seconds": round(self.seconds, 6)}


@dataclass
class DumpReport:
    filename: str
    format: str  # core | public
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    stats: Stats = field(default_factory=Stats)
    module: Module | None = None

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "file": self.filename, "format": self.format, "notes": self.notes,
                "diagnostics": [f.to_json() for f in self.findings], "stats": self.stats.to_json()}


def detect_format(text: str) -> str:
    """``core`` if the first meaningful token is ``func``; ``public`` for `%id = Opcode(` lines."""
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("//") or s.startswith("#"):
            continue
        if s.startswith("func"):
            return "core"
        if s.startswith("outputs") or s.startswith("module"):  # `module {`: the public compiler's dump
            return "public"
        if s.startswith("%") and "=" in s:
            rhs = s.split("=", 1)[1].strip()
            if rhs[:1].isupper() or rhs.startswith("%") or re.match(r"[a-z_0-9.]+ %", rhs):
                return "public"  # (the last: the public compiler's `%2 = add %0, %1`)
        return "core"
    return "core"


def verify_text(text: str, filename: str = "<dump>", fmt: str = "auto",
                limits: SolverLimits = DEFAULT_LIMITS) -> DumpReport:
    t0 = time.perf_counter()
    if fmt == "auto":
        fmt = detect_format(text)
    rep = DumpReport(filename, fmt, sources={filename: text})
    try:
        if fmt == "public":
            from mind.verify.legalize_encodings import legalize

            module, notes = legalize(text, filename)
            rep.notes.extend(notes)
        else:
            module = IRParser(text, filename, VERIFY_LIMITS).parse_module()
    except MindError as exc:
        rep.sources.update(exc.sources)
        for d in exc.diagnostics:
            if d.code == "E4005" and d.label is None:  # the parser checks const.C1 itself
                d = Diagnostic(d.code, d.message, d.span, "const.C1", d.help,
                               d.notes + (f"const.C1: {OPS['const'].constraint('C1').text}",))
            rep.findings.append(Finding(d))
        if fmt == "public":
            _public_codes(rep)
        rep.stats.seconds = time.perf_counter() - t0
        return rep
    rep.module = module
    check = CheckStats()
    rep.findings.extend(module_findings(module, limits, check))
    if fmt == "public":
        _public_codes(rep)
    rep.stats = Stats.of(check, time.perf_counter() - t0)
    return rep


def _public_codes(rep: DumpReport) -> None:
    """Name the public catalogue's code next to ours where they differ (``public_codes``)."""
    from mind.verify.public_codes import with_public_code

    for f in rep.findings:
        f.diag = with_public_code(f.diag)
