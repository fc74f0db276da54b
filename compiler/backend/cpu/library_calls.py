"""Matmuls that call the prebuilt GEMM of ``kernel_library`` instead of being scheduled per program.

Two steps, both on a parsed module:

* before scheduling (tensors), ``handled_by_library`` tells the schedule (``linalg.schedule``) which
  ``linalg.matmul`` ops (and the zero fills of their inits) to leave alone: 2-D, f32 or f64, static non-empty shapes, the default
  indexing maps, whatever their size (a call costs no compile time, so the schedule's cost model
  does not apply, and even a small matmul runs faster as a call than as scalar loops);
* after bufferization (memrefs), ``insert_library_calls`` replaces each of them by a call of a small
  private helper written for its operand types.  The helper casts the operands to the library's
  ``memref<?x?xT, strided<[?, 1], offset: ?>>`` (copying an operand whose elements are not contiguous
  along a row into a fresh buffer first), and with ``threads > 1`` calls the threaded driver of
  ``gemm_driver`` instead, with the rows (or the columns, whichever has more register tiles) split
  into one block per thread: the kernel itself then has no OpenMP region to compile.  A matmul on
  memrefs accumulates into its output, and so does the call (``C += A @ B``), except where the
  emitter's zero fill of C comes right before it: the fill is then dropped and the call overwrites C
  (``C = A @ B``, C never read).

Why after bufferization: a call of a body-less function cannot be bufferized on tensors (nothing
says which operands it writes), and on memrefs the replacement is one-to-one.
"""

from __future__ import annotations

from typing import Any

from ..linalg.payload import DEFAULT_MAPS, SHARED_RHS_MAPS, TRANSPOSED_LHS_MAPS
from .conv_gemm import CONV_OP, conv_gemm, conv_helper
from .gemm_driver import driver_symbol
from .gemm_kernel import LHS_LAYOUTS, VARIANTS, gemm_symbol, lhs_type, operand_type

__all__ = ["eligible_matmul", "handled_by_library", "insert_library_calls", "PARALLEL_MIN_WORK", "HELPER_PREFIX",
           "RANKS", "ELEMENTS", "transposed_lhs"]

PARALLEL_MIN_WORK = 1 << 20
"""Multiply-adds below which a matmul runs on one thread even in a threaded kernel: so little work
(microseconds) does not pay for waking the OpenMP workers and joining them."""

HELPER_PREFIX = "__mind_matmul_"

RANKS = {"linalg.matmul": 2, "linalg.batch_matmul": 3}
"""The contractions the library computes, with their operands' rank (a batched one, one GEMM per
matrix of the batch)."""

ELEMENTS = ("f32", "f64")
"""The element types the library computes."""


def transposed_lhs(library: str | None) -> frozenset[str]:
    """The element types whose matmuls the emitter may write with a transposed lhs read in place
    (``linalg.emitter.Emitter``): those of the library when there is one (its ``strided_lhs`` GEMM
    reads it), none otherwise (a scheduled matmul takes the default maps only)."""
    return frozenset(ELEMENTS) if library is not None else frozenset()


def eligible_matmul(op: Any) -> str | None:
    """The element type ("f32"/"f64") if the library can compute ``op`` (tensor or memref form): a
    matmul, or a conv that is one (``conv_gemm``)."""
    from mlir import ir
    if op.name == CONV_OP:
        found = conv_gemm(op)
        return None if found is None else found[0]
    rank = RANKS.get(op.name)
    if rank is None:
        return None
    operands = list(op.operands)
    maps = str(op.attributes["indexing_maps"]) if len(operands) == 3 else None
    if maps == DEFAULT_MAPS[op.name] or (op.name == "linalg.matmul" and maps == TRANSPOSED_LHS_MAPS):
        ranks = [rank] * 3
    elif op.name == "linalg.batch_matmul" and maps == SHARED_RHS_MAPS:
        ranks = [3, 2, 3]
    else:
        return None
    for v, want in zip(operands, ranks):
        t = v.type
        if not isinstance(t, ir.ShapedType) or not t.has_static_shape or t.rank != want or 0 in t.shape:
            return None
    elems = {str(ir.ShapedType(v.type).element_type) for v in operands}
    if len(elems) != 1:
        return None
    elem = elems.pop()
    if elem not in ELEMENTS:
        return None
    return elem


def _reads_lhs_transposed(op: Any) -> bool:
    return len(list(op.operands)) == 3 and str(op.attributes["indexing_maps"]) == TRANSPOSED_LHS_MAPS


def _transposed_type(t: Any) -> str:
    """The type of ``memref.transpose`` of the 2-D memref type ``t`` (its sizes and strides swapped)."""
    from mlir import ir
    mt = ir.MemRefType(t)
    strides, offset = mt.get_strides_and_offset()
    dyn = ir.ShapedType.get_dynamic_stride_or_offset()

    def text(v: int) -> str:
        return "?" if v == dyn else str(v)
    rows, cols = mt.shape
    return (f"memref<{cols}x{rows}x{mt.element_type}, strided<[{text(strides[1])}, {text(strides[0])}], "
            f"offset: {text(offset)}>>")


def handled_by_library(op: Any) -> bool:
    """A matmul that ``insert_library_calls`` hands to the prebuilt GEMM, or the zero fill of its init
    (which it drops: the GEMM then overwrites its output): what the schedule leaves alone."""
    if op.name == "linalg.fill":
        uses = [u for r in op.results for u in r.uses]
        return bool(uses) and all(_contraction(u.owner) and u.operand_number == 2 and
                                  eligible_matmul(u.owner) is not None for u in uses)
    return eligible_matmul(op) is not None


def _zero_fills_in_front(module: Any) -> list[tuple[Any, Any]]:
    """(matmul, fill) pairs: a ``linalg.fill`` of +0.0 right before a matmul in the same block, into
    its output buffer (the init the emitter writes for every matmul): the library overwrites C
    instead of accumulating, and the fill goes."""
    import math

    from mlir import ir
    pairs: list[tuple[Any, Any]] = []
    for func in module.body.operations:
        for region in func.regions:
            for block in region.blocks:
                prev = None
                for op in block.operations:
                    if _contraction(op) and prev is not None and prev.name == "linalg.fill" and \
                            len(prev.operands) == 2 and prev.operands[1] == op.operands[2]:
                        src = prev.operands[0].owner
                        if getattr(src, "name", None) == "arith.constant" and \
                                isinstance(src.attributes["value"], ir.FloatAttr):
                            v = src.attributes["value"].value
                            if v == 0.0 and math.copysign(1.0, v) > 0:
                                pairs.append((op, prev))
                    prev = op
    return pairs


def _contraction(op: Any) -> bool:
    """Whether ``op`` is of a kind the library may compute (``eligible_matmul`` says whether it can)."""
    return op.name in RANKS or op.name == CONV_OP


def _contiguous_rows(t: Any) -> bool:
    from mlir import ir
    strides, _ = ir.MemRefType(t).get_strides_and_offset()
    return strides[-1] == 1


def _dense(t: Any) -> bool:
    """Row-major without offset, in the identity layout: a matrix of a batch is then a subview of
    known strides of the helper's own type.  A view whose strides are those of a dense array but
    written out (``strided<[1, 1, 1]>``: a transposed slice of extent 1) is not that type, and the
    helper's text would not parse: it goes through the copy, as any other view."""
    from mlir import ir
    mt = ir.MemRefType(t)
    if not isinstance(mt.layout, ir.AffineMapAttr):
        return False  # a strided<...> layout, even with dense strides
    strides, offset = mt.get_strides_and_offset()
    want, step = [], 1
    for d in reversed(list(mt.shape)):
        want.insert(0, step)
        step *= d
    return offset == 0 and list(strides) == want


def _batched_helper(name: str, isa: str, elem: str, types: list[str], dense: list[bool], batched: list[bool],
                    shape: tuple[int, int, int, int], threads: int, accumulate: bool) -> str:
    """A private function ``name(A, B, C)``: C[i] (+)= A[i] @ B[i] (or @ B, when ``batched[1]`` is
    False: one rhs shared by the batch) for each i of the batch, one call of the serial GEMM per
    matrix, the batch split across threads (``scf.forall``, OpenMP) when it has at least as many
    matrices as threads; else the matrices in turn, each split by the threaded driver (``_split``).
    Operands that are not dense row-major go through a dense copy."""
    bsz, m, n, k = shape
    dyn = operand_type(elem)
    lines: list[str] = []
    args = ["%a", "%b", "%c"]
    dims = ((m, k), (k, n), (m, n))
    full = [f"memref<{bsz}x{r}x{c}x{elem}>" if batched[i] else f"memref<{r}x{c}x{elem}>"
            for i, (r, c) in enumerate(dims)]
    for i in range(3):
        if dense[i]:
            continue
        lines.append(f"%t{i} = memref.alloc() {{alignment = 64 : i64}} : {full[i]}")
        if i < 2 or accumulate:
            lines.append(f"memref.copy {args[i]}, %t{i} : {types[i]} to {full[i]}")
        args[i] = f"%t{i}"
    lines += ["%c0 = arith.constant 0 : index", "%c1 = arith.constant 1 : index",
              f"%cb = arith.constant {bsz} : index",
              f"%acc = arith.constant {'true' if accumulate else 'false'}"]
    by_batch = threads > 1 and bsz >= threads
    inner = []
    for i, (r, c) in enumerate(dims):
        if not batched[i]:
            lines.append(f"%d{i} = memref.cast {args[i]} : {full[i]} to {dyn}")
            continue
        view = f"memref<{r}x{c}x{elem}, strided<[{c}, 1], offset: ?>>"
        inner += [f"%s{i} = memref.subview {args[i]}[%i, 0, 0] [1, {r}, {c}] [1, 1, 1] : {full[i]} to {view}",
                  f"%d{i} = memref.cast %s{i} : {view} to {dyn}"]
    inner += _gemm_call(isa, elem, (m, n, k), 1 if by_batch else threads)
    if by_batch:
        lines.append(f"scf.forall (%i) in ({bsz}) {{")
    else:
        lines.append("scf.for %i = %c0 to %cb step %c1 {")
    lines += ["  " + ln for ln in inner] + ["}"]
    for i in range(3):
        if not dense[i]:
            if i == 2:
                lines.append(f"memref.copy %t2, %c : {full[i]} to {types[2]}")
            lines.append(f"memref.dealloc %t{i} : {full[i]}")
    return _function(name, types, lines)


def _split(isa: str, elem: str, m: int, n: int, k: int, threads: int) -> tuple[str, int, int]:
    """(axis "m"/"n"/"", parts, block size): one block per thread, whole register tiles per block."""
    g = VARIANTS[isa][elem]
    if threads < 2 or m * n * k < PARALLEL_MIN_WORK:
        return "", 1, 0
    tiles_m, tiles_n = -(-m // g.rows), -(-n // g.width)
    axis, tiles, tile = ("m", tiles_m, g.rows) if tiles_m >= tiles_n else ("n", tiles_n, g.width)
    per_part = -(-tiles // threads)
    parts = -(-tiles // per_part)  # no empty block
    return (axis, parts, per_part * tile) if parts > 1 else ("", 1, 0)


def _helper(name: str, isa: str, elem: str, types: list[str], contiguous: list[bool],
            shape: tuple[int, int, int], threads: int, accumulate: bool, transposed: str | None = None) -> str:
    """A private function ``name(A, B, C)`` for operands of ``types``: C (+)= A @ B through the library.

    ``contiguous[i]``: operand i has unit stride along its rows (else it goes through a copy);
    ``accumulate``: False when the zero fill of C was dropped (the library then writes C without
    reading it); ``transposed``: A is given as its transpose ``[K, M]`` (``TRANSPOSED_LHS_MAPS``), of
    which this type is the ``memref.transpose``: the ``strided_lhs`` GEMM reads it in place."""
    m, n, k = shape
    dyn = operand_type(elem)
    lines: list[str] = []
    args = ["%a", "%b", "%c"]
    current = list(types)
    copies: list[tuple[int, str]] = []
    if transposed is not None:
        lines.append(f"%at = memref.transpose %a (d0, d1) -> (d1, d0) : {types[0]} to {transposed}")
        args[0], current[0] = "%at", transposed
    for i, dims in enumerate(((m, k), (k, n), (m, n))):
        if contiguous[i] or (i == 0 and transposed is not None):
            continue
        dense = f"memref<{dims[0]}x{dims[1]}x{elem}>"
        tmp = f"%t{i}"
        lines.append(f"{tmp} = memref.alloc() {{alignment = 64 : i64}} : {dense}")
        if i < 2 or accumulate:
            lines.append(f"memref.copy {args[i]}, {tmp} : {types[i]} to {dense}")
        copies.append((i, dense))
        args[i], current[i] = tmp, dense
    for i in range(3):
        lines.append(f"%d{i} = memref.cast {args[i]} : {current[i]} to "
                     f"{lhs_type(elem, transposed is not None) if i == 0 else dyn}")
    lines.append(f"%acc = arith.constant {'true' if accumulate else 'false'}")
    lines += _gemm_call(isa, elem, (m, n, k), threads, transposed is not None)
    for i, dense in copies:
        if i == 2:
            lines.append(f"memref.copy %t2, %c : {dense} to {types[2]}")
        lines.append(f"memref.dealloc %t{i} : {dense}")
    return _function(name, types, lines)


def _gemm_call(isa: str, elem: str, shape: tuple[int, int, int], threads: int,
               strided_lhs: bool = False) -> list[str]:
    """The call of the GEMM on ``%d0 @ %d1 -> %d2`` (``%acc``): the serial one, or the threaded driver
    with one block of rows or columns per thread (``_split``); ``strided_lhs``: the variant whose A
    has any strides (``gemm_kernel.LHS_LAYOUTS``)."""
    dyn, aty = operand_type(elem), lhs_type(elem, strided_lhs)
    axis, parts, block = _split(isa, elem, *shape, threads)
    if not axis:
        return [f"func.call @{gemm_symbol(elem, strided_lhs)}(%d0, %d1, %d2, %acc) : ({aty}, {dyn}, {dyn}, i1) -> ()"]
    return [f"%parts = arith.constant {parts} : i32", f"%axis = arith.constant {0 if axis == 'm' else 1} : i32",
            f"%block = arith.constant {block} : index",
            f"func.call @{driver_symbol(elem, strided_lhs)}(%d0, %d1, %d2, %acc, %parts, %axis, %block) : "
            f"({aty}, {dyn}, {dyn}, i1, i32, i32, index) -> ()"]


def _function(name: str, types: list[str], lines: list[str]) -> str:
    """The private function ``name(%a, %b, %c)`` of operand ``types`` with the body ``lines``."""
    params = ", ".join(f"{a}: {t}" for a, t in zip(("%a", "%b", "%c"), types))
    body = "\n".join("  " + s for s in lines + ["return"])
    return f"func.func private @{name}({params}) {{\n{body}\n}}\n"


def insert_library_calls(module: Any, isa: str, threads: int) -> int:
    """Replace every eligible memref ``linalg.matmul`` of ``module`` by a call of a helper (see the
    module docstring) and add the helpers and the library's declarations; returns how many."""
    from mlir import ir
    found: list[tuple[Any, str]] = []

    def visit(op: Any) -> ir.WalkResult:
        if _contraction(op):
            elem = eligible_matmul(op)
            if elem is not None and all(isinstance(v.type, ir.MemRefType) for v in op.operands):
                found.append((op, elem))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if not found:
        return 0
    fills = _zero_fills_in_front(module)
    helpers: list[str] = []
    for i, (op, elem) in enumerate(found):
        operands = list(op.operands)
        a, b = (list(ir.ShapedType(v.type).shape) for v in operands[:2])
        name = f"{HELPER_PREFIX}{i}"
        fill = next((f for m, f in fills if m.operation == op.operation), None)
        types = [str(v.type) for v in operands]
        if op.name == CONV_OP:
            _, view = conv_gemm(op)
            shapes = [list(ir.ShapedType(v.type).shape) for v in operands]
            call = _gemm_call(isa, elem, (view.m, view.n, view.k), threads)
            helpers.append(_function(name, types, conv_helper(elem, types, shapes, [_dense(v.type) for v in operands],
                                                              view, call, accumulate=fill is None)))
        elif op.name == "linalg.batch_matmul":
            helpers.append(_batched_helper(name, isa, elem, types, [_dense(v.type) for v in operands],
                                           [len(a) == 3, len(b) == 3, True], (a[0], a[1], b[-1], a[2]), threads,
                                           accumulate=fill is None))
        elif _reads_lhs_transposed(op):
            helpers.append(_helper(name, isa, elem, types, [_contiguous_rows(v.type) for v in operands],
                                   (a[1], b[1], a[0]), threads, accumulate=fill is None,
                                   transposed=_transposed_type(operands[0].type)))
        else:
            helpers.append(_helper(name, isa, elem, types, [_contiguous_rows(v.type) for v in operands],
                                   (a[0], b[1], a[1]), threads, accumulate=fill is None))
        if fill is not None:
            fill.erase()
        ir.Operation.create("func.call", results=[], operands=operands,
                            attributes={"callee": ir.FlatSymbolRefAttr.get(name)}, loc=op.location,
                            ip=ir.InsertionPoint(op))
        op.erase()
    decls = []
    for e in sorted({e for _, e in found}):
        for strided in LHS_LAYOUTS:
            operands = ", ".join([lhs_type(e, strided)] + [operand_type(e)] * 2)
            if not strided or any(f"@{gemm_symbol(e, strided)}(" in h for h in helpers):
                decls.append(f"func.func private @{gemm_symbol(e, strided)}({operands}, i1)")
            if any(f"@{driver_symbol(e, strided)}(" in h for h in helpers):
                decls.append(f"func.func private @{driver_symbol(e, strided)}({operands}, i1, i32, i32, index)")
    extra = ir.Module.parse("module {\n" + "\n".join(decls) + "\n" + "".join(helpers) + "}\n")
    anchor = list(module.body.operations)[-1]
    for op in list(extra.body.operations):
        op.move_after(anchor)
        anchor = op
    return len(found)
