"""Convolutions that are matmuls, computed by the prebuilt GEMM (``library_calls``).

Two kinds of ``linalg.conv_2d_nhwc_hwcf`` (the input already padded by the emitter) are one matmul
of the tensors as they lie, row-major:

* a 1x1 filter at stride 1: ``[N*H*W, C] @ [C, F]`` (a pointwise conv, its input gradient), when
  the cost model says so (``gemm_of_shapes``);
* a filter as large as the input, one output pixel: ``[N, H*W*C] @ [H*W*C, F]`` (the filter gradient
  of a 1x1 conv, whose "filter" is the output gradient and whose images are the input channels).

A conv of stride 1 whose filter taps along W are adjacent (no W dilation) is ``KH`` matmuls of the
input as it lies, when the cost model says so (``ConvRows``, ``rows_of_shapes``): output pixel
``(n, h, w)`` is row ``r = (n*H + h)*W + w`` of an extended output of every input pixel (H, W the
padded input's), and filter row ``i`` multiplies the ``[KW*C]`` elements from input pixel
``r + i*dh*W`` on, a row of the input read ``C`` elements apart (the rows overlap).  So
``ext[r] += X[r + i*dh*W : ..., KW*C] @ Wt[i]`` for each ``i`` is the conv at every valid ``r``; the
rows of ``w >= OW`` or ``h >= OH`` are computed and dropped (their share is ``junk``).

Why the GEMM and not the conv's register blocks: the GEMM blocks the reduction for L1 and L2 (K
slabs, packed-free column blocks), which the direct schedule does not (its filter block streams
from L2 or L3 at every output block: a 512-channel 1x1 conv, a window of a whole image); and a
call costs no compile time.  A conv's direct schedule keeps every other shape.

Memrefs (after bufferization): each operand is collapsed to its matrix (``memref.collapse_shape``,
an operand that is not dense row-major first copied into a dense buffer) and cast to the
library's type.
"""

from __future__ import annotations

from typing import Any, Callable

from mind.spec.dtypes import DType
from mind.spec.record import FrozenRecord

from .conv_schedule import CONV_OP, direct_estimate
from .gemm_kernel import VARIANTS, operand_type
from .vector_unit import vector_unit

__all__ = ["ConvGemm", "ConvRows", "GEMM_CYCLES_PER_FMA", "C_PASS_FMAS", "conv_gemm", "conv_helper", "gemm_of_shapes",
           "rows_of_shapes", "CONV_OP"]

_set = object.__setattr__


class ConvGemm(FrozenRecord):
    """The matmul ``[m, k] @ [k, n]`` a conv is, with the reassociation of the input's, filter's and
    output's dims into each matrix's two (``groups``)."""

    __slots__ = ("m", "n", "k", "groups")

    m: int
    n: int
    k: int
    groups: tuple[str, str, str]

    def __init__(self, m: int, n: int, k: int, groups: tuple[str, str, str]) -> None:
        _set(self, "m", m)
        _set(self, "n", n)
        _set(self, "k", k)
        _set(self, "groups", groups)


class ConvRows(FrozenRecord):
    """The conv as ``taps`` matmuls ``ext[:m] (+)= A_i @ B_i`` (``[m, k] @ [k, n]``): ``A_i`` the input
    from pixel ``i * shift`` on, ``m`` rows of ``k`` elements ``c`` apart (the input's channels),
    ``B_i`` rows ``[i*k, (i+1)*k)`` of the filter as a ``[taps*k, n]`` matrix, ``ext`` of ``rows``
    pixels (``padded``: the input's N, H, W), of which the output is the window ``out`` (OH, OW)."""

    __slots__ = ("m", "n", "k", "c", "taps", "shift", "rows", "padded", "out")

    m: int
    n: int
    k: int
    c: int
    taps: int
    shift: int
    rows: int
    padded: tuple[int, int, int]
    out: tuple[int, int]

    def __init__(self, m: int, n: int, k: int, c: int, taps: int, shift: int, padded: tuple[int, int, int],
                 out: tuple[int, int]) -> None:
        for name, value in (("m", m), ("n", n), ("k", k), ("c", c), ("taps", taps), ("shift", shift),
                            ("rows", padded[0] * padded[1] * padded[2]), ("padded", tuple(padded)),
                            ("out", tuple(out))):
            _set(self, name, value)


_PIXEL_ROWS = "[[0, 1, 2], [3]]"
_IMAGE_ROWS = "[[0], [1, 2, 3]]"


GEMM_CYCLES_PER_FMA = 0.5
"""The GEMM's estimate in ``conv_schedule.block_cost``'s units: its register tile (``VARIANTS``)
keeps both FMA pipes busy, its K slabs keep the operands in L1 and L2."""

C_PASS_FMAS = 36
"""What one pass over the output costs a ``ConvRows`` matmul (read and written once per filter row),
in FMAs per output element: its estimate is ``GEMM_CYCLES_PER_FMA * junk * (1 + C_PASS_FMAS / k)``.
Fitted on one-thread timings of the KH matmuls on an AVX2-only Zen 3 (``docs/backend-cpu.md``,
Measurements: convs as matmuls of filter rows), K from 48 to 384."""


def gemm_of_shapes(xs: list[int], ws: list[int], os_: list[int], strides: list[int], dilations: list[int],
                   elem: str, isa: str) -> ConvGemm | None:
    """The matmul of a conv of these static shapes and attributes (``elem``: "f32" or "f64") that the
    GEMM should compute, or None (see the module docstring).  The cost model: a whole-window conv always (one output pixel
    per image: the direct schedule's block has one pixel and walks a whole image per FMA chain); a
    1x1 conv when the direct schedule's best block is estimated slower than the GEMM (a row of prime
    width, say; 512 channels in and out on AVX2, whose filter does not fit its L2), or as fast but
    with fewer accumulators than the GEMM's register tile (AVX2's 1x1 blocks of 8 against its 6 x 2:
    10-25 % slower, ``docs/backend-cpu.md``), since the direct schedule keeps a bias and activation
    fused into its tiles.  Both sides are the library level ``isa``'s (the kernel's vector unit and
    the GEMM's tile for it): the tensor stage, which leaves the conv to the library, and the memref
    stage, which calls it, are given the same level."""
    n, h, w, c = xs
    kh, kw, _, f = ws
    if (kh, kw) == (1, 1) and strides == [1, 1]:
        cost, accumulators = direct_estimate(n, h, w, f, 1, 1, c, DType(elem).bits, vector_unit(isa))
        tile = VARIANTS[isa][elem]
        if (cost, -accumulators) <= (GEMM_CYCLES_PER_FMA, -tile.rows * tile.vectors):
            return None
        return ConvGemm(n * h * w, f, c, (_PIXEL_ROWS, _PIXEL_ROWS, _PIXEL_ROWS))
    if (kh, kw) == (h, w) and os_[1:3] == [1, 1] and (dilations == [1, 1] or (h, w) == (1, 1)):
        return ConvGemm(n, f, h * w * c, (_IMAGE_ROWS, _PIXEL_ROWS, _IMAGE_ROWS))
    return None


def rows_of_shapes(xs: list[int], ws: list[int], os_: list[int], strides: list[int], dilations: list[int],
                   elem: str, isa: str) -> ConvRows | None:
    """The ``ConvRows`` of a conv of these static shapes and attributes, or None: stride 1, no W
    dilation, more than one tap, and the matmuls estimated faster than the direct schedule's best
    block.  The direct estimate is scaled by the unit's ``direct_conv_factor`` (what its blocks
    measured against their estimate: AVX2's ran at 1.6-2.4x it, its 16 registers holding 8-12
    accumulators where the GEMM's packed tile holds 12); the matmuls' by the rows they compute and
    drop (``junk``) and a pass over the output per filter row (``C_PASS_FMAS``)."""
    n, h, w, c = xs
    kh, kw, _, f = ws
    _, oh, ow, _ = os_
    if strides != [1, 1] or dilations[1] != 1 or kh * kw == 1 or (kh, kw) == (h, w):
        return None
    unit = vector_unit(isa)
    k = kw * c
    m = n * h * w - (kh - 1) * dilations[0] * w - (kw - 1)  # the last valid pixel's row, plus one
    junk = m / (n * oh * ow)
    cost, _ = direct_estimate(n, oh, ow, f, kh, kw, c, DType(elem).bits, unit)
    rows = GEMM_CYCLES_PER_FMA * junk * (1 + C_PASS_FMAS / k)
    if rows >= cost * unit.direct_conv_factor:
        return None
    return ConvRows(m, f, k, c, kh, dilations[0] * w, (n, h, w), (oh, ow))


def conv_gemm(op: Any, isa: str) -> tuple[str, ConvGemm | ConvRows] | None:
    """(element type, matmul) of a ``linalg.conv_2d_nhwc_hwcf`` (tensor or memref form) that the GEMM
    of the library level ``isa`` computes: f32/f64, static non-empty shapes, one of the two kinds of
    ``gemm_of_shapes`` or filter rows (``rows_of_shapes``); else None."""
    from mlir import ir
    if op.name != CONV_OP or len(list(op.operands)) != 3:
        return None
    shapes = []
    for v in op.operands:
        t = v.type
        if not isinstance(t, ir.ShapedType) or not t.has_static_shape or t.rank != 4 or 0 in t.shape:
            return None
        shapes.append(list(t.shape))
    elems = {str(ir.ShapedType(v.type).element_type) for v in op.operands}
    if len(elems) != 1 or not elems <= {"f32", "f64"}:
        return None
    attrs = []
    for key in ("strides", "dilations"):
        attrs.append([int(v) for v in ir.DenseIntElementsAttr(op.attributes[key])] if key in op.attributes
                     else [1, 1])
    elem = elems.pop()
    view = gemm_of_shapes(*shapes, *attrs, elem, isa) or rows_of_shapes(*shapes, *attrs, elem, isa)
    return None if view is None else (elem, view)


GemmCall = Callable[[tuple[str, str, str, str], str], list[str]]
"""``call((a, b, c, acc), suffix)``: the lines calling the GEMM on the library-typed values ``a @ b ->
c`` (``acc``: an i1, accumulate), naming what they define with ``suffix``."""


def conv_helper(elem: str, types: list[str], shapes: list[list[int]], dense: list[bool], view: ConvGemm | ConvRows,
                call: GemmCall, accumulate: bool) -> list[str]:
    """The body lines of a helper ``(%a, %b, %c)`` (operand ``types`` of ``shapes``; ``dense[i]``:
    operand i is row-major without offset) that runs the GEMM ``call`` on each operand viewed as its
    matrix (the library's type) and copies a result computed in a buffer back; a ``ConvRows`` runs
    one call per filter row into the extended output and copies its window out."""
    dyn = operand_type(elem)
    lines: list[str] = []
    full_types = ["memref<" + "x".join(str(d) for d in shape) + f"x{elem}>" for shape in shapes]
    srcs: list[tuple[str, str]] = []  # each operand's dense value and its type
    for i, (arg, t, full) in enumerate(zip(("%a", "%b", "%c"), types, full_types)):
        src = (arg, t)
        if not dense[i] and (i < 2 or isinstance(view, ConvGemm)):
            lines.append(f"%t{i} = memref.alloc() {{alignment = 64 : i64}} : {full}")
            if i < 2 or accumulate:
                lines.append(f"memref.copy {arg}, %t{i} : {t} to {full}")
            src = (f"%t{i}", full)
        srcs.append(src)
    if isinstance(view, ConvRows):
        lines += _rows_body(elem, types[2], srcs, view, call, accumulate)
    else:
        dims = ((view.m, view.k), (view.k, view.n), (view.m, view.n))
        for i, (src, src_type) in enumerate(srcs):
            mat = f"memref<{dims[i][0]}x{dims[i][1]}x{elem}>"
            lines.append(f"%m{i} = memref.collapse_shape {src} {view.groups[i]} : {src_type} into {mat}")
            lines.append(f"%d{i} = memref.cast %m{i} : {mat} to {dyn}")
        lines.append(f"%acc = arith.constant {'true' if accumulate else 'false'}")
        lines += call(("%d0", "%d1", "%d2", "%acc"), "")
    for i, (t, full) in enumerate(zip(types, full_types)):
        if not dense[i] and (i < 2 or isinstance(view, ConvGemm)):
            if i == 2:
                lines.append(f"memref.copy %t2, %c : {full} to {t}")
            lines.append(f"memref.dealloc %t{i} : {full}")
    return lines


def _rows_body(elem: str, out_type: str, srcs: list[tuple[str, str]], view: ConvRows, call: GemmCall,
               accumulate: bool) -> list[str]:
    """The lines of a ``ConvRows``: the extended output ``%ext`` (its window ``%win`` takes the
    output's values first when the conv accumulates), one GEMM call per filter row, the window
    copied to ``%c``.  Each ``A_i`` is a ``reinterpret_cast`` of the dense input (rows ``c``
    elements apart, ``k`` long: they overlap), each ``B_i`` a block of rows of the filter."""
    dyn = operand_type(elem)
    n, h, w = view.padded
    oh, ow = view.out
    ext = f"memref<{view.rows}x{view.n}x{elem}>"
    win = f"memref<{n}x{oh}x{ow}x{view.n}x{elem}, strided<[{h * w * view.n}, {w * view.n}, {view.n}, 1]>>"
    lines = [f"%ext = memref.alloc() {{alignment = 64 : i64}} : {ext}",
             f"%win = memref.reinterpret_cast %ext to offset: [0], sizes: [{n}, {oh}, {ow}, {view.n}], "
             f"strides: [{h * w * view.n}, {w * view.n}, {view.n}, 1] : {ext} to {win}"]
    if accumulate:
        lines.append(f"memref.copy %c, %win : {out_type} to {win}")
    wmat = f"memref<{view.taps * view.k}x{view.n}x{elem}>"
    lines.append(f"%wm = memref.collapse_shape {srcs[1][0]} [[0, 1, 2], [3]] : {srcs[1][1]} into {wmat}")
    lines.append(f"%cm = memref.subview %ext[0, 0] [{view.m}, {view.n}] [1, 1] : {ext} to "
                 f"memref<{view.m}x{view.n}x{elem}, strided<[{view.n}, 1]>>")
    lines.append(f"%dc = memref.cast %cm : memref<{view.m}x{view.n}x{elem}, strided<[{view.n}, 1]>> to {dyn}")
    for i in range(view.taps):
        offset = i * view.shift * view.c
        a_t = f"memref<{view.m}x{view.k}x{elem}, strided<[{view.c}, 1], offset: {offset}>>"
        b_t = f"memref<{view.k}x{view.n}x{elem}, strided<[{view.n}, 1], offset: {i * view.k * view.n}>>"
        lines += [f"%a{i} = memref.reinterpret_cast {srcs[0][0]} to offset: [{offset}], sizes: [{view.m}, {view.k}], "
                  f"strides: [{view.c}, 1] : {srcs[0][1]} to {a_t}",
                  f"%da{i} = memref.cast %a{i} : {a_t} to {dyn}",
                  f"%b{i} = memref.subview %wm[{i * view.k}, 0] [{view.k}, {view.n}] [1, 1] : {wmat} to {b_t}",
                  f"%db{i} = memref.cast %b{i} : {b_t} to {dyn}",
                  f"%acc{i} = arith.constant {'true' if accumulate or i else 'false'}"]
        lines += call((f"%da{i}", f"%db{i}", "%dc", f"%acc{i}"), f"_{i}")
    lines += [f"memref.copy %win, %c : {win} to {out_type}", f"memref.dealloc %ext : {ext}"]
    return lines
