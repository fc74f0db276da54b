"""Constructs outside MIND's design are refused with a diagnostic that names the construct and
says what to write instead (E1013 for syntax MIND does not have, E2011 for control flow that needs
a value known only at run time), never with "expected X, found Y" about an unrelated token."""

from __future__ import annotations

import pytest

from mind.compiler.frontend.api import compile_source

from .helpers import compile_diagnostics


def diagnostic(src: str):
    return compile_diagnostics(src)[0]


@pytest.mark.parametrize("src, code, names", [
    ("fn f(x: f32) -> f32 { match x { _ => x } }", "E1013", "`match`"),
    ("enum Color { Red, Green }", "E1013", "`enum`"),
    ("impl Layer { fn f() {} }", "E1013", "`impl`"),
    ("trait T { }", "E1013", "traits"),
    ("type T = f32", "E1013", "type aliases"),
    ("fn f(x: &f32) -> f32 { x }", "E1013", "reference types"),
    ("fn f(x: f32) -> f32 { let y = &x; y }", "E1013", "references"),
    ("fn f(x: [f32; 3]) -> f32 { 1.0 }", "E1013", "array types"),
    ("fn f<T>(x: T) -> T { x }", "E1013", "generic"),
    ("fn f(self) -> f32 { 1.0 }", "E1013", "methods"),
    ("fn c_sqrt(x: f64) -> f64;", "E1013", "without a body"),
    ("fn f(a: fn(f64) -> f64) -> f64 { 1.0 }", "E1013", "function types"),
    ("fn f(x: i64) -> i64 { x >> 16 }", "E1013", "`>>`"),
    ("fn f(x: i64) -> i64 { x << 1 }", "E1013", "`<<`"),
    ("fn f(x: i64) -> i64 { x & 255 }", "E1013", "`&`"),
    ("fn f(x: i64) -> i64 { x ^ 3 }", "E1013", "`^`"),
    ("fn f(x: f32) -> f32 { if let y = x { y } else { x } }", "E1013", "`if let`"),
    ("fn f() { on(gpu0) { let a = 1 } }", "E1013", "device block"),
    ("fn f(x: f32) -> f32 { print(x); x }", "E1013", "`print`"),
    ("fn f() -> f32 { let w = randn([2]); sum(w) }", "E1013", "`randn`"),
    ("import tensor::randn", "E1013", "`randn`"),
    ("fn f(x: f32) -> f32 { x? }", "E1013", "`?`"),
    ("fn f(x: i64) -> i64 { let mut i = 0; while i < x { i += 1 } i }", "E2011", "`while`"),
    ("fn f(n: i64) -> i64 { let mut s = 0; for i in 0..n { s += 1 } s }", "E2011", "the end of the range"),
    ("fn f(x: f32) -> f32 { let mut s = 0.0; for i in 0..3 { if x > 0.0 { break } s += 1.0 } s }",
     "E2011", "`break`"),
    ("fn fib(n: i64) -> i64 { fib(n) }", "E2003", "recursive"),
    ("import std.vec", "E2008", "`std::vec`"),
])
def test_refused_constructs_are_named(src, code, names):
    d = diagnostic(src)
    assert d.code == code and names in d.message, d
    assert d.help, "a refusal says what to write instead"
    assert "expected" not in d.message


@pytest.mark.parametrize("src", [
    "fn f(x: f32) -> f32 { if x > 0.0 { x } else { -x } }",  # was: found identifier `x`
    "pub fn f(x: f32) -> f32 { x }",                          # was: found keyword `fn`
    "fn f(x: f32) -> f32 { let mut y = x; y += 1.0; y }",     # was: expected `:` or `=`
    "fn f(x: Tensor<F32, [2]>) -> tensor<f32> { sum(x) }",    # uppercase dtypes, scalar type
])
def test_constructs_that_used_to_be_misreported_now_compile(src):
    compile_source(src, "t.mind")


def test_a_missing_if_body_is_reported_as_such():
    d = diagnostic("fn f(x: f32) -> f32 {\n    if x > 0.0 1.0 else { 2.0 }\n}")
    assert (d.code, d.span.line) == ("E1010", 2) and "the body of `if`" in d.message


def test_misspelled_keyword_arguments_get_a_suggestion():
    d = diagnostic("fn f(x: Tensor<f32, [3]>) -> f32 { sum(x, keepdim=true) }")
    assert d.code == "E2009" and "did you mean `keepdims`" in d.help
    d = diagnostic("fn g(alpha: f32) -> f32 { alpha }\nfn f() -> f32 { g(alpah=1.0) }")
    assert "did you mean `alpha`" in d.help


def test_an_empty_program_says_so(tmp_path, capsys):
    from mind.cli.main import main

    path = tmp_path / "empty.mind"
    path.write_text("// nothing yet\n")
    assert main(["run", str(path), "--backend", "reference"]) == 1
    assert "the module is empty" in capsys.readouterr().err


def test_mind_grad_points_at_the_loss(tmp_path, capsys):
    # every op the frontend emits carries its source range: E5006 names the loss expression
    from mind.cli.main import main

    path = tmp_path / "g.mind"
    path.write_text("fn f(x: Tensor<f32, [3]>) -> Tensor<f32, [3]> { x * x }\n")
    assert main(["grad", str(path), "--fn", "f", "--wrt", "x"]) == 1
    err = capsys.readouterr().err
    assert "E5006" in err and "g.mind:1:49" in err


def test_long_source_lines_are_cut_around_the_caret():
    from mind.diagnostics import render

    src = "let x = " + " + ".join(["1.0"] * 200) + " + y\n"
    d = compile_diagnostics(src)[0]
    text = render(d, {"t.mind": src})
    line, carets = text.splitlines()[3], text.splitlines()[4]
    assert len(line) < 120 and "..." in line and "y" in line
    assert line[carets.index("^")] == "y"
