"""The vector unit is an input of the cost model: tiles, register blocks and the prebuilt GEMM follow
the options' ``cpu`` (AVX2 hosts get AVX2-sized tiles), and code compiled for x86-64-v3 is correct."""

from __future__ import annotations

import numpy as np
import pytest

from mind.compiler.backend.cpu.api import compile_function
from mind.compiler.backend.cpu.conv_schedule import choose_conv_tiles
from mind.compiler.backend.cpu.engine import compile_kernel, mlir_to_llvm_ir
from mind.compiler.backend.cpu.kernel_library import host_isa
from mind.compiler.backend.cpu.options import CpuOptions
from mind.compiler.backend.cpu.transforms import choose_elementwise_tiles, choose_matmul_tiles
from mind.compiler.backend.cpu.vector_unit import AVX512, VECTOR_UNITS, runs_isa, vector_unit
from mind.ir.parser import parse_module
from mind.calling import select_function

from . import kernels as K

AVX2 = VECTOR_UNITS["x86-64-v3"]
needs_avx2 = pytest.mark.skipif(host_isa() is None, reason="this host does not run x86-64-v3 code")


def test_each_cpu_option_names_its_vector_unit():
    assert (AVX2.bits, AVX2.registers) == (256, 16) and (AVX512.bits, AVX512.registers) == (512, 32)
    assert vector_unit("generic") == VECTOR_UNITS["x86-64"]
    assert vector_unit("host") == VECTOR_UNITS[host_isa() or "x86-64"]
    assert AVX2.lanes(32) == 8 and AVX2.lanes(64) == 4 and AVX512.lanes(8) == 64


def test_the_maximum_costs_three_instructions_where_kernels_get_the_vrange_rewrite():
    # the schedules read a max's cost from the unit (transforms._whole_row_tiles); the 512-bit unit
    # is the one whose kernels' LLVM IR goes through range_max (lowering), the others keep LLVM's
    # six-instruction expansion
    from mind.compiler.backend.cpu.engine import mlir_to_llvm_ir as lower
    from mind.compiler.backend.linalg.emit import emit_mlir
    fn = select_function(parse_module("func @main(%x: f32[64, 64]) -> (f32[64]) {\n"
                                      "  %0 = reduce_max(%x) {axes = [1], keepdims = false} : f32[64]\n"
                                      "  return %0\n}\n", "t"), None)
    text, name = emit_mlir(fn, {})
    for cpu in ["generic"] + [isa for isa in ("x86-64-v3", "x86-64-v4") if runs_isa(isa)]:
        llvm_ir = lower(text, name, CpuOptions.resolve(threads=1, cpu=cpu, schedule="all")).llvm_ir
        assert ("@llvm.x86.avx512.mask.range" in llvm_ir) == (vector_unit(cpu).maximum_instructions == 3), cpu
    assert AVX512.maximum_instructions == 3 and AVX2.maximum_instructions == 6


def test_tiles_follow_the_vector_unit():
    """AVX2: 2 ymm x 4 rows (8 accumulators of 16 registers), not AVX-512's 2 zmm x 8 rows."""
    assert (choose_matmul_tiles(512, 512, 512, unit=AVX2).reg_m, choose_matmul_tiles(512, 512, 512, unit=AVX2).reg_n) == (4, 16)
    assert (choose_matmul_tiles(512, 512, 512).reg_m, choose_matmul_tiles(512, 512, 512).reg_n) == (8, 32)
    assert choose_matmul_tiles(64, 8, 64, unit=AVX2).reg_m == 8  # one vector per row: 8 rows
    assert choose_elementwise_tiles([64, 256], ["parallel", "parallel"], unit=AVX2).parallel == (1, 32)
    assert choose_elementwise_tiles([64, 256], ["parallel", "parallel"]).parallel == (1, 64)
    # two rows only where a row's tile is less than 2 vectors
    assert choose_elementwise_tiles([64, 22], ["parallel", "parallel"], unit=AVX2).parallel == (1, 22)
    assert choose_elementwise_tiles([64, 22], ["parallel", "parallel"]).parallel == (2, 22)
    conv = choose_conv_tiles(8, 54, 54, 64, 3, 3, 64, unit=AVX2)
    assert conv is not None and -(-conv.f // 8) * conv.ow <= 12  # 12 accumulators of 16 ymm


@needs_avx2
def test_x86_64_v3_calls_its_own_gemm_and_generic_none():
    assert CpuOptions.resolve(cpu="x86-64-v3").library == "x86-64-v3"
    assert CpuOptions.resolve(cpu="x86-64-v3", matmul="schedule").library is None
    assert CpuOptions.resolve(cpu="generic").library is None


@needs_avx2
def test_x86_64_v3_schedule_uses_ymm_sized_vectors_and_matches_numpy():
    options = CpuOptions.resolve(threads=1, matmul="schedule", cpu="x86-64-v3", cache=False)
    llvm_ir = mlir_to_llvm_ir(K.matmul(64, 96, 128), "mm", options).llvm_ir
    assert "<16 x float>" in llvm_ir and "<32 x float>" not in llvm_ir  # register rows of 2 ymm, not 2 zmm
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 96), dtype=np.float32)
    b = rng.standard_normal((96, 128), dtype=np.float32)
    out = np.empty((64, 128), np.float32)
    compile_kernel(K.matmul(64, 96, 128), "mm", options)(a, b, out=[out])
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@needs_avx2
@pytest.mark.parametrize("matmul", ["library", "schedule"])
def test_x86_64_v3_softmax_of_a_matmul_matches_the_reference(matmul):
    fn = select_function(parse_module(
        "func @main(%a: f32[32, 48], %b: f32[48, 64]) -> (f32[32, 64]) {\n"
        "  %0 = matmul(%a, %b) : f32[32, 64]\n  %1 = reduce_max(%0) {axes = [1], keepdims = true} : f32[32, 1]\n"
        "  %2 = sub(%0, %1) : f32[32, 64]\n  %3 = exp(%2) : f32[32, 64]\n"
        "  %4 = reduce_sum(%3) {axes = [1], keepdims = true} : f32[32, 1]\n  %5 = div(%3, %4) : f32[32, 64]\n"
        "  return %5\n}\n", "t"), None)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((32, 48), dtype=np.float32)
    b = rng.standard_normal((48, 64), dtype=np.float32)
    got = compile_function(fn, threads=1, cpu="x86-64-v3", matmul=matmul, schedule="all")([a, b])[0]
    z = a.astype(np.float64) @ b
    e = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-6)


def test_a_level_the_host_cannot_run_is_a_usage_error(monkeypatch):
    """A kernel runs in this process: AVX-512 code on an AVX2 host would die of SIGILL, so the option is
    refused (E7002) where the host lacks the level's flags."""
    from mind.compiler.backend.cpu import kernel_library, options
    from mind.diagnostics import MindError
    monkeypatch.setattr(kernel_library.host, "cpu_flags", lambda: frozenset({"avx", "avx2", "bmi1", "bmi2", "f16c",
                                                                                "fma", "abm", "movbe", "xsave"}))
    assert options.CpuOptions.resolve(cpu="x86-64-v3", cache=False).library == "x86-64-v3"
    with pytest.raises(MindError) as e:
        options.CpuOptions.resolve(cpu="x86-64-v4", cache=False)
    assert e.value.codes == ["E7002"]
