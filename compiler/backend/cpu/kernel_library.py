"""The prebuilt kernel library: GEMM object files shipped with MIND, rebuilt byte-identically from source.

Why prebuilt: the MLIR and LLVM work a per-program matmul schedule needs is most of a cold compile
(``gemm_kernel``).  Compiled once per instruction set, the GEMM is linked into every kernel that calls
it (``library_calls`` emits the calls, ``engine`` adds the object), and a program with matmuls
compiles as fast as one without.

Why auditable: the objects are generated from ``gemm_kernel``'s MLIR by the same pinned toolchain as
every kernel (MLIR bindings, llvmlite), for a fixed triple and a named x86-64 level, so they depend
on nothing of the build machine.  ``prebuilt/MANIFEST.json`` records each object's SHA-256, the
SHA-256 of its MLIR source and the toolchain versions; every load checks the hash, and
``python -m mind.compiler.backend.cpu.kernel_library --check`` (a test runs it) rebuilds each object
and compares bytes.  ``--write`` regenerates them after a change to the kernel.

Which variant runs: the best level the host supports (``host_isa``: AVX-512 -> x86-64-v4, AVX2+FMA ->
x86-64-v3, read from ``/proc/cpuinfo`` so that a cache hit imports nothing), only for ``cpu="host"``
kernels (``"generic"`` promises portable code) and unless ``$MIND_CPU_MATMUL=schedule`` asks for the
per-program schedule of ``transforms``.  This module imports neither MLIR nor llvmlite at import time.
"""

from __future__ import annotations

import json
import os
import sys
from functools import lru_cache
from typing import Any

__all__ = ["ISAS", "library_mlir", "build_object", "host_isa", "select_isa", "object_bytes", "object_digest",
           "library_symbols", "LibraryError", "MATMUL_POLICIES", "PREBUILT_DIR", "main"]

# A warm start (cache hit) runs ``select_isa`` and ``object_digest`` for its cache key: they read the
# CPU flags and the manifest and import nothing more (``gemm_kernel``, ``hashlib``, ``argparse`` are
# imported by the functions that build or check objects).

PREBUILT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prebuilt")
MANIFEST = os.path.join(PREBUILT_DIR, "MANIFEST.json")

ISAS = ("x86-64-v4", "x86-64-v3")
"""The instruction sets with a prebuilt object, best first (``gemm_kernel.VARIANTS`` has their tiles)."""

# cpuinfo flags each level needs (LLVM's definitions of x86-64-v3 and -v4; ``abm`` is LZCNT)
_V3_FLAGS = frozenset({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"})
_REQUIRED_FLAGS = {
    "x86-64-v3": _V3_FLAGS,
    "x86-64-v4": _V3_FLAGS | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"},
}
_TOOLCHAIN = ("llvmlite", "xtc-mlir-python-bindings")

MATMUL_POLICIES = ("library", "schedule")


class LibraryError(Exception):
    """A shipped object is missing or does not match its manifest."""


def library_symbols(isa: str) -> frozenset[str]:
    """The functions the object of ``isa`` defines (with their ``_mlir_ciface_`` wrappers)."""
    from .gemm_kernel import VARIANTS, gemm_symbol
    names = [gemm_symbol(e) for e in VARIANTS[isa]]
    return frozenset(names + ["_mlir_ciface_" + n for n in names])


def library_mlir(isa: str) -> str:
    """The MLIR module the object of ``isa`` is built from (one function per element type)."""
    from .gemm_kernel import VARIANTS, gemm_function, gemm_symbol
    return "module {\n" + "".join(gemm_function(gemm_symbol(e), g) for e, g in VARIANTS[isa].items()) + "}\n"


def build_object(isa: str) -> bytes:
    """Compile ``library_mlir(isa)`` to an object (needs MLIR and llvmlite): the same pipeline as
    every kernel's, then LLVM at O3 for the fixed target ``isa``."""
    from .codegen import optimize_and_emit_object
    from .lowering import lower_module_text
    llvm_ir = lower_module_text(library_mlir(isa))
    return optimize_and_emit_object(llvm_ir, isa, "full")


def _toolchain_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version
    out = {}
    for dist in _TOOLCHAIN:
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def _sha256(data: bytes) -> str:
    import hashlib
    return hashlib.sha256(data).hexdigest()


def _file_name(isa: str) -> str:
    return f"gemm-{isa}.o"


@lru_cache(maxsize=1)
def _manifest() -> dict[str, Any]:
    try:
        with open(MANIFEST, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise LibraryError(f"cannot read the kernel library manifest {MANIFEST}: {e}") from None


@lru_cache(maxsize=None)
def object_bytes(isa: str) -> bytes:
    """The shipped object of ``isa``, checked against the manifest's SHA-256."""
    entry = _manifest().get("objects", {}).get(isa)
    if entry is None:
        raise LibraryError(f"the kernel library manifest has no object for {isa}")
    path = os.path.join(PREBUILT_DIR, entry["file"])
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise LibraryError(f"cannot read the prebuilt kernel {path}: {e}") from None
    if _sha256(data) != entry["sha256"]:
        raise LibraryError(f"the prebuilt kernel {path} does not match its SHA-256 in {MANIFEST}")
    return data


def object_digest(isa: str) -> str:
    """The manifest's SHA-256 of ``isa``'s object (part of every cache key of a kernel that links it;
    the object itself is checked against it when a kernel is linked, ``object_bytes``)."""
    entry = _manifest().get("objects", {}).get(isa)
    if entry is None or not isinstance(entry.get("sha256"), str):
        raise LibraryError(f"the kernel library manifest has no object for {isa}")
    return entry["sha256"]


@lru_cache(maxsize=1)
def _cpu_flags() -> frozenset[str]:
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        return frozenset()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def host_isa() -> str | None:
    """The best level of ``ISAS`` this machine runs (the kernel's flags, as the OS enables them)."""
    flags = _cpu_flags()
    for isa in ISAS:
        if _REQUIRED_FLAGS[isa] <= flags:
            return isa
    return None


def select_isa(cpu: str, policy: str) -> str | None:
    """The library variant a kernel for ``cpu`` links, or None for per-program matmul schedules."""
    if policy not in MATMUL_POLICIES:
        raise ValueError(f"unknown matmul policy {policy!r} (use one of {', '.join(MATMUL_POLICIES)})")
    if cpu != "host" or policy != "library":
        return None
    return host_isa()


# ------------------------------------------------------------------ rebuilding (auditors, developers)

def _rebuild() -> dict[str, Any]:
    from .gemm_kernel import VARIANTS, gemm_symbol
    objects = {}
    for isa in ISAS:
        data = build_object(isa)
        objects[isa] = {"file": _file_name(isa), "sha256": _sha256(data), "bytes": len(data),
                        "symbols": [gemm_symbol(e) for e in VARIANTS[isa]],
                        "source_sha256": _sha256(library_mlir(isa).encode("utf-8")), "data": data}
    return objects


def main(argv: list[str] | None = None) -> int:
    """``--check``: rebuild every object and compare it with the shipped one (exit 1 on a difference);
    ``--write``: rebuild and replace the objects and the manifest."""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m mind.compiler.backend.cpu.kernel_library",
                                 description="Rebuild MIND's prebuilt kernels and compare or replace them.")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="rebuild and compare with the shipped objects")
    mode.add_argument("--write", action="store_true", help="rebuild and replace the shipped objects")
    args = ap.parse_args(argv)
    built = _rebuild()
    if args.write:
        os.makedirs(PREBUILT_DIR, exist_ok=True)
        for isa, entry in built.items():
            tmp = os.path.join(PREBUILT_DIR, entry["file"] + ".tmp")
            with open(tmp, "wb") as f:
                f.write(entry["data"])
            os.replace(tmp, os.path.join(PREBUILT_DIR, entry["file"]))
        manifest = {"format": 1, "toolchain": _toolchain_versions(),
                    "objects": {isa: {k: v for k, v in e.items() if k != "data"} for isa, e in built.items()}}
        tmp = MANIFEST + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, MANIFEST)
        for isa, e in built.items():
            print(f"{e['file']}: {e['bytes']} bytes, sha256 {e['sha256']}")
        return 0
    _manifest.cache_clear()
    object_bytes.cache_clear()
    status = 0
    for isa, e in built.items():
        try:
            shipped = object_bytes(isa)
        except LibraryError as err:
            print(f"{isa}: {err}")
            status = 1
            continue
        same = shipped == e["data"]
        print(f"{e['file']}: rebuilt sha256 {e['sha256']} {'matches' if same else 'DIFFERS from'} the shipped object")
        status |= 0 if same else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
