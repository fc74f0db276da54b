"""Traceability: spec label → the program's obligations → the conformance cases that cover the
label → their results in this run.

The labels are those of the program: every constraint label an obligation comes from, ``ir.verify``,
and the semantics, edge-case and accuracy labels of every op it applies (``conformance.suite.op_labels``).
The covering cases are the suite's entries that carry the label (``conformance/suite/manifest.json``);
they are run now, through the conformance runner (``mind.conformance.run``: the same subprocess
protocol and verdicts as ``mind conformance run``), on the reference and on each backend the audit
was asked for, with the expectations MIND ships for its own backends (their known departures from the
spec, each with a reason: an ``xfail`` is a note in the audit; a ``fail`` or an ``xpass`` an error).
Only executed evidence counts: a label no obligation and no executed case covers is
listed as uncovered.  The repository's own pytest suite is not part of an installed MIND and is not
re-run by an audit (``docs/audit.md``).
"""

from __future__ import annotations

import csv
import glob
import io
from typing import Any, Sequence

from mind.ir.core import Module

__all__ = ["program_labels", "traceability_section", "traceability_csv"]

CSV_COLUMNS = ("label", "statement", "evidence", "id", "implementation", "result")


def program_labels(module: Module, obligation_labels: Sequence[str]) -> list[str]:
    from mind.conformance.suite import op_labels

    labels = set(obligation_labels)
    for fn in module.functions:
        for op in fn.ops:
            labels.update(op_labels(op.op))
    return sorted(labels)


def expectations_file(impl: str) -> str | None:
    """The expectations MIND ships for one of its own backends (``conformance/expectations/IMPL.expect``:
    its known departures from the spec, each with its label and reason), if there is one."""
    from importlib import resources

    path = resources.files("mind.conformance").joinpath("expectations", f"{impl}.expect")
    return str(path) if path.is_file() else None


#: (implementation, case id) -> outcome, for the life of the process: a case's outcome on one
#: implementation does not change while the process runs, so audits in one process (a test session,
#: a benchmark) run each case once.
_OUTCOMES: dict[tuple[str, str], str] = {}


def _run_cases(impl: str, ids: list[str]) -> dict[str, str]:
    """case id -> outcome on ``impl`` (``pass``, ``fail: why``, ``xfail: the known departure``, ...)."""
    todo = [i for i in ids if (impl, i) not in _OUTCOMES]
    if todo:
        from mind.conformance.run import RunOptions, run

        result = run(RunOptions(impl=impl, select=tuple(glob.escape(i) for i in todo),
                                expect=expectations_file(impl)))
        for c in result.cases:
            why = c.message if c.outcome == "fail" else (c.reason if c.outcome in ("xfail", "xpass", "skip") else "")
            _OUTCOMES[(impl, c.entry.id)] = c.outcome + (f": {why}" if why else "")
    return {i: _OUTCOMES[(impl, i)] for i in ids}


def traceability_section(labels: list[str], obligations: list[dict[str, Any]],
                         implementations: Sequence[str]) -> dict[str, Any]:
    from mind.conformance.suite import label_text, load_suite

    suite = load_suite()
    covering: dict[str, list[str]] = {lab: [] for lab in labels}
    for e in suite.entries:
        for lab in e.labels:
            if lab in covering:
                covering[lab].append(e.id)
    ids = sorted({i for v in covering.values() for i in v})
    results = {impl: _run_cases(impl, ids) for impl in implementations}
    by_label: dict[str, list[dict[str, Any]]] = {}
    for o in obligations:
        by_label.setdefault(o["label"], []).append(o)
    rows = []
    for lab in labels:
        obs = by_label.get(lab, [])
        cases = covering[lab]
        verdicts: dict[str, int] = {}
        for o in obs:
            verdicts[o["verdict"]] = verdicts.get(o["verdict"], 0) + 1
        case_results = {impl: _count(results[impl][c] for c in cases) for impl in implementations}
        rows.append({"label": lab, "statement": label_text(lab), "obligations": [o["id"] for o in obs],
                     "obligation_verdicts": dict(sorted(verdicts.items())), "cases": cases,
                     "case_results": case_results, "covered": bool(obs or cases)})
    return {"suite": {"name": suite.name, "version": suite.version, "spec_version": suite.spec_version,
                      "manifest_sha256": suite.manifest_sha256},
            "implementations": list(implementations), "labels": rows,
            "uncovered": [r["label"] for r in rows if not r["covered"]],
            "case_outcomes": {impl: dict(sorted(results[impl].items())) for impl in implementations}}


def _count(outcomes: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for o in outcomes:
        key = o.split(":", 1)[0]
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def traceability_csv(section: dict[str, Any], obligations: list[dict[str, Any]]) -> str:
    """One row per (label, piece of evidence): each obligation with its verdict, each covering case
    with its outcome on each implementation; a label with neither gets one ``uncovered`` row."""
    verdict = {o["id"]: o["verdict"] for o in obligations}
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for row in section["labels"]:
        lab, text = row["label"], row["statement"]
        for oid in row["obligations"]:
            w.writerow((lab, text, "obligation", oid, "z3+cvc5", verdict[oid]))
        for cid in row["cases"]:
            for impl in section["implementations"]:
                w.writerow((lab, text, "conformance", cid, impl, section["case_outcomes"][impl][cid]))
        if not row["covered"]:
            w.writerow((lab, text, "uncovered", "", "", ""))
    return buf.getvalue()
