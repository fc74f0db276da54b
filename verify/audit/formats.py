"""The machine-readable forms of an audit: ``audit.json`` (with its JSON schema), ``audit.sarif``
(SARIF 2.1.0), and an in-toto Statement with a test-result predicate.

Every serialisation here is a pure function of the audit document, with sorted or fixed key order,
so the same audit gives byte-identical files.

SARIF: one run; ``tool.driver.rules`` has one rule per spec label the results name (its text is
the spec's statement); each passing check is a result of ``kind: pass`` (level ``none``), each
finding a result of ``kind: fail`` with its level and location.  The checks that pass are the
proved obligations, the total-semantics sites excluded statically, the gradient checks, the rewrite
rules, the conformance cases per label and implementation, and the differential runs.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from typing import Any, Iterator

__all__ = ["dump_json", "audit_schema", "validate_audit", "sarif_log", "intoto_statement",
           "SARIF_SCHEMA_URI", "INTOTO_STATEMENT", "TEST_RESULT_PREDICATE"]

SARIF_SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INTOTO_STATEMENT = "https://in-toto.io/Statement/v1"
TEST_RESULT_PREDICATE = "https://in-toto.io/attestation/test-result/v0.1"
SCHEMA_FILE = "audit.schema.json"


def dump_json(doc: Any) -> bytes:
    """The one JSON serialisation of the bundle's files: indented, UTF-8, no NaN/inf."""
    return (json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def audit_schema() -> dict[str, Any]:
    """The JSON schema of ``audit.json`` (shipped with the package, copied into every bundle)."""
    return json.loads(resources.files("mind.verify.audit").joinpath(SCHEMA_FILE).read_text("utf-8"))


def validate_audit(doc: Any) -> list[str]:
    """Every way ``doc`` breaks the schema, as ``path: message`` lines (empty: valid)."""
    import jsonschema

    v = jsonschema.Draft202012Validator(audit_schema())
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
            for e in sorted(v.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))]


# -- SARIF -----------------------------------------------------------------------------------------


def _region(loc: dict[str, Any] | None) -> dict[str, Any] | None:
    if loc is None:
        return None
    return {"physicalLocation": {"artifactLocation": {"uri": loc["file"].replace(os.sep, "/")},
                                 "region": {"startLine": loc["line"], "startColumn": loc["column"],
                                            "endLine": loc["end_line"], "endColumn": loc["end_column"]}}}


def _passes(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any] | None]]:
    """(rule, message, location) of every check that passed."""
    for o in doc["proofs"]["obligations"]:
        if o["verdict"] == "proved":
            how = "by evaluation" if o["method"] == "evaluated" else f"by z3 and cvc5 ({o['query']})"
            where = f"`%{o['value']} = {o['op']}(...)` in @{o['function']}" if o["op"] else f"@{o['function']}"
            yield o["label"], f"{where}: {o['statement']}: proved {how}", o["location"]
    for s in doc["numerics"]["total_semantics"]:
        if s["verdict"] == "excluded":
            yield s["label"], f"`%{s['value']} = {s['op']}(...)` in @{s['function']}: {s['site']} cannot occur", s["location"]
    for c in doc["gradients"]["checks"]:
        if c["verdict"] in ("proved", "passed"):
            yield f"{c['rule'].split('/')[0]}.vjp", f"VJP rule {c['rule']}: {c['check']} {c['verdict']}", None
    for r in doc["canonicalization"]["rules"]:
        if r["verdict"] == "proved":
            yield f"rewrite.{r['rule']}", f"rewrite rule {r['rule']} ({r['statement']}) proved", None
    trace = doc["traceability"]
    for row in trace["labels"]:
        for impl, counts in row["case_results"].items():
            if counts and set(counts) <= {"pass", "xfail", "unsupported", "skip"}:
                yield row["label"], f"{counts.get('pass', 0)} conformance case(s) covering {row['label']} pass on {impl}", None
    for b in doc["compiled"]:
        for fn in b["functions"]:
            for run in fn.get("runs", []):
                for r in run["results"]:
                    if r["within_bound"]:
                        yield "compiled.differential", (f"{b['backend']} @{fn['function']} result {r['index']}, "
                                                        f"{run['inputs']} inputs: largest error {r['max_error']} "
                                                        f"within its bound {r['bound']}"), None


def sarif_log(doc: dict[str, Any]) -> dict[str, Any]:
    from mind.conformance.suite import all_labels, label_text

    known = set(all_labels())
    results: list[dict[str, Any]] = []
    rule_ids: dict[str, str] = {}

    def text_of(rule: str) -> str:
        if rule in known:
            return label_text(rule)
        return {"ir.verify": "declared types agree with the inferred ones; symbolic constraints are decided",
                "compiled.differential": "compiled code agrees with the reference within each op's accuracy bound",
                "conformance": "a conformance case of the suite"}.get(rule, rule)

    for rule, message, loc in _passes(doc):
        rule_ids.setdefault(rule, text_of(rule))
        r = {"ruleId": rule, "kind": "pass", "level": "none", "message": {"text": message}}
        if loc is not None:
            r["locations"] = [_region(loc)]
        results.append(r)
    for f in doc["findings"]:
        rule_ids.setdefault(f["rule"], text_of(f["rule"]))
        r = {"ruleId": f["rule"], "kind": "fail", "level": f["level"], "message": {"text": f["message"]},
             "properties": {"section": f["section"]}}
        if f["location"] is not None:
            r["locations"] = [_region(f["location"])]
        results.append(r)
    rules = [{"id": rid, "shortDescription": {"text": text or rid}} for rid, text in sorted(rule_ids.items())]
    index = {rid: i for i, rid in enumerate(sorted(rule_ids))}
    for r in results:
        r["ruleIndex"] = index[r["ruleId"]]
    tool = doc["tool"]
    subject = doc["subject"]
    return {"$schema": SARIF_SCHEMA_URI, "version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "mind audit", "version": tool["version"], "semanticVersion": tool["version"],
                            "rules": rules}},
        "artifacts": [{"location": {"uri": subject["file"].replace(os.sep, "/")},
                       "hashes": {"sha-256": subject["sha256"]}, "roles": ["analysisTarget"]}],
        "invocations": [{"executionSuccessful": True, "commandLine": " ".join(tool["command"])}],
        "results": results,
        "properties": {"verdict": doc["summary"]["verdict"], "spec_version": tool["spec_version"]}}]}


# -- in-toto -----------------------------------------------------------------------------------------


def intoto_statement(doc: dict[str, Any], digests: dict[str, str]) -> dict[str, Any]:
    """An in-toto Statement v1 about the input and its canonical IR, with the test-result
    predicate: the checks that passed, were only noted (``warned``) and failed; the configuration
    is the bundle's other files with their digests."""
    subject = doc["subject"]
    passed = sorted({rule for rule, _m, _l in _passes(doc)})
    failed = sorted({f["rule"] for f in doc["findings"] if f["level"] in ("error", "warning")})
    warned = sorted({f["rule"] for f in doc["findings"] if f["level"] == "note"} - set(failed))
    result = "FAILED" if failed else ("WARNED" if warned else "PASSED")
    return {"_type": INTOTO_STATEMENT,
            "subject": [{"name": subject["file"].replace(os.sep, "/"), "digest": {"sha256": subject["sha256"]}},
                        {"name": subject["ir_file"], "digest": {"sha256": digests[subject["ir_file"]]}}],
            "predicateType": TEST_RESULT_PREDICATE,
            "predicate": {"result": result,
                          "configuration": [{"name": n, "digest": {"sha256": d}} for n, d in sorted(digests.items())],
                          "passedTests": passed, "warnedTests": warned, "failedTests": failed}}
