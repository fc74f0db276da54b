"""What an audit reports as findings: a refuted obligation (with its counterexample, its query and
the IR verifier agreeing), a disagreement between the two solvers, the spec's total semantics."""

from __future__ import annotations

import os

import pytest

from .helpers import REFUTED, ROOT, audit_into, read_json
from mind.verify.audit import solvers
from mind.verify.audit.proofs import combine


def test_a_refuted_obligation_is_a_finding_with_a_counterexample(tmp_path):
    program = tmp_path / "bad.mir"
    program.write_text(REFUTED, encoding="utf-8")
    out = str(tmp_path / "b")
    doc = audit_into(str(program), out)
    assert doc["summary"]["verdict"] == "fail"
    (ob,) = [o for o in doc["proofs"]["obligations"] if o["label"] == "matmul.C4"]
    assert ob["verdict"] == "refuted" and ob["method"] == "smt"
    assert ob["counterexample"] is not None and ob["counterexample"]["K"] != ob["counterexample"]["M"]
    assert ob["decision_procedure"] == ["E3011 [matmul.C4]"]  # the IR verifier says the same
    (q,) = [q for q in doc["proofs"]["queries"] if q["file"] == ob["query"]]
    assert q["solvers"]["z3"]["status"] == q["solvers"]["cvc5"]["status"] == "sat"
    rules = {f["rule"] for f in doc["findings"] if f["level"] == "error"}
    assert "matmul.C4" in rules
    assert not any("disagree" in f["message"] for f in doc["findings"])
    with open(os.path.join(out, ob["query"]), encoding="utf-8") as fh:
        assert "(check-sat)" in fh.read()


def test_a_solver_disagreement_is_a_finding(tmp_path, monkeypatch):
    """cvc5 is handed a tampered query (the goal dropped, so it answers sat where Z3 says unsat)."""
    real = solvers.SOLVERS["cvc5"]

    def tampered(text, limits):
        lines = [ln for ln in text.splitlines() if not ln.startswith("(assert (not")]
        return real("\n".join(lines) + "\n", limits)

    monkeypatch.setitem(solvers.SOLVERS, "cvc5", tampered)
    doc = audit_into(os.path.join(ROOT, "examples", "affine.mir"), str(tmp_path / "b"))
    assert doc["summary"]["verdict"] == "fail"
    disagreements = [o for o in doc["proofs"]["obligations"] if o["verdict"] == "disagreement"]
    assert disagreements
    assert any(f["level"] == "error" and "disagree" in f["message"] for f in doc["findings"])


@pytest.mark.parametrize("expect, answers, verdict", [
    ("unsat", {"z3": "unsat", "cvc5": "unsat"}, "proved"),
    ("unsat", {"z3": "sat", "cvc5": "sat"}, "refuted"),
    ("unsat", {"z3": "unsat", "cvc5": "sat"}, "disagreement"),
    ("unsat", {"z3": "unsat", "cvc5": "unknown"}, "unconfirmed"),
    ("unsat", {"z3": "sat", "cvc5": "unknown"}, "refuted"),
    ("unsat", {"z3": "unknown", "cvc5": "unknown"}, "unknown"),
    ("sat", {"z3": "sat", "cvc5": "sat"}, "proved"),
    ("sat", {"z3": "unsat", "cvc5": "unsat"}, "refuted"),
])
def test_how_two_answers_combine(expect, answers, verdict):
    assert combine(expect, answers) == verdict


def test_contradictory_premises_are_refuted_not_a_licence(tmp_path):
    program = tmp_path / "vacuous.mir"
    program.write_text("func @main(%a: f32[N]) -> (f32[N]) where N >= 3, N <= 1 {\n"
                       "  %0 = exp(%a) : f32[N]\n  return %0\n}\n", encoding="utf-8")
    doc = audit_into(str(program), str(tmp_path / "b"))
    (p,) = [o for o in doc["proofs"]["obligations"] if o["kind"] == "premises"]
    assert p["expect"] == "sat" and p["verdict"] == "refuted"
    assert doc["summary"]["verdict"] == "fail"


TOTAL = """func @main(%x: i32[4], %f: f32[3], %t: f32[2, 3], %i: i64[2]) -> (i32[4], i32[4], i32[3], f32[2], f32[2, 3]) {
  %z = const {value = [1, 0, 2, 3]} : i32[4]
  %nz = const {value = [1, 5, 2, 3]} : i32[4]
  %0 = div(%x, %z) : i32[4]
  %1 = div(%x, %nz) : i32[4]
  %2 = convert(%f) {dtype = i32} : i32[3]
  %3 = reduce_max(%t) {axes = [1], keepdims = false} : f32[2]
  %k = const {value = [0, 7]} : i64[2]
  %4 = gather(%t, %k) {axis = 0} : f32[2, 3]
  return %0, %1, %2, %3, %4
}
"""


def test_total_semantics_sites_are_decided_where_the_program_says(tmp_path):
    program = tmp_path / "total.mir"
    program.write_text(TOTAL, encoding="utf-8")
    doc = audit_into(str(program), str(tmp_path / "b"))
    sites = {(s["value"], s["site"]): s["verdict"] for s in doc["numerics"]["total_semantics"]}
    assert sites[("0", "div.integer_by_zero")] == "occurs"  # the constant divisor holds a 0
    assert sites[("1", "div.integer_by_zero")] == "excluded"
    assert sites[("1", "div.int_min_by_minus_one")] == "excluded"  # no -1 in the divisor
    assert sites[("0", "div.int_min_by_minus_one")] == "excluded"
    assert sites[("2", "convert.saturating")] == "depends"  # a parameter: the values decide
    assert sites[("3", "reduce_max.nan")] == "depends"
    assert sites[("3", "reduce_max.empty_window")] == "excluded"
    assert sites[("4", "gather.clamped_index")] == "occurs"  # index 7 of an axis of 2
    levels = {f["ref"]: f["level"] for f in doc["findings"] if f["section"] == "numerics"}
    assert levels["div.integer_by_zero"] == "warning" and levels["convert.saturating"] == "note"
    (f,) = [f for f in doc["findings"] if f["ref"] == "gather.clamped_index"]
    assert f["rule"] == "gather.edge_cases" and f["location"]["line"] == 9


def test_accuracy_bounds_per_op(tmp_path):
    doc = audit_into(os.path.join(ROOT, "examples", "affine.mir"), str(tmp_path / "b"))
    rows = {(a["op"], a["dtype"]): a for a in doc["numerics"]["accuracy"]}
    assert rows[("matmul", "f32")]["class"] == "dot" and "n = 3" in rows[("matmul", "f32")]["bound"]
    assert rows[("add", "f32")]["bound"].startswith("exact")


def test_gradients_list_the_vjp_rules_and_their_checks(tmp_path):
    doc = audit_into(os.path.join(ROOT, "examples", "train_mlp.mind"), str(tmp_path / "b"))
    g = doc["gradients"]
    assert {"matmul", "reduce_max", "exp", "log"} <= set(g["rules"])
    checks = {(c["rule"], c["check"]) for c in g["checks"]}
    assert ("exp", "sympy") in checks and ("matmul", "fd") in checks and ("matmul/lhs", "adjoint") in checks
    assert all(c["verdict"] in ("proved", "passed") for c in g["checks"])
    assert not read_json(os.path.join(str(tmp_path / "b"), "audit.json"))["canonicalization"]["rules"]


def test_rewrite_rules_the_canonicalizer_used_are_proved(tmp_path):
    program = tmp_path / "rw.mind"
    program.write_text("fn main(x: Tensor<f32, [2, 3]>) -> Tensor<f32, [3, 2]> {\n"
                       "    transpose(transpose(transpose(x, perm=[1, 0]), perm=[1, 0]), perm=[1, 0]) * 1.0\n}\n",
                       encoding="utf-8")
    doc = audit_into(str(program), str(tmp_path / "b"))
    c = doc["canonicalization"]
    assert c["applied"] and c["observed_matches_frontend"]
    used = {r["rule"] for r in c["rules"]}
    assert used and all(r["verdict"] == "proved" for r in c["rules"])
    assert {s["step"] for s in c["steps"] if s["kind"] == "rule"} == used
