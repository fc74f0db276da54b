"""``audit.html``: the one page a person reads.  Self-contained: inline CSS, no script, no network
request, no external asset.  Summary first (verdict, counts, subject, tool), then the findings with
the source lines they point at (rendered by ``mind.diagnostics.render``, the renderer of every
diagnostic), then each section.  Long lists (every obligation of a 10,000-op program) are grouped
by label; ``audit.json`` holds every record.
"""

from __future__ import annotations

from html import escape
from typing import Any

from mind.diagnostics import Diagnostic, Span, render

__all__ = ["audit_html", "finding_diagnostic"]

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2rem auto;max-width:70rem;padding:0 1rem;
color:#1b1f24;line-height:1.45}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{margin-top:2.2rem;border-bottom:1px solid #d0d7de;padding-bottom:.2rem}
table{border-collapse:collapse;margin:.6rem 0;width:100%}th,td{border:1px solid #d0d7de;padding:.25rem .5rem;
text-align:left;vertical-align:top;font-size:.92rem}th{background:#f6f8fa}
pre{background:#f6f8fa;border:1px solid #d0d7de;padding:.6rem;white-space:pre-wrap;font-size:.85rem}
code{font-size:.9em}.verdict{font-size:1.3rem;font-weight:700;padding:.5rem 1rem;border-radius:6px;display:inline-block}
.pass{background:#dafbe1;color:#116329}.fail{background:#ffebe9;color:#a40e26}
.error{color:#a40e26;font-weight:600}.warning{color:#9a6700;font-weight:600}.note{color:#0550ae}
.proved,.passed,.excluded{color:#116329}.small{color:#57606a;font-size:.85rem}
"""


def finding_diagnostic(f: dict[str, Any]) -> Diagnostic:
    """A finding as a diagnostic (code E7013, its rule as the label), to render like any other."""
    loc = f["location"]
    span = None if loc is None else Span(loc["file"], loc["line"], loc["column"], loc["end_line"], loc["end_column"])
    return Diagnostic("E7013", f["message"], span, f["rule"], severity=f["level"])


def _table(headers: list[str], rows: list[list[Any]], raw: set[int] = frozenset()) -> str:  # type: ignore[assignment]
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c if i in raw else escape(str(c))}</td>" for i, c in enumerate(r)) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _verdict_cell(v: str) -> str:
    return f'<span class="{escape(v)}">{escape(v)}</span>'


def _summary(doc: dict[str, Any]) -> str:
    s, subj, tool = doc["summary"], doc["subject"], doc["tool"]
    verdict = s["verdict"]
    counts = ", ".join(f"{n} {k}" for k, n in s["obligations"].items()) or "none"
    f = s["findings"]
    rows = [["verdict", verdict.upper()], ["findings", f"{f['error']} errors, {f['warning']} warnings, {f['note']} notes"],
            ["obligations", f"{counts} ({s['queries']} distinct SMT queries, each answered by z3 and cvc5)"],
            ["input", f"{subj['file']} ({subj['format']}, {subj['bytes']} bytes)"], ["input SHA-256", subj["sha256"]],
            ["canonical Core IR SHA-256", subj["ir_sha256"]],
            ["functions", ", ".join(f"@{fn['name']} ({fn['ops']} ops)" for fn in subj["functions"])],
            ["tool", f"mind {tool['version']} (spec {tool['spec_version']}), sources {tool['source_sha256']}"],
            ["solvers", ", ".join(f"{k} {v}" for k, v in tool["solvers"].items())],
            ["command", " ".join(tool["command"])], ["created", doc["created"] or "not recorded (SOURCE_DATE_EPOCH unset)"]]
    return (f'<p class="verdict {"pass" if verdict == "pass" else "fail"}">Audit verdict: {escape(verdict.upper())}</p>'
            + _table(["", ""], rows))


def _findings(doc: dict[str, Any], sources: dict[str, str]) -> str:
    items = doc["findings"]
    if not items:
        return "<p>No findings: every check holds.</p>"
    out = []
    for f in items:
        text = render(finding_diagnostic(f), sources)
        out.append(f'<p><span class="{escape(f["level"])}">{escape(f["level"])}</span> '
                   f'<code>{escape(f["rule"])}</code> <span class="small">({escape(f["section"])})</span></p>'
                   f"<pre>{escape(text)}</pre>")
    return "".join(out)


def _proofs(doc: dict[str, Any]) -> str:
    p = doc["proofs"]
    solvers = _table(["solver", "version", "rlimit", "timeout (s)", "seed"],
                     [[s["name"], s["version"], s["rlimit"], s["timeout_s"], s["seed"]] for s in p["solvers"]])
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for o in p["obligations"]:
        groups.setdefault((o["label"], o["kind"], o["method"], o["verdict"]), []).append(o)
    rows = []
    for (label, _kind, method, verdict), obs in sorted(groups.items()):
        first = obs[0]
        queries = sorted({o["query"] for o in obs if o["query"]})
        shown = ", ".join(queries[:3]) + (f" and {len(queries) - 3} more" if len(queries) > 3 else "")
        rows.append([escape(label), escape(first["statement"]), len(obs), escape(method), _verdict_cell(verdict),
                     escape(shown or "—")])
    table = _table(["spec label", "statement", "obligations", "method", "verdict", "SMT-LIB files"], rows,
                   raw={0, 1, 3, 4, 5})
    dp = p["decision_procedure"]
    return (solvers + f"<p>The IR verifier (the decision procedure of <code>{escape(dp['module'])}</code>) reported "
            f"{len(dp['findings'])} finding(s); its verdicts are compared with the solvers' op by op.</p>" + table)


def _gradients(doc: dict[str, Any]) -> str:
    g = doc["gradients"]
    if not g["rules"]:
        return f"<p>{escape(g.get('note', 'no gradients'))}</p>"
    return (f"<p>VJP rules used: {escape(', '.join(g['rules']))}.</p>"
            + _table(["rule", "check", "verdict", "detail"],
                     [[escape(c["rule"]), escape(c["check"]), _verdict_cell(c["verdict"]), escape(c["detail"])]
                      for c in g["checks"]], raw={0, 1, 2, 3}))


def _numerics(doc: dict[str, Any]) -> str:
    n = doc["numerics"]
    acc = _table(["op", "dtype", "class", "bound", "applications"],
                 [[a["op"], a["dtype"], a["class"], a["bound"], a["count"]] for a in n["accuracy"]])
    sites = _table(["site", "value", "verdict", "the spec", "IEEE / NumPy"],
                   [[escape(s["site"]), escape(f"@{s['function']} %{s['value']}"), _verdict_cell(s["verdict"]),
                     escape(s["spec"]), escape(s["ieee_numpy"])] for s in n["total_semantics"]], raw={0, 1, 2, 3, 4})
    return "<h3>Accuracy</h3>" + acc + "<h3>Where the spec's total semantics decides</h3>" + (
        sites if n["total_semantics"] else "<p>No such site in this program.</p>")


def _canonicalization(doc: dict[str, Any]) -> str:
    c = doc["canonicalization"]
    if not c["applied"]:
        return f"<p>{escape(c['note'])}</p>"
    steps = _table(["step", "count", "kind", "why it needs no proof"],
                   [[s["step"], s["count"], s["kind"], s["why"]] for s in c["steps"]])
    rules = _table(["rule", "statement", "verdict"],
                   [[escape(r["rule"]), escape(r["statement"]), _verdict_cell(r["verdict"])] for r in c["rules"]],
                   raw={0, 1, 2}) if c["rules"] else "<p>No rewrite rule of the table fired.</p>"
    return steps + rules


def _compiled(doc: dict[str, Any]) -> str:
    if not doc["compiled"]:
        return "<p>No backend was asked for (<code>--backend cpu</code>).</p>"
    out = []
    for b in doc["compiled"]:
        for fn in b["functions"]:
            if "skipped" in fn:
                out.append(f"<p>{escape(b['backend'])} @{escape(fn['function'])}: {escape(fn['skipped'])}</p>")
                continue
            arts = _table(["artifact", "SHA-256", "rebuilt identically"],
                          [[a["file"], a["sha256"], "yes" if a["rebuild_identical"] else "NO"] for a in fn["artifacts"]])
            res = _table(["inputs", "result", "largest error (its op)", "bound", "within", "largest ULP distance "
                          "to the reference run"],
                         [[run["inputs"], r["index"], r["max_error"], r["bound"], "yes" if r["within_bound"] else "NO",
                           "—" if r["end_to_end_max_ulp"] is None else r["end_to_end_max_ulp"]]
                          for run in fn["runs"] for r in run["results"]])
            out.append(f"<h3>{escape(b['backend'])}: @{escape(fn['function'])} "
                       f"(sizes {escape(str(fn['sizes']))})</h3>" + arts + res)
    return "".join(out)


def _traceability(doc: dict[str, Any]) -> str:
    t = doc["traceability"]
    rows = []
    for r in t["labels"]:
        ov = ", ".join(f"{n} {k}" for k, n in r["obligation_verdicts"].items()) or "—"
        cr = "; ".join(f"{impl}: " + (", ".join(f"{n} {k}" for k, n in c.items()) or "—")
                       for impl, c in r["case_results"].items())
        rows.append([r["label"], len(r["obligations"]), ov, len(r["cases"]), cr, "yes" if r["covered"] else "NO"])
    suite = t["suite"]
    return (f"<p>Conformance suite {escape(suite['name'])} {escape(suite['version'])} (spec "
            f"{escape(suite['spec_version'])}); cases run now on {escape(', '.join(t['implementations']))}. "
            f"Every row is in <code>traceability.csv</code>.</p>"
            + _table(["spec label", "obligations", "their verdicts", "conformance cases", "results", "covered"], rows)
            + (f"<p>Uncovered: {escape(', '.join(t['uncovered']))}</p>" if t["uncovered"] else "<p>Every label is covered.</p>"))


def _assumptions(doc: dict[str, Any]) -> str:
    a = doc["assumptions"]
    parts = []
    for key, title in (("trusted_base", "Trusted base"), ("proved", "Proved"), ("tested", "Tested, not proved"),
                       ("limitations", "Known limitations")):
        parts.append(f"<h3>{title}</h3><ul>" + "".join(f"<li>{escape(x)}</li>" for x in a[key]) + "</ul>")
    return "".join(parts)


def _tool(doc: dict[str, Any]) -> str:
    t = doc["tool"]
    deps = _table(["distribution", "version", "licence", "direct"],
                  [[d["name"], d["version"] or "not installed", d["license"] or "—", "yes" if d["direct"] else ""]
                   for d in t["dependencies"]])
    host = _table(["host", ""], [[k, v] for k, v in t["host"].items()])
    return host + deps


def audit_html(doc: dict[str, Any], sources: dict[str, str]) -> str:
    subj = doc["subject"]["file"]
    sections = [("Findings", _findings(doc, sources)), ("Proofs", _proofs(doc)), ("Gradients", _gradients(doc)),
                ("Numerics", _numerics(doc)), ("Canonicalization", _canonicalization(doc)),
                ("Compiled code", _compiled(doc)), ("Traceability", _traceability(doc)),
                ("Tool identity", _tool(doc)), ("Assumptions and limits", _assumptions(doc))]
    body = "".join(f'<h2 id="{escape(t.lower().replace(" ", "-"))}">{escape(t)}</h2>{html}' for t, html in sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            f"<title>MIND audit: {escape(subj)}</title><style>{_CSS}</style></head><body>"
            f"<h1>MIND audit: {escape(subj)}</h1><h2 id=\"summary\">Summary</h2>{_summary(doc)}{body}</body></html>\n")
