"""Assembling an audit: every section, the findings they raise, and the summary.

``build_audit(options)`` is a function of its ``AuditOptions`` (resolved once by the CLI): it reads
the subject, runs every check, and returns the audit document (what ``audit.json`` holds) with the
files that go beside it (the canonical IR, the SMT-LIB queries, the compiled artifacts).  Nothing
here writes a file (``bundle.py`` does) and nothing here depends on the clock, the process or hash
order, except the timings, which are kept apart (``Audit.timings``) and written only on request.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from mind.verify.audit.options import AuditOptions

__all__ = ["Audit", "build_audit", "FORMAT", "LEVELS"]

FORMAT = "mind-audit/1"

#: Finding levels, as SARIF names them: ``error`` and ``warning`` make an audit fail; a ``note``
#: records an outcome that depends on run-time values (it does not).
LEVELS = ("error", "warning", "note")

#: The obligations' verdicts and the finding level of each that is not ``proved``.
VERDICT_LEVEL = {"refuted": "error", "disagreement": "error", "unknown": "warning", "unconfirmed": "warning"}


@dataclass
class Audit:
    doc: dict[str, Any]
    files: dict[str, bytes]  # bundle file name -> content (besides the reports)
    sources: dict[str, str]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.doc["summary"]["verdict"] == "pass"


class _Findings:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, section: str, level: str, rule: str, message: str, location: dict[str, Any] | None = None,
            ref: str | None = None, source: str | None = None) -> None:
        self.items.append({"section": section, "level": level, "rule": rule, "message": message,
                           "location": location, "ref": ref})


def _loc(span: Any) -> dict[str, Any] | None:
    return span.to_json() if span is not None else None


def _timed(timings: dict[str, float], name: str, fn: Any, *args: Any) -> Any:
    t0 = time.perf_counter()
    try:
        return fn(*args)
    finally:
        timings[name] = round(time.perf_counter() - t0, 6)


def _proofs(subject: Any, options: AuditOptions, findings: _Findings, files: dict[str, bytes]) -> dict[str, Any]:
    from mind.verify.audit.proofs import decision_procedure_view, program_obligations, query_name, solve_queries
    from mind.verify.audit.solvers import SEED, solver_versions

    obligations = program_obligations(subject.module)
    texts: dict[str, tuple[str, str]] = {}
    for o in obligations:
        if o.query is not None:
            texts.setdefault(query_name(o.query), (o.query, o.expect))
    queries = solve_queries(texts, options.limits)
    for name, (text, _expect) in texts.items():
        files[name] = text.encode()
    view = decision_procedure_view(subject.module, subject.findings)
    out = []
    ok_by_place: dict[tuple[str, int | None], bool] = {}
    for o in obligations:
        if o.method == "smt":
            q = queries[query_name(o.query)]
            verdict = q["verdict"]
            model = q["solvers"]["z3"]["model"] if verdict == "refuted" else None
            cex = {k: v for k, v in (model or {}).items() if "." not in k} or None
            qname = q["file"]
        else:
            verdict, cex, qname = ("proved" if o.value else "refuted"), None, None
        place = (o.function, o.op_index)
        ok_by_place[place] = ok_by_place.get(place, True) and verdict == "proved"
        dp = view.get(place, [])
        rec = {"id": o.id, "function": o.function, "op": o.op or None, "value": o.value_name, "kind": o.kind,
               "label": o.label, "statement": o.statement, "location": _loc(o.span), "method": o.method,
               "expect": o.expect, "query": qname, "verdict": verdict, "counterexample": cex,
               "decision_procedure": [_finding_ref(f) for f in dp]}
        out.append(rec)
        if verdict != "proved":
            what = {"refuted": "does not hold", "disagreement": "the two solvers disagree on it",
                    "unknown": "neither solver could decide it", "unconfirmed": "only one solver proved it"}[verdict]
            msg = f"{o.label} ({o.statement}) {what}" + (f": fails when {_assign(cex)}" if cex else "")
            if o.value_name:
                msg = f"`%{o.value_name} = {o.op}(...)` in @{o.function}: {msg}" if o.op else f"@{o.function}: {msg}"
            findings.add("proofs", VERDICT_LEVEL[verdict], o.label, msg, _loc(o.span), o.id)
    for f in subject.findings:
        d = f.diag
        findings.add("proofs", "error", d.label or d.code, f"{d.code}: {d.message}", _loc(d.span), d.code)
    places = set(ok_by_place) | set(view)
    for place in sorted(places, key=lambda p: (p[0], -1 if p[1] is None else p[1])):
        solver_ok = ok_by_place.get(place, True)
        decider_ok = not view.get(place)
        if solver_ok != decider_ok:
            fn, index = place
            where = f"op #{index} of @{fn}" if index is not None else f"@{fn}"
            findings.add("proofs", "error", "ir.verify",
                         f"the decision procedure and the SMT solvers disagree about {where}: the IR verifier "
                         f"{'accepts' if decider_ok else 'rejects'} it, the solvers "
                         f"{'prove' if solver_ok else 'do not prove'} every obligation", None, None)
    counts: dict[str, int] = {}
    for rec in out:
        counts[rec["verdict"]] = counts.get(rec["verdict"], 0) + 1
    limits = options.limits
    return {"solvers": [{"name": n, "version": v, "rlimit": limits.rlimit, "timeout_s": limits.timeout_s,
                         "seed": SEED} for n, v in solver_versions().items()],
            "decision_procedure": {"module": "mind.ir.decide", "rlimit": limits.rlimit,
                                   "timeout_s": limits.timeout_s,
                                   "findings": [f.to_json() for f in subject.findings]},
            "counts": dict(sorted(counts.items())), "obligations": out,
            "queries": [queries[n] for n in sorted(queries)]}


def _finding_ref(f: Any) -> str:
    return f"{f.diag.code}" + (f" [{f.diag.label}]" if f.diag.label else "")


def _assign(env: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(env.items()))


def _numerics(subject: Any, findings: _Findings) -> dict[str, Any]:
    from mind.verify.audit.numerics import numerics_section

    sec = numerics_section(subject.module)
    for s in sec["total_semantics"]:
        if s["verdict"] == "excluded":
            continue
        level = "warning" if s["verdict"] == "occurs" else "note"
        how = ("decided statically: it occurs" if s["verdict"] == "occurs"
               else "depends on the values at run time")
        findings.add("numerics", level, s["label"],
                     f"`%{s['value']} = {s['op']}(...)` in @{s['function']}: {s['site']} ({how}); the spec: "
                     f"{s['spec']}; IEEE/NumPy: {s['ieee_numpy']}", s["location"], s["site"])
    return sec


def _gradients(subject: Any, findings: _Findings) -> dict[str, Any]:
    from mind.verify.audit.evidence import gradients_section

    sec = gradients_section(subject.vjp_rules)
    for c in sec["checks"]:
        if c["verdict"] not in ("proved", "passed"):
            findings.add("gradients", "error", f"{c['rule'].split('/')[0]}.vjp",
                         f"VJP rule {c['rule']}: check {c['check']} gave {c['verdict']}: {c['detail']}")
    return sec


def _canonicalization(subject: Any, findings: _Findings) -> dict[str, Any]:
    from mind.verify.audit.evidence import canonicalization_section

    sec = canonicalization_section(subject.steps, subject.canonical_agrees, subject.format)
    if sec["applied"] and not sec["observed_matches_frontend"]:
        findings.add("canonicalization", "error", "rewrites",
                     "the canonicalization observed by the audit gives other Core IR than the frontend's")
    for r in sec["rules"]:
        if r["verdict"] != "proved":
            findings.add("canonicalization", "error", f"rewrite.{r['rule']}",
                         f"rewrite rule {r['rule']} ({r['statement']}) is {r['verdict']}")
    return sec


def _traceability(subject: Any, options: AuditOptions, proofs: dict[str, Any], findings: _Findings) -> dict[str, Any]:
    from mind.verify.audit.traceability import program_labels, traceability_section

    labels = program_labels(subject.module, [o["label"] for o in proofs["obligations"]])
    sec = traceability_section(labels, proofs["obligations"], ("reference",) + options.backends)
    for impl, outcomes in sec["case_outcomes"].items():
        for cid, outcome in outcomes.items():
            kind = outcome.split(":", 1)[0]
            if kind in ("fail", "xpass"):
                findings.add("traceability", "error", "conformance", f"conformance case {cid} on {impl}: {outcome}",
                             None, cid)
            elif kind == "xfail":
                findings.add("traceability", "note", "conformance",
                             f"conformance case {cid} on {impl} fails as its expectations say (a known departure "
                             f"from the spec){outcome[len(kind):]}", None, cid)
    for lab in sec["uncovered"]:
        findings.add("traceability", "note", lab, f"{lab} is covered by no obligation and no conformance case")
    return sec


def _compiled(subject: Any, options: AuditOptions, findings: _Findings, files: dict[str, bytes]) -> list[dict[str, Any]]:
    if not options.backends:
        return []
    from mind.verify.audit.compiled import compiled_section

    return compiled_section(subject.module, options, findings, files)


def assumptions_section(backends: tuple[str, ...]) -> dict[str, Any]:
    from mind.verify.audit.limits import ASSUMPTIONS

    return ASSUMPTIONS | {"backends_audited": list(backends)}


def _summary(findings: list[dict[str, Any]], proofs: dict[str, Any]) -> dict[str, Any]:
    by_level = {lvl: sum(1 for f in findings if f["level"] == lvl) for lvl in LEVELS}
    by_section: dict[str, int] = {}
    for f in findings:
        by_section[f["section"]] = by_section.get(f["section"], 0) + 1
    failed = by_level["error"] + by_level["warning"] > 0
    return {"verdict": "fail" if failed else "pass", "findings": by_level,
            "findings_by_section": dict(sorted(by_section.items())),
            "obligations": proofs["counts"], "queries": len(proofs["queries"])}


def build_audit(options: AuditOptions) -> Audit:
    from mind.verify.audit.identity import tool_identity
    from mind.verify.audit.subject import load_subject

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    subject = _timed(timings, "subject", load_subject, options.file, options.fn, options.limits)
    findings = _Findings()
    files: dict[str, bytes] = {"subject.mir": subject.module.text().encode()}
    proofs = _timed(timings, "proofs", _proofs, subject, options, findings, files)
    gradients = _timed(timings, "gradients", _gradients, subject, findings)
    numerics = _timed(timings, "numerics", _numerics, subject, findings)
    canonical = _timed(timings, "canonicalization", _canonicalization, subject, findings)
    compiled = _timed(timings, "compiled", _compiled, subject, options, findings, files)
    trace = _timed(timings, "traceability", _traceability, subject, options, proofs, findings)
    identity = _timed(timings, "tool", tool_identity, options.command(), options.recorded())
    timings["total"] = round(time.perf_counter() - t0, 6)
    doc = {"format": FORMAT, "created": options.created(),
           "summary": _summary(findings.items, proofs),
           "subject": subject.to_json(), "tool": identity, "proofs": proofs, "gradients": gradients,
           "numerics": numerics, "canonicalization": canonical, "compiled": compiled, "traceability": trace,
           "assumptions": assumptions_section(options.backends), "findings": findings.items}
    return Audit(doc, files, subject.sources, timings)
