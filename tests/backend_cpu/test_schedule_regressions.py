"""Miscompiles of the tiling schedule, each as the smallest program that showed it.

Every test compiles with the schedule (the default), asserts that the kernel was scheduled, and
compares with the reference interpreter.  The root causes are described in
``compiler/backend/cpu/transforms.py`` (module docstring, ``untie_shared_inits``,
``_vectorizable_reduction``).
"""

from __future__ import annotations

import numpy as np
import pytest

from mind.compiler.backend.cpu.api import compile_function
from mind.compiler.backend.cpu.cache import KernelCache
from mind.ir.parser import parse_module
from mind.calling import run_reference, select_function


def _fn(text: str):
    return select_function(parse_module(text, "t"), None)


def _check(text: str, args: list[np.ndarray], rtol: float = 0.0, matmul: str = "schedule") -> list[np.ndarray]:
    fn = _fn(text)
    run = compile_function(fn, threads=1, cache=False, matmul=matmul)
    got = run(args)
    kernel = next(iter(run._kernels.values()))
    assert kernel.scheduled or (matmul == "library" and kernel.matmul_library)
    want = run_reference(fn, args)
    for g, w in zip(got, want):
        if rtol:
            np.testing.assert_allclose(g, w, rtol=rtol)
        else:
            np.testing.assert_array_equal(g, w)
    return got


def test_shared_fill_init_of_two_results():
    # cse merged the two zero fills (matmul init, reduce_sum init); eliminate-empty-tensors then
    # made the reduction compute in the matmul's out-parameter, overwritten by the matmul result
    # (got 0 instead of 1 for %5)
    _check("func @main(%x: i32[1]) -> (i32[1, 1], i32[1, 1], i32[1, 1]) {\n"
           "  %0 = const {value = [[0]]} : i32[1, 1]\n"
           "  %1 = reshape(%x) {shape = [1, 1]} : i32[1, 1]\n"
           "  %2 = matmul(%1, %0) : i32[1, 1]\n"
           "  %4 = const {value = [[1]]} : i32[1, 1]\n"
           "  %5 = reduce_sum(%4) {axes = [], keepdims = false} : i32[1, 1]\n"
           "  return %0, %2, %5\n}\n", [np.array([1], np.int32)])


@pytest.mark.parametrize("matmul", ["schedule", "library"])
def test_shared_fill_init_of_two_matmuls(matmul):
    # two (unscheduled, 2x2) matmuls share one cse'd zero fill: the second result came out equal
    # to the first (3 instead of 6).  With the prebuilt GEMM, the fill in front of a call is dropped
    # (the call overwrites its output) only where it fills that very buffer.
    a, b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    got = _check("func @main(%a: f32[2, 3], %b: f32[3, 2], %c: f32[3, 2]) -> (f32[2, 2], f32[2, 2]) {\n"
                 "  %0 = matmul(%a, %b) : f32[2, 2]\n  %1 = matmul(%a, %c) : f32[2, 2]\n"
                 "  return %0, %1\n}\n", [a, b, 2 * b], matmul=matmul)
    assert got[0][0, 0] == 3.0 and got[1][0, 0] == 6.0


def test_shared_fill_init_of_two_tiled_reductions():
    # the same with fills that are tiled (scf.for loops are not cloned by untie: the empties are
    # tagged so that the schedule's cse cannot merge them again)
    x = np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 100
    _check("func @main(%x: f32[64, 32]) -> (f32[64], f32[64]) {\n"
           "  %0 = reduce_sum(%x) {axes = [1], keepdims = false} : f32[64]\n"
           "  %1 = mul(%x, %x) : f32[64, 32]\n"
           "  %2 = reduce_sum(%1) {axes = [1], keepdims = false} : f32[64]\n"
           "  return %0, %2\n}\n", [x], rtol=1e-5)


def test_loop_invariant_reduction_counts_every_element():
    # autodiff's `mean` counts rows as reduce_sum(select(p, 1, 1)); after fusion and folding the
    # reduction body is `out + 1`, which the vectorizer added once instead of 32 times
    y = np.ones((32, 10), np.float32)
    got = _check("func @main(%y: f32[32, 10], %p: bool[32]) -> (f32[10]) {\n"
                 "  %0 = const {value = 1} : i64[]\n"
                 "  %1 = select(%p, %0, %0) : i64[32]\n"
                 "  %2 = reduce_sum(%1) {axes = [0], keepdims = false} : i64[]\n"
                 "  %3 = convert(%2) {dtype = f32} : f32[]\n"
                 "  %4 = reshape(%3) {shape = [1, 1]} : f32[1, 1]\n"
                 "  %5 = mul(%4, %y) : f32[32, 10]\n"
                 "  %6 = reduce_sum(%5) {axes = [0], keepdims = false} : f32[10]\n"
                 "  return %6\n}\n", [y, np.ones(32, bool)])
    assert got[0][0] == 1024.0


def test_reduce_sum_of_splat_constant():
    # the splat is folded into the body as a scalar constant: same loop-invariant reduction
    from mind.ir.builder import FunctionBuilder
    from mind.spec.dtypes import DType
    from mind.spec.ops import TensorType

    b = FunctionBuilder("main")
    x = b.param("x", TensorType(DType.F32, (32, 16)))
    c = b.const(np.full((32, 16), 2.0, np.float32), DType.F32)
    s = b.emit("reduce_sum", c, axes=(0,), keepdims=False)
    y = b.emit("add", x, c)
    fn = b.finish([s, y])
    run = compile_function(fn, threads=1, cache=False)
    xs = np.ones((32, 16), np.float32)
    got = run([xs])
    assert next(iter(run._kernels.values())).scheduled
    np.testing.assert_array_equal(got[0], np.full(16, 64.0, np.float32))
    np.testing.assert_array_equal(got[1], xs + 2.0)


# A result that is a strided view of an input (a slice returned as it is) is copied into its
# out-parameter by ``memref.copy``, which MLIR lowers to a call of ``memrefCopy`` from its C runner
# library.  No library provided it: the JIT bound it to address 0 and the first call crashed the
# process (found by the differential test: a slice returned next to an identity reduce_sum); a cached
# .so failed to load.  ``runtime.link_runtime`` now defines it in the kernel's module.
_VIEW_PROGRAMS = {
    "rank1": ("func @main(%x: {t}[16]) -> ({t}[5]) {{\n"
              "  %0 = slice(%x) {{start = [3], stop = [8], step = [1]}} : {t}[5]\n  return %0\n}}\n", (16,)),
    "rank2_twice": ("func @main(%x: {t}[48, 64], %y: {t}[]) -> ({t}[3, 1], {t}[3, 1]) {{\n"
                    "  %0 = slice(%x) {{start = [32, 9], stop = [35, 10], step = [1, 1]}} : {t}[3, 1]\n"
                    "  %1 = reduce_sum(%0) {{axes = [], keepdims = true}} : {t}[3, 1]\n  return %0, %1\n}}\n",
                    (48, 64)),
    "rank3": ("func @main(%x: {t}[4, 6, 8]) -> ({t}[2, 3, 5]) {{\n"
              "  %0 = slice(%x) {{start = [1, 2, 3], stop = [3, 5, 8], step = [1, 1, 1]}} : {t}[2, 3, 5]\n"
              "  return %0\n}}\n", (4, 6, 8)),
    "empty": ("func @main(%x: {t}[4, 6]) -> ({t}[0, 3]) {{\n"
              "  %0 = slice(%x) {{start = [2, 1], stop = [2, 4], step = [1, 1]}} : {t}[0, 3]\n  return %0\n}}\n",
              (4, 6)),
}


@pytest.mark.parametrize("jit", ["1", "0"])
@pytest.mark.parametrize("schedule", [True, "all"])
@pytest.mark.parametrize("dtype", ["f32", "i64", "f64", "i32"])
@pytest.mark.parametrize("program", sorted(_VIEW_PROGRAMS))
def test_results_that_are_strided_views_of_inputs(program, dtype, schedule, jit, monkeypatch, tmp_path):
    monkeypatch.setenv("MIND_CPU_JIT", jit)
    text, shape = _VIEW_PROGRAMS[program]
    fn = _fn(text.format(t=dtype))
    np_dtype = np.dtype({"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64"}[dtype])
    x = (np.arange(int(np.prod(shape))).reshape(shape) * 3 - 7).astype(np_dtype)
    args = [x] + [np.zeros((), np_dtype)] * (len(fn.params) - 1)
    run = compile_function(fn, threads=1, schedule=schedule, cache=KernelCache(str(tmp_path)))
    for g, w in zip(run(args), run_reference(fn, args)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_a_kernel_needing_a_missing_function_is_an_error_not_a_crash():
    from mind.compiler.backend.cpu import codegen
    ir = ("declare void @mind_nowhere(ptr)\n"
          "define void @k(ptr %p) {\n  call void @mind_nowhere(ptr %p)\n  ret void\n}\n")
    obj = codegen.optimize_and_emit_object(ir, "host", "fast")
    with pytest.raises(codegen.CodegenError, match="mind_nowhere"):
        codegen.JitObject(obj, "host", [], ["mind_nowhere"])
    codegen.JitObject(obj, "host", [], ["malloc", "free"])  # the process provides these
