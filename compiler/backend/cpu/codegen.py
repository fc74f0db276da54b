"""LLVM IR text -> optimized object file -> shared library, with llvmlite and the system linker.

Why a shared library: loading one with ``ctypes.CDLL`` costs well under a millisecond and needs
neither MLIR nor LLVM in the process, so a cache hit starts warm (see ``cache``).  MLIR's IR carries no
triple or data layout: both are set here, and the O3 pipeline runs before code generation.
``cpu="generic"`` pins a portable x86-64 target for reproducible objects; ``"host"`` (default) uses
the host CPU and its features (AVX-512 here).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any

__all__ = ["CodegenError", "target_description", "optimize_and_emit_object", "link_shared",
           "linker_available", "emit_assembly"]


class CodegenError(Exception):
    """llvmlite rejected the IR, or linking failed."""


_INIT = False


def _llvm() -> Any:
    global _INIT
    import llvmlite.binding as llvm
    if not _INIT:
        # llvmlite >= 0.44 initializes the core itself; only targets and printers are needed.
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _INIT = True
    return llvm


def _target_machine(cpu: str) -> Any:
    llvm = _llvm()
    triple = llvm.get_process_triple()
    target = llvm.Target.from_triple(triple)
    if cpu == "host":
        name, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    elif cpu == "generic":
        name, features = "x86-64" if triple.startswith("x86_64") else "generic", ""
    else:
        raise CodegenError(f"unknown cpu option {cpu!r} (use 'host' or 'generic')")
    return target.create_target_machine(cpu=name, features=features, opt=3, reloc="pic",
                                        codemodel="default")


def target_description(cpu: str = "host") -> str:
    """Triple, CPU name and feature string: part of the cache key (object code depends on them)."""
    tm = _target_machine(cpu)
    llvm = _llvm()
    feats = llvm.get_host_cpu_features().flatten() if cpu == "host" else ""
    return f"{tm.triple}|{llvm.get_host_cpu_name() if cpu == 'host' else 'generic'}|{feats}"


def _optimize(ir_text: str, cpu: str) -> tuple[Any, Any]:
    llvm = _llvm()
    tm = _target_machine(cpu)
    try:
        mod = llvm.parse_assembly(ir_text)
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        mod.verify()
    except RuntimeError as e:
        raise CodegenError(f"llvmlite could not parse the LLVM IR: {e}") from None
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)
    return mod, tm


def optimize_and_emit_object(ir_text: str, cpu: str = "host") -> bytes:
    """O3 + object file bytes (position independent, ready for ``link_shared``)."""
    mod, tm = _optimize(ir_text, cpu)
    return bytes(tm.emit_object(mod))


def emit_assembly(ir_text: str, cpu: str = "host") -> str:
    """O3 + assembly text (for inspecting the inner loops)."""
    mod, tm = _optimize(ir_text, cpu)
    return str(tm.emit_assembly(mod))


def linker_available() -> str | None:
    """Path of a usable ``ld`` (binutils), or None."""
    return shutil.which("ld") or shutil.which("ld.bfd") or shutil.which("ld.gold")


def link_shared(obj: bytes, out_path: str, libs: list[str] | None = None) -> None:
    """Link one object into ``out_path`` (a .so) with ``ld -shared``; atomic (temp + os.replace)."""
    ld = linker_available()
    if ld is None:
        raise CodegenError("no system linker (ld) found")
    d = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(d, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=d, prefix=".link-") as tmp:
        o = os.path.join(tmp, "k.o")
        so = os.path.join(tmp, "k.so")
        with open(o, "wb") as f:
            f.write(obj)
        cmd = [ld, "-shared", "--hash-style=gnu", "--build-id=none", "-z", "now", "-o", so, o]
        for lib in libs or []:
            cmd += [lib, "-rpath", os.path.dirname(lib)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise CodegenError(f"linking failed: {r.stderr.strip()}")
        os.replace(so, out_path)
