"""`mind verify --equiv`: equal, different (with inputs that reproduce on the reference), unknown."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

z3 = pytest.importorskip("z3")

from mind.cli.main import main  # noqa: E402
from mind.diagnostics import MindError  # noqa: E402
from mind.ir.parser import parse_module  # noqa: E402
from mind.calling import run_reference  # noqa: E402
from mind.verify.equiv import check_equiv, parse_shapes  # noqa: E402


def fn(text: str):
    return parse_module(text).functions[0]


def _write(tmp_path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


IDENTITIES = """func @main(%x: f32[N, 3], %y: f32[3]) -> (f32[N, 3], f32[N, 3]) {
  %one = const {value = 1.0} : f32[]
  %pz = const {value = 0.0} : f32[]
  %0 = mul(%x, %one) : f32[N, 3]
  %1 = add(%y, %0) : f32[N, 3]
  %2 = transpose(%1) {permutation = [1, 0]} : f32[3, N]
  %3 = transpose(%2) {permutation = [1, 0]} : f32[N, 3]
  %4 = sub(%3, %pz) : f32[N, 3]
  %5 = add(%x, %x) : f32[N, 3]
  return %4, %5
}
"""

SIMPLE = """func @main(%x: f32[N, 3], %y: f32[3]) -> (f32[N, 3], f32[N, 3]) {
  %two = const {value = 2.0} : f32[]
  %0 = add(%x, %y) : f32[N, 3]
  %1 = mul(%x, %two) : f32[N, 3]
  return %0, %1
}
"""

PLUS_ZERO = """func @main(%x: f32[2, 3]) -> (f32[2, 3]) {
  %z = const {value = 0.0} : f32[]
  %0 = add(%x, %z) : f32[2, 3]
  return %0
}
"""

IDENTITY = """func @main(%x: f32[2, 3]) -> (f32[2, 3]) {
  return %x
}
"""


def test_written_two_ways_is_equal():
    """x·1 + y, transposed twice, minus -0 is x + y; x + x is x·2 (bit for bit, NaN and ±0 included)."""
    rep = check_equiv(fn(IDENTITIES), fn(SIMPLE), parse_shapes(["x=f32[4,3]"]))
    assert rep.verdict == "equal"
    assert rep.elements == 24 and rep.identical + rep.proved == 24
    # the elements of a result are one problem up to renaming: the solver work does not grow with size
    assert check_equiv(fn(IDENTITIES), fn(SIMPLE), parse_shapes(["x=f32[16,3]"])).queries == rep.queries


def test_integer_programs_are_bit_vectors():
    a = fn("func @main(%x: i32[3], %y: i32[3]) -> (i32[3]) {\n  %0 = sub(%x, %y) : i32[3]\n  return %0\n}\n")
    b = fn("func @main(%x: i32[3], %y: i32[3]) -> (i32[3]) {\n  %m = const {value = -1} : i32[]\n"
           "  %0 = mul(%y, %m) : i32[3]\n  %1 = add(%x, %0) : i32[3]\n  return %1\n}\n")
    assert check_equiv(a, b).verdict == "equal"  # wrapping: x - y = x + (-1)·y, INT_MIN included
    c = fn("func @main(%x: i32[3], %y: i32[3]) -> (i32[3]) {\n  %0 = sub(%y, %x) : i32[3]\n  return %0\n}\n")
    rep = check_equiv(a, c)
    assert rep.verdict == "different" and rep.counterexample["result"] == 0


def test_different_writes_inputs_that_reproduce_on_the_reference(tmp_path):
    a, b = fn(PLUS_ZERO), fn(IDENTITY)
    out = tmp_path / "cex"
    rep = check_equiv(a, b, out_dir=str(out))
    assert rep.verdict == "different"
    c = rep.counterexample
    assert c["a"] == {"value": "0.0", "bits": "0x00000000"} and c["b"] == {"value": "-0.0", "bits": "0x80000000"}
    assert rep.files == [str(out / "x.npy")]
    x = np.load(out / "x.npy")
    ra, rb = run_reference(a, [x])[0], run_reference(b, [x])[0]
    idx = tuple(c["index"])
    assert ra[idx].tobytes() != rb[idx].tobytes()
    assert ra[idx].tobytes() == np.float32(0.0).tobytes() and rb[idx].tobytes() == np.float32(-0.0).tobytes()


def test_bounded_ops_are_shared_functions():
    """exp/log/sums are uninterpreted: the same op on equal arguments is equal..."""
    a = fn("func @main(%x: f32[2, 2]) -> (f32[2]) {\n  %one = const {value = 1.0} : f32[]\n"
           "  %0 = mul(%x, %one) : f32[2, 2]\n  %1 = exp(%0) : f32[2, 2]\n"
           "  %2 = reduce_sum(%1) {axes = [1], keepdims = false} : f32[2]\n  return %2\n}\n")
    b = fn("func @main(%x: f32[2, 2]) -> (f32[2]) {\n  %1 = exp(%x) : f32[2, 2]\n"
           "  %2 = reduce_sum(%1) {axes = [1], keepdims = false} : f32[2]\n  return %2\n}\n")
    assert check_equiv(a, b).verdict == "equal"


def test_a_difference_that_depends_on_the_approximation_is_unknown():
    """...and a different computation is unknown unless the reference shows a difference."""
    a = fn("func @main(%x: f32[3]) -> (f32[]) {\n  %0 = reduce_sum(%x) {axes = [0], keepdims = false} : f32[]\n"
           "  return %0\n}\n")
    b = fn("func @main(%x: f32[3]) -> (f32[]) {\n  %0 = slice(%x) {start = [2], stop = [-1], step = [-1]} : f32[3]\n"
           "  %1 = reduce_sum(%0) {axes = [0], keepdims = false} : f32[]\n  return %1\n}\n")
    rep = check_equiv(a, b)  # the same sum in the other order: the spec does not fix the rounding
    assert rep.verdict == "unknown" and "approximated" in rep.reason


def test_a_difference_the_reference_shows_is_different():
    """Summing -0 and -0 gives +0 on the reference (its sum starts from +0), -0 as one IEEE add."""
    a = fn("func @main(%x: f32[2]) -> (f32[]) {\n  %0 = reduce_sum(%x) {axes = [0], keepdims = false} : f32[]\n"
           "  return %0\n}\n")
    b = fn("func @main(%x: f32[2]) -> (f32[]) {\n  %0 = slice(%x) {start = [0], stop = [1], step = [1]} : f32[1]\n"
           "  %1 = slice(%x) {start = [1], stop = [2], step = [1]} : f32[1]\n  %2 = add(%0, %1) : f32[1]\n"
           "  %3 = reshape(%2) {shape = []} : f32[]\n  return %3\n}\n")
    rep = check_equiv(a, b)
    assert rep.verdict == "different"
    assert rep.counterexample["inputs"] == {"x": [-0.0, -0.0]}


def test_log_of_exp_is_not_the_identity():
    a = fn("func @main(%x: f32[3]) -> (f32[3]) {\n  %0 = exp(%x) : f32[3]\n  %1 = log(%0) : f32[3]\n  return %1\n}\n")
    b = fn("func @main(%x: f32[3]) -> (f32[3]) {\n  return %x\n}\n")
    rep = check_equiv(a, b)
    assert rep.verdict == "different"  # confirmed on the reference: exp rounds small x to 1


def test_resource_limit_gives_unknown():
    rep = check_equiv(fn(IDENTITIES), fn(SIMPLE), parse_shapes(["x=f32[1,3]"]), rlimit=1)
    assert rep.verdict == "unknown" and "resource limit" in rep.reason


def test_float_sum_of_one_element_refines():
    a = fn("func @main(%x: f64[3]) -> (f64[3]) {\n  %0 = reduce_sum(%x) {axes = [], keepdims = false} : f64[3]\n"
           "  return %0\n}\n")
    b = fn("func @main(%x: f64[3]) -> (f64[3]) {\n  return %x\n}\n")
    rep = check_equiv(a, b)
    assert rep.verdict == "refines" and rep.refined == 3
    # the other way round is not a refinement: the reference's sum of one -0 is +0
    assert check_equiv(b, a).verdict == "different"


def test_report_is_deterministic():
    a = check_equiv(fn(IDENTITIES), fn(SIMPLE), parse_shapes(["x=f32[2,3]"]))
    b = check_equiv(fn(IDENTITIES), fn(SIMPLE), parse_shapes(["x=f32[2,3]"]))
    assert json.dumps(a.to_json(), sort_keys=True) == json.dumps(b.to_json(), sort_keys=True)


# ------------------------------------------------------------------------------------------------
# bad input: coded diagnostics
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shapes, code", [
    ([], "E7002"),  # %x has a symbolic dim and no --shapes
    (["x=f32[2,4]"], "E6009"),  # 4 is not 3
    (["z=f32[2,3]"], "E7002"),  # no such parameter
    (["x=f32[N,3]"], "E7002"),  # not concrete
    (["x"], "E7002"),
    (["x=f33[2]"], "E2005"),
])
def test_bad_shapes_are_diagnosed(shapes, code):
    with pytest.raises(MindError) as exc:
        check_equiv(fn(IDENTITIES), fn(SIMPLE), parse_shapes(shapes))
    assert exc.value.codes[0] == code


def test_different_signatures_are_diagnosed():
    other = fn("func @main(%x: f32[N, 3], %y: f64[3]) -> (f32[N, 3]) {\n  return %x\n}\n")
    with pytest.raises(MindError) as exc:
        check_equiv(fn(IDENTITIES), other, parse_shapes(["x=f32[2,3]"]))
    assert exc.value.codes == ["E2001"]


# ------------------------------------------------------------------------------------------------
# the command
# ------------------------------------------------------------------------------------------------

def test_cli_equal_and_json(tmp_path, capsys):
    a, b = _write(tmp_path, "a.mir", IDENTITIES), _write(tmp_path, "b.mir", SIMPLE)
    assert main(["verify", "--equiv", a, b, "--shapes", "x=f32[2,3]"]) == 0
    assert capsys.readouterr().out.startswith("equal: @main of ")
    assert main(["verify", "--equiv", a, b, "--shapes", "x=f32[2,3]", "--json"]) == 0
    first = capsys.readouterr().out
    assert main(["verify", "--equiv", a, b, "--shapes", "x=f32[2,3]", "--json"]) == 0
    assert capsys.readouterr().out == first
    assert json.loads(first)["verdict"] == "equal"


def test_cli_different_writes_npy(tmp_path, capsys):
    a, b = _write(tmp_path, "a.mir", PLUS_ZERO), _write(tmp_path, "b.mir", IDENTITY)
    out = tmp_path / "inputs"
    assert main(["verify", "--equiv", a, b, "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert text.startswith("different: ") and str(out / "x.npy") in text
    assert sorted(os.listdir(out)) == [".mind-outputs.json", "x.npy"]  # the files and the record of one run (mind.output_dir)


def test_cli_mind_source_and_fn(tmp_path, capsys):
    src = _write(tmp_path, "p.mind", "fn f(x: Tensor<f32, [B, 3]>) -> Tensor<f32, [B, 3]> { x * 1.0 + 0.0 }\n")
    ir = _write(tmp_path, "q.mir", "func @f(%x: f32[B, 3]) -> (f32[B, 3]) {\n  %z = const {value = 0.0} : f32[]\n"
                                   "  %0 = add(%x, %z) : f32[B, 3]\n  return %0\n}\n")
    assert main(["verify", "--equiv", src, ir, "--fn", "f", "--shapes", "x=f32[2,3]", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "equal"


def test_cli_usage_errors(tmp_path, capsys):
    a = _write(tmp_path, "a.mir", IDENTITIES)
    assert main(["verify", "--equiv", a, a]) == 2  # symbolic N without --shapes
    assert "E7002" in capsys.readouterr().err
    assert main(["verify", "--equiv", a, str(tmp_path / "missing.mir"), "--shapes", "x=f32[2,3]"]) == 2
    assert "E7001" in capsys.readouterr().err
    assert main(["verify", "--equiv", a, a, "--spec"]) == 2
    assert "E7002" in capsys.readouterr().err
    assert main(["verify", "--spec", "--shapes", "x=f32[2,3]"]) == 2  # an --equiv option elsewhere
    assert "E7002" in capsys.readouterr().err
