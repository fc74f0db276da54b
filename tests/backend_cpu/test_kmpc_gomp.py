"""The ``__kmpc_*`` subset defined on libgomp (``kmpc_gomp``): what it accepts, and its semantics
checked by running hand-written modules (work sharing, team size, argument passing) and compiled
kernels under both OpenMP ABIs."""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kernels as K
from mind.compiler.backend.cpu import kmpc_gomp, openmp
from mind.compiler.backend.cpu.options import CpuOptions
from mind.diagnostics import MindError

HERE = os.path.dirname(os.path.abspath(__file__))
GOMP = openmp.runtime_path("gomp")
needs_gomp = pytest.mark.skipif(GOMP is None, reason="GCC's libgomp is not installed")

# What MLIR's OpenMP lowering emits for one parallel loop (abridged from a 2-thread matmul).
_MLIR_LIKE = """\
@0 = private unnamed_addr constant [23 x i8] c";unknown;unknown;0;0;;\\00", align 1
@1 = private unnamed_addr constant %struct.ident_t { i32 0, i32 2, i32 0, i32 22, ptr @0 }, align 8
define void @f(ptr %arg) {
  %g = call i32 @__kmpc_global_thread_num(ptr @1)
  call void @__kmpc_push_num_threads(ptr @1, i32 %g, i32 {threads})
  call void (ptr, i32, ptr, ...) @__kmpc_fork_call(ptr @1, i32 1, ptr @f..omp_par, ptr %arg)
  ret void
}
define internal void @f..omp_par(ptr noalias %tid.addr, ptr noalias %zero.addr, ptr %0) {
  %last = alloca i32, align 4
  %lb = alloca i64, align 8
  %ub = alloca i64, align 8
  %st = alloca i64, align 8
  store i64 0, ptr %lb, align 4
  store i64 31, ptr %ub, align 4
  %g = call i32 @__kmpc_global_thread_num(ptr @1)
  call void @__kmpc_for_static_init_8u(ptr @1, i32 %g, i32 {sched}, ptr %last, ptr %lb, ptr %ub, ptr %st, i64 1, i64 {chunk})
  call void @__kmpc_for_static_fini(ptr @1, i32 %g)
  call void @__kmpc_barrier(ptr @1, i32 %g)
  ret void
}
declare i32 @__kmpc_global_thread_num(ptr)
declare void @__kmpc_push_num_threads(ptr, i32, i32)
declare void @__kmpc_for_static_init_8u(ptr, i32, i32, ptr, ptr, ptr, ptr, i64, i64)
declare void @__kmpc_for_static_fini(ptr, i32)
declare void @__kmpc_barrier(ptr, i32)
declare !callback !0 void @__kmpc_fork_call(ptr, i32, ptr, ...)
!0 = !{!1}
!1 = !{i64 2, i64 -1, i64 -1, i1 true}
"""
_STRUCT = "%struct.ident_t = type { i32, i32, i32, i32, ptr }\n"


def _fill(text: str, **values: object) -> str:
    """``text`` with each ``{name}`` of ``values`` replaced (LLVM IR is full of other braces)."""
    for name, value in values.items():
        text = text.replace("{" + name + "}", str(value))
    return text


def _mlir_like(threads: int = 2, sched: int = 34, chunk: int = 0) -> str:
    return _STRUCT + _fill(_MLIR_LIKE, threads=threads, sched=sched, chunk=chunk)


def test_the_emitted_subset_is_adaptable_and_calls_only_the_support_object():
    from mind.compiler.backend.cpu.runtime import external_functions
    ir = _mlir_like()
    assert kmpc_gomp.adaptable(ir)
    linked = kmpc_gomp.link_kmpc_on_gomp(ir)
    assert "__kmpc_" not in linked and "define" not in "".join(ln for ln in linked.splitlines() if "mind_kmpc_" in ln)
    assert set(external_functions(linked)) == set(kmpc_gomp.support_symbols()) - {
        "mind_kmpc_for_static_init_4u"}  # what the module uses, renamed; the definitions are prebuilt
    assert f"@{kmpc_gomp.SERIAL_SWITCH} = global i32 0" in linked  # a module that forks defines its switch
    assert kmpc_gomp.link_kmpc_on_gomp("define void @g() {\n  ret void\n}\n") == "define void @g() {\n  ret void\n}\n"


def test_the_serial_switch_is_defined_once_after_a_last_line_without_newline():
    # LLVM's printed module ends without a newline; a kernel with parallel loops that also calls the
    # threaded GEMM driver gets the definition twice over (link_kmpc_on_gomp, then bind_runtime)
    text = "declare void @llvm.memset.p0.i64(ptr, i8, i64, i1 immarg)"
    once = kmpc_gomp.define_serial_switch(text)
    twice = kmpc_gomp.define_serial_switch(once)
    assert twice == once and once.count(f"@{kmpc_gomp.SERIAL_SWITCH} = global") == 1
    assert once.splitlines()[0] == text


def test_the_support_module_needs_only_libgomp_and_the_kernels_switch():
    from mind.compiler.backend.cpu.runtime import external_functions
    text = kmpc_gomp.support_module()
    assert set(external_functions(text)) <= set(kmpc_gomp.GOMP_FUNCTIONS) | {"llvm.va_start.p0", "llvm.va_end.p0"}
    for name in kmpc_gomp.support_symbols():
        assert f"define hidden void @{name}(" in text or f"define hidden i32 @{name}(" in text
    assert f"@{kmpc_gomp.SERIAL_SWITCH} = external global" in text


@pytest.mark.parametrize("change", [
    lambda ir: ir.replace("i32 34, ptr", "i32 33, ptr"),  # static chunked schedule
    lambda ir: ir.replace("i64 1, i64 0)", "i64 1, i64 4)"),  # a chunk
    lambda ir: ir.replace("i64 1, i64 0)", "i64 2, i64 0)"),  # an increment other than 1
    lambda ir: ir.replace("i32 2)\n", "i32 %g)\n", 1),  # a team size that is not a constant
    lambda ir: ir + "declare i32 @__kmpc_reduce(ptr, i32, i32, i64, ptr, ptr, ptr)\n"
                    "define void @h() {\n  %r = call i32 @__kmpc_reduce(ptr @1, i32 0, i32 1, i64 8, ptr null, "
                    "ptr null, ptr null)\n  ret void\n}\n",  # a function the adapter does not define
    lambda ir: ir.replace("ret void\n}\ndefine internal",
                          "call void @__kmpc_push_num_threads(ptr @1, i32 %g, i32 3)\n  ret void\n}\ndefine internal",
                          1),  # two different team sizes
    lambda ir: ir.replace("ret void\n}\ndefine internal",
                          "call void (ptr, i32, ptr, ...) @__kmpc_fork_call(ptr @1, i32 0, ptr @f..omp_par)\n"
                          "  ret void\n}\ndefine internal", 1),  # a fork without a push next to one with
    lambda ir: ir.replace("i32 1, ptr @f..omp_par, ptr %arg)",
                          f"i32 {kmpc_gomp.MAX_FORK_ARGS + 1}, ptr @f..omp_par"
                          + ", ptr %arg" * (kmpc_gomp.MAX_FORK_ARGS + 1) + ")"),  # too many arguments
])
def test_anything_outside_the_subset_keeps_the_kmpc_calls(change):
    ir = change(_mlir_like())
    assert ir != _mlir_like()
    assert not kmpc_gomp.adaptable(ir)


def test_bind_runtime_falls_back_to_kmpc_or_fails_with_a_reason(monkeypatch):
    ir = _mlir_like(sched=33)
    monkeypatch.setattr(openmp, "runtime_path", lambda abi, lib=None: "/x/libiomp5.so" if abi == "kmpc" else "/x/libgomp.so.1")
    assert openmp.bind_runtime(ir, "gomp") == (ir, "kmpc")
    text, abi = openmp.bind_runtime(_mlir_like(), "gomp")
    assert abi == "gomp" and "@mind_kmpc_fork_call(ptr @1" in text and "@__kmpc_" not in text
    assert openmp.bind_runtime("define void @g() {\n  ret void\n}\n", "gomp")[1] is None
    monkeypatch.setattr(openmp, "runtime_path", lambda abi, lib=None: None if abi == "kmpc" else "/x/libgomp.so.1")
    with pytest.raises(openmp.OpenMPUnavailable, match="LLVM/Intel OpenMP runtime"):
        openmp.bind_runtime(ir, "gomp")


def test_the_abi_choice_follows_the_option_and_the_environment(monkeypatch):
    monkeypatch.delenv("MIND_OPENMP_LIB", raising=False)
    monkeypatch.setenv("MIND_OPENMP", "kmpc")
    assert CpuOptions.resolve().abi == ("kmpc" if openmp.runtime_path("kmpc") else None)
    assert CpuOptions.resolve(openmp="gomp").abi == ("gomp" if GOMP else None)  # the keyword wins
    monkeypatch.setenv("MIND_OPENMP", "gomp")
    assert CpuOptions.resolve().abi == ("gomp" if GOMP else None)
    monkeypatch.delenv("MIND_OPENMP")
    assert CpuOptions.resolve().abi == ("gomp" if GOMP else "kmpc" if openmp.runtime_path("kmpc") else None)
    monkeypatch.setenv("MIND_OPENMP", "iomp")
    with pytest.raises(MindError, match="E7002"):
        CpuOptions.resolve()


# ---------------------------------------------------------------- semantics, run through libgomp

_PROBE = """\
@loc = private constant [8 x i8] zeroinitializer
@count = internal global i64 0

define internal void @share(ptr %gtid, ptr %btid, ptr %out, ptr %tripp) {
  %trip = load {t}, ptr %tripp
  %lbp = alloca {t}
  %ubp = alloca {t}
  %stp = alloca {t}
  %lastp = alloca i32
  store {t} 0, ptr %lbp
  %ub = sub {t} %trip, 1
  store {t} %ub, ptr %ubp
  store {t} 1, ptr %stp
  %g = call i32 @__kmpc_global_thread_num(ptr @loc)
  call void @__kmpc_for_static_init_{suffix}(ptr @loc, i32 %g, i32 34, ptr %lastp, ptr %lbp, ptr %ubp, ptr %stp, {t} 1, {t} 0)
  %lb2 = load {t}, ptr %lbp
  %ub2 = load {t}, ptr %ubp
  %last = load i32, ptr %lastp
  call void @__kmpc_for_static_fini(ptr @loc, i32 %g)
  call void @__kmpc_barrier(ptr @loc, i32 %g)
  %tid = load i32, ptr %gtid
  %nth = call i32 @omp_get_num_threads()
  %row = mul i32 %tid, 4
  %p0 = getelementptr i64, ptr %out, i32 %row
  %lbw = zext {t} %lb2 to i64
  store i64 %lbw, ptr %p0
  %p1 = getelementptr i64, ptr %p0, i32 1
  %ubw = zext {t} %ub2 to i64
  store i64 %ubw, ptr %p1
  %p2 = getelementptr i64, ptr %p0, i32 2
  %lastw = zext i32 %last to i64
  store i64 %lastw, ptr %p2
  %p3 = getelementptr i64, ptr %p0, i32 3
  %nthw = zext i32 %nth to i64
  store i64 %nthw, ptr %p3
  ret void
}

define internal void @none(ptr %gtid, ptr %btid) {
  %old = atomicrmw add ptr @count, i64 1 seq_cst
  ret void
}

define internal void @three(ptr %gtid, ptr %btid, ptr %a, ptr %b, ptr %c) {
  %o1 = atomicrmw add ptr %a, i64 1 seq_cst
  %o2 = atomicrmw add ptr %b, i64 10 seq_cst
  %o3 = atomicrmw add ptr %c, i64 100 seq_cst
  ret void
}

define void @probe(ptr %out, ptr %tripp) {
  %g = call i32 @__kmpc_global_thread_num(ptr @loc)
{push}
  call void (ptr, i32, ptr, ...) @__kmpc_fork_call(ptr @loc, i32 2, ptr @share, ptr %out, ptr %tripp)
  ret void
}

define i64 @count_none() {
  store i64 0, ptr @count
{push}
  call void (ptr, i32, ptr, ...) @__kmpc_fork_call(ptr @loc, i32 0, ptr @none)
  %n = load i64, ptr @count
  ret i64 %n
}

define void @add_three(ptr %a, ptr %b, ptr %c) {
{push}
  call void (ptr, i32, ptr, ...) @__kmpc_fork_call(ptr @loc, i32 3, ptr @three, ptr %a, ptr %b, ptr %c)
  ret void
}

declare i32 @omp_get_num_threads()
declare i32 @__kmpc_global_thread_num(ptr)
declare void @__kmpc_push_num_threads(ptr, i32, i32)
declare void @__kmpc_for_static_init_{suffix}(ptr, i32, i32, ptr, ptr, ptr, ptr, {t}, {t})
declare void @__kmpc_for_static_fini(ptr, i32)
declare void @__kmpc_barrier(ptr, i32)
declare void @__kmpc_fork_call(ptr, i32, ptr, ...)
"""

_JITS: dict = {}


def _probe(threads: int | None, bits: int):
    """The probe module for a team of ``threads`` (pushed before every fork; None: no push, libgomp's
    default team), its loop counter ``bits`` wide, adapted and loaded in-process against libgomp
    with the prebuilt support object."""
    key = (threads, bits)
    if key not in _JITS:
        from mind.compiler.backend.cpu.codegen import JitObject, optimize_and_emit_objects
        from mind.compiler.backend.cpu.kernel_library import object_bytes
        from mind.compiler.backend.cpu.runtime import external_functions
        push = "" if threads is None else f"  call void @__kmpc_push_num_threads(ptr @loc, i32 0, i32 {threads})"
        ir = _fill(_PROBE, t=f"i{bits}", suffix="4u" if bits == 32 else "8u", push=push)
        ir = re.sub(r"zext i64 (%\w+) to i64", r"add i64 \1, 0", ir)  # a 64-bit counter needs no widening
        assert kmpc_gomp.adaptable(ir)
        linked = kmpc_gomp.link_kmpc_on_gomp(ir)
        openmp.load_openmp_runtime("gomp")
        support = object_bytes("openmp-gomp")  # the prebuilt definitions
        externals = set(external_functions(linked)) - set(kmpc_gomp.support_symbols()) | set(kmpc_gomp.GOMP_FUNCTIONS)
        _JITS[key] = JitObject(optimize_and_emit_objects(linked, "host", "fast") + [support], [GOMP],
                               sorted(externals), ["probe", "count_none", "add_three"])
    return _JITS[key]


def _expected_blocks(trip: int, nth: int) -> list[tuple[int, int]]:
    """[start, stop) of each thread: contiguous blocks, the first ``trip % nth`` one longer."""
    q, r = divmod(trip, nth)
    out, start = [], 0
    for t in range(nth):
        n = q + (t < r)
        out.append((start, start + n))
        start += n
    return out


@needs_gomp
@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_static_work_sharing_partitions_every_trip_count(threads, bits):
    jit = _probe(threads, bits)
    probe = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(jit.address("probe"))
    ctype = ctypes.c_uint32 if bits == 32 else ctypes.c_uint64
    for trip in [0, 1, 2, 3, 4, 5, 7, 8, 31, 32, 33, 1000]:
        out = np.full((threads, 4), -1, dtype=np.int64)
        t = ctype(trip)
        probe(out.ctypes.data, ctypes.addressof(t))
        assert (out[:, 3] == threads).all(), "team size"
        mask = (1 << bits) - 1
        for tid, (start, stop) in enumerate(_expected_blocks(trip, threads)):
            lb, ub, last = int(out[tid, 0]), int(out[tid, 1]), int(out[tid, 2])
            assert lb == start, (trip, tid)
            assert ((ub - lb + 1) & mask) == stop - start, (trip, tid)  # the loop's trip count afterwards
            assert last == int(stop == trip and stop > start), (trip, tid)


@needs_gomp
@pytest.mark.parametrize("threads", [None, 3])
def test_fork_call_passes_zero_or_several_arguments_to_every_thread(threads):
    jit = _probe(threads, 64)
    count = ctypes.CFUNCTYPE(ctypes.c_int64)(jit.address("count_none"))
    nth = count()
    assert nth == (threads or nth) and nth >= 1  # the pushed team, or libgomp's default one
    assert nth == count()
    add = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(jit.address("add_three"))
    cells = np.zeros(3, dtype=np.int64)
    add(cells.ctypes.data, cells.ctypes.data + 8, cells.ctypes.data + 16)
    assert list(cells) == [nth, 10 * nth, 100 * nth]


@needs_gomp
def test_the_support_functions_stay_inside_each_kernel_library(tmp_path):
    """Hidden in the object: a kernel's library exports its serial switch but none of the
    ``mind_kmpc_*`` functions, so two kernels (or a real LLVM/Intel runtime) never bind to each
    other's."""
    from mind.compiler.backend.cpu.engine import compile_kernel
    if CpuOptions.resolve().abi != "gomp":
        pytest.skip("libgomp is not the preferred runtime here")
    kern = compile_kernel(K.sigmoid_chain((128, 256)), "chain", CpuOptions.resolve(threads=2, cache=False, jit=False))
    lib = ctypes.CDLL(kern.library_path)
    assert ctypes.c_int32.in_dll(lib, kmpc_gomp.SERIAL_SWITCH).value == 0
    for name in kmpc_gomp.support_symbols():
        assert not hasattr(lib, name), name
    x = np.linspace(-3, 3, 128 * 256, dtype=np.float32).reshape(128, 256)
    np.testing.assert_allclose(kern(x), 1 / (1 + np.exp(-np.maximum(x, 0) * 2 - 1)), rtol=1e-5)


# ---------------------------------------------------------------- compiled kernels, both ABIs

_KERNEL = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    import kernels as K
    import numpy as np
    from mind.compiler.backend.cpu.engine import compile_kernel
    from mind.compiler.backend.cpu.options import CpuOptions
    rng = np.random.default_rng(0)
    a = rng.standard_normal((96, 256)).astype(np.float32)
    b = rng.standard_normal((256, 160)).astype(np.float32)
    x = np.linspace(-3, 3, 96 * 512, dtype=np.float32).reshape(96, 512)
    mm = compile_kernel(K.matmul(96, 256, 160), "mm", CpuOptions.resolve(threads=3, cache=False))
    ch = compile_kernel(K.sigmoid_chain((96, 512)), "chain", CpuOptions.resolve(threads=2, cache=False))
    np.save(sys.stdout.buffer, np.concatenate([mm(a, b).ravel(), ch(x).ravel()]))
    maps = open("/proc/self/maps").read()
    sys.stderr.write("RUNTIMES " + " ".join(n for n in ("libgomp", "libiomp5", "libomp.so") if n in maps))
""")


def _run_kernels(abi: str) -> tuple[np.ndarray, str]:
    import io
    env = dict(os.environ, MIND_OPENMP=abi)
    env.pop("MIND_OPENMP_LIB", None)
    r = subprocess.run([sys.executable, "-c", _KERNEL.format(here=HERE)], env=env, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return np.load(io.BytesIO(r.stdout)), r.stderr.decode().rsplit("RUNTIMES", 1)[1]


@needs_gomp
def test_kernels_compute_the_same_bits_under_both_runtimes():
    """Each thread computes whole tiles, so the partition of the tiles cannot change a result."""
    if openmp.runtime_path("kmpc") is None:
        pytest.skip("no LLVM/Intel OpenMP runtime to compare with")
    with_gomp, loaded_g = _run_kernels("gomp")
    with_kmpc, loaded_k = _run_kernels("kmpc")
    assert "libgomp" in loaded_g and "libiomp5" not in loaded_g and "libomp.so" not in loaded_g
    assert "libiomp5" in loaded_k or "libomp.so" in loaded_k
    np.testing.assert_array_equal(with_gomp, with_kmpc)


def test_threaded_cache_keys_name_the_abi():
    from mind.compiler.backend.cpu.cache import ir_cache_key
    keys = {}
    for abi in ("gomp", "kmpc"):
        options = CpuOptions.resolve(cpu="generic").replace(abi=abi)
        keys[abi] = [ir_cache_key("fn", {}, options.replace(threads=t).fingerprint()) for t in (1, 2)]
    assert keys["gomp"][0] == keys["kmpc"][0]  # one thread: no OpenMP call, the same object code
    assert keys["gomp"][1] != keys["kmpc"][1]


@needs_gomp
def test_loading_libgomp_leaves_the_environment_as_it_was():
    code = ("import os; from mind.compiler.backend.cpu import openmp; openmp.load_openmp_runtime('gomp'); "
            "print(os.environ.get('GOMP_SPINCOUNT'))")
    env = {k: v for k, v in os.environ.items() if k not in openmp.GOMP_SPIN_VARS}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "None"


# ---------------------------------------------------------------- fork safety

_FORK = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {here!r})
    import kernels as K
    import numpy as np
    from mind.compiler.backend.cpu.cache import KernelCache
    from mind.compiler.backend.cpu.engine import compile_kernel
    from mind.compiler.backend.cpu import openmp
    from mind.compiler.backend.cpu.options import CpuOptions
    cached, uncached = CpuOptions.resolve(threads=2, cache=KernelCache({cache!r})), CpuOptions.resolve(threads=2, cache=False)
    x = np.linspace(-3, 3, 128 * 256, dtype=np.float32).reshape(128, 256)
    jit = compile_kernel(K.sigmoid_chain((128, 256)), "chain", cached)  # MCJIT
    jit.wait_stored(60)
    so = compile_kernel(K.sigmoid_chain((128, 256)), "chain", cached)  # the cached .so
    assert so.from_cache and not jit.from_cache
    want = jit(x)  # libgomp's threads exist from here on
    a = x[:, :128].copy()
    mm = compile_kernel(K.matmul(128, 128, 256), "mm", uncached)  # the threaded GEMM driver
    want_mm = mm(a, x)
    pid = os.fork()
    if pid == 0:
        ok = openmp.serial_after_fork() == (cached.abi == "gomp")
        ok = ok and np.array_equal(jit(x), want) and np.array_equal(so(x), want)
        late = compile_kernel(K.sigmoid_chain((64, 256)), "chain", uncached)  # new in the child
        ok = ok and np.array_equal(late(x[:64]), want[:64]) and np.array_equal(mm(a, x), want_mm)
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), openmp.serial_after_fork(), np.array_equal(jit(x), want))
""")


@pytest.mark.parametrize("abi", ["gomp", "kmpc"])
def test_a_forked_child_runs_threaded_kernels(tmp_path, abi):
    """libgomp's threads do not survive a fork: without the serial switch the child's first parallel
    region waits forever (the test would time out); Intel OpenMP with ``KMP_AFFINITY=disabled``
    aborted the child.  Kernels loaded before the fork (in-process and from a .so) and compiled
    after it all compute the parent's results; the parent stays threaded."""
    if openmp.runtime_path(abi) is None:
        pytest.skip(f"no OpenMP runtime with the {abi} ABI")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KMP_", "OMP_", "GOMP_", "MIND_OPENMP"))}
    env["MIND_OPENMP"] = abi
    r = subprocess.run([sys.executable, "-c", _FORK.format(here=HERE, cache=str(tmp_path / "cache"))], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "False", "True"]


def test_split_modules_define_the_serial_switch_once():
    from mind.compiler.backend.cpu.llvm_split import split_module
    body = "\n".join(f"  %v{i} = add i64 %x, {i}" for i in range(150))
    ir = (_STRUCT + _fill(_MLIR_LIKE, threads=2, sched=34, chunk=0)
          + "".join(f"define i64 @big{j}(i64 %x) {{\n{body}\n  ret i64 %v149\n}}\n" for j in range(2)))
    linked = kmpc_gomp.link_kmpc_on_gomp(ir)
    parts = split_module(linked, min_lines=100)
    assert parts is not None and len(parts) == 2
    defs = [p.count(f"@{kmpc_gomp.SERIAL_SWITCH} = global i32 0") for p in parts]
    decls = [p.count(f"@{kmpc_gomp.SERIAL_SWITCH} = external global i32") for p in parts]
    assert sorted(defs) == [0, 1] and all(d + e <= 1 for d, e in zip(defs, decls))
    assert split_module(linked.replace(f"@{kmpc_gomp.SERIAL_SWITCH} = global", f"@{kmpc_gomp.SERIAL_SWITCH} = internal global"),
                        min_lines=100) is None  # an internal mutable global still keeps a module whole
