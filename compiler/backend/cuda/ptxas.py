"""``ptxas`` from the pinned ``nvidia-cuda-nvcc`` wheel: PTX to a cubin per architecture, on any machine.

Why ptxas on a machine without a GPU: it is the assembler the driver would run, so a kernel it
rejects is a kernel the GPU would refuse; CI assembles every kernel the tests emit.  It runs with
``--fmad=false``: the spec rounds each op once, so ptxas must not contract a multiply and an add of
two ops into one FMA (LLVM's NVPTX output marks them ``.rn``, which already forbids it; the flag
keeps it so for any PTX).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile

from mind.diagnostics import MindError, error

__all__ = ["find_ptxas", "assemble", "ptxas_version", "PtxasError"]


class PtxasError(Exception):
    """ptxas refused a kernel or could not run."""


def find_ptxas(configured: str | None = None) -> str | None:
    """The ``ptxas`` to run: ``configured`` (an option), else the one in the ``nvidia-cuda-nvcc``
    wheel beside this interpreter's packages, else one on ``PATH``; None if there is none."""
    if configured:
        return configured if os.path.isfile(configured) and os.access(configured, os.X_OK) else None
    for folder in sys.path:
        candidate = os.path.join(folder, "nvidia", "cu13", "bin", "ptxas")
        if folder.endswith(("site-packages", "dist-packages")) and os.path.isfile(candidate):
            return candidate
    return shutil.which("ptxas")


def _require(configured: str | None) -> str:
    path = find_ptxas(configured)
    if path is None:
        raise error("E6002", "the cuda backend needs ptxas, and none was found",
                    help="install the pinned nvidia-cuda-nvcc wheel (pip install -e .), or name one with "
                         "MIND_PTXAS=/path/to/ptxas")
    return path


def ptxas_version(configured: str | None = None) -> str:
    """The last line of ``ptxas --version`` (recorded in a build's manifest)."""
    path = _require(configured)
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    return out.splitlines()[-1] if out else "unknown"


@functools.lru_cache(maxsize=64)
def assemble(ptx: str, sm: str, *, opt: int = 3, configured: str | None = None) -> bytes:
    """The cubin of ``ptx`` for the architecture ``sm`` (``sm_80``); ``PtxasError`` with ptxas's
    messages when it refuses the PTX.  Kept per process (the same PTX, such as the GEMM's, is
    assembled once: ptxas takes 0.1-0.3 s a kernel module)."""
    path = _require(configured)
    with tempfile.TemporaryDirectory(prefix="mind-ptxas-") as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w", encoding="utf-8") as fh:
            fh.write(ptx)
        try:
            proc = subprocess.run([path, f"-arch={sm}", f"-O{opt}", "--fmad=false", src, "-o", out],
                                  capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as e:
            raise PtxasError(f"ptxas could not run: {e}") from None
        if proc.returncode != 0:
            raise PtxasError(f"ptxas -arch={sm} refused the kernel: {proc.stderr.strip()[-2000:]}")
        with open(out, "rb") as fh:
            return fh.read()


def as_diagnostic(e: PtxasError, name: str) -> MindError:
    return error("E6012", f"CUDA code generation failed for '{name}': {e}")
