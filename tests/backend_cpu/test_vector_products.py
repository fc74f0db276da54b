"""Matmuls of one column or one term (``lowerings._vector_product``): a matrix times a vector and a
dot are sums of elementwise products, an outer product is the products, on every target and
thread count, against the reference: within the matmul's accuracy bound, ints exact, a column of
-0 products +0 (a matmul's sum starts at +0), NaN and infinities as the products give them; no
GEMM call, where a batch of columns that is not a reshaped batch of vectors keeps the matmul."""

from __future__ import annotations

import numpy as np
import pytest

import mind
from mind.calling import select_function
from mind.compiler.backend.cpu.kernel_library import host_isa
from mind.compiler.backend.linalg.emit import emit_mlir
from mind.compiler.frontend.api import compile_source


def T(dt: str, *shape: int) -> str:
    return f"Tensor<{dt}, [{', '.join(map(str, shape))}]>"


# (lhs, rhs, result, expression): every way a matmul has one column or one term
PRODUCTS = [
    ((5000,), (5000,), (), "dot(a, b)"),                              # a dot: [1, K] @ [K, 1]
    ((301, 777), (777,), (301,), "matmul(a, b)"),                     # a matrix times a vector
    ((1000, 500), (500, 1), (1000, 1), "matmul(a, b)"),               # times a column parameter
    ((64, 10000), (10000, 1), (64, 1), "matmul(a, b)"),               # few long rows: blocked sums
    ((7, 33, 129), (7, 129), (7, 33, 1), "matmul(a, reshape(b, [7, 129, 1]))"),  # a batch of vectors
    ((640,), (640, 3), (3,), "matmul(a, b)"),                         # a vector times a matrix (GEMM)
    ((300, 1), (1, 257), (300, 257), "matmul(a, b)"),                 # an outer product
    ((4, 37, 1), (4, 1, 65), (4, 37, 65), "matmul(a, b)"),            # a batch of outer products
    ((1, 9), (5, 1), (9, 5), "matmul(transpose(a), transpose(b))"),   # of transposed operands
]
OPTIONS = [{"threads": 1}, {"threads": 2}, {"schedule": "all"}] + \
    ([{"threads": 2, "cpu": "x86-64-v3"}] if host_isa() is not None else [])


def _program(dt: str, case) -> str:
    a, b, out, expr = case
    return f"fn f(a: {T(dt, *a)}, b: {T(dt, *b)}) -> {T(dt, *out)} {{ {expr} }}"


def _inputs(dt: str, case, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if dt == "i32":
        return [rng.integers(-50, 50, s).astype(np.int32) for s in case[:2]]
    t = np.float32 if dt == "f32" else np.float64
    return [rng.standard_normal(s).astype(t) for s in case[:2]]


@pytest.mark.parametrize("opts", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("dt", ["f32", "f64", "i32"])
@pytest.mark.parametrize("case", PRODUCTS, ids=lambda c: f"{c[0]}x{c[1]}")
def test_vector_products_match_the_reference(case, dt, opts):
    src = _program(dt, case)
    args = _inputs(dt, case, sum(case[0]) + len(dt))
    got = np.asarray(mind.compile(src, fn="f", cache=False, **opts)(*args))
    want = np.asarray(mind.compile(src, fn="f", backend="reference")(*args))
    if dt == "i32":
        np.testing.assert_array_equal(got, want)
    else:  # any order of a sum of K products: within K·eps of the sum of their magnitudes
        magnitude = np.asarray(mind.compile(src, fn="f", backend="reference")(*(np.abs(x) for x in args)))
        k = case[0][-1]
        assert np.all(np.abs(got - want) <= k * np.finfo(args[0].dtype).eps * magnitude), src


@pytest.mark.parametrize("case", PRODUCTS[:5] + PRODUCTS[6:], ids=lambda c: f"{c[0]}x{c[1]}")
def test_vector_products_call_no_gemm(case):
    """The products and sums replace the contraction; the vector times a matrix keeps the GEMM
    (its sum runs along the columns of ``b``, which the GEMM reads in its order)."""
    fn = select_function(compile_source(_program("f32", case), "<test>"), "f")
    text = emit_mlir(fn, {})[0]
    assert "linalg.matmul" not in text and "linalg.batch_matmul" not in text and "linalg.contract" not in text


def test_a_batch_of_column_parameters_keeps_the_matmul():
    # [B, K, 1] given as such: its column, a slice, would be read lane by lane; the batched GEMM
    fn = select_function(compile_source(_program("f32", ((8, 30, 20), (8, 20, 1), (8, 30, 1), "matmul(a, b)")),
                                        "<test>"), "f")
    assert "linalg.batch_matmul" in emit_mlir(fn, {})[0]


@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_signed_zeros_and_non_finite_products(dt):
    t = np.float32 if dt == "f32" else np.float64
    src = (f"fn f(a: {T(dt, 4, 3)}, v: {T(dt, 3)}, c: {T(dt, 4, 1)}, r: {T(dt, 1, 3)}) -> "
           f"({T(dt, 4)}, {T(dt, 4, 3)}) {{ (matmul(a, v), matmul(c, r)) }}")
    a = np.array([[-0.0, -0.0, -0.0], [np.inf, 1.0, 2.0], [np.inf, -np.inf, 0.0], [np.nan, 1.0, 1.0]], t)
    v = np.array([1.0, 1.0, 1.0], t)
    c = np.array([[-0.0], [0.0], [np.inf], [-1.0]], t)
    r = np.array([[1.0, -0.0, 0.0]], t)
    for opts in OPTIONS:
        mv, outer = mind.compile(src, fn="f", cache=False, **opts)(a, v, c, r)
        rmv, router = mind.compile(src, fn="f", backend="reference")(a, v, c, r)
        np.testing.assert_array_equal(mv, rmv)
        np.testing.assert_array_equal(outer, router)
        assert not np.signbit(mv[0]) and not np.signbit(outer[0, 0])  # -0 products sum to +0


def test_a_transposed_matrix_times_a_column_keeps_the_gemm():
    """``xᵀ g`` (a linear layer's weight gradient for one output): the GEMM reads x's columns in
    place; as products fused into a sum, x was read across its rows (a logistic regression's
    gradient over 4096x784 4.8x slower)."""
    from mind.compiler.backend.cpu.api import emit_stage
    src = (f"fn f(w: {T('f32', 784, 1)}, x: {T('f32', 512, 784)}, y: {T('f32', 512, 1)}) -> {T('f32', 784, 1)} "
           "{ grad(|w| sum((sigmoid(matmul(x, w)) - y) * (sigmoid(matmul(x, w)) - y)))(w) }")
    llvm_ir = emit_stage(mind._function_of(src, "f"), "llvm", threads=2)
    assert "call void @mind_gemm" in llvm_ir
    rng = np.random.default_rng(9)
    w, x, y = (rng.standard_normal(s).astype(np.float32) * 0.1 for s in ((784, 1), (512, 784), (512, 1)))
    np.testing.assert_allclose(mind.compile(src, fn="f", cache=False)(w, x, y),
                               mind.compile(src, fn="f", backend="reference")(w, x, y), rtol=1e-4, atol=1e-5)
