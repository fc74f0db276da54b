"""The CPU's MLIR half: kernel MLIR text -> LLVM IR text, in-process, with MLIR's diagnostics captured.

The kernel's signature is read from its function (inputs as tensors, outputs as memref
out-parameters: ``abi``), its tensor arguments are marked read-only, the ops are scheduled with the
CPU's planners (``transforms``, through ``linalg.schedule``), bufferized, the matmuls the prebuilt
GEMM computes become calls of it (``library_calls``), and the module is lowered to the LLVM dialect
and translated.  Every MLIR failure is a ``linalg.context.LoweringError``; ``engine`` maps it to
``MindError`` E6012.  Nothing here is imported by a warm start.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Protocol

from mind.spec.record import FrozenRecord

from ..linalg.context import (SHARED, Diagnostics, LoweringError, find_func, new_context, parse, run_pipeline,
                              translate_to_llvm_ir)
from ..linalg.hoist import hoist_broadcast_work
from ..linalg.masked_tails import forward_masked_tails
from ..linalg.payload import splats_as_fills, untie_shared_inits
from ..linalg.pipeline import PipelineError, bufferize, prefusion
from ..linalg.recompute import recompute_cheap_producers
from ..linalg.sealed_contractions import seal_contractions, unseal_contractions
from ..linalg.block_in_place import write_blocks_in_place
from ..linalg.result_roots import place_result_roots
from ..linalg.schedule import largest_loop_work
from ..linalg.transform_script import apply_script
from .abi import ELEMENT_TYPES, ArgSpec, Signature
from .library_calls import handled_by_library, insert_library_calls
from .movement_loops import mark_movement_loops, seat_loop_annotations
from .pipeline import loops_to_llvm, lower_to_llvm, to_loops
from .range_max import balance_maximum_trees, rewrite_maximum
from .reversed_loops import thread_reversed_generics
from .scalef import rewrite_exp_scaling
from .streaming_stores import mark_streaming_results, stream_marked_results, streams_into, targets_x86
from .runtime import link_runtime
from .transforms import MIN_SCHEDULE_WORK, schedule as cpu_schedule
from .vector_unit import vector_unit

_set = object.__setattr__  # FrozenRecord fields are set once, in __init__

__all__ = ["LoweringError", "Lowered", "LoweringOptions", "lower_to_llvm_ir", "lower_to_llvm_dialect",
           "read_signature", "lower_module_text"]

LARGE_TEXT = 1 << 20
"""MLIR texts longer than this retire the shared context after their lowering (what it interned for
them would otherwise stay)."""


class LoweringOptions(Protocol):
    """What the lowering reads of the resolved options (``options.CpuOptions``, its thread count
    decided)."""

    threads: int
    schedule: bool | str
    library: str | None
    cpu: str


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


def _promise_no_aliasing(llvm_func: Any, sig: Signature) -> None:
    """Mark the data pointer of each memref argument of the lowered kernel ``noalias``.

    The calling convention promises it: a result never shares memory with an argument or another
    result (``ArgBinder`` and ``check_out`` refuse such ``out`` arrays), and the kernel never writes
    its arguments (``_prepare_entry``).  Without the mark LLVM must assume that a result may overlap
    an argument: a copy loop then keeps its scalar loads and stores (neither a vector nor a
    ``memcpy``), and a loop marked for vectorization (``movement_loops``) fails with a warning on
    stderr.  MLIR drops argument attributes of a memref, which it expands into its allocated and
    aligned pointers, offset, sizes and strides; so the mark is set on the lowered function, on the
    aligned pointer only, which every load and store goes through."""
    from mlir import ir
    no_alias = ir.DictAttr.get({"llvm.noalias": ir.UnitAttr.get()})
    plain = ir.DictAttr.get({})
    attrs = []
    for spec in (*sig.inputs, *sig.outputs):
        attrs += [plain, no_alias] + [plain] * (1 + 2 * len(spec.shape))
    llvm_func.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs)


def lower_to_llvm_dialect(mlir_text: str, func_name: str, options: LoweringOptions, *, ctx: Any = None,
                          report: dict[str, Any] | None = None) -> tuple[Any, Signature, bool]:
    """Parse, schedule (transform dialect), bufferize and lower to the LLVM dialect, with ``options``
    (its thread count decided).

    ``options.schedule``: True schedules the ops that pay for their compile time
    (``MIN_SCHEDULE_WORK``), "all" every op that has a plan, False none.  ``options.library``: an
    instruction set of ``kernel_library``: the matmuls it can compute (any size) call its GEMM
    instead (``library_calls``), None schedules them.
    Returns (module, signature, scheduled).  The module lives in ``ctx`` (a new context if None).
    ``report`` (a dict) receives ``scalar_work``, the largest work left to scalar loops after the
    schedule (``schedule.largest_loop_work``),
    ``library_calls``, how many matmuls call the library, ``ungrouped`` ("schedule") when MLIR
    rejected the script with fusion groups and the per-op plans were tried instead, and
    ``fallback``, the stage ("fusion", "schedule") whose failure sent the module down the unfused,
    unscheduled path.
    The long MLIR calls go through ``linalg.mlir_capi`` and release the GIL.
    """
    from mlir import ir

    threads, schedule, library = options.threads, options.schedule, options.library
    unit = vector_unit(options.cpu)
    min_work = 0 if schedule == "all" else MIN_SCHEDULE_WORK
    try:
        # between the first two: the library's calls and the reversals' loops; between the last
        # two, the large results' stores stream and the loops are marked (``mark_movement_loops``)
        pipelines = [bufferize().render(), to_loops(threads).render(), loops_to_llvm(threads).render()]
    except PipelineError as e:
        raise LoweringError("pipeline", str(e)) from None
    ctx = ctx or new_context()
    diags = Diagnostics(ctx)
    stage = "parse"
    try:
        with ctx, ir.Location.unknown():
            try:
                module = parse(ctx, mlir_text, stage, diags)
                stage = "verify"
                if not module.operation.verify():
                    raise LoweringError(stage, "the module does not verify", diags.messages)
                func_op = find_func(module, func_name)
                sig = read_signature(func_op)
                _prepare_entry(func_op)
                scheduled = False
                # a fusion group's script that MLIR rejects: the per-op plans, then scalar loops
                for grouped in ((True, False) if schedule else ()):
                    try:
                        stage = "fusion"
                        recompute_cheap_producers(module)  # one copy per user, which fusion then fuses
                        seal_contractions(module, func_name)  # fusion would make them generics
                        run_pipeline(ctx, prefusion().render(), module, stage, diags)
                        unseal_contractions(module, func_name)
                        # The pass manager does not verify between passes (_pass_manager), and
                        # elementwise fusion can compose maps into an op whose loop ranges disagree
                        # with an operand's extent (its loops then run past a buffer): such a module
                        # takes the unfused path below instead.  One verify of the whole module.
                        if not module.operation.verify():
                            raise LoweringError(stage, "elementwise fusion made an invalid module")
                        stage = "schedule"
                        hoist_broadcast_work(module)  # fusion copied per-row work into per-element bodies
                        splats_as_fills(module)  # after fusion folded the splats elementwise ops read
                        # cse merged identical inits: unshare them (see untie_shared_inits)
                        untie_shared_inits(module, tag_empties=True)
                        skip = partial(handled_by_library, isa=library) if library is not None else None
                        script = cpu_schedule(module, min_work, skip, unit, threads, grouped)
                        if script is not None:
                            if targets_x86(options.cpu):  # before the script: the ops whole
                                mark_streaming_results(module, unit)
                            apply_script(module, script)
                            # a block's intermediate in its output rows, unless those rows stream
                            write_blocks_in_place(module, keep=streams_into)
                            forward_masked_tails(module)
                            scheduled = True
                            untie_shared_inits(module)
                        if report is not None:
                            report["scalar_work"] = largest_loop_work(module, skip)
                        break
                    except (NameError, TypeError, AssertionError):
                        raise  # a mistake of ours, not a schedule that MLIR rejects: never hidden
                    except Exception:  # noqa: BLE001 - a schedule that MLIR rejects: try again, or loops
                        diags.messages.clear()
                        if report is not None:
                            report["ungrouped" if grouped and stage == "schedule" else "fallback"] = stage
                        failed, stage = stage, "parse"
                        module = parse(ctx, mlir_text, stage, diags)
                        _prepare_entry(find_func(module, func_name))
                        scheduled = False
                        if report is not None:
                            report.pop("scalar_work", None)
                        if not (grouped and failed == "schedule"):
                            break
                stage = "lower"
                splats_as_fills(module)  # the unfused paths' (none left after the schedule's)
                place_result_roots(module)
                run_pipeline(ctx, pipelines[0], module, stage, diags)
                if library is not None:
                    stage = "library"
                    calls = insert_library_calls(module, library, threads)
                    if report is not None:
                        report["library_calls"] = calls
                    stage = "lower"
                thread_reversed_generics(module, threads)
                run_pipeline(ctx, pipelines[1], module, stage, diags)
                stream_marked_results(module)
                mark_movement_loops(module, unit)
                run_pipeline(ctx, pipelines[-1], module, stage, diags)
                seat_loop_annotations(module)
                _promise_no_aliasing(find_func(module, func_name, "llvm.func"), sig)
                if not module.operation.verify():
                    raise LoweringError(stage, "the lowered module does not verify", diags.messages)
            except LoweringError:
                raise
            except Exception as e:  # ValueError from the pass manager's parser, ...
                raise LoweringError(stage, str(e).strip(), diags.messages) from None
    finally:
        diags.detach()
    return module, sig, scheduled


def lower_module_text(mlir_text: str) -> str:
    """LLVM IR of a whole module of memref functions (no kernel signature, no schedule): what the
    prebuilt kernels of ``kernel_library`` are made from.  A private context."""
    from mlir import ir
    ctx = new_context()
    diags = Diagnostics(ctx)
    try:
        with ctx, ir.Location.unknown():
            module = parse(ctx, mlir_text, "parse", diags)
            if not module.operation.verify():
                raise LoweringError("verify", "the module does not verify", diags.messages)
            run_pipeline(ctx, lower_to_llvm(1).render(), module, "lower", diags)
            return translate_to_llvm_ir(module)
    finally:
        diags.detach()


def lower_to_llvm_ir(mlir_text: str, func_name: str, options: LoweringOptions) -> Lowered:
    """The whole MLIR half: text in, LLVM IR text and the kernel signature out (``options``: see
    ``lower_to_llvm_dialect``)."""
    with SHARED.lock:
        ctx = SHARED.acquire()
        report: dict[str, Any] = {}
        try:
            module, sig, scheduled = lower_to_llvm_dialect(mlir_text, func_name, options, ctx=ctx, report=report)
            with ctx:
                # runtime functions MLIR's lowering calls (memrefCopy) and the heap cache's are
                # declared hidden: prebuilt objects define them (kernel_library)
                ir_text = link_runtime(translate_to_llvm_ir(module))
            ir_text = balance_maximum_trees(ir_text)
            if vector_unit(options.cpu).bits == 512:  # AVX-512 F, DQ and VL: x86-64-v4
                ir_text = rewrite_exp_scaling(rewrite_maximum(ir_text))
        except BaseException:
            SHARED.retire()  # never reuse a context that saw a failure
            raise
        finally:
            if len(mlir_text) > LARGE_TEXT:
                SHARED.retire()
        del module
    return Lowered(ir_text, sig, scheduled, report.get("scalar_work", 1 << 62),
                   options.library if report.get("library_calls") else None)


def _identity_layout(t: Any) -> bool:
    """True if a memref type has the identity (row-major, no offset) layout."""
    from mlir import ir
    layout = t.layout
    return isinstance(layout, ir.AffineMapAttr) and ir.AffineMapAttr(layout).value.is_permutation and \
        list(ir.AffineMapAttr(layout).value.results) == list(ir.AffineMap.get_identity(t.rank).results)
