"""Malformed IR text: every variant gives its code at the right line:col, never a traceback."""

from __future__ import annotations

import pytest

from mind.diagnostics import MindError, position
from mind.ir.parser import Limits, parse_module
from mind.ir.verify import check_module

GOOD = """func @main(%x: f32[2, 3], %i: i32[2]) -> (f32[2, 3]) {
  %0 = exp(%x) : f32[2, 3]
  return %0
}
"""


def one(line: str, params: str = "%x: f32[2], %y: f32[2]", res: str = "f32[2]") -> str:
    return f"func @main({params}) -> ({res}) {{\n  {line}\n  return %0\n}}\n"


# (id, text, code, the substring where the diagnostic must point (its first occurrence, or a
#  (substring, occurrence) pair), or None to skip the location check)
CASES = [
    ("no_func_keyword", "fn @main() -> () {\n  return\n}\n", "E1010", "fn"),
    ("no_at_name", "func main() -> () {\n  return\n}\n", "E1010", "main"),
    ("missing_arrow", "func @main() () {\n  return\n}\n", "E1010", ("(", 2)),
    ("unknown_op", one("%0 = tanh(%x) : f32[2]"), "E4006", "tanh"),
    ("unknown_dtype", one("%0 = exp(%x) : f16[2]"), "E2005", "f16"),
    ("unknown_param_dtype", "func @main(%x: u8[2]) -> () {\n  return\n}\n", "E2005", "u8"),
    ("fractional_dim", one("%0 = exp(%x) : f32[2.5]"), "E1005", "2.5"),
    ("negative_dim", "func @main(%x: f32[-2]) -> () {\n  return\n}\n", "E3006", "-2"),
    ("unclosed_type", one("%0 = exp(%x) : f32[2"), "E1010", "return"),
    ("invalid_char", one("%0 = exp(%x) : f32[2] $"), "E1002", "$"),
    ("non_ascii", one("%0 = exp(%x) : f32[2] é"), "E1002", "é"),
    ("unknown_attr", one("%0 = exp(%x) {axis = 0} : f32[2]"), "E4008", "axis"),
    ("duplicate_attr", one("%0 = gather(%x, %i) {axis = 0, axis = 0} : f32[2]", "%x: f32[2], %i: i32[2]"),
     "E4008", ("axis", 2)),
    ("bad_enum", one("%0 = compare(%x, %y) {direction = lte} : bool[2]", res="bool[2]"), "E4008", "lte"),
    ("bool_attr_number", one("%0 = reduce_sum(%x) {axes = [0], keepdims = 1} : f32[]", res="f32[]"),
     "E1010", "1}"),
    ("ints_attr_symbol", one("%0 = transpose(%x) {permutation = [a]} : f32[2]"), "E1010", "a]"),
    ("literal_shape", one("%0 = const {value = [1, 2, 3]} : i32[2]", "", "i32[2]"), "E4005", "[1, 2, 3]"),
    ("ragged_literal", one("%0 = const {value = [[1], [2, 3]]} : i32[2, 1]", "", "i32[2, 1]"), "E4005", "[[1]"),
    ("int_out_of_range", one("%0 = const {value = 3000000000} : i32[]", "", "i32[]"), "E4005", "3000000000"),
    ("bool_for_float", one("%0 = const {value = true} : f32[]", "", "f32[]"), "E4005", "true"),
    ("float_for_int", one("%0 = const {value = 1.5} : i32[]", "", "i32[]"), "E4005", "1.5"),
    ("nested_splat", one("%0 = const {value = [splat(1), 2]} : i32[2]", "", "i32[2]"), "E4005", "[splat"),
    ("symbolic_const", "func @main(%x: f32[B]) -> (f32[B]) {\n  %0 = const {value = 1.0} : f32[B]\n  return %0\n}\n",
     "E4005", "1.0"),
    ("undefined_value", one("%0 = add(%x, %nope) : f32[2]"), "E4001", "%nope"),
    ("redefined_value", "func @main(%x: f32[2]) -> (f32[2]) {\n  %0 = exp(%x) : f32[2]\n  %0 = log(%x) : f32[2]\n"
     "  return %0\n}\n", "E4002", ("%0", 2)),
    ("result_count", "func @main(%x: f32[2]) -> (f32[2], f32[2]) {\n  return %x\n}\n", "E4010", "func"),
    ("missing_return", "func @main(%x: f32[2]) -> (f32[2]) {\n}\n", "E1010", "}"),
    ("missing_close", "func @main(%x: f32[2]) -> (f32[2]) {\n  return %x\n", "E1010", None),
    ("floordiv_zero", "func @main(%x: f32[floordiv(B, 0)]) -> () {\n  return\n}\n", "E3006", "floordiv"),
    ("where_no_relation", "func @main(%x: f32[B]) -> () where B 1 {\n  return\n}\n", "E1010", "1 {"),
    ("huge_dim", "func @main(%x: f32[999999999999999999]) -> () {\n  return\n}\n", "E1012", "999999999999999999"),
    ("rank_limit", "func @main(%x: f32[" + ", ".join(["1"] * 17) + "]) -> () {\n  return\n}\n", "E1012", "f32["),
    ("operands_missing", one("%0 = exp : f32[2]"), "E1010", ": f32[2]\n"),
    ("operand_not_value", one("%0 = exp(x) : f32[2]"), "E1010", "x)"),
    ("return_not_value", "func @main(%x: f32[2]) -> (f32[2]) {\n  return x\n}\n", "E1010", "x\n}"),
    ("number_as_op", one("%0 = 3(%x) : f32[2]"), "E1010", "3("),
]


def _where(text: str, marker) -> tuple[int, int]:
    if isinstance(marker, tuple):
        sub, k = marker
        idx = -1
        for _ in range(k):
            idx = text.index(sub, idx + 1)
    else:
        idx = text.index(marker)
    return position(text, idx)


@pytest.mark.parametrize("name,text,code,marker", CASES, ids=[c[0] for c in CASES])
def test_malformed_ir(name, text, code, marker):
    with pytest.raises(MindError) as info:
        parse_module(text, "bad.mir")
    diag = info.value.diagnostics[0]
    assert diag.code == code, (diag.code, diag.message)
    assert diag.span is not None and diag.span.file == "bad.mir"
    if marker is not None:
        assert (diag.span.line, diag.span.col) == _where(text, marker), diag.message
    rendered = str(info.value)
    assert f"error[{code}]" in rendered and f"bad.mir:{diag.span.line}:{diag.span.col}" in rendered


def test_eof_location():
    text = "func @main(%x: f32[2]) -> (f32[2]) {\n  return %x\n"
    with pytest.raises(MindError) as info:
        parse_module(text)
    d = info.value.diagnostics[0]
    assert (d.span.line, d.span.col) == (3, 1) and "end of input" in d.message


def test_limits():
    with pytest.raises(MindError) as info:
        parse_module(GOOD, limits=Limits(max_bytes=10))
    assert info.value.codes == ["E1012"]
    with pytest.raises(MindError) as info:
        parse_module(GOOD, limits=Limits(max_ops=0))
    assert info.value.codes == ["E1012"]
    deep = "func @main(%x: f32[" + "(" * 100 + "1" + ")" * 100 + "]) -> () {\n  return\n}\n"
    with pytest.raises(MindError) as info:
        parse_module(deep)
    assert info.value.codes == ["E1012"]


def test_empty_and_comment_only_modules():
    assert parse_module("").functions == []
    assert parse_module("// nothing here\n\n").functions == []


def test_verifier_reports_every_problem():
    text = ("func @main(%x: f32[2], %y: f64[2]) -> (f32[2], f32[2]) {\n  %0 = add(%x, %y) : f32[2]\n"
            "  %1 = matmul(%x, %x) : f32[2]\n  return %0, %1\n}\n")
    diags = check_module(parse_module(text))
    assert [(d.code, d.label) for d in diags] == [("E2004", "add.C1"), ("E3002", "matmul.C3")]
    assert all(d.span is not None for d in diags)


def test_assumption_on_unknown_symbol():
    text = "func @main(%x: f32[B]) -> (f32[B]) where N >= 1 {\n  return %x\n}\n"
    assert [d.code for d in check_module(parse_module(text))] == ["E4011"]


def test_declared_result_type_is_checked_by_the_verifier():
    # the parser keeps a signature's result type; the verifier proves it equal to the returned
    # value's type under the premises (so `f32[max(B, 3)]` is `f32[B]` where B >= 3)
    text = "func @main(%x: f32[2]) -> (f32[3]) {\n  return %x\n}\n"
    (d,) = check_module(parse_module(text, "bad.mir"))
    assert d.code == "E4010" and (d.span.line, d.span.col) == _where(text, "f32[3]")


def test_duplicate_function():
    text = "func @f() -> () {\n  return\n}\nfunc @f() -> () {\n  return\n}\n"
    assert [d.code for d in check_module(parse_module(text))] == ["E4002"]
