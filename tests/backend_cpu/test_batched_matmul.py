"""Batched matmul as one named op (``linalg.batch_matmul``): through the prebuilt GEMM (one call per
matrix, the batch split across threads, its matrices split by rows where the batch does not share
evenly, or each matrix split by the threaded driver; a rhs shared
by the batch: one GEMM over the batch's rows), or scheduled
(``matmul="schedule"``, integers), against NumPy; operands that are views (a transpose's result, a
slice) and results that feed other ops."""

from __future__ import annotations

import re

import numpy as np
import pytest

import mind
from mind.compiler.backend.cpu.vector_unit import runs_isa


def T(dt: str, *shape: int) -> str:
    return f"Tensor<{dt}, [{', '.join(map(str, shape))}]>"


OPTIONS = [{"threads": 1}, {"threads": 2}, {"threads": 4}, {"matmul": "schedule"}, {"schedule": "all"},
           {"cpu": "generic"}]


@pytest.mark.parametrize("dt", ["f32", "f64", "i32"])
@pytest.mark.parametrize("shape", [(3, 5, 7, 9), (2, 64, 48, 33), (5, 32, 16, 64)])
def test_batched_matmul_matches_numpy(dt, shape):
    b, m, k, n = shape
    npdt = {"f32": np.float32, "f64": np.float64, "i32": np.int32}[dt]
    rng = np.random.default_rng(sum(shape))
    x, y = ((rng.standard_normal(s) * 3).astype(npdt) for s in ((b, m, k), (b, k, n)))
    src = f"fn f(a: {T(dt, b, m, k)}, b: {T(dt, b, k, n)}) -> {T(dt, b, m, n)} {{ matmul(a, b) }}"
    want = np.matmul(x.astype(np.float64), y.astype(np.float64))
    for opts in OPTIONS:
        got = mind.compile(src, **opts)(x, y)
        if dt == "i32":
            assert np.array_equal(got, np.matmul(x, y)), opts
        else:
            np.testing.assert_allclose(got, want, rtol=1e-4 if dt == "f32" else 1e-12, atol=1e-3, err_msg=str(opts))


@pytest.mark.parametrize("opts", OPTIONS[:3])
def test_attention_transposed_and_sliced_operands(opts):
    """softmax(q kᵀ) v with k transposed and v a strided slice: views the GEMM's helper copies."""
    src = (f"fn f(q: {T('f32', 4, 24, 16)}, k: {T('f32', 4, 24, 16)}, v: {T('f32', 4, 24, 40)}) -> {T('f32', 4, 24, 20)} {{\n"
           f"  let s = matmul(q, transpose(k, permutation=[0, 2, 1])) * 0.25;\n"
           f"  matmul(softmax(s, axis=-1), slice_stride(v, 2, 0, 40, 2))\n}}")
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((4, 24, 16), (4, 24, 16), (4, 24, 40)))
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 2, 1) * 0.25
    e = np.exp(s - s.max(-1, keepdims=True))
    want = (e / e.sum(-1, keepdims=True)) @ v[:, :, ::2]
    np.testing.assert_allclose(mind.compile(src, **opts)(q, k, v), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("xs,ys", [((1, 1, 1), (1, 1)), ((3, 4, 5), (5, 2)), ((4, 5), (3, 5, 2)),
                                   ((1, 4, 5), (3, 5, 2)), ((2, 1, 4, 5), (3, 5, 2))])
def test_broadcast_batches_match_numpy(xs, ys):
    """Operands of other ranks or broadcast batches (the random program that once reached the named
    op with a rank-2 rhs: f32[1, 1, 1] @ f32[1, 1])."""
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ys).astype(np.float32)
    out = np.matmul(x, y).shape
    src = f"fn f(a: {T('f32', *xs)}, b: {T('f32', *ys)}) -> {T('f32', *out)} {{ matmul(a, b) }}"
    for opts in OPTIONS:
        np.testing.assert_allclose(mind.compile(src, **opts)(x, y), np.matmul(x, y), rtol=1e-5, atol=1e-5,
                                   err_msg=str(opts))


_BATCHES = [  # several batch dims, broadcast ones, a matrix times a batch, dims of 1
    ((2, 3, 16, 8), (2, 3, 8, 24)), ((4, 1, 6, 9), (1, 3, 9, 5)), ((7, 5), (3, 5, 6)), ((3, 4, 5, 6), (6, 7)),
    ((2, 1, 3, 4, 5), (3, 5, 2)), ((1, 1, 4, 5), (2, 3, 5, 6)), ((2, 3, 4, 5), (1, 3, 5, 6)),
    ((5, 1, 2, 3), (4, 3, 7)), ((1, 2, 9, 4), (4, 3)),
    ((7, 5), (1, 5, 6)), ((1, 1, 4, 5), (1, 5, 3)),  # batch dims all 1: one GEMM (autodiff's gather VJP)
    ((3, 4, 5), (1, 1, 5, 6)), ((2, 1, 3, 4, 5), (1, 3, 5, 6))]  # fewer batch dims than the result's


@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("xs,ys", _BATCHES, ids=lambda s: "x".join(map(str, s)))
def test_matmuls_of_any_batch_dims_call_the_gemm(dt, xs, ys):
    """Several batch dims, or batch dims that broadcast, are one ``linalg.contract``
    (``lowerings._contract``) that the library computes: its batch dims collapsed, a broadcast
    operand copied out to the result's batch (or, all 1, shared), then the batched GEMMs
    (``library_calls._contract_helper``); as one generic they ran at 0.14-0.37x torch eager's speed.
    Each matrix of the result is bit for bit the 2-D GEMM's of its two matrices, at 1 and 2 threads."""
    from mind.compiler.backend.cpu.api import emit_stage
    from mind.compiler.frontend.api import compile_source

    npdt = {"f32": np.float32, "f64": np.float64}[dt]
    rng = np.random.default_rng(sum(xs) + sum(ys))
    x, y = rng.standard_normal(xs).astype(npdt), rng.standard_normal(ys).astype(npdt)
    out = np.matmul(x, y).shape
    src = f"fn f(a: {T(dt, *xs)}, b: {T(dt, *ys)}) -> {T(dt, *out)} {{ matmul(a, b) }}"
    m, k, n = xs[-2], xs[-1], ys[-1]
    one = mind.compile(f"fn f(a: {T(dt, m, k)}, b: {T(dt, k, n)}) -> {T(dt, m, n)} {{ matmul(a, b) }}", threads=1)
    xb, yb = np.broadcast_to(x, out[:-2] + (m, k)), np.broadcast_to(y, out[:-2] + (k, n))
    for threads in (1, 2):
        got = mind.compile(src, threads=threads)(x, y)
        for idx in np.ndindex(*out[:-2]):
            assert np.array_equal(got[idx], one(np.ascontiguousarray(xb[idx]), np.ascontiguousarray(yb[idx]))), idx
        llvm_ir = emit_stage(compile_source(src), "llvm", threads=threads)
        assert f"@mind_gemm_{dt}" in llvm_ir


@pytest.mark.parametrize("dt", ["f32", "f64", "i32"])
@pytest.mark.parametrize("xs,ys", [((6, 17, 9), (9, 20)), ((3, 64, 32), (32, 48))])
def test_batch_times_one_matrix(dt, xs, ys):
    """[B, M, K] @ [K, N]: one batch_matmul whose rhs is shared by the batch (a linear layer)."""
    npdt = {"f32": np.float32, "f64": np.float64, "i32": np.int32}[dt]
    rng = np.random.default_rng(3)
    x, y = ((rng.standard_normal(s) * 3).astype(npdt) for s in (xs, ys))
    out = np.matmul(x, y).shape
    src = f"fn f(a: {T(dt, *xs)}, b: {T(dt, *ys)}) -> {T(dt, *out)} {{ matmul(a, b) }}"
    for opts in OPTIONS:
        got = mind.compile(src, **opts)(x, y)
        if dt == "i32":
            assert np.array_equal(got, np.matmul(x, y)), opts
        else:
            np.testing.assert_allclose(got, np.matmul(x.astype(np.float64), y.astype(np.float64)),
                                       rtol=1e-4 if dt == "f32" else 1e-12, atol=1e-3, err_msg=str(opts))


@pytest.mark.parametrize("threads", [1, 2])
def test_batch_times_one_matrix_is_one_gemm(threads):
    """[B, M, K] @ [K, N] through the library is one GEMM over the batch's B * M rows: its threads
    split those rows (the threaded driver, no fork per batch) and each block of B is packed once,
    not once per matrix; each output's sum is the 2-D GEMM's, so the values are bit for bit those of
    the same rows as one matrix."""
    from mind.compiler.backend.cpu.api import emit_stage
    from mind.compiler.frontend.api import compile_source

    (b, m, k), n = (8, 64, 128), 96
    src = f"fn f(a: {T('f32', b, m, k)}, w: {T('f32', k, n)}) -> {T('f32', b, m, n)} {{ matmul(a, w) }}"
    flat = f"fn f(a: {T('f32', b * m, k)}, w: {T('f32', k, n)}) -> {T('f32', b * m, n)} {{ matmul(a, w) }}"
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((b, m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    got = mind.compile(src, threads=threads)(x, y)
    assert np.array_equal(got.reshape(b * m, n), mind.compile(flat, threads=threads)(x.reshape(b * m, k), y))
    if threads > 1:
        llvm_ir = emit_stage(compile_source(src), "llvm", threads=threads)
        assert "@mind_gemm_f32_parallel(" in llvm_ir and "fork_call" not in llvm_ir


def test_batch_parts_even_out_the_threads_shares():
    """``library_calls.batch_parts``: a batch that does not divide among the threads is split by rows
    into whole register tiles where that shortens the longest thread's share by a tenth and saves
    more than a fork and join; never below the GEMM's packing thresholds where the whole matrix
    packs B; a strided_rhs GEMM (B always packed) has no threshold."""
    from mind.compiler.backend.cpu.library_calls import batch_parts
    v4 = "x86-64-v4"
    assert batch_parts(v4, "f32", (5, 224, 27, 240), 2) == (2, 114)  # 3 matrices' time -> 2.5
    assert batch_parts(v4, "f32", (3, 32, 80, 243), 2) == (2, 18)  # rows 18 and 14
    assert batch_parts(v4, "f32", (3, 32, 80, 243), 16) == (3, 12)
    assert batch_parts(v4, "f32", (8, 64, 80, 96), 2) == (1, 64)  # even: nothing to gain
    assert batch_parts(v4, "f32", (19, 63, 20, 146), 2) == (1, 63)  # 10 -> 9.5: under a tenth
    assert batch_parts(v4, "f32", (5, 28, 28, 19), 2) == (1, 28)  # saves less than a fork and join
    # 38 row tiles pack a B of aligned rows (320 columns, whole tiles): halves of 19 would read it in
    # place; one of unaligned rows (300 columns) is packed from 16 tiles, so its halves pack it too;
    # and so is a strided_rhs B, always
    assert batch_parts(v4, "f32", (5, 228, 320, 128), 2) == (1, 228)
    assert batch_parts(v4, "f32", (5, 228, 300, 128), 2) == (2, 114)
    assert batch_parts(v4, "f32", (5, 228, 320, 128), 2, "strided_rhs") == (2, 114)
    assert batch_parts(v4, "f32", (7, 100, 100, 100), 2) == (1, 100)  # 17 tiles pack it, 9 would not
    assert batch_parts("x86-64-v3", "f32", (5, 224, 27, 240), 2) == (1, 224)  # AVX2's tile: 16 columns


@pytest.mark.skipif(not runs_isa("x86-64-v4"), reason="the host does not run x86-64-v4 (AVX-512) code: "
                    "the split is decided and checked with AVX-512's register tiles")
@pytest.mark.parametrize("shape,transposed,threads", [((5, 224, 240, 27), False, 2), ((3, 32, 243, 80), False, 2),
                                                      ((3, 358, 106, 358), True, 2), ((7, 40, 64, 100), False, 3),
                                                      ((5, 59, 200, 61), True, 3)])
def test_batched_matmul_split_by_rows_is_exact(shape, transposed, threads, monkeypatch):
    """Matrices split into row blocks among the threads (``batch_parts``, the last block shorter):
    the helper's forall runs over batch x parts units, and every output element is the same call's
    sum as without the split, so the values are bit for bit those of one thread."""
    from mind.compiler.backend.cpu import lowering
    from mind.compiler.backend.cpu.library_calls import batch_parts

    b, m, k, n = shape
    parts = batch_parts("x86-64-v4", "f32", (b, m, n, k), threads, "strided_rhs" if transposed else "")[0]
    assert parts > 1
    helpers: list[str] = []
    insert = lowering.insert_library_calls

    def spy(module, isa, threads_):
        calls = insert(module, isa, threads_)
        helpers.append(str(module))
        return calls
    monkeypatch.setattr(lowering, "insert_library_calls", spy)
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal((b, m, k)).astype(np.float32)
    y = rng.standard_normal((b, n, k) if transposed else (b, k, n)).astype(np.float32)
    rhs, body = ((T("f32", b, n, k), "matmul(a, transpose(w, permutation=[0, 2, 1]))") if transposed
                 else (T("f32", b, k, n), "matmul(a, w)"))
    src = f"fn f(a: {T('f32', b, m, k)}, w: {rhs}) -> {T('f32', b, m, n)} {{ {body} }}"
    one = mind.compile(src, threads=1, cpu="x86-64-v4")(x, y)
    split = mind.compile(src, threads=threads, cpu="x86-64-v4")(x, y)
    assert re.search(rf"scf\.forall \(%\w+\) in \({b * parts}\)", helpers[-1])
    assert np.array_equal(split, one)
    want = np.matmul(x.astype(np.float64), (y.transpose(0, 2, 1) if transposed else y).astype(np.float64))
    np.testing.assert_allclose(one, want, rtol=1e-4, atol=1e-4)


def test_every_contraction_form_is_one_the_library_takes():
    """Every pair of batch shapes the emitter writes as a ``linalg.contract`` (ranks 2-5, dims of 1
    and more, broadcast both ways, fewer batch dims than the result's) is one ``contract_form`` and
    ``eligible_matmul`` accept: a contraction they did not take would be scalar loops (the one-hot
    ``[n, m] @ [1, m, q]`` once was, 1.2 s), one whose maps did not fit its operands would not parse
    (``[3, 4, 5] @ [1, 1, 5, 6]`` once did not); and each compiled, at two threads, matches NumPy."""
    import itertools

    from mlir import ir

    from mind.compiler.backend.cpu.api import emit_cpu_mlir
    from mind.compiler.backend.cpu.library_calls import eligible_matmul
    from mind.compiler.backend.linalg.context import new_context
    from mind.compiler.frontend.api import compile_source

    batches = [(), (1,), (3,), (1, 1), (2, 1), (1, 3), (2, 3), (1, 1, 1), (2, 1, 3), (1, 2, 3)]
    seen = 0
    for ba, bb in itertools.product(batches, batches):
        try:
            out = np.broadcast_shapes(ba, bb)
        except ValueError:
            continue
        if not out:
            continue
        src = f"fn f(a: {T('f32', *ba, 4, 5)}, b: {T('f32', *bb, 5, 6)}) -> {T('f32', *out, 4, 6)} {{ matmul(a, b) }}"
        text, _ = emit_cpu_mlir(compile_source(src).functions[0], {}, "x86-64-v4")
        with new_context(), ir.Location.unknown():
            module = ir.Module.parse(text)
            found: list = []
            module.operation.walk(lambda op: (found.append(op) if op.name in (
                "linalg.matmul", "linalg.batch_matmul", "linalg.contract") else None, ir.WalkResult.ADVANCE)[1])
            assert len(found) == 1 and eligible_matmul(found[0], "x86-64-v4") == "f32", (ba, bb)
            seen += found[0].name == "linalg.contract"
        rng = np.random.default_rng(len(ba) * 7 + len(bb))
        x, y = rng.standard_normal((*ba, 4, 5)), rng.standard_normal((*bb, 5, 6))
        got = mind.compile(src.replace("f32", "f64"), threads=2)(x, y)
        np.testing.assert_allclose(got, np.matmul(x, y), rtol=1e-13, atol=1e-13, err_msg=str((ba, bb)))
    assert seen > 50


@pytest.mark.parametrize("threads", [1, 2])
def test_the_gather_vjp_contraction_calls_the_gemm(threads):
    """Autodiff writes the gradient of a gather (an embedding's) as a one-hot ``[n, m]`` matrix times
    the gradient reshaped to ``[1, m, q]``: batch dims all 1 on the right, none on the left.  That
    contraction calls the GEMM (it was one generic, 182 ms for a 5000x256 table and 1024 indices;
    0.13x torch eager's scatter-add now, 15.5 ms), with the reference's values."""
    from mind.calling import run_reference
    from mind.compiler.backend.cpu.api import emit_stage
    from mind.compiler.frontend.api import compile_source

    src = (f"fn f(e: {T('f32', 300, 24)}, i: {T('i32', 64)}, w: {T('f32', 64, 24)}) -> {T('f32', 300, 24)} "
           "{ grad(|e| sum(gather(e, i, axis=0) * w))(e) }")
    rng = np.random.default_rng(9)
    args = [rng.standard_normal((300, 24)).astype(np.float32), rng.integers(-5, 305, 64).astype(np.int32),
            rng.standard_normal((64, 24)).astype(np.float32)]
    got = mind.compile(src, threads=threads)(*args)
    want = run_reference(compile_source(src).functions[0], args)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert "@mind_gemm_f32" in emit_stage(compile_source(src), "llvm", threads=threads)


def test_a_batch_whose_threads_would_not_save_a_fork_runs_in_turn():
    """The batched helper puts its matrices on the threads only when their GEMMs' one-thread time
    saves at least a fork and join (``BATCH_FORK_GAIN``): six 8x8 matrices (a 2x3 batch too) run in
    turn on the calling thread (7.9 -> 3.4 µs), sixteen 64x64 on the threads; the values are the
    same either way."""
    from mind.compiler.backend.cpu.api import emit_stage
    from mind.compiler.frontend.api import compile_source

    def program(batch, n):
        return f"fn f(a: {T('f32', *batch, n, n)}, b: {T('f32', *batch, n, n)}) -> {T('f32', *batch, n, n)} {{ matmul(a, b) }}"
    for batch, n, forks in (((6,), 8, False), ((2, 3), 8, False), ((16,), 64, True)):
        src = program(batch, n)
        assert ("fork_call" in emit_stage(compile_source(src), "llvm", threads=2)) == forks, (batch, n)
        rng = np.random.default_rng(n)
        x, y = (rng.standard_normal((*batch, n, n)).astype(np.float32) for _ in range(2))
        assert np.array_equal(mind.compile(src, threads=2)(x, y), mind.compile(src, threads=1)(x, y))
