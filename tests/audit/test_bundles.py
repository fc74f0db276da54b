"""Bundles for every example and for a program per op: each passes, its files validate (audit.json
against its schema, audit.sarif against SARIF 2.1.0), its manifest describes it, and ``--check``
finds it intact."""

from __future__ import annotations

import glob
import os

import jsonschema
import pytest

from .helpers import ROOT, audit_into, read_json, sarif_schema
from mind.spec.ops import OPS
from mind.verify.audit.bundle import check_bundle
from mind.verify.audit.formats import validate_audit

EXAMPLES = sorted(os.path.relpath(p, ROOT) for pattern in ("examples/*.mind", "examples/*.mir", "examples/bench/*.mind")
                  for p in glob.glob(os.path.join(ROOT, pattern)))


def _validate_sarif(path: str) -> None:
    jsonschema.Draft7Validator(sarif_schema()).validate(read_json(path))


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_gives_a_valid_passing_bundle(example, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = str(tmp_path / "bundle")
    doc = audit_into(example, out)
    assert doc["summary"]["verdict"] == "pass", doc["findings"]
    assert validate_audit(read_json(os.path.join(out, "audit.json"))) == []
    _validate_sarif(os.path.join(out, "audit.sarif"))
    obligations = doc["proofs"]["obligations"]
    assert obligations and all(o["verdict"] == "proved" for o in obligations)
    for o in obligations:  # an SMT obligation names its query file, which is in the bundle
        assert (o["method"] == "smt") == (o["query"] is not None)
        if o["query"]:
            assert os.path.isfile(os.path.join(out, o["query"]))
    rep = check_bundle(out, rerun=False)
    assert rep.ok, rep.problems


@pytest.mark.parametrize("op", sorted(OPS))
def test_a_program_per_op(op, tmp_path):
    program = tmp_path / f"{op}.mir"
    program.write_text(OPS[op].examples[0].ir, encoding="utf-8")
    out = str(tmp_path / "bundle")
    doc = audit_into(str(program), out)
    # the spec's examples show edge cases on purpose: a total-semantics site that occurs (the empty
    # window of reduce_max's example) is a warning; nothing else may be reported
    assert all(f["level"] == "note" or (f["level"] == "warning" and f["section"] == "numerics")
               for f in doc["findings"]), doc["findings"]
    assert all(o["verdict"] == "proved" for o in doc["proofs"]["obligations"])
    labels = {row["label"] for row in doc["traceability"]["labels"]}
    assert f"{op}.semantics" in labels and f"{op}.edge_cases" in labels
    # the op's constraints that its rule checks are obligations of the program
    constraint_labels = {o["label"] for o in doc["proofs"]["obligations"] if o["kind"] == "constraint" and o["op"] == op}
    assert constraint_labels <= {f"{op}.{c.label}" for c in OPS[op].constraints}
    if OPS[op].constraints and op != "const":
        assert constraint_labels
    _validate_sarif(os.path.join(out, "audit.sarif"))
    assert check_bundle(out).intact


def test_the_schema_rejects_a_document_that_breaks_it(tmp_path):
    out = str(tmp_path / "b")
    doc = audit_into(os.path.join(ROOT, "examples", "affine.mir"), out)
    doc["proofs"]["obligations"][0]["verdict"] = "probably"
    del doc["tool"]["solvers"]["cvc5"]
    problems = validate_audit(doc)
    assert any("probably" in p for p in problems) and any("cvc5" in p for p in problems)


def test_sarif_records_passes_and_findings_with_spec_labels(tmp_path):
    from .helpers import REFUTED

    program = tmp_path / "bad.mir"
    program.write_text(REFUTED, encoding="utf-8")
    out = str(tmp_path / "b")
    audit_into(str(program), out)
    log = read_json(os.path.join(out, "audit.sarif"))
    jsonschema.Draft7Validator(sarif_schema()).validate(log)
    results = log["runs"][0]["results"]
    passes = [r for r in results if r["kind"] == "pass"]
    fails = [r for r in results if r["kind"] == "fail"]
    assert passes and all(r["level"] == "none" for r in passes)
    refuted = [r for r in fails if r["ruleId"] == "matmul.C4"]
    assert refuted and refuted[0]["level"] == "error"
    region = refuted[0]["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 2  # the matmul's line
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(r["id"] for r in rules)
    assert all(results[i]["ruleId"] == rules[results[i]["ruleIndex"]]["id"] for i in range(len(results)))


def test_intoto_statement_names_the_input_and_its_ir(tmp_path):
    out = str(tmp_path / "b")
    doc = audit_into(os.path.join(ROOT, "examples", "affine.mir"), out)
    st = read_json(os.path.join(out, "audit.intoto.json"))
    assert st["_type"] == "https://in-toto.io/Statement/v1"
    assert st["predicateType"] == "https://in-toto.io/attestation/test-result/v0.1"
    assert st["subject"][0]["digest"]["sha256"] == doc["subject"]["sha256"]
    assert st["predicate"]["result"] == "PASSED" and "matmul.C4" in st["predicate"]["passedTests"]
    manifest = {e["name"]: e["sha256"] for e in read_json(os.path.join(out, "manifest.json"))["files"]}
    for c in st["predicate"]["configuration"]:
        assert manifest[c["name"]] == c["digest"]["sha256"]


def test_source_date_epoch_is_the_bundle_date(tmp_path):
    out = str(tmp_path / "b")
    doc = audit_into(os.path.join(ROOT, "examples", "affine.mir"), out, source_date_epoch=1700000000)
    assert doc["created"] == "2023-11-14T22:13:20Z"
    assert audit_into(os.path.join(ROOT, "examples", "affine.mir"), str(tmp_path / "c"))["created"] is None


def test_timings_are_one_marked_file(tmp_path):
    out = str(tmp_path / "b")
    audit_into(os.path.join(ROOT, "examples", "affine.mir"), out, timings=True)
    manifest = read_json(os.path.join(out, "manifest.json"))
    assert manifest["wall_clock"] == ["timings.json"]
    assert "total" in read_json(os.path.join(out, "timings.json"))["wall_clock_seconds"]
    assert check_bundle(out, rerun=False).ok
