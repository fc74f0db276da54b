"""The cpu target of ``mind build``: one function's kernel as a portable shared object with a C header.

Portable means: LLVM's generic x86-64 target (``cpu="generic"``: no host features, so no call of
the prebuilt GEMM variants, which are chosen by the host's features), one thread (no OpenMP runtime
to find on the machine that runs it), and a shared object with no dependency at all.  Those two
options are pinned here, not taken from the environment; the rest of the cpu backend's options are
resolved as ``mind.compile`` resolves them and recorded in the manifest.  The object code is then a
function of the Core IR, the sizes, the options and the toolchain, so two builds give the same
bytes (``tests/build`` builds in two processes with different ``PYTHONHASHSEED``).

The kernel is compiled through the backend's public path (``compile_function``, then the kernel of
the sizes) into a private kernel cache, linked before it is loaded, and the shared object is taken
from there: the artifact's code is exactly the code ``mind run`` runs with these options.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from typing import Any, Mapping

from mind.ir.core import Function

from ..backend.cpu.api import compile_function
from ..backend.cpu.cache import KernelCache
from ..backend.cpu.host import toolchain_fingerprint
from .header import c_header

__all__ = ["build_cpu", "PINNED", "LIBRARY", "HEADER"]

PINNED: dict[str, Any] = {"cpu": "generic", "threads": 1, "jit": False}
"""The cpu backend options a portable artifact is built with, whatever the environment says."""

LIBRARY = "kernel.so"
HEADER = "kernel.h"
_RECORDED = ("threads", "schedule", "matmul", "cpu", "opt", "library")


def _linker_version() -> str:
    """The first line of ``ld --version`` (the linker's bytes are part of the shared object's)."""
    from ..backend.cpu.codegen import linker_available

    ld = linker_available()
    if ld is None:
        return "none"
    try:
        out = subprocess.run([ld, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.splitlines()[0].strip() if out else "unknown"


def build_cpu(fn: Function, env: Mapping[str, int], about: str) -> tuple[dict[str, bytes], dict[str, Any], dict[str, Any]]:
    """The files of ``fn``'s cpu artifact for the sizes ``env`` (name -> bytes), its launch plan
    and what the manifest records of the build (options, toolchain)."""
    with tempfile.TemporaryDirectory(prefix="mind-build-") as root:
        runner = compile_function(fn, cache=KernelCache(root), **PINNED)
        kernel = runner.kernel(dict(env))
        with open(kernel.library_path, "rb") as f:
            library = f.read()
    sig = kernel.signature
    header = c_header(sig, fn.name, [p.name for p in fn.params], about).encode("utf-8")
    plan = {"library": LIBRARY, "header": HEADER, "entry": f"_mlir_ciface_{sig.name}", "call": f"{sig.name}_call",
            "signature": sig.to_json()}
    options = runner.options.for_kernel()
    record = {"options": {name: getattr(options, name) for name in _RECORDED},
              "toolchain": {"compiler": toolchain_fingerprint().split("|"), "linker": _linker_version(),
                            "machine": os.uname().machine}}
    return {LIBRARY: library, HEADER: header}, plan, record
