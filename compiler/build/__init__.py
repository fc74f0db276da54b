"""``mind build``: a function compiled ahead of time into a self-describing artifact folder.

``build_artifact(fn, target, env)`` returns the artifact's files (name -> bytes): the target's
kernels, the launch plan (``plan.json``), the function's Core IR (``function.mir``) and
``manifest.json`` (``mind.runtime.artifact``: every file's SHA-256, the Core IR's, the spec and
MIND versions, the toolchain and the options).  Each target is one row of ``TARGETS``; the runtime
that loads an artifact is ``mind.runtime``, which imports nothing of this package.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from mind.diagnostics import error
from mind.ir.core import Function, Module
from mind.runtime.artifact import CORE_IR, MANIFEST, PLAN, json_bytes, manifest_bytes, sha256
from mind.spec.version import SPEC_VERSION
from mind.version import __version__

__all__ = ["build_artifact", "artifact_names", "TARGETS"]

TARGETS: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "cpu": ("mind.compiler.build.cpu:build_cpu", ("kernel.so", "kernel.h")),
    "cuda": ("mind.compiler.build.cuda:build_cuda", None),
}
"""Each target's builder (``(fn, env, about) -> (files, plan, record)``) and the kernel files it
writes, where they are known before the build (None: one file per kernel module and architecture)."""


def artifact_names(target: str) -> list[str]:
    """The files of an artifact for ``target`` known before it is built (an output folder is checked
    for them before anything is compiled, and for every file again before the first write)."""
    return [*(_row(target)[1] or ()), CORE_IR, PLAN, MANIFEST]


def _row(target: str) -> tuple[str, tuple[str, ...] | None]:
    row = TARGETS.get(target)
    if row is None:
        raise error("E6002", f"unknown build target `{target}`", help="targets: " + ", ".join(TARGETS))
    return row


def build_artifact(fn: Function, target: str = "cpu", env: Mapping[str, int] | None = None) -> dict[str, bytes]:
    """The files of ``fn``'s artifact for ``target``, specialized to the symbol values ``env`` (every
    symbol of ``fn`` needs one: E6003 names those without)."""
    builder, names = _row(target)
    env = dict(env or {})
    missing = sorted(set(fn.symbols()) - set(env))
    if missing:
        raise error("E6003", f"@{fn.name} has symbolic dims ({', '.join(missing)}); an artifact is built for "
                             "concrete sizes", fn.span, help="give each parameter with symbolic dims a shape: "
                                                             "`--shapes x=f32[4,3]`")
    ir = Module([fn]).text().encode("utf-8")
    about = f"@{fn.name} built by MIND {__version__} (spec {SPEC_VERSION}) for {target}"
    module_name, attr = builder.split(":")
    files, plan, record = getattr(importlib.import_module(module_name), attr)(fn, env, about)
    plan = {**plan, "format": "mind-plan-v1", "target": target, "function": fn.name, "sizes": env,
            "params": [p.name for p in fn.params]}
    assert names is None or sorted(files) == sorted(names), f"the {target} builder wrote {sorted(files)}"
    files = {**files, CORE_IR: ir, PLAN: json_bytes(plan)}
    about_build = {**record, "target": target, "function": fn.name, "sizes": env, "core_ir_sha256": sha256(ir),
                   "spec_version": SPEC_VERSION, "mind_version": __version__}
    files[MANIFEST] = manifest_bytes(files, about_build)
    return files
