"""Array builtins against NumPy: constants (eye, arange, linspace), flatten, stack, take,
take_along_axis, per-row gather, min/max (reduction or elementwise), prod, argmax/argmin, and the
public spec's forms of index and slice; gradients of the compositions."""

from __future__ import annotations

import numpy as np
import pytest

from mind.compiler.frontend.api import compile_source
from mind.diagnostics import MindError
from mind.calling import run_reference


def program(src: str, fn: str | None = None):
    m = compile_source(src, "t.mind")
    return next(f for f in m.functions if fn is None or f.name == fn)


def values(expr: str):
    out = run_reference(program(f"({expr},)"), [])
    return out[0]


@pytest.mark.parametrize("expr, want", [
    ("eye(3)", np.eye(3, dtype=np.float32)),
    ("eye(2, 4, dtype=i32)", np.eye(2, 4, dtype=np.int32)),
    ("arange(5)", np.arange(5, dtype=np.int32)),
    ("arange(2, 11, 3)", np.arange(2, 11, 3, dtype=np.int32)),
    ("arange(0.0, 1.0, 0.1)", np.arange(0.0, 1.0, 0.1).astype(np.float32)),
    ("arange(5, 0, -2)", np.arange(5, 0, -2, dtype=np.int32)),
    ("arange(3, dtype=f64)", np.arange(3, dtype=np.float64)),
    ("linspace(0.0, 1.0, 7)", np.linspace(0.0, 1.0, 7).astype(np.float32)),
    ("linspace(-2, 3, 4, dtype=f64)", np.linspace(-2, 3, 4)),
    ("flatten(eye(2))", np.eye(2, dtype=np.float32).ravel()),
    ("stack([arange(3), arange(3) * 2], axis=1)", np.stack([np.arange(3), np.arange(3) * 2], 1).astype(np.int32)),
    ("prod(arange(1, 8))", np.int32(5040)),
    ("prod([[1.5, 2.0, -3.0], [0.5, 4.0, 2.0]], axes=[1], keepdims=true)",
     np.prod(np.array([[1.5, 2, -3], [0.5, 4, 2]], np.float32), axis=1, keepdims=True)),
    ("min([[3, 1], [2, 5]], 0)", np.array([2, 1], np.int32)),
    ("min([3.0, -1.0, 2.0], 0.0)", np.minimum([3.0, -1.0, 2.0], 0.0).astype(np.float32)),
    ("max([3.0, -1.0, 2.0], 0.0)", np.maximum([3.0, -1.0, 2.0], 0.0).astype(np.float32)),
    ("max([[3, 1], [2, 5]])", np.int32(5)),
    ("argmax([[1.0, 7.0, 7.0], [9.0, 0.0, 1.0]], axis=1)", np.array([1, 0], np.int32)),
    ("argmin([4, -2, 9, -2])", np.int32(1)),
    ("index([[1, 2], [3, 4]], [1, 0])", np.int32(3)),
    ("slice([[1, 2, 3], [4, 5, 6]], [0, 1], [2, 3], [1, 2])", np.array([[2], [5]], np.int32)),
])
def test_values_match_numpy(expr, want):
    got = values(expr)
    assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
    np.testing.assert_array_equal(got, want)


def test_int_min_and_float_extremes_with_special_values():
    x = np.array([[np.nan, 1.0, -np.inf], [0.0, -0.0, 5.0]], np.float32)
    f = program("fn f(x: Tensor<f32, [2, 3]>) -> (Tensor<f32, [2]>, Tensor<i32, [2]>, Tensor<i32, [2]>) { "
                "(min(x, axes=[1]), argmax(x, axis=1), argmin(x, axis=1)) }")
    mn, amax, amin = run_reference(f, [x])
    np.testing.assert_array_equal(mn, np.min(x, axis=1))
    np.testing.assert_array_equal(amax, np.argmax(x, axis=1))
    np.testing.assert_array_equal(amin, np.argmin(x, axis=1))
    i = np.array([np.iinfo(np.int32).min, 0, np.iinfo(np.int32).max], np.int32)
    (got,) = run_reference(program("fn f(x: Tensor<i32, [3]>) -> i32 { min(x) }"), [i])
    assert got == i.min()


def test_gather_per_row_and_take():
    logp = np.log(np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]], np.float32))
    labels = np.array([2, 0], np.int32)
    f = program("""fn f(lp: Tensor<f32, [B, 3]>, y: Tensor<i32, [B]>, t: Tensor<f32, [4, 2]>, ids: Tensor<i32, [3]>)
        -> (Tensor<f32, [B]>, Tensor<f32, [3, 2]>, Tensor<f32, [B, 1]>, Tensor<f32, [B]>) {
    (gather(lp, y, 1), take(t, ids), take_along_axis(lp, reshape(y, [-1, 1]), 1), gather(lp, 0, 1))
}""")
    t = np.arange(8, dtype=np.float32).reshape(4, 2)
    ids = np.array([3, 0, 3], np.int32)
    a, b, c, d = run_reference(f, [logp, labels, t, ids])
    np.testing.assert_array_equal(a, logp[np.arange(2), labels])
    np.testing.assert_array_equal(b, t[ids])
    np.testing.assert_array_equal(c, np.take_along_axis(logp, labels[:, None], 1))
    np.testing.assert_array_equal(d, logp[:, 0])


def test_gradients_of_prod_gather_and_stack():
    x = np.array([[1.5, -2.0, 0.5], [3.0, 0.0, 2.0]], np.float64)
    src = """fn g(x: Tensor<f64, [2, 3]>, y: Tensor<i32, [2]>) -> (Tensor<f64, [2, 3]>, Tensor<f64, [2, 3]>,
            Tensor<f64, [2, 3]>) {
    (grad(|a| sum(prod(a, axes=[1])), x), grad(|a| sum(gather(a, y, 1) * 2.0), x),
     grad(|a| sum(stack([a, a * a], axis=0)), x))
}"""
    gp, gg, gs = run_reference(program(src), [x, np.array([2, 0], np.int32)])
    want = np.array([[np.prod(np.delete(r, j)) for j in range(3)] for r in x])
    np.testing.assert_allclose(gp, want)  # the zero in row 1 is handled exactly
    np.testing.assert_array_equal(gg, [[0, 0, 2], [2, 0, 0]])
    np.testing.assert_array_equal(gs, 1 + 2 * x)


@pytest.mark.parametrize("expr, code", [
    ("arange(0, 5, 0)", "E3006"), ("eye(-1)", "E3006"), ("stack([])", "E2007"),
    ("take_along_axis(eye(2), arange(2), 1)", "E3002"), ("argmax(eye(2), axis=2)", "E3004"),
])
def test_errors(expr, code):
    with pytest.raises(MindError) as info:
        compile_source(f"({expr},)", "t.mind")
    assert info.value.diagnostics[0].code == code
