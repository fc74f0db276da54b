"""Parser: golden ASTs (precedence, associativity, both syntaxes), syntax errors, recovery, limits."""

from __future__ import annotations

import pytest

from mind.compiler.frontend import ast as A
from mind.compiler.frontend import parser as P
from mind.compiler.frontend.ast import dump
from mind.compiler.frontend.parser import parse, parse_expr, parse_type
from mind.diagnostics import MindError

from .helpers import diags_of, errors_of


def e(src: str) -> str:
    return dump(parse_expr(src))


def t(src: str) -> str:
    return dump(parse_type(src))


# -- precedence and associativity ------------------------------------------------------------------

@pytest.mark.parametrize("src,expected", [
    ("1 + 2 * 3 - 4 / 2",
     "(Binary - (Binary + (IntLit 1) (Binary * (IntLit 2) (IntLit 3))) (Binary / (IntLit 4) (IntLit 2)))"),
    ("a - b - c", "(Binary - (Binary - (Name a) (Name b)) (Name c))"),
    ("a / b / c", "(Binary / (Binary / (Name a) (Name b)) (Name c))"),
    ("a @ b * c", "(Binary * (Binary @ (Name a) (Name b)) (Name c))"),
    ("a + b @ c", "(Binary + (Name a) (Binary @ (Name b) (Name c)))"),
    ("-a * b", "(Binary * (Unary - (Name a)) (Name b))"),
    ("--a", "(Unary - (Unary - (Name a)))"),
    ("!a && b || c", "(Binary || (Binary && (Unary ! (Name a)) (Name b)) (Name c))"),
    ("a || b && c", "(Binary || (Name a) (Binary && (Name b) (Name c)))"),
    ("a + 1 < b * 2", "(Binary < (Binary + (Name a) (IntLit 1)) (Binary * (Name b) (IntLit 2)))"),
    ("a == b && c != d",
     "(Binary && (Binary == (Name a) (Name b)) (Binary != (Name c) (Name d)))"),
    ("(a + b) * c", "(Binary * (Binary + (Name a) (Name b)) (Name c))"),
    ("-x.y(z)", "(Unary - (Call (Attribute (Name x) y) [(Name z)] [] 'x.y'))"),
    ("a <= b", "(Binary <= (Name a) (Name b))"),
    ("a >= -1.5", "(Binary >= (Name a) (Unary - (FloatLit 1.5 '1.5')))"),
])
def test_precedence_and_associativity(src, expected):
    assert e(src) == expected


def test_comparisons_do_not_chain():
    with pytest.raises(MindError) as info:
        parse_expr("a < b < c")
    d = info.value.diagnostics[0]
    assert d.code == "E1010" and (d.span.line, d.span.col) == (1, 7) and "chained" in d.message


# -- literals, calls, tuples, closures -------------------------------------------------------------

def test_literals():
    assert e("[[1.0, 2.], [.5, 1e-3]]") == (
        "(ArrayLit [(ArrayLit [(FloatLit 1.0 '1.0') (FloatLit 2.0 '2.')]) "
        "(ArrayLit [(FloatLit 0.5 '.5') (FloatLit 0.001 '1e-3')])])")
    assert e("(true, false, \"va\\tl\\u{41}\")") == \
        "(TupleExpr [(BoolLit True) (BoolLit False) (StrLit 'va\\tlA')])"
    assert e("()") == "(TupleExpr [])"
    assert e("(a,)") == "(TupleExpr [(Name a)])"
    assert e("[]") == "(ArrayLit [])"
    assert e("1_000") == "(IntLit 1000)"


def test_public_intrinsic_calls():
    assert e("tensor.sum(x, axes=[0], keepdims=false)") == (
        "(Call (Attribute (Name tensor) sum) [(Name x)] [(Keyword axes (ArrayLit [(IntLit 0)])) "
        "(Keyword keepdims (BoolLit False))] 'tensor.sum')")
    assert e("tensor.reshape(x, (64,32))") == (
        "(Call (Attribute (Name tensor) reshape) [(Name x) (TupleExpr [(IntLit 64) (IntLit 32)])] "
        "[] 'tensor.reshape')")
    assert e('tensor.conv2d(x, w, stride_h=1, padding="same")') == (
        "(Call (Attribute (Name tensor) conv2d) [(Name x) (Name w)] [(Keyword stride_h (IntLit 1)) "
        "(Keyword padding (StrLit 'same'))] 'tensor.conv2d')")
    call = parse_expr("tensor.zeros(f32, (2,3))")
    assert isinstance(call, A.Call) and call.name == "tensor.zeros"
    assert dump(call.args[0]) == "(Name f32)"
    call = parse_expr("tensor.index(x, axis=0, i=1)")
    assert call.kwarg("i") == A.IntLit(1, call.kwarg("i").span) and call.kwarg("nope") is None


def test_spec_builtin_calls():
    assert e("conv2d(x, w, strides=[1, 1], padding=Custom([[1, 2], [3, 4]]))").endswith(
        "(Keyword padding (Call (Name Custom) [(ArrayLit [(ArrayLit [(IntLit 1) (IntLit 2)]) "
        "(ArrayLit [(IntLit 3) (IntLit 4)])])] [] Custom))] conv2d)")
    assert parse_expr("transpose(b, permutation=[1, 0])").name == "transpose"


def test_closures_and_call_of_call():
    assert e("grad(f)(x)") == "(Call (Call (Name f) [] [] f) [(Name x)] [] None)".replace(
        "(Call (Name f) [] [] f)", "(Call (Name grad) [(Name f)] [] grad)")
    assert e("grad(|p| loss(x, p))(params)") == (
        "(Call (Call (Name grad) [(Closure [(Param p None)] (Call (Name loss) [(Name x) (Name p)] [] "
        "loss))] [] grad) [(Name params)] [] None)")
    assert e("|a, b: f32| a + b") == (
        "(Closure [(Param a None) (Param b (ScalarType f32))] (Binary + (Name a) (Name b)))")
    assert e("|| 1") == "(Closure [] (IntLit 1))"
    assert e("grad(loss, wrt=[w1, b1])") == (
        "(Call (Name grad) [(Name loss)] [(Keyword wrt (ArrayLit [(Name w1) (Name b1)]))] grad)")


# -- types --------------------------------------------------------------------------------------------

def test_tensor_type_spellings():
    assert t("Tensor[f32,(10,20)]") == "(TensorType f32 [(Dim 10) (Dim 20)] False legacy)"
    assert t("Tensor[f32,(256)]") == "(TensorType f32 [(Dim 256)] False legacy)"
    assert t("tensor<f32[10, 20]>") == "(TensorType f32 [(Dim 10) (Dim 20)] False compact)"
    assert t("diff tensor<f32[N, M]>") == "(TensorType f32 [(Dim N) (Dim M)] True compact)"
    assert t("Tensor<f32, [B, 784]>") == "(TensorType f32 [(Dim B) (Dim 784)] False angle)"
    assert t("Tensor<i64, [?, 3,]>") == "(TensorType i64 [(Dim None) (Dim 3)] False angle)"
    assert t("Tensor<f32, []>") == "(TensorType f32 [] False angle)"
    assert t("(Tensor<f32, [B, 10]>, f32)") == (
        "(TupleType [(TensorType f32 [(Dim B) (Dim 10)] False angle) (ScalarType f32)])")
    assert t("()") == "(TupleType [])"
    assert t("(bool)") == "(ScalarType bool)"


def test_type_spans():
    ty = parse_type("diff Tensor<f32, [B, 10]>")
    assert ty.span == (0, 25) and ty.dims[0].span == (18, 19)


def test_greater_equal_after_type_is_split():
    m = parse("let x: tensor<f32[2]>= 1")
    assert dump(m.stmts[0]) == \
        "(Let (NamePattern x) (TensorType f32 [(Dim 2)] False compact) (IntLit 1) False)"


def test_bad_types():
    assert [c for c, *_ in errors_of("let a: Tensor<f33, [1]> = 1")] == ["E1010"]
    assert [c for c, *_ in errors_of("let a: &Foo = 1")] == ["E1013"]  # references
    assert [c for c, *_ in errors_of("let a: [f32; 3] = 1")] == ["E1013"]  # array types
    assert [c for c, *_ in errors_of("let a: Tensor<f32, [1.5]> = 1")] == ["E1010"]


# -- statements and modules ---------------------------------------------------------------------

def test_public_program_structure():
    m = parse("let a: Tensor[f32,(10,20)] = 1;\nlet b: Tensor[f32,(20,30)] = 1;\ntensor.matmul(a, b)")
    assert [type(s).__name__ for s in m.stmts] == ["Let", "Let"]
    assert dump(m.result) == "(Call (Attribute (Name tensor) matmul) [(Name a) (Name b)] [] 'tensor.matmul')"
    assert m.source.span(m.result.span).line == 3


def test_semicolon_after_result_keeps_it():
    assert parse("1 + 2;").result is not None
    assert parse("let a = 1;").result is None


def test_statements():
    m = parse("import tensor::zeros; import tensor::{ones, relu,}; import std.tensor\n"
              "let (a, (b, _)) = f(x)\nc = a + b\n")
    assert dump(m) == (
        "(Module [(Import [tensor zeros] None) (Import [tensor] [ones relu]) (Import [std tensor] None) "
        "(Let (TuplePattern [(NamePattern a) (TuplePattern [(NamePattern b) (NamePattern _)])]) None "
        "(Call (Name f) [(Name x)] [] f) False) (Assign (Name c) None (Binary + (Name a) (Name b)))] None)")
    assert [i.path for i in m.imports] == [("tensor", "zeros"), ("tensor",), ("std", "tensor")]


def test_functions_tuples_nested_fn_and_return():
    src = """
fn f(x: Tensor<f32, [B, 784]>, w: Tensor<f32,[784,10]>) -> (Tensor<f32, [B, 10]>, f32) {
    fn inner(y: f32) -> f32 { y * 2.0 }
    let h = x @ w
    return (h, inner(1.0))
}
fn g() { }  fn k(a: i32,) -> i32
{
    a
}
f(x, w)
"""
    m = parse(src, "f.mind")
    f, g, k = m.functions
    assert (f.name, g.name, k.name) == ("f", "g", "k")
    assert [p.name for p in f.params] == ["x", "w"]
    assert isinstance(f.ret, A.TupleType)
    inner = f.body.stmts[0]
    assert isinstance(inner, A.FnDef) and dump(inner.body.tail) == "(Binary * (Name y) (FloatLit 2.0 '2.0'))"
    assert isinstance(f.body.stmts[2], A.Return) and f.body.tail is None
    assert g.body == A.Block((), None, g.body.span)
    assert dump(k.body.tail) == "(Name a)"
    assert m.function("k") is k and m.function("nope") is None
    assert m.source.span(f.name_span).col == 4
    assert dump(m.result) == "(Call (Name f) [(Name x) (Name w)] [] f)"


def test_line_breaks_in_expressions():
    m = parse("let y = a +\n  b\nlet z = f(a,\n  b\n)\n(y, z)")
    assert dump(m.stmts[0].value) == "(Binary + (Name a) (Name b))"
    assert dump(m.result) == "(TupleExpr [(Name y) (Name z)])"


def test_spans_point_at_expressions():
    m = parse("let h = tensor.relu(x) + b")
    v = m.stmts[0].value
    sp = m.source.span(v.span)
    assert (sp.line, sp.col, sp.end_col) == (1, 9, 27)
    sp = m.source.span(v.left.args[0].span)
    assert (sp.col, sp.end_col) == (21, 22)


# -- syntax errors ----------------------------------------------------------------------------------

def test_e1010_expected_found_with_help():
    d = diags_of("let a = ;")[0]
    assert d.code == "E1010" and (d.span.line, d.span.col, d.span.end_col) == (1, 9, 10)
    assert d.message == "expected an expression, found `;`" and d.help


def test_missing_separator():
    d = diags_of("let a = 1 let b = 2")[0]
    assert d.code == "E1010" and d.span.col == 11
    assert "found keyword `let`" in d.message


def test_positional_after_keyword():
    d = diags_of("f(axes=[0], x)")[0]
    assert d.code == "E1010" and d.span.col == 13


def test_e1011_unclosed_delimiters_point_at_opener():
    assert errors_of("let a = f(1, 2\n") == [("E1011", 1, 10)]
    assert errors_of("fn f() {\n let a = 1\n") == [("E1011", 1, 8)]
    assert errors_of("let a = [1, (2, 3]") == [("E1011", 1, 13)]
    assert errors_of("let a: Tensor<f32, [2, 3]") == [("E1011", 1, 14)]
    d = diags_of("x = (1 + 2")[0]
    assert d.message == "unclosed delimiter `(`" and d.notes and "end of file" in d.notes[0]


def test_recovery_reports_independent_errors():
    src = "let a = ;\nlet b = 1 +\nlet c: = 2\nlet ok = 3\nfn f( { }\nlet d = )\nok"
    assert [(c, ln) for c, ln, _ in errors_of(src)] == [
        ("E1010", 1), ("E1010", 3), ("E1010", 3), ("E1010", 5), ("E1010", 6)]


def test_recovery_inside_blocks():
    src = "fn f() {\n  let a = ;\n  let b = 2\n  b +* 1\n}\nfn g() -> f32 { 1.0 }\n)\n"
    assert [(c, ln) for c, ln, _ in errors_of(src)] == [("E1010", 2), ("E1010", 4), ("E1010", 7)]


def test_errors_are_capped():
    assert len(errors_of("let = 1\n" * 100)) == 20


def test_e1012_nesting_depth():
    assert errors_of("(" * 10_000 + "1" + ")" * 10_000)[0][0] == "E1012"
    assert errors_of("[" * 5_000)[0][0] == "E1012"
    assert errors_of("let a: " + "(" * 500 + "f32" + ")" * 500 + " = 1")[0][0] == "E1012"
    assert errors_of("fn f() {" * 300)[0][0] == "E1012"
    assert errors_of("|a| " * 300 + "a")[0][0] == "E1012"
    src = "x" + "(" * (P.MAX_DEPTH - 1) + ")" * (P.MAX_DEPTH - 1)
    parse(src)  # just under the limit: fine
    # long flat chains do not recurse
    parse("1" + " + 1" * 20_000)
    parse("-" * 20_000 + "x")


def test_parse_expr_and_type_reject_trailing_input():
    with pytest.raises(MindError):
        parse_expr("a b")
    with pytest.raises(MindError):
        parse_type("f32 f32")
