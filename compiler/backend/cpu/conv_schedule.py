"""Transform-dialect schedule of ``linalg.conv_2d_nhwc_hwcf`` (NHWC input, HWCF filter) for AVX-512.

The recipe (the one IREE uses for CPU convolutions, measured here at the speed of PyTorch's oneDNN
kernel on the 3x3x64x64 benchmark):

1. ``tile_using_forall`` on the output dims ``[N, OH, OW, F] -> [1, 1, ow, f]``: one register block
   of ``ow`` output pixels x ``f`` channels per parallel iteration (the threads split N x OH x ...).
   The ``linalg.fill`` that initializes the accumulator is fused into that loop, so the zeros never
   touch memory.
2. ``tile_using_for`` on the reduction dims ``[KH, KW, C] -> [1, 1, c]``: the filter window is walked
   one tap at a time, ``c`` input channels per step.
3. ``decompose``: a conv_2d whose KH tile and OH tile are 1 becomes ``linalg.conv_1d_nwc_wcf``, which
   the linalg vectorizer turns into a ``vector.contract`` ``[ow x c] * [c x f] -> [ow x f]``.
4. ``vectorize``; the shared vector lowering of ``transforms`` then hoists the accumulator out of the
   reduction loops (``hoist_loop_invariant_subsets``) and lowers the contraction to outer products:
   each step is ``ow`` broadcasts of input values, ``f / lanes`` filter loads and ``ow * f / lanes``
   FMAs on accumulators that stay in zmm registers.

Two neighbours are scheduled with the conv when ``emit`` produced them for it:

* an elementwise epilogue that is the conv's only user (``relu(conv2d(x, w) + b)``): the forall tiles
  the epilogue instead, the conv (and its fill) are fused into it, and the epilogue tile is
  vectorized on the accumulator (the conv result never makes a round trip through memory);
* the padding / input-dilation copy (zeros, then ``x`` written into its window by a generic with an
  offset output map): with a batch > 1 it is split over the images (``scf.forall``).

Tile sizes divide the static shapes (a partial tile would have dynamic shapes and stay scalar).  The
register block holds at most 24 accumulator vectors (32 zmm registers minus the filter row and a
broadcast).  Every other case (dynamic shapes, other element types) returns None: the conv then
becomes scalar loops, as before.

MLIR is imported inside functions only; ``choose_conv_tiles`` and ``conv_section`` are pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .transforms import SCHED_ATTR, largest_divisor_at_most

__all__ = ["ConvTiles", "choose_conv_tiles", "conv_section", "plan_conv", "CONV_OP"]

CONV_OP = "linalg.conv_2d_nhwc_hwcf"

_ACC_REGS = 24   # accumulator vectors of one register block (of 32 zmm registers)
_MAX_OW = 12     # output pixels per register block
_MAX_F_VECS = 4  # filter-row vectors per register block


@dataclass(frozen=True)
class ConvTiles:
    """Register block ``ow x f`` of the output (N and OH tiles are 1) and the channel step ``c``."""

    ow: int
    f: int
    c: int


def choose_conv_tiles(n: int, oh: int, ow: int, f: int, kh: int, kw: int, c: int,
                      elem_bits: int = 32) -> ConvTiles | None:
    """Tiles for an ``[n, oh, ow, f]`` output reduced over ``[kh, kw, c]``; None if nothing to do.

    The register block ``ow x f`` (tiles dividing OW and F, ``f`` a multiple of the vector width when
    F has one, at most 4 vectors and 12 pixels) with the most accumulator vectors within the budget;
    ties go to fewer loads per FMA (``(ow + vectors) / (ow * vectors)``), then to the wider ``f``.
    ``c`` is 1: one outer product per step, as in the matmul recipe (the input values are broadcast
    from memory).
    """
    if min(n, oh, ow, f, kh, kw, c) < 1:
        return None
    lanes = max(1, 512 // max(8, elem_bits))
    if f % lanes == 0:
        fts = [lanes * v for v in range(1, _MAX_F_VECS + 1) if (f // lanes) % v == 0]
    else:
        fts = [largest_divisor_at_most(f, _MAX_F_VECS * lanes)]
    best: tuple[tuple[int, float, int], ConvTiles] | None = None
    for ft in fts:
        vecs = -(-ft // lanes)
        owt = largest_divisor_at_most(ow, max(1, min(_MAX_OW, _ACC_REGS // vecs)))
        acc = owt * vecs
        score = (acc, -(owt + vecs) / acc, ft)
        if best is None or score > best[0]:
            best = (score, ConvTiles(owt, ft, 1))
    assert best is not None
    return best[1]


def _sizes(ts: list[int]) -> str:
    return "[" + ", ".join(str(t) for t in ts) + "]"


def conv_section(tag: int, t: ConvTiles, fuse_fill: bool = True, pad_hops: int = 0,
                 fuse_epilogue: bool = False) -> str:
    """The transform-script section scheduling the conv tagged ``tag`` (see the module docstring).

    ``fuse_epilogue``: the conv's only user is an elementwise generic (bias, relu, ...); that one is
    tiled by the forall instead, the conv fused into it, and it is vectorized here, next to the
    accumulator, so the conv result never goes through memory twice.

    ``pad_hops`` (1 or 2): the input is the padding generic of ``emit`` (directly, or through one
    extract_slice); its images are then copied in parallel (``scf.forall`` over N only: the window's
    offsets make the tiles of other dims overlap, which ``parallel_insert_slice`` does not allow).
    """
    a = "!transform.any_op"
    cv, fl, cp, cpf, ff, ffl, cr, crl, cd = (f"%cv{tag}", f"%cfl{tag}", f"%cp{tag}", f"%cpf{tag}", f"%cff{tag}",
                                             f"%cffl{tag}", f"%cr{tag}", f"%crl{tag}", f"%cd{tag}")
    s = (f"    {cv} = transform.structured.match ops{{[\"{CONV_OP}\"]}} attributes {{{SCHED_ATTR} = {tag} : i64}}"
         f" in %root : ({a}) -> {a}\n")
    if fuse_fill:
        s += f"    {fl} = transform.get_producer_of_operand {cv}[2] : ({a}) -> {a}\n"
    src = cv
    for hop in range(pad_hops):
        s += f"    %cpad{tag}_{hop} = transform.get_producer_of_operand {src}[0] : ({a}) -> {a}\n"
        src = f"%cpad{tag}_{hop}"
    if fuse_epilogue:
        s += f"    %ce{tag} = transform.get_consumers_of_result {cv}[0] : ({a}) -> {a}\n"
        s += (f"    %cet{tag}, {cpf} = transform.structured.tile_using_forall %ce{tag} tile_sizes "
              f"{_sizes([1, 1, t.ow, t.f])} : ({a}) -> ({a}, {a})\n")
        s += (f"    {cp}, %cpl{tag} = transform.structured.fuse_into_containing_op {cv} into {cpf}"
              f" : ({a}, {a}) -> ({a}, {a})\n")
    else:
        s += (f"    {cp}, {cpf} = transform.structured.tile_using_forall {cv} tile_sizes {_sizes([1, 1, t.ow, t.f])}"
              f" : ({a}) -> ({a}, {a})\n")
    if fuse_fill:
        s += (f"    {ff}, {ffl} = transform.structured.fuse_into_containing_op {fl} into {cpf}"
              f" : ({a}, {a}) -> ({a}, {a})\n")
    s += (f"    {cr}, {crl}:3 = transform.structured.tile_using_for {cp} tile_sizes {_sizes([0, 0, 0, 0, 1, 1, t.c])}"
          f" : ({a}) -> ({a}, {a}, {a}, {a})\n")
    s += f"    {cd} = transform.structured.decompose {cr} : ({a}) -> {a}\n"
    if pad_hops:
        s += (f"    %cpt{tag}, %cptf{tag} = transform.structured.tile_using_forall {src} tile_sizes [1]"
              f" : ({a}) -> ({a}, {a})\n")
    s += f"    transform.structured.vectorize {cd} : {a}\n"
    if fuse_fill:
        s += f"    transform.structured.vectorize {ff} : {a}\n"
    if fuse_epilogue:
        s += f"    transform.structured.vectorize %cet{tag} : {a}\n"
    return s


# ---------------------------------------------------------------- payload inspection (needs MLIR)

def _static_shape(t: Any) -> list[int] | None:
    from mlir import ir
    if not isinstance(t, ir.ShapedType):
        return None
    if not t.has_static_shape:
        return None
    return [int(s) for s in t.shape]


def _ints(attr: Any) -> list[int]:
    from mlir import ir
    return [int(v) for v in ir.DenseIntElementsAttr(attr)]


def plan_conv(op: Any, tag: int) -> str | None:
    """Section for one ``linalg.conv_2d_nhwc_hwcf`` payload op tagged ``tag``, or None (loops)."""
    from mlir import ir
    if op.name != CONV_OP or len(list(op.operands)) != 3 or len(op.results) != 1:
        return None
    xs, ws, os_ = (_static_shape(v.type) for v in op.operands)
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
    t = choose_conv_tiles(n, oh, ow, f, kh, kw, c, bits)
    if t is None:
        return None
    init = op.operands[2]
    fuse_fill = isinstance(init, ir.OpResult) and init.owner.name == "linalg.fill"
    # (one image: nothing to split, and a one-iteration forall folds into an extract/insert_slice
    # pair on the zeros, whose later untying by transforms.untie_shared_inits needs a memref.copy)
    return conv_section(tag, t, fuse_fill, _pad_hops(op) if n > 1 else 0, fuse_fill and _fusable_epilogue(op))


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
    if _static_shape(g.results[0].type) != _static_shape(op.results[0].type):
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
        if _static_shape(v.type) is None and isinstance(v.type, ir.ShapedType):
            return False
        if i != uses[0].operand_number and isinstance(v, ir.OpResult) and v.owner.name == CONV_OP:
            return False  # conv + conv: each section would fuse into the same generic
    block = g.regions[0].blocks[0]
    if len(list(block.arguments[len(block.arguments) - 1].uses)):
        return False
    return not any(b.operation.name in _EPILOGUE_BODY_OPS for b in block.operations)


def _pad_hops(op: Any) -> int:
    """1 or 2 if the conv input is ``emit``'s padding generic (through at most one extract_slice)."""
    from mlir import ir
    v = op.operands[0]
    for hops in (1, 2):
        if not isinstance(v, ir.OpResult):
            return 0
        owner = v.owner
        if owner.name == "tensor.extract_slice" and hops == 1:
            v = owner.operands[0]
            continue
        if owner.name != "linalg.generic" or len(owner.results) != 1 or len(list(v.uses)) != 1:
            return 0
        if any("parallel" not in str(k) for k in owner.attributes["iterator_types"]):
            return 0
        init = owner.operands[len(owner.operands) - 1]
        if not isinstance(init, ir.OpResult) or init.owner.name != "linalg.fill":
            return 0
        if any(_static_shape(o.type) is None for o in owner.operands) or len(owner.attributes["iterator_types"]) != 4:
            return 0
        return hops
    return 0
