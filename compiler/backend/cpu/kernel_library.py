"""The prebuilt kernel library: object files shipped with MIND, rebuilt byte-identically from source.

Why prebuilt: the MLIR and LLVM work a per-program matmul schedule needs is most of a cold compile
(``gemm_kernel``), and so is the code generation of the OpenMP plumbing of a threaded kernel.  Compiled
once, these objects are linked into every kernel that calls them (``engine``), and a program with
matmuls or parallel loops compiles as fast as one without.  The objects (``OBJECTS``):

* ``gemm-<isa>``: the serial GEMMs of ``gemm_kernel`` (MLIR), one per instruction set of ``ISAS``;
* ``gemm-parallel``: the threaded GEMM driver of ``gemm_driver`` (LLVM IR, baseline x86-64), which
  splits one matmul over a libgomp-ABI team (``library_calls`` calls it when threads > 1);
* ``openmp-gomp``: the ``__kmpc_*`` functions of ``kmpc_gomp`` on top of libgomp (LLVM IR, baseline
  x86-64), which every kernel adapted to libgomp calls;
* ``heap``: the heap cache's allocation functions of ``runtime.heap_module`` (LLVM IR, baseline
  x86-64), which every kernel that allocates calls;
* ``runtime-<level>``: the functions of MLIR's runner library that lowered kernels call
  (``memrefCopy``; ``runtime.runtime_module``, LLVM IR), one per level of ``RUNTIME_TARGETS``.

Why auditable: each object is generated from its source by the same pinned toolchain as every kernel
(MLIR bindings, llvmlite), for a fixed triple and a named x86-64 level, so it depends on nothing of
the build machine.  ``prebuilt/MANIFEST.json`` records each object's SHA-256, the SHA-256 of its
source and the toolchain versions; every link checks the hash, and ``python -m
mind.compiler.backend.cpu.kernel_library --check`` (a test runs it) rebuilds each object and compares
bytes.  ``--write`` regenerates them after a change to a source.

Which GEMM runs: the best level the host supports (``host_isa``: AVX-512 -> x86-64-v4, AVX2+FMA ->
x86-64-v3, read from ``/proc/cpuinfo`` so that a cache hit imports nothing), only for ``cpu="host"``
kernels (``"generic"`` promises portable code) and unless ``$MIND_CPU_MATMUL=schedule`` asks for the
per-program schedule of ``transforms``.  This module imports neither MLIR nor llvmlite at import time.
"""

from __future__ import annotations

import json
import os
import sys
from functools import lru_cache
from typing import Any, Callable

from . import host
from .vector_unit import LEVEL_FLAGS as _REQUIRED_FLAGS, runs_isa  # noqa: F401 - the flags, for the tests

__all__ = ["ISAS", "OBJECTS", "LibraryObject", "gemm_object", "object_source", "build_object", "host_isa",
           "select_isa", "runs_isa", "object_bytes", "object_digest", "objects_for", "calls_driver",
           "RUNTIME_TARGETS", "runtime_object", "runtime_target",
           "LibraryError", "damaged", "MATMUL_POLICIES", "PREBUILT_DIR", "main"]

# A warm start (cache hit) runs ``select_isa`` and ``object_digest`` for its cache key: they
# read the CPU flags and the manifest and import nothing more (the sources, ``hashlib``,
# ``argparse`` are imported by the functions that build or check objects).

PREBUILT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prebuilt")
MANIFEST = os.path.join(PREBUILT_DIR, "MANIFEST.json")
MANIFEST_FORMAT = 2

ISAS = ("x86-64-v4", "x86-64-v3")
"""The instruction sets with a prebuilt GEMM, best first (``gemm_kernel.VARIANTS`` has their tiles)."""

_TOOLCHAIN = ("llvmlite", "xtc-mlir-python-bindings")

MATMUL_POLICIES = ("library", "schedule")


class LibraryError(Exception):
    """A shipped object is missing or does not match its manifest."""


def damaged(e: LibraryError, name: str) -> Any:
    """The ``MindError`` (E6012) for the damaged object ``name``, with what avoids it."""
    from mind.diagnostics import error
    avoid = _AVOID.get(name, _AVOID["gemm"] if name.startswith("gemm-") else "")
    return error("E6012", f"the prebuilt kernel library is damaged: {e}",
                 help=f"reinstall MIND, or {avoid}" if avoid else "reinstall MIND")


_AVOID = {"openmp-gomp": "set MIND_OPENMP=kmpc (an LLVM/Intel OpenMP runtime) or compile with threads=1",
          "gemm": "set MIND_CPU_MATMUL=schedule to compile matmuls per program"}
"""What avoids a damaged object besides a reinstall, by name ("gemm": every ``gemm-*`` object; the
``heap`` and ``runtime`` objects: nothing, any kernel may link them)."""


class LibraryObject:
    """One prebuilt object: its target (a ``codegen.FIXED_TARGETS`` level), the language of its
    source ("mlir" or "llvm"), and which module writes that source, what it defines and what it
    needs from the OpenMP runtime."""

    __slots__ = ("name", "target", "language", "_source", "_defines", "_needs")

    def __init__(self, name: str, target: str, language: str, source: Callable[[], str],
                 defines: Callable[[], tuple[str, ...]], needs: Callable[[], tuple[str, ...]] = tuple) -> None:
        # callables: the generators are imported only when an object is linked or built, never by a
        # warm start (which reads the manifest only)
        self.name, self.target, self.language = name, target, language
        self._source, self._defines, self._needs = source, defines, needs

    def source(self) -> str:
        return self._source()

    def defines(self) -> frozenset[str]:
        """The functions the object defines (the ``_mlir_ciface_`` wrappers of an MLIR one too)."""
        names = self._defines()
        if self.language == "mlir":
            names = names + tuple("_mlir_ciface_" + n for n in names)
        return frozenset(names)

    def needs(self) -> tuple[str, ...]:
        """The functions the object calls that the OpenMP runtime provides."""
        return tuple(self._needs())

    @property
    def file(self) -> str:
        return f"{self.name}.o"


def _gemm_source(isa: str) -> Callable[[], str]:
    def source() -> str:
        from .gemm_kernel import LAYOUTS, VARIANTS, gemm_function, gemm_symbol
        return "module {\n" + "".join(gemm_function(gemm_symbol(e, s), g, s) for e, g in VARIANTS[isa].items()
                                      for s in LAYOUTS) + "}\n"
    return source


def _gemm_defines(isa: str) -> Callable[[], tuple[str, ...]]:
    def defines() -> tuple[str, ...]:
        from .gemm_kernel import LAYOUTS, VARIANTS, gemm_symbol
        return tuple(gemm_symbol(e, s) for e in VARIANTS[isa] for s in LAYOUTS)
    return defines


def _driver_source() -> str:
    from .gemm_driver import driver_module
    return driver_module()


def _driver_defines() -> tuple[str, ...]:
    from .gemm_driver import DRIVER_ELEMENTS, driver_symbol
    from .gemm_kernel import LAYOUTS
    return tuple(driver_symbol(e, s) for e in DRIVER_ELEMENTS for s in LAYOUTS)


def _driver_needs() -> tuple[str, ...]:
    from .gemm_driver import DRIVER_NEEDS
    return DRIVER_NEEDS


def _openmp_source() -> str:
    from .kmpc_gomp import support_module
    return support_module()


def _openmp_defines() -> tuple[str, ...]:
    from .kmpc_gomp import support_symbols
    return support_symbols()


def _heap_source() -> str:
    from .runtime import heap_module
    return heap_module()


def _heap_defines() -> tuple[str, ...]:
    from .runtime import HEAP_SYMBOLS
    return HEAP_SYMBOLS


def _runtime_source() -> str:
    from .runtime import runtime_module
    return runtime_module()


def _runtime_defines() -> tuple[str, ...]:
    from .runtime import RUNTIME_FUNCTIONS
    return tuple(RUNTIME_FUNCTIONS)


def _openmp_needs() -> tuple[str, ...]:
    from .kmpc_gomp import GOMP_FUNCTIONS
    return GOMP_FUNCTIONS


RUNTIME_TARGETS = (*ISAS, "x86-64")
"""The levels the ``runtime`` objects are built for: its copy loops are vectorized for the kernel's own
level (baseline x86-64 code made a 2000x2000 pad's copies 1.5 times slower on AVX-512)."""


def runtime_object(target: str) -> str:
    """The name of the ``runtime`` object of ``target`` (a level of ``RUNTIME_TARGETS``)."""
    return f"runtime-{target}"


def runtime_target(cpu: str) -> str:
    """The level of ``RUNTIME_TARGETS`` whose ``runtime`` object a kernel compiled for ``cpu`` (the
    ``cpu`` option) links: the host's best level, the named level, or baseline x86-64 (``generic``,
    or a host below x86-64-v3)."""
    if cpu == "host":
        return host_isa() or "x86-64"
    return cpu if cpu in ISAS else "x86-64"


OBJECTS: dict[str, LibraryObject] = {
    **{f"gemm-{isa}": LibraryObject(f"gemm-{isa}", isa, "mlir", _gemm_source(isa), _gemm_defines(isa))
       for isa in ISAS},
    "gemm-parallel": LibraryObject("gemm-parallel", "x86-64", "llvm", _driver_source, _driver_defines,
                                   _driver_needs),
    "openmp-gomp": LibraryObject("openmp-gomp", "x86-64", "llvm", _openmp_source, _openmp_defines, _openmp_needs),
    "heap": LibraryObject("heap", "x86-64", "llvm", _heap_source, _heap_defines),
    **{runtime_object(t): LibraryObject(runtime_object(t), t, "llvm", _runtime_source, _runtime_defines)
       for t in RUNTIME_TARGETS},
}
"""Every shipped object, by name, in the manifest's order."""


def gemm_object(isa: str) -> str:
    """The name of the serial GEMM object of ``isa``."""
    return f"gemm-{isa}"


def object_source(name: str) -> str:
    """The source (MLIR or LLVM IR text) the object ``name`` is built from."""
    return OBJECTS[name].source()


def build_object(name: str) -> bytes:
    """Compile the object ``name`` from its source (needs MLIR for an MLIR source, and llvmlite):
    the same pipeline as every kernel's, then LLVM at O3 for the object's fixed target."""
    from .codegen import optimize_and_emit_object
    spec = OBJECTS[name]
    text = spec.source()
    if spec.language == "mlir":
        from .lowering import lower_module_text
        text = lower_module_text(text)
    return optimize_and_emit_object(text, spec.target, "full")


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


@lru_cache(maxsize=1)
def _manifest() -> dict[str, Any]:
    try:
        with open(MANIFEST, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise LibraryError(f"cannot read the kernel library manifest {MANIFEST}: {e}") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT or not isinstance(data.get("objects"), dict):
        raise LibraryError(f"the kernel library manifest {MANIFEST} is not in format {MANIFEST_FORMAT}")
    return data


def _entry(name: str) -> dict[str, Any]:
    entry = _manifest()["objects"].get(name)
    if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str) or not isinstance(entry.get("file"), str):
        raise LibraryError(f"the kernel library manifest has no object {name}")
    return entry


@lru_cache(maxsize=None)
def object_bytes(name: str) -> bytes:
    """The shipped object ``name``, checked against the manifest's SHA-256."""
    entry = _entry(name)
    path = os.path.join(PREBUILT_DIR, os.path.basename(entry["file"]))
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise LibraryError(f"cannot read the prebuilt kernel {path}: {e}") from None
    if _sha256(data) != entry["sha256"]:
        raise LibraryError(f"the prebuilt kernel {path} does not match its SHA-256 in {MANIFEST}")
    return data


def object_digest(name: str) -> str:
    """The manifest's SHA-256 of the object ``name`` (the object itself is checked against it when
    a kernel is linked, ``object_bytes``)."""
    return _entry(name)["sha256"]


def calls_driver(llvm_ir: str) -> bool:
    """Whether a kernel's LLVM IR calls the threaded GEMM driver (it then starts OpenMP teams)."""
    from .gemm_driver import DRIVER_ELEMENTS, driver_symbol
    from .gemm_kernel import LAYOUTS
    return any(f" @{driver_symbol(e, s)}(" in llvm_ir for e in DRIVER_ELEMENTS for s in LAYOUTS)


def objects_for(llvm_ir: str, isa: str | None, abi: str | None, cpu: str = "generic") -> list[str]:
    """The objects a kernel's (bound) LLVM IR is linked with: the GEMM of ``isa`` when it calls the
    library, the driver when it calls that, ``openmp-gomp`` when it calls ``kmpc_gomp``'s functions,
    ``heap`` when it allocates (``runtime.link_heap``), the ``runtime`` object of ``cpu`` (the
    kernel's ``cpu`` option, ``runtime_target``) when it calls MLIR's runtime functions
    (``runtime.calls_runtime``)."""
    from .kmpc_gomp import PREFIX
    from .runtime import HEAP_ALLOC, calls_runtime
    names = []
    if isa is not None:
        names.append(gemm_object(isa))
        if calls_driver(llvm_ir):
            names.append("gemm-parallel")
    if abi == "gomp" and f"@{PREFIX}" in llvm_ir:
        names.append("openmp-gomp")
    if f"@{HEAP_ALLOC}(" in llvm_ir:
        names.append("heap")
    if calls_runtime(llvm_ir):
        names.append(runtime_object(runtime_target(cpu)))
    return names


def host_isa() -> str | None:
    """The best level of ``ISAS`` this machine runs."""
    return next((isa for isa in ISAS if runs_isa(isa)), None)


def select_isa(cpu: str, policy: str) -> str | None:
    """The library variant a kernel for ``cpu`` links, or None for per-program matmul schedules: the
    host's best level for ``"host"``, a named level of ``ISAS`` where the host runs it, none for
    ``"generic"`` (portable code)."""
    if policy not in MATMUL_POLICIES:
        raise ValueError(f"unknown matmul policy {policy!r} (use one of {', '.join(MATMUL_POLICIES)})")
    if policy != "library":
        return None
    if cpu == "host":
        return host_isa()
    return cpu if cpu in ISAS and runs_isa(cpu) else None


# ------------------------------------------------------------------ rebuilding (auditors, developers)

def _rebuild() -> dict[str, dict[str, Any]]:
    objects = {}
    for name, spec in OBJECTS.items():
        data = build_object(name)
        objects[name] = {"file": spec.file, "sha256": _sha256(data), "bytes": len(data), "target": spec.target,
                         "language": spec.language, "symbols": sorted(spec.defines()),
                         "source_sha256": _sha256(spec.source().encode("utf-8")), "data": data}
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
        for entry in built.values():
            tmp = os.path.join(PREBUILT_DIR, entry["file"] + ".tmp")
            with open(tmp, "wb") as f:
                f.write(entry["data"])
            os.replace(tmp, os.path.join(PREBUILT_DIR, entry["file"]))
        manifest = {"format": MANIFEST_FORMAT, "toolchain": _toolchain_versions(),
                    "objects": {name: {k: v for k, v in e.items() if k != "data"} for name, e in built.items()}}
        tmp = MANIFEST + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, MANIFEST)
        known = {e["file"] for e in built.values()}
        for stale in sorted(os.listdir(PREBUILT_DIR)):  # objects no longer in OBJECTS
            if stale.endswith(".o") and stale not in known:
                os.remove(os.path.join(PREBUILT_DIR, stale))
        for e in built.values():
            print(f"{e['file']}: {e['bytes']} bytes, sha256 {e['sha256']}")
        return 0
    _manifest.cache_clear()
    object_bytes.cache_clear()
    status = 0
    for name, e in built.items():
        try:
            shipped = object_bytes(name)
        except LibraryError as err:
            print(f"{name}: {err}")
            status = 1
            continue
        same = shipped == e["data"]
        print(f"{e['file']}: rebuilt sha256 {e['sha256']} {'matches' if same else 'DIFFERS from'} the shipped object")
        status |= 0 if same else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
