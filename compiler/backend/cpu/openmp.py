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
    candidates = [os.path.join(sys.prefix, "lib", "libiomp5.so"),
                  os.path.join(sys.base_prefix, "lib", "libiomp5.so")]
    candidates += sorted(glob.glob("/usr/lib/llvm-*/lib/libomp.so*"), reverse=True)
    candidates += ["/usr/lib/x86_64-linux-gnu/libomp.so.5", "/usr/lib/x86_64-linux-gnu/libiomp5.so"]
    for c in candidates:
        if os.path.exists(c):
            return c
    return None


def load_openmp_runtime() -> str | None:
    """Load the runtime globally (idempotent); returns its path or None if not found."""
    path = find_openmp_runtime()
    if path is None:
        return None
    if path not in _LOADED:
        _LOADED[path] = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    return path
