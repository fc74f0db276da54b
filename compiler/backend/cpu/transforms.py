"""The CPU's schedules: tile sizes for the target's vector registers (``vector_unit``) and the transform-script sections that tile,
fuse and vectorize each kind of linalg op (``planners``, keyed by op name), then lower the vectors
(``VECTOR_LOWERING``).

The walk, the tags and the script's pieces are the target-neutral ones of ``linalg.schedule`` and
``linalg.transform_script``; what is the CPU's is the register blocks (16 or 32 vector registers of
``VectorUnit`` of the options' ``cpu``), the ``scf.forall`` blocks that OpenMP threads run, and the cost model
(``MIN_SCHEDULE_WORK``).  Two MLIR behaviours once made schedules miscompile; both are handled at
their cause, with regression tests (``tests/backend_cpu/test_schedule_regressions.py``):

* shared inits: ``cse`` merges identical ``tensor.empty`` + ``linalg.fill`` inits, and
  ``eliminate-empty-tensors`` then lets one op compute in the out-parameter of another result, which
  overwrites it (``linalg.payload.untie_shared_inits``);
* loop-invariant reductions: the linalg vectorizer folds ``out + c`` over a reduction loop into a
  single ``out + c`` when ``c`` does not depend on the reduced elements
  (``linalg.payload.vectorizable_reduction``).

MLIR is imported inside functions only.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Sequence

from mind.spec.record import FrozenRecord

from ..linalg.payload import (DEFAULT_MAPS, element_bits, generic_loops, map_kind, product, row_reads,
                              static_shape, vectorizable_reduction)
from ..linalg.schedule import schedule_module
from ..linalg.transform_script import largest_divisor_at_most, match, tile_for, tile_forall, vectorize
from .conv_schedule import CONV_OP, feeds_conv, plan_conv
from .fusion_groups import plan_groups, unblock_sums
from .vector_unit import AVX512, VectorUnit

_set = object.__setattr__  # FrozenRecord fields are set once, in __init__

__all__ = [
    "MatmulTiles", "ElementwiseTiles", "choose_matmul_tiles", "choose_elementwise_tiles",
    "matmul_section", "elementwise_section", "fill_section", "MIN_SCHEDULE_WORK", "planners", "VECTOR_LOWERING",
    "schedule",
]


class MatmulTiles(FrozenRecord):
    """Tiles of ``C[m,n] += A[m,k] B[k,n]``: K slab, parallel (forall) block, register block."""

    __slots__ = ("k", "par_m", "par_n", "reg_m", "reg_n", "batch")

    k: int
    par_m: int
    par_n: int
    reg_m: int
    reg_n: int
    batch: bool

    def __init__(self, k: int, par_m: int, par_n: int, reg_m: int, reg_n: int, batch: bool = False) -> None:
        _set(self, "k", k)
        _set(self, "par_m", par_m)
        _set(self, "par_n", par_n)
        _set(self, "reg_m", reg_m)
        _set(self, "reg_n", reg_n)
        _set(self, "batch", batch)


class ElementwiseTiles(FrozenRecord):
    """Forall tiles on parallel loops, then sequential tiles (``reduction``: the reduction loops, and
    the contiguous parallel loop of a column reduction inside its forall block; 0 = not tiled)."""

    __slots__ = ("parallel", "reduction")

    parallel: tuple[int, ...]
    reduction: tuple[int, ...]

    def __init__(self, parallel: tuple[int, ...], reduction: tuple[int, ...]) -> None:
        _set(self, "parallel", parallel)
        _set(self, "reduction", reduction)


def choose_matmul_tiles(m: int, n: int, k: int, elem_bits: int = 32, batch: bool = False,
                        unit: VectorUnit = AVX512) -> MatmulTiles:
    """Tiles for ``unit``: a register block of half its registers as accumulators (AVX-512: 8 rows x
    2 zmm, or 16 rows x 1 vector; AVX2: 4 x 2 or 8 x 1), blocks of 64 rows x 8 vectors per thread,
    K slabs of 128.

    The block's row is 2 whole vectors when N has an even number of them, 1 when it has an odd
    number, else the largest divisor of N that fits one vector (a narrow register).  Any other row
    length (24, 20, 48 as 3 vectors) is a vector type LLVM's AVX-512 lowering scalarizes, an order of
    magnitude slower.  A row of one whole vector takes 16 rows: 16 accumulators hide the FMA latency
    and halve the broadcasts per FMA.  A narrow row keeps 8: 16 would run a little faster but unrolls
    more code into train_step, whose classifier head is 10 wide (its compile time is what matters
    there).  ``docs/backend-cpu.md``, Measurements, has the figures behind each choice."""
    lanes = unit.lanes(elem_bits)
    accumulators = unit.registers // 2
    if n % lanes == 0:
        reg_n = lanes * (2 if (n // lanes) % 2 == 0 else 1)
    else:
        reg_n = largest_divisor_at_most(n, lanes)
    reg_m = largest_divisor_at_most(m, accumulators if reg_n == lanes else accumulators // 2)
    par_m = reg_m * largest_divisor_at_most(m // reg_m, max(1, 64 // reg_m))
    par_n = reg_n * largest_divisor_at_most(n // reg_n, max(1, (4 * 2 * lanes) // reg_n))
    kt = largest_divisor_at_most(k, 128)
    return MatmulTiles(kt, par_m, par_n, reg_m, reg_n, batch)


def choose_elementwise_tiles(ranges: Sequence[int], kinds: Sequence[str], elem_bits: int = 32,
                             unit: VectorUnit = AVX512) -> ElementwiseTiles:
    """Innermost loop gets up to 4 vectors, the one above up to 2 rows, outer loops 1.

    Reduction loops (tiled sequentially after the parallel forall) share what is left of a budget of
    8 vectors per tile, innermost first, so that no tile becomes a huge vector (``linalg.schedule``).
    A column reduction (the innermost loop parallel, a reduction loop outside it) is tiled by
    ``_column_tiles`` instead.
    """
    lanes = unit.lanes(elem_bits)
    par: list[int] = []
    red: list[int] = []
    par_dims = [i for i, k in enumerate(kinds) if k == "parallel"]
    red_dims = [i for i, k in enumerate(kinds) if k != "parallel"]
    for i, size in enumerate(ranges):
        if kinds[i] == "parallel":
            pos = len(par_dims) - 1 - par_dims.index(i)  # 0 = innermost parallel loop
            if red_dims and i < max(red_dims):
                bound = 1 if pos > 0 else 8
            else:
                bound = 4 * lanes if pos == 0 else (2 if pos == 1 else 1)
            par.append(largest_divisor_at_most(size, bound))
            red.append(0)
        else:
            par.append(0)
            red.append(0)
    last = len(ranges) - 1
    if red_dims and par_dims and par_dims[-1] == last > max(red_dims):
        column = _column_tiles(ranges[last], lanes)
        if column is not None:
            par[last], red[last] = column
    vector = [red[i] or par[i] for i in par_dims]  # the parallel extents of the vectorized tile
    budget = max(1, (8 * lanes) // max(1, product(p for p in vector if p)))
    for i in reversed(red_dims):
        t = largest_divisor_at_most(ranges[i], max(1, min(4 * lanes, budget)))
        red[i] = t
        budget = max(1, budget // t)
    return ElementwiseTiles(tuple(par), tuple(red))


def _column_tiles(size: int, lanes: int) -> tuple[int, int] | None:
    """A column reduction's contiguous loop: a forall block of up to 16 vectors (but a quarter of the
    loop when that is more than 4 vectors, so that threads have blocks to share), swept row by row
    in sequential tiles of up to 4 vectors (whole vectors where they divide the block).  Why: each
    step then reads a contiguous run of every row it reduces, where a forall block of one 4-vector
    tile read 256 bytes per row of the whole matrix (a 4096x1000 f32 column max: 1.6 ms on two
    threads, 0.4-0.5 ms in blocks of 250 columns).  None when the block would be one tile."""
    block = largest_divisor_at_most(size, min(16 * lanes, max(4 * lanes, size // 4)))
    whole = [d for d in range(lanes, 4 * lanes + 1, lanes) if block % d == 0]
    tile = whole[-1] if whole else largest_divisor_at_most(block, 4 * lanes)
    return (block, tile) if block > tile else None


def matmul_section(tag: int, t: MatmulTiles) -> str:
    """K slab (scf.for), parallel block (scf.forall), register block (scf.for), vectorize."""
    op = "linalg.batch_matmul" if t.batch else "linalg.matmul"
    b = [1] if t.batch else []
    zb = [0] if t.batch else []
    s = match(f"%mm{tag}", op, tag)
    s += tile_for(f"mk{tag}", f"%mm{tag}", zb + [0, 0, t.k])
    s += tile_forall(f"mp{tag}", f"%mk{tag}", b + [t.par_m, t.par_n])
    s += tile_for(f"mr{tag}", f"%mp{tag}", b + [t.reg_m, t.reg_n, 1])
    s += vectorize(f"%mr{tag}")
    return s


FILL_ROW_MAX = 1024
"""The widest row a fill's tile may take when no divisor of the row up to 64 fills a vector."""


def fill_section(tag: int, shape: Sequence[int]) -> str:
    """Sequential tiling of a fill into (<=8) x (<=64) pieces so that it vectorizes in registers.

    A row whose divisors up to 64 are all narrower than a vector of bytes (2 x 251: a pad's result of
    a 500-wide operand) takes one whole row of up to ``FILL_ROW_MAX`` elements instead: stores of
    whole vectors and a short tail, where 2-element pieces were one store per 2 elements."""
    if not shape:
        return ""
    return match(f"%fl{tag}", "linalg.fill", tag) + tile_for(f"ft{tag}", f"%fl{tag}", fill_tiles(shape)) + \
        vectorize(f"%ft{tag}")


def fill_tiles(shape: Sequence[int]) -> list[int]:
    """(<=8) x (<=64) pieces on the last two axes, 1 on the others; a row without a vector-wide
    divisor up to 64 takes one whole row of up to ``FILL_ROW_MAX`` elements (see ``fill_section``)."""
    width = largest_divisor_at_most(shape[-1], 64)
    if width < 16:
        wide = largest_divisor_at_most(shape[-1], FILL_ROW_MAX)
        if wide > width:
            width = wide
    rows = 8 if width <= 64 else 1
    sizes = [1] * (len(shape) - 2) + ([largest_divisor_at_most(shape[-2], rows)] if len(shape) >= 2 else [])
    sizes.append(width)
    return sizes


def elementwise_section(tag: int, op_name: str, t: ElementwiseTiles, nd_extract: bool = False) -> str:
    """Forall over parallel loops, then scf.for over reduction loops (if any), then vectorize."""
    s = match(f"%ew{tag}", op_name, tag)
    src = f"%ew{tag}"
    if any(t.parallel):
        s += tile_forall(f"ep{tag}", src, t.parallel)
        src = f"%ep{tag}"
    if any(t.reduction):
        s += tile_for(f"er{tag}", src, t.reduction)
        src = f"%er{tag}"
    s += vectorize(src, nd_extract)
    return s


VECTOR_LOWERING = """\
    %func = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.vector.reduction_to_contract
      transform.apply_patterns.vector.transfer_permutation_patterns
    } : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
      transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    %loops = transform.structured.match ops{["scf.for"]} in %func : (!transform.any_op) -> !transform.any_op
    transform.apply_licm to %loops : !transform.any_op
    transform.loop.hoist_loop_invariant_subsets %loops : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.lower_multi_reduction lowering_strategy = "innerparallel"
      transform.apply_patterns.vector.split_transfer_full_partial split_transfer_strategy = "vector-transfer"
      transform.apply_patterns.vector.transfer_to_scf max_transfer_rank = 1 full_unroll = true
    } : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.vector.lower_transfer max_transfer_rank = 1
      transform.apply_patterns.vector.lower_shape_cast
      transform.apply_patterns.vector.lower_transpose lowering_strategy = "shuffle_1d"
      transform.apply_patterns.vector.lower_broadcast
      transform.apply_patterns.vector.lower_outerproduct
    } : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
"""


# Generic bodies with these ops are left unscheduled: gathers (tensor.extract at computed indices,
# linalg.index) and the slices fused into them.  ``vectorize_nd_extract`` makes a read it cannot
# prove contiguous a ``vector.gather`` with indices linearized over the read tensor's shape, wrong
# when that tensor bufferizes to a strided view (docs/backend-cpu.md, Schedules; pads are no longer
# such bodies: ``Emitter.pad``).
_UNSCHEDULED_BODY_OPS = ("tensor.extract", "linalg.index")


def _plan_generic(unit: VectorUnit, op: Any, tag: int) -> str | None:
    from mlir import ir
    loops = generic_loops(op)
    if loops is None:
        return None
    ranges, kinds = loops
    if not ranges or 0 in ranges:
        return None
    for amap_attr in op.attributes["indexing_maps"]:
        if map_kind(ir.AffineMapAttr(amap_attr).value) is None:
            return None  # strided or shifted reads (slices): loops
    block = op.regions[0].blocks[0]
    if any(block_op.operation.name in _UNSCHEDULED_BODY_OPS for block_op in block.operations):
        return _plan_row_reads(unit, op, tag, ranges, kinds)
    if any(k != "parallel" for k in kinds) and not vectorizable_reduction(op):
        return None
    # the widest element type sets the lane count: with the narrowest (an i8 mask), f32 operands of
    # the same op got 256-element tiles, 16 registers per row, and 4x the IR of a register-sized tile
    bits = max(element_bits(v.type) for v in op.operands)
    tiles = choose_elementwise_tiles(ranges, kinds, bits, unit)
    if all(k == "parallel" for k in kinds) and len(ranges) >= 2 and any(
            _moves_inner_dim(ir.AffineMapAttr(a).value) for a in op.attributes["indexing_maps"]):
        tiles = _transpose_tiles(ranges, bits, unit)
    return elementwise_section(tag, "linalg.generic", tiles)


def _plan_row_reads(unit: VectorUnit, op: Any, tag: int, ranges: Sequence[int], kinds: Sequence[str]) -> str | None:
    """A parallel generic whose body reads computed indices (a gather of rows, ``lowerings.gather``)
    when every read is a whole row: tiles of one vector along the last loop and 1 elsewhere,
    vectorized with ``vectorize_nd_extract``, so that each read is one contiguous vector (or one
    scalar), never a ``vector.gather`` (whose linearized indices are wrong on a strided view:
    ``_UNSCHEDULED_BODY_OPS``).  None (loops) unless ``row_reads`` says every read is of that kind."""
    if any(k != "parallel" for k in kinds) or ranges[-1] < 2:
        return None
    bits = max(element_bits(r.type) for r in op.results)
    width = largest_divisor_at_most(ranges[-1], 4 * unit.lanes(bits))
    if width < 2 or not row_reads(op):
        return None
    tiles = ElementwiseTiles((1,) * (len(ranges) - 1) + (width,), (0,) * len(ranges))
    return elementwise_section(tag, "linalg.generic", tiles, nd_extract=True)


def _moves_inner_dim(amap: Any) -> bool:
    """Whether an operand's contiguous (last) axis is not indexed by the innermost loop: a transpose."""
    from mlir import ir
    results = list(amap.results)
    return bool(results) and isinstance(results[-1], ir.AffineDimExpr) and \
        results[-1].position != amap.n_dims - 1 and map_kind(amap) == "permutation"


def _transpose_tiles(ranges: Sequence[int], bits: int, unit: VectorUnit) -> ElementwiseTiles:
    """Square tiles of one vector by one vector on the last two loops of a transposing copy: each
    tile reads whole vector rows of the input and writes whole vector rows of the output, transposed
    in registers (the elementwise tiles, 2 rows of 4 vectors, read one element per input row: a
    gather; 2048x2048 f32: 27.7 ms with them, 6.9 / 5.2 / 2.6 ms with 4 / 8 / 16-element squares)."""
    side = unit.lanes(bits)
    par = [1] * (len(ranges) - 2) + [largest_divisor_at_most(n, side) for n in ranges[-2:]]
    return ElementwiseTiles(tuple(par), (0,) * len(ranges))


def _inner_tiles(unit: VectorUnit, op: Any, block: dict[int, int]) -> list[int]:
    """Sequential tiles of an op fused into a fusion group's block (``fusion_groups``): the per-op
    plans' tiles (``fill_tiles``, ``choose_elementwise_tiles``) for the block's ranges."""
    if op.name == "linalg.fill":
        shape = static_shape(op.results[0].type) or []
        return fill_tiles([block.get(i, n) for i, n in enumerate(shape)])
    ranges, kinds = generic_loops(op)  # type: ignore[misc]
    ranges = [block.get(i, n) for i, n in enumerate(ranges)]
    t = choose_elementwise_tiles(ranges, kinds, max(element_bits(v.type) for v in op.operands), unit)
    return [p or r for p, r in zip(t.parallel, t.reduction)]


def _plan_matmul(unit: VectorUnit, op: Any, tag: int) -> str | None:
    """``linalg.matmul`` and ``linalg.batch_matmul`` (one matrix of the batch per forall block row)."""
    if len(list(op.operands)) != 3 or str(op.attributes["indexing_maps"]) != DEFAULT_MAPS[op.name]:
        return None
    a, b = (static_shape(v.type) for v in list(op.operands)[:2])
    if a is None or b is None or 0 in a or 0 in b:
        return None
    m, k = a[-2], a[-1]
    n = b[-1]
    t = choose_matmul_tiles(m, n, k, element_bits(op.operands[0].type), op.name == "linalg.batch_matmul", unit)
    if t.reg_m < 4 or t.reg_n < min(8, 2 * unit.lanes(element_bits(op.operands[0].type))) or t.k < 8:
        return None  # odd shapes: scalar loops (a register tile this small gains little)
    return matmul_section(tag, t)


MIN_SCHEDULE_WORK = 8192
"""Default cost model: an op with fewer iterations than this (``op_work``) stays scalar loops.

Scalar loops over a few thousand elements cost less per call than the argument binding every call
pays, while each scheduled op costs milliseconds of compile (tiling, vector lowering, LLVM), most of
all the small odd shapes (10-wide rows of a classifier head) whose vectors do not fill a register
(``docs/backend-cpu.md``, Schedules).  ``schedule="all"`` passes 0 (schedule every op that has a plan:
what the tests use to exercise the plans on small shapes)."""


def _plan_fill(unit: VectorUnit, op: Any, tag: int) -> str | None:
    if feeds_conv(op):
        return None  # a conv section fuses its fills itself
    shape = static_shape(op.results[0].type) if len(op.results) else static_shape(op.operands[1].type)
    if not shape or 0 in shape:
        return None
    return fill_section(tag, shape)


COPY_TILE_ELEMENTS = 4096
"""A copy's forall step moves whole rows, about this many elements (fewer when the rows do not divide)."""


def _plan_copy(unit: VectorUnit, op: Any, tag: int) -> str | None:
    """``linalg.copy`` (what a pad writes into its window, ``linalg.emitter.Emitter.pad``): a forall
    over blocks of whole rows (threads), each block vectorized, which canonicalization folds back to
    a copy of the block (a vector read and write of the same tile); bufferized, that is one
    ``memref.copy`` per block, moved a row at a time (``runtime``, ``memrefCopy``: one memmove of each
    contiguous row, libc's vector copy) even into a window with steps."""
    shape = static_shape(op.operands[1].type)
    if not shape or 0 in shape:
        return None
    row = shape[-1]
    rows = [1] * (len(shape) - 2) + [largest_divisor_at_most(shape[-2], max(1, COPY_TILE_ELEMENTS // row))
                                      for _ in shape[-2:-1]]
    tiles = ElementwiseTiles(tuple(rows) + (row if len(shape) == 1 else 0,), (0,) * len(shape))
    return elementwise_section(tag, "linalg.copy", tiles)


def planners(unit: VectorUnit = AVX512) -> dict[str, Any]:
    """The CPU's planner of each linalg op it schedules (``linalg.schedule.schedule_module``), its
    tiles sized for ``unit``: ``linalg.matmul`` and ``linalg.batch_matmul`` with tiles that divide
    its shape, ``linalg.fill``, ``linalg.generic`` ops whose indexing maps are identities,
    permutations (transposes) or projections/broadcasts and whose body reads no computed indices
    (elementwise chains, multi-result fused generics, reductions over any axes that
    ``vectorizable_reduction`` accepts, batched-matmul generics) or reads only whole rows (gathers of
    rows, ``_plan_row_reads``), ``linalg.copy`` (a pad's copy into its window: blocks of whole rows,
    ``_plan_copy``), and convolutions (``conv_schedule``).  Every other op (slices with
    strides/offsets, other gathers, zero-extent ops) stays a linalg op and is lowered to scalar
    loops."""
    return {"linalg.matmul": partial(_plan_matmul, unit), "linalg.batch_matmul": partial(_plan_matmul, unit),
            "linalg.fill": partial(_plan_fill, unit), "linalg.generic": partial(_plan_generic, unit),
            "linalg.copy": partial(_plan_copy, unit),
            CONV_OP: partial(plan_conv, unit)}


def schedule(module: Any, min_work: int = MIN_SCHEDULE_WORK, skip: Any = None,
             unit: VectorUnit = AVX512) -> str | None:
    """The CPU's schedule of ``module``: ``linalg.schedule.schedule_module`` with ``planners(unit)``,
    the reductions fused with their broadcasting consumers (``fusion_groups``) and
    ``VECTOR_LOWERING`` (``min_work``: the cost model, 0 for every op that has a plan; ``skip``: ops
    left to someone else, the prebuilt GEMM's; ``unit``: the target's vector registers)."""
    def plannable(op: Any) -> bool:
        return _plan_generic(unit, op, 0) is not None
    unblock_sums(module, unit, plannable, skip, min_work)  # the groups' blocked sums, before the walk
    groups = partial(plan_groups, unit, plannable, partial(_inner_tiles, unit))
    return schedule_module(module, planners(unit), VECTOR_LOWERING, min_work, skip, groups)
