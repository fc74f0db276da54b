"""The runtime of ``mind build`` artifacts: ``mind.runtime.load(DIR)`` checks and runs one.

It needs NumPy (and, for a cuda artifact, cuda-bindings) and nothing of the compiler: no MLIR,
llvmlite, z3 or sympy (``tests/build`` checks the import graph in a fresh process), so an artifact
built on one machine runs on another that has only the runtime.  ``docs/build.md`` describes the
artifact's files.
"""

from __future__ import annotations

from typing import Any

from mind.diagnostics import error

from .artifact import read_checked

__all__ = ["load", "TARGETS"]

TARGETS: dict[str, str] = {"cpu": "mind.runtime.cpu:CpuArtifact", "cuda": "mind.runtime.cuda:CudaArtifact"}
"""Each target's loader, by the name the manifest records (imported on request)."""


def load(path: str) -> Any:
    """The artifact in the folder ``path``, every file checked against its manifest's SHA-256 before
    anything is parsed or loaded (E7014 for a changed byte); call it with NumPy arrays."""
    import importlib

    checked = read_checked(path)
    target = checked.manifest.get("target")
    loader = TARGETS.get(target) if isinstance(target, str) else None
    if loader is None:
        raise error("E6002", f"the artifact {path} is for the target {target!r}, which this runtime does not run",
                    help="targets: " + ", ".join(TARGETS))
    module_name, attr = loader.split(":")
    return getattr(importlib.import_module(module_name), attr)(checked)
