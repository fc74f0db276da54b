"""The CUDA GEMM (``compiler.backend.cuda.gemm_kernel``, with its window variant for convolutions)
and its calls (``library_gemm``), without a GPU.

The kernel's LLVM IR runs on the CPU through ``block_emulator`` (each block's 256 threads as OS
threads meeting at real barriers), so its indexing, shared-memory double buffering, edges, strides,
batch and accumulate flag are checked against NumPy here; ``ptxas`` checks its PTX for both
architectures (no spills, at most 128 registers: two blocks per multiprocessor); the plans of
programs with matmuls are checked launch by launch, and those made of GEMM launches alone are run
through the emulator from the plan's own arguments (offsets and strides of views included).  On a
GPU the same kernels run in ``tools/gpu_check.py`` (conformance and differential programs) and
``benchmarks/cuda.py``."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mind.compiler.backend.cuda import gemm_kernel as gk
from mind.compiler.backend.cuda.api import compile_program
from mind.compiler.backend.cuda.options import CudaOptions
from mind.compiler.backend.cuda.ptxas import find_ptxas
from mind.ir.parser import parse_module
from mind.reference.accuracy import check_op
from mind.reference.ops import OP_FUNCTIONS

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from block_emulator import BlockEmulator  # noqa: E402

_CI = os.environ.get("MIND_HYPOTHESIS_PROFILE", "ci") == "ci"
_EMULATORS: dict[str, BlockEmulator] = {}
DTYPES = {"f32": np.float32, "f64": np.float64}


def _emulator(elem: str, window: bool = False) -> BlockEmulator:
    key = gk.kernel_symbol(elem, window)
    if key not in _EMULATORS:
        params = gk.WINDOW_PARAMS if window else gk.PARAMS
        _EMULATORS[key] = BlockEmulator(gk.gemm_llvm_ir(elem, window), key, 3, len(params) - 3)
    return _EMULATORS[key]


def _gemm(elem, a, b, c, m, n, k, batch, a_layout, b_layout, c_layout, accumulate):
    """Launch the emulated kernel on flat buffers; layouts are (offset, batch, row, col) strides."""
    grid, block = gk.block_shape(elem, m, n, batch)
    _emulator(elem).run(grid, block[0], [a.ctypes.data, b.ctypes.data, c.ctypes.data, m, n, k,
                                          *a_layout, *b_layout, *c_layout, accumulate])


def _within_bound(got, a, b, c0, accumulate, dtype):
    """The matmul's accuracy bound of the spec (``check_op``), C's prior value added when accumulating."""
    want = np.matmul(a, b).astype(dtype)
    if accumulate:
        got = (got.astype(np.float64) - c0).astype(dtype)
        assert np.allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5 if dtype == np.float32 else 1e-12)
        return
    for i in range(a.shape[0]):
        mm = check_op("matmul", [a[i], b[i]], {}, got[i], OP_FUNCTIONS["matmul"](a[i], b[i]), dtype=None)
        assert mm is None, mm


@st.composite
def gemms(draw):
    elem = draw(st.sampled_from(["f32", "f64"]))
    m, n = draw(st.integers(1, 140)), draw(st.integers(1, 140))
    k = draw(st.sampled_from([0, 1, 7, 8, 9, 16, 31, 33]))
    batch = draw(st.integers(1, 3))
    return elem, m, n, k, batch, draw(st.booleans()), draw(st.booleans()), draw(st.booleans()), draw(st.integers(0, 2**31))


@settings(max_examples=6, deadline=None) if _CI else settings(max_examples=60, deadline=None)
@given(gemms())
def test_gemm_kernel_matches_numpy(case):
    """Any M, N (edges of every block tile), K (none, part of a slab, several slabs), a batch, A read
    transposed in place (column-major strides), B shared by the batch, accumulate or overwrite."""
    elem, m, n, k, batch, a_transposed, shared_b, accumulate, seed = case
    dtype, rng = DTYPES[elem], np.random.default_rng(seed)
    a = rng.standard_normal((batch, m, k)).astype(dtype)
    b = rng.standard_normal((1 if shared_b else batch, k, n)).astype(dtype)
    c0 = rng.standard_normal((batch, m, n)).astype(dtype)
    # A stored column-major per matrix, after 3 elements of padding: the kernel reads it in place
    a_store = np.zeros(3 + a.size + 1, dtype)
    if a_transposed:
        a_store[3:3 + a.size] = np.ascontiguousarray(a.transpose(0, 2, 1)).ravel()
        a_layout = (3, m * k, 1, m)
    else:
        a_store[3:3 + a.size] = a.ravel()
        a_layout = (3, m * k, k, 1)
    b_layout = (0, 0 if shared_b else k * n, n, 1)
    c = c0.copy()
    _gemm(elem, a_store, np.ascontiguousarray(b) if b.size else np.zeros(1, dtype), c, m, n, k, batch,
          a_layout, b_layout, (0, m * n, n, 1), int(accumulate))
    _within_bound(c, a, np.broadcast_to(b, (batch, k, n)), c0, accumulate, dtype)


def test_an_empty_k_overwrites_with_zeros_or_leaves_c():
    for accumulate in (0, 1):
        c = np.full((1, 5, 7), 3.0, np.float32)
        _gemm("f32", np.zeros(1, np.float32), np.zeros(1, np.float32), c, 5, 7, 0, 1, (0, 0, 0, 1), (0, 0, 7, 1),
              (0, 35, 7, 1), accumulate)
        assert np.array_equal(c, np.full((1, 5, 7), 3.0 if accumulate else 0.0, np.float32))


@pytest.mark.skipif(find_ptxas() is None, reason="no ptxas")
@pytest.mark.parametrize("elem", ["f32", "f64"])
@pytest.mark.parametrize("sm", ["sm_80", "sm_90"])
@pytest.mark.parametrize("window", [False, True])
def test_ptxas_builds_the_gemm_without_spills_in_128_registers(elem, sm, window, tmp_path):
    from mind.compiler.backend.cuda.library_gemm import library_ptx

    src = tmp_path / "gemm.ptx"
    src.write_text(library_ptx(elem, "sm_80", window))
    out = subprocess.run([find_ptxas(), "-v", f"-arch={sm}", "-O3", "--fmad=false", str(src), "-o",
                          str(tmp_path / "gemm.cubin")], capture_output=True, text=True, check=True).stderr
    registers = int(out.split("Used ")[1].split(" registers")[0])
    assert "0 bytes spill stores" in out and registers <= 128, out


def _plan(src):
    fn = parse_module(src).functions[0]
    return fn, compile_program(fn, {}, CudaOptions.resolve({}, environ={})).plan


def _gemm_launches(plan):
    return [s for s in plan["steps"] if "launch" in s and s["launch"][0].startswith(("mind_gemm_", "mind_conv_"))]


def _run_gemm_plan(plan, inputs):
    """Follow a plan made of GEMM launches and copies, the launches in the emulator."""
    buffers = {"input": [np.ascontiguousarray(x).ravel().copy() for x in inputs],
               "output": [np.zeros(int(np.prod(o["shape"])), o["dtype"]) for o in plan["signature"]["outputs"]],
               "temp": [np.frombuffer(bytes.fromhex(t["init"]), t["dtype"]).copy() if t.get("init")
                        else np.zeros(int(np.prod(t["shape"])), t["dtype"]) for t in plan["temps"]]}
    for step in plan["steps"]:
        if "copy" in step:
            (k1, i1), (k2, i2) = step["copy"], step["to"]
            src = buffers[k1][i1].view(np.uint8)[step.get("offset", 0):step.get("offset", 0) + step["bytes"]]
            buffers[k2][i2].view(np.uint8)[:step["bytes"]] = src
            continue
        kind_, elem = step["launch"][0].split("_")[1:]
        assert kind_ in ("gemm", "conv"), step["launch"]
        pointers = [buffers[kind][i].ctypes.data for kind, i in step["args"][:3]]
        _emulator(elem, kind_ == "conv").run(step["grid"], step["block"][0], pointers + [v for _, v in step["args"][3:]])
    return [b.reshape(o["shape"]) for b, o in zip(buffers["output"], plan["signature"]["outputs"])]


MATMUL = """func @main(%a: f32[70, 33], %b: f32[33, 130]) -> (f32[70, 130]) {
  %0 = matmul(%a, %b) : f32[70, 130]
  return %0
}
"""


def test_a_matmul_is_one_launch_that_overwrites_its_output():
    """The zero fill before the matmul is dropped: one launch, accumulate 0, output written once."""
    _, plan = _plan(MATMUL)
    (launch,) = [s for s in plan["steps"] if "launch" in s]
    assert launch["launch"] == ["mind_gemm_f32", "mind_gemm_f32"] and launch["grid"] == [2, 1, 1]
    ints = dict(zip(gk.PARAMS[3:], [v for _, v in launch["args"][3:]]))
    assert (ints["m"], ints["n"], ints["k"], ints["accumulate"]) == (70, 130, 33, 0)
    assert launch["args"][:3] == [["input", 0], ["input", 1], ["output", 0]]


@pytest.mark.parametrize("src,shapes", [
    (MATMUL, [(70, 33), (33, 130)]),
    # a batch; B shared by the batch
    ("func @main(%a: f64[3, 20, 9], %b: f64[3, 9, 17]) -> (f64[3, 20, 17]) {\n"
     "  %0 = matmul(%a, %b) : f64[3, 20, 17]\n  return %0\n}\n", [(3, 20, 9), (3, 9, 17)]),
    ("func @main(%a: f64[3, 20, 9], %w: f64[9, 17]) -> (f64[3, 20, 17]) {\n"
     "  %0 = matmul(%a, %w) : f64[3, 20, 17]\n  return %0\n}\n", [(3, 20, 9), (9, 17)]),
    # rows and columns of A read in place through a slice (a view with an offset and strides)
    ("func @main(%a: f32[40, 50], %b: f32[20, 30]) -> (f32[19, 30]) {\n"
     "  %0 = slice(%a) {start = [1, 2], stop = [20, 22], step = [1, 1]} : f32[19, 20]\n"
     "  %1 = matmul(%0, %b) : f32[19, 30]\n  return %1\n}\n", [(40, 50), (20, 30)]),
    # convolutions as implicit GEMMs: stride, dilation, a window of every size, many channels
    ("func @main(%x: f32[2, 11, 13, 5], %w: f32[3, 2, 5, 7]) -> (f32[2, 5, 11, 7]) {\n"
     "  %0 = conv2d(%x, %w) {strides = [2, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], "
     "rhs_dilation = [1, 2]} : f32[2, 5, 11, 7]\n  return %0\n}\n", [(2, 11, 13, 5), (3, 2, 5, 7)]),
    ("func @main(%x: f64[3, 20, 20, 9], %w: f64[1, 1, 9, 130]) -> (f64[3, 20, 20, 130]) {\n"
     "  %0 = conv2d(%x, %w) {strides = [1, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], "
     "rhs_dilation = [1, 1]} : f64[3, 20, 20, 130]\n  return %0\n}\n", [(3, 20, 20, 9), (1, 1, 9, 130)]),
    ("func @main(%x: f32[1, 30, 9, 33], %w: f32[5, 3, 33, 4]) -> (f32[1, 6, 3, 4]) {\n"
     "  %0 = conv2d(%x, %w) {strides = [3, 3], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], "
     "rhs_dilation = [3, 1]} : f32[1, 6, 3, 4]\n  return %0\n}\n", [(1, 30, 9, 33), (5, 3, 33, 4)]),
])
def test_plans_of_matmuls_run_like_the_reference(src, shapes):
    fn, plan = _plan(src)
    assert _gemm_launches(plan)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(s).astype(p.type.dtype.numpy) for s, p in zip(shapes, fn.params)]
    got = _run_gemm_plan(plan, inputs)
    from mind.calling import run_reference
    for g, want in zip(got, run_reference(fn, inputs)):
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)


def test_matmuls_the_kernel_does_not_take_keep_the_generic_mapping():
    """Integer matmuls have no GEMM: they stay loop nests."""
    _, plan = _plan("func @main(%a: i32[4, 3], %b: i32[3, 5]) -> (i32[4, 5]) {\n"
                    "  %0 = matmul(%a, %b) : i32[4, 5]\n  return %0\n}\n")
    assert not _gemm_launches(plan) and any("launch" in s for s in plan["steps"])
