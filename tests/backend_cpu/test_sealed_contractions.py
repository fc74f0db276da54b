"""Named contractions sealed off from elementwise fusion (``linalg.sealed_contractions``): a matmul
next to a reshape (a flattened batch, an unflattened result, heads split off) stays the GEMM's
call, with the reference's values; sealing and unsealing give back the module they were given."""

from __future__ import annotations

import numpy as np
import pytest

import mind


def T(dt: str, *shape: int) -> str:
    return f"Tensor<{dt}, [{', '.join(map(str, shape))}]>"


RESHAPED = [
    # a batch flattened into the rows of a linear layer
    f"fn f(x: {T('f32', 4, 24, 48)}, w: {T('f32', 48, 40)}) -> {T('f32', 96, 40)} {{ matmul(reshape(x, [96, 48]), w) }}",
    # the rows unflattened into a batch
    f"fn f(x: {T('f32', 96, 48)}, w: {T('f32', 48, 40)}) -> {T('f32', 4, 24, 40)} {{ reshape(matmul(x, w), [4, 24, 40]) }}",
    # a projection split into heads (attention's q, k, v)
    f"fn f(x: {T('f32', 2, 24, 48)}, w: {T('f32', 48, 64)}) -> {T('f32', 2, 4, 24, 16)} "
    f"{{ transpose(reshape(matmul(x, w), [2, 24, 4, 16]), [0, 2, 1, 3]) }}",
    # heads merged back, then the output projection
    f"fn f(x: {T('f32', 2, 4, 24, 16)}, w: {T('f32', 64, 48)}) -> {T('f32', 2, 24, 48)} "
    f"{{ matmul(reshape(transpose(x, [0, 2, 1, 3]), [2, 24, 64]), w) }}",
    # a batched matmul whose result is flattened, f64
    f"fn f(a: {T('f64', 3, 20, 30)}, b: {T('f64', 3, 30, 10)}) -> {T('f64', 60, 10)} {{ reshape(matmul(a, b), [60, 10]) }}",
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("src", RESHAPED, ids=range(len(RESHAPED)))
def test_a_matmul_next_to_a_reshape_calls_the_gemm(src, threads):
    """Fusion folded the reshape into the named op, a generic contraction after that: a flattened
    batch of 8x512 rows of 768 by 768 ran 320 ms against the GEMM's 24."""
    from mind.compiler.backend.cpu.api import emit_stage
    llvm_ir = emit_stage(mind._function_of(src, "f"), "llvm", threads=threads)
    assert "call void @mind_gemm" in llvm_ir or "call void @mind_batched" in llvm_ir or "@mind_contract" in llvm_ir, \
        [line for line in llvm_ir.splitlines() if "call void" in line][:5]
    fn = mind._function_of(src, "f")
    rng = np.random.default_rng(len(src))
    args = [rng.standard_normal(p.type.shape).astype(p.type.dtype.numpy) for p in fn.params]
    got = mind.compile(src, fn="f", threads=threads, cache=False)(*args)
    want = mind.compile(src, fn="f", backend="reference")(*args)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_sealing_and_unsealing_give_back_the_module():
    from mind.compiler.backend.linalg.context import new_context, parse, Diagnostics
    from mind.compiler.backend.linalg.emit import emit_mlir
    from mind.compiler.backend.linalg.sealed_contractions import seal_contractions, unseal_contractions
    from mlir import ir
    text, name = emit_mlir(mind._function_of(RESHAPED[0], "f"), {})
    ctx = new_context()
    with ctx, ir.Location.unknown():
        module = parse(ctx, text, "parse", Diagnostics(ctx))
        before = str(module)
        assert seal_contractions(module, name) == 1
        sealed = str(module)
        assert "call @__mind_sealed_0(" in sealed and "linalg.matmul" in sealed.split("@__mind_sealed_0(%arg0")[1]
        assert module.operation.verify()
        assert unseal_contractions(module, name) == 1
        assert str(module) == before
