"""MLIR text -> LLVM IR text, in-process, with MLIR's diagnostics captured.

Why a module of its own: this is the only place of the engine that imports MLIR, so the warm path
(cache hit) never pays the ~130 ms MLIR import.  Every MLIR failure (parse, verifier, transform
script, pass) is raised as ``LoweringError`` carrying MLIR's diagnostic text; ``engine`` maps it to
``MindError`` E6012.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from mind.spec.record import FrozenRecord

_set = object.__setattr__  # FrozenRecord fields are set once, in __init__

from .abi import ELEMENT_TYPES, ArgSpec, Signature
from .library_calls import insert_library_calls
from .mlir_capi import Diagnostics, parse_module, run_pass_manager
from .mlir_capi import translate_to_llvm_ir as capi_translate
from .pipeline import PipelineError, bufferize, full_pipeline, lower_to_llvm, prefusion
from .runtime import link_runtime
from .transforms import (MIN_SCHEDULE_WORK, apply_script, largest_unscheduled_work, schedule_module,
                         untie_shared_inits)


class LoweringOptions(Protocol):
    """What the lowering reads of the resolved options (``options.CpuOptions``, its thread count
    decided)."""

    threads: int
    schedule: bool | str
    library: str | None

__all__ = ["LoweringError", "Lowered", "lower_to_llvm_ir", "lower_to_llvm_dialect", "translate_to_llvm_ir",
           "read_signature", "lower_module_text"]


class LoweringError(Exception):
    """MLIR rejected the input or a pass failed; ``diagnostics`` holds MLIR's messages."""

    def __init__(self, stage: str, message: str, diagnostics: list[str] | None = None) -> None:
        self.stage = stage
        self.diagnostics = list(diagnostics or [])
        text = f"{stage}: {message}"
        if self.diagnostics:
            text += "\n" + "\n".join(self.diagnostics)
        super().__init__(text)


class Lowered(FrozenRecord):
    """Result of lowering: LLVM IR text, the kernel's signature, whether a schedule was applied, the
    largest op left as scalar loops (``transforms.op_work``; what ``codegen`` needs to know), and the
    ``kernel_library`` instruction set whose object the kernel calls (None: it calls none)."""

    __slots__ = ("llvm_ir", "signature", "scheduled", "scalar_work", "library")

    llvm_ir: str
    signature: Signature
    scheduled: bool
    scalar_work: int
    library: str | None

    def __init__(self, llvm_ir: str, signature: Signature, scheduled: bool, scalar_work: int = 1 << 62,
                 library: str | None = None) -> None:
        _set(self, "llvm_ir", llvm_ir)
        _set(self, "signature", signature)
        _set(self, "scheduled", scheduled)
        _set(self, "scalar_work", scalar_work)
        _set(self, "library", library)


_LIGHT_DIALECTS = "mind.compiler.backend.cpu._mlir_light_dialects"


_LIGHT_NAMES = ("linalg", "func", "builtin", "arith", "tensor", "scf", "transform")


def _install_light_linalg_module() -> None:
    """Make the bindings' automatic import of the ``linalg`` dialect module cheap.

    Whenever Python code gets an op view of a linalg op (``value.owner``, ``block.operations``),
    the bindings import the dialect's module, and ``mlir.dialects.linalg`` executes the whole
    OpDSL library (~45 ms of CPU, four extra contexts): a third of a cold compile of a small
    matmul.  A search prefix placed first resolves ``linalg`` to an empty module: linalg ops then
    get generic op views (the backend reads only names, attributes, operands, results and regions,
    which every view has), and neither the OpDSL library nor the 5-10 ms of generated op classes
    (``_linalg_ops_gen``) is imported on a cold compile.  The prefix's parent is not a package, so
    every other dialect falls through to ``mlir.dialects`` at once.  The other dialects whose ops the
    backend walks (``_LIGHT_NAMES``) get empty modules too: their generated classes cost another
    ~10 ms of imports.  ``import mlir.dialects.linalg`` (or any of them) keeps working as usual (its
    classes then type the views).  Once per process, and not at all if the real linalg module was
    imported already."""
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
                f"{_LIGHT_DIALECTS}.{name}", "no op classes: generic op views (see lowering)")
    try:
        _mlir.globals.dialect_search_modules = [_LIGHT_DIALECTS] + [p for p in prefixes if p != _LIGHT_DIALECTS]
    except Exception:  # noqa: BLE001 - bindings without a settable search path: keep the default
        pass


def _new_context() -> Any:
    from mlir import ir
    _install_light_linalg_module()
    # No dialect is loaded up front (loading all of them costs ~5-15 ms per context): the parser,
    # the passes and the transform interpreter load what they use from the registry on demand.
    ctx = ir.Context(load_on_create_dialects=[])
    ctx.enable_multithreading(False)  # deterministic and no thread pool per context
    return ctx


# One MLIR context per process, reused by every lowering (creating one costs ~2-15 ms), with the
# parsed pass managers of the pipelines.  A lock serializes lowerings (a context is not safe for
# concurrent mutation); the context is replaced after _CTX_MAX_USES lowerings or after a large
# module, so the attributes and types it interns (dense constants!) do not accumulate forever.
_CTX_LOCK = threading.RLock()
_CTX_MAX_USES = 64
_CTX_LARGE_TEXT = 1 << 20
_SHARED: dict[str, Any] = {}


def _shared_context() -> Any:
    ctx = _SHARED.get("ctx")
    if ctx is None or _SHARED.get("uses", 0) >= _CTX_MAX_USES:
        ctx = _new_context()
        _SHARED.clear()
        _SHARED["ctx"] = ctx
        _SHARED["pm"] = {}
    _SHARED["uses"] = _SHARED.get("uses", 0) + 1
    return ctx


def _retire_shared_context() -> None:
    _SHARED.clear()


def _pass_manager(ctx: Any, pipeline_text: str) -> Any:
    """A parsed ``PassManager`` for ``pipeline_text``, cached per shared context."""
    from mlir.passmanager import PassManager
    cache = _SHARED.get("pm") if _SHARED.get("ctx") is ctx else None
    if cache is not None:
        pm = cache.get(pipeline_text)
        if pm is not None:
            return pm
    pm = PassManager.parse(pipeline_text)
    # The verifier after each of the ~30 passes costs 30-40 % of the pipeline (15 ms on a 512^2
    # matmul); the input is verified after parsing and the result once after the pipeline.
    pm.enable_verifier(False)
    if cache is not None:
        cache[pipeline_text] = pm
    return pm


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


def _prepare_entry(func_op: Any) -> None:
    """The kernel's C interface (``_mlir_ciface_``), and its tensor arguments marked read-only for
    bufferization: they are the caller's numpy arrays, which a kernel must never write (an op whose
    init is an argument, ``outs(%arg)``, would otherwise compute in place in it)."""
    from mlir import ir
    func_op.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    old = list(func_op.attributes["arg_attrs"]) if "arg_attrs" in func_op.attributes else []
    read_only = ir.BoolAttr.get(False)
    attrs = []
    for i, t in enumerate(ftype.inputs):
        entries = {a.name: a.attr for a in ir.DictAttr(old[i])} if i < len(old) else {}
        if isinstance(t, ir.RankedTensorType):
            entries["bufferization.writable"] = read_only
        attrs.append(ir.DictAttr.get(entries))
    func_op.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)


def _find_func(module: Any, name: str) -> Any:
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir_str(op.attributes["sym_name"]) == name:
            return op
    raise LoweringError("signature", f"no func.func @{name} in the module")


def ir_str(attr: Any) -> str:
    from mlir import ir
    return ir.StringAttr(attr).value


def _parse(ctx: Any, text: str, stage: str, diags: Diagnostics) -> Any:
    module = parse_module(ctx, text)
    if module is None:
        raise LoweringError(stage, "the MLIR text does not parse", diags.messages)
    return module


def _run(ctx: Any, pipeline_text: str, module: Any, stage: str, diags: Diagnostics) -> None:
    if not run_pass_manager(_pass_manager(ctx, pipeline_text), module.operation):
        raise LoweringError(stage, "a pass failed", diags.messages)


def lower_to_llvm_dialect(mlir_text: str, func_name: str, options: LoweringOptions, *, ctx: Any = None,
                          report: dict[str, Any] | None = None) -> tuple[Any, Signature, bool]:
    """Parse, schedule (transform dialect), bufferize and lower to the LLVM dialect, with ``options``
    (its thread count decided).

    ``options.schedule``: True schedules the ops that pay for their compile time
    (``MIN_SCHEDULE_WORK``), "all" every op that has a plan, False none.  ``options.library``: an
    instruction set of ``kernel_library``: the matmuls it can compute (any size) call its GEMM
    instead (``library_calls``), None schedules them.
    Returns (module, signature, scheduled).  The module lives in ``ctx`` (a new context if None).
    ``report`` (a dict) receives ``scalar_work``, the largest ``op_work`` left to scalar loops, and
    ``library_calls``, how many matmuls call the library.
    The long MLIR calls go through ``mlir_capi`` and release the GIL.
    """
    from mlir import ir

    threads, schedule, library = options.threads, options.schedule, options.library
    min_work = 0 if schedule == "all" else MIN_SCHEDULE_WORK
    try:
        if library is None:
            pipelines = [full_pipeline(threads).render()]
        else:
            pipelines = [bufferize().render(), lower_to_llvm(threads).render()]
    except PipelineError as e:
        raise LoweringError("pipeline", str(e)) from None
    ctx = ctx or _new_context()
    diags = Diagnostics(ctx)
    stage = "parse"
    try:
        with ctx, ir.Location.unknown():
            try:
                module = _parse(ctx, mlir_text, stage, diags)
                stage = "verify"
                if not module.operation.verify():
                    raise LoweringError(stage, "the module does not verify", diags.messages)
                func_op = _find_func(module, func_name)
                sig = read_signature(func_op)
                _prepare_entry(func_op)
                scheduled = False
                if schedule:
                    try:
                        stage = "fusion"
                        _run(ctx, prefusion().render(), module, stage, diags)
                        stage = "schedule"
                        # cse merged identical inits: unshare them (see untie_shared_inits)
                        untie_shared_inits(module, tag_empties=True)
                        script = schedule_module(module, min_work, library is not None)
                        if report is not None:
                            report["scalar_work"] = largest_unscheduled_work(module, library is not None)
                        if script is not None:
                            apply_script(module, script)
                            scheduled = True
                            untie_shared_inits(module)
                    except Exception:  # noqa: BLE001 - a schedule that MLIR rejects: use scalar loops
                        diags.messages.clear()
                        stage = "parse"
                        module = _parse(ctx, mlir_text, stage, diags)
                        _prepare_entry(_find_func(module, func_name))
                        scheduled = False
                        if report is not None:
                            report.pop("scalar_work", None)
                stage = "lower"
                _run(ctx, pipelines[0], module, stage, diags)
                if library is not None:
                    stage = "library"
                    calls = insert_library_calls(module, library, threads)
                    if report is not None:
                        report["library_calls"] = calls
                    stage = "lower"
                    _run(ctx, pipelines[1], module, stage, diags)
                if not module.operation.verify():
                    raise LoweringError(stage, "the lowered module does not verify", diags.messages)
            except LoweringError:
                raise
            except Exception as e:  # ValueError from the pass manager's parser, ...
                raise LoweringError(stage, str(e).strip(), diags.messages) from None
    finally:
        diags.detach()
    return module, sig, scheduled


def translate_to_llvm_ir(module: Any) -> str:
    """LLVM IR text of an LLVM-dialect module (same output as ``mlir-translate --mlir-to-llvmir``)."""
    text = capi_translate(module)
    if text is None:
        raise LoweringError("translate", "MLIR could not translate the module to LLVM IR")
    return text


def lower_module_text(mlir_text: str) -> str:
    """LLVM IR of a whole module of memref functions (no kernel signature, no schedule): what the
    prebuilt kernels of ``kernel_library`` are made from.  A private context."""
    from mlir import ir
    ctx = _new_context()
    diags = Diagnostics(ctx)
    try:
        with ctx, ir.Location.unknown():
            module = _parse(ctx, mlir_text, "parse", diags)
            if not module.operation.verify():
                raise LoweringError("verify", "the module does not verify", diags.messages)
            _run(ctx, lower_to_llvm(1).render(), module, "lower", diags)
            return translate_to_llvm_ir(module)
    finally:
        diags.detach()


def lower_to_llvm_ir(mlir_text: str, func_name: str, options: LoweringOptions) -> Lowered:
    """The whole MLIR half: text in, LLVM IR text and the kernel signature out (``options``: see
    ``lower_to_llvm_dialect``)."""
    with _CTX_LOCK:
        ctx = _shared_context()
        report: dict[str, Any] = {}
        try:
            module, sig, scheduled = lower_to_llvm_dialect(mlir_text, func_name, options, ctx=ctx, report=report)
            with ctx:
                # runtime functions MLIR's lowering calls (memrefCopy) are defined in the module itself
                ir_text = link_runtime(translate_to_llvm_ir(module))
        except BaseException:
            _retire_shared_context()  # never reuse a context that saw a failure
            raise
        finally:
            if len(mlir_text) > _CTX_LARGE_TEXT:
                _retire_shared_context()
        del module
    return Lowered(ir_text, sig, scheduled, report.get("scalar_work", 1 << 62),
                   options.library if report.get("library_calls") else None)


def _identity_layout(t: Any) -> bool:
    """True if a memref type has the identity (row-major, no offset) layout."""
    from mlir import ir
    layout = t.layout
    return isinstance(layout, ir.AffineMapAttr) and ir.AffineMapAttr(layout).value.is_permutation and \
        list(ir.AffineMapAttr(layout).value.results) == list(ir.AffineMap.get_identity(t.rank).results)
