"""Reversals on the kernel's threads: a generic that reads an axis backwards, as a parallel loop nest.

A slice with a negative step (``lowerings.slice``), and whatever elementwise fusion merged into it,
is a ``linalg.generic`` whose input map has a negative coefficient (``d1 * -1 + 63``).  MLIR's
tiling asserts on such a map (tiling computes every operand's slice, and a negative coefficient
aborts the process), so the schedule leaves these ops alone (``transforms._plan_strided``) and
``convert-linalg-to-loops`` makes them one scalar loop nest, on one thread.  That nest's innermost
loop is a copy that LLVM vectorizes (``movement_loops``: contiguous loads, and a reversing shuffle
when the reversed axis is the last); what it lacked is the other threads (``docs/backend-cpu.md``,
Measurements: reversals).

``thread_reversed_generics`` writes such a generic, once bufferized, as that same loop nest but
with its outer loops an ``scf.forall`` (all loops but the last), when the time a second thread
saves pays for a parallel region (``thread_cost.saving_pays``, the operands moved at one core's
streaming bandwidth).  Inside, a copy whose last axis is not reversed moves each row with one
``memref.copy`` (a ``memcpy``: in the forall's outlined function LLVM no longer knows that the
operands do not overlap, and left the row loop scalar); anything else is a loop over the last axis
whose body is the generic's own, cloned: loads of each input at its map applied to the loop
indices, the body's ops, stores of what it yields.  A nest of two loops whose outer one reads
backwards and that is not a row copy stays on one thread: LLVM could not vectorize its rows (its
alias check between rows that move in opposite directions failed) and printed a warning.
Run between ``pipeline.bufferize`` and ``pipeline.to_loops``, whose ``scf-forall-to-parallel`` and
``convert-scf-to-openmp`` put the forall on the threads.  MLIR is imported inside functions only.
"""

from __future__ import annotations

from typing import Any

from ..linalg.payload import generic_inputs, generic_loops, increasing, ops_named, static_bytes
from .thread_cost import COSTS, saving_pays

__all__ = ["thread_reversed_generics"]


def _reads_backwards(op: Any, along: int | None = None) -> bool:
    """Whether a map of ``op`` has an expression with a negative coefficient or constant (one that
    reads loop ``along``, when given)."""
    from mlir import ir
    return any(not increasing(e) and (along is None or _reads_loop(e, along))
               for a in op.attributes["indexing_maps"] for e in ir.AffineMapAttr(a).value.results)


def _reads_loop(expr: Any, dim: int) -> bool:
    from mlir import ir
    if isinstance(expr, ir.AffineDimExpr):
        return expr.position == dim
    if isinstance(expr, ir.AffineBinaryExpr):
        return _reads_loop(expr.lhs, dim) or _reads_loop(expr.rhs, dim)
    return False


def _plain_body(op: Any) -> bool:
    """A body of single-block ops without regions (what ``_loop_nest`` clones)."""
    return all(len(b.regions) == 0 for b in op.regions[0].blocks[0].operations)


def _worth_threads(op: Any, threads: int) -> bool:
    moved = sum(b for v in op.operands if (b := static_bytes(v.type)))
    return saving_pays(moved / COSTS["stream_bytes_per_s"], 1, threads)


def thread_reversed_generics(module: Any, threads: int) -> int:
    """Rewrite every bufferized, all-parallel ``linalg.generic`` of ``module`` that reads backwards
    (``_reads_backwards``), has two loops or more and pays for ``threads`` threads, as the loop nest
    of the module docstring; the number rewritten."""
    if threads < 2:
        return 0
    done = 0
    for op in ops_named(module, "linalg.generic"):
        loops = generic_loops(op)
        if loops is None or op.results or len(loops[0]) < 2 or any(k != "parallel" for k in loops[1]):
            continue
        if not _reads_backwards(op) or not _plain_body(op) or not _worth_threads(op, threads):
            continue
        if len(loops[0]) == 2 and not _row_copy(op) and _reads_backwards(op, along=0):
            continue  # see the module docstring: LLVM could not vectorize the rows of such a nest
        _loop_nest(op, loops[0])
        done += 1
    return done


def _row_copy(op: Any) -> bool:
    """Whether ``op`` copies its one input to its one output, both reading their last loop as their
    contiguous last axis (``d_last``): whole rows, each one ``memref.copy`` (a ``memcpy``)."""
    from mlir import ir
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    if len(op.operands) != 2 or len(generic_inputs(op)) != 1 or len(body) != 1 or \
            body[0].operands[0] != block.arguments[0]:
        return False
    maps = [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]
    last = maps[1].n_dims - 1
    return all(len(m.results) and isinstance(m.results[-1], ir.AffineDimExpr) and m.results[-1].position == last
               for m in maps)


def _row_view(source: Any, offsets: list[Any], n: int) -> Any:
    """The row of ``n`` elements of the memref ``source`` at ``offsets`` (the last one 0), as a 1-D
    strided view."""
    from mlir import ir
    from mlir.dialects import memref
    kind = ir.MemRefType(source.type)
    rank = kind.rank
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    view = ir.MemRefType.get([n], kind.element_type, ir.StridedLayoutAttr.get(dynamic, [1]))
    return memref.SubViewOp(view, source, offsets[:-1], [], [], [dynamic] * (rank - 1) + [0], [1] * (rank - 1) + [n],
                            [1] * rank).result


def _indices(amap: Any, ivs: list[Any]) -> list[Any]:
    """The indices ``amap`` gives at the loop indices ``ivs`` (one ``affine.apply`` per result)."""
    from mlir import ir
    from mlir.dialects import affine
    return [affine.AffineApplyOp(ir.AffineMap.get(amap.n_dims, 0, [e]), ivs).result for e in amap.results]


def _loop_nest(op: Any, ranges: list[int]) -> None:
    """Replace the bufferized generic ``op`` (loop ranges ``ranges``) by an ``scf.forall`` over all
    its loops but the last, whose body copies a row (``_row_copy``) or runs ``_row_loop``."""
    from mlir import ir
    from mlir.dialects import arith, memref, scf
    maps = [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]
    with op.location, ir.InsertionPoint(op):
        forall = scf.ForallOp([0] * (len(ranges) - 1), ranges[:-1], [1] * (len(ranges) - 1))
        with ir.InsertionPoint(forall.body):
            if _row_copy(op):
                ivs = [*forall.induction_variables, arith.ConstantOp(ir.IndexType.get(), 0).result]
                source, dest = (_row_view(v, _indices(m, ivs), ranges[-1]) for v, m in zip(op.operands, maps))
                memref.CopyOp(source, dest)
            else:
                _row_loop(op, maps, list(forall.induction_variables), ranges[-1])
            forall.terminator()
    op.erase()


def _row_loop(op: Any, maps: list[Any], outer: list[Any], n: int) -> None:
    """At the insertion point, an ``scf.for`` over the last loop (``n`` iterations) whose body is the
    generic ``op``'s at the indices ``outer`` and its own: loads of each input (and of each output its
    body reads) at its map, the body's ops cloned, stores of what it yields."""
    from mlir import ir
    from mlir.dialects import arith, memref, scf
    index = ir.IndexType.get()
    body = op.regions[0].blocks[0]
    n_in = len(generic_inputs(op))
    loop = scf.ForOp(*(arith.ConstantOp(index, v).result for v in (0, n, 1)))
    with ir.InsertionPoint(loop.body):
        ivs = [*outer, loop.induction_variable]
        values: dict[Any, Any] = {}
        for i, (operand, arg) in enumerate(zip(op.operands, body.arguments)):
            if i < n_in or len(list(arg.uses)):
                values[arg] = memref.LoadOp(operand, _indices(maps[i], ivs)).result
        for inner in body.operations:
            if inner.name == "linalg.yield":
                for operand, amap, v in zip(op.operands[n_in:], maps[n_in:], inner.operands):
                    memref.StoreOp(values.get(v, v), operand, _indices(amap, ivs))
            elif inner.name == "linalg.index":
                values[inner.results[0]] = ivs[ir.IntegerAttr(inner.attributes["dim"]).value]
            else:
                clone = inner.clone(ir.InsertionPoint.current)
                for k, v in enumerate(clone.operands):
                    if v in values:
                        clone.operands[k] = values[v]
                values.update(zip(inner.results, clone.results))
        scf.YieldOp([])
