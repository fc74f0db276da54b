"""MLIR text -> LLVM IR text, in-process, with MLIR's diagnostics captured.

Why a module of its own: this is the only place of the engine that imports MLIR, so the warm path
(cache hit) never pays the ~130 ms MLIR import.  Every MLIR failure (parse, verifier, transform
script, pass) is raised as ``LoweringError`` carrying MLIR's diagnostic text; ``engine`` maps it to
``MindError`` E6012.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from typing import Any

from .abi import ELEMENT_TYPES, ArgSpec, Signature
from .pipeline import PipelineError, full_pipeline, prefusion
from .transforms import apply_script, schedule_module

__all__ = ["LoweringError", "Lowered", "lower_to_llvm_ir", "lower_to_llvm_dialect", "translate_to_llvm_ir",
           "read_signature"]


class LoweringError(Exception):
    """MLIR rejected the input or a pass failed; ``diagnostics`` holds MLIR's messages."""

    def __init__(self, stage: str, message: str, diagnostics: list[str] | None = None) -> None:
        self.stage = stage
        self.diagnostics = list(diagnostics or [])
        text = f"{stage}: {message}"
        if self.diagnostics:
            text += "\n" + "\n".join(self.diagnostics)
        super().__init__(text)


@dataclass(frozen=True)
class Lowered:
    """Result of lowering: LLVM IR text, the kernel's signature, whether a schedule was applied."""

    llvm_ir: str
    signature: Signature
    scheduled: bool


def _new_context() -> Any:
    from mlir import ir
    ctx = ir.Context()
    ctx.enable_multithreading(False)  # deterministic and no thread pool per context
    return ctx


class _Diagnostics:
    """Collects every diagnostic MLIR emits while attached (messages, with notes)."""

    def __init__(self, ctx: Any) -> None:
        self.messages: list[str] = []
        self._handle = ctx.attach_diagnostic_handler(self._on)

    def _on(self, d: Any) -> bool:
        try:
            text = f"{d.severity.name.lower()}: {d.location}: {d.message}"
            for n in d.notes:
                text += f"\n  note: {n.location}: {n.message}"
        except Exception:  # noqa: BLE001 - a handler must never throw into MLIR
            text = str(d)
        self.messages.append(text)
        return True  # handled: do not print to stderr

    def detach(self) -> None:
        self._handle.detach()


def _element_name(t: Any) -> str:
    s = str(t)
    if s not in ELEMENT_TYPES:
        hint = " (numpy bool crosses the boundary as i8)" if s == "i1" else ""
        raise LoweringError("signature", f"element type {s} is not supported at the kernel boundary{hint}")
    return ELEMENT_TYPES[s]


def read_signature(func_op: Any) -> Signature:
    """Inputs are the tensor arguments, outputs the memref arguments (out-parameters)."""
    from mlir import ir
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    if len(ftype.results):
        raise LoweringError("signature", "kernel functions must return nothing: write results through "
                                         "memref out-parameters")
    ins: list[ArgSpec] = []
    outs: list[ArgSpec] = []
    for t in ftype.inputs:
        if isinstance(t, (ir.RankedTensorType, ir.MemRefType)):
            st = ir.ShapedType(t)
            if not st.has_static_shape:
                raise LoweringError("signature", f"argument type {t} must have a static shape")
            spec = ArgSpec(_element_name(st.element_type), tuple(int(s) for s in st.shape))
            if isinstance(t, ir.MemRefType):
                if not _identity_layout(t):
                    raise LoweringError("signature", f"out-parameter {t} must have the identity layout")
                outs.append(spec)
            else:
                if outs:
                    raise LoweringError("signature", "tensor inputs must come before memref outputs")
                ins.append(spec)
        else:
            raise LoweringError("signature", f"argument type {t} is not a ranked tensor or memref")
    name = ir.StringAttr(func_op.attributes["sym_name"]).value
    return Signature(name, tuple(ins), tuple(outs))


def _find_func(module: Any, name: str) -> Any:
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir_str(op.attributes["sym_name"]) == name:
            return op
    raise LoweringError("signature", f"no func.func @{name} in the module")


def ir_str(attr: Any) -> str:
    from mlir import ir
    return ir.StringAttr(attr).value


def lower_to_llvm_dialect(mlir_text: str, func_name: str, *, threads: int = 1, schedule: bool = True,
                          ctx: Any = None) -> tuple[Any, Signature, bool]:
    """Parse, schedule (transform dialect), bufferize and lower to the LLVM dialect.

    Returns (module, signature, scheduled).  The module lives in ``ctx`` (a new context if None).
    """
    from mlir import ir
    from mlir.passmanager import PassManager

    try:
        pipeline_text = full_pipeline(threads).render()
    except PipelineError as e:
        raise LoweringError("pipeline", str(e)) from None
    ctx = ctx or _new_context()
    diags = _Diagnostics(ctx)
    stage = "parse"
    try:
        with ctx, ir.Location.unknown():
            try:
                module = ir.Module.parse(mlir_text)
                stage = "verify"
                if not module.operation.verify():
                    raise LoweringError(stage, "the module does not verify", diags.messages)
                func_op = _find_func(module, func_name)
                sig = read_signature(func_op)
                func_op.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
                scheduled = False
                if schedule:
                    try:
                        stage = "fusion"
                        PassManager.parse(prefusion().render()).run(module.operation)
                        stage = "schedule"
                        script = schedule_module(module)
                        if script is not None:
                            apply_script(module, script)
                            scheduled = True
                    except Exception:  # noqa: BLE001 - a schedule that MLIR rejects: use scalar loops
                        diags.messages.clear()
                        module = ir.Module.parse(mlir_text)
                        func_op = _find_func(module, func_name)
                        func_op.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
                        scheduled = False
                stage = "lower"
                PassManager.parse(pipeline_text).run(module.operation)
            except LoweringError:
                raise
            except Exception as e:  # MLIRError, ValueError from parse/pass manager, ...
                extra = []
                for d in getattr(e, "error_diagnostics", []) or []:
                    extra.append(f"error: {d.location}: {d.message}")
                raise LoweringError(stage, str(e).strip(), diags.messages + extra) from None
    finally:
        diags.detach()
    return module, sig, scheduled


_TRANSLATE: Any = None


def _capi() -> Any:
    """libMLIRPythonCAPI.so functions used through ctypes (the bindings do not wrap them)."""
    global _TRANSLATE
    if _TRANSLATE is None:
        import mlir._mlir_libs as libs
        lib = ctypes.CDLL(os.path.join(os.path.dirname(libs.__file__), "libMLIRPythonCAPI.so"))
        lib.mlirRegisterAllLLVMTranslations.argtypes = [ctypes.c_void_p]
        lib.mlirRegisterAllLLVMTranslations.restype = None
        lib.mlirTranslateModuleToLLVMIRToString.argtypes = [ctypes.c_void_p]
        lib.mlirTranslateModuleToLLVMIRToString.restype = ctypes.c_void_p
        libc = ctypes.CDLL(None)
        libc.free.argtypes = [ctypes.c_void_p]
        libc.free.restype = None
        _TRANSLATE = (lib, libc)
    return _TRANSLATE


def _capsule_pointer(capsule: Any) -> int:
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
    get_ptr.restype = ctypes.c_void_p
    get_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return int(get_ptr(capsule, get_name(capsule)))


def translate_to_llvm_ir(module: Any) -> str:
    """LLVM IR text of an LLVM-dialect module (same output as ``mlir-translate --mlir-to-llvmir``)."""
    lib, libc = _capi()
    lib.mlirRegisterAllLLVMTranslations(_capsule_pointer(module.context._CAPIPtr))
    ptr = lib.mlirTranslateModuleToLLVMIRToString(_capsule_pointer(module.operation._CAPIPtr))
    if not ptr:
        raise LoweringError("translate", "MLIR could not translate the module to LLVM IR")
    try:
        return ctypes.string_at(ptr).decode("utf-8")
    finally:
        libc.free(ptr)


def lower_to_llvm_ir(mlir_text: str, func_name: str, *, threads: int = 1, schedule: bool = True) -> Lowered:
    """The whole MLIR half: text in, LLVM IR text and the kernel signature out."""
    ctx = _new_context()
    module, sig, scheduled = lower_to_llvm_dialect(mlir_text, func_name, threads=threads, schedule=schedule,
                                                   ctx=ctx)
    with ctx:
        ir_text = translate_to_llvm_ir(module)
    return Lowered(ir_text, sig, scheduled)


def _identity_layout(t: Any) -> bool:
    """True if a memref type has the identity (row-major, no offset) layout."""
    from mlir import ir
    layout = t.layout
    return isinstance(layout, ir.AffineMapAttr) and ir.AffineMapAttr(layout).value.is_permutation and \
        list(ir.AffineMapAttr(layout).value.results) == list(ir.AffineMap.get_identity(t.rank).results)
