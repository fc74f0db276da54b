"""Find and load an OpenMP runtime that provides the ``__kmpc_*`` entry points MLIR emits.

Why: ``convert-openmp-to-llvm`` calls the LLVM/Intel OpenMP ABI (``__kmpc_fork_call`` ...), which
GCC's libgomp does not implement.  Runtimes that work (toolchain.md): pip ``intel-openmp``
(``libiomp5.so`` in ``<venv>/lib``) and Debian ``libomp5-*`` (``libomp.so.5``).  ``$MIND_OPENMP_LIB``
overrides the search.  The runtime is loaded with RTLD_GLOBAL so kernel libraries resolve against it.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading

__all__ = ["find_openmp_runtime", "load_openmp_runtime"]

_LOADED: dict[str, ctypes.CDLL] = {}


def find_openmp_runtime() -> str | None:
    """Absolute path of an OpenMP runtime library, or None if there is none."""
    env = os.environ.get("MIND_OPENMP_LIB")
    if env:
        return env if os.path.exists(env) else None
    if "" in _FOUND:  # the search (a glob over /usr/lib) runs once per process
        return _FOUND[""]
    _FOUND[""] = _search()
    return _FOUND[""]


_FOUND: dict[str, str | None] = {}


def _search() -> str | None:
    for c in (os.path.join(sys.prefix, "lib", "libiomp5.so"), os.path.join(sys.base_prefix, "lib", "libiomp5.so")):
        if os.path.exists(c):  # the pip runtime: found without the glob over /usr/lib (~0.4 ms)
            return c
    candidates = sorted(glob.glob("/usr/lib/llvm-*/lib/libomp.so*"), reverse=True)
    candidates += ["/usr/lib/x86_64-linux-gnu/libomp.so.5", "/usr/lib/x86_64-linux-gnu/libiomp5.so"]
    for c in candidates:
        if os.path.exists(c):
            return c
    return None


_LOAD_LOCK = threading.Lock()


def load_openmp_runtime() -> str | None:
    """Load the runtime globally (idempotent, thread-safe); returns its path or None if not found."""
    path = find_openmp_runtime()
    if path is None:
        return None
    if path not in _LOADED:
        with _LOAD_LOCK:
            if path not in _LOADED:
                lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                _set_runtime_defaults(lib)
                _LOADED[path] = lib
    return path


_AFFINITY_VARS = ("KMP_AFFINITY", "OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY")
_BLOCKTIME_VARS = ("KMP_BLOCKTIME", "OMP_WAIT_POLICY", "KMP_LIBRARY")
DEFAULT_BLOCKTIME_MS = 1


def runtime_defaults() -> str:
    """The ``kmp_set_defaults`` string MIND applies (``|``-separated; empty when the user's
    environment already decides both settings)."""
    parts = []
    if not any(v in os.environ for v in _AFFINITY_VARS):
        # Intel/LLVM OpenMP detect the machine topology at the first parallel region (4-18 ms here,
        # paid by the first call of every new process) to implement thread binding, which is off by
        # default: declaring affinity disabled keeps the same placement and costs ~1 ms.
        parts.append("KMP_AFFINITY=disabled")
    if not any(v in os.environ for v in _BLOCKTIME_VARS):
        # Idle workers spin this long before sleeping.  The default (200 ms) starves other threads
        # of the process (numpy's OpenBLAS, torch) and of other processes after every kernel; 0
        # makes every parallel region pay a futex wake-up of the workers (a scheduled matmul enters
        # one region per K tile).  1 ms covers back-to-back regions and calls.
        parts.append(f"KMP_BLOCKTIME={DEFAULT_BLOCKTIME_MS}")
    return "|".join(parts)


def _set_runtime_defaults(lib: ctypes.CDLL) -> None:
    """``kmp_set_defaults`` changes this runtime's defaults only (no environment variable is set; it
    overrides the environment, hence the checks in ``runtime_defaults``) and must come before the
    runtime initializes: one call, since the call itself initializes it."""
    text = runtime_defaults()
    if not text:
        return
    try:
        set_defaults = lib.kmp_set_defaults
    except AttributeError:
        return
    set_defaults.argtypes = [ctypes.c_char_p]
    set_defaults.restype = None
    set_defaults(text.encode())
