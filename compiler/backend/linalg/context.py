"""MLIR in-process: the shared context, parsing, pass pipelines and translation, with MLIR's
diagnostics captured.

Why a module of its own: the backends import MLIR only through here and the modules that run on a
parsed module, so a warm start (a cache hit) never pays the MLIR import.  Every MLIR failure (parse,
verifier, transform script, pass) is raised as ``LoweringError`` carrying MLIR's diagnostic text; the
backend maps it to its own diagnostic.  The long calls go through ``mlir_capi`` (the GIL released).
"""

from __future__ import annotations

import threading
from typing import Any

from .mlir_capi import Diagnostics, parse_module, run_pass_manager
from .mlir_capi import translate_to_llvm_ir as capi_translate

__all__ = ["LoweringError", "Diagnostics", "new_context", "SHARED", "SharedContext", "parse", "run_pipeline",
           "find_func", "translate_to_llvm_ir"]


class LoweringError(Exception):
    """MLIR rejected the input or a pass failed; ``diagnostics`` holds MLIR's messages."""

    def __init__(self, stage: str, message: str, diagnostics: list[str] | None = None) -> None:
        self.stage = stage
        self.diagnostics = list(diagnostics or [])
        text = f"{stage}: {message}"
        if self.diagnostics:
            text += "\n" + "\n".join(self.diagnostics)
        super().__init__(text)


_LIGHT_DIALECTS = "mind.compiler.backend.linalg._mlir_light_dialects"
_LIGHT_NAMES = ("linalg", "func", "builtin", "arith", "tensor", "scf", "transform", "math", "vector", "memref", "ub",
                "bufferization", "affine", "cf", "llvm", "omp")
"""The dialects whose ops the backends get views of while they walk a kernel (in the bodies of
``linalg.generic``: ``math``; in the bufferized module ``library_calls`` walks: ``memref``,
``vector``, ``ub``, ``bufferization``; in the loops ``movement_loops`` marks: ``affine``; in the
LLVM-dialect module whose latches it annotates: ``cf``, ``llvm``, ``omp``): each generated module's
import is a measurable share of a cold compile (``docs/backend-cpu.md``, Measurements), for classes no backend uses."""


def _install_light_dialect_modules() -> None:
    """Make the bindings' automatic import of the ``linalg`` dialect module (and the others the
    backends walk, ``_LIGHT_NAMES``) cheap.

    Whenever Python code gets an op view of a linalg op (``value.owner``, ``block.operations``),
    the bindings import the dialect's module, and ``mlir.dialects.linalg`` executes the whole
    OpDSL library (four extra contexts, a third of a cold compile of a small matmul).  A search
    prefix placed first resolves ``linalg`` to an empty module: linalg ops then get generic op views
    (the backends read only names, attributes, operands, results and regions, which every view has),
    and neither the OpDSL library nor the generated op classes are imported on a cold compile.  The
    prefix's parent is not a package, so every other dialect falls through to ``mlir.dialects`` at
    once.  ``import mlir.dialects.linalg`` (or any of them) keeps working as usual (its classes then
    type the views).  Once per process (the modules it adds to ``sys.modules`` say it is done), and
    not at all if the real linalg module was imported already."""
    import sys
    import types
    if _LIGHT_DIALECTS in sys.modules or "mlir.dialects.linalg" in sys.modules:
        return
    try:
        from mlir._mlir_libs import _mlir
        prefixes = list(_mlir.globals.dialect_search_modules)
    except Exception:  # noqa: BLE001 - an optimization only
        return
    sys.modules[_LIGHT_DIALECTS] = types.ModuleType(_LIGHT_DIALECTS)
    for name in _LIGHT_NAMES:
        if "mlir.dialects." + name not in sys.modules:
            sys.modules[f"{_LIGHT_DIALECTS}.{name}"] = types.ModuleType(
                f"{_LIGHT_DIALECTS}.{name}", "no op classes: generic op views (see linalg.context)")
    try:
        _mlir.globals.dialect_search_modules = [_LIGHT_DIALECTS] + [p for p in prefixes if p != _LIGHT_DIALECTS]
    except Exception:  # noqa: BLE001 - bindings without a settable search path: keep the default
        pass


def new_context() -> Any:
    """A fresh MLIR context: no dialect loaded up front (the parser, the passes and the transform
    interpreter load what they use from the registry on demand), single-threaded (deterministic,
    no thread pool per context)."""
    from mlir import ir
    _install_light_dialect_modules()
    ctx = ir.Context(load_on_create_dialects=[])
    ctx.enable_multithreading(False)
    return ctx


class SharedContext:
    """The one MLIR context the lowerings of a process reuse (creating one costs milliseconds), with
    the parsed pass managers of the pipelines they run.

    A context is not safe for concurrent mutation, so ``lock`` serializes its users; it is replaced
    after ``MAX_USES`` lowerings (and by ``retire`` after a failure or a large module), so the
    attributes and types it interns (dense constants!) do not accumulate forever."""

    MAX_USES = 64

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._ctx: Any = None
        self._uses = 0
        self._pass_managers: dict[str, Any] = {}

    def acquire(self) -> Any:
        """The context for one more lowering (hold ``lock``)."""
        if self._ctx is None or self._uses >= self.MAX_USES:
            self.retire()
            self._ctx = new_context()
        self._uses += 1
        return self._ctx

    def retire(self) -> None:
        self._ctx, self._uses, self._pass_managers = None, 0, {}

    def pass_manager(self, ctx: Any, pipeline_text: str) -> Any:
        """A parsed ``PassManager`` for ``pipeline_text`` in ``ctx``, kept while ``ctx`` is the shared one."""
        from mlir.passmanager import PassManager
        shared = ctx is self._ctx
        pm = self._pass_managers.get(pipeline_text) if shared else None
        if pm is None:
            pm = PassManager.parse(pipeline_text)
            # The verifier after each of the ~30 passes costs a third of the pipeline; the input is
            # verified after parsing and the result once after the pipeline.
            pm.enable_verifier(False)
            if shared:
                self._pass_managers[pipeline_text] = pm
        return pm


SHARED = SharedContext()
"""The process's shared MLIR context (a true process-wide fact: one lock around one context)."""


def parse(ctx: Any, text: str, stage: str, diags: Diagnostics) -> Any:
    module = parse_module(ctx, text)
    if module is None:
        raise LoweringError(stage, "the MLIR text does not parse", diags.messages)
    return module


def run_pipeline(ctx: Any, pipeline_text: str, module: Any, stage: str, diags: Diagnostics) -> None:
    if not run_pass_manager(SHARED.pass_manager(ctx, pipeline_text), module.operation):
        raise LoweringError(stage, "a pass failed", diags.messages)


def find_func(module: Any, name: str, kind: str = "func.func") -> Any:
    """The function ``@name`` of ``module``: a ``func.func``, or the ``llvm.func`` it was lowered to."""
    from mlir import ir
    for op in module.body.operations:
        if op.operation.name == kind and ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op
    raise LoweringError("signature", f"no {kind} @{name} in the module")


def translate_to_llvm_ir(module: Any) -> str:
    """LLVM IR text of an LLVM-dialect module (same output as ``mlir-translate --mlir-to-llvmir``)."""
    text = capi_translate(module)
    if text is None:
        raise LoweringError("translate", "MLIR could not translate the module to LLVM IR")
    return text
