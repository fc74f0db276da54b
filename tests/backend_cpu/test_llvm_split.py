"""Splitting an LLVM module between functions (``llvm_split``) and compiling the parts on two cores
(``codegen.optimize_and_emit_objects``): the parts are valid modules that define together what the
whole defines, anything unusual is not split, and split kernels compute what whole ones compute, by
MCJIT and by the linked library alike.  (That split libraries are byte-identical across processes is
in ``test_startup.test_cached_files_are_byte_identical_across_processes``.)"""

from __future__ import annotations

import numpy as np
import pytest

import kernels as K
from mind.compiler.backend.cpu import codegen, llvm_split
from mind.compiler.backend.cpu.cache import KernelCache
from mind.compiler.backend.cpu.engine import compile_kernel
from mind.compiler.backend.cpu.llvm_split import split_module
from mind.compiler.backend.cpu.options import CpuOptions


def _body(n: int) -> str:
    return "\n".join(f"  %v{i} = add i64 %x, {i}" for i in range(n))


MODULE = f"""; ModuleID = 'LLVMDialectModule'
source_filename = "LLVMDialectModule"

%struct.ident_t = type {{ i32, i32, i32, i32, ptr }}

@0 = private unnamed_addr constant [4 x i8] c"abc\\00", align 1
@1 = private unnamed_addr constant %struct.ident_t {{ i32 0, i32 2, i32 0, i32 3, ptr @0 }}, align 8

declare ptr @malloc(i64)

define void @entry(ptr %p, i64 %x) {{
{_body(30)}
  call void @helper(ptr %p, i64 %x)
  store ptr @1, ptr %p
  ret void
}}

define internal void @helper(ptr noalias %p, i64 %x) #0 {{
{_body(40)}
  call void @leaf(ptr %p)
  ret void
}}

define internal void @leaf(ptr %p) #0 {{
  store i64 7, ptr %p
  ret void
}}

define void @_mlir_ciface_entry(ptr %0, i64 %1) {{
  call void @entry(ptr %0, i64 %1)
  ret void
}}

attributes #0 = {{ nounwind }}

!llvm.module.flags = !{{!0}}
!0 = !{{i32 2, !"Debug Info Version", i32 3}}
"""


def _defined(text: str) -> list[str]:
    return [ln.split("@", 1)[1].split("(", 1)[0] for ln in text.splitlines() if ln.startswith("define ")]


def test_parts_define_each_function_once_and_parse():
    import llvmlite.binding as llvm
    parts = split_module(MODULE, min_lines=0)
    assert parts is not None and len(parts) == 2
    names = [n for p in parts for n in _defined(p)]
    assert sorted(names) == ["_mlir_ciface_entry", "entry", "helper", "leaf"]
    for p in parts:
        llvm.parse_assembly(p, context=llvm.create_context()).verify()
    assert split_module(MODULE, min_lines=0) == parts  # a function of the text only


def test_internal_functions_used_across_parts_become_external():
    parts = split_module(MODULE, min_lines=0)
    helper_home = next(p for p in parts if "@helper(ptr noalias %p" in p)
    other = next(p for p in parts if p is not helper_home)
    if "define void @entry" in other:  # helper called from the other part
        assert "define void @helper(" in helper_home
        assert "declare void @helper(ptr, i64)" in other
    for p in parts:  # private constants are copied into every part
        assert "@1 = private unnamed_addr constant" in p
        assert "hidden" not in p


_TRAIN = K.TRAIN_STEP


def _pc32_to_undefined(obj: bytes, readelf: str, tmp_path) -> list[str]:
    """The symbols ``obj`` does not define that it references PC-relative without a GOT or a stub."""
    import subprocess
    path = tmp_path / "part.o"
    path.write_bytes(obj)
    syms = subprocess.run([readelf, "-sW", str(path)], capture_output=True, text=True, check=True).stdout
    undefined = {f[7] for f in (ln.split() for ln in syms.splitlines()) if len(f) >= 8 and f[6] == "UND"}
    rels = subprocess.run([readelf, "-rW", str(path)], capture_output=True, text=True, check=True).stdout
    return sorted({f[4] for f in (ln.split() for ln in rels.splitlines())
                   if len(f) >= 5 and f[2] == "R_X86_64_PC32" and f[4] in undefined})


def test_parts_reach_each_other_only_through_got_entries_and_stubs(monkeypatch, tmp_path):
    # MCJIT loads each part where its memory manager finds room: a PC-relative reference from one
    # part to a function of another (the entry passing a hidden outlined function to the OpenMP
    # fork call) could not be resolved when they landed more than 2 GiB apart, and RuntimeDyldELF
    # asserted (the 54th kernel of a benchmark run, torch and jax loaded: the process aborted).
    import shutil
    import mind
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("no readelf (binutils) on this machine")
    loaded: list[list[bytes]] = []
    real = codegen.JitObject

    def spy(objs, *a, **k):
        loaded.append([objs] if isinstance(objs, bytes) else list(objs))
        return real(objs, *a, **k)

    monkeypatch.setattr(codegen, "JitObject", spy)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(64, 96), (64, 10), (96, 80), (80, 10)]]
    mind.compile(_TRAIN, fn="step", threads=2, cache=False, jit=True)(*args)
    assert loaded, "the kernel was not loaded in-process"
    parts = [o for o in loaded[-1] if o.startswith(b"\x7fELF")]
    assert len(parts) >= 3, "expected two kernel parts and the library objects"
    for obj in parts:
        assert _pc32_to_undefined(obj, readelf, tmp_path) == []


@pytest.mark.parametrize("change, why", [
    (lambda t: t.replace("@0 = private unnamed_addr constant", "@0 = private global"), "a mutable global"),
    (lambda t: t.replace("define internal void @leaf(ptr %p) #0 {", "define internal void @leaf(ptr %p) section \"x\" {"),
     "a section"),
    (lambda t: t.replace("define internal void @leaf(ptr %p)", "define internal void @leaf({ i64, ptr } %p)"),
     "a parameter type it does not declare"),
    (lambda t: t + "module asm \"nop\"\n", "a line it does not know"),
])
def test_anything_unusual_is_not_split(change, why):
    assert split_module(change(MODULE), min_lines=0) is None, why


def test_small_or_dominated_modules_are_not_split():
    assert split_module(MODULE) is None  # under SPLIT_MIN_LINES
    head = "define void @entry(ptr %p, i64 %x) {\n"
    big = MODULE.replace(head + _body(30), head + _body(2000))
    assert split_module(big, min_lines=0) is None  # one function is nearly everything


def _run_matmul(tmp_path, split: bool, jit: bool, monkeypatch) -> tuple[np.ndarray, int]:
    monkeypatch.setattr(llvm_split, "SPLIT_MIN_LINES", 0 if split else 10 ** 9)
    seen = []
    real = codegen.optimize_and_emit_objects

    def spy(*a, **k):
        objs = real(*a, **k)
        seen.append(len(objs))
        return objs
    monkeypatch.setattr(codegen, "optimize_and_emit_objects", spy)
    store = KernelCache(str(tmp_path / f"c-{split}-{jit}"))
    k = compile_kernel(K.matmul(64, 128, 256), "mm", CpuOptions.resolve(threads=2, schedule=True, cache=store, jit=jit))
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 128)).astype(np.float32)
    b = rng.standard_normal((128, 256)).astype(np.float32)
    assert k.wait_stored(60)
    return k(a, b), seen[0]


@pytest.mark.parametrize("jit", [True, False])
def test_split_kernel_computes_what_the_whole_one_does(tmp_path, monkeypatch, jit):
    if CpuOptions.resolve().abi is None:
        pytest.skip("no OpenMP runtime: a one-thread kernel is one function, nothing to split")
    whole, n_whole = _run_matmul(tmp_path, False, jit, monkeypatch)
    split, n_split = _run_matmul(tmp_path, True, jit, monkeypatch)
    assert (n_whole, n_split) == (1, 2)
    np.testing.assert_array_equal(split, whole)
