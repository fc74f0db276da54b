"""Streaming (non-temporal) stores for the results of large transposes.

Why: a transposing copy's tile writes one cache line in each of a vector's worth of result rows, the
rows a whole result row apart.  With ordinary stores each of those lines is first read from memory
for ownership, and the reads of many concurrent strided streams are neither prefetched nor cheap
in the TLB: on a 2048x2048 f32 transpose a third of the copy bandwidth was left.  A non-temporal
store writes the whole line without reading it (the write-combining buffers collect the line's
vector), so the kernel moves the operand once and the result once: 2048x2048 f32 1.5-2.1x on two
threads, 2.0-2.2x on one (``docs/backend-cpu.md``, Measurements: "Streaming stores for large
transposes").  Below ``STREAMING_RESULT_BYTES`` the result of one call is still in the last-level
cache when the next op (or the next call) reads it, and ordinary stores were as fast or faster.

Two steps, around bufferization:

* ``mark_streaming_results`` (on the fused tensors, the schedule's ops still whole): a transposing
  generic whose result is written straight into an out-parameter of at least
  ``STREAMING_RESULT_BYTES``, with result rows of whole cache lines, on a vector unit whose vector is
  a cache line, marks that parameter (``STREAMING_ATTR`` on the function: the parameters' numbers).
* ``stream_marked_results`` (on the loops, between ``pipeline.to_loops`` and
  ``pipeline.loops_to_llvm``): every unmasked, in-bounds write of one whole vector into a marked
  parameter becomes an ``scf.if`` on the address: a non-temporal store aligned to the vector when
  the address is (x86's ``movntps`` faults on any other), the ordinary write otherwise (an ``out=``
  array of the caller's, aligned to 16 bytes, takes that path and gets the same bits).  Then an
  ``sfence`` after each loop nest that holds such stores, inside the parallel region: non-temporal
  stores are weakly ordered, and the fence makes them visible before the thread joins.
"""

from __future__ import annotations

from typing import Any

from ..linalg.payload import as_operation, defined_by, element_bits, product, static_shape
from .transforms import transpose_plane
from .vector_unit import CACHE_LINE_BYTES, VectorUnit

__all__ = ["mark_streaming_results", "stream_marked_results", "streams_into", "STREAMING_RESULT_BYTES",
           "TRANSPOSED_STREAMING_BYTES", "STREAMING_ATTR"]

STREAMING_RESULT_BYTES = 16 << 20
"""The smallest result whose writes stream past the cache (16 MiB, half the 32 MB L3 of the Zen 4
host it was measured on: with its operand such a result does not stay in that cache between
calls).  Below it a result written whole stayed in the last-level cache for the next call, and
ordinary stores were as fast or faster (``docs/backend-cpu.md``, Measurements)."""

TRANSPOSED_STREAMING_BYTES = 8 << 20
"""The same for a transpose's result (8 MiB), whose ordinary stores cost more: each tile writes a
line in each of a vector's worth of rows a whole row apart.  Measured on the same host (new / old,
two threads): 4-6 MiB results 0.80-0.92x, 8-9 MiB 0.98-1.13x, 12-16 MiB 1.47-2.39x; on one thread
1.07-1.95x from 4 MiB up."""

STREAMING_ATTR = "mind.streaming_results"
"""The function attribute listing the out-parameters (argument numbers) that take streaming stores."""


def _streams(op: Any, unit: VectorUnit) -> bool:
    """Whether the result of the linalg op ``op`` is large enough to stream (a transpose's from
    ``TRANSPOSED_STREAMING_BYTES``, any other's from ``STREAMING_RESULT_BYTES``), in rows of whole
    cache lines (else every other row's tiles start mid-line) of vectors of whole lines."""
    if not op.operation.name.startswith("linalg.") or len(op.results) != 1:
        return False
    shape = static_shape(op.results[0].type)
    if not shape or unit.bits // 8 != CACHE_LINE_BYTES:
        return False
    bits = element_bits(op.results[0].type)
    transposes = op.operation.name == "linalg.generic" and transpose_plane(op) is not None
    least = TRANSPOSED_STREAMING_BYTES if transposes else STREAMING_RESULT_BYTES
    return product(shape) * bits // 8 >= least and shape[-1] * bits // 8 % CACHE_LINE_BYTES == 0


def mark_streaming_results(module: Any, unit: VectorUnit) -> int:
    """Mark each out-parameter that a linalg op whose result streams (``_streams``) writes whole,
    by ``bufferization.materialize_in_destination`` of the op's own result; the number marked."""
    from mlir import ir
    marked = 0
    for func in module.body.operations:
        if as_operation(func).name != "func.func":
            continue
        args: list[int] = []
        entry = func.regions[0].blocks[0]
        for op in entry.operations:
            if op.operation.name != "bufferization.materialize_in_destination":
                continue
            source, dest = op.operands[0], op.operands[1]
            producer = source.owner if isinstance(source, ir.OpResult) else None
            if producer is None or not isinstance(dest, ir.BlockArgument) or dest.owner != entry:
                continue
            if _streams(producer.opview, unit):
                args.append(dest.arg_number)
        if args:
            i64 = ir.IntegerType.get_signless(64)
            func.attributes[STREAMING_ATTR] = ir.ArrayAttr.get([ir.IntegerAttr.get(i64, a) for a in sorted(args)])
            marked += len(args)
    return marked


def _marked(func: Any) -> set[int]:
    """The argument numbers ``STREAMING_ATTR`` lists on the function ``func`` (none if absent)."""
    from mlir import ir
    if STREAMING_ATTR not in func.attributes:
        return set()
    return {ir.IntegerAttr(a).value for a in ir.ArrayAttr(func.attributes[STREAMING_ATTR])}


def streams_into(op: Any) -> bool:
    """Whether a result of ``op`` (a scheduled block) is materialized in a marked out-parameter:
    ``linalg.block_in_place`` then leaves the block's output rows alone, since a block that reads
    its output rows back would keep them from streaming."""
    from mlir import ir
    op = as_operation(op)
    func = op.parent
    while as_operation(func).name != "func.func":
        func = as_operation(func).parent
    marked = _marked(as_operation(func))
    for result in op.results:
        for use in result.uses:
            owner = as_operation(use.owner)
            dest = owner.operands[1] if owner.name == "bufferization.materialize_in_destination" else None
            if isinstance(dest, ir.BlockArgument) and dest.arg_number in marked:
                return True
    return False


def _root_argument(value: Any) -> Any | None:
    """The function argument that ``value`` views through ``memref.subview``s, else None."""
    from mlir import ir
    while True:
        if isinstance(value, ir.BlockArgument):
            return value
        view = defined_by(value, "memref.subview")
        if view is None:
            return None
        value = view.operands[0]


def _whole_vector_write(write: Any) -> bool:
    """An unmasked write of a vector of whole cache lines, in bounds, along the memref's last axis."""
    from mlir import ir
    op = write.opview
    if op.mask is not None or len(op.indices) + 2 != len(write.operands):
        return False
    vtype = ir.VectorType(op.valueToStore.type)
    if vtype.rank != 1 or vtype.shape[0] * element_bits(vtype) // 8 % CACHE_LINE_BYTES:
        return False
    if not all(ir.BoolAttr(b).value for b in op.in_bounds):
        return False
    mtype = ir.MemRefType(op.base.type)
    strides, _ = mtype.get_strides_and_offset()
    amap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    return strides[-1] == 1 and amap == ir.AffineMap.get_minor_identity(amap.n_dims, 1)


_WRITES = {"vector.transfer_write": 1, "vector.store": 1, "vector.maskedstore": 1, "memref.store": 1,
           "memref.copy": 1}
"""Ops that write into a memref operand, and that operand's position: the only uses besides views
that a streamed parameter may have."""


def _written_only(value: Any) -> bool:
    """Whether every use of the memref ``value``, and of the views of it, writes into it: a result
    the kernel reads back (a block's intermediate kept in its output rows, a GEMM's C) would read
    from memory what a streaming store sent past the cache."""
    for use in value.uses:
        owner = as_operation(use.owner)
        if owner.name == "memref.subview" and use.operand_number == 0:
            if not _written_only(owner.results[0]):
                return False
        elif _WRITES.get(owner.name) != use.operand_number:
            return False
    return True


def _aligned(write: Any) -> Any:
    """An i1: the write's first element sits on a cache line (built before ``write``)."""
    from mlir import ir
    from mlir.dialects import arith, memref
    op = write.opview
    index = ir.IndexType.get()
    meta = memref.ExtractStridedMetadataOp(op.base)
    linear = meta.offset
    for i, stride in zip(op.indices, meta.strides):
        linear = arith.addi(linear, arith.muli(i, stride))
    pointer = memref.extract_aligned_pointer_as_index(op.base)
    elem = arith.constant(index, element_bits(ir.MemRefType(op.base.type).element_type) // 8)
    address = arith.addi(pointer, arith.muli(linear, elem))
    low = arith.andi(address, arith.constant(index, CACHE_LINE_BYTES - 1))
    return arith.cmpi(arith.CmpIPredicate.eq, low, arith.constant(index, 0))


def _top_level(op: Any, stop: set[str]) -> Any:
    """The ancestor of ``op`` whose parent is a function or a parallel region (``stop``)."""
    op = as_operation(op)
    while as_operation(op.parent).name not in stop:
        op = as_operation(op.parent)
    return op


def stream_marked_results(module: Any) -> int:
    """Turn the whole-vector writes into marked out-parameters (``STREAMING_ATTR``) into aligned
    non-temporal stores under a run-time alignment test, and fence each loop nest that holds them;
    the number of writes turned.  Clears the attribute."""
    from mlir import ir
    from mlir.dialects import llvm, scf, vector
    turned = 0
    for func in module.body.operations:
        func = as_operation(func)
        if func.name != "func.func" or STREAMING_ATTR not in func.attributes:
            continue
        marked = _marked(func)
        del func.attributes[STREAMING_ATTR]
        entry = func.regions[0].blocks[0]
        writes: list[Any] = []

        def find(op: Any) -> Any:
            if op.name == "vector.transfer_write" and _whole_vector_write(op):
                root = _root_argument(op.opview.base)
                if root is not None and root.owner == entry and root.arg_number in marked:
                    writes.append(op)
            return ir.WalkResult.ADVANCE

        func.walk(find)
        read = {n for n in marked if not _written_only(entry.arguments[n])}
        writes = [w for w in writes if _root_argument(w.opview.base).arg_number not in read]
        if writes:
            module.context.dialects["llvm"]  # loaded for the fence: a context may not have it yet
        nests: list[Any] = []
        for write in writes:
            op = write.opview
            with ir.InsertionPoint(write), write.location:
                branch = scf.IfOp(_aligned(write), has_else=True)
            with ir.InsertionPoint(branch.then_block), write.location:
                vector.StoreOp(op.valueToStore, op.base, list(op.indices), nontemporal=True,
                               alignment=CACHE_LINE_BYTES)
                scf.YieldOp([])
            with ir.InsertionPoint(branch.else_block), write.location:
                scf.YieldOp([])
            write.move_before(branch.else_block.operations[0])
            nest = _top_level(branch, {"func.func", "omp.parallel"})
            if not any(nest == n for n in nests):
                nests.append(nest)
            turned += 1
        for nest in nests:
            with ir.InsertionPoint.after(nest), nest.location:
                llvm.CallIntrinsicOp(None, ir.StringAttr.get("llvm.x86.sse.sfence"), [], [], [])
    return turned
