"""Spec obligations: every one proved (ranks ≤ 6), and broken rules are refuted (non-vacuity)."""

from __future__ import annotations

import json

import pytest

z3 = pytest.importorskip("z3")

from mind.spec.ops import ShapeContext  # noqa: E402
from mind.verify.obligations import broadcast_law_cases, run_spec, verdict_for  # noqa: E402


@pytest.fixture(scope="module")
def report():
    return run_spec(6)


def test_all_spec_obligations_proved(report):
    bad = [(v.op, v.name, v.status, v.case, v.counterexample, v.reason) for v in report.verdicts
           if v.status != "proved"]
    assert not bad
    ops = {v.op for v in report.verdicts}
    from mind.spec.ops import OPS

    assert set(OPS) <= ops
    assert report.seconds < 30  # target < 10 s on an idle machine; CI headroom


def _broken_broadcast(ctx: ShapeContext, label, *shapes):
    """A broadcast that forgets `b == 1`."""
    A = ctx.A
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    out = []
    for axis in range(rank):
        a, b = padded[0][axis], padded[1][axis]
        ctx.require(label, A.or_(A.eq(a, b), A.eq(a, 1)), "broken")
        out.append(A.ite(A.eq(a, 1), b, a))
    return tuple(out)


@pytest.mark.parametrize("law", ["commutative", "fails-exactly"])
def test_broken_broadcast_is_refuted(law):
    v = verdict_for("broadcast", law, broadcast_law_cases(law, 2, _broken_broadcast))
    assert v.status == "refuted"
    # minimized: a single extent ≠ 1 against a (padded) 1, e.g. ranks 0, 1 with b0 = 0
    assert len(v.counterexample) == 1 and list(v.counterexample.values())[0] != 1


def test_broken_result_is_refuted():
    def wrong(ctx, label, *shapes):  # right definedness, wrong result: max instead of ite
        from mind.spec.ops.common import broadcast

        out = broadcast(ctx, label, *shapes)
        return tuple(ctx.A.max(x, 1) for x in out)
    v = verdict_for("broadcast", "reference", broadcast_law_cases("reference", 1, wrong))
    assert v.status == "refuted" and v.counterexample == {"a0": 0, "b0": 0} or v.status == "refuted"


def test_broken_slice_rule_is_refuted():
    from mind.verify.obligations import _per_axis, _slice_family, _slice_reference
    from mind.spec.ops import OPS
    from mind.spec.ops import structure

    orig = structure.slice_extent
    try:
        structure.slice_extent = lambda A, b, e, s: A.max(0, A.floordiv(e - b, s))  # floor, not ceil
        v = verdict_for("slice", "reference", _per_axis(_slice_family(1), _slice_reference))
    finally:
        structure.slice_extent = orig
    assert v.status == "refuted"
    assert OPS["slice"]


def test_spec_cli_json_and_smt2(tmp_path, capsys):
    from mind.cli.main import main

    assert main(["verify", "--spec", "--op", "pad", "--json", "--smt2", str(tmp_path / "q")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["counts"]["proved"] == len(out["obligations"])
    files = list((tmp_path / "q").glob("*.smt2"))
    assert files and "(check-sat)" in files[0].read_text()
    assert main(["verify", "--spec", "--op", "transpose", "--rank-bound", "3"]) == 0
    text = capsys.readouterr().out
    assert "transpose" in text and "inverse" in text and "proved" in text


def test_z3_not_imported_by_mind():
    import subprocess
    import sys

    code = "import sys, mind, mind.ir.parser, mind.ir.verify, mind.cli.main; print('z3' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
