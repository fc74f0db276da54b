"""Golden dumps: a valid dump per op and an invalid dump per constraint label (tests/verify/dumps)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mind.cli.main import main
from mind.spec.ops import OPS
from mind.verify.dump import verify_text

DUMPS = Path(__file__).parent / "dumps"
VALID = sorted((DUMPS / "valid").glob("*.mir"))
INVALID = sorted((DUMPS / "invalid").glob("*.mir"))


def _expect(path: Path) -> str:
    return path.read_text().splitlines()[0].split("expect:")[1].strip()


def test_every_op_has_a_valid_dump():
    assert {p.stem.rsplit("_", 1)[0] for p in VALID} == set(OPS)


def test_every_constraint_label_has_an_invalid_dump():
    labels = {f"{op.name}.{c.label}" for op in OPS.values() for c in op.constraints}
    assert {_expect(p) for p in INVALID} == labels


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid(path: Path):
    rep = verify_text(path.read_text(), str(path))
    assert rep.ok, [f.diag.message for f in rep.findings]


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid(path: Path):
    rep = verify_text(path.read_text(), str(path))
    assert [f.diag.label for f in rep.findings] == [_expect(path)]
    d = rep.findings[0].diag
    assert d.span is not None and d.span.file == str(path) and d.span.line >= 2


def test_counterexample_names_the_symbols(tmp_path, capsys):
    p = DUMPS / "invalid" / "matmul_C4.mir"
    assert main(["verify", str(p), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    (d,) = out["diagnostics"]
    assert d["label"] == "matmul.C4"
    cex = d["counterexample"]
    assert set(cex) <= {"M", "K", "N"} and cex["K"] != cex["N"]
    assert "matmul.C4 fails when" in d["message"]
    assert main(["verify", str(p)]) == 1
    err = capsys.readouterr().err
    assert f"{p}:3:3" in err and "%0 = matmul(%a, %b)" in err


def test_symbolic_proof_beyond_interval_reasoning(tmp_path):
    # B == C is a relation between symbols: the cheap path alone cannot use it (E3011); the decider
    # proves it, and the IR verifier of `mind ir`/`mind run` is the one `mind verify` uses
    text = """func @main(%a: f32[B, 3], %b: f32[C, 3]) -> (f32[B, 3]) where B == C, B >= 1 {
  %0 = add(%a, %b) : f32[B, 3]
  %1 = reshape(%0) {shape = [3 * C]} : f32[3 * B]
  return %0
}"""
    from mind.ir.parser import parse_module
    from mind.ir.verify import check_function, check_module

    fn = parse_module(text).functions[0]
    assert {d.code for d in check_function(fn, fn.arith(limits=None))} == {"E3011"}
    assert check_module(parse_module(text)) == []
    rep = verify_text(text, "t.mir")
    assert rep.ok and rep.stats.z3_queries >= 1


def test_declared_result_type_checked_symbolically():
    text = """func @main(%a: f32[N]) -> (f32[N]) where N >= 2 {
  %0 = slice(%a) {start = [1], stop = [N], step = [1]} : f32[N]
  return %0
}"""
    rep = verify_text(text, "t.mir")
    assert [f.diag.code for f in rep.findings] == ["E4010"]


def test_contradictory_assumptions_reported():
    text = """func @main(%a: f32[N]) -> (f32[N]) where N >= 3, N <= 1 {
  %0 = exp(%a) : f32[N]
  return %0
}"""
    rep = verify_text(text, "t.mir")
    assert [f.diag.code for f in rep.findings] == ["E4011"]


def test_exit_codes(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "missing.mir")]) == 2
    bad = tmp_path / "bad.mir"
    bad.write_bytes(b"func @main( {{{")
    assert main(["verify", str(bad)]) == 1  # a syntax error: a diagnostic about the dump, as `mind check` says
    bad.write_bytes(b"\xff\xfe")
    assert main(["verify", str(bad)]) == 2
    assert main(["verify", str(VALID[0])]) == 0
    assert main(["verify"]) == 2
