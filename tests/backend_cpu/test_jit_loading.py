"""In-process loading of new kernels (``codegen.JitObject``: LLVM's ORC JIT with JITLink).

Why these tests: the loader before it (MCJIT) mapped a kernel's code and its constants separately
wherever the address space had room; in a long benchmark process they landed more than 2 GiB apart
and LLVM aborted the process.  ``_SCATTER`` builds that address space on purpose: every free
page-sized hole 3 GiB from the next and nothing free above them, so consecutive small mappings land
3 GiB apart (the test checks that first).  MCJIT aborted there on a function reading one constant.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kernels as K

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

_SCATTER = textwrap.dedent("""
    import ctypes
    PAGE, GAP, HOLES = 4096, 3 << 30, 12
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    PRIVATE, ANONYMOUS, NORESERVE, FIXED_NOREPLACE = 0x2, 0x20, 0x4000, 0x100000

    def reserve(addr, size):
        flags = PRIVATE | ANONYMOUS | NORESERVE | (FIXED_NOREPLACE if addr else 0)
        p = libc.mmap(addr, size, 0, flags, -1, 0)  # PROT_NONE: address space only
        assert p not in (None, ctypes.c_void_p(-1).value) and (not addr or p == addr), (hex(addr or 0), size)
        return p

    def mappings():
        with open("/proc/self/maps") as f:
            rows = [line.split() for line in f]
        return [(*(int(x, 16) for x in r[0].split("-")), r[5] if len(r) > 5 else "") for r in rows]

    base = reserve(None, HOLES * GAP)
    top = base + HOLES * GAP
    maps = mappings()
    for (_, hi, _), (lo, _, name) in zip(maps, maps[1:]):
        if hi >= top and lo > hi and name != "[stack]" and lo < (1 << 47):  # the stack keeps room to grow
            reserve(hi, lo - hi)
    for k in range(HOLES):
        libc.munmap(base + k * GAP + GAP // 2, PAGE)
    a = libc.mmap(None, PAGE, 3, PRIVATE | ANONYMOUS, -1, 0)
    b = libc.mmap(None, PAGE, 3, PRIVATE | ANONYMOUS, -1, 0)
    assert abs(a - b) >= 2 << 30, "the address space is not scattered: the test would prove nothing"
""")

_KERNELS = textwrap.dedent("""
    import numpy as np
    import mind
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 300)).astype(np.float32)
    softmax = mind.compile("fn f(x: Tensor<f32, [64, 300]>) -> Tensor<f32, [64, 300]> {{ return softmax(x, axis=1); }}",
                           fn="f", threads=2, cache=False, jit=True)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(softmax(x), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    w = rng.standard_normal((300, 96)).astype(np.float32)
    mm = mind.compile("fn f(x: Tensor<f32, [64, 300]>, w: Tensor<f32, [300, 96]>) -> Tensor<f32, [64, 96]> "
                      "{{ return tanh(matmul(x, w)); }}", fn="f", threads=2, cache=False, jit=True)
    # against float64: its 300-term f32 dot products are 1.2e-5 off it here, and numpy's f32 GEMM as
    # much the other way (1.6e-5 apart on an AVX2-only host: a bound of 1e-5 failed there)
    np.testing.assert_allclose(mm(x, w), np.tanh(x.astype(np.float64) @ w), rtol=1e-4, atol=5e-5)
    from mind.compiler.backend.cpu import codegen
    parts = []
    emit = codegen.optimize_and_emit_objects
    codegen.optimize_and_emit_objects = lambda *a: (lambda objs: parts.append(len(objs)) or objs)(emit(*a))
    train = ({train!r})
    args = [rng.standard_normal(s).astype(np.float32) for s in [(64, 96), (64, 10), (96, 80), (80, 10)]]
    split = mind.compile(train, fn="step", threads=2, cache=False, jit=True)(*args)
    assert parts[-1] == 2, "the train step was meant to compile in two parts"
    whole = mind.compile(train, fn="step", threads=1, cache=False, jit=True)(*args)
    assert parts[-1] == 1
    for a, b in zip(split, whole):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    print("ok")
""")


_TRAIN = K.TRAIN_STEP


def _run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, MIND_CACHE="off"), cwd=ROOT)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="builds the address space with Linux's mmap")
def test_kernels_load_and_run_in_a_scattered_address_space():
    """Constants, OpenMP regions, the heap object, the prebuilt GEMM and a kernel split in two parts,
    each loaded where every small mapping lands 3 GiB from the previous one: the results are right
    and the process does not abort."""
    r = _run("import llvmlite.binding, mlir.ir\n" + _SCATTER + _KERNELS.format(train=_TRAIN))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_kernels_of_the_same_name_load_side_by_side():
    """Each kernel is a JIT library of its own: two functions both named ``f`` do not clash."""
    import mind
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    double = mind.compile("fn f(x: Tensor<f32, [3, 4]>) -> Tensor<f32, [3, 4]> { return x * 2.0; }",
                          fn="f", cache=False, jit=True)
    plus = mind.compile("fn f(x: Tensor<f32, [3, 4]>) -> Tensor<f32, [3, 4]> { return x + 1.0; }",
                        fn="f", cache=False, jit=True)
    np.testing.assert_array_equal(double(x), x * 2)
    np.testing.assert_array_equal(plus(x), x + 1)
    np.testing.assert_array_equal(double(x), x * 2)


def test_a_symbol_that_is_not_defined_cannot_be_exported():
    """Asking for a symbol no object defines is a ``CodegenError`` naming it, never a crash; a symbol
    defined but not exported has address 0."""
    from mind.compiler.backend.cpu import codegen
    obj = codegen.optimize_and_emit_object("define i32 @seven() {\n  ret i32 7\n}\n", "host", "fast")
    with pytest.raises(codegen.CodegenError, match="nowhere"):
        codegen.JitObject(obj, exports=["seven", "nowhere"])
    jit = codegen.JitObject(obj, exports=["seven"])
    import ctypes
    assert ctypes.CFUNCTYPE(ctypes.c_int32)(jit.address("seven"))() == 7
    assert codegen.JitObject(obj).address("seven") == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_compiles_and_loads_new_kernels():
    """The process's one JIT outlives a fork: a child compiles and loads a kernel of its own after the
    parent loaded one (a JIT with threads of its own would wait forever in the child)."""
    script = textwrap.dedent("""
        import os, numpy as np, mind
        x = np.arange(8, dtype=np.float32)
        assert (mind.compile("fn f(x: Tensor<f32, [8]>) -> Tensor<f32, [8]> { return x + 1.0; }",
                             fn="f", cache=False, jit=True)(x) == x + 1).all()
        pid = os.fork()
        if pid == 0:
            ok = (mind.compile("fn f(x: Tensor<f32, [8]>) -> Tensor<f32, [8]> { return x * 3.0; }",
                               fn="f", cache=False, jit=True)(x) == x * 3).all()
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        print("ok" if os.waitstatus_to_exitcode(status) == 0 else "child failed")
    """)
    r = _run(script)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
