"""The CPU's schedules: tile sizes for the target's vector registers (``vector_unit``) and the transform-script sections that tile,
fuse and vectorize each kind of linalg op (``planners``, keyed by op name), then lower the vectors
(``VECTOR_LOWERING``).

The walk, the tags and the script's pieces are the target-neutral ones of ``linalg.schedule`` and
``linalg.transform_script``; what is the CPU's is the register blocks (16 or 32 vector registers of
``VectorUnit`` of the options' ``cpu``), the ``scf.forall`` blocks that OpenMP threads run, and the cost model
(``MIN_SCHEDULE_WORK``).  Two MLIR behaviours once made schedules miscompile and a third aborted the
process; each is handled at its cause, with regression tests (``tests/backend_cpu/test_schedule_regressions.py``):

* shared inits: ``cse`` merges identical ``tensor.empty`` + ``linalg.fill`` inits, and
  ``eliminate-empty-tensors`` then lets one op compute in the out-parameter of another result, which
  overwrites it (``linalg.payload.untie_shared_inits``);
* loop-invariant reductions: the linalg vectorizer folds ``out + c`` over a reduction loop into a
  single ``out + c`` when ``c`` does not depend on the reduced elements
  (``linalg.payload.vectorizable_reduction``).
* an out-of-bounds write on a tensor: a pad's copy in one block folds away, and canonicalization
  turns the pad's ``insert_slice`` of an offset-0 slice of a one-tile ``vector.transfer_write`` into
  an out-of-bounds write, which ``split_transfer_full_partial`` casts to a memref (an assertion): a
  copy of a computed value gets two or more blocks, or stays loops (``_computed``).

MLIR is imported inside functions only.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Sequence

from mind.spec.record import FrozenRecord

from ..linalg.emitter import CONV_OPERAND, WINDOW_COPY
from ..linalg.payload import (DEFAULT_MAPS, body_ops, element_bits, generic_inputs, generic_loops,
                              increasing, map_kind, product, row_major_run, row_reads, static_bytes, static_shape,
                              reduction_combiners, tile_bits, vectorizable_reduction)
from ..linalg.schedule import schedule_module
from ..linalg.transform_script import (canonicalize, largest_divisor_at_most, match, peel, sizes, tile_for,
                                      tile_forall, vectorize)
from .conv_schedule import CONV_OP, feeds_conv, plan_conv
from .fusion_groups import (_MASKED, CHAINS, ROW_VECTORS_TO_GROUP, horizontal_reductions, masked_cover, plan_groups,
                            unblock_sums)
from .thread_cost import COSTS, saving_pays
from .vector_unit import AVX512, CACHE_LINE_BYTES, VectorUnit

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
    the contiguous parallel loop of a column reduction inside its forall block; 0 = not tiled);
    ``masked``: the last loop's tile need not divide it (its last tile is vectorized with a mask)."""

    __slots__ = ("parallel", "reduction", "masked")

    parallel: tuple[int, ...]
    reduction: tuple[int, ...]
    masked: bool

    def __init__(self, parallel: tuple[int, ...], reduction: tuple[int, ...], masked: bool = False) -> None:
        _set(self, "parallel", parallel)
        _set(self, "reduction", reduction)
        _set(self, "masked", masked)


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
                             unit: VectorUnit = AVX512, masked: bool = False, threads: int = 1) -> ElementwiseTiles:
    """Innermost loop gets up to 4 vectors, the one above 1 row (2 for rows of less than 2 vectors:
    ``_second_rows``), outer loops 1.  A reduction's loops of one iteration (its kept dims) do not
    count: the rows its tile takes are those of the innermost parallel loop that has several (a
    keepdims max over rows of 4 had tiles of one row, its loop of one iteration taking the place of
    the rows).  Elementwise ops keep their tiles (``[R, 1]`` with 64 rows per tile ran slower).

    Reduction loops (tiled sequentially after the parallel forall) share what is left of a budget of
    8 vectors per tile, innermost first, so that no tile becomes a huge vector (``linalg.schedule``).
    A column reduction (the innermost loop parallel, a reduction loop outside it) is tiled by
    ``_column_tiles`` instead, with ``CHAINS`` vectors of accumulators per tile (``_chain_rows``);
    ``masked`` lets it tile an odd contiguous loop by whole vectors with a masked last tile;
    ``threads``: the kernel's, which share a column reduction's blocks when it streams from beyond
    L2 (``_column_blocks``).
    """
    lanes = unit.lanes(elem_bits)
    par: list[int] = []
    red: list[int] = []
    par_dims = [i for i, k in enumerate(kinds) if k == "parallel"]
    red_dims = [i for i, k in enumerate(kinds) if k != "parallel"]
    inner = largest_divisor_at_most(ranges[-1], 4 * lanes)
    # a reduction's rows: a unit loop (a kept dim) holds none
    rows = [i for i in par_dims if ranges[i] > 1] if red_dims else par_dims
    for i, size in enumerate(ranges):
        if kinds[i] == "parallel":
            pos = len(rows) - 1 - rows.index(i) if i in rows else len(rows)  # 0 = innermost row loop
            if red_dims and i < max(red_dims):
                bound = 1 if pos > 0 else 8
            else:
                bound = 4 * lanes if pos == 0 else (_second_rows(inner, lanes, bool(red_dims)) if pos == 1 else 1)
            par.append(largest_divisor_at_most(size, bound))
            red.append(0)
        else:
            par.append(0)
            red.append(0)
    last = len(ranges) - 1
    if red_dims and par_dims and par_dims[-1] == last > max(red_dims):
        in_l2 = product(ranges) * elem_bits // 8 <= unit.l2_bytes
        blocks = None if in_l2 else _column_blocks(ranges, kinds, elem_bits, threads)
        par[last], red[last], masked = _column_tiles(ranges[last], lanes, masked, column_vectors(unit, elem_bits),
                                                     blocks)
        if not red[last] and in_l2:
            _chain_rows(par, red, ranges, kinds, lanes)
    else:
        masked = False
    vector = [red[i] or par[i] for i in par_dims]  # the parallel extents of the vectorized tile
    budget = max(1, (8 * lanes) // max(1, product(p for p in vector if p)))
    for i in reversed(red_dims):
        t = largest_divisor_at_most(ranges[i], max(1, min(4 * lanes, budget)))
        red[i] = t
        budget = max(1, budget // t)
    return ElementwiseTiles(tuple(par), tuple(red), masked)


COLUMN_RUN_BYTES = 256
"""What a column reduction's whole-vector tile may read of each row: 4 cache lines, 4 AVX-512 vectors."""


def column_vectors(unit: VectorUnit, elem_bits: int) -> int:
    """Whole vectors of a column reduction's tile: ``COLUMN_RUN_BYTES`` of a row, at least 4 and at
    most half the registers (the rest hold what the adds read).  Why bytes and not 4 vectors: AVX2's
    4 ymm are 128 bytes, so a blocked sum's first level (rows of 32 f64) was two blocks, each reading
    half of every row's 256 bytes with 4 chains of adds, 1.4-1.6x slower than AVX-512's one block of
    4 zmm (``docs/backend-cpu.md``, Measurements); 8 ymm carried through the loop stay in registers."""
    vector_bytes = unit.lanes(elem_bits) * max(8, elem_bits) // 8
    return max(4, min(unit.registers // 2, COLUMN_RUN_BYTES // vector_bytes))


STREAM_BLOCK_BYTES = 16 << 10
"""The widest block of a column reduction that streams from beyond L2: its accumulators (one row of
the block, read and written at each step) stay in L1, 32 KiB or more on the parts of every x86-64
level."""


def _column_blocks(ranges: Sequence[int], kinds: Sequence[str], elem_bits: int, threads: int) -> int:
    """How many blocks a column reduction that streams from beyond L2 splits its contiguous loop
    into: the fewest that give every thread as many blocks (with the outer parallel loops' blocks:
    each of their iterations is a block of its own), and more only where a block's accumulators
    would not fit ``STREAM_BLOCK_BYTES``.  Three outer blocks on two threads (a 362x3376 column sum's
    first level, [3, 120, 3376]) were 2 and 1: cut in two each, 3 and 3 (54.5 → 42.6 µs).

    Why as few as that: each block sweeps every row, so the run it reads of a row is as long as the
    block.  Four blocks of 250 f32 read 1000 bytes of each 4000-byte row of a 4096x1000 column max:
    one block per thread read it 1.15-1.2x faster, and one block on one thread 1.25x; the figures are
    in ``docs/backend-cpu.md``, Measurements."""
    outer = product(r for r, k in zip(ranges[:-1], kinds[:-1]) if k == "parallel")
    blocks = next(b for b in range(max(1, -(-threads // outer)), threads + 1) if outer * b % threads == 0)
    widest = max(1, STREAM_BLOCK_BYTES * 8 // max(8, elem_bits))
    return max(blocks, -(-ranges[-1] // widest))


def _second_rows(inner: int, lanes: int, reduction: bool) -> int:
    """Rows of the loop above the innermost in an elementwise tile whose innermost loop has a tile
    of ``inner`` elements: 2 only where a row is less than 2 vectors (or below a reduction's loops,
    the plans of column reductions).  Why: a tile of 2 rows of 4 vectors ran 8-38% slower than one
    row on both AVX2 and AVX-512 (a sigmoid chain keeps 8 vectors and its polynomial's constants
    live, spilled even on 32 registers; a plain x * 2 + 1 of 1024x2048 f32 too;
    ``docs/backend-cpu.md``, Measurements)."""
    return 2 if reduction or inner < 2 * lanes else 1


def _chain_rows(par: list[int], red: list[int], ranges: Sequence[int], kinds: Sequence[str], lanes: int) -> None:
    """Rows of the parallel loop right outside the reduction loops in each tile of a reduction whose
    innermost loop is parallel (a sum over a middle axis, a blocked sum's level, a column reduction
    of a batch), so that a tile holds ``CHAINS`` vectors of accumulators: each vector is one
    dependent chain of adds along the reduction loop, and fewer chains than an add's latency times
    the adds issued per cycle leave the adders idle (a tile of 17 f64 per row: three chains).  Only
    for a block that is one tile (its accumulators in registers) and an op whose iteration space
    fits the unit's L2: streaming from further out, one row at a time (one sequential stream per
    tile, what the prefetchers follow) ran faster than rows side by side (a 4096x1024 f32 row sum;
    ``docs/backend-cpu.md``, Measurements)."""
    red_dims = [i for i, k in enumerate(kinds) if k != "parallel"]
    outer = [i for i in range(min(red_dims)) if kinds[i] == "parallel"]
    if not outer:
        return
    inner = product(red[i] or par[i] for i in range(max(red_dims) + 1, len(ranges)))
    chains = -(-inner // lanes)
    if chains < CHAINS:
        par[outer[-1]] = largest_divisor_at_most(ranges[outer[-1]], -(-CHAINS // chains))


def _column_tiles(size: int, lanes: int, masked: bool = False, vectors: int = 4,
                  blocks: int | None = None) -> tuple[int, int, bool]:
    """A column reduction's contiguous loop: (forall block, sequential tile or 0 when the block is
    one tile, masked).  Blocks of up to 4 tiles (but a quarter of the loop when that is more than
    one tile, so that threads have blocks to share), or, given ``blocks`` (a reduction streaming
    from beyond L2: ``_column_blocks``), ``size / blocks`` at most, swept row by row in tiles of up to ``vectors``
    whole vectors (``column_vectors``) where they divide the block, else of up to 4 vectors.  Why:
    each step then reads a contiguous run of every row it reduces, where a forall block of one
    4-vector tile read 256 bytes per row of the whole matrix (a 4096x1000 f32 column max;
    ``docs/backend-cpu.md``, Measurements).

    A block that is one tile keeps its accumulators in registers across the reduction loop, which
    LLVM's AVX-512 lowering does for whole vectors in counts of 1, 2 or 4 and for a loop narrower
    than one vector: a loop-carried 37 or 40 f32 or 17 f64 is scalarized through the stack (a
    24x125x40 f32 sum over its middle axis), while 7 f64 ran faster than a masked vector of 8 (a row
    sum of 1000x777 f64, whose first level has rows of 7; the figures are in ``docs/backend-cpu.md``).
    With ``masked``,
    such a loop takes whole vectors instead, the fewest powers of two up to 4 that cover it, in
    blocks of one tile (a masked tile swept inside a larger block, its accumulators read and written
    every step, ran slower: 2000x333 f32 over axis 0 on AVX2), the last one masked; and so does
    a block swept in tiles narrower than a vector that are not a power of two (3 of 111 f64)."""
    for v in sorted({vectors, 4}, reverse=True):  # the wider tiles where they fit, else 4 vectors
        bound = min(4 * v * lanes, max(v * lanes, size // 4)) if blocks is None else max(v * lanes, size // blocks)
        block = largest_divisor_at_most(size, bound)
        whole = [d for d in range(lanes, v * lanes + 1, lanes) if block % d == 0]
        tile = whole[-1] if whole else largest_divisor_at_most(block, 4 * lanes)
        narrow = 2 <= tile < lanes and tile & (tile - 1) == 0  # a power of two narrower than a vector
        if block > tile:  # accumulators read and written every step: any width of whole vectors
            # (in L2, whole vectors only: a tile of 50 f32, 3 vectors and 2 lanes, was read every row
            # in pieces, where the masked cover is not; streaming from further out, the two ran
            # alike: the figures are in docs/backend-cpu.md, Schedules, column reductions)
            fits = (tile % lanes == 0 if blocks is None else tile >= lanes) or narrow
        else:  # accumulators carried in registers through the reduction loop: 1, 2, 4, ... vectors
            fits = tile % lanes == 0 and (tile // lanes) & (tile // lanes - 1) == 0 or tile == size < lanes
        if fits:
            return block, (tile if block > tile else 0), False
    if not masked:
        return block, (tile if block > tile else 0), False
    return masked_cover(size, lanes), 0, True


def matmul_section(tag: int, t: MatmulTiles) -> str:
    """K slab (scf.for), parallel block (scf.forall), register block (scf.for), vectorize."""
    op = "linalg.batch_matmul" if t.batch else "linalg.matmul"
    b = [1] if t.batch else []
    zb = [0] if t.batch else []
    s = match(f"%mm{tag}", op, tag)
    s += tile_for(f"mk{tag}", f"%mm{tag}", zb + [0, 0, t.k])
    s += tile_forall(f"mp{tag}", f"%mk{tag}", b + [t.par_m, t.par_n])
    s += tile_for(f"mr{tag}", f"%mp{tag}", b + [t.reg_m, t.reg_n, 1])
    s += vectorize(f"%mr{tag}", contraction=True)
    return s


FILL_ROW_MAX = 1024
"""The widest row a fill's tile may take when no divisor of the row up to 64 fills a vector."""


def fill_section(tag: int, shape: Sequence[int], parallel: bool = False) -> str:
    """Tiling of a fill into (<=8) x (<=64) pieces so that it vectorizes in registers, sequential,
    or a forall over the pieces (``parallel``: threads; see ``_plan_fill``).

    A row whose divisors up to 64 are all narrower than a vector of bytes (2 x 251: a pad's result of
    a 500-wide operand) takes one whole row of up to ``FILL_ROW_MAX`` elements instead: stores of
    whole vectors and a short tail, where 2-element pieces were one store per 2 elements."""
    if not shape:
        return ""
    tile = tile_forall if parallel else tile_for
    return match(f"%fl{tag}", "linalg.fill", tag) + tile(f"ft{tag}", f"%fl{tag}", fill_tiles(shape)) + \
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


def elementwise_section(tag: int, op_name: str, t: ElementwiseTiles, nd_extract: bool = False,
                        ranges: Sequence[int] = (), order: Sequence[int] = ()) -> str:
    """Forall over parallel loops, then scf.for over reduction loops (if any), then vectorize (a
    masked tiling with vector sizes of its whole tiles, ``ranges`` the op's loop ranges).  ``order``:
    the op's loops are first interchanged into this order (new loop i is loop ``order[i]``), and
    ``t`` and ``ranges`` are given in it."""
    s = match(f"%ew{tag}", op_name, tag)
    src = f"%ew{tag}"
    if order and list(order) != sorted(order):
        s += (f"    %ei{tag} = transform.structured.interchange {src} iterator_interchange = {sizes(order)}"
              f" : (!transform.any_op) -> !transform.any_op\n")
        src = f"%ei{tag}"
    if any(t.parallel):
        s += tile_forall(f"ep{tag}", src, t.parallel)
        src = f"%ep{tag}"
    if any(t.reduction):
        s += tile_for(f"er{tag}", src, t.reduction)
        src = f"%er{tag}"
    if not t.masked:
        return s + vectorize(src, nd_extract)
    vector = [r or p or n for p, r, n in zip(t.parallel, t.reduction, ranges)]
    return s + f"    transform.structured.vectorize {src} vector_sizes {sizes(vector)} : !transform.any_op\n" + \
        _MASKED.format(v=f"em{tag}")


# No `reduction_to_contract` here: a matmul's register block is vectorized as a vector.contract by
# its section (`create_named_contraction`), and nothing else should be one: those patterns made every
# reduction of a product over an outer axis (a dot, `sum(x * y, axis=0)`, a sum of `exp`) a contract
# that the contraction lowering took apart lane by lane (docs/backend-cpu.md, Schedules).
# The transposes are lowered last, after a canonicalization: a row statistic broadcast along the
# rows of a tile of several rows is a broadcast and a transpose, which folds there to a splat per row;
# lowered with the transfers, it became shuffles of the whole tile (docs/backend-cpu.md, Measurements).
VECTOR_LOWERING = """\
    %func = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %func {
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
      transform.apply_patterns.vector.lower_broadcast
      transform.apply_patterns.vector.lower_outerproduct
    } : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.vector.lower_shape_cast
      transform.apply_patterns.vector.lower_transpose lowering_strategy = "shuffle_16x16"
      transform.apply_patterns.vector.lower_broadcast
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


def _plan_generic(unit: VectorUnit, threads: int, op: Any, tag: int) -> str | None:
    from mlir import ir
    loops = generic_loops(op)
    if loops is None:
        return None
    ranges, kinds = loops
    if not ranges or 0 in ranges:
        return None
    for amap_attr in op.attributes["indexing_maps"]:
        if map_kind(ir.AffineMapAttr(amap_attr).value) is None:
            return _plan_strided(threads, op, tag, ranges, kinds)  # strided or shifted reads (slices): loops
    reads = {block_op.operation.name for block_op in body_ops(op)} & set(_UNSCHEDULED_BODY_OPS)
    if reads:
        rows = _plan_row_reads(unit, op, tag, ranges, kinds)
        if rows is not None or not _gathers_from_dense(op, kinds):
            return rows
    if any(k != "parallel" for k in kinds) and not vectorizable_reduction(op):
        return None
    # the widest element type sets the lane count: with the narrowest (an i8 mask), f32 operands of
    # the same op got 256-element tiles, 16 registers per row, and 4x the IR of a register-sized tile
    bits = tile_bits(op)
    rows = _whole_row_tiles(op, ranges, kinds, unit, bits)
    if rows is not None:
        return elementwise_section(tag, "linalg.generic", ElementwiseTiles(rows, (0,) * len(ranges))) + \
            horizontal_reductions(f"eh{tag}", f"%ep{tag}_f")
    lanes = unit.lanes(bits)
    nd_extract = bool(reads)  # element gathers from dense tensors (``_gathers_from_dense``)
    if "linalg.index" not in reads and _flattens(op, ranges, kinds, lanes):
        return _flat_section(tag, product(ranges), lanes, flatten=len(ranges) > 1, nd_extract=nd_extract)
    peeled = _peeled_row_tile(op, ranges, kinds, lanes, threads)
    if peeled:
        return _peeled_rows(op, tag, ranges, peeled, nd_extract)
    tiles = choose_elementwise_tiles(ranges, kinds, bits, unit, masked=True, threads=threads)
    order: list[int] = []
    if all(k == "parallel" for k in kinds) and len(ranges) >= 2:
        plane = transpose_plane(op)
        if plane is not None:
            tiles = _transpose_tiles(ranges, plane, bits, unit)
            if _streams_transposed(op, ranges, plane, unit, threads):
                order = [d for d in range(len(ranges)) if d != plane[0]] + [plane[0]]
                tiles = ElementwiseTiles(tuple(tiles.parallel[d] for d in order),
                                         tuple(tiles.reduction[d] for d in order), tiles.masked)
                ranges = [ranges[d] for d in order]
    return elementwise_section(tag, "linalg.generic", tiles, nd_extract, ranges=ranges, order=order)


def _gathers_from_dense(op: Any, kinds: Sequence[str]) -> bool:
    """Whether the parallel generic ``op``, whose body reads computed indices that are not whole rows
    (``_plan_row_reads`` took none), reads them only from tensors dense by construction (constants,
    the function's arguments: ``payload.row_reads`` with ``dense_gathers``): it is then planned as
    any elementwise op and vectorized with ``vectorize_nd_extract``, those reads as ``vector.gather``
    (a hardware gather), the others as contiguous or scalar reads.  Why: a table lookup (the
    argument reduction of ``sin``/``cos``, a gather of elements from a parameter) was scalar loops
    (``docs/backend-cpu.md``, Measurements: gathers of elements from dense tensors)."""
    return all(k == "parallel" for k in kinds) and row_reads(op, dense_gathers=True)


def _flattens(op: Any, ranges: Sequence[int], kinds: Sequence[str], lanes: int) -> bool:
    """Whether ``op`` is elementwise over contiguous operands (every map an identity) with rows of
    fewer than two vectors (of two or more dims), or rows whose largest divisor up to 4 vectors is
    not whole vectors (any rank; of one dim, a scalar operand too: the loop is flat already), which
    ``_flat_section`` takes as one loop.  Why: the plan of
    ``choose_elementwise_tiles`` tiles such an op by that divisor (two rows of 4 elements per tile
    for an ``exp`` over [836, 64, 4]; one element for a row of a prime 857, or for a vector of
    1000001 = 101 x 9901 elements, which ran 4.4x slower than NumPy; 50 f32 of a row of 1000, three
    vectors and a piece), where the op flattened fills whole vectors (``docs/backend-cpu.md``,
    Measurements: short rows flattened, rows without a divisor flattened, rows of pieces of vectors
    flattened, flat loops split).  An op with a broadcast operand is peeled instead
    (``_peeled_row_tile``), as is one with an operand that is a window of part of its source's rows
    (``payload.row_major_run``: collapsed, it would be copied)."""
    from mlir import ir
    row = ranges[-1] if ranges else 0
    tile = largest_divisor_at_most(row, 4 * lanes)
    return bool(ranges) and all(k == "parallel" for k in kinds) and \
        ((len(ranges) >= 2 and row < 2 * lanes) or tile % lanes != 0) and \
        (len(ranges) == 1 or
         all(map_kind(ir.AffineMapAttr(a).value) == "identity" for a in op.attributes["indexing_maps"])) and \
        all(row_major_run(v) for v in op.operands)


def _peeled_row_tile(op: Any, ranges: Sequence[int], kinds: Sequence[str], lanes: int, threads: int) -> int:
    """The tile of whole vectors (up to 4) that ``_peeled_rows`` takes along the rows of an
    elementwise ``op`` whose rows of at least two vectors have a largest divisor up to 4 vectors that
    is not whole vectors, and that ``_flattens`` did not take (an operand broadcast: a row scale and
    shift, a per-row operand), or 0.  Why: tiled by that divisor, such a row was pieces of vectors
    (25 f32 of a row of 1975: a vector and a piece, every load, store and polynomial split by LLVM);
    peeled, each row is whole tiles and one tail.  Not a transpose (``transpose_plane``: its tiles
    are squares), nor an op of fewer rows than threads (the rows are what the threads share)."""
    row = ranges[-1] if ranges else 0
    if len(ranges) < 2 or any(k != "parallel" for k in kinds) or row < 2 * lanes:
        return 0
    if product(ranges[:-1]) < threads:
        return 0
    if largest_divisor_at_most(row, 4 * lanes) % lanes == 0 or transpose_plane(op) is not None:
        return 0
    return _whole_vector_tile(row, lanes)


def _whole_vector_tile(row: int, lanes: int) -> int:
    """The peeled tile of a row of at least a vector (``_peeled_rows``): the most whole vectors it
    holds, up to 4."""
    return lanes * min(4, row // lanes)


def _flat_section(tag: int, total: int, lanes: int, flatten: bool = True, nd_extract: bool = False) -> str:
    """The op flattened to one loop of ``total`` iterations (``transform.structured.flatten_elementwise``:
    its operands and result collapsed to one dim, the result expanded back), on the threads in tiles
    of 4 vectors.  Where they do not divide ``total`` the loop is split (``transform.structured.split``)
    after its last whole tile: the whole tiles on the threads, the tail (less than a tile, of static
    size) vectorized as it is after them.  Why not a masked last tile: the vectorizer masks every
    tile of a loop that its tile size does not divide, and AVX2's masked loads and stores are
    several instructions each (``docs/backend-cpu.md``, Measurements: flat loops split).  The
    collapsed result is a view of its out-parameter when it is a result (``result_roots``; the
    split's two parts write into it, ``payload.untie_shared_inits`` leaves them one tensor), so
    nothing is copied.  ``flatten``: False for an op of one loop, which may read a scalar operand
    (``flatten_elementwise`` takes only identity maps).  ``nd_extract``: the body gathers
    (``_gathers_from_dense``)."""
    tile = 4 * lanes
    s = match(f"%ew{tag}", "linalg.generic", tag)
    flat = f"%ef{tag}" if flatten else f"%ew{tag}"
    if flatten:
        s += (f"    %ef{tag} = transform.structured.flatten_elementwise %ew{tag} : "
              f"(!transform.any_op) -> !transform.any_op\n")
    if total % tile == 0:
        return s + tile_forall(f"ep{tag}", flat, [tile]) + vectorize(f"%ep{tag}", nd_extract)
    if total < tile:
        return s + vectorize(flat, nd_extract)
    s += (f"    %es{tag} = transform.structured.split {flat} after {total - total % tile} {{dimension = 0}}"
          f" : !transform.any_op\n"
          f"    %es{tag}_m, %es{tag}_t = transform.split_handle %es{tag} : "
          f"(!transform.any_op) -> (!transform.any_op, !transform.any_op)\n")
    return s + tile_forall(f"ep{tag}", f"%es{tag}_m", [tile]) + vectorize(f"%ep{tag}", nd_extract) + \
        vectorize(f"%es{tag}_t", nd_extract)


ROWS_PER_TILE = 4
"""Rows of a tile of whole short rows (``_whole_row_tiles``): independent horizontal reductions
side by side; 2 and 8 ran within a few per cent of 4, 1 up to 1.7x slower (a 4000x24 f64 max;
``docs/backend-cpu.md``, Measurements)."""


EXPANDED_MAXIMUM_ROW_VECTORS = 4
"""The fewest vectors of a max's row reduced whole (``_whole_row_tiles``) on a unit whose IEEE maximum
is LLVM's six-instruction expansion (``VectorUnit.maximum_instructions``, AVX2)."""


def _whole_row_tiles(op: Any, ranges: Sequence[int], kinds: Sequence[str], unit: VectorUnit,
                     bits: int) -> tuple[int, ...] | None:
    """The forall tiles of a reduction along its trailing loops whose row (those loops, read
    contiguously: every operand's map an identity or a projection) is at least one vector and
    shorter than the rows that fusion groups take (``ROW_VECTORS_TO_GROUP``): ``ROWS_PER_TILE`` rows
    (or the largest divisor below it) of whole rows, each row reduced on its own by a horizontal
    reduction (``horizontal_reductions``); None for other ops.

    Why: the plan of other reductions (a tile of 8 rows by one vector, "innerparallel") transposes
    the tile and folds its columns into the 8 rows' accumulator one after another, a dependent chain
    of one IEEE maximum (or add) per column: a 2000x64 f32 max ran at 0.56x torch eager's speed, a
    2000x48 f64 max 0.63x (1.25x and 1.19x whole).  A whole row's vectors are combined as a tree,
    then across the vector's lanes (the figures are in ``docs/backend-cpu.md``, Measurements).  Rows
    shorter than a vector keep that plan: there the transposed tile is what packs several rows into
    one vector (a 5000x7 f32 sum: 7.1 µs against 10.8 µs whole).  A max on a unit without a short
    IEEE maximum (AVX2) needs ``EXPANDED_MAXIMUM_ROW_VECTORS``: a row's horizontal reduction is log2(lanes) maxima and
    one with the initial value, at six instructions each, where the transposed tile does about one
    per vector of the row; with fewer vectors than 4 it was up to 1.5x slower (a 4000x9 f32 max),
    with 4 or more up to 1.6x faster (1000x90)."""
    from mlir import ir
    first = next((d for d, k in enumerate(kinds) if k != "parallel"), 0)
    if first == 0 or any(k == "parallel" for k in kinds[first:]):
        return None
    lanes, row = unit.lanes(bits), product(ranges[first:])
    expanded = unit.maximum_instructions > AVX512.maximum_instructions  # no vrange maximum
    maximum = "arith.maximumf" in reduction_combiners(op)
    fewest = EXPANDED_MAXIMUM_ROW_VECTORS if expanded and maximum else 1
    if not fewest * lanes <= row < ROW_VECTORS_TO_GROUP["reduction"] * lanes:
        return None
    maps = [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]
    if any(map_kind(m) not in ("identity", "projection") for m in maps):
        return None
    tiles = [1] * first + [0] * (len(ranges) - first)
    tiles[first - 1] = largest_divisor_at_most(ranges[first - 1], ROWS_PER_TILE)
    return tuple(tiles)


def _plan_strided(threads: int, op: Any, tag: int, ranges: Sequence[int], kinds: Sequence[str]) -> str | None:
    """A parallel generic that reads with a step along its rows (a slice with a step on the last
    axis): loops, whose innermost one LLVM's loop vectorizer takes (``movement_loops``), on the kernel's threads
    in blocks of whole rows (``COPY_TILE_ELEMENTS``, at least two blocks) when the time they save
    pays for a parallel region (``thread_cost.saving_pays``, its operands and result moved at one
    core's streaming bandwidth); else None (loops on one thread).  Why not vectors: MLIR's vector
    transfers of a strided view are lowered element by element (``movement_loops``).  Steps on outer
    axes only, shifts and reversals keep their loops (a step on rows bufferizes to one ``memmove`` per
    row, which ran faster than these loops on two threads)."""
    from mlir import ir
    if threads < 2 or any(k != "parallel" for k in kinds) or len(ranges) < 2:
        return None
    results = [e for a in op.attributes["indexing_maps"] for e in ir.AffineMapAttr(a).value.results]
    if not all(increasing(e) for e in results):
        return None  # a reversal: MLIR's tiling rejects a negative coefficient (an assertion aborts)
    if not any(_steps_through(e, len(ranges) - 1) for e in results):
        return None  # unit steps along the rows: bufferized to a copy of whole runs (one memmove each)
    moved = sum(b for v in op.operands if (b := static_bytes(v.type)))
    if not saving_pays(moved / COSTS["stream_bytes_per_s"], 1, threads):
        return None
    axis = len(ranges) - 2
    rows = largest_divisor_at_most(ranges[axis], max(1, COPY_TILE_ELEMENTS // ranges[-1]))
    if product(ranges[:axis]) * (ranges[axis] // rows) < 2:
        rows = largest_divisor_at_most(ranges[axis], ranges[axis] // 2)
        if rows < 1 or product(ranges[:axis]) * (ranges[axis] // rows) < 2:
            return None
    tiles = (1,) * axis + (rows, 0)
    return match(f"%ew{tag}", "linalg.generic", tag) + tile_forall(f"ep{tag}", f"%ew{tag}", tiles)


def _steps_through(expr: Any, dim: int) -> bool:
    """Whether an affine expression multiplies loop ``dim`` by a constant other than 1 (a step)."""
    from mlir import ir
    if isinstance(expr, ir.AffineMulExpr):
        pair = (expr.lhs, expr.rhs)
        if any(isinstance(e, ir.AffineDimExpr) and e.position == dim for e in pair):
            return any(isinstance(e, ir.AffineConstantExpr) and e.value != 1 for e in pair)
    if isinstance(expr, (ir.AffineAddExpr, ir.AffineMulExpr)):
        return _steps_through(expr.lhs, dim) or _steps_through(expr.rhs, dim)
    return False


def _plan_row_reads(unit: VectorUnit, op: Any, tag: int, ranges: Sequence[int], kinds: Sequence[str]) -> str | None:
    """A parallel generic whose body reads computed indices (a gather of rows, ``lowerings.gather``)
    when every read is a whole row: tiles of one vector along the last loop and 1 elsewhere,
    vectorized with ``vectorize_nd_extract``, so that each read is one contiguous vector (or one
    scalar), never a ``vector.gather`` (whose linearized indices are wrong on a strided view:
    ``_UNSCHEDULED_BODY_OPS``).  None (loops) unless ``row_reads`` says every read is of that kind."""
    if any(k != "parallel" for k in kinds) or ranges[-1] < 2:
        return None
    bits = max(element_bits(r.type) for r in op.results)
    lanes = unit.lanes(bits)
    width = largest_divisor_at_most(ranges[-1], 4 * lanes)
    if not row_reads(op):
        return None
    if width < lanes <= ranges[-1]:
        return _peeled_rows(op, tag, ranges, _whole_vector_tile(ranges[-1], lanes), nd_extract=True)
    if width < 2:
        return None
    tiles = ElementwiseTiles((1,) * (len(ranges) - 1) + (width,), (0,) * len(ranges))
    return elementwise_section(tag, "linalg.generic", tiles, nd_extract=True)


def _peeled_rows(op: Any, tag: int, ranges: Sequence[int], tile: int, nd_extract: bool = False) -> str:
    """Rows that no tile of whole vectors divides: the rows on the forall, each row in tiles of
    ``tile`` (whole vectors) on a loop that is peeled; the whole tiles and the last partial tile
    (fewer than ``tile`` elements), both of static size once the peeled loop's bounds are folded,
    are each vectorized (with ``vectorize_nd_extract`` for ``_plan_row_reads``' gathers, each read
    one contiguous vector).  Why not a mask: a masked read at a computed index may become a
    ``vector.gather``, and AVX2's masked loads and stores are slow (``_peeled_row_tile``); without
    a vector-sized divisor a gather's whole row was scalar loops (a 182-row gather of 67 f32: 27 µs
    against NumPy's 7)."""
    n = len(ranges)
    name = f"rr{tag}"
    return (match(f"%ew{tag}", "linalg.generic", tag)
            + tile_forall(f"{name}p", f"%ew{tag}", (1,) * (n - 1) + (0,))
            + tile_for(f"{name}t", f"%{name}p", (0,) * (n - 1) + (tile,))
            + peel(name, f"%{name}t_l")
            + canonicalize(f"%{name}p_f")  # the peeled tiles' sizes folded into static shapes
            + vectorize(f"%{name}_mg", nd_extract) + vectorize(f"%{name}_tg", nd_extract))


def _moves_inner_dim(amap: Any) -> bool:
    """Whether an operand's contiguous (last) axis is not indexed by the innermost loop: a transpose."""
    from mlir import ir
    results = list(amap.results)
    return bool(results) and isinstance(results[-1], ir.AffineDimExpr) and \
        results[-1].position != amap.n_dims - 1 and map_kind(amap) == "permutation"


def _streams_transposed(op: Any, ranges: Sequence[int], plane: tuple[int, int], unit: VectorUnit,
                        threads: int) -> bool:
    """Whether a transposing copy (one operand) walks along the operand's rows (its contiguous loop
    innermost) instead of along the result's: when each thread's part of the operand is larger
    than L2, and both loops of the plane are at least a vector long.  Read from beyond L2, a tile's
    loads then follow sequential streams, which the hardware prefetches, while its stores, rows of
    the result apart, wait in the store buffer; walking along the result's rows, every load missed
    a vector's rows below the last.  Within L2 the result's order stays faster (its stores then
    cost more than its loads), and so does a plane with a loop shorter than a vector, and a vector
    narrower than a cache line (AVX2's 32 bytes: each line of the result is then written in halves
    by tiles a whole band of rows apart, and read for ownership twice; ``docs/backend-cpu.md``,
    Measurements: transposes beyond L2)."""
    inputs = generic_inputs(op)
    size = static_bytes(inputs[0].type) if len(inputs) == 1 else None
    if size is None:
        return False
    lanes = unit.lanes(element_bits(inputs[0].type))
    return unit.bits // 8 >= CACHE_LINE_BYTES and all(ranges[d] >= lanes for d in plane) and \
        size > unit.l2_bytes * max(1, threads)


def transpose_plane(op: Any) -> tuple[int, int] | None:
    """(the loop along an operand's contiguous axis, the innermost loop: the result's) of a generic
    that reads an operand transposed (``_moves_inner_dim``), else None."""
    from mlir import ir
    for a in op.attributes["indexing_maps"]:
        amap = ir.AffineMapAttr(a).value
        if _moves_inner_dim(amap):
            return list(amap.results)[-1].position, amap.n_dims - 1
    return None


def _transpose_tiles(ranges: Sequence[int], plane: tuple[int, int], bits: int, unit: VectorUnit) -> ElementwiseTiles:
    """Square tiles of one vector by one vector on the two loops of the transposing ``plane`` (the
    loop along the operand's contiguous axis and the result's innermost), 1 on every other loop:
    each tile reads whole vector rows of the operand and writes whole vector rows of the result,
    transposed in registers (``VECTOR_LOWERING``: a 16 x 16 tile of 32-bit elements with the
    4-stage AVX-512 shuffle network).  Why the plane and not the last two loops:
    ``permutation=[2, 1, 0]`` of ``[3, 4096, 513]`` has its transposed axes first and last, and
    tiles of the last two loops read one element per operand row.  The elementwise tiles, 2 rows of
    4 vectors, read one element per operand row, and squares of a whole vector's side ran fastest
    (``docs/backend-cpu.md``, Measurements).  When both loops of the plane are longer than a vector
    and one has no vector-wide divisor, the tiles are still whole vector squares and the last ones
    masked (``masked``): the divisors (13 x 15 for 572 x 180) made odd vector shapes that LLVM moved
    piecemeal (splitting at the last whole vector instead made bufferization copy the result once
    more).  So are the tiles of result rows shorter than a vector but at least half one, when the
    operand's rows span a vector (``short_result_rows``): a 14 x 16 tile was one flat 224-lane
    shuffle, long for LLVM to compile and slower to run than the square's network and masked
    stores.  Other planes with a loop shorter than a vector keep the divisors: a masked 16 x 3 tile
    ran slower than the 9 x 3 one, and operand rows of 7 read as masked squares slower than the
    7 x 8 tiles (the figures: ``docs/backend-cpu.md``, Measurements)."""
    side = unit.lanes(bits)
    par = [1] * len(ranges)
    for d in plane:
        par[d] = largest_divisor_at_most(ranges[d], side)
    along_operand, result_rows = (ranges[d] for d in plane)
    short_result_rows = 2 * result_rows >= side > result_rows and along_operand >= side
    masked = short_result_rows or (all(ranges[d] > side for d in plane) and any(par[d] != side for d in plane))
    if masked:
        for d in plane:
            par[d] = side
    return ElementwiseTiles(tuple(par), (0,) * len(ranges), masked)


def _inner_tiles(unit: VectorUnit, threads: int, op: Any, block: dict[int, int]) -> list[int]:
    """Sequential tiles of an op fused into a fusion group's block (``fusion_groups``): the per-op
    plans' tiles (``fill_tiles``, ``choose_elementwise_tiles``) for the block's ranges."""
    if op.name == "linalg.fill":
        shape = static_shape(op.results[0].type) or []
        return fill_tiles([block.get(i, n) for i, n in enumerate(shape)])
    ranges, kinds = generic_loops(op)  # type: ignore[misc]
    ranges = [block.get(i, n) for i, n in enumerate(ranges)]
    t = choose_elementwise_tiles(ranges, kinds, tile_bits(op), unit,
                                 threads=threads)
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


def _plan_fill(unit: VectorUnit, threads: int, op: Any, tag: int) -> str | None:
    """A fill, on the kernel's threads when the time they save pays for a parallel region of its
    own (``thread_cost.saving_pays``, its bytes written at one core's streaming bandwidth): a pad's
    border boxes are most of what it writes (three quarters of a [256, 1, 500] -> [256, 4, 503] pad),
    and on one thread the copy of its window was all that two threads shared."""
    if feeds_conv(op):
        return None  # a conv section fuses its fills itself
    t = op.results[0].type if len(op.results) else op.operands[1].type
    shape = static_shape(t)
    if not shape or 0 in shape:
        return None
    written = static_bytes(t)
    parallel = threads > 1 and saving_pays(written / COSTS["stream_bytes_per_s"], 1, threads)
    return fill_section(tag, shape, parallel)


COPY_TILE_ELEMENTS = 4096
"""A copy's forall step moves whole rows, about this many elements (fewer when the rows do not divide)."""


def _plan_copy(unit: VectorUnit, op: Any, tag: int) -> str | None:
    """``linalg.copy`` (what a pad writes into its window, ``linalg.emitter.Emitter.pad``): a forall
    over blocks of whole rows (threads), each block a ``linalg.copy`` that becomes loops whose
    innermost one LLVM's loop vectorizer takes (``movement_loops``), also into a window with steps.

    Why loops: a vectorized block is folded back by canonicalization into a copy of the block, which
    bufferizes to a ``memref.copy`` and ``runtime.memrefCopy``'s one ``memmove`` per contiguous run;
    the loops were as fast or faster on every pad measured, from runs of 64 f32 (a call per 256
    bytes) to 2000-element rows (``docs/backend-cpu.md``, Measurements, pad copies as loops).  A
    conv's padding (``Emitter.pad``'s ``CONV_OPERAND`` copy) keeps the vectorized blocks where its
    runs hold ``SHORT_RUN_VECTORS`` or more: loops need LLVM's loop pipeline, which costs a conv's
    whole kernel compile time for a copy that is a few percent of its run.  A result's copy of a
    computed window (``Emitter.copied``'s ``WINDOW_COPY``) always keeps the vectorized blocks (each
    one ``memrefCopy`` of its rows): as loops it sent a conv's whole kernel through that pipeline
    (``docs/backend-cpu.md``, Measurements: conv padding as a pad, windows of computed results)."""
    shape = static_shape(op.operands[1].type)
    if not shape or 0 in shape:
        return None
    row = shape[-1]
    rows = [1] * (len(shape) - 2) + [largest_divisor_at_most(shape[-2], max(1, COPY_TILE_ELEMENTS // row))
                                      for _ in shape[-2:-1]]
    tiles = ElementwiseTiles(tuple(rows) + (row if len(shape) == 1 else 0,), (0,) * len(shape))
    if all(t in (0, d) for t, d in zip(tiles.parallel, shape)) and _computed(op.operands[0]):
        split = _two_or_more_blocks(shape, unit.lanes(element_bits(op.operands[1].type)))
        if split is None:
            return None
        tiles = ElementwiseTiles(split, (0,) * len(shape))
    if WINDOW_COPY in op.attributes:
        return elementwise_section(tag, "linalg.copy", tiles)
    if CONV_OPERAND in op.attributes and \
            _contiguous_run(op, shape) >= SHORT_RUN_VECTORS * unit.lanes(element_bits(op.operands[1].type)):
        return elementwise_section(tag, "linalg.copy", tiles)
    return match(f"%ew{tag}", "linalg.copy", tag) + tile_forall(f"ep{tag}", f"%ew{tag}", tiles.parallel)


SHORT_RUN_VECTORS = 4
"""A conv operand's copy whose contiguous runs hold fewer vectors than this is loops, not one
``memmove`` a run (``_plan_copy``)."""


def _contiguous_run(op: Any, shape: Sequence[int]) -> int:
    """The elements a copy moves contiguously (``memrefCopy`` moves each such run with one
    ``memmove``), the shortest over its users: into an insert_slice's window, the trailing extents
    the window spans whole in the destination, times the first it does not, with unit steps; for
    any other user, which reads the copy's own dense tensor, the whole copy.  A copy that a pad
    inserts and a 1x1 conv also reads counted as its last extent (32) before and stayed loops,
    which sent a CNN's whole training kernel through LLVM's loop pipeline (``docs/backend-cpu.md``,
    Measurements)."""
    users = [u.owner for u in op.results[0].uses] if len(op.results) else []
    return min((_window_run(u, shape) if u.name == "tensor.insert_slice" and u.operands[0] == op.results[0]
                else product(shape) for u in users), default=product(shape))


def _window_run(insert: Any, shape: Sequence[int]) -> int:
    """The contiguous run of a copy of ``shape`` into the window of ``insert`` (a ``tensor.insert_slice``
    of the copy); the copy's last extent when the window is not static."""
    from mlir import ir
    dest = static_shape(insert.operands[1].type)
    steps = list(ir.DenseI64ArrayAttr(insert.attributes["static_strides"]))
    if dest is None or len(dest) != len(shape):
        return shape[-1]
    run = 1
    for size, whole, step in zip(reversed(shape), reversed(dest), reversed(steps)):
        if step != 1:
            return run
        run *= size
        if size != whole:
            return run
    return run


def _two_or_more_blocks(shape: Sequence[int], lanes: int) -> tuple[int, ...] | None:
    """Forall tiles that cut a copy of ``shape`` into at least two blocks of at least ``lanes``
    elements (the first axis longer than 1 by its largest divisor up to half of it), or None (a copy
    so small, or of a prime count of single elements, stays loops)."""
    axis = next((i for i, d in enumerate(shape) if d > 1), None)
    if axis is None:
        return None
    cut = largest_divisor_at_most(shape[axis], shape[axis] // 2)
    if cut * product(shape[axis + 1:]) < lanes:
        return None
    return tuple(1 for _ in shape[:axis]) + (cut,) + tuple(0 for _ in shape[axis + 1:])


def _computed(x: Any) -> bool:
    """Whether an op computes ``x`` (not a function argument or a constant): a copy of it in one
    block must get more blocks or stay loops, or the transform script may abort.

    Tiled as one block, the copy's forall has one iteration, which canonicalization inlines, and its
    vector read and write fold away: the pad's ``insert_slice`` then takes the copy's source, or
    what that folds to (a one-tile transpose of a 1x1 slice folds to the slice).  When that is a
    ``tensor.extract_slice`` at offset 0 with unit steps of the ``vector.transfer_write`` of an op
    vectorized as one tile, MLIR's ``SwapExtractSliceOfTransferWrite`` rewrites
    ``insert_slice(extract_slice(write))`` into a write of the whole vector into the slice of the
    destination, out of bounds (a vector of 5 into a tensor of 1), and ``split_transfer_full_partial``
    casts the out-of-bounds transfer's tensor to a ``MemRefType`` (an assertion: the process aborts).
    What the source folds to is its producers' plans, and their other uses may fold away too, so
    every computed value counts: such a copy gets two or more blocks (``_two_or_more_blocks``: the
    forall stays, and the pad inserts its result), else stays loops."""
    from mlir import ir
    return isinstance(x, ir.OpResult) and x.owner.name != "arith.constant"


def planners(unit: VectorUnit = AVX512, threads: int = 1) -> dict[str, Any]:
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
            "linalg.fill": partial(_plan_fill, unit, threads), "linalg.generic": partial(_plan_generic, unit, threads),
            "linalg.copy": partial(_plan_copy, unit),
            CONV_OP: partial(plan_conv, unit)}


def schedule(module: Any, min_work: int = MIN_SCHEDULE_WORK, skip: Any = None,
             unit: VectorUnit = AVX512, threads: int = 1, grouped: bool = True) -> str | None:
    """The CPU's schedule of ``module``: ``linalg.schedule.schedule_module`` with ``planners(unit)``,
    the reductions fused with their broadcasting consumers (``fusion_groups``; not with
    ``grouped=False``, the lowering's second try when MLIR rejects a group's script) and
    ``VECTOR_LOWERING`` (``min_work``: the cost model, 0 for every op that has a plan; ``skip``: ops
    left to someone else, the prebuilt GEMM's; ``unit``: the target's vector registers; ``threads``:
    the kernel's)."""
    def plannable(op: Any) -> bool:
        return _plan_generic(unit, threads, op, 0) is not None
    if not grouped:
        return schedule_module(module, planners(unit, threads), VECTOR_LOWERING, min_work, skip)
    unblock_sums(module, unit, plannable, skip, min_work)  # the groups' blocked sums, before the walk
    groups = partial(plan_groups, unit, plannable, partial(_inner_tiles, unit, threads))
    return schedule_module(module, planners(unit, threads), VECTOR_LOWERING, min_work, skip, groups)
