"""Streaming (non-temporal) stores for large results that a kernel writes and never reads back.

Why: with ordinary stores each line of a result is first read from memory for ownership, then
written back: a third more traffic for a result that leaves the cache anyway.  A non-temporal store
writes the whole line without reading it (the write-combining buffers collect the line).  It matters
most for a transpose, whose tiles write one line in each of a vector's worth of result rows a whole
row apart (many strided streams of reads for ownership that the prefetchers do not follow): the
2048x2048 f32 transpose ran 1.5-2.6x faster on two threads; an RMS norm of 4096x1024 1.4-1.9x, a
log-softmax of 8192x512 1.2-1.3x (``docs/backend-cpu.md``, Measurements: "Streaming stores for large
results").  Below the thresholds the result of one call was still in the last-level cache when the
next call read it, and ordinary stores were as fast or faster.

Two steps, around bufferization:

* ``mark_streaming_results`` (on the fused tensors, the schedule's ops still whole; x86-64 code
  only, ``targets_x86``: the fence is an SSE instruction): a linalg op whose own result is written
  straight into an out-parameter, of at least ``STREAMING_RESULT_BYTES`` (a transpose, on a vector
  unit whose vector is a cache line: ``TRANSPOSED_STREAMING_BYTES``), with rows of whole cache
  lines, marks that parameter (``STREAMING_ATTR`` on the function: the parameters' numbers).
  ``streams_into`` tells ``linalg.block_in_place`` to leave such a block's output rows write-only.
* ``stream_marked_results`` (on the loops, between ``pipeline.to_loops`` and
  ``pipeline.loops_to_llvm``): in a marked parameter that the kernel only writes, every unmasked,
  in-bounds write of whole lines becomes, under an ``scf.if`` on the address (one per run of writes
  with only pure ops between them), a non-temporal store aligned to a line (x86's ``movntps``
  faults on any other address); the ordinary write otherwise (an ``out=`` array of the caller's,
  which NumPy aligns to 16 bytes, takes that path and gets the same bits).  Then an ``sfence``
  after each loop nest that holds such stores, inside the parallel region: non-temporal stores are
  weakly ordered, and the fence makes them visible before the thread joins.  The ops are built
  generically (``_op``), without the dialects' Python modules, whose import a cold compile would
  pay.
"""

from __future__ import annotations

from typing import Any

from ..linalg.payload import ancestor_under, as_operation, defined_by, element_bits, product, static_shape
from . import host
from .transforms import transpose_plane
from .vector_unit import CACHE_LINE_BYTES, VectorUnit

__all__ = ["mark_streaming_results", "stream_marked_results", "streams_into", "targets_x86", "STREAMING_RESULT_BYTES",
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


def targets_x86(cpu: str) -> bool:
    """Whether code for the options' ``cpu`` is x86-64: a named level or ``"generic"`` always, the
    host when it is one."""
    return cpu != "host" or host.is_x86_64()


def _streams(op: Any, unit: VectorUnit) -> bool:
    """Whether the result of the linalg op ``op`` is large enough to stream (a transpose's from
    ``TRANSPOSED_STREAMING_BYTES``, any other's from ``STREAMING_RESULT_BYTES``), in rows of whole
    cache lines (else every other row's tiles start mid-line).  A transpose only where a vector is
    a line: its tiles' rows are one vector (AVX2's 32 bytes leave each line to two tiles); other
    ops' tile rows are several vectors, whole lines on either unit."""
    if not op.operation.name.startswith("linalg.") or len(op.results) != 1:
        return False
    shape = static_shape(op.results[0].type)
    if not shape:
        return False
    bits = element_bits(op.results[0].type)
    if op.operation.name == "linalg.generic" and transpose_plane(op) is not None:
        least = TRANSPOSED_STREAMING_BYTES if unit.bits // 8 == CACHE_LINE_BYTES else None
    else:
        least = STREAMING_RESULT_BYTES
    return least is not None and product(shape) * bits // 8 >= least and \
        shape[-1] * bits // 8 % CACHE_LINE_BYTES == 0


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
    marked = _marked(as_operation(ancestor_under(op, lambda p: p.name == "builtin.module")))
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


class _Write:
    """A ``vector.transfer_write`` read through its generic operands (its value, its memref, one index
    per memref dim, an optional mask): the backends walk the bufferized loops without the dialects'
    Python modules (``linalg.context``), whose import a cold compile would pay."""

    def __init__(self, op: Any) -> None:
        from mlir import ir
        self.op = as_operation(op)
        operands = list(self.op.operands)
        self.value, self.base = operands[0], operands[1]
        rank = ir.ShapedType(self.base.type).rank
        self.indices = operands[2:2 + rank]
        self.masked = len(operands) > 2 + rank


def _whole_vector_write(write: _Write) -> bool:
    """An unmasked write of a vector of whole cache lines, in bounds, along the memref's last axis."""
    from mlir import ir
    vtype = ir.VectorType(write.value.type)
    if write.masked or vtype.rank != 1 or vtype.shape[0] * element_bits(vtype) // 8 % CACHE_LINE_BYTES:
        return False
    if not all(ir.BoolAttr(b).value for b in ir.ArrayAttr(write.op.attributes["in_bounds"])):
        return False
    strides, _ = ir.MemRefType(write.base.type).get_strides_and_offset()
    amap = ir.AffineMapAttr(write.op.attributes["permutation_map"]).value
    return strides[-1] == 1 and amap == ir.AffineMap.get_minor_identity(amap.n_dims, 1)


_WRITES = {"vector.transfer_write": 1, "vector.store": 1, "vector.maskedstore": 0, "memref.store": 1,
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


def _op(name: str, operands: list[Any], results: list[Any] | None = None,
        attributes: dict[str, Any] | None = None, regions: int = 0) -> Any:
    """A generic operation at the current insertion point (see ``_Write``)."""
    from mlir import ir
    return ir.Operation.create(name, results=results or [], operands=operands, attributes=attributes or {},
                               regions=regions)


def _aligned(write: _Write) -> Any:
    """An i1: the write's first element sits on a cache line (built before the write): the view's
    aligned pointer plus (its offset + the indices times its strides) elements, low bits zero."""
    from mlir import ir
    index = ir.IndexType.get()
    rank = len(write.indices)

    def constant(v: int) -> Any:
        return _op("arith.constant", [], [index], {"value": ir.IntegerAttr.get(index, v)}).results[0]

    def arith(name: str, a: Any, b: Any) -> Any:
        return _op(f"arith.{name}", [a, b], [index]).results[0]

    mtype = ir.MemRefType(write.base.type)
    buffer = ir.MemRefType.get([], mtype.element_type, memory_space=mtype.memory_space)
    meta = _op("memref.extract_strided_metadata", [write.base], [buffer] + [index] * (1 + 2 * rank)).results
    linear = meta[1]
    for i, stride in zip(write.indices, list(meta)[2 + rank:]):
        linear = arith("addi", linear, arith("muli", i, stride))
    pointer = _op("memref.extract_aligned_pointer_as_index", [write.base], [index]).results[0]
    address = arith("addi", pointer, arith("muli", linear, constant(element_bits(mtype.element_type) // 8)))
    low = arith("andi", address, constant(CACHE_LINE_BYTES - 1))
    eq = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 0)
    return _op("arith.cmpi", [low, constant(0)], [ir.IntegerType.get_signless(1)], {"predicate": eq}).results[0]


_PURE_PREFIXES = ("arith.", "math.", "vector.extract", "vector.shuffle", "vector.from_elements",
                  "vector.to_elements", "vector.broadcast", "vector.insert", "vector.fma", "vector.bitcast",
                  "vector.shape_cast")
"""Ops without memory effects that may stand between two writes of one group (``_groups``)."""


def _groups(writes: list[_Write]) -> list[list[_Write]]:
    """The writes in runs that one alignment test covers: writes of one block with nothing but pure
    ops (``_PURE_PREFIXES``) between them, so that the earlier ones can move down to the last (a
    transposed tile's 16 rows: one branch instead of 16, less code for LLVM to compile).  One pass
    over each block that holds writes."""
    by_op = {w.op: w for w in writes}
    blocks: list[Any] = []
    for w in writes:
        if not any(w.op.block == b for b in blocks):
            blocks.append(w.op.block)
    groups: list[list[_Write]] = []
    for block in blocks:
        run: list[_Write] = []
        for op in block.operations:
            op = as_operation(op)
            write = by_op.get(op)
            if write is not None:
                run.append(write)
            elif run and not op.name.startswith(_PURE_PREFIXES):
                groups.append(run)
                run = []
        if run:
            groups.append(run)
    return groups


_FENCE = 'llvm.call_intrinsic "llvm.x86.sse.sfence"() : () -> ()'
"""An ``sfence``: the stores before it are globally visible before any store after it."""


def stream_marked_results(module: Any) -> int:
    """Turn the whole-vector writes into marked out-parameters (``STREAMING_ATTR``) into aligned
    non-temporal stores under a run-time alignment test, and fence each loop nest that holds them;
    the number of writes turned.  Clears the attribute."""
    from mlir import ir
    turned = 0
    for func in module.body.operations:
        func = as_operation(func)
        if func.name != "func.func" or STREAMING_ATTR not in func.attributes:
            continue
        marked = _marked(func)
        del func.attributes[STREAMING_ATTR]
        entry = func.regions[0].blocks[0]
        writes: list[_Write] = []

        def find(op: Any) -> Any:
            if op.name == "vector.transfer_write":
                write = _Write(op)
                root = _root_argument(write.base)
                if root is not None and root.owner == entry and root.arg_number in marked and \
                        _whole_vector_write(write):
                    writes.append(write)
            return ir.WalkResult.ADVANCE

        func.walk(find)
        read = {n for n in marked if not _written_only(entry.arguments[n])}
        writes = [w for w in writes if _root_argument(w.base).arg_number not in read]
        if writes:
            module.context.dialects["llvm"]  # loaded for the fence: a context may not have it yet
        nests: list[Any] = []
        for group in _groups(writes):
            last = group[-1].op
            with ir.InsertionPoint(last), last.location:
                tests = [_aligned(w) for w in group]
                test = tests[0]
                for other in tests[1:]:
                    test = _op("arith.andi", [test, other], [test.type]).results[0]
                branch = _op("scf.if", [test], regions=2)
            store, ordinary = branch.regions[0].blocks.append(), branch.regions[1].blocks.append()
            with ir.InsertionPoint(store), last.location:
                for w in group:
                    _op("vector.store", [w.value, w.base] + w.indices, attributes={
                        "nontemporal": ir.BoolAttr.get(True),
                        "alignment": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), CACHE_LINE_BYTES)})
                _op("scf.yield", [])
            with ir.InsertionPoint(ordinary), last.location:
                _op("scf.yield", [])
            for w in group:
                w.op.move_before(ordinary.operations[-1])
            nest = ancestor_under(branch, lambda p: p.name in ("func.func", "omp.parallel"))
            if not any(nest == n for n in nests):
                nests.append(nest)
            turned += len(group)
        for nest in nests:
            with ir.InsertionPoint.after(nest), nest.location:
                ir.InsertionPoint.current.insert(ir.Operation.parse(_FENCE))
    return turned
