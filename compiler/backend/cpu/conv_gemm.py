"""Convolutions that are matmuls, computed by the prebuilt GEMM (``library_calls``).

Two kinds of ``linalg.conv_2d_nhwc_hwcf`` (the input already padded by the emitter) are one matmul
of the tensors as they lie, row-major:

* a 1x1 filter at stride 1: ``[N*H*W, C] @ [C, F]`` (a pointwise conv, its input gradient), when
  the cost model says so (``gemm_of_shapes``);
* a filter as large as the input, one output pixel: ``[N, H*W*C] @ [H*W*C, F]`` (the filter gradient
  of a 1x1 conv, whose "filter" is the output gradient and whose images are the input channels).

Why the GEMM and not the conv's register blocks: the GEMM blocks the reduction for L1 and L2 (K
slabs, packed-free column blocks), which the direct schedule does not (its filter block streams
from L2 or L3 at every output block: a 512-channel 1x1 conv, a window of a whole image); and a
call costs no compile time.  A conv's direct schedule keeps every other shape.

Memrefs (after bufferization): each operand is collapsed to its matrix (``memref.collapse_shape``,
an operand that is not dense row-major first copied into a dense buffer) and cast to the
library's type.
"""

from __future__ import annotations

from typing import Any

from mind.spec.dtypes import DType
from mind.spec.record import FrozenRecord

from .conv_schedule import CONV_OP, direct_estimate
from .gemm_kernel import VARIANTS, operand_type
from .vector_unit import vector_unit

__all__ = ["ConvGemm", "GEMM_CYCLES_PER_FMA", "conv_gemm", "conv_helper", "gemm_of_shapes", "CONV_OP"]

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


_PIXEL_ROWS = "[[0, 1, 2], [3]]"
_IMAGE_ROWS = "[[0], [1, 2, 3]]"


GEMM_CYCLES_PER_FMA = 0.5
"""The GEMM's estimate in ``conv_schedule.block_cost``'s units: its register tile (``VARIANTS``)
keeps both FMA pipes busy, its K slabs keep the operands in L1 and L2."""


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


def conv_gemm(op: Any, isa: str) -> tuple[str, ConvGemm] | None:
    """(element type, matmul) of a ``linalg.conv_2d_nhwc_hwcf`` (tensor or memref form) that the GEMM
    of the library level ``isa`` computes: f32/f64, static non-empty shapes, one of the two kinds;
    else None."""
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
    view = gemm_of_shapes(*shapes, *attrs, elem, isa)
    return None if view is None else (elem, view)


def conv_helper(elem: str, types: list[str], shapes: list[list[int]], dense: list[bool], view: ConvGemm,
                call: list[str], accumulate: bool) -> list[str]:
    """The body lines of a helper ``(%a, %b, %c)`` (operand ``types`` of ``shapes``; ``dense[i]``:
    operand i is row-major without offset) that views each operand as its matrix into ``%d0..%d2``
    (the library's type), runs the GEMM ``call`` lines, and copies a result computed in a buffer
    back."""
    dyn = operand_type(elem)
    dims = ((view.m, view.k), (view.k, view.n), (view.m, view.n))
    lines: list[str] = []
    full_types = ["memref<" + "x".join(str(d) for d in shape) + f"x{elem}>" for shape in shapes]
    for i, (arg, t, full) in enumerate(zip(("%a", "%b", "%c"), types, full_types)):
        src = arg
        if not dense[i]:
            lines.append(f"%t{i} = memref.alloc() {{alignment = 64 : i64}} : {full}")
            if i < 2 or accumulate:
                lines.append(f"memref.copy {arg}, %t{i} : {t} to {full}")
            src = f"%t{i}"
        mat = f"memref<{dims[i][0]}x{dims[i][1]}x{elem}>"
        lines.append(f"%m{i} = memref.collapse_shape {src} {view.groups[i]} : {full} into {mat}")
        lines.append(f"%d{i} = memref.cast %m{i} : {mat} to {dyn}")
    lines.append(f"%acc = arith.constant {'true' if accumulate else 'false'}")
    lines += call
    for i, (t, full) in enumerate(zip(types, full_types)):
        if not dense[i]:
            if i == 2:
                lines.append(f"memref.copy %t2, %c : {full} to {t}")
            lines.append(f"memref.dealloc %t{i} : {full}")
    return lines

