"""The subject of an audit: the input, read once, and what MIND makes of it.

MIND source (``.mind``) is parsed, elaborated and canonicalized by the frontend; while it is, the
VJP rules its gradients use (``recording_vjp_rules``) and the canonicalizer's steps
(``combined_rule(observe=...)``: constant folds, rewrite rules by name, CSE merges) are recorded.
The canonical module is the frontend's own result (``compile_source``); the observed walk must give
the same text, or the audit says so.  Any other file is an IR dump, Core IR text or the public MIND
encoding, read by ``mind verify``'s reader (``verify.dump.verify_text``: the stricter parser limits,
the legalizer, the IR verifier) and audited as given: MIND applies no canonicalization to it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from mind.diagnostics import MindError, error
from mind.ir.core import Module
from mind.ir.decide import SolverLimits
from mind.ir.verify import CheckStats, Finding, module_findings

__all__ = ["Subject", "load_subject"]


@dataclass
class Subject:
    path: str
    text: str
    format: str  # mind | core | public
    module: Module
    findings: list[Finding]  # the IR verifier's (the decision procedure's verdicts)
    notes: list[str] = field(default_factory=list)
    vjp_rules: list[str] = field(default_factory=list)
    steps: dict[str, int] = field(default_factory=dict)  # canonicalization: step name -> count
    canonical_agrees: bool = True

    @property
    def sources(self) -> dict[str, str]:
        return {self.path: self.text}

    def to_json(self) -> dict[str, Any]:
        return {"file": self.path, "format": self.format,
                "sha256": hashlib.sha256(self.text.encode("utf-8")).hexdigest(),
                "bytes": len(self.text.encode("utf-8")), "ir_file": "subject.mir",
                "ir_sha256": self.module.sha256(),
                "functions": [{"name": f.name, "ops": len(f.ops), "params": len(f.params),
                               "results": len(f.results), "assumptions": [str(a) for a in f.assumptions]}
                              for f in self.module.functions],
                "notes": self.notes}


def _select(module: Module, fn: str | None) -> Module:
    if fn is None:
        return module
    from mind.calling import select_function

    return Module([select_function(module, fn)])


def _from_source(path: str, text: str, limits: SolverLimits) -> Subject:
    from mind.compiler.autodiff.transform import recording_vjp_rules
    from mind.compiler.frontend.api import compile_source, lower_source
    from mind.compiler.passes import combined_rule
    from mind.compiler.passes.rewrite import dead_code_elimination, renumber, rewrite

    try:
        with recording_vjp_rules() as used:
            lowered = lower_source(text, path)
        canonical = compile_source(text, path)
    except MindError as exc:
        exc.sources.setdefault(path, text)
        raise
    steps: Counter[str] = Counter()
    def record(name: str) -> None:
        steps[name] += 1

    observed = Module([renumber(dead_code_elimination(rewrite(f, combined_rule(record)))) for f in lowered.functions])
    check = CheckStats()
    findings = module_findings(canonical, limits, check)
    return Subject(path, text, "mind", canonical, findings, [], sorted(used), dict(sorted(steps.items())),
                   observed.text() == canonical.text())


def _from_dump(path: str, text: str, limits: SolverLimits) -> Subject:
    from mind.verify.dump import verify_text

    rep = verify_text(text, path, "auto", limits)
    if rep.module is None:
        raise MindError([f.diag for f in rep.findings], rep.sources)
    return Subject(path, text, rep.format, rep.module, list(rep.findings), list(rep.notes))


def load_subject(path: str, fn: str | None, limits: SolverLimits) -> Subject:
    """Read and check ``path``; only the function ``fn`` if given.  Unreadable input is a
    ``MindError`` (nothing to audit); a program that fails its checks is a subject with findings."""
    from mind.driver_io import read_source

    return subject_of(path, read_source(path), fn, limits)


def subject_of(path: str, text: str, fn: str | None, limits: SolverLimits) -> Subject:
    """``load_subject`` of the text ``text`` read from ``path`` (``--check`` reads the bundle's copy)."""
    subject = (_from_source if path.endswith(".mind") else _from_dump)(path, text, limits)
    if fn is not None:
        subject.module = _select(subject.module, fn)
        subject.findings = [f for f in subject.findings if _in_functions(f, subject.module)]
    if not subject.module.functions:
        raise error("E7002", f"`{path}` defines no function to audit")
    return subject


def _in_functions(finding: Finding, module: Module) -> bool:
    span = finding.diag.span
    if span is None:
        return True
    for f in module.functions:
        s = f.span
        if s is None or (s.line <= span.line <= (s.end_line or s.line)):
            return True
    return False
