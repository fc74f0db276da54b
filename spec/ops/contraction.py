"""Contractions: matmul and conv2d."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from mind.spec.dims import format_dim
from mind.spec.ops.base import (AttrDef, ConstraintDef, Example, OpDef, OperandDef, ShapeContext,
                                TensorType, VjpBuilder, VjpOp, VjpValue)
from mind.spec.ops.common import broadcast, fmt_shape, same_dtype
from mind.spec.ops.vjp import conv_window, need_int, unbroadcast


def _matmul_infer(ctx: ShapeContext, xs: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    a, b = xs
    same_dtype(ctx, "C1", xs)
    ctx.require("C2", a.dtype.is_numeric, lambda: f"dtype {a.dtype.value} is not numeric")
    ctx.require("C3", a.rank >= 2 and b.rank >= 2,
                lambda: f"operands have ranks {a.rank} and {b.rank}; matmul needs rank ≥ 2",
                help="reshape a vector to [1, n] or [n, 1] first")
    k1, k2 = a.shape[-1], b.shape[-2]
    ctx.require("C4", ctx.A.eq(k1, k2),
                lambda: f"contracting dimensions differ: {fmt_shape(a.shape)} @ {fmt_shape(b.shape)} "
                        f"({format_dim(k1)} vs {format_dim(k2)})",
                help="the last dim of lhs must equal the second-to-last dim of rhs")
    batch = broadcast(ctx, "C5", a.shape[:-2], b.shape[:-2])
    return TensorType(a.dtype, batch + (a.shape[-2], b.shape[-1]))


def _fast_matmul(xs: Sequence[TensorType]) -> TensorType | None:
    """``_matmul_infer`` for rank-2 numeric operands of one dtype with equal concrete contracting
    dims."""
    if len(xs) != 2:
        return None
    a, b = xs
    d = a.dtype
    sa, sb = a.shape, b.shape
    if (b.dtype is not d or not d.is_numeric or len(sa) != 2 or len(sb) != 2
            or type(sa[0]) is not int or type(sa[1]) is not int or type(sb[0]) is not int
            or type(sb[1]) is not int or sa[1] != sb[0]):
        return None
    return TensorType(d, (sa[0], sb[1]))


def _swap_last(b: VjpBuilder, v: VjpValue) -> VjpValue:
    r = v.type.rank
    return b.emit("transpose", v, permutation=tuple(range(r - 2)) + (r - 1, r - 2))


def _vjp_matmul(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    lhs, rhs = op.operands
    return [unbroadcast(b, b.emit("matmul", g, _swap_last(b, rhs)), lhs.type, op.span) if wants[0] else None,
            unbroadcast(b, b.emit("matmul", _swap_last(b, lhs), g), rhs.type, op.span) if wants[1] else None]


MATMUL = OpDef(
    name="matmul", summary="Batched matrix product; batch dims broadcast.",
    operands=(OperandDef("lhs", "tensor [..., M, K]"), OperandDef("rhs", "tensor [..., K, N]")),
    attrs=(),
    dtype_rule="result dtype = dtype(lhs)",
    shape_rule_text="broadcast(batch(lhs), batch(rhs)) ++ [M, N]",
    constraints=(ConstraintDef("C1", "E2004", "dtype(lhs) = dtype(rhs)"),
                 ConstraintDef("C2", "E2005", "dtype(lhs) is numeric"),
                 ConstraintDef("C3", "E3002", "rank(lhs) ≥ 2 and rank(rhs) ≥ 2"),
                 ConstraintDef("C4", "E3003", "shape(lhs)[-1] = shape(rhs)[-2]"),
                 ConstraintDef("C5", "E3001", "batch dims broadcast")),
    infer=_matmul_infer, fast_infer=_fast_matmul,
    semantics="result[b, m, n] = Σ_k lhs[bl(b), m, k] * rhs[br(b), k, n]",
    edge_cases="Integers wrap. Floats: the accumulation order is unspecified (see Accuracy); K = 0 "
               "gives +0. NaN/inf propagate as in a sum of products. Finite operands whose "
               "Σ|a_k·b_k| reaches Ω/(1 + γ(K)) (Ω the dtype's largest finite value) may give ±inf or "
               "NaN: a product or partial sum may overflow (see Accuracy).",
    accuracy="dot",
    vjp_text="d lhs = unbroadcast(matmul(g, transpose(rhs)), shape(lhs)); "
             "d rhs = unbroadcast(matmul(transpose(lhs), g), shape(rhs)) (transpose swaps the last two axes)",
    vjp=_vjp_matmul,
    examples=(Example("batched with broadcast", """func @main(%a: f32[2, 1, 2], %b: f32[2, 1]) -> (f32[2, 1, 1]) {
  %0 = matmul(%a, %b) : f32[2, 1, 1]
  return %0
}""", {"a": [[[1, 2]], [[3, 4]]], "b": [[10], [1]]}, [[[[12]], [[34]]]]),),
)


def dilated(A: Any, n: Any, d: Any) -> Any:
    """Extent of an axis of extent n after inserting d - 1 holes between neighbours."""
    return A.max(0, (n - 1) * d + 1)


def conv_extent(A: Any, n: Any, k: Any, stride: Any, lo: Any, hi: Any, lhs_dil: Any, rhs_dil: Any) -> Any:
    return A.max(0, A.floordiv(dilated(A, n, lhs_dil) + lo + hi - dilated(A, k, rhs_dil), stride) + 1)


def _conv_infer(ctx: ShapeContext, xs: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    A = ctx.A
    x, w = xs
    same_dtype(ctx, "C1", xs)
    ctx.require("C2", x.dtype.is_numeric, lambda: f"dtype {x.dtype.value} is not numeric")
    ctx.require("C3", x.rank == 4 and w.rank == 4,
                lambda: f"input rank {x.rank} and filter rank {w.rank}; both must be 4 (NHWC, HWIO)")
    ctx.require("C4", A.eq(x.shape[3], w.shape[2]),
                lambda: f"input channels {format_dim(x.shape[3])} differ from filter input channels "
                        f"{format_dim(w.shape[2])}",
                help="the filter layout is [KH, KW, C_in, C_out]")
    strides, padding = attrs["strides"], attrs["padding"]
    lhs_dil, rhs_dil = attrs["lhs_dilation"], attrs["rhs_dilation"]
    ctx.require("C5", len(strides) == 2 and len(padding) == 2 and len(lhs_dil) == 2 and len(rhs_dil) == 2,
                lambda: "strides, padding, lhs_dilation and rhs_dilation must each have 2 entries")
    for i in range(2):
        ctx.require("C6", A.and_(A.ge(strides[i], 1), A.ge(lhs_dil[i], 1), A.ge(rhs_dil[i], 1),
                                 A.ge(padding[i][0], 0), A.ge(padding[i][1], 0)),
                    lambda i=i: f"spatial axis {i}: strides and dilations must be ≥ 1 and padding ≥ 0")
        ctx.require("C7", A.ge(w.shape[i], 1),
                    lambda i=i: f"filter spatial extent {format_dim(w.shape[i])} must be ≥ 1")
    out = [conv_extent(A, x.shape[1 + i], w.shape[i], strides[i], padding[i][0], padding[i][1],
                       lhs_dil[i], rhs_dil[i]) for i in range(2)]
    return TensorType(x.dtype, (x.shape[0], out[0], out[1], w.shape[3]))


def _spatial_slice(b: VjpBuilder, v: VjpValue, ranges: Sequence[tuple[int, int]],
                   full: Sequence[int]) -> VjpValue:
    if all(h0 == 0 and h1 == n for (h0, h1), n in zip(ranges, full)):
        return v
    n, _, _, c = v.type.shape
    return b.emit("slice", v, start=(0, ranges[0][0], ranges[1][0], 0), stop=(n, ranges[0][1], ranges[1][1], c),
                  step=(1, 1, 1, 1))


def _vjp_conv2d(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    A = b.arith
    x, w = op.operands
    strides, padding = op.attrs["strides"], op.attrs["padding"]
    lhs_dil, rhs_dil = op.attrs["lhs_dilation"], op.attrs["rhs_dilation"]
    what = "the spatial extents of the input, filter and result"
    hw = [need_int(x.type.shape[1 + i], what, op.span) for i in range(2)]
    k = [need_int(w.type.shape[i], what, op.span) for i in range(2)]
    oh = [need_int(g.type.shape[1 + i], what, op.span) for i in range(2)]
    out: list[VjpValue | None] = [None, None]
    if wants[0]:
        # d input[h] = sum_{y, i} g[y] w[i] [y*S + i*R = lo + h*D]: a convolution of g dilated by S
        # with the flipped filter (rhs_dilation R), strided by D, over the window that yields H results.
        win = []
        for i in range(2):
            length = (hw[i] - 1) * lhs_dil[i] + (k[i] - 1) * rhs_dil[i] + 1
            win.append(conv_window(A, oh[i], strides[i], (k[i] - 1) * rhs_dil[i] - padding[i][0], length))
        if all(hw) and all(h1 > h0 for h0, h1, _, _ in win):
            gs = _spatial_slice(b, g, [(h0, h1) for h0, h1, _, _ in win], oh)
            wf = w
            if k != [1, 1]:
                wf = b.emit("slice", w, start=(k[0] - 1, k[1] - 1, 0, 0),
                            stop=(-1, -1, w.type.shape[2], w.type.shape[3]), step=(-1, -1, 1, 1))
            wf = b.emit("transpose", wf, permutation=(0, 1, 3, 2))
            out[0] = b.emit("conv2d", gs, wf, strides=tuple(lhs_dil),
                            padding=tuple((lo, hi) for _, _, lo, hi in win),
                            lhs_dilation=tuple(strides), rhs_dilation=tuple(rhs_dil))
    if wants[1]:
        # d filter[i, c, o] = sum_{n, y} P[n, y*S + i*R, c] g[n, y, o]: a convolution with batch and
        # channels exchanged, where g is the filter (rhs_dilation S) and the window step is R.
        win = []
        for i in range(2):
            length = (oh[i] - 1) * strides[i] + (k[i] - 1) * rhs_dil[i] + 1
            win.append(conv_window(A, hw[i], lhs_dil[i], padding[i][0], length))
        if all(oh) and all(h1 > h0 for h0, h1, _, _ in win):
            xs = _spatial_slice(b, x, [(h0, h1) for h0, h1, _, _ in win], hw)
            xt = b.emit("transpose", xs, permutation=(3, 1, 2, 0))
            gt = b.emit("transpose", g, permutation=(1, 2, 0, 3))
            r = b.emit("conv2d", xt, gt, strides=tuple(rhs_dil), padding=tuple((lo, hi) for _, _, lo, hi in win),
                       lhs_dilation=tuple(lhs_dil), rhs_dilation=tuple(strides))
            out[1] = b.emit("transpose", r, permutation=(1, 2, 0, 3))
    return out


CONV2D = OpDef(
    name="conv2d", summary="2-D convolution (cross-correlation), NHWC input, HWIO filter.",
    operands=(OperandDef("input", "tensor [N, H, W, C]"), OperandDef("filter", "tensor [KH, KW, C, O]")),
    attrs=(AttrDef("strides", "ints", "window strides [sh, sw]"),
           AttrDef("padding", "pairs", "[[top, bottom], [left, right]] added to the dilated input"),
           AttrDef("lhs_dilation", "ints", "input dilation [dh, dw] (a transposed convolution's stride)"),
           AttrDef("rhs_dilation", "ints", "filter dilation [dh, dw] (atrous convolution)")),
    dtype_rule="result dtype = dtype(input)",
    shape_rule_text="[N, OH, OW, O], OH = max(0, floor((dil(H, dh) + top + bottom - dil(KH, rdh)) / sh) + 1), "
                    "dil(n, d) = max(0, (n - 1) * d + 1); OW likewise",
    constraints=(ConstraintDef("C1", "E2004", "dtype(input) = dtype(filter)"),
                 ConstraintDef("C2", "E2005", "dtype(input) is numeric"),
                 ConstraintDef("C3", "E3002", "rank(input) = rank(filter) = 4"),
                 ConstraintDef("C4", "E3003", "shape(input)[3] = shape(filter)[2]"),
                 ConstraintDef("C5", "E4007", "strides, padding, lhs_dilation, rhs_dilation have 2 entries"),
                 ConstraintDef("C6", "E3006", "strides ≥ 1, dilations ≥ 1, padding ≥ 0"),
                 ConstraintDef("C7", "E3006", "shape(filter)[0] ≥ 1 and shape(filter)[1] ≥ 1")),
    infer=_conv_infer,
    semantics="Let P be the input dilated by lhs_dilation (zeros between elements) and zero-padded. "
              "result[n, y, x, o] = Σ_{i, j, c} P[n, y*sh + i*rdh, x*sw + j*rdw, c] * filter[i, j, c, o]",
    edge_cases="Integers wrap; floats accumulate in an unspecified order (see Accuracy). Padding and "
               "dilation holes are zeros. An empty window sum is +0. Finite operands whose Σ|a_k·b_k| "
               "reaches Ω/(1 + γ(n)) (Ω the dtype's largest finite value) may give ±inf or NaN: a "
               "product or partial sum may overflow (see Accuracy).",
    accuracy="dot",
    vjp_text="d input = conv2d(g, filter flipped spatially with I/O swapped, lhs_dilation = strides, "
             "rhs_dilation = rhs_dilation, padding chosen so the shapes match, then strided by lhs_dilation); "
             "d filter = conv2d of the transposed input with the transposed g "
             "(strides and rhs_dilation exchange roles). Per spatial axis (H, K, OH; S strides, D "
             "lhs_dilation, R rhs_dilation, lo the low padding): d input = conv2d(slice(g), "
             "transpose(slice(filter, step -1 spatially), [0, 1, 3, 2]), strides = D, lhs_dilation = S, "
             "rhs_dilation = R, padding = window of g dilated by S at offset (K - 1) * R - lo over "
             "length (H - 1) * D + (K - 1) * R + 1); d filter = transpose(conv2d(transpose(slice(input), "
             "[3, 1, 2, 0]), transpose(g, [1, 2, 0, 3]), strides = R, lhs_dilation = D, rhs_dilation = S, "
             "padding = window of input dilated by D at offset lo over length (OH - 1) * S + (K - 1) * R + 1), "
             "[1, 2, 0, 3]). A window's negative padding becomes a slice of the source; spatial extents "
             "must be concrete (E5004 otherwise)",
    vjp=_vjp_conv2d,
    examples=(Example("3x3 valid convolution of ones", """func @main(%x: f32[1, 3, 3, 1], %w: f32[2, 2, 1, 1]) -> (f32[1, 2, 2, 1]) {
  %0 = conv2d(%x, %w) {strides = [1, 1], padding = [[0, 0], [0, 0]], lhs_dilation = [1, 1], rhs_dilation = [1, 1]} : f32[1, 2, 2, 1]
  return %0
}""", {"x": [[[[1], [2], [3]], [[4], [5], [6]], [[7], [8], [9]]]], "w": [[[[1]], [[0]]], [[[0]], [[1]]]]},
        [[[[[6], [8]], [[12], [14]]]]]),),
)


OPS = (MATMUL, CONV2D)
