"""Cheap elementwise producers with several users are recomputed by each (``linalg.recompute``): which
producers qualify, that fusion then fuses every copy, and that the kernels' results are bit for bit
those of the kernels without the copies."""

from __future__ import annotations

import numpy as np
import pytest

import mind

LOG_SOFTMAX = """fn f(x: Tensor<f32, [64, 300]>) -> Tensor<f32, [64, 300]> {
  let m = max(x, axis=1, keepdims=true);
  let d = x - m;
  d - log(sum(exp(d), axis=1, keepdims=true))
}"""

LAYER_NORM = """fn f(x: Tensor<f32, [48, 200]>, g: Tensor<f32, [200]>) -> Tensor<f32, [48, 200]> {
  let c = x - mean(x, axis=1, keepdims=true);
  c / sqrt(mean(c * c, axis=1, keepdims=true) + 0.00001) * g
}"""


def _prefused(src: str, recompute: bool) -> tuple[str, int]:
    from mlir import ir
    from mlir.passmanager import PassManager

    from mind.compiler.backend.linalg.emit import emit_mlir
    from mind.compiler.backend.linalg.pipeline import prefusion
    from mind.compiler.backend.linalg.recompute import recompute_cheap_producers

    text, _name = emit_mlir(mind._function_of(src, "f"), {})
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        copies = recompute_cheap_producers(m) if recompute else 0
        PassManager.parse(prefusion().render()).run(m.operation)
        return str(m), copies


def _generics(text: str) -> int:
    return text.count("linalg.generic {")


@pytest.mark.parametrize("src", [LOG_SOFTMAX, LAYER_NORM])
def test_a_row_statistics_subtraction_is_recomputed_and_fused(src):
    """``x - max`` and ``x - mean`` have two users each: each gets a copy, fusion fuses every copy
    (never more generics than without them), and no generic is left computing the subtraction alone."""
    before, _ = _prefused(src, False)
    after, copies = _prefused(src, True)
    assert copies >= 1
    assert _generics(after) <= _generics(before)
    if src is LOG_SOFTMAX:
        assert _generics(after) == _generics(before) - 1


def _copies(src: str) -> int:
    return _prefused(src, True)[1]


def test_what_is_not_recomputed():
    # a bias-add whose large operand (a matmul's result) only it reads: left for the contraction
    assert _copies("""fn f(x: Tensor<f32, [32, 64]>, w: Tensor<f32, [64, 48]>, b: Tensor<f32, [48]>)
        -> (Tensor<f32, [32, 48]>, Tensor<f32, [32, 48]>) { let h = matmul(x, w) + b; (relu(h), h * 2.0) }""") == 0
    # two operands of the result's size: recomputing would read twice the bytes
    assert _copies("""fn f(x: Tensor<f32, [64, 64]>, y: Tensor<f32, [64, 64]>) -> (Tensor<f32, [64, 64]>, Tensor<f32, [64, 64]>)
        { let s = x + y; (exp(s), s * 3.0) }""") == 0
    # a body of more than MAX_BODY_OPS operations
    assert _copies("""fn f(x: Tensor<f32, [64, 64]>) -> (Tensor<f32, [64, 64]>, Tensor<f32, [64, 64]>)
        { let e = exp(x - max(x, axis=1, keepdims=true)); (e * 2.0, e + 1.0) }""") == 0
    # one user: fusion alone
    assert _copies("fn f(x: Tensor<f32, [64, 64]>) -> Tensor<f32, [64, 64]> { exp(x - max(x, axis=1, keepdims=true)) }") == 0


def test_a_narrower_result_is_not_recomputed_from_wider_elements():
    """A relu's mask (bytes from f32 values) is cheaper to read back than to recompute."""
    from mlir import ir

    from mind.compiler.backend.linalg.recompute import _cheap
    src = """fn f(x: Tensor<f32, [64, 64]>) -> (Tensor<bool, [64, 64]>, Tensor<f32, [64, 64]>)
        { let h = x * 2.0; let k = h > 0.0; (k, h) }"""
    from mind.compiler.backend.linalg.emit import emit_mlir
    from mind.compiler.backend.linalg.payload import ops_named
    text, _name = emit_mlir(mind._function_of(src, "f"), {})
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(text)
        narrow = [op for op in ops_named(m, "linalg.generic") if "i8" in str(op.results[0].type)
                  or "i1" in str(op.results[0].type)]
        assert narrow and not any(_cheap(op.operation) for op in narrow)


@pytest.mark.parametrize("cpu", ["host", "x86-64-v3"])
@pytest.mark.parametrize("src", [LOG_SOFTMAX, LAYER_NORM])
def test_recomputed_kernels_are_bit_identical(monkeypatch, cpu, src):
    """The copies compute the same operations on the same values: the kernel's results equal, bit
    for bit, those of the kernel compiled without them, and the reference within its bounds."""
    import mind.compiler.backend.cpu.lowering as lowering
    fn = mind._function_of(src, "f")
    rng = np.random.default_rng(3)
    args = [(rng.standard_normal(p.type.shape) * 4).astype(np.float32) for p in fn.params]
    with_copies = mind.compile(src, cpu=cpu, cache=False)(*args)
    monkeypatch.setattr(lowering, "recompute_cheap_producers", lambda module: 0)
    without = mind.compile(src, cpu=cpu, cache=False)(*args)
    np.testing.assert_array_equal(with_copies, without)
    np.testing.assert_allclose(with_copies, mind.compile(src, backend="reference")(*args), rtol=1e-4, atol=1e-5)
