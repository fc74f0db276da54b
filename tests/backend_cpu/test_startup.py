"""Start-up paths of the CPU backend: in-process JIT vs linked .so, background cache writes, the
shared MLIR context, LLVM optimization levels, warm starts without MLIR, and ``out=``."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

import kernels as K
import mind
from mind.compiler.backend.cpu.api import compile_function
from mind.compiler.backend.cpu.cache import KernelCache
from mind.compiler.backend.cpu.engine import compile_kernel, mlir_to_llvm_ir, wait_for_cache_writes
from mind.compiler.backend.cpu.options import CpuOptions
from mind.diagnostics import MindError
from mind.ir.parser import parse_module

HERE = os.path.dirname(__file__)


def _entries(root: str) -> list[str]:
    return sorted(os.path.join(d, f) for d in os.listdir(root) for f in os.listdir(os.path.join(root, d)))


@pytest.mark.parametrize("threads", [1, 2])
def test_jit_and_shared_library_give_identical_results(threads):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((96, 200), dtype=np.float32)
    b = rng.standard_normal((200, 48), dtype=np.float32)
    x = rng.standard_normal((64, 256), dtype=np.float32) * 4
    for text, name, args in ((K.matmul(96, 200, 48), "mm", (a, b)), (K.sigmoid_chain((64, 256)), "chain", (x,))):
        kj = compile_kernel(text, name, CpuOptions.resolve(threads=threads, cache=False, jit=True))
        ks = compile_kernel(text, name, CpuOptions.resolve(threads=threads, cache=False, jit=False))
        assert kj.library_path == "" and ks.library_path.endswith(".so")
        np.testing.assert_array_equal(kj(*args), ks(*args))


def test_background_store_publishes_the_same_artifacts_as_linking(tmp_path):
    text = K.matmul(32, 64, 16)
    jit_cache, so_cache = KernelCache(str(tmp_path / "jit")), KernelCache(str(tmp_path / "so"))
    kj = compile_kernel(text, "mm", CpuOptions.resolve(threads=2, cache=jit_cache, jit=True))
    assert not kj.from_cache
    assert kj.wait_stored(60)
    assert wait_for_cache_writes(60)
    ks = compile_kernel(text, "mm", CpuOptions.resolve(threads=2, cache=so_cache, jit=False))
    assert _entries(jit_cache.root) == _entries(so_cache.root)  # same keys, nothing temporary left
    for rel in _entries(jit_cache.root):
        with open(os.path.join(jit_cache.root, rel), "rb") as f1, open(os.path.join(so_cache.root, rel), "rb") as f2:
            assert f1.read() == f2.read(), rel  # byte-identical .so and sidecar
    assert kj.library_path == ks.library_path.replace(str(tmp_path / "so"), str(tmp_path / "jit"))
    hit = compile_kernel(text, "mm", CpuOptions.resolve(threads=2, cache=jit_cache))
    assert hit.from_cache
    a = np.ones((32, 64), np.float32)
    b = np.ones((64, 16), np.float32)
    np.testing.assert_array_equal(hit(a, b), kj(a, b))


def test_background_links_run_at_the_lowest_priority(monkeypatch):
    """The cache's background ``ld`` must not take a core from the kernel's first call: it runs at
    nice 19; a link someone waits for keeps the caller's priority."""
    from mind.compiler.backend.cpu import codegen
    seen = []
    real = codegen._lowest_priority

    def spy(pid):  # which links ask for it (its effect is checked on a process that lives long enough)
        seen.append(pid)
        real(pid)
    monkeypatch.setattr(codegen, "_lowest_priority", spy)
    objs = codegen.optimize_and_emit_objects("define void @f() {\n  ret void\n}\n", "generic", "fast")
    with tempfile.TemporaryDirectory() as d:
        codegen.link_shared(objs, os.path.join(d, "fg.so"))
        assert seen == []
        codegen.link_shared(objs, os.path.join(d, "bg.so"), background=True)
        assert len(seen) == 1 and seen[0] > 0
        assert os.path.getsize(os.path.join(d, "bg.so")) == os.path.getsize(os.path.join(d, "fg.so"))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        real(sleeper.pid)
        assert os.getpriority(os.PRIO_PROCESS, sleeper.pid) == 19
    finally:
        sleeper.kill()
        sleeper.wait()


def test_opt_levels_agree_and_are_validated():
    x = np.random.default_rng(1).standard_normal((7, 33), dtype=np.float32)
    fast = compile_kernel(K.sigmoid_chain((7, 33)), "chain", CpuOptions.resolve(threads=1, cache=False, opt="fast"))
    full = compile_kernel(K.sigmoid_chain((7, 33)), "chain", CpuOptions.resolve(threads=1, cache=False, opt="full"))
    np.testing.assert_allclose(fast(x), full(x), rtol=4e-7, atol=0)
    with pytest.raises(MindError) as e:
        compile_kernel(K.sigmoid_chain((7, 33)), "chain", CpuOptions.resolve(threads=1, cache=False, opt="O7"))
    assert e.value.codes == ["E7002"]  # a bad option is a usage error


def test_shared_context_survives_failures_and_is_deterministic():
    first = mlir_to_llvm_ir(K.matmul(16, 32, 8), "mm", CpuOptions.resolve(threads=2, matmul="schedule")).llvm_ir
    with pytest.raises(MindError):
        compile_kernel("func.func @f(%x: tensor<4xf32>, %o: memref<4xf32>) { nope }", "f", CpuOptions.resolve(threads=1, cache=False))
    for _ in range(3):
        mlir_to_llvm_ir(K.sigmoid_chain((8, 64)), "chain", CpuOptions.resolve(threads=1, matmul="schedule"))
    assert mlir_to_llvm_ir(K.matmul(16, 32, 8), "mm", CpuOptions.resolve(threads=2, matmul="schedule")).llvm_ir == first


_WARM_API = textwrap.dedent("""
    import sys, numpy as np
    import mind
    f = mind.compile("fn main(x: Tensor<f32, [4, 8]>, w: Tensor<f32, [8, 2048]>) -> Tensor<f32, [4, 2048]> "
                     "{{ relu(matmul(x, w)) * 2.0 + 1.0 }}")
    out = np.empty((4, 2048), np.float32)
    r = f(np.ones((4, 8), np.float32), np.full((8, 2048), 0.125, np.float32), out=out)
    assert r is out and (out == 3).all()
    from mind.compiler.backend.cpu.engine import wait_for_cache_writes
    assert wait_for_cache_writes(60)
    # the prebuilt GEMM's build side (gemm_kernel) is imported only to emit calls, never on a hit; the
    # kernel is keyed on the function's text as the frontend's cache read it (no printing again)
    print("mlir" in sys.modules, "llvmlite" in sys.modules, "mind.compiler.backend.cpu.gemm_kernel" in sys.modules,
          "mind.ir.printer" in sys.modules)
""")


def test_warm_start_through_mind_compile_imports_no_mlir_or_llvmlite(tmp_path):
    env = dict(os.environ, MIND_CACHE_DIR=str(tmp_path / "cache"))
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", _WARM_API.format()], env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        runs.append(r.stdout.split())
    from mind.compiler.backend.cpu.kernel_library import host_isa
    assert runs[0] == ["True", "True", str(host_isa() is not None), "True"]  # cold: compiled (calling the GEMM)
    assert runs[1] == ["False", "False", "False", "False"]  # warm: a cache hit importing no MLIR, llvmlite, printer


def test_the_texts_the_frontend_cache_keeps_are_the_printed_ones(tmp_path, monkeypatch):
    """A function read back from the frontend's disk cache carries its canonical text (the kernel key's
    input), exactly ``print_function``'s; a text that is not one piece per function gives none."""
    from mind.compiler.frontend import cache as fcache
    from mind.ir.printer import print_function
    monkeypatch.setenv("MIND_CACHE_DIR", str(tmp_path / "cache"))
    with open(os.path.join(HERE, "..", "..", "examples", "train_mlp.mind"), encoding="utf-8") as f:
        src = f.read()
    fresh = fcache.compile_cached(src, "t.mind")
    fcache.clear()
    again = fcache.compile_cached(src, "t.mind")  # from the disk entry
    assert again is not fresh and len(again.functions) == 3
    for f in (*fresh.functions, *again.functions):
        assert f.canonical_text == print_function(f)
    odd = parse_module(fresh.text().replace("\n  return", "\n\n  return", 1), "<odd>")
    fcache._keep_function_texts(odd, fresh.text().replace("\n  return", "\n\n  return", 1))
    assert [f.canonical_text for f in odd.functions] == [None, None, None]
    assert not [e for e in _entries(str(tmp_path / "cache")) if os.path.basename(e).startswith(".")]


_SRC = "fn main(x: Tensor<f32, [2, 3]>, y: Tensor<f32, [3]>) -> Tensor<f32, [2, 3]> { relu(x) * y }"


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_out_argument(backend):
    f = mind.compile(_SRC, backend=backend, threads=1) if backend == "cpu" else mind.compile(_SRC, backend=backend)
    x = np.array([[-1, 2, 3], [4, -5, 6]], np.float32)
    y = np.array([1, 2, 3], np.float32)
    out = np.full((2, 3), np.nan, np.float32)
    r = f(x, y, out=out)
    assert r is out
    np.testing.assert_array_equal(out, np.maximum(x, 0) * y)
    np.testing.assert_array_equal(f(x, y), out)
    bad = [np.empty((3, 2), np.float32), np.empty((2, 3), np.float64), np.empty((2, 6), np.float32)[:, ::2],
           [np.empty((2, 3), np.float32)] * 2, "not an array"]
    for o in bad:
        with pytest.raises(MindError) as e:
            f(x, y, out=o)
        assert e.value.codes == ["E6009"]
    ro = np.empty((2, 3), np.float32)
    ro.flags.writeable = False
    with pytest.raises(MindError):
        f(x, y, out=ro)


def test_out_must_not_overlap_an_input():
    f = mind.compile("fn main(x: Tensor<f32, [8]>) -> Tensor<f32, [8]> { relu(x) }", threads=1)
    x = np.arange(8, dtype=np.float32) - 4
    with pytest.raises(MindError) as e:
        f(x, out=x)
    assert e.value.codes == ["E6009"]


def test_runner_out_with_several_results():
    fn = parse_module("func @f(%a: f32[4], %b: f32[4]) -> (f32[4], f32[4]) {\n"
                      "  %c = add(%a, %b) : f32[4]\n  %d = mul(%a, %b) : f32[4]\n  return %c, %d\n}\n",
                      "<t>").functions[0]
    run = compile_function(fn, threads=1)
    a, b = np.arange(4, dtype=np.float32), np.full(4, 2, np.float32)
    outs = (np.empty(4, np.float32), np.empty(4, np.float32))
    res = run([a, b], out=outs)
    assert res[0] is outs[0] and res[1] is outs[1]
    np.testing.assert_array_equal(outs[0], a + b)
    np.testing.assert_array_equal(outs[1], a * b)
    with pytest.raises(MindError):
        run([a, b], out=outs[:1])


def test_openmp_runtime_defaults_respect_the_environment(monkeypatch):
    from mind.compiler.backend.cpu import openmp
    for v in openmp._AFFINITY_VARS + openmp._BLOCKTIME_VARS:
        monkeypatch.delenv(v, raising=False)
    assert openmp.runtime_defaults() == f"KMP_AFFINITY=none|KMP_BLOCKTIME={openmp.DEFAULT_BLOCKTIME_MS}"
    monkeypatch.setenv("KMP_BLOCKTIME", "0")
    assert openmp.runtime_defaults() == "KMP_AFFINITY=none"
    monkeypatch.setenv("OMP_PROC_BIND", "close")
    assert openmp.runtime_defaults() == ""


_BLOCKTIME = textwrap.dedent("""
    import ctypes, sys
    sys.path.insert(0, {here!r})
    import kernels as K
    import numpy as np
    from mind.compiler.backend.cpu.engine import compile_kernel
    from mind.compiler.backend.cpu.openmp import runtime_path
    from mind.compiler.backend.cpu.options import CpuOptions
    k = compile_kernel(K.sigmoid_chain((64, 256)), "chain", CpuOptions.resolve(threads=2, cache=False))
    k(np.ones((64, 256), np.float32))
    print(ctypes.CDLL(runtime_path("kmpc")).kmp_get_blocktime())
""")


def _kmpc_env(**extra: str) -> dict[str, str]:
    """The environment of a child that builds for the LLVM/Intel runtime, without the user's
    OpenMP settings."""
    from mind.compiler.backend.cpu import openmp
    if openmp.runtime_path("kmpc") is None or not hasattr(ctypes.CDLL(openmp.runtime_path("kmpc")), "kmp_get_blocktime"):
        pytest.skip("no LLVM/Intel OpenMP runtime with kmp_get_blocktime")
    drop = {"KMP_BLOCKTIME", "OMP_WAIT_POLICY", "KMP_LIBRARY", "MIND_OPENMP_LIB"}
    return dict({k: v for k, v in os.environ.items() if k not in drop}, MIND_OPENMP="kmpc", **extra)


@pytest.mark.parametrize("env,expected", [({}, "1"), ({"KMP_BLOCKTIME": "0"}, "0")])
def test_openmp_blocktime_default_and_override(env, expected):
    r = subprocess.run([sys.executable, "-c", _BLOCKTIME.format(here=HERE)], env=_kmpc_env(**env),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr
    assert r.stdout.strip() == expected


_WARM_THREADED = textwrap.dedent("""
    import ctypes, os, sys
    sys.path.insert(0, {here!r})
    import kernels as K
    import numpy as np
    from mind.compiler.backend.cpu.cache import KernelCache
    from mind.compiler.backend.cpu.engine import compile_kernel
    from mind.compiler.backend.cpu import openmp
    from mind.compiler.backend.cpu.options import CpuOptions
    options = CpuOptions.resolve(threads=2, cache=KernelCache({cache!r}), jit=False)
    k = compile_kernel(K.sigmoid_chain((64, 256)), "chain", options)
    x = np.linspace(-3, 3, 64 * 256, dtype=np.float32).reshape(64, 256)
    y = k(x)
    want = 1 / (1 + np.exp(-(np.maximum(x, 0) * 2 + 1)))
    assert np.allclose(y, want, rtol=1e-5), "wrong result"
    maps = open("/proc/self/maps").read()
    loaded = [n for n in ("libgomp", "libiomp5", "libomp.so") if n in maps]
    abi = options.abi
    lib = ctypes.CDLL(openmp.runtime_path(abi))
    setting = lib.kmp_get_blocktime() if abi == "kmpc" else os.environ.get("GOMP_SPINCOUNT", "unset")
    print(k.from_cache, k.threads, abi, setting, "+".join(loaded), "mlir" in sys.modules)
""")


@pytest.mark.parametrize("abi", ["gomp", "kmpc"])
def test_warm_start_of_a_threaded_kernel_loads_its_runtime_with_mind_defaults(tmp_path, abi):
    """A threaded kernel loaded from the cache (no MLIR) loads the runtime it was built for, with
    MIND's defaults (Intel: blocktime 1 ms; libgomp: the spin count set only while it loads), before
    its first parallel region, and computes the right result."""
    from mind.compiler.backend.cpu import openmp
    if abi == "kmpc":
        env = _kmpc_env()
    else:
        if openmp.runtime_path("gomp") is None:
            pytest.skip("GCC's libgomp is not installed")
        drop = {"GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "MIND_OPENMP_LIB"}
        env = dict({k: v for k, v in os.environ.items() if k not in drop}, MIND_OPENMP="gomp")
    script = _WARM_THREADED.format(here=HERE, cache=str(tmp_path / "cache"))
    lines = []
    for _ in range(2):  # the first process compiles and stores, the second loads the .so
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        lines.append(r.stdout.split())
    setting = "1" if abi == "kmpc" else "unset"
    runtime = "libgomp" if abi == "gomp" else lines[0][4]
    assert lines[0] == ["False", "2", abi, setting, runtime, "True"]
    assert lines[1] == ["True", "2", abi, setting, runtime, "False"]
    assert runtime in ("libgomp", "libiomp5", "libomp.so")


def test_small_functions_default_to_one_thread(monkeypatch):
    from mind.compiler.backend.cpu.thread_cost import UNKNOWN_COST, kernel_cost
    monkeypatch.delenv("MIND_NUM_THREADS", raising=False)
    small = parse_module("func @f(%a: f32[B, 3], %b: f32[3, 4]) -> (f32[B, 4]) {\n"
                         "  %c = matmul(%a, %b) : f32[B, 4]\n  return %c\n}\n", "<t>").functions[0]
    assert kernel_cost(small, {"B": 2}).lane_ops == 2 * 4 * 3
    assert kernel_cost(small, {"B": 1 << 20}).lane_ops == (1 << 20) * 4 * 3
    assert kernel_cost(small, {}) == UNKNOWN_COST  # a shape it cannot read: large
    run = compile_function(small, cache=False)
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(run([a, b])[0], a @ b)
    assert run.kernel({"B": 2}).threads == 1
    assert compile_function(small, cache=False, threads=2).kernel({"B": 2}).threads in (1, 2)  # explicit: honored


def test_failed_background_store_leaves_no_entry_and_the_kernel_works(tmp_path, monkeypatch):
    from mind.compiler.backend.cpu import codegen

    def broken_link(obj, out_path, libs=None):
        raise codegen.CodegenError("linking failed: simulated")
    monkeypatch.setattr(codegen, "link_shared", broken_link)
    store = KernelCache(str(tmp_path / "cache"))
    k = compile_kernel(K.matmul(8, 16, 4), "mm", CpuOptions.resolve(threads=1, cache=store, jit=True))
    assert not k.wait_stored(60)
    a, b = np.ones((8, 16), np.float32), np.ones((16, 4), np.float32)
    np.testing.assert_array_equal(k(a, b), a @ b)
    root = tmp_path / "cache"
    assert not root.exists() or _entries(str(root)) == []
    monkeypatch.undo()
    again = compile_kernel(K.matmul(8, 16, 4), "mm", CpuOptions.resolve(threads=1, cache=store, jit=True))
    assert not again.from_cache and again.wait_stored(60)
    assert compile_kernel(K.matmul(8, 16, 4), "mm", CpuOptions.resolve(threads=1, cache=store)).from_cache


_LIGHT = textwrap.dedent("""
    import hashlib, sys
    sys.path.insert(0, {here!r})
    if {real_first}:
        import mlir.dialects.linalg
    import kernels as K
    from mind.compiler.backend.cpu.engine import compile_kernel, mlir_to_llvm_ir
    from mind.compiler.backend.cpu.options import CpuOptions
    low = mlir_to_llvm_ir(K.matmul(64, 128, 96), "mm", CpuOptions.resolve(threads=2, matmul="schedule"))
    assert low.scheduled
    real = "mlir.dialects.linalg" in sys.modules
    from mlir.dialects import linalg  # explicit imports keep working
    assert linalg.MatmulOp.OPERATION_NAME == "linalg.matmul"
    assert mlir_to_llvm_ir(K.matmul(64, 128, 96), "mm", CpuOptions.resolve(threads=2, matmul="schedule")).llvm_ir == low.llvm_ir
    print(real, hashlib.sha256(low.llvm_ir.encode()).hexdigest())
""")


def test_light_linalg_module_skips_opdsl_and_changes_nothing():
    outs = []
    for real_first in (False, True):
        r = subprocess.run([sys.executable, "-c", _LIGHT.format(here=HERE, real_first=real_first)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout.split())
    assert outs[0][0] == "False"  # the OpDSL library was never imported by the compile
    assert outs[1][0] == "True"
    assert outs[0][1] == outs[1][1]  # same LLVM IR either way


def test_a_parameter_named_out_keeps_its_keyword():
    f = mind.compile("fn main(x: Tensor<f32, [2]>, out: Tensor<f32, [2]>) -> Tensor<f32, [2]> { x * out }", threads=1)
    np.testing.assert_array_equal(f(x=np.full(2, 3, np.float32), out=np.full(2, 2, np.float32)), [6, 6])


_STORE = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    import kernels as K
    from mind.compiler.backend.cpu import codegen
    from mind.compiler.backend.cpu.engine import compile_kernel
    from mind.compiler.backend.cpu.options import CpuOptions
    n = []
    real = codegen.optimize_and_emit_objects
    codegen.optimize_and_emit_objects = lambda *a, **k: n.append(len(r := real(*a, **k))) or r
    k = compile_kernel({kernel}, CpuOptions.resolve({options}))
    print(k.from_cache, k.wait_stored(60), n)
""")


@pytest.mark.parametrize("kernel, options, parts", [
    ('K.sigmoid_chain((32, 256)), "chain"', "threads=1", "[1]"),  # one function
    # compiled in two parts on two threads (llvm_split)
    ('K.matmul(128, 256, 512), "mm"', 'threads=2, matmul="schedule"', "[2]"),
    # a call of the prebuilt threaded GEMM driver (its object and the GEMM's are linked in)
    ('K.matmul(128, 256, 512), "mm"', 'threads=2, matmul="library"', "[1]"),
    # an OpenMP loop on the prebuilt OpenMP support (linked in where libgomp runs it)
    ('K.sigmoid_chain((128, 256)), "chain"', "threads=2", "[1]"),
])
def test_cached_files_are_byte_identical_across_processes(tmp_path, kernel, options, parts):
    if CpuOptions.resolve().abi is None:
        parts = "[1]"  # one thread: one function, nothing to split
    roots = []
    for i, seed in enumerate(("0", "12345")):
        root = tmp_path / f"cache{i}"
        env = dict(os.environ, MIND_CACHE_DIR=str(root), PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", _STORE.format(here=HERE, kernel=kernel, options=options)], env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["False", "True", parts]
        roots.append(str(root))
    assert _entries(roots[0]) == _entries(roots[1]) and len(_entries(roots[0])) == 2  # .so + sidecar
    for rel in _entries(roots[0]):
        with open(os.path.join(roots[0], rel), "rb") as f1, open(os.path.join(roots[1], rel), "rb") as f2:
            assert f1.read() == f2.read(), rel


_LIGHT_WALKED = textwrap.dedent("""
    import sys
    import numpy as np
    import mind
    src = ("fn main(a: Tensor<f32, [96, 160]>, b: Tensor<f32, [160, 128]>) -> Tensor<f32, [96]> "
           "{{ sum(exp(matmul(a, b)), axes=[1]) }}")
    a, b = np.full((96, 160), 0.01, np.float32), np.full((160, 128), 0.01, np.float32)
    got = mind.compile(src, threads={threads})(a, b)
    np.testing.assert_allclose(got, np.exp(a @ b).sum(axis=1), rtol=1e-5)
    print(" ".join(sorted(m for m in sys.modules if m.startswith("mlir.dialects."))))
""")


@pytest.mark.parametrize("threads", [1, 2])
def test_cold_compile_imports_no_generated_dialect_module(threads):
    """The dialects a compile walks (math in a generic's body; memref, vector and ub in the
    bufferized module the library calls are placed in) get generic op views: their generated
    modules (milliseconds each) are not imported."""
    env = dict(os.environ, MIND_CACHE="off")
    r = subprocess.run([sys.executable, "-c", _LIGHT_WALKED.format(threads=threads)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == []
