"""Reductions along a row split across the lanes of a warp (the GPU's reduction schedule).

A reduction over the last loop dim maps, as a parallel loop nest, to one thread per output: the
thread walks its row, and the 32 threads of a warp read 32 rows at once (32 lines per access, and a
few hundred threads in all for a softmax over a few hundred rows).  ``split_row_reductions``
rewrites each such ``linalg.generic`` (one reduction dim, the innermost; a combiner MLIR knows the
neutral element of) with ``transform.structured.split_reduction`` (``inner_parallel``): the row's
``K`` elements are read as ``K / f`` steps of ``f`` neighbouring elements, each lane of the split
dim keeping its own partial result (element ``j * f + r`` goes to partial ``r``), and a second,
smaller reduction combines the ``f`` partials.  ``f`` is chosen so that all rows' partials number
about ``TARGET_THREADS`` (``split_factor``): 32 for thousands of rows, up to 1,024 for a few rows or
one (a loss, a norm), whose partials are then split again.  The split dim is then the loop nest's last parallel dim,
which the GPU mapping puts on threadIdx.x (``lowering._contiguous_dim_first``): a warp reads 32
neighbouring elements per step, and there are ``f`` times as many threads.

Values: max and min are exact in any order (NaN propagates, and ``maximumf`` orders -0 below +0);
a sum adds ``f`` interleaved partial sums, each ``K / f`` terms long, then the partials: within the
spec's bound for ``reduce_sum`` (and closer to the exact sum than one running sum).
"""

from __future__ import annotations

from typing import Any, Callable

from ..linalg.payload import body_ops, generic_loops
from ..linalg.transform_script import apply_script, wrap_script

__all__ = ["split_factor", "split_row_reductions", "SPLIT_MAX", "SPLIT_MIN", "SPLIT_RUN", "SPLIT_ROW", "SPLIT_WIDE",
           "TARGET_THREADS"]

SPLIT_MAX = 32
"""The most partials per row: a warp's lanes."""

SPLIT_MIN = 8
"""The fewest partials worth a second reduction (a quarter of a warp's lanes still read one
32-byte sector of f32 per step)."""

SPLIT_WIDE = 1024
"""The most partials per row when the rows are few (a reduction to one value: a loss, a norm)."""

TARGET_THREADS = 1 << 17
"""Threads that keep an H100/H200's memory busy (132 multiprocessors x 1,024 resident threads)."""

SPLIT_RUN = 4

SPLIT_ROW = 256
"""The shortest row worth a second kernel: one thread reduces fewer elements in about the time a
launch takes."""
"""The fewest elements each partial combines: a row of 32 split into 16 partials of 2 would cost a
second kernel for one add per thread saved."""

SPLIT_ROUNDS = 3
"""How many times partials are split again at most (1,024 x 32 x 8 partials)."""

_COMBINERS = frozenset({"arith.addf", "arith.maximumf", "arith.minimumf", "arith.addi", "arith.maxsi",
                        "arith.minsi", "arith.maxui", "arith.minui", "arith.ori", "arith.andi", "arith.xori"})
"""The reductions' last body op that ``split_reduction`` knows the neutral element of."""

_TAG = "mind.split"


def split_factor(k: int, rows: int = 1 << 12) -> int | None:
    """The partials of each of ``rows`` rows of ``k`` elements: enough that the rows' partials
    number about ``TARGET_THREADS`` (one thread each), at least ``SPLIT_MIN`` and at most
    ``SPLIT_MAX`` (a warp) or ``SPLIT_WIDE`` where the rows are too few to fill the GPU otherwise;
    the largest divisor of ``k`` in that range that leaves each partial at least ``SPLIT_RUN``
    elements, else None (a prime ``k``, a row shorter than ``SPLIT_ROW``).  A wide split's partials are
    split again (``split_row_reductions`` repeats while any op splits)."""
    if k < SPLIT_ROW:
        return None
    wanted = -(-TARGET_THREADS // max(rows, 1))
    most = min(max(SPLIT_MAX, wanted), SPLIT_WIDE)
    for f in range(min(most, k // SPLIT_RUN), SPLIT_MIN - 1, -1):
        if k % f == 0:
            return f
    return None


def _candidate(op: Any) -> int | None:
    """The split factor of a row reduction ``split_row_reductions`` rewrites, else None."""
    if op.name != "linalg.generic" or len(op.results) != 1:
        return None
    loops = generic_loops(op)
    if loops is None:
        return None
    ranges, kinds = loops
    if not kinds or kinds[-1] != "reduction" or kinds.count("reduction") != 1:
        return None
    ops = body_ops(op)  # the yield last: the combiner is the op before it
    if len(ops) < 2 or ops[-2].name not in _COMBINERS:
        return None
    rows = 1
    for r in ranges[:-1]:
        rows *= r
    return split_factor(ranges[-1], rows)


def _transform_each(module: Any, func_op: Any, choose: Callable[[Any], str | None]) -> int:
    """Apply to each ``linalg.generic`` of ``func_op``'s body the transform ``choose`` gives it (the
    text after ``%op``'s match; None: none); returns how many applied.  An op whose transform fails
    stays as it is (the transforms used here check their preconditions before they rewrite)."""
    from mlir import ir

    done = 0
    i64 = ir.IntegerType.get_signless(64)
    for tag, op in enumerate(list(func_op.regions[0].blocks[0].operations)):
        o = op.operation
        transform = choose(o) if o.name == "linalg.generic" else None
        if transform is None:
            continue
        o.attributes[_TAG] = ir.IntegerAttr.get(i64, tag)
        script = wrap_script([
            f'    %op = transform.structured.match ops{{["linalg.generic"]}} attributes {{{_TAG} = {tag} : i64}} '
            "in %root : (!transform.any_op) -> !transform.any_op\n", transform], "")
        try:
            apply_script(module, script)
            done += 1
        except RuntimeError:
            pass
    _untag(func_op)
    return done


def _split(op: Any) -> str | None:
    factor = _candidate(op)
    if factor is None:
        return None
    rank = len(generic_loops(op)[0])  # type: ignore[index]
    return (f"    %init, %fill, %split, %combine = transform.structured.split_reduction %op {{ split_factor = {factor}, "
            f"insert_split_dimension = {rank - 1}, inner_parallel }} : (!transform.any_op) -> (!transform.any_op, "
            "!transform.any_op, !transform.any_op, !transform.any_op)\n")


def _interchange(op: Any) -> str | None:
    loops = generic_loops(op)
    if loops is None:
        return None
    kinds = loops[1]
    order = [i for i, k in enumerate(kinds) if k == "parallel"] + [i for i, k in enumerate(kinds) if k != "parallel"]
    if order == list(range(len(kinds))):
        return None
    return (f"    %moved = transform.structured.interchange %op iterator_interchange = {order} "
            ": (!transform.any_op) -> !transform.any_op\n")


def split_row_reductions(module: Any, func_op: Any) -> int:
    """Split every row reduction of ``func_op``'s body (see the module's text), then put every
    generic's parallel dims before its reduction dims; returns how many were split."""
    split = 0
    for _ in range(SPLIT_ROUNDS):  # a wide split's partials are a reduction to split again
        more = _transform_each(module, func_op, _split)
        split += more
        if not more:
            break
    _transform_each(module, func_op, _interchange)
    return split


def _untag(func_op: Any) -> None:
    """Remove the tags from whatever carries them now (a refused op, the split ops)."""
    from mlir import ir

    def visit(op: Any) -> Any:
        if _TAG in op.attributes:
            del op.attributes[_TAG]
        return ir.WalkResult.ADVANCE

    func_op.operation.walk(visit)
