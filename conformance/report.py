"""What a run leaves behind: ``results.json`` (schema ``results.schema.json``), JUnit XML, and the
status table per op × label as Markdown and as a self-contained HTML page.

Everything here is a function of the :class:`~mind.conformance.run.RunResult`; apart from the
durations and the date, the bytes are the same whatever ``-j`` was.
"""

from __future__ import annotations

import html
import json
import os
import xml.etree.ElementTree as ET
from collections import Counter
from typing import Any

from mind.conformance.run import OUTCOMES, RunResult
from mind.conformance.suite import GENERAL_LABELS, HERE, all_labels
from mind.spec.ops import OPS

RESULTS_FORMAT = "mind-conformance-results/1"
RESULTS_SCHEMA = os.path.join(HERE, "results.schema.json")
COLUMNS = ("semantics", "edge_cases", "accuracy", "C1", "C2", "C3", "C4", "C5", "C6", "C7")
MAX_DETAILS = 12


def label_counts(result: RunResult) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {lab: Counter() for lab in all_labels()}
    for c in result.cases:
        for lab in c.entry.labels:
            counts.setdefault(lab, Counter())[c.outcome] += 1
    return counts


def results_json(result: RunResult) -> dict[str, Any]:
    from mind.version import __version__

    exp = result.expectations
    kinds = Counter(c.kind for c in result.cases if c.outcome in ("fail", "xfail") and c.kind)
    summary = {o: result.count(o) for o in OUTCOMES}
    return {
        "format": RESULTS_FORMAT,
        "suite": {"name": result.suite.name, "version": result.suite.version,
                  "spec_version": result.suite.spec_version, "manifest_sha256": result.suite.manifest_sha256},
        "implementation": {"impl": result.options.impl, "name": result.identity.name,
                           "version": result.identity.version,
                           "declared_profiles": list(result.identity.profiles) if result.identity.profiles is not None
                           else None},
        "profiles": list(result.profiles),
        "expectations": None if exp.path is None else {
            "file": exp.path, "sha256": exp.sha256,
            "unused": [{"line": e.line, "kind": e.kind, "pattern": e.pattern} for e in exp.unused()]},
        "run": {"date": result.date, "jobs": result.options.jobs, "timeout_s": result.options.timeout_s,
                "select": list(result.options.select), "mind_version": __version__},
        "summary": {"total": len(result.cases), **summary, "verdict": result.verdict,
                    "first_failing_ops": result.first_failing_ops(), "failure_kinds": dict(sorted(kinds.items()))},
        "labels": [{"label": lab, **{o: n[o] for o in OUTCOMES}} for lab, n in label_counts(result).items()
                   if sum(n.values())],
        "cases": [{"id": c.entry.id, "sha256": c.entry.sha256, "outcome": c.outcome, "kind": c.kind,
                   "message": c.message, "details": c.details[:MAX_DETAILS], "duration_s": c.duration_s,
                   "labels": list(c.entry.labels), "ops": list(c.entry.ops), "reason": c.reason,
                   "culprit": c.culprit, "cascade": c.cascade, "reproduce": c.reproduce} for c in result.cases],
    }


def validate_results(doc: Any) -> None:
    """Raise ``jsonschema.ValidationError`` if ``doc`` does not follow the results schema."""
    from mind.conformance.suite import _validator

    _validator(RESULTS_SCHEMA).validate(doc)


# ---------------------------------------------------------------------------------------------
# JUnit XML
# ---------------------------------------------------------------------------------------------

def junit_xml(result: RunResult) -> str:
    cases = result.cases
    failures = sum(1 for c in cases if c.outcome in ("fail", "xpass"))
    skipped = sum(1 for c in cases if c.outcome in ("skip", "unsupported", "xfail"))
    total_time = sum(c.duration_s for c in cases)
    root = ET.Element("testsuites", name="mind-conformance", tests=str(len(cases)), failures=str(failures),
                      errors="0", skipped=str(skipped), time=f"{total_time:.3f}")
    suite = ET.SubElement(root, "testsuite", name=f"{result.suite.name} {result.suite.version} on {result.identity.name}",
                          tests=str(len(cases)), failures=str(failures), errors="0", skipped=str(skipped),
                          time=f"{total_time:.3f}", timestamp=result.date)
    props = ET.SubElement(suite, "properties")
    for k, v in (("impl", result.options.impl), ("implementation_version", result.identity.version),
                 ("spec_version", result.suite.spec_version), ("profiles", ",".join(result.profiles))):
        ET.SubElement(props, "property", name=k, value=v)
    for c in cases:
        group = c.entry.id.rsplit("/", 1)[0].replace("/", ".")
        tc = ET.SubElement(suite, "testcase", classname=f"conformance.{group}", name=c.entry.id,
                           time=f"{c.duration_s:.3f}")
        body = "\n".join(c.details + [f"reproduce: {c.reproduce}"])
        if c.outcome == "fail":
            el = ET.SubElement(tc, "failure", message=c.message, type=c.kind)
            el.text = body
        elif c.outcome == "xpass":
            el = ET.SubElement(tc, "failure", message=c.message, type="xpass")
            el.text = body
        elif c.outcome in ("skip", "unsupported", "xfail"):
            ET.SubElement(tc, "skipped", message=f"{c.outcome}: {c.reason or c.message}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# ---------------------------------------------------------------------------------------------
# status tables
# ---------------------------------------------------------------------------------------------

def _cell(n: Counter[str]) -> tuple[str, str]:
    """(text, state) of one op × label cell; state is pass, fail, xfail, ns (not run) or none."""
    ran = n["pass"] + n["fail"] + n["xfail"] + n["xpass"]
    bad = n["fail"] + n["xpass"]
    if not sum(n.values()):
        return "", "none"
    if not ran:
        return "n/s" if n["unsupported"] else "skip", "ns"
    if bad:
        return f"✗ {n['pass']}/{ran}", "fail"
    if n["xfail"]:
        return f"≈ {n['pass']}/{ran}", "xfail"
    return f"✓ {ran}", "pass"


def _rows(result: RunResult) -> list[tuple[str, list[tuple[str, str]]]]:
    """One row per op (a cell per label column), then one per general label (ir.parse, …)."""
    counts = label_counts(result)
    rows = [(op, [_cell(counts.get(f"{op}.{col}", Counter())) for col in COLUMNS]) for op in OPS]
    for lab in GENERAL_LABELS:
        rows.append((lab, [_cell(counts[lab])] + [("", "none")] * (len(COLUMNS) - 1)))
    return rows


def _headline(result: RunResult) -> list[str]:
    s = {o: result.count(o) for o in OUTCOMES}
    first = result.first_failing_ops()
    return [f"implementation: {result.identity.name} {result.identity.version} (`--impl {result.options.impl}`)",
            f"suite: {result.suite.name} {result.suite.version}, spec {result.suite.spec_version}; "
            f"profiles: {', '.join(result.profiles)}; date: {result.date}",
            f"verdict: **{result.verdict}** — " + ", ".join(f"{v} {k}" for k, v in s.items()) +
            (f"; first failing ops: {', '.join(first)}" if first else "")]


def status_markdown(result: RunResult) -> str:
    lines = ["# Conformance status", ""] + [f"- {h}" for h in _headline(result)] + [
        "", "Cells: ✓ all passed · ✗ passed/ran with unexpected failures · ≈ passed/ran, the failures expected "
        "(xfail) · n/s not supported (profile) · blank: no case.", "",
        "| op | " + " | ".join(COLUMNS) + " |", "|---|" + "---|" * len(COLUMNS)]
    for op, cells in _rows(result):
        lines.append(f"| `{op}` | " + " | ".join(t for t, _ in cells) + " |")
    failing = [c for c in result.cases if c.outcome in ("fail", "xpass")]
    if failing:
        lines += ["", "## Unexpected outcomes", "", "| case | kind | message | reproduce |", "|---|---|---|---|"]
        for c in failing[:200]:
            msg = c.message.replace("|", "∣").replace("\n", " ")[:160]
            casc = f" (cascade of {', '.join(c.cascade)})" if c.cascade else ""
            lines.append(f"| `{c.entry.id}` | {c.kind or c.outcome}{casc} | {msg} | `{c.reproduce}` |")
        if len(failing) > 200:
            lines.append(f"| … {len(failing) - 200} more | | | |")
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.25em .5em;text-align:center}td.op{text-align:left;font-family:monospace}
.pass{background:#d7f5d7}.fail{background:#f8c9c9}.xfail{background:#fbeec2}.ns{background:#e8e8e8}
code{font-size:90%}"""


def status_html(result: RunResult) -> str:
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>MIND conformance: {e(result.identity.name)}</title><style>{_CSS}</style></head><body>",
           "<h1>MIND conformance status</h1><ul>"]
    out += [f"<li>{e(h).replace('**', '')}</li>" for h in _headline(result)]
    out += ["</ul><table><tr><th>op</th>" + "".join(f"<th>{e(c)}</th>" for c in COLUMNS) + "</tr>"]
    for op, cells in _rows(result):
        out.append(f'<tr><td class="op">{e(op)}</td>' +
                   "".join(f'<td class="{s}">{e(t)}</td>' for t, s in cells) + "</tr>")
    out.append("</table>")
    failing = [c for c in result.cases if c.outcome in ("fail", "xpass")]
    if failing:
        out.append("<h2>Unexpected outcomes</h2><table><tr><th>case</th><th>kind</th><th>message</th>"
                   "<th>reproduce</th></tr>")
        for c in failing[:500]:
            out.append(f'<tr><td class="op">{e(c.entry.id)}</td><td>{e(c.kind or c.outcome)}</td>'
                       f'<td style="text-align:left">{e(c.message[:300])}</td><td><code>{e(c.reproduce)}</code></td></tr>')
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------

def _write(path: str, text: str) -> None:
    from mind.driver_io import atomic_write

    atomic_write(path, lambda fh: fh.write(text.encode("utf-8")))


def results_text(result: RunResult) -> str:
    doc = results_json(result)
    validate_results(doc)
    return json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=False) + "\n"


def write_report(result: RunResult, directory: str) -> list[str]:
    """Write results.json, junit.xml, status.md and status.html into ``directory`` (created if its
    parent exists; E7003 otherwise)."""
    from mind.diagnostics import error

    parent = os.path.dirname(os.path.abspath(directory))
    if not os.path.isdir(parent):
        raise error("E7003", f"cannot write the report into `{directory}`: `{parent}` does not exist",
                    help="create the parent folder first")
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise error("E7003", f"cannot write the report into `{directory}`: it exists and is not a folder")
    os.makedirs(directory, exist_ok=True)
    out = {"results.json": results_text(result), "junit.xml": junit_xml(result),
           "status.md": status_markdown(result), "status.html": status_html(result)}
    for name, text in out.items():
        _write(os.path.join(directory, name), text)
    return [os.path.join(directory, n) for n in out]


def write_junit(result: RunResult, path: str) -> None:
    _write(path, junit_xml(result))
