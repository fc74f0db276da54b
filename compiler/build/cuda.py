"""The cuda target of ``mind build``: one function's kernels as PTX and a cubin per architecture,
with the launch plan ``mind.runtime.cuda`` follows (no MLIR on the machine that runs it).

Files: ``<module>.ptx`` and ``<module>.<sm>.cubin`` for each kernel module of the plan.  The plan
adds ``images`` (per module, the file of each image).  The bytes depend on the Core IR, the sizes,
the options (architectures, block shape, ptxas level) and the toolchain (MLIR, ptxas), recorded in
the manifest; two builds give the same bytes.
"""

from __future__ import annotations

from typing import Any, Mapping

from mind.ir.core import Function

from ..backend.cpu.host import toolchain_fingerprint
from ..backend.cuda import BACKEND_VERSION
from ..backend.cuda.api import compile_program
from ..backend.cuda.options import CudaOptions
from ..backend.cuda.ptxas import ptxas_version

__all__ = ["build_cuda"]


def build_cuda(fn: Function, env: Mapping[str, int], about: str) -> tuple[dict[str, bytes], dict[str, Any], dict[str, Any]]:
    """The files of ``fn``'s cuda artifact for the sizes ``env``, its launch plan and what the
    manifest records of the build."""
    options = CudaOptions.resolve()
    compiled = compile_program(fn, dict(env), options)
    files: dict[str, bytes] = {}
    images: dict[str, dict[str, str]] = {}
    for module in compiled.plan["modules"]:
        images[module] = {"ptx": f"{module}.ptx"}
        files[f"{module}.ptx"] = compiled.ptx[module].encode("utf-8")
        for sm, cubin in sorted(compiled.cubins[module].items()):
            images[module][sm] = f"{module}.{sm}.cubin"
            files[f"{module}.{sm}.cubin"] = cubin
    plan = {**compiled.plan, "images": images, "about": about}
    record = {"options": options.record(),
              "toolchain": {"compiler": [BACKEND_VERSION] + toolchain_fingerprint().split("|")[1:],
                            "ptxas": ptxas_version(options.ptxas)}}
    return files, plan, record
