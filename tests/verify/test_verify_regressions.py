"""Regression tests for the defects an adversarial review found in `mind verify` (issue 22): each
dump here was VALID, refuted wrongly, hung or ended in E7009 before the fix."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from mind.cli.main import main
from mind.ir.decide import SolverLimits
from mind.ir.parser import parse_module
from mind.ir.verify import check_module
from mind.spec.dims import evaluate
from mind.verify.dump import verify_text


def _codes(rep) -> list[str]:
    return [f.diag.code for f in rep.findings]


def _write(tmp_path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def _cli(argv: list[str], capsys) -> tuple[int, dict]:
    rc = main(argv + ["--json"])
    return rc, json.loads(capsys.readouterr().out)


# -- 1. the public encoding ----------------------------------------------------------------------

def test_public_declared_type_is_checked_against_a_question_mark_input():
    text = ('%0 = Input() {name: "a"} : Tensor<f32, [?, 3]>\n'
            '%1 = BinOp(Add, %0, %0) : Tensor<f32, [5, 3]>\n'
            'outputs: %1\n')
    rep = verify_text(text, "p.ir")
    (f,) = rep.findings
    assert f.diag.code == "E4010" and f.diag.span.line == 2
    assert f.counterexample is not None and f.counterexample["Q0"] != 5


def test_public_question_mark_in_a_result_type_asserts_nothing():
    text = ('%0 = Input() {name: "a"} : Tensor<f32, [?, 3]>\n'
            '%1 = BinOp(Add, %0, %0) : Tensor<f32, [?, 3]>\n'
            '%2 = Sum(%1, [1], false) : Tensor<f32, [?]>\n'
            'outputs: %2\n')
    assert verify_text(text, "p.ir").ok


def test_public_declared_type_mismatch_on_concrete_and_constant_lines():
    text = ('%0 = Input() {name: "a"} : Tensor<f32, [2, 3]>\n'
            '%1 = Sum(%0, [1], false) : Tensor<f32, [3]>\n'
            '%2 = ConstTensor([1, 2]) : Tensor<i64, [3]>\n'
            'outputs: %1, %2\n')
    assert _codes(verify_text(text, "p.ir")) == ["E4010", "E4010"]


def test_public_duplicate_input_names():
    text = ('%0 = Input() {name: "a"} : Tensor<f32, [2]>\n'
            '%1 = Input() {name: "a"} : Tensor<f32, [2]>\n'
            'outputs: %0\n')
    rep = verify_text(text, "p.ir")
    assert _codes(rep) == ["E4002"] and rep.findings[0].diag.span.line == 2


def test_public_duplicate_reduction_axes():
    text = ('%0 = Input() {name: "a"} : Tensor<f32, [2, 3]>\n'
            '%1 = Sum(%0, [1, -1], false) : Tensor<f32, [2]>\n'
            'outputs: %1\n')
    rep = verify_text(text, "p.ir")
    assert [(f.diag.code, f.diag.label) for f in rep.findings] == [("E3005", "reduce_sum.C2")]


# -- 2. premises that no sizes satisfy -------------------------------------------------------------

def test_parameter_dims_that_cannot_all_be_non_negative():
    text = """func @main(%a: f32[B - N], %b: f32[N - B - 1]) -> (f32[7]) {
  %0 = reshape(%a) {shape = [7]} : f32[7]
  return %0
}"""
    assert _codes(verify_text(text, "t.mir")) == ["E4004"]
    assert [d.code for d in check_module(parse_module(text))] == ["E4004"]


def test_assumptions_contradicting_the_dims():
    text = """func @main(%a: f32[B - N]) -> (f32[B - N]) where N >= B + 1 {
  %0 = exp(%a) : f32[B - N]
  return %0
}"""
    assert _codes(verify_text(text, "t.mir")) == ["E4011"]


def test_premises_the_solver_cannot_settle_are_a_finding_naming_the_limit():
    # no positive cubes add up to a cube: Z3 cannot show it, so the premises stay undecided
    text = """func @main(%a: f32[A, B, C]) -> (f32[A, B, C]) where A*A*A + B*B*B == C*C*C, A >= 1, B >= 1 {
  %0 = exp(%a) : f32[A, B, C]
  return %0
}"""
    rep = verify_text(text, "t.mir", limits=SolverLimits(20_000, 60.0))
    (f,) = rep.findings
    assert f.diag.code == "E3011" and "rlimit 20000" in f.diag.message


# -- 3/4. one decision procedure for every entry point -------------------------------------------

MAX_RESULT = """func @main(%a: f32[B]) -> (f32[max(B, 3)]) where B >= 3 {
  %0 = exp(%a) : f32[max(B, 3)]
  %1 = exp(%a) : f32[B]
  return %1
}"""

RELATION = """func @main(%a: f32[S0, 3], %b: f32[S1, 3]) -> (f32[S0, 3]) where S0 == S1 {
  %0 = add(%a, %b) : f32[S0, 3]
  %1 = reshape(%0) {shape = [3 * S1]} : f32[3 * S0]
  return %0
}"""


def test_function_result_type_proved_like_an_op_type():
    assert verify_text(MAX_RESULT, "t.mir").ok
    assert check_module(parse_module(MAX_RESULT)) == []
    wrong = MAX_RESULT.replace("where B >= 3", "where B >= 2")
    rep = verify_text(wrong, "t.mir")
    assert _codes(rep) == ["E4010", "E4010"] and all(f.counterexample == {"B": 2} for f in rep.findings)


@pytest.mark.parametrize("text", [MAX_RESULT, RELATION], ids=["max", "relation"])
def test_ir_and_run_accept_what_verify_proves(tmp_path, capsys, text):
    path = _write(tmp_path, "t.mir", text)
    assert main(["verify", path]) == 0
    assert main(["ir", path]) == 0
    capsys.readouterr()
    n = 4
    for name, shape in (("a", (n, 3) if "S0" in text else (n,)), ("b", (n, 3))):
        np.save(tmp_path / f"{name}.npy", np.ones(shape, np.float32))
    inputs = ["a", "b"] if "S0" in text else ["a"]
    rc, out = _cli(["run", path, "--backend", "reference"] + [f"--input={k}={tmp_path / k}.npy" for k in inputs],
                   capsys)
    assert rc == 0 and out["ok"]


def test_a_relation_the_premises_do_not_give_is_rejected_the_same_way_everywhere(tmp_path, capsys):
    path = _write(tmp_path, "t.mir", RELATION.replace(" where S0 == S1", ""))
    rc_verify, v = _cli(["verify", path], capsys)
    rc_ir, i = _cli(["ir", path], capsys)
    assert rc_verify == rc_ir == 1
    assert [d["code"] for d in v["diagnostics"]] == [d["code"] for d in i["diagnostics"]] == ["E3011", "E3011"]
    assert [d["message"] for d in v["diagnostics"]] == [d["message"] for d in i["diagnostics"]]


# -- 5. counterexamples are complete and reproduce -------------------------------------------------

def test_counterexample_binds_a_symbol_no_parameter_binds():
    text = """func @main(%a: f32[N]) -> (f32[X]) {
  %0 = reshape(%a) {shape = [X]} : f32[X]
  return %0
}"""
    rep = verify_text(text, "t.mir")
    (f,) = rep.findings
    cex = f.counterexample
    assert set(cex) == {"N", "X"} and cex["N"] != cex["X"]
    assert "fails when N=" in f.diag.message and "X=" in f.diag.message


def test_every_printed_counterexample_fails_on_plain_ints():
    text = """func @main(%x: f32[A * B, C]) -> (f32[A, B * C + 1]) where A >= 1, C <= A + 2 {
  %0 = reshape(%x) {shape = [A, B * C + 1]} : f32[A, B * C + 1]
  return %0
}"""
    (f,) = verify_text(text, "t.mir").findings
    env = f.counterexample
    assert env["A"] >= 1 and env["C"] <= env["A"] + 2
    from mind.spec.dims import sym
    A, B, C = sym("A"), sym("B"), sym("C")
    assert evaluate(A * B * C, env) != evaluate(A * (B * C + 1), env)


# -- 6. only ASCII digits are numbers ------------------------------------------------------------

def test_non_ascii_digits_are_not_numbers():
    core = verify_text("func @main(%a: f32[\u0663]) -> (f32[\u0663]) {\n  return %a\n}\n", "t.mir")
    assert _codes(core) == ["E1002"] and core.exit_code == 2
    public = verify_text('%0 = Input() {name: "a"} : Tensor<f32, [\u0663]>\noutputs: %0\n', "p.ir", "public")
    assert _codes(public) == ["E1005"]
    const = verify_text('%0 = ConstI64(\u0663)\noutputs: %0\n', "p.ir", "public")
    assert _codes(const) == ["E1005"]


# -- 7. every solver call ends ------------------------------------------------------------------

def test_the_nonlinear_dump_that_ran_forever_ends():
    # before the fix: over 400 s in one Z3 call that the rlimit did not bound
    text = """func @main(%x: f32[A * B * C * D]) -> (f32[C * C * A + A + 1]) where C * C * A + B * D + A >= D * D * D + C * A * B + 1 {
  %0 = reshape(%x) {shape = [C * C * A + A + 1]} : f32[C * C * A + A + 1]
  return %0
}"""
    (f,) = verify_text(text, "t.mir").findings
    assert f.diag.label == "reshape.C2" and f.counterexample is not None


def test_a_call_the_rlimit_does_not_end_is_ended_by_the_timeout():
    from mind.ir import z3dims
    from mind.spec.dims import sym

    A, B, C = sym("A"), sym("B"), sym("C")
    fermat = [("eq", A * A * A + B * B * B, C * C * C), ("le", 1, A), ("le", 1, B)]
    t0 = time.perf_counter()
    status, model, reason = z3dims.check(fermat, ["A", "B", "C"], SolverLimits(10**12, 0.3))
    assert (status, model) == ("unknown", None) and "time limit (0.3 s)" in reason
    assert time.perf_counter() - t0 < 30  # a hang guard, not a speed claim
    status, _, reason = z3dims.check(fermat, ["A", "B", "C"], SolverLimits(20_000, 60.0))
    assert status == "unknown" and "rlimit 20000" in reason


def test_solver_limits_from_the_command_line(tmp_path, capsys):
    path = _write(tmp_path, "t.mir", RELATION)
    assert main(["verify", path, "--rlimit", "0"]) == 2
    assert main(["verify", path, "--timeout", "-1"]) == 2
    capsys.readouterr()
    assert main(["verify", path, "--rlimit", "100000", "--timeout", "2"]) == 0


# -- internal errors that became coded diagnostics ---------------------------------------------------

BIG = "1" * 5000


@pytest.mark.parametrize("text,code", [
    (f"func @main(%a: f32[{BIG}]) -> () {{\n  return\n}}\n", "E1012"),
    (f"func @main(%a: f32[2]) -> (f32[2]) {{\n  %0 = transpose(%a) {{permutation = [{BIG}]}} : f32[2]\n"
     f"  return %0\n}}\n", "E1012"),
    (f"func @main() -> (i64[]) {{\n  %0 = const {{value = {BIG}}} : i64[]\n  return %0\n}}\n", "E4005"),
    ("func @main(%a: f32[" + "-" * 1000 + "B]) -> () {\n  return\n}\n", "E1012"),
    ("func @main(%a: f32[" + " * ".join(["(A + B + 1)"] * 36) + "]) -> () {\n  return\n}\n", "E1012"),
], ids=["dim", "int-attr", "const", "unary-minus", "polynomial"])
def test_core_ir_text_resource_bounds(tmp_path, capsys, text, code):
    path = _write(tmp_path, "t.mir", text)
    for cmd in ("verify", "ir"):
        t0 = time.perf_counter()
        rc, out = _cli([cmd, path], capsys)
        assert time.perf_counter() - t0 < 30  # the plain parser took 40-60 s on the polynomial
        codes = [d["code"] for d in out["diagnostics"]]
        assert rc in (1, 2) and codes[0] == code, (cmd, codes)


@pytest.mark.parametrize("text,code", [
    ("outputs: %0\n", "E4003"),  # an undefined output: the public catalogue's code
    (f"%0 = ConstI64({BIG})\noutputs: %0\n", "E1012"),
    (f"%0 = ConstTensor([{BIG}, 2]) : Tensor<i64, [2]>\noutputs: %0\n", "E1012"),
    ('%0 = Input() {name: "x"} : Tensor<f32, [1, 5, 5, 2]>\n%1 = Input() {name: "w"} : Tensor<f32, [3, 3, 2, 4]>\n'
     '%2 = Conv2d(%0, %1, [0, 0], Same) : Tensor<f32, [1, 5, 5, 4]>\noutputs: %2\n', "E3006"),
    ('%0 = Input() {name: "x"} : Tensor<f32, [1, 5, 5, 2]>\n%1 = Input() {name: "w"} : Tensor<f32, [3, 3, 2, 4]>\n'
     '%2 = Conv2d(%0, %1, [0, 1], Valid) : Tensor<f32, [1, 5, 3, 4]>\noutputs: %2\n', "E3006"),
    ('%0 = Input() {name: "x"} : Tensor<f32, [4]>\n%1 = Slice(%0, [::0])\noutputs: %1\n', "E3006"),
    ('%0 = Input() {name: "x"} : Tensor<i32, [65536, 65536]>\n%1 = Mean(%0, [], false)\noutputs: %1\n', "E4005"),
    ('%0 = Input() {name: "x"} : Tensor<f32, [' + ", ".join(["281474976710656"] * 4) + ']>\n'
     '%1 = Mean(%0, [], false)\noutputs: %1\n', "E4005"),
], ids=["outputs-first", "const-i64", "const-tensor", "conv-same-stride-0", "conv-valid-stride-0", "slice-step-0",
        "mean-count-i32", "mean-count-f32"])
def test_public_dumps_that_were_internal_errors(tmp_path, capsys, text, code):
    rc, out = _cli(["verify", _write(tmp_path, "p.ir", text)], capsys)
    codes = [d["code"] for d in out["diagnostics"]]
    assert rc in (1, 2) and codes == [code], codes
