"""Every public MIND IR encoding (the spec's ir.md lines, the spec prototype's lines, the public
compiler's ``--emit-ir`` text) is read by ``mind verify``, ``mind run`` and ``mind ir``, legalized
into Core IR with a note saying so; public Relu/Neg agree with the frontend's; the public
catalogue's codes are named next to ours."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mind.cli.main import main
from mind.compiler.frontend.api import compile_source
from mind.calling import run_reference
from mind.verify.dump import detect_format, verify_text
from mind.verify.legalize_encodings import detect, legalize

SPEC = ('%0 = Input() {name: "x"} : Tensor<f32, [2, 2]>\n'
        '%1 = Input() {name: "y"} : Tensor<f32, [2, 2]>\n'
        '%2 = BinOp(Add, %0, %1) : Tensor<f32, [2, 2]>\n'
        '%3 = MatMul(%2, %0) : Tensor<f32, [2, 2]>\n'
        'outputs: %3\n')
PROTO = ("%0 = Input {name=x} : tensor<f32[2, 2]>\n"
         "%1 = Input {name=y} : tensor<f32[2, 2]>\n"
         "%2 = Add (%0, %1) : tensor<f32[2, 2]>\n"
         "%3 = MatMul (%2, %0) : tensor<f32[2, 2]>\n"
         "outputs: %3\n")
COMPILER = ('module {\n'
            '  %0 = const.tensor F32 ["2", "3"] fill=Some(1.5)\n'
            '  output %0\n'
            '  %1 = const.i64 2\n'
            '  %2 = mul %0, %1\n'
            '  %3 = sum %2 axes=[1] keepdims=false\n'
            '  output %3\n'
            '  %4 = transpose %2 perm=[]\n'
            '  %5 = slice %4 [SliceSpec { axis: 0, start: 0, end: Some(3), stride: 2 }]\n'
            '  %6 = index %5 [IndexSpec { axis: 1, index: 1 }]\n'
            '  %7 = expand_dims %6 axis=0\n'
            '  %8 = squeeze %7 axes=[0]\n'
            '  %9 = mean %8 axes=[] keepdims=false\n'
            '  output %9\n'
            '}  // next_id = 10\n')
X = np.array([[1, 2], [3, 4]], np.float32)
Y = np.array([[0.5, -1], [2, 0]], np.float32)


@pytest.mark.parametrize("text, encoding", [(SPEC, "spec"), (PROTO, "proto"), (COMPILER, "compiler")])
def test_each_encoding_is_detected_and_legalized(text, encoding):
    assert detect(text) == encoding and detect_format(text) == "public"
    module, notes = legalize(text, "p.ir")
    assert "legalized public MIND IR" in notes[0]
    rep = verify_text(text, "p.ir")
    assert rep.ok and rep.notes == notes
    fn = module.functions[0]
    if encoding == "compiler":
        a, s, m = run_reference(fn, [])
        np.testing.assert_array_equal(a, np.full((2, 3), 1.5, np.float32))
        np.testing.assert_array_equal(s, [9.0, 9.0])
        assert m == 3.0
    else:
        (out,) = run_reference(fn, [X, Y])
        np.testing.assert_array_equal(out, (X + Y) @ X)


def test_mind_run_ir_and_verify_read_every_encoding(tmp_path, capsys):
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", Y)
    for name, text in (("spec", SPEC), ("proto", PROTO)):
        path = tmp_path / f"{name}.ir"
        path.write_text(text)
        assert main(["run", str(path), "--backend", "reference", "--input", f"x={tmp_path / 'x.npy'}",
                     "--input", f"y={tmp_path / 'y.npy'}", "--json"]) == 0
        captured = capsys.readouterr()
        assert json.loads(captured.out)["results"][0]["values"] == ((X + Y) @ X).tolist()
        assert "note: legalized public MIND IR" in captured.err
        assert main(["ir", str(path)]) == 0 and "matmul" in capsys.readouterr().out
        assert main(["verify", str(path)]) == 0
        capsys.readouterr()
    path = tmp_path / "c.ir"
    path.write_text(COMPILER)
    assert main(["run", str(path), "--backend", "reference", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["results"][2]["values"] == 3.0


def test_public_relu_and_neg_agree_with_the_frontend():
    x = np.array([np.nan, -0.0, 0.0, -2.0, 3.0], np.float32)
    src = "fn f(x: Tensor<f32, [5]>) -> (Tensor<f32, [5]>, Tensor<f32, [5]>) { (relu(x), -x) }"
    fr, fn_ = run_reference(compile_source(src, "t.mind").functions[0], [x])
    ir = ('%0 = Input() {name: "x"} : Tensor<f32, [5]>\n%1 = Relu(%0)\n%2 = Neg(%0)\noutputs: %1, %2\n')
    pr, pn = run_reference(legalize(ir, "p.ir")[0].functions[0], [x])
    for a, b in ((fr, pr), (fn_, pn)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b))
    assert np.isnan(pr[0]) and not np.signbit(pr[1])  # relu(NaN) = NaN, relu(-0) = +0
    assert np.signbit(pn[2])  # -(+0) = -0


@pytest.mark.parametrize("text, code, public", [
    ('%0 = Input() : Tensor<f32, [2]>\noutputs: %0\n', "E4004", None),
    ('%0 = Input() {name: "x"} : Tensor<f32, [2, 3]>\n%1 = Index(%0, [1])\noutputs: %1\n', "E4007", "E4006"),
    ('%0 = Input() {name: "x"} : Tensor<f32, [2]>\noutputs: %0, %5\n', "E4003", None),
    ('%0 = Input() {name: "x"} : Tensor<f32, [1, 5, 5, 3]>\n%1 = Input() {name: "w"} : Tensor<f32, [3, 3, 2, 4]>\n'
     '%2 = Conv2d(%0, %1, [1, 1], Valid)\noutputs: %2\n', "E3003", "E4009"),
    ('%0 = Input() {name: "x"} : Tensor<f32, [4]>\n%1 = Input() {name: "i"} : Tensor<f32, [2]>\n'
     '%2 = Gather(%0, %1)\noutputs: %2\n', "E2005", "E4011"),
    ('%0 = ConstTensor([1, 2]) : Tensor<i64, [3]>\noutputs: %0\n', "E4010", "E4005"),
])
def test_refutations_name_the_public_code(text, code, public):
    rep = verify_text(text, "p.ir")
    assert [f.diag.code for f in rep.findings] == [code]
    notes = " ".join(rep.findings[0].diag.notes)
    assert (f"public MIND catalogue: {public}" in notes) if public else "public MIND catalogue" not in notes


def test_compiler_dump_limits_are_diagnostics():
    for text, code in (('module {\n  %0 = const.tensor BF16 ["2"] fill=Some(1.0)\n}\n', "E2005"),
                       ("module {\n  %2 = conv2d_grad_input %0 %1\n}\n", "E4006"),
                       ("module {\n  %0 = frobnicate %1\n}\n", "E4006"),
                       ('module {\n  %0 = const.tensor F32 ["B"] fill=None\n  output %0\n}\n', None)):
        rep = verify_text(text, "p.ir")
        assert [f.diag.code for f in rep.findings] == ([code] if code else []), rep.findings


def test_verify_of_mind_source_points_at_check(tmp_path, capsys):
    path = tmp_path / "a.mind"
    path.write_text("let a = 1\n")
    assert main(["verify", str(path)]) == 2
    assert "mind check" in capsys.readouterr().err
