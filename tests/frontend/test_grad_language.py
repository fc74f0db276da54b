"""`grad` in the language: the three forms (`grad(loss, wrt=...)`, `grad(f)(x, y)`,
`grad(|a| f(a, y))(x)`) agree, misuse gives coded diagnostics at the right line:col, `grad` works in
nested functions, and the IR of a program using it is byte-identical across processes."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from mind.compiler.frontend.api import compile_source
from mind.diagnostics import MindError
from mind.ir.printer import print_function
from mind.calling import run_reference

from .helpers import EXAMPLES, ROOT

FORMS = """
fn f(a: Tensor<f32, [3, 4]>, y: Tensor<f32, [2, 3]>) -> f32 {
    let z = y @ a;
    sum(log_softmax(z, axis=-1) * relu(z) + tanh(z), axes=[0, 1], keepdims=false)
}

fn by_value(x: Tensor<f32, [3, 4]>, y: Tensor<f32, [2, 3]>) -> Tensor<f32, [3, 4]> {
    let l = f(x, y);
    grad(l, wrt=x)
}

fn by_value_tuple(x: Tensor<f32, [3, 4]>, y: Tensor<f32, [2, 3]>) -> Tensor<f32, [3, 4]> {
    let l = f(x, y);
    let (gx,) = grad(l, wrt=[x]);
    gx
}

fn by_function(x: Tensor<f32, [3, 4]>, y: Tensor<f32, [2, 3]>) -> Tensor<f32, [3, 4]> {
    grad(f)(x, y)
}

fn by_closure(x: Tensor<f32, [3, 4]>, y: Tensor<f32, [2, 3]>) -> Tensor<f32, [3, 4]> {
    grad(|a| f(a, y))(x)
}
"""


def _compile(src: str, path: str = "t.mind"):
    return compile_source(src, path, verify=True)


def _errors(src: str) -> list[tuple[str, int, int]]:
    with pytest.raises(MindError) as info:
        compile_source(src, "t.mind")
    return [(d.code, d.span.line, d.span.col) for d in info.value.diagnostics]


def _messages(src: str) -> list[str]:
    with pytest.raises(MindError) as info:
        compile_source(src, "t.mind")
    return [d.message for d in info.value.diagnostics]


def _body(fn) -> str:
    return print_function(fn).split("\n", 1)[1]


def test_three_forms_agree():
    module = _compile(FORMS)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal((2, 3)).astype(np.float32)
    names = ["by_value", "by_value_tuple", "by_function", "by_closure"]
    results = {n: run_reference(module.function(n), [x, y])[0] for n in names}
    for n in names[1:]:
        np.testing.assert_array_equal(results[n], results["by_value"], err_msg=n)
    assert np.max(np.abs(results["by_value"])) > 1e-3
    # they lower to the same canonical IR, not merely to equal numbers
    bodies = {_body(module.function(n)) for n in names}
    assert len(bodies) == 1, bodies


def test_grad_against_finite_differences():
    """A sanity check of the language form itself (the transform has its own rule-by-rule checks)."""
    src = FORMS.replace("f32", "f64")
    fn = _compile(src).function("by_closure")
    ffn = _compile(src).function("f")
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((2, 3))
    z = y @ x
    assert np.min(np.abs(z)) > 1e-3  # away from relu's kink
    g = run_reference(fn, [x, y])[0]
    h = 1e-6
    for j in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[j] += h
        xm[j] -= h
        d = (run_reference(ffn, [xp, y])[0] - run_reference(ffn, [xm, y])[0]) / (2 * h)
        assert abs(float(g[j]) - float(d)) <= 1e-6 * max(1.0, abs(float(d)))


def test_tuple_wrt_returns_each_gradient():
    src = """
fn f(w: Tensor<f32, [3]>, b: Tensor<f32, [3]>) -> (Tensor<f32, [3]>, Tensor<f32, [3]>) {
    let l = sum(w * w * b, axes=[0], keepdims=false);
    grad(l, wrt=[w, b])
}
"""
    w = np.array([1.0, -2.0, 3.0], np.float32)
    b = np.array([0.5, 1.0, 2.0], np.float32)
    gw, gb = run_reference(_compile(src).function("f"), [w, b])
    np.testing.assert_array_equal(gw, 2 * w * b)
    np.testing.assert_array_equal(gb, w * w)


def test_grad_inside_nested_function():
    src = """
fn outer(x: Tensor<f32, [2, 3]>, w: Tensor<f32, [3]>) -> Tensor<f32, [3]> {
    fn inner(v: Tensor<f32, [3]>, data: Tensor<f32, [2, 3]>) -> Tensor<f32, [3]> {
        let l = sum(data * v * v);
        grad(l, wrt=v)
    }
    fn energy(v: Tensor<f32, [3]>) -> f32 { sum(v * v * v) }
    inner(w, x) + grad(energy)(w) + grad(|u| energy(u * 2.0))(w)
}
"""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    w = rng.standard_normal(3).astype(np.float32)
    (got,) = run_reference(_compile(src).function("outer"), [x, w])
    want = 2 * w * x.sum(0) + 3 * w * w + 3 * (2 * w) ** 2 * 2
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_grad_with_symbolic_batch():
    src = """
fn step(x: Tensor<f32, [B, 4]>, w: Tensor<f32, [4, 2]>) -> Tensor<f32, [4, 2]> {
    let l = mean(x @ w, axes=[0, 1], keepdims=false);
    w - 0.5 * grad(l, wrt=w)
}
"""
    fn = _compile(src).function("step")
    assert str(fn.params[0].type) == "f32[B, 4]"
    w = np.zeros((4, 2), np.float32)
    for batch in (1, 5):
        x = np.ones((batch, 4), np.float32)
        (got,) = run_reference(fn, [x, w])
        np.testing.assert_allclose(got, np.full((4, 2), -0.5 / 2, np.float32), rtol=1e-6)


# --- diagnostics ------------------------------------------------------------------------------

def test_gradient_wrt_integer_is_e5005():
    src = """fn f(n: Tensor<i32, [3]>, x: Tensor<f32, [3]>) -> Tensor<i32, [3]> {
    let l = sum(x * cast(n, f32));
    grad(l, wrt=n)
}"""
    assert _errors(src) == [("E5005", 3, 17)]  # at the `wrt` name
    assert "`n` of type i32[3]" in _messages(src)[0]


def test_function_form_at_integer_point_is_e5005():
    src = """fn g(a: Tensor<i32, [3]>) -> f32 { sum(cast(a, f32)) }
fn f(n: Tensor<i32, [3]>) -> Tensor<i32, [3]> {
    grad(g)(n)
}"""
    assert _errors(src) == [("E5005", 3, 13)]  # at the point argument
    assert "`n` of type i32[3]" in _messages(src)[0]


def test_non_scalar_loss_is_e5006():
    src = """fn f(x: Tensor<f32, [3]>) -> Tensor<f32, [3]> {
    let l = x * x;
    grad(l, wrt=[x])
}"""
    assert _errors(src) == [("E5006", 3, 10)]  # at the loss argument
    assert "`l` has type f32[3]" in _messages(src)[0]


def test_non_scalar_function_is_e5006():
    src = """fn sq(a: Tensor<f32, [3]>) -> Tensor<f32, [3]> { a * a }
fn f(x: Tensor<f32, [3]>) -> Tensor<f32, [3]> {
    grad(|a| sq(a))(x)
}"""
    assert _errors(src) == [("E5006", 3, 10)]  # at the closure
    assert "the closure's result has type f32[3]" in _messages(src)[0]


def test_integer_loss_expression_is_e5006_at_the_expression():
    src = """fn f(x: Tensor<f32, [3]>) -> Tensor<f32, [3]> {
    grad(sum(cast(x, i32)), wrt=[x])
}"""
    assert _errors(src) == [("E5006", 2, 10)]
    assert "`sum(cast(x, i32))` has type i32[]" in _messages(src)[0]


@pytest.mark.parametrize("call, expected", [
    ("grad(l, wrt=[x * 2.0])", ("E2009", 3, 18)),   # wrt lists names, not expressions
    ("grad(l, wrt=[z])", ("E2002", 3, 18)),          # an undefined name
    ("grad(l)", ("E2009", 3, 5)),                    # no wrt: grad(f) is a function
    ("grad(l, of=[x])", ("E2007", 3, 5)),            # unknown keyword
    ("grad(l, l, wrt=[x])", ("E2007", 3, 5)),        # two losses
    ("grad(l, wrt=[x], wrt=[x])", ("E2007", 3, 5)),  # wrt given twice
    ("grad(x)(x)", ("E2009", 3, 10)),                # a value is not a function
    ("grad(f, g)(x)", ("E2007", 3, 5)),              # grad(f) takes one function
])
def test_bad_wrt_usage(call, expected):
    src = f"""fn f(x: Tensor<f32, [3]>) -> Tensor<f32, [3]> {{
    let l = sum(x * x);
    {call}
}}"""
    assert _errors(src) == [expected]


def test_closures_are_values_outside_grad_too():
    src = """fn f(x: Tensor<f32, [3]>) -> f32 {
    let c = |a| sum(a * 2.0);
    c(x) + grad(c)(x)[0]
}"""
    (got,) = run_reference(_compile(src).function("f"), [np.arange(3, dtype=np.float32)])
    assert got == np.float32(6.0 + 2.0)


def test_gradient_tuple_arity_is_checked():
    src = """fn f(x: Tensor<f32, [3]>, w: Tensor<f32, [3]>) -> Tensor<f32, [3]> {
    let l = sum(x * w);
    let (a, b) = grad(l, wrt=[x]);
    a
}"""
    assert _errors(src) == [("E2001", 3, 9)]


# --- determinism ------------------------------------------------------------------------------

@pytest.mark.parametrize("source, fn", [(EXAMPLES / "train_mlp.mind", "train_step"), (None, "by_closure")])
def test_mind_ir_of_grad_program_is_deterministic_across_processes(tmp_path, source, fn):
    if source is None:
        source = tmp_path / "forms.mind"
        source.write_text(FORMS)
    outs = []
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-m", "mind.cli.main", "ir", str(source), "--fn", fn],
                           capture_output=True, env=env, cwd=ROOT, timeout=120)
        assert r.returncode == 0, r.stderr.decode()
        outs.append(r.stdout)
    assert outs[0] == outs[1]
    assert b"transpose" in outs[0]  # the gradient is in the printed IR
