"""The cuda backend on a machine without a GPU (CI): options, pass-option validation, PTX, artifacts
(determinism, tampering, the runtime's imports), and a clear diagnostic where a GPU is needed.  The
``gpu`` tests run the compiled kernels where a GPU is present and skip with the reason elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import mind
import mind.runtime
from mind.calling import run_reference
from mind.cli.main import main
from mind.compiler.backend.cuda.api import compile_program, emit_ptx
from mind.compiler.backend.cuda.options import CudaOptions
from mind.compiler.backend.cuda.ptxas import find_ptxas
from mind.compiler.backend.linalg.pipeline import PipelineError, pass_spec
from mind.diagnostics import MindError
from mind.ir.parser import parse_module
from mind.runtime.cuda import cap_ptx_version, ptx_version_for_driver

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="no ptxas (install the pinned nvidia-cuda-nvcc wheel)")

PROGRAM = """\
func @main(%x: f32[33, 70], %w: f32[70, 5], %a: i32[5], %b: i32[5]) -> (f32[33, 5], f32[33], i32[5]) {
  %0 = matmul(%x, %w) : f32[33, 5]
  %1 = exp(%0) : f32[33, 5]
  %2 = reduce_max(%x) {axes = [1], keepdims = false} : f32[33]
  %3 = div(%a, %b) : i32[5]
  return %1, %2, %3
}
"""


def _fn():
    return parse_module(PROGRAM).functions[0]


def _code(excinfo) -> str:
    return excinfo.value.diagnostics[0].code


@pytest.mark.parametrize("keywords,environ", [
    ({"sms": ("sm_8",)}, {}), ({"sms": "sm_80"}, {}), ({"tile": (64, 32)}, {}), ({"tile": (0,)}, {}),
    ({"ptxas_opt": 4}, {}), ({}, {"MIND_CUDA_SMS": "sm_80;sm_90"}), ({}, {"MIND_CUDA_TILE": "1024,2"}),
    ({"bogus": 1}, {}),
])
def test_bad_options_are_usage_errors(keywords, environ):
    with pytest.raises(MindError) as e:
        CudaOptions.resolve(keywords, environ=environ)
    assert _code(e) == "E7002"


def test_options_from_keywords_then_environment():
    o = CudaOptions.resolve({"tile": (256,)}, environ={"MIND_CUDA_SMS": "sm_90", "MIND_CUDA_TILE": "16,16"})
    assert o.tile == (256,) and o.sms == ("sm_90",) and o.record() == {"sms": ["sm_90"], "tile": [256], "ptxas_opt": 3}


def test_pass_options_are_validated_before_mlir():
    """A bad option value aborts the process inside MLIR: the table refuses it first."""
    for bad in (pass_spec("gpu-module-to-binary", format="offload"), pass_spec("nvvm-attach-target", chip="sm80"),
                pass_spec("scf-parallel-loop-tiling", parallel_loop_tile_sizes=(0, 4))):
        with pytest.raises(PipelineError):
            bad.render()
    assert pass_spec("scf-parallel-loop-tiling", parallel_loop_tile_sizes=(32, 8), no_min_max_bounds=True).render() \
        == "scf-parallel-loop-tiling{parallel-loop-tile-sizes=32,8 no-min-max-bounds=true}"


def test_ptx_version_is_capped_for_older_drivers():
    ptx = b"//\n.version 8.7\n.target sm_80\n"
    assert ptx_version_for_driver(12040) == (8, 4) and ptx_version_for_driver(13000) == (9, 0)
    assert cap_ptx_version(ptx, (8, 4)) == b"//\n.version 8.4\n.target sm_80\n"
    assert cap_ptx_version(ptx, (9, 0)) == ptx


@needs_ptxas
def test_plan_and_kernels():
    c = compile_program(_fn(), {}, CudaOptions.resolve({}, environ={}))
    plan = c.plan
    assert plan["signature"]["outputs"][1] == {"dtype": "float32", "shape": [33]}
    launches = [s for s in plan["steps"] if "launch" in s]
    assert launches and all(int(np.prod(s["block"])) <= 1024 for s in launches)
    assert {m for s in launches for m in [s["launch"][0]]} == set(plan["modules"])
    assert all(".target sm_80" in ptx for ptx in c.ptx.values())


STRIDED_PLACEMENT = """\
func @main(%x: i64[1, 5, 5, 1], %w: i64[3, 2, 1, 1]) -> (i64[1, 6, 10, 1]) {
  %0 = conv2d(%x, %w) {strides = [1, 1], padding = [[1, 0], [1, 1]], lhs_dilation = [2, 2], rhs_dilation = [2, 1]} : i64[1, 6, 10, 1]
  return %0
}
"""


def _buffer_bytes(plan, where) -> int:
    kind, n = where
    spec = plan["signature"][kind + "s"][n] if kind in ("input", "output") else plan["temps"][n]
    return int(np.prod(spec["shape"], dtype=np.int64)) * np.dtype(spec["dtype"]).itemsize


def test_copies_into_strided_views_are_kernels():
    # An input-dilated conv places each phase's result at every second row and column of the output
    # (a copy into a strided view).  The plan's copy step moves one block of bytes to a buffer's first
    # byte, and this one was planned as 120 contiguous bytes at the start of the output: wrong values
    # on an H200 (conformance gen/conv2d/i64/normal/1).  Such copies are kernels now; a copy step
    # always fills a whole buffer.
    fn = parse_module(STRIDED_PLACEMENT).functions[0]
    plan = compile_program(fn, {}, CudaOptions.resolve({}, environ={})).plan
    copies = [s for s in plan["steps"] if "copy" in s]
    assert all(s["bytes"] == _buffer_bytes(plan, s["to"]) for s in copies)
    writers = [s for s in plan["steps"] if ("launch" in s and ["output", 0] in s["args"]) or s.get("to") == ["output", 0]]
    # the output's zero fill, then per phase a zero fill of its view (inits are unshared before
    # bufferization) and the phase's conv into it: kernels all, none a block copy
    assert len(writers) == 5 and all("launch" in s for s in writers)


@needs_ptxas
def test_rank0_ops_and_scalar_reductions_run_in_one_thread():
    """Ops without a parallel dimension run on the GPU in a kernel of one working thread, and a
    scalar input read by a loop (pad's value) is read there."""
    fn = parse_module("func @main(%a: f32[], %b: f32[], %x: f32[4, 3]) -> (f32[], f32[], f32[6, 3]) {\n"
                      "  %0 = mul(%a, %b) : f32[]\n  %1 = reduce_sum(%x) {axes = [0, 1], keepdims = false} : f32[]\n"
                      "  %2 = pad(%x, %a) {lo = [1, 0], hi = [1, 0], interior = [0, 0]} : f32[6, 3]\n"
                      "  return %0, %1, %2\n}\n").functions[0]
    plan = compile_program(fn, {}, CudaOptions.resolve({}, environ={})).plan
    assert [s["grid"] for s in plan["steps"] if "launch" in s][0] == [1, 1, 1]
    assert all("launch" in s or "copy" in s for s in plan["steps"])


@needs_ptxas
def test_no_fma_contraction_across_ops():
    """One rounding per op: a product and the sum that consumes it, in two ops, stay separate
    round-to-nearest instructions (``.rn``, which ptxas never contracts) and no FMA appears.  Only
    inside the matmul (the GEMM's module) do fused multiply-adds sum the products: one op, whose
    summation the spec leaves to its accuracy bound."""
    fn = parse_module("func @main(%x: f32[4, 6], %w: f32[6, 3], %b: f32[3]) -> (f32[4, 3]) {\n"
                      "  %0 = matmul(%x, %w) : f32[4, 3]\n  %1 = mul(%0, %0) : f32[4, 3]\n"
                      "  %2 = add(%1, %b) : f32[4, 3]\n  return %2\n}\n").functions[0]
    modules = compile_program(fn, {}, CudaOptions.resolve({}, environ={})).ptx
    ptx = "".join(text for name, text in modules.items() if not name.startswith("mind_gemm_"))
    assert "mul.rn.f32" in ptx and "add.rn.f32" in ptx and "fma" not in ptx
    assert "fma.rn.f32" in modules["mind_gemm_f32"]


@needs_ptxas
def test_mind_ir_emit_ptx(tmp_path, capsys):
    src = tmp_path / "p.mir"
    src.write_text(PROGRAM)
    assert main(["ir", str(src), "--emit", "ptx"]) == 0
    out = capsys.readouterr().out
    plan = compile_program(_fn(), {}, CudaOptions.resolve({}, environ={})).plan
    assert out.count(".visible .entry") == len({tuple(s["launch"]) for s in plan["steps"] if "launch" in s})
    assert emit_ptx(parse_module(PROGRAM)) == out


def test_without_a_gpu_a_call_is_a_diagnostic(tmp_path):
    from mind.runtime.cuda import unavailable

    if unavailable() is None:
        pytest.skip("a GPU is present")
    f = mind.compile(PROGRAM, backend="cuda")
    with pytest.raises(MindError) as e:
        f(np.ones((33, 70), np.float32), np.ones((70, 5), np.float32), np.ones(5, np.int32), np.ones(5, np.int32))
    assert _code(e) == "E6002"
    for a, n in (("x", (33, 70)), ("w", (70, 5))):
        np.save(tmp_path / f"{a}.npy", np.ones(n, np.float32))
    for a in "ab":
        np.save(tmp_path / f"{a}.npy", np.ones(5, np.int32))
    src = tmp_path / "p.mir"
    src.write_text(PROGRAM)
    r = subprocess.run([sys.executable, "-m", "mind.cli.main", "run", str(src), "--backend", "cuda",
                        *[f"--input={a}={tmp_path / (a + '.npy')}" for a in "xwab"]],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 2 and "E6002" in r.stderr and "Traceback" not in r.stderr


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    if find_ptxas() is None:
        pytest.skip("no ptxas")
    d = tmp_path_factory.mktemp("cuda")
    (d / "p.mir").write_text(PROGRAM)
    assert main(["build", str(d / "p.mir"), "--target", "cuda", "--out", str(d / "a")]) == 0
    return d


def test_cuda_artifact_files(artifact):
    manifest = json.loads((artifact / "a" / "manifest.json").read_text())
    plan = json.loads((artifact / "a" / "plan.json").read_text())
    assert manifest["target"] == "cuda" and manifest["options"]["sms"] == ["sm_80", "sm_90"]
    assert manifest["toolchain"]["ptxas"]
    for module, images in plan["images"].items():
        assert set(images) == {"ptx", "sm_80", "sm_90"}
        for f in images.values():
            assert f in manifest["files"]


def test_cuda_artifact_builds_identically_in_two_processes(artifact, tmp_path):
    digests = []
    for seed in ("0", "random"):
        out = tmp_path / seed
        r = subprocess.run([sys.executable, "-m", "mind.cli.main", "build", str(artifact / "p.mir"), "--target", "cuda",
                            "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=600,
                           env={**os.environ, "PYTHONHASHSEED": seed})
        assert r.returncode == 0, r.stderr
        digests.append({n: (out / n).read_bytes() for n in sorted(os.listdir(out))})
    assert digests[0] == digests[1]
    assert digests[0]["manifest.json"] == (artifact / "a" / "manifest.json").read_bytes()


def test_tampered_cuda_artifact_is_refused_before_the_driver(artifact, tmp_path):
    dst = tmp_path / "t"
    shutil.copytree(artifact / "a", dst)
    cubin = next(n for n in os.listdir(dst) if n.endswith(".sm_90.cubin"))
    data = bytearray((dst / cubin).read_bytes())
    data[-1] ^= 1
    (dst / cubin).write_bytes(bytes(data))
    with pytest.raises(MindError) as e:
        mind.runtime.load(str(dst))
    assert _code(e) == "E7014" and cubin in e.value.diagnostics[0].message


LOAD_ALONE = """
import sys, json
import mind.runtime
from mind.diagnostics import MindError
try:
    mind.runtime.load(sys.argv[1])
    status = "loaded"
except MindError as e:
    status = e.diagnostics[0].code
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("mlir", "llvmlite", "z3", "sympy")
               or m.startswith(("mind.compiler", "mind.verify", "mind.conformance")))
print(json.dumps({"heavy": heavy, "status": status}))
"""


def test_cuda_runtime_imports_nothing_of_the_compiler(artifact):
    r = subprocess.run([sys.executable, "-c", LOAD_ALONE, str(artifact / "a")], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["heavy"] == [] and doc["status"] in ("loaded", "E6002")


@pytest.mark.gpu
def test_gpu_runs_the_artifact_like_the_reference(gpu, artifact):
    f = mind.runtime.load(str(artifact / "a"))
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((33, 70)).astype(np.float32), rng.standard_normal((70, 5)).astype(np.float32),
            rng.integers(-9, 9, 5).astype(np.int32), np.array([2, 0, -3, 1, 7], np.int32)]
    got, want = f(*args), run_reference(f.function, args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])
    on_device = f(*args, device_results=True)
    np.testing.assert_array_equal(on_device[2].numpy(), want[2])
    np.testing.assert_array_equal(f(*on_device[:0], *args)[2], want[2])


@pytest.mark.gpu
def test_gpu_backend_takes_device_arrays_without_a_copy(gpu):
    f = mind.compile(PROGRAM, backend="cuda", device_results=True)
    args = [np.ones((33, 70), np.float32), np.ones((70, 5), np.float32), np.arange(5, dtype=np.int32),
            np.full(5, 2, np.int32)]
    first = f(*args)
    again = mind.compile("func @main(%x: f32[33, 5]) -> (f32[33, 5]) {\n  %0 = add(%x, %x) : f32[33, 5]\n"
                         "  return %0\n}\n", backend="cuda")(first[0])
    np.testing.assert_allclose(again, 2 * first[0].numpy())


def test_docs_print_the_options_table():
    from mind.compiler.backend.cuda.options import KNOBS
    from mind.compiler.backend.options import markdown_table

    with open(os.path.join(ROOT, "docs", "backend-cuda.md"), encoding="utf-8") as fh:
        assert markdown_table(KNOBS) in fh.read()


@needs_ptxas
def test_a_part_that_does_not_map_to_the_gpu_is_named(tmp_path):
    """A part that stays on the host (here a scalar load whose value a later kernel needs, from the
    conformance program prog/0552): E6003 naming the host op, exit 1, nothing written."""
    src = tmp_path / "s.mir"
    src.write_text(open(os.path.join(os.path.dirname(__file__), "data", "host_load.mir")).read())
    r = subprocess.run([sys.executable, "-m", "mind.cli.main", "build", str(src), "--target", "cuda", "--out",
                        str(tmp_path / "a")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 1 and "E6003" in r.stderr and "stays on the host" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "a" / "manifest.json").exists()


@needs_ptxas
def test_a_strided_view_is_read_in_place():
    """A slice with steps is a view: the kernel takes the source buffer and applies the view's offset
    and strides itself (x[1 + 2 i] here), no copy on the host."""
    fn = parse_module("func @main(%x: i32[7]) -> (i32[3]) {\n  %0 = slice(%x) {start = [1], stop = [7], step = [2]} : "
                      "i32[3]\n  %1 = add(%0, %0) : i32[3]\n  return %1\n}\n").functions[0]
    c = compile_program(fn, {}, CudaOptions.resolve({}, environ={}))
    (launch,) = [s for s in c.plan["steps"] if "launch" in s]
    assert ["input", 0] in launch["args"] and not c.plan["temps"]
    ptx = "".join(c.ptx.values())
    assert "shl.b64" in ptx and "+4]" in ptx  # stride 2 elements (8 bytes), offset 1 element (4 bytes)


def _launch_shapes(src: str) -> list[tuple[list[int], list[int]]]:
    plan = compile_program(parse_module(src).functions[0], {}, CudaOptions.resolve({}, environ={})).plan
    return [(s["grid"], s["block"]) for s in plan["steps"] if "launch" in s]


def test_the_contiguous_dim_is_on_thread_x():
    """A warp's threads take neighbouring elements of a row (one 128-byte line of f32 per access),
    not 32 rows: the loop's last dim is tiled by the block's x (32) and the one before by y (8).  It
    failed before the change: the grid was [2, 12, 1], rows on x."""
    src = "func @main(%x: f32[64, 96]) -> (f32[64, 96]) {\n  %0 = exp(%x) : f32[64, 96]\n  return %0\n}\n"
    assert _launch_shapes(src) == [([3, 8, 1], [32, 8, 1])]
    three = "func @main(%x: f32[5, 64, 40]) -> (f32[5, 64, 40]) {\n  %0 = exp(%x) : f32[5, 64, 40]\n  return %0\n}\n"
    assert _launch_shapes(three) == [([2, 8, 5], [32, 8, 1])]


def test_a_loop_whose_grid_would_overflow_keeps_its_order():
    """With its last dim on x, a loop of 600,000 rows of 2 would need 75,000 blocks along y (the
    limit is 65,535): such a loop keeps its first dim on x."""
    src = "func @main(%x: f32[600000, 2]) -> (f32[600000, 2]) {\n  %0 = exp(%x) : f32[600000, 2]\n  return %0\n}\n"
    assert _launch_shapes(src) == [([18750, 1, 1], [32, 8, 1])]


def test_split_factor():
    """Thousands of rows: a warp's 32 partials (or the largest divisor below); few rows: enough
    partials for ~2**17 threads, at most 1,024; rows under 256 elements or prime: no split."""
    from mind.compiler.backend.cuda.reductions import split_factor
    assert [split_factor(k) for k in (4096, 1000, 1009, 255, 256, 300)] == [32, 25, None, None, 32, 30]
    assert [split_factor(4096, rows) for rows in (1 << 16, 4096, 256, 3, 1)] == [32, 32, 512, 1024, 1024]
    assert [split_factor(k, 1) for k in (1 << 24, 1024, 256, 300)] == [1024, 256, 64, 75]


@pytest.mark.parametrize("body", [
    "softmax(x, axis=1)",
    "x - mean(x, axes=[1], keepdims=true)",
    "x - max(x, axes=[1], keepdims=true)",
])
def test_row_reductions_read_a_row_with_a_warp(body):
    """A reduction along rows is split into 32 partials per row (``cuda/reductions.py``) and its loops
    put parallel dims first, so every kernel that reads the input has 32 threads per row: before,
    the max of a softmax ran one thread per row (256 threads reading 4 MB), and the emitter's
    partial sums of a mean one thread per block."""
    from mind.compiler.frontend.api import compile_source
    from mind.calling import select_function

    fn = select_function(compile_source(f"fn f(x: Tensor<f32, [256, 4096]>) -> Tensor<f32, [256, 4096]> {{ {body} }}",
                                        "t"), "f")
    plan = compile_program(fn, {}, CudaOptions.resolve({}, environ={})).plan
    readers = [s for s in plan["steps"] if "launch" in s and ["input", 0] in s["args"]]
    assert readers and all(int(np.prod(s["grid"]) * np.prod(s["block"])) >= 256 * 32 for s in readers), readers


def test_kernels_share_one_module():
    """Every generic kernel of a function is in one module (one PTX text, one ptxas run per
    architecture, one load), the GEMM in its own: 5 kernels, 2 modules here."""
    plan = compile_program(_fn(), {}, CudaOptions.resolve({}, environ={})).plan
    launches = {tuple(s["launch"]) for s in plan["steps"] if "launch" in s}
    assert plan["modules"] == ["mind_gemm_f32", "mind_kernels"] and len(launches) == 5


@pytest.mark.parametrize("body, out", [("matmul(reshape(x, [96, 48]), w)", "[96, 40]"),
                                       ("reshape(matmul(reshape(x, [96, 48]), w), [4, 24, 40])", "[4, 24, 40]")])
def test_a_matmul_next_to_a_reshape_launches_the_gemm(body, out):
    """Sealed from elementwise fusion (``linalg.sealed_contractions``), a matmul next to a reshape
    stays the named op the GEMM takes; fusion had made it a generic, a loop nest of its own."""
    from mind.compiler.frontend.api import compile_source
    from mind.calling import select_function

    src = f"fn f(x: Tensor<f32, [4, 24, 48]>, w: Tensor<f32, [48, 40]>) -> Tensor<f32, {out}> {{ {body} }}"
    plan = compile_program(select_function(compile_source(src, "t"), "f"), {}, CudaOptions.resolve({}, environ={})).plan
    assert "mind_gemm_f32" in plan["modules"], plan["modules"]
