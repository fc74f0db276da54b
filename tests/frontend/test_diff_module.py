"""The diff module's entry points (grad forms, backward, value_and_grad, vjp, jvp, jacobian) against
analytic derivatives and finite differences."""

from __future__ import annotations

import numpy as np
import pytest

from mind.compiler.frontend.api import compile_source
from mind.diagnostics import MindError
from mind.calling import run_reference

X = np.array([0.5, -1.25, 2.0], np.float64)


def run(src: str, *args):
    """Run the last function of ``src``."""
    f = compile_source(src, "t.mind").functions[-1]
    return run_reference(f, [np.asarray(a) for a in args])


def fd_jacobian(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    cols = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)]
    return np.stack(cols, axis=-1)


def g(x: np.ndarray) -> np.ndarray:  # the function the programs below differentiate
    return np.array([np.sum(np.sin(x) * x), x[0] * x[1] ** 2, np.exp(x[2]) - x[0]])


G = """fn g(x: Tensor<f64, [3]>) -> Tensor<f64, [3]> {
    [sum(sin(x) * x), x[0] * x[1] * x[1], exp(x[2]) - x[0]]
}
"""


def test_jacobian_and_jvp_and_vjp_agree_with_finite_differences():
    src = G + """fn main(x: Tensor<f64, [3]>, v: Tensor<f64, [3]>) -> (Tensor<f64, [3, 3]>, Tensor<f64, [3]>,
        Tensor<f64, [3]>, Tensor<f64, [3]>) {
    let J = jacobian(g, x)
    let (y, back) = vjp(g, x)
    let (y2, jv) = jvp(g, x, v)
    (J, back(v), jv, jacobian(g)(x)[1])
}"""
    v = np.array([1.0, -2.0, 0.5])
    m = compile_source(src, "t.mind")
    main = next(f for f in m.functions if f.name == "main")
    J, vj, jv, row = run_reference(main, [X, v])
    fd = fd_jacobian(g, X)
    np.testing.assert_allclose(J, fd, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(vj, v @ fd, rtol=1e-7)
    np.testing.assert_allclose(jv, fd @ v, rtol=1e-7)
    np.testing.assert_array_equal(row, J[1])


def test_grad_forms_and_backward_give_one_gradient():
    src = G + """fn main(x: Tensor<f64, [3]>) -> (Tensor<f64, [3]>, Tensor<f64, [3]>, Tensor<f64, [3]>,
        Tensor<f64, [3]>, f64, Tensor<f64, [3]>) {
    let loss = |a| sum(g(a) * g(a))
    let l = loss(x)
    let (v, gv) = value_and_grad(loss, x)
    (grad(loss)(x), grad(loss, x), backward(l, x), grad(l, wrt=x), v, gv)
}"""
    outs = run(src, X)
    want = 2 * g(X) @ fd_jacobian(g, X)
    for i in (0, 1, 2, 3, 5):
        np.testing.assert_allclose(outs[i], want, rtol=1e-7)
    assert outs[4] == np.sum(g(X) ** 2)


def test_gradient_with_respect_to_a_tuple():
    src = """fn f(a: Tensor<f64, [2]>, b: f64) -> (Tensor<f64, [2]>, f64) {
    grad(|p| { let (u, w) = p; sum(u * u) * w }, (a, b))
}"""
    ga, gb = run(src, np.array([1.0, 2.0]), np.float64(3.0))
    np.testing.assert_array_equal(ga, [6.0, 12.0])
    assert gb == 5.0


@pytest.mark.parametrize("call, code", [
    ("jacobian(|a| a, x)", None), ("vjp(x, x)", "E2009"), ("jvp(|a| a, x)", "E2007"),
    ("backward(sum(x))", "E2007"), ("value_and_grad(|a| a, x)", "E5006"),
])
def test_diagnostics(call, code):
    src = f"fn f(x: Tensor<f64, [3]>) -> f64 {{ let r = {call}; 1.0 }}"
    if code is None:
        compile_source(src, "t.mind")
        return
    with pytest.raises(MindError) as info:
        compile_source(src, "t.mind")
    assert info.value.diagnostics[0].code == code
