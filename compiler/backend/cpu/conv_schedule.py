"""Transform-dialect schedule of ``linalg.conv_2d_nhwc_hwcf`` (NHWC input, HWCF filter), its register
block sized for the target's ``vector_unit`` (the cost model's constants were fitted on AVX-512).

The recipe (the one IREE uses for CPU convolutions):

1. ``tile_using_forall`` on the output dims ``[N, OH, OW, F] -> [1, 1, ow, f]``: one register block
   of ``ow`` output pixels x ``f`` channels per parallel iteration (the threads split N x OH x ...).
   The ``linalg.fill`` that initializes the accumulator is fused into that loop, so the zeros never
   touch memory.
2. ``tile_using_for`` on the reduction dims ``[KH, KW, C] -> [1, 1, c]``: the filter window is walked
   one tap at a time, ``c`` input channels per step.
3. ``decompose``: a conv_2d whose KH tile and OH tile are 1 becomes ``linalg.conv_1d_nwc_wcf``, which
   the linalg vectorizer turns into a ``vector.contract`` ``[ow x c] * [c x f] -> [ow x f]``.
4. ``vectorize``; the vector lowering of ``transforms`` then hoists the accumulator out of the
   reduction loops (``hoist_loop_invariant_subsets``) and lowers the contraction to outer products:
   each step is ``ow`` broadcasts of input values, ``f / lanes`` filter loads and ``ow * f / lanes``
   FMAs on accumulators that stay in zmm registers.

An elementwise epilogue that is the conv's only user (``relu(conv2d(x, w) + b)``) is scheduled with
the conv: the forall tiles the epilogue instead, the conv (and its fill) are fused into it, and the
epilogue tile is vectorized on the accumulator (the conv result never makes a round trip through
memory).  The fill's tile is then a temporary of its own, which bufferization would make a
``malloc``, 24 zero stores and a ``free`` per register block: the section hoists the accumulator
itself and drops the transfers' leading unit dims so that the zeros fold into it
(``_fold_fill_section``).  The padding / input-dilation copy in front of a conv is a pad of its own
(``lowerings._zero_padded``), planned as every pad is.

Register block (``choose_conv_tiles``): tile sizes divide the static shapes (a partial tile would have
dynamic shapes and stay scalar); at most three quarters of the registers as accumulators (24 zmm),
and those with the filter row and a broadcast within the registers; a row of 1, 2 or 4 whole
vectors, or one narrow vector when F is not a lane multiple (other row lengths are scalarized by
LLVM), of one image or of the same pixels of several; among those, the block of least estimated
cycles per FMA (``block_cost``: FMA throughput, FMA latency, loads, filter stream from L2 or L3),
then the most accumulators, then the fewest images.  A block reading ``f`` of ``F`` columns of a
filter that does not fit L2 may read a packed copy of its slice instead (``packed_cost``,
``ConvTiles.pack_rows``): each parallel iteration then covers several output rows of one slice and
copies the slice into a dense buffer first (``_packed_section``).  Every other case (dynamic shapes, other
element types) returns None: the conv then becomes scalar loops.  Without an epilogue the fill
writes the output tile itself (no buffer) and its zero stores are kept: they touch the output lines
early.  ``docs/backend-cpu.md``,
Measurements, has the timings of the blocks, the cost model's fit and the comparison with PyTorch.

MLIR is imported inside functions only; ``choose_conv_tiles`` and ``conv_section`` are pure.
"""

from __future__ import annotations

from typing import Any

from mind.spec.record import FrozenRecord

from ..linalg.mlir_text import zero
from ..linalg.payload import static_shape
from ..linalg.transform_script import SCHED_ATTR, largest_divisor_at_most, sizes
from .vector_unit import AVX512, VectorUnit

_set = object.__setattr__  # FrozenRecord fields are set once, in __init__

__all__ = ["ConvTiles", "block_cost", "packed_cost", "pack_rows", "PACK_MIN_ITERATIONS",
           "block_pixels", "most_pixels", "choose_conv_tiles", "direct_estimate", "conv_section", "plan_conv",
           "feeds_conv", "CONV_OP"]

CONV_OP = "linalg.conv_2d_nhwc_hwcf"

_F_VECS = (1, 2, 4)  # filter-row vectors per register block: power-of-two vector lengths only
# cycles x pixels per FMA of streaming the filter from L2 (each filter vector serves ``ow`` FMAs;
# the filter of a block is kh x kw x C x f, larger than L1 on the shapes that matter): rows of F
# read whole (f == F) or strided (f < F: a part of each row, which the prefetchers serve worse).
# Fitted on 1-thread timings of the blocks of F = 64 and F = 128 (docs/backend-cpu.md, Measurements).
_STREAM_WHOLE_ROWS = 1.5
_STREAM_STRIDED_ROWS = 3.5
# the same from L3, when the filter does not fit L2 (a filter gradient's "filter" is the output
# gradient, megabytes; 512 x 512 channels of a 1x1 conv on AVX2): fitted on 1-thread timings of
# filter-gradient convs.  The whole filter, not the slice of f of its F columns a block reads: the
# slice's rows lie F elements apart, and rows a power-of-two stride apart fall into a cache's sets
# as the whole filter does (a 1x1 conv of 512 channels, f = 8 of F = 512 on AVX2: 8x14x14 images
# 5.6-6.4 ms by blocks, 4.0 by the GEMM).
_STREAM_FROM_L3 = 5.0
# the same for a slice of f < F columns read in place from L3: its rows lie a power-of-two stride
# apart and miss in L2 as well (the sets again), fitted on 2-thread timings on an Intel Xeon
# (AVX-512, 2 MiB L2): 3x3 convs of 256 and 512 channels, blocks of 7-16 pixels at 1.5-2.2 cycles
# per FMA, 16-27 per pixel.  Such a block packs its slice instead (``packed_cost``).
_STREAM_STRIDED_FROM_L3 = 20.0
_FITTED_VECTOR_BYTES = 64  # the vectors the stream constants were fitted with (zmm)
PACK_MIN_ITERATIONS = 16
"""The parallel iterations a packed conv keeps at least, where its shapes allow (``pack_rows``):
each packs its own slice, so fewer and larger iterations pack less, but the threads need some to
share."""


class ConvTiles(FrozenRecord):
    """Register block ``n x ow x f`` of the output (the OH tile is 1) and the channel step ``c``;
    ``pack_rows``: 0 when the blocks read the filter where it lies, else the output rows (of the
    block's ``n`` images, all of OW) of one parallel iteration, which first packs its ``f``-column
    slice of the filter into a dense buffer (``packed_cost``)."""

    __slots__ = ("ow", "f", "c", "n", "pack_rows")

    ow: int
    f: int
    c: int
    n: int
    pack_rows: int

    def __init__(self, ow: int, f: int, c: int, n: int = 1, pack_rows: int = 0) -> None:
        _set(self, "ow", ow)
        _set(self, "f", f)
        _set(self, "c", c)
        _set(self, "n", n)
        _set(self, "pack_rows", pack_rows)


def block_cost(ow: int, vecs: int, strided: bool, from_l3: bool = False, vector_bytes: int = 64) -> float:
    """Estimated cycles per FMA of an ``ow`` pixels x ``vecs`` vectors register block (2 FMA pipes of
    4 cycles latency, 2 loads per cycle): the most of the FMA throughput (0.5), the latency (fewer
    than 8 accumulators leave the pipes waiting: 2 / acc), the loads (``ow`` broadcasts and ``vecs``
    filter vectors per step: (ow + vecs) / (2 acc)) and the filter stream from L2, or from L3 when
    the filter does not fit L2 (k / ow, ``k`` larger when the block reads its filter rows
    strided or from L3, see ``_STREAM_*``).  ``ow`` counts the block's pixels of all its images.
    The stream is bytes per FMA: its constants were fitted with 64-byte vectors (AVX-512), and a
    filter vector of ``vector_bytes`` carries that share of their bytes (an AVX2 vector half)."""
    acc = ow * vecs
    k = ((_STREAM_STRIDED_FROM_L3 if strided else _STREAM_FROM_L3) if from_l3
         else _STREAM_STRIDED_ROWS if strided else _STREAM_WHOLE_ROWS)
    return max(0.5, 2.0 / acc, (ow + vecs) / (2.0 * acc), k * vector_bytes / _FITTED_VECTOR_BYTES / ow)


def pack_rows(n: int, oh: int, f: int, t_n: int, t_f: int) -> int:
    """The output rows of one parallel iteration of a packed conv (``ConvTiles.pack_rows``): the most
    (a divisor of ``oh``) that still leave ``PACK_MIN_ITERATIONS`` iterations over the images' blocks
    of ``t_n``, the rows and the filter's ``f / t_f`` slices, else one."""
    slabs = (n // t_n) * (f // t_f)
    for rows in range(oh, 0, -1):
        if oh % rows == 0 and slabs * (oh // rows) >= PACK_MIN_ITERATIONS:
            return rows
    return 1


def packed_cost(pixels: int, vecs: int, lanes: int, iteration_pixels: int, slice_bytes: int,
                unit: VectorUnit) -> float:
    """Estimated cycles per FMA of a register block reading a packed filter slice: the slice is
    dense, so the block streams whole rows (from L3 only if the slice itself does not fit L2), plus
    the packing (``unit.pack_cycles_per_element`` per element) spread over the FMAs of the iteration's
    ``iteration_pixels``, ``iteration_pixels / lanes`` vector FMAs per element.  Why pack: a slice of
    ``f`` of ``F`` columns read in place is rows a power-of-two stride apart, which fall into a few
    of the cache's sets and miss as if the whole filter streamed from L3 (``_STREAM_STRIDED_FROM_L3``)."""
    return (block_cost(pixels, vecs, False, slice_bytes > unit.l2_bytes, unit.bits // 8)
            + unit.pack_cycles_per_element * lanes / iteration_pixels)


def block_pixels(unit: VectorUnit) -> int:
    """The most accumulator vectors of a register block: three quarters of ``unit``'s registers (the
    rest hold the filter row and a broadcast), so up to that many pixels of a one-vector row."""
    return unit.registers * 3 // 4


def most_pixels(unit: VectorUnit, vecs: int) -> int:
    """The most pixels of a block of ``vecs``-vector rows: ``block_pixels`` accumulators, and with
    the filter row and a broadcast beside them no more than ``unit``'s registers.  Why the second
    bound: AVX2's 12 accumulators as 3 pixels x 4 vectors need 17 of its 16 registers, and the
    spilled block ran 5x slower than 2 x 4 (``docs/backend-cpu.md``, Measurements)."""
    return min(block_pixels(unit), unit.registers - vecs - 1) // vecs


def choose_conv_tiles(n: int, oh: int, ow: int, f: int, kh: int, kw: int, c: int,
                      elem_bits: int = 32, unit: VectorUnit = AVX512) -> ConvTiles | None:
    """Tiles for an ``[n, oh, ow, f]`` output reduced over ``[kh, kw, c]``; None if nothing to do
    (see ``_best_block``)."""
    best = _best_block(n, oh, ow, f, kh, kw, c, elem_bits, unit)
    return None if best is None else best[1]


def direct_estimate(n: int, oh: int, ow: int, f: int, kh: int, kw: int, c: int,
                    elem_bits: int = 32, unit: VectorUnit = AVX512) -> tuple[float, int]:
    """(estimated cycles per FMA, accumulator vectors) of the direct schedule's best block
    (``block_cost``; (inf, 0) if none): what ``conv_gemm`` weighs against the GEMM's register tile."""
    best = _best_block(n, oh, ow, f, kh, kw, c, elem_bits, unit)
    if best is None:
        return float("inf"), 0
    t = best[1]
    return -best[0][0], t.n * t.ow * -(-t.f // unit.lanes(elem_bits))


def _best_block(n: int, oh: int, ow: int, f: int, kh: int, kw: int, c: int, elem_bits: int,
                unit: VectorUnit) -> tuple[tuple[float, int, int, int], ConvTiles] | None:
    """(score, tiles) of the best register block for an ``[n, oh, ow, f]`` output reduced over
    ``[kh, kw, c]``; None if nothing to do.

    Candidates: ``f`` of 1, 2 or 4 whole vectors when F is a multiple of the vector width, else the
    largest divisor of F that fits one vector (a narrow register).  A row of 3 or 5 vectors, or one
    wider than a vector but not a multiple of it (F = 48, 80, 20, 24 as one row), is a vector length
    LLVM's AVX-512 lowering scalarizes (inserts and shuffles around every FMA), an order of magnitude
    slower.  ``ow``: any divisor of OW within the accumulator budget (``most_pixels``: three
    quarters of ``unit``'s registers, 24 of AVX-512's 32, 12 of AVX2's 16, with the filter row and a
    broadcast beside them: 2 x 4 vectors on AVX2, not 3 x 4).  The block of least ``block_cost``
    wins; ties go to more accumulators, then to fewer images (below), then to the wider ``f``.
    ``c`` is 1: one outer product per step, as in the matmul schedule (the input values are broadcast
    from memory; more channels per step measured no faster).
    ``n``: the block may take the same ``ow`` pixels of ``n`` images (a divisor of N), each filter
    vector then serving ``n * ow`` FMAs: what a row whose divisors leave too few pixels per block
    needs (27 = 3 x 9 on AVX2: 9 x 1 vector, 10 loads per 9 FMAs, or 3 x 2, 3 pixels per filter
    vector; 2 images x 3 x 2 is 12 accumulators: 104-126 -> 188 GFLOP/s), and a short row of a
    filter that streams from L3 (a filter gradient's output, 3 x 3 pixels, whose "filter" is the
    output gradient).  At equal cost and accumulators one image wins: its pixels are one stretch of
    the input rows.  At equal cost more accumulators win even across images: the suite's stride-2
    conv of 27-pixel rows, 3 pixels of 4 images x 2 zmm against 9 x 2 of one image, 4.27 -> 3.91 ms.
    """
    if min(n, oh, ow, f, kh, kw, c) < 1:
        return None
    lanes = unit.lanes(elem_bits)
    if f % lanes == 0:
        fts = [lanes * v for v in _F_VECS if (f // lanes) % v == 0]
    else:
        fts = [largest_divisor_at_most(f, lanes)]
    best: tuple[tuple[float, int, int, int], ConvTiles] | None = None
    for ft in fts:
        vecs = -(-ft // lanes)
        cap = most_pixels(unit, vecs)
        from_l3 = kh * kw * c * f * elem_bits // 8 > unit.l2_bytes
        for owt in range(1, min(ow, cap) + 1):
            if ow % owt:
                continue
            for nt in range(1, min(n, cap // owt) + 1):
                if n % nt:
                    continue
                tiles = [(block_cost(nt * owt, vecs, ft < f, from_l3, unit.bits // 8), 0)]
                if ft < f and from_l3:
                    rows = pack_rows(n, oh, f, nt, ft)
                    tiles.append((packed_cost(nt * owt, vecs, lanes, nt * rows * ow,
                                              kh * kw * c * ft * elem_bits // 8, unit), rows))
                for cost, rows in tiles:
                    score = (-round(cost, 9), nt * owt * vecs, -nt, ft, -rows)
                    if best is None or score > best[0]:
                        best = (score, ConvTiles(owt, ft, 1, nt, rows))
    assert best is not None
    return best


def conv_section(tag: int, t: ConvTiles, fuse_fill: bool = True, fuse_epilogue: bool = False,
                 pad_value: str = "0.0 : f32") -> str:
    """The transform-script section scheduling the conv tagged ``tag`` (see the module docstring).

    ``fuse_epilogue``: the conv's only user is an elementwise generic (bias, relu, ...); that one is
    tiled by the forall instead, the conv fused into it, and it is vectorized here, next to the
    accumulator, so the conv result never goes through memory twice; the fused fill's zeros are then
    folded into the accumulator (``_fold_fill_section``: no per-tile buffer).  A packed block
    (``t.pack_rows``) has a section of its own (``_packed_section``; ``pad_value``: the element
    type's zero, the padding value of its packing).
    """
    if t.pack_rows:
        return _packed_section(tag, t, fuse_fill, pad_value)
    a = "!transform.any_op"
    cv, fl, cp, cpf, ff, ffl = (f"%cv{tag}", f"%cfl{tag}", f"%cp{tag}", f"%cpf{tag}", f"%cff{tag}", f"%cffl{tag}")
    s = _match_section(tag, fuse_fill)
    if fuse_epilogue:
        s += f"    %ce{tag} = transform.get_consumers_of_result {cv}[0] : ({a}) -> {a}\n"
        s += (f"    %cet{tag}, {cpf} = transform.structured.tile_using_forall %ce{tag} tile_sizes "
              f"{sizes([t.n, 1, t.ow, t.f])} : ({a}) -> ({a}, {a})\n")
        s += (f"    {cp}, %cpl{tag} = transform.structured.fuse_into_containing_op {cv} into {cpf}"
              f" : ({a}, {a}) -> ({a}, {a})\n")
    else:
        s += (f"    {cp}, {cpf} = transform.structured.tile_using_forall {cv} tile_sizes {sizes([t.n, 1, t.ow, t.f])}"
              f" : ({a}) -> ({a}, {a})\n")
    if fuse_fill:
        s += (f"    {ff}, {ffl} = transform.structured.fuse_into_containing_op {fl} into {cpf}"
              f" : ({a}, {a}) -> ({a}, {a})\n")
    s += _block_section(tag, cp, t.c)
    if fuse_fill:
        s += f"    transform.structured.vectorize {ff} : {a}\n"
    if fuse_epilogue:
        s += f"    transform.structured.vectorize %cet{tag} : {a}\n"
    if fuse_fill and fuse_epilogue:
        s += _fold_fill_section(tag, cpf)
    return s


def _match_section(tag: int, fuse_fill: bool) -> str:
    """The handles ``%cv<tag>`` of the conv tagged ``tag`` and, with ``fuse_fill``, ``%cfl<tag>`` of
    the fill of its init."""
    a = "!transform.any_op"
    s = (f"    %cv{tag} = transform.structured.match ops{{[\"{CONV_OP}\"]}} attributes {{{SCHED_ATTR} = {tag} : i64}}"
         f" in %root : ({a}) -> {a}\n")
    if fuse_fill:
        s += f"    %cfl{tag} = transform.get_producer_of_operand %cv{tag}[2] : ({a}) -> {a}\n"
    return s


def _block_section(tag: int, block: str, c: int) -> str:
    """One register block's conv (the handle ``block``): the filter window walked one tap and ``c``
    channels at a time, decomposed to a 1-D conv and vectorized into outer products."""
    a = "!transform.any_op"
    return (f"    %cr{tag}, %crl{tag}:3 = transform.structured.tile_using_for {block} tile_sizes "
            f"{sizes([0, 0, 0, 0, 1, 1, c])} : ({a}) -> ({a}, {a}, {a}, {a})\n"
            f"    %cd{tag} = transform.structured.decompose %cr{tag} : ({a}) -> {a}\n"
            f"    transform.structured.vectorize %cd{tag} : {a}\n")


def _packed_section(tag: int, t: ConvTiles, fuse_fill: bool, pad_value: str) -> str:
    """The section of a conv whose blocks read a packed filter slice: a parallel iteration per
    ``t.n`` images x ``t.pack_rows`` output rows x ``t.f`` channels, whose filter slice
    ``[KH, KW, C, f]`` is copied into a dense buffer (a ``transform.structured.pad`` of no padding,
    kept by ``nofold``: what bufferizes to an allocation and a copy), then the register blocks of
    those rows (``transform.structured.fuse``, which brings the fill along), each as in
    ``conv_section``.  An elementwise epilogue is left to its own section: the output makes one round
    trip through memory, small beside a conv whose filter needs packing."""
    a = "!transform.any_op"
    s = _match_section(tag, fuse_fill)
    s += (f"    %cp{tag}, %cpf{tag} = transform.structured.tile_using_forall %cv{tag} tile_sizes "
          f"{sizes([t.n, t.pack_rows, 0, t.f])} : ({a}) -> ({a}, {a})\n")
    if fuse_fill:
        s += (f"    %cff{tag}, %cffl{tag} = transform.structured.fuse_into_containing_op %cfl{tag} into %cpf{tag}"
              f" : ({a}, {a}) -> ({a}, {a})\n")
    s += (f"    %cq{tag}, %cqp{tag}, %cqc{tag} = transform.structured.pad %cp{tag} {{padding_values = "
          f"[{pad_value}, {pad_value}, {pad_value}], padding_dimensions = [3], nofold_flags = [0, 1, 0], "
          f"copy_back_op = \"none\"}} : ({a}) -> ({a}, {a}, {a})\n")
    s += (f"    %ci{tag}, %cil{tag}:3 = transform.structured.fuse %cq{tag} tile_sizes {sizes([t.n, 1, t.ow, 0])}"
          f" : ({a}) -> ({a}, {a}, {a}, {a})\n")
    s += _block_section(tag, f"%ci{tag}", t.c)
    if fuse_fill:
        s += f"    %cfm{tag} = transform.structured.match ops{{[\"linalg.fill\"]}} in %cpf{tag} : ({a}) -> {a}\n"
        s += f"    transform.structured.vectorize %cfm{tag} : {a}\n"
    return s


def _fold_fill_section(tag: int, forall: str) -> str:
    """Fold the fused fill's zeros into the accumulator of the forall ``forall`` (fused epilogue).

    With the epilogue fused, the fill's init is a temporary of its own (the forall writes the
    epilogue's result).  The vectorized fill writes a ``1 x 1 x ow x f`` zero vector into its tile and
    the conv reads it back as ``1 x ow x f`` (rank-reduced by ``decompose``), so the read does not
    fold into the write and the tile stays a buffer: a ``malloc``, ``ow * f / lanes`` zero stores and
    a ``free`` per register block.  Hoisting the accumulator out of the reduction loops here (what the
    vector lowering does
    later), then dropping the leading unit dims of the transfers, makes the read and the write the
    same shape: the read folds to the zero constant and the write and its buffer die.
    """
    a = "!transform.any_op"
    loops = f"%cfo{tag}"
    return (f"    transform.apply_patterns to {forall} {{\n"
            f"      transform.apply_patterns.canonicalization\n"
            f"      transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers\n"
            f"    }} : {a}\n"
            f"    transform.apply_cse to {forall} : {a}\n"
            f"    {loops} = transform.structured.match ops{{[\"scf.for\"]}} in {forall} : ({a}) -> {a}\n"
            f"    transform.apply_licm to {loops} : {a}\n"
            f"    transform.loop.hoist_loop_invariant_subsets {loops} : {a}\n"
            f"    transform.apply_patterns to {forall} {{\n"
            f"      transform.apply_patterns.vector.cast_away_vector_leading_one_dim\n"
            f"      transform.apply_patterns.canonicalization\n"
            f"    }} : {a}\n")


# ---------------------------------------------------------------- payload inspection (needs MLIR)

def _ints(attr: Any) -> list[int]:
    from mlir import ir
    return [int(v) for v in ir.DenseIntElementsAttr(attr)]


def plan_conv(unit: VectorUnit, op: Any, tag: int) -> str | None:
    """Section for one ``linalg.conv_2d_nhwc_hwcf`` payload op tagged ``tag``, or None (loops)."""
    from mlir import ir
    if op.name != CONV_OP or len(list(op.operands)) != 3 or len(op.results) != 1:
        return None
    xs, ws, os_ = (static_shape(v.type) for v in op.operands)
    if xs is None or ws is None or os_ is None or len(xs) != 4 or len(ws) != 4 or len(os_) != 4:
        return None
    if 0 in xs or 0 in ws or 0 in os_:
        return None
    for key in ("strides", "dilations"):
        if key in op.attributes:
            vals = _ints(op.attributes[key])
            if len(vals) != 2 or min(vals) < 1:
                return None
    elems = {str(ir.ShapedType(v.type).element_type) for v in op.operands}
    if len(elems) != 1:
        return None
    elem = elems.pop()
    bits = {"f32": 32, "f64": 64, "i32": 32, "i64": 64}.get(elem)
    if bits is None:
        return None
    n, oh, ow, f = os_
    kh, kw, c, f2 = ws
    if f2 != f or xs[0] != n or xs[3] != c:
        return None
    t = choose_conv_tiles(n, oh, ow, f, kh, kw, c, bits, unit)
    if t is None:
        return None
    init = op.operands[2]
    fuse_fill = isinstance(init, ir.OpResult) and init.owner.name == "linalg.fill"
    return conv_section(tag, t, fuse_fill, fuse_fill and not t.pack_rows and _fusable_epilogue(op),
                        f"{zero(elem)} : {elem}")


def feeds_conv(op: Any) -> bool:
    """Whether a fill initializes a conv (whose section then fuses the fill itself)."""
    return any(use.owner.name == CONV_OP for use in op.results[0].uses)


_EPILOGUE_BODY_OPS = ("tensor.extract", "linalg.index")


def _fusable_epilogue(op: Any) -> bool:
    """Whether the conv's only use is an elementwise generic over its shape that can be vectorized
    in the conv's register tile: parallel loops, identity output, inputs read through identity or
    broadcast maps (``d3``, ``0``), an unread init and no gathers or index computations.

    Such a generic is then scheduled by the conv's section (it is tiled, fused and vectorized there,
    so the section that ``transforms`` plans for it later finds nothing left to match).
    """
    from mlir import ir
    uses = list(op.results[0].uses)
    if len(uses) != 1:
        return False
    g = uses[0].owner
    if g.name != "linalg.generic" or len(g.results) != 1 or uses[0].operand_number >= len(g.operands) - 1:
        return False
    kinds = [str(k) for k in g.attributes["iterator_types"]]
    if len(kinds) != 4 or any("parallel" not in k for k in kinds):
        return False
    if static_shape(g.results[0].type) != static_shape(op.results[0].type):
        return False
    maps = [ir.AffineMapAttr(m).value for m in g.attributes["indexing_maps"]]
    for i, amap in enumerate(maps):
        dims = []
        for e in amap.results:
            if isinstance(e, ir.AffineDimExpr):
                dims.append(e.position)
            elif not (isinstance(e, ir.AffineConstantExpr) and e.value == 0):
                return False
        if dims != sorted(set(dims)):
            return False
        full = dims == [0, 1, 2, 3] and amap.n_dims == 4
        if (i == len(maps) - 1 or i == uses[0].operand_number) and not full:
            return False
    for i, v in enumerate(g.operands):
        if static_shape(v.type) is None and isinstance(v.type, ir.ShapedType):
            return False
        if i != uses[0].operand_number and isinstance(v, ir.OpResult) and v.owner.name == CONV_OP:
            return False  # conv + conv: each section would fuse into the same generic
    block = g.regions[0].blocks[0]
    if len(list(block.arguments[len(block.arguments) - 1].uses)):
        return False
    return not any(b.operation.name in _EPILOGUE_BODY_OPS for b in block.operations)
