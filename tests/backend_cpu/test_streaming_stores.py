"""Streaming stores for the results of large transposes (``compiler/backend/cpu/streaming_stores.py``):
which kernels take them, that the rewrite turns only whole-vector writes into a marked parameter,
and that the results are exact whatever the alignment of the array they are written into."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mind.compiler.backend.cpu.api import compile_function, emit_stage
from mind.calling import run_reference
from mind.compiler.backend.cpu import lowering
from mind.compiler.backend.cpu.streaming_stores import (STREAMING_ATTR, STREAMING_RESULT_BYTES,
                                                          TRANSPOSED_STREAMING_BYTES, stream_marked_results)
from mind.compiler.backend.linalg.context import Diagnostics, new_context, parse
from mind.compiler.frontend.api import compile_source
from levels import needs_level

NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32}
V4, V3 = "x86-64-v4", "x86-64-v3"


def T(dt: str, shape: tuple[int, ...]) -> str:
    return f"Tensor<{dt}, [{', '.join(map(str, shape))}]>"


def _transpose(dt: str, shape: tuple[int, ...], perm: tuple[int, ...], tail: str = "") -> str:
    out = tuple(shape[p] for p in perm)
    return (f"fn f(x: {T(dt, shape)}) -> {T(dt, out)} "
            f"{{ transpose(x, permutation=[{', '.join(map(str, perm))}]){tail} }}")


def _streaming(src: str, cpu: str) -> tuple[int, int]:
    """(non-temporal stores, fences) in the kernel's LLVM IR on two threads (a skip where the host does
    not run ``cpu``)."""
    needs_level(cpu)
    llvm_ir = emit_stage(compile_source(src).functions[0], "llvm", threads=2, cpu=cpu)
    return llvm_ir.count("!nontemporal"), len(re.findall(r"call void @llvm\.x86\.sse\.sfence\(\)", llvm_ir))


def _misaligned(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """A C-contiguous array of ``shape`` whose data starts one element past a 64-byte boundary."""
    n = int(np.prod(shape))
    itemsize = np.dtype(dtype).itemsize
    buf = np.zeros(n + 64 // itemsize + 1, dtype)
    skip = (-(buf.ctypes.data // itemsize) + 1) % (64 // itemsize)
    out = buf[skip:skip + n].reshape(shape)
    assert out.ctypes.data % 64 == itemsize
    return out


@pytest.mark.parametrize("dt,shape,perm,tail,stores", [
    ("f32", (2048, 1024), (1, 0), "", 16),
    ("f32", (64, 256, 128), (0, 2, 1), "", 16),
    ("f32", (32, 256, 256), (2, 1, 0), " * 2.0", 16),
    ("f64", (1024, 1024), (1, 0), "", 8),
    ("i32", (1024, 2048), (1, 0), "", 16),
])
def test_large_transposes_stream_their_result(dt, shape, perm, tail, stores):
    """A transpose of at least ``TRANSPOSED_STREAMING_BYTES`` into the out-parameter: its tile's writes
    are non-temporal stores (one per row of the 16 x 16 or 8 x 8 tile) and each thread fences them;
    the results are exact on 1 and 2 threads, in a fresh output, an aligned ``out=`` and one that
    is not aligned (whose writes take the ordinary stores)."""
    assert STREAMING_RESULT_BYTES > int(np.prod(shape)) * np.dtype(NP[dt]).itemsize >= TRANSPOSED_STREAMING_BYTES
    src = _transpose(dt, shape, perm, tail)
    assert _streaming(src, V4) == (stores, 1)
    x = (np.random.default_rng(len(shape)).standard_normal(shape) * 100).astype(NP[dt])
    want = x.transpose(perm) * (2 if tail else 1)
    fn = compile_source(src).functions[0]
    for threads in (1, 2):
        run = compile_function(fn, threads=threads, cpu=V4, cache=False)
        np.testing.assert_array_equal(run([x])[0], want)
        aligned = run([x])[0]  # a pooled buffer: 64-byte aligned
        assert aligned.ctypes.data % 64 == 0
        for out in (aligned, _misaligned(want.shape, NP[dt])):
            out[...] = 0
            run([x], out=[out])
            np.testing.assert_array_equal(out, want)


_SOFTMAX = "fn f(x: {t}) -> {t} {{ softmax(x, axis=-1) }}"
_RMS_NORM = "fn f(x: {t}) -> {t} {{ x / sqrt(mean(x * x, axis=-1, keepdims=true) + 0.00001) }}"
_CHAIN = "fn f(x: {t}) -> {t} {{ exp(x * 0.5) * 2.0 + 1.0 }}"


@pytest.mark.parametrize("cpu,dt,shape,program", [
    (V4, "f32", (4096, 1024), _SOFTMAX), (V4, "f64", (2048, 1024), _SOFTMAX), (V4, "f32", (4096, 1024), _RMS_NORM),
    (V4, "f32", (64, 64, 1024), _CHAIN), (V3, "f32", (4096, 1024), _SOFTMAX), (V3, "f32", (4096, 1024), _RMS_NORM),
])
def test_large_results_written_whole_stream(cpu, dt, shape, program, monkeypatch):
    """Any result of at least ``STREAMING_RESULT_BYTES`` in rows of whole lines, written and never
    read back by its kernel, streams, on AVX-512 and AVX2 (whose tile rows are several vectors):
    the softmax's block then keeps its exps in its own buffer (its output rows are not read back:
    one allocation more than without streaming).  Bits as without streaming, on 1 and 2 threads, in
    an aligned and a misaligned output; within the reference's bound."""
    assert int(np.prod(shape)) * np.dtype(NP[dt]).itemsize >= STREAMING_RESULT_BYTES
    src = program.format(t=T(dt, shape))
    fn = compile_source(src).functions[0]
    stores, fences = _streaming(src, cpu)
    assert stores >= 1 and fences == 1
    allocations = len(re.findall(r"@__mind_alloc\(", emit_stage(fn, "llvm", threads=2, cpu=cpu)))
    monkeypatch.setattr(lowering, "mark_streaming_results", lambda module, unit: 0)
    plain = compile_source(src + " ").functions[0]
    if program == _SOFTMAX:
        assert len(re.findall(r"@__mind_alloc\(", emit_stage(plain, "llvm", threads=2, cpu=cpu))) == allocations - 1
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(NP[dt])
    x.flat[::97] = np.inf
    x.flat[7::103] = np.nan
    want = compile_function(plain, threads=2, cpu=cpu, cache=False)([x])[0]
    np.testing.assert_allclose(want, run_reference(fn, [x])[0], rtol=2e-6 if dt == "f32" else 1e-14, atol=0)
    for threads in (1, 2):
        run = compile_function(fn, threads=threads, cpu=cpu, cache=False)
        np.testing.assert_array_equal(run([x])[0], want)
        out = _misaligned(want.shape, NP[dt])
        run([x], out=[out])
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("src,cpu", [
    (_transpose("f32", (1024, 1024), (1, 0)), V4),                    # 4 MiB: the result stays in cache
    (_transpose("f64", (1500, 1500), (1, 0)), V4),                    # result rows of 12000 bytes
    (_transpose("f32", (2056, 1024), (1, 0)), V4),                    # rows of 8224 bytes
    (_transpose("f32", (2048, 2048), (1, 0)), V3),                    # AVX2: a tile row is half a line
    (f"fn f(x: {T('f32', (2048, 1024))}) -> {T('f32', (2048, 1024))} {{ x * 2.0 + 1.0 }}", V4),  # 8 MiB
    (_SOFTMAX.format(t=T("f32", (4096, 1000))), V4),                  # rows of 4000 bytes
    (f"fn f(x: {T('f32', (2048, 2048))}) -> {T('f32', (2048,))} {{ sum(transpose(x), axis=1) }}", V4),
    (f"fn f(a: {T('f32', (2048, 256))}, b: {T('f32', (256, 2048))}) -> {T('f32', (2048, 2048))} "
     f"{{ matmul(a, b) }}", V4),                                       # the GEMM's C, read and written
])
def test_other_kernels_keep_ordinary_stores(src, cpu):
    """Small results, rows that are not whole lines, an AVX2 transpose, a result the transpose does
    not write, and a matmul's result (which the GEMM reads back) take no streaming stores and no
    fence."""
    assert _streaming(src, cpu) == (0, 0)


_LOOPS = """\
func.func @f(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %m: vector<16xi1>) attributes {{{attr}}} {{
  %f0 = arith.constant 0.0 : f32
  %v = arith.constant dense<1.0> : vector<16xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c16 = arith.constant 16 : index
  %c64 = arith.constant 64 : index
  %w = arith.constant dense<1.0> : vector<32xf32>
  %h = arith.constant dense<1.0> : vector<8xf32>
  scf.for %i = %c0 to %c64 step %c16 {{
    %s = memref.subview %b[%i, 0] [16, 64] [1, 1] : memref<64x64xf32> to memref<16x64xf32, strided<[64, 1], offset: ?>>
    vector.transfer_write %v, %s[%c0, %c0] {{in_bounds = [true]}} : vector<16xf32>, memref<16x64xf32, strided<[64, 1], offset: ?>>
    vector.transfer_write %v, %s[%c1, %c16] {{in_bounds = [true]}} : vector<16xf32>, memref<16x64xf32, strided<[64, 1], offset: ?>>
    vector.transfer_write %v, %s[%c1, %c0], %m {{in_bounds = [true]}} : vector<16xf32>, memref<16x64xf32, strided<[64, 1], offset: ?>>
    vector.transfer_write %v, %s[%c1, %c0] : vector<16xf32>, memref<16x64xf32, strided<[64, 1], offset: ?>>
    vector.transfer_write %h, %s[%c1, %c0] {{in_bounds = [true]}} : vector<8xf32>, memref<16x64xf32, strided<[64, 1], offset: ?>>
    vector.transfer_write %w, %s[%c2, %c0] {{in_bounds = [true]}} : vector<32xf32>, memref<16x64xf32, strided<[64, 1], offset: ?>>
    vector.maskedstore %b[%i, %c16], %m, %v : memref<64x64xf32>, vector<16xi1>, vector<16xf32>
    %r = vector.transfer_read %a[%i, %c16], %f0 {{in_bounds = [true]}} : memref<64x64xf32>, vector<16xf32>
    vector.transfer_write %r, %a[%i, %c0] {{in_bounds = [true]}} : vector<16xf32>, memref<64x64xf32>
  }}
  return
}}
"""


@pytest.mark.parametrize("attr,turned,tests", [(f"{STREAMING_ATTR} = [1]", 3, 2), (f"{STREAMING_ATTR} = [0]", 0, 0),
                                               ("", 0, 0)])
def test_only_whole_vector_writes_into_a_marked_parameter_stream(attr, turned, tests):
    """In hand-written loops: the three unmasked in-bounds writes of whole lines (one and two) into
    the marked parameter's view become aligned non-temporal stores under an alignment test, with
    one fence after the loop; the masked writes (a masked transfer and a ``vector.maskedstore``,
    which the parameter's writes-only check takes for the write it is), the one that may run out of
    bounds, the half-line vector and the writes into another parameter stay as they are.  The first two, with nothing but
    pure ops between them, share one test (the masked write ends their run).  A marked parameter
    that the kernel also reads keeps its ordinary writes.  The attribute is cleared."""
    ctx = new_context()
    diags = Diagnostics(ctx)
    try:
        with ctx:
            module = parse(ctx, _LOOPS.format(attr=attr), "parse", diags)
            assert stream_marked_results(module) == turned
            text = str(module)
            assert module.operation.verify()
            body = [op.operation.name for op in module.body.operations[0].regions[0].blocks[0].operations]
    finally:
        diags.detach()
    assert STREAMING_ATTR not in text
    assert text.count("nontemporal = true") == turned
    assert text.count("alignment = 64") == turned
    assert text.count("scf.if") == tests
    assert text.count("vector.transfer_write") == 7  # the ordinary path of each turned write kept
    assert text.count('"llvm.x86.sse.sfence"') == (1 if turned else 0)
    assert body[body.index("scf.for") + 1] == ("llvm.call_intrinsic" if turned else "func.return")


def test_only_x86_code_streams(monkeypatch):
    """The fence is an SSE instruction: code for the host streams only where the host is x86-64;
    code for a named x86-64 level streams on any host."""
    from mind.compiler.backend.cpu import host
    from mind.compiler.backend.cpu.streaming_stores import targets_x86
    assert targets_x86(V4) and targets_x86(V3) and targets_x86("generic")
    monkeypatch.setattr(host, "is_x86_64", lambda: False)
    assert not targets_x86("host") and targets_x86(V4)
    monkeypatch.setattr(host, "is_x86_64", lambda: True)
    assert targets_x86("host")
