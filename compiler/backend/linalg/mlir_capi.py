"""MLIR's C API through ctypes, for the long calls of a lowering: parsing, pass pipelines, the
transform interpreter and translation to LLVM IR.

Why not the Python bindings for these: a bindings call holds the GIL for its whole duration (a
pipeline or the transform interpreter runs for milliseconds), and every other Python thread of the
process stands still meanwhile; ctypes releases the GIL around every foreign call
(``docs/backend-cpu.md`` has the stalls measured both ways).  The
bindings' own objects (context, module, operation, pass manager) are passed by the C pointers their
``_CAPIPtr`` capsules hold: nothing is copied, and the Python objects stay the owners.

Diagnostics: a Python diagnostic handler attached through the bindings must not run while the GIL
is released (nanobind aborts the process on its first reference count change).  ``Diagnostics``
attaches a C-level handler written with ctypes instead: ctypes callbacks take the GIL themselves.
A context used with these functions must have no bindings-level handler attached.

The structs of the C API that hold one pointer (``MlirContext``, ``MlirOperation``, ...) are passed
by value as ``_Handle``; ``MlirLogicalResult`` (one ``int8_t``) is returned as ``_Result`` and, by a
diagnostic handler, as a C ``int8_t``, which the x86-64 and AArch64 calling conventions return in the
same register.  MLIR is imported by the callers; this module only loads the library they loaded.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

__all__ = ["Diagnostics", "parse_module", "run_pass_manager", "apply_named_sequence", "translate_to_llvm_ir"]


class _Handle(ctypes.Structure):
    """Any C API struct made of one pointer: MlirContext, MlirModule, MlirOperation, ..."""

    _fields_ = [("ptr", ctypes.c_void_p)]


class _StringRef(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("length", ctypes.c_size_t)]


class _Result(ctypes.Structure):
    """MlirLogicalResult: 1 = success."""

    _fields_ = [("value", ctypes.c_int8)]


_STRING_CALLBACK = ctypes.CFUNCTYPE(None, _StringRef, ctypes.c_void_p)
_DIAGNOSTIC_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int8, _Handle, ctypes.c_void_p)

_SIGNATURES: dict[str, tuple[list[Any], Any]] = {
    "mlirModuleCreateParse": ([_Handle, _StringRef], _Handle),
    "mlirPassManagerRunOnOp": ([_Handle, _Handle], _Result),
    "mlirTransformOptionsCreate": ([], _Handle),
    "mlirTransformOptionsDestroy": ([_Handle], None),
    "mlirTransformApplyNamedSequence": ([_Handle, _Handle, _Handle, _Handle], _Result),
    "mlirRegisterAllLLVMTranslations": ([_Handle], None),
    "mlirTranslateModuleToLLVMIRToString": ([_Handle], ctypes.c_void_p),
    "mlirContextAttachDiagnosticHandler": ([_Handle, _DIAGNOSTIC_HANDLER, ctypes.c_void_p, ctypes.c_void_p],
                                           ctypes.c_uint64),
    "mlirContextDetachDiagnosticHandler": ([_Handle, ctypes.c_uint64], None),
    "mlirDiagnosticPrint": ([_Handle, _STRING_CALLBACK, ctypes.c_void_p], None),
    "mlirDiagnosticGetLocation": ([_Handle], _Handle),
    "mlirDiagnosticGetSeverity": ([_Handle], ctypes.c_int),
    "mlirDiagnosticGetNumNotes": ([_Handle], ctypes.c_ssize_t),
    "mlirDiagnosticGetNote": ([_Handle, ctypes.c_ssize_t], _Handle),
    "mlirLocationPrint": ([_Handle, _STRING_CALLBACK, ctypes.c_void_p], None),
}
_SEVERITY = ("error", "warning", "note", "remark")  # MlirDiagnosticSeverity, in order
_MODULE_CAPSULE = b"mlir.ir.Module._CAPIPtr"  # kept alive: a capsule keeps a pointer to its name
_LIBS: dict[str, Any] = {}
"""The MLIR C API library the bindings loaded, and libc, typed once per process."""


def _lib() -> Any:
    """libMLIRPythonCAPI.so (the library the bindings use), its functions typed; libc's free."""
    lib = _LIBS.get("mlir")
    if lib is None:
        import mlir._mlir_libs as libs
        lib = ctypes.CDLL(os.path.join(os.path.dirname(libs.__file__), "libMLIRPythonCAPI.so"))
        for name, (args, res) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res
        libc = ctypes.CDLL(None)
        libc.free.argtypes, libc.free.restype = [ctypes.c_void_p], None
        _LIBS["libc"] = libc
        _LIBS["mlir"] = lib
    return lib


def _pointer(capsule: Any) -> int:
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_ptr = ctypes.pythonapi.PyCapsule_GetPointer
    get_ptr.restype, get_ptr.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return int(get_ptr(capsule, get_name(capsule)))


def _handle(obj: Any) -> _Handle:
    """The C handle of a bindings object (Context, Operation, PassManager, ...)."""
    return _Handle(_pointer(obj._CAPIPtr))


def _printed(print_fn: Any, handle: _Handle) -> str:
    """What an ``mlir*Print(handle, callback, userData)`` function writes, as one string."""
    chunks: list[bytes] = []

    def take(s: _StringRef, _user: Any) -> None:
        chunks.append(ctypes.string_at(s.data, s.length) if s.length else b"")

    print_fn(handle, _STRING_CALLBACK(take), None)
    return b"".join(chunks).decode("utf-8", "replace")


class Diagnostics:
    """Collects every diagnostic MLIR emits in ``ctx`` while attached, as text: ``severity: location:
    message``, each note on a line of its own below.  The handler claims every diagnostic (nothing
    is printed to stderr)."""

    def __init__(self, ctx: Any) -> None:
        self.messages: list[str] = []
        self._ctx = _handle(ctx)
        self._callback = _DIAGNOSTIC_HANDLER(self._on)  # referenced for as long as it is attached
        self._id: int | None = _lib().mlirContextAttachDiagnosticHandler(self._ctx, self._callback, None, None)

    def _describe(self, d: _Handle) -> str:
        lib = _lib()
        severity = lib.mlirDiagnosticGetSeverity(d)
        name = _SEVERITY[severity] if 0 <= severity < len(_SEVERITY) else "diagnostic"
        where = _printed(lib.mlirLocationPrint, lib.mlirDiagnosticGetLocation(d))
        return f"{name}: {where}: {_printed(lib.mlirDiagnosticPrint, d)}"

    def _on(self, d: _Handle, _user: Any) -> int:
        try:
            lib = _lib()
            text = self._describe(d)
            for i in range(lib.mlirDiagnosticGetNumNotes(d)):
                text += "\n  " + self._describe(lib.mlirDiagnosticGetNote(d, i))
            self.messages.append(text)
        except BaseException:  # noqa: BLE001 - an exception must never propagate into MLIR
            self.messages.append("error: (a diagnostic that could not be read)")
        return 1  # handled

    def detach(self) -> None:
        if self._id is not None:
            _lib().mlirContextDetachDiagnosticHandler(self._ctx, self._id)
            self._id = None


def parse_module(ctx: Any, text: str) -> Any:
    """``ir.Module.parse(text)`` in ``ctx`` without the GIL; None when it does not parse (the
    reasons went to the context's diagnostic handlers)."""
    from mlir import ir
    data = text.encode("utf-8")
    raw = _lib().mlirModuleCreateParse(_handle(ctx), _StringRef(ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p),
                                                                 len(data)))
    if not raw.ptr:
        return None
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype, new_capsule.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return ir.Module._CAPICreate(new_capsule(raw.ptr, _MODULE_CAPSULE, None))  # the Module owns it now


def run_pass_manager(pm: Any, op: Any) -> bool:
    """``pm.run(op)`` without the GIL; False when a pass failed (see the diagnostics)."""
    return bool(_lib().mlirPassManagerRunOnOp(_handle(pm), _handle(op)).value)


def apply_named_sequence(payload: Any, entry: Any, transform_module: Any) -> bool:
    """The transform interpreter: ``entry`` (a ``transform.named_sequence`` of ``transform_module``)
    applied to ``payload`` in place, without the GIL; False when it failed."""
    lib = _lib()
    options = lib.mlirTransformOptionsCreate()
    try:
        return bool(lib.mlirTransformApplyNamedSequence(_handle(payload), _handle(entry), _handle(transform_module),
                                                        options).value)
    finally:
        lib.mlirTransformOptionsDestroy(options)


def translate_to_llvm_ir(module: Any) -> str | None:
    """LLVM IR text of an LLVM-dialect module (what ``mlir-translate --mlir-to-llvmir`` prints);
    None when translation failed."""
    lib = _lib()
    lib.mlirRegisterAllLLVMTranslations(_handle(module.context))
    ptr = lib.mlirTranslateModuleToLLVMIRToString(_handle(module.operation))
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8")
    finally:
        _LIBS["libc"].free(ptr)
