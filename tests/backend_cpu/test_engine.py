"""CPU execution engine: correctness, dtypes, errors, determinism, cache."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kernels as K
from mind.compiler.backend.cpu.cache import KernelCache
from mind.compiler.backend.cpu.engine import compile_kernel, mlir_to_llvm_ir
from mind.compiler.backend.cpu.kernel_library import host_isa
from mind.compiler.backend.cpu.options import CpuOptions
from mind.compiler.backend.cpu.pipeline import full_pipeline, lower_to_llvm
from mind.compiler.backend.linalg.pipeline import PassSpec, PipelineError
from mind.compiler.backend.cpu.transforms import choose_matmul_tiles
from mind.compiler.backend.linalg.transform_script import largest_divisor_at_most
from mind.diagnostics import MindError

HERE = os.path.dirname(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))


def _matmul_bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    k = a.shape[-1]
    return k * 2.0**-24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))


@pytest.mark.parametrize("matmul", ["schedule", "library"])
@pytest.mark.parametrize("threads", [1, 2])
def test_matmul_512x1024x512_f32(threads, matmul):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 1024), dtype=np.float32)
    b = rng.standard_normal((1024, 512), dtype=np.float32)
    k = compile_kernel(K.matmul(512, 1024, 512), "mm", CpuOptions.resolve(threads=threads, cache=False, matmul=matmul))
    if matmul == "schedule" or host_isa() is None:
        assert k.scheduled and k.matmul_library is None
    else:
        assert k.matmul_library == host_isa()
    c = k(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.all(np.abs(c - ref) <= _matmul_bound(a, b))


@pytest.mark.parametrize("m,k,n", [(37, 19, 23), (1, 1, 1), (3, 130, 17), (96, 200, 48)])
def test_matmul_odd_and_small_shapes(m, k, n):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    kern = compile_kernel(K.matmul(m, k, n), "mm", CpuOptions.resolve(threads=2, cache=False))
    c = kern(a, b)
    assert np.all(np.abs(c - a.astype(np.float64) @ b) <= _matmul_bound(a, b) + 1e-30)


@pytest.mark.parametrize("dtype,np_dtype", [("f64", np.float64), ("i32", np.int32), ("i64", np.int64)])
def test_matmul_dtypes(dtype, np_dtype):
    rng = np.random.default_rng(2)
    a = rng.integers(-5, 5, (24, 40)).astype(np_dtype)
    b = rng.integers(-5, 5, (40, 32)).astype(np_dtype)
    kern = compile_kernel(K.matmul(24, 40, 32, dtype), "mm", CpuOptions.resolve(threads=1, cache=False))
    np.testing.assert_array_equal(kern(a, b), a @ b)


def test_batch_matmul():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 16, 64), dtype=np.float32)
    b = rng.standard_normal((3, 64, 32), dtype=np.float32)
    kern = compile_kernel(K.batch_matmul(3, 16, 64, 32), "bmm", CpuOptions.resolve(threads=2, cache=False))
    c = kern(a, b)
    ref = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    bound = 64 * 2.0**-24 * np.einsum("bmk,bkn->bmn", np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    assert np.all(np.abs(c - ref) <= bound)


@pytest.mark.parametrize("shape", [(256, 512), (7, 33), (1000,), (2, 3, 64)])
def test_fused_sigmoid_chain(shape):
    x = np.random.default_rng(4).standard_normal(shape, dtype=np.float32) * 4
    kern = compile_kernel(K.sigmoid_chain(shape), "chain", CpuOptions.resolve(threads=2, cache=False))
    assert kern.scheduled
    got = kern(x)
    ref = 1.0 / (1.0 + np.exp(-(np.maximum(x.astype(np.float64), 0) * 2 + 1)))
    np.testing.assert_allclose(got, ref, rtol=4e-7, atol=0)


def test_rank0_and_bool_and_int():
    # rank 0 f32 -> f32
    k0 = compile_kernel(K.unary((), ["%c = arith.constant 3.0 : f32", "%v = arith.mulf %in, %c : f32"], "%v"), "ew", CpuOptions.resolve(threads=1, cache=False))
    r = k0(np.array(2.5, dtype=np.float32))
    assert r.shape == () and r.dtype == np.float32 and float(r) == 7.5
    # numpy bool crosses the boundary as i8
    kb = compile_kernel(K.unary((130,), ["%z = arith.constant 0.0 : f32", "%c = arith.cmpf ogt, %in, %z : f32",
                                         "%v = arith.extui %c : i1 to i8"], "%v", out_dtype="i8"), "ew", CpuOptions.resolve(threads=1, cache=False))
    x = np.linspace(-1, 1, 130, dtype=np.float32)
    out = kb(x)
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out, x > 0)
    for dt, npdt in (("i32", np.int32), ("i64", np.int64)):
        ki = compile_kernel(K.unary((5, 70), [f"%c = arith.constant 3 : {dt}", f"%v = arith.muli %in, %c : {dt}"],
                                    "%v", dtype=dt), "ew", CpuOptions.resolve(threads=2, cache=False))
        xi = np.arange(350, dtype=npdt).reshape(5, 70)
        np.testing.assert_array_equal(ki(xi), xi * 3)


def test_wrong_arguments_raise_mind_error():
    k0 = compile_kernel(K.unary((4,), ["%v = arith.negf %in : f32"], "%v"), "ew", CpuOptions.resolve(threads=1, cache=False))
    with pytest.raises(MindError) as e:
        k0(np.zeros(4, dtype=np.float64))
    assert e.value.codes == ["E6012"]
    with pytest.raises(MindError):
        k0(np.zeros(8, dtype=np.float32)[::2])  # not C-contiguous: refused, never copied


@pytest.mark.parametrize("text,func,says", [
    ("func.func @f(%x: tensor<4xf32>, %o: memref<4xf32>) { this is not mlir }", "f",
     ["stage 'parse'", 'error: loc("-":1:54): custom op \'this\' is unknown']),
    ("func.func @f(%x: tensor<4xf32>, %o: memref<4xf32>) {\n  %y = arith.addi %x, %x : tensor<4xf32>\n  return\n}",
     "f", ['error: loc("-":2:8): \'arith.addi\' op operand #0 must be signless-integer-like',
           'note: loc("-":2:8): see current operation']),
    (K.matmul(4, 4, 4), "missing_function", ["missing_function"]),
    ("func.func @f(%x: tensor<4xi1>, %o: memref<4xi1>) { return }", "f",
     ["stage 'signature'", "element type i1 is not supported at the kernel boundary"]),
])
def test_malformed_module_is_e6012(text, func, says):
    with pytest.raises(MindError) as e:
        compile_kernel(text, func, CpuOptions.resolve(threads=1, cache=False))
    assert e.value.codes == ["E6012"]
    rendered = str(e.value)  # MLIR's diagnostics (with their notes and locations) become the error's notes
    for fragment in says:
        assert fragment in rendered, rendered


def test_pipeline_options_are_validated_before_mlir():
    with pytest.raises(PipelineError):
        PassSpec("convert-scf-to-openmp", (("num-threads", 0),)).render()
    with pytest.raises(PipelineError):
        PassSpec("gpu-module-to-binary", (("format", "offload"),)).render()
    with pytest.raises(PipelineError):
        lower_to_llvm(-3)
    with pytest.raises(MindError):
        compile_kernel(K.matmul(4, 4, 4), "mm", CpuOptions.resolve(threads=0, cache=False))
    assert full_pipeline(2).render() == full_pipeline(2).render()
    assert "num-threads=2" in full_pipeline(2).render()


def test_tile_choice():
    assert largest_divisor_at_most(1000, 64) == 50
    t = choose_matmul_tiles(512, 512, 1024)
    assert (t.k, t.par_m, t.par_n, t.reg_m, t.reg_n) == (128, 64, 128, 8, 32)
    t = choose_matmul_tiles(37, 23, 19)
    assert 37 % t.reg_m == 0 and 23 % t.reg_n == 0 and 19 % t.k == 0


@pytest.mark.parametrize("n, reg_m, reg_n", [(64, 8, 32), (96, 8, 32), (48, 16, 16), (80, 16, 16), (16, 16, 16),
                                             (40, 8, 10), (24, 8, 12), (20, 8, 10), (10, 8, 10), (7, 8, 7)])
def test_matmul_register_rows_are_whole_vectors_or_one_narrow_one(n, reg_m, reg_n):
    """Rows of 3 or 1.5 vectors (48, 24 floats) ran scalarized at 9 GFLOP/s: never chosen."""
    t = choose_matmul_tiles(256, n, 512)
    assert (t.reg_m, t.reg_n) == (reg_m, reg_n)
    assert t.reg_n <= 16 or t.reg_n % 16 == 0


@pytest.mark.parametrize("n", [48, 40, 24])
def test_matmul_with_narrow_or_odd_vector_rows_is_scheduled_and_right(n):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((64, 128), dtype=np.float32)
    b = rng.standard_normal((128, n), dtype=np.float32)
    kern = compile_kernel(K.matmul(64, 128, n), "mm", CpuOptions.resolve(threads=1, schedule="all", cache=False, matmul="schedule"))
    assert kern.scheduled
    assert np.all(np.abs(kern(a, b) - a.astype(np.float64) @ b) <= _matmul_bound(a, b))


_DET = textwrap.dedent("""
    import hashlib, sys
    sys.path.insert(0, {here!r})
    import kernels as K
    from mind.compiler.backend.cpu.engine import mlir_to_llvm_ir
    from mind.compiler.backend.cpu.options import CpuOptions
    a = mlir_to_llvm_ir(K.matmul(64, 128, 96), "mm", CpuOptions.resolve(threads=2, matmul="schedule")).llvm_ir
    b = mlir_to_llvm_ir(K.sigmoid_chain((32, 256)), "chain", CpuOptions.resolve(threads=1, matmul="schedule")).llvm_ir
    print(hashlib.sha256((a + b).encode()).hexdigest())
""")


def test_llvm_ir_is_deterministic_across_processes():
    outs = []
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", _DET.format(here=HERE)], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout.strip())
    assert outs[0] == outs[1] and len(outs[0]) == 64
    assert mlir_to_llvm_ir(K.matmul(64, 128, 96), "mm", CpuOptions.resolve(threads=2, matmul="schedule")).llvm_ir.startswith("; ModuleID")


_WARM = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, {here!r})
    from mind.compiler.backend.cpu.engine import compile_kernel
    from mind.compiler.backend.cpu.options import CpuOptions
    text = open({path!r}).read()
    k = compile_kernel(text, "mm", CpuOptions.resolve(threads=2))
    a = np.ones((64, 32), np.float32); b = np.ones((32, 48), np.float32)
    assert (k(a, b) == 32).all()
    print(k.from_cache, "mlir" in sys.modules)
""")


def test_cache_second_process_is_warm(tmp_path):
    path = tmp_path / "mm.mlir"
    path.write_text(K.matmul(64, 32, 48))
    env = dict(os.environ, MIND_CACHE_DIR=str(tmp_path / "cache"))
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", _WARM.format(here=HERE, path=str(path))], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        runs.append(r.stdout.split())
    assert runs[0][0] == "False" and runs[1][0] == "True"
    assert runs[1][1] == "False"  # a warm start never imports MLIR (its speed: benchmarks/cpu.py)
    cache = KernelCache(str(tmp_path / "cache"))
    entries = [f for d in os.listdir(cache.root) for f in os.listdir(os.path.join(cache.root, d))]
    assert not [f for f in entries if f.startswith(".tmp")]


def test_importing_mind_does_not_import_mlir():
    r = subprocess.run([sys.executable, "-c", "import sys, mind, mind.compiler.backend.cpu.engine; "
                        "print('mlir' in sys.modules, 'llvmlite' in sys.modules)"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


_WARM_FN = textwrap.dedent("""
    import sys, numpy as np
    sys.path.insert(0, {here!r})
    import mind.compiler.backend.linalg.emit as E
    from mind.compiler.backend.cpu import api
    from mind.ir.parser import parse_module
    fn = parse_module("func @f(%a: f32[B, 3], %b: f32[B, 3]) -> (f32[B, 3]) {{\\n"
                      "  %c = add(%a, %b) : f32[B, 3]\\n  return %c\\n}}\\n", "<t>").functions[0]
    calls = []
    orig = E.emit_mlir
    api.emit_mlir = lambda *a, **k: (calls.append(1), orig(*a, **k))[1]
    r = api.compile_function(fn, threads=1, schedule={sched})
    out = r([np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)])[0]
    assert (out == 2).all()
    print(next(iter(r._kernels.values())).from_cache, len(calls))
""")


def test_warm_start_by_core_ir_key_skips_mlir_emission(tmp_path):
    env = dict(os.environ, MIND_CACHE_DIR=str(tmp_path / "cache"))

    def run(sched: bool) -> list[str]:
        r = subprocess.run([sys.executable, "-c", _WARM_FN.format(here=HERE, sched=sched)], env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()
    assert run(True) == ["False", "1"]   # cold: emitted, compiled, stored under both keys
    assert run(True) == ["True", "0"]    # warm: hit by the Core-IR key, no MLIR emitted
    # other options miss the alias; the MLIR-text key may still hit, and then records the alias
    first = run(False)
    assert first[1] == "1"
    assert run(False) == ["True", "0"]


@pytest.mark.parametrize("fingerprint", ["toolchain", "source"])
def test_cache_keys_change_with_the_backend_sources_and_toolchain(monkeypatch, fingerprint):
    """Both keys cover the backend's own sources: an edited schedule (``conv_schedule.py``, say)
    acts on the same MLIR text, so the MLIR-text key must miss as well as the Core-IR one."""
    from mind.compiler.backend.cpu import cache, host
    options = CpuOptions.resolve(threads=1, cpu="host")

    def keys() -> tuple[str, str]:
        return (cache.mlir_cache_key("module {}", "f", options.fingerprint()),
                cache.ir_cache_key("func", {}, options.fingerprint()))
    before = keys()
    getattr(host, f"{fingerprint}_fingerprint")()  # computed and memoized ...
    monkeypatch.setitem(host._FACTS, fingerprint, "edited")  # ... then as if the files had changed
    after = keys()
    assert before[0] != after[0] and before[1] != after[1]
