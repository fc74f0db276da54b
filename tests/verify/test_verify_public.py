"""Legalizing the public MIND IR encoding into Core IR."""

from __future__ import annotations

from pathlib import Path

import pytest

from mind.cli.main import main
from mind.verify.dump import detect_format, verify_text
from mind.verify.legalize_public import legalize

PUBLIC = Path(__file__).parent / "dumps" / "public_simple.ir"


def test_spec_example_legalizes_and_reports_the_bad_broadcast(capsys):
    text = PUBLIC.read_text()
    assert detect_format(text) == "public"
    rep = verify_text(text, str(PUBLIC))
    assert rep.notes and "legalized public MIND IR" in rep.notes[0]
    assert [f.diag.label for f in rep.findings] == ["add.C3"]  # %1 is [?, 3] against [2, 3]
    assert rep.findings[0].diag.span.line == 18
    assert rep.findings[0].counterexample == {"Q0": 0}
    assert main(["verify", str(PUBLIC)]) == 1
    assert "note: legalized public MIND IR" in capsys.readouterr().err


def test_legalized_ops(tmp_path):
    mod, _ = legalize(PUBLIC.read_text(), "p.ir")
    ops = [op.op for op in mod.functions[0].ops]
    assert ops[:3] == ["add", "reduce_sum", "transpose"]
    assert {"select", "compare", "slice", "reshape", "div", "exp", "matmul", "conv2d"} <= set(ops)
    fn = mod.functions[0]
    assert [p.name for p in fn.params] == ["a", "b", "x", "w"]
    assert str(fn.results[-1].type) == "f32[1, 5, 5, 4]"  # Same padding, stride 1


def test_valid_public_dump(tmp_path):
    p = tmp_path / "ok.ir"
    p.write_text('%0 = Input() {name: "a"} : Tensor<f32, [?, 3]>\n'
                 '%1 = Input() {name: "b"} : Tensor<f32, [3]>\n'
                 '%2 = BinOp(Mul, %0, %1) : Tensor<f32, [?, 3]>\n'
                 '%3 = Sum(%2, [1], false) : Tensor<f32, [?]>\n'
                 'outputs: %3\n')
    out = tmp_path / "core.mir"
    assert main(["verify", str(p), "--emit-core", str(out)]) == 0
    assert "reduce_sum" in out.read_text()


@pytest.mark.parametrize("line,code", [
    ("%0 = Frobnicate(%1) : Tensor<f32, []>", "E4006"),
    ("%0 = Input() {name: \"a\"} : Tensor<f16, [2]>", "E2005"),
    ("%0 = BinOp(Add, %9, %9) : Tensor<f32, [2]>", "E4001"),
    ("%0 = Input( : nonsense", "E1010"),
    ("%0 = ConstI64(99999999999999999999)", "E4005"),
])
def test_public_errors_are_coded(tmp_path, line, code):
    rep = verify_text(line + "\noutputs: %0\n", "x.ir", "public")
    assert rep.findings and rep.findings[0].diag.code == code
