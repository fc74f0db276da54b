"""Constants, reductions and data-movement ops: const, reduce_sum, reduce_max, reshape, transpose,
slice, pad, gather."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from mind.spec.dims import format_dim
from mind.spec.dtypes import DType
from mind.spec.ops.base import (AttrDef, ConstraintDef, Example, OpDef, OperandDef, ShapeContext,
                                TensorType, VjpBuilder, VjpOp, VjpValue)
from mind.spec.ops.common import check_axes, fmt_shape
from mind.spec.ops.vjp import (broadcast_like, keep_shape, need_int, no_cotangent, pad_vjp_params, reshape_to,
                               scalar, slice_vjp_params, zeros_like)


def _const_infer(ctx: ShapeContext, xs: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    from mind.spec.dtypes import from_numpy

    value = attrs["value"]
    dtype = from_numpy(value.dtype)
    ctx.require("C1", dtype is not None, lambda: f"unsupported constant element type {value.dtype}")
    return TensorType(dtype, tuple(int(d) for d in value.shape))


CONST = OpDef(
    name="const", summary="A constant tensor.",
    operands=(), attrs=(AttrDef("value", "tensor", "the elements (dense, or a splat of one value)"),),
    dtype_rule="result dtype = dtype of the value", shape_rule_text="shape(result) = shape of the value",
    constraints=(ConstraintDef("C1", "E4005", "the value's element type is one of bool, i32, i64, f32, f64 "
                               "and its element count equals the product of the declared shape"),),
    infer=_const_infer,
    semantics="result = value",
    edge_cases="Float literals are parsed to the nearest value of the dtype (round to nearest even); "
               "`nan`, `inf`, `-inf` and `-0.0` are literals. Integer literals must fit the dtype.",
    accuracy="exact", vjp_text="no operands", vjp=no_cotangent,
    examples=(Example("a literal and a splat", """func @main() -> (i32[2, 2], f32[3]) {
  %0 = const {value = [[1, 2], [3, 4]]} : i32[2, 2]
  %1 = const {value = splat(-0.0)} : f32[3]
  return %0, %1
}""", {}, [[[1, 2], [3, 4]], [-0.0, -0.0, -0.0]]),),
)


def _reduce_infer(numeric_only: bool):
    def infer(ctx: ShapeContext, xs: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
        x = xs[0]
        if numeric_only:
            ctx.require("C3", x.dtype.is_numeric, lambda: "reduce_sum of a bool tensor",
                        help="`convert` to an integer dtype first")
        axes = attrs["axes"]
        check_axes(ctx, "C1", "C2", axes, x.rank)
        if attrs["keepdims"]:
            shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        else:
            shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
        return TensorType(x.dtype, shape)
    return infer


_REDUCE_ATTRS = (AttrDef("axes", "ints", "the reduced axes, strictly increasing; [] reduces nothing"),
                 AttrDef("keepdims", "bool", "keep reduced axes as extent 1"))
_REDUCE_CONSTRAINTS = (ConstraintDef("C1", "E3004", "0 ≤ a < rank(operand) for every a in axes"),
                       ConstraintDef("C2", "E3005", "axes is strictly increasing (no duplicates)"))

def _vjp_reduce_sum(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    x = op.operands[0]
    g_keep = reshape_to(b, g, keep_shape(x.type.shape, op.attrs["axes"]))
    return [broadcast_like(b, g_keep, x)]


REDUCE_SUM = OpDef(
    name="reduce_sum", summary="Sum over the given axes.",
    operands=(OperandDef("operand", "numeric tensor"),), attrs=_REDUCE_ATTRS,
    dtype_rule="result dtype = dtype(operand)",
    shape_rule_text="reduced axes removed (keepdims = false) or set to 1 (keepdims = true)",
    constraints=_REDUCE_CONSTRAINTS + (ConstraintDef("C3", "E2005", "dtype(operand) is numeric"),),
    infer=_reduce_infer(True),
    semantics="result[j] = Σ_{i ∈ reduced(j)} operand[i]; the sum of no elements is 0",
    edge_cases="Integers wrap. Floats: any NaN gives NaN; +inf and -inf together give NaN; the float "
               "summation order is unspecified (the bound in Accuracy holds for every order); a sum of "
               "no elements is +0; finite elements whose Σ|x_i| reaches Ω/(1 + γ(n)) (Ω the dtype's "
               "largest finite value) may give ±inf or NaN: a partial sum may overflow (see Accuracy).",
    accuracy="sum", vjp_text="d operand = broadcast of g (reshaped to keepdims form) to shape(operand), "
                              "written as add(reshape(g), zeros(shape(operand))) for a concrete shape and as "
                              "select(compare(operand, operand, eq), reshape(g), reshape(g)) for a symbolic one "
                              "(NaN-free: no multiplication by 0)",
    vjp=_vjp_reduce_sum,
    examples=(Example("rows and all", """func @main(%x: f32[2, 3]) -> (f32[2], f32[]) {
  %0 = reduce_sum(%x) {axes = [1], keepdims = false} : f32[2]
  %1 = reduce_sum(%x) {axes = [0, 1], keepdims = false} : f32[]
  return %0, %1
}""", {"x": [[1, 2, 3], [4, 5, 6]]}, [[6, 15], 21]),
              Example("empty axis sums to zero", """func @main(%x: i32[2, 0]) -> (i32[2, 1]) {
  %0 = reduce_sum(%x) {axes = [1], keepdims = true} : i32[2, 1]
  return %0
}""", {"x": [[], []]}, [[[0], [0]]])),
)

def _vjp_reduce_max(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    x = op.operands[0]
    axes = tuple(op.attrs["axes"])
    kshape = keep_shape(x.type.shape, axes)
    hit = b.emit("compare", x, reshape_to(b, op.result, kshape), direction="eq")
    mask = b.emit("convert", hit, dtype=x.type.dtype)
    count = b.emit("reduce_sum", mask, axes=axes, keepdims=True)
    share = b.emit("div", reshape_to(b, g, kshape), count)
    return [b.emit("mul", mask, share)]


REDUCE_MAX = OpDef(
    name="reduce_max", summary="Maximum over the given axes.",
    operands=(OperandDef("operand", "tensor"),), attrs=_REDUCE_ATTRS,
    dtype_rule="result dtype = dtype(operand)",
    shape_rule_text="reduced axes removed (keepdims = false) or set to 1 (keepdims = true)",
    constraints=_REDUCE_CONSTRAINTS, infer=_reduce_infer(False),
    semantics="result[j] = max_{i ∈ reduced(j)} operand[i]",
    edge_cases="NaN anywhere in the window gives NaN. +0 is greater than -0. The maximum of no "
               "elements is the identity of max: -inf for floats, INT_MIN for integers, false for bool.",
    accuracy="exact",
    vjp_text="d operand = g broadcast back, masked by (operand == result broadcast back) and divided by "
             "the number of maximal elements in the window (ties share the gradient equally): "
             "mask = convert(compare(operand, reshape(result, keepdims), eq)); "
             "d operand = mul(mask, div(reshape(g, keepdims), reduce_sum(mask, axes, keepdims = true)))",
    vjp=_vjp_reduce_max,
    examples=(Example("NaN, signed zero and empty windows", """func @main(%x: f32[3, 2], %e: f32[2, 0]) -> (f32[3], f32[2]) {
  %0 = reduce_max(%x) {axes = [1], keepdims = false} : f32[3]
  %1 = reduce_max(%e) {axes = [1], keepdims = false} : f32[2]
  return %0, %1
}""", {"x": [[1.0, "nan"], [-0.0, 0.0], [-3.0, -2.0]], "e": [[], []]},
        [["nan", 0.0, -2.0], ["-inf", "-inf"]]),),
)


def _reshape_infer(ctx: ShapeContext, xs: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    A = ctx.A
    shape = tuple(attrs["shape"])
    for i, d in enumerate(shape):
        ctx.require("C1", A.ge(d, 0), lambda i=i, d=d: f"target dimension {i} is {format_dim(d)}, negative")
    src, dst = A.prod(xs[0].shape), A.prod(shape)
    ctx.require("C2", A.eq(src, dst),
                lambda: f"cannot reshape {fmt_shape(xs[0].shape)} ({format_dim(src)} elements) to "
                        f"{fmt_shape(shape)} ({format_dim(dst)} elements)",
                help="the element count must be preserved")
    return TensorType(xs[0].dtype, shape)


def _vjp_reshape(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    return [reshape_to(b, g, op.operands[0].type.shape)]


RESHAPE = OpDef(
    name="reshape", summary="The same elements in row-major order, with a new shape.",
    operands=(OperandDef("operand", "tensor"),),
    attrs=(AttrDef("shape", "dims", "the result shape (dims may be symbolic expressions)"),),
    dtype_rule="result dtype = dtype(operand)", shape_rule_text="shape(result) = shape",
    constraints=(ConstraintDef("C1", "E3006", "every dim of shape is ≥ 0"),
                 ConstraintDef("C2", "E3007", "Π shape = Π shape(operand)")),
    infer=_reshape_infer,
    semantics="flatten(result) = flatten(operand) in row-major order",
    edge_cases="None: the op is total on every input that satisfies its constraints.",
    accuracy="exact", vjp_text="d operand = reshape(g, shape(operand))", vjp=_vjp_reshape,
    examples=(Example("matrix to column", """func @main(%x: i32[2, 2]) -> (i32[4, 1]) {
  %0 = reshape(%x) {shape = [4, 1]} : i32[4, 1]
  return %0
}""", {"x": [[1, 2], [3, 4]]}, [[[1], [2], [3], [4]]]),),
    laws=("reshape preserves the element count", "reshape(reshape(x, s), shape(x)) = x"),
)


def _transpose_infer(ctx: ShapeContext, xs: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    perm = tuple(attrs["permutation"])
    x = xs[0]
    ctx.require("C1", len(perm) == x.rank,
                lambda: f"permutation {list(perm)} has length {len(perm)}, operand rank is {x.rank}")
    ctx.require("C2", sorted(perm) == list(range(x.rank)),
                lambda: f"{list(perm)} is not a permutation of 0..{x.rank - 1}")
    return TensorType(x.dtype, tuple(x.shape[p] for p in perm))


def _vjp_transpose(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    perm = tuple(op.attrs["permutation"])
    inverse = tuple(sorted(range(len(perm)), key=lambda i: perm[i]))
    if inverse == tuple(range(len(perm))):
        return [g]
    return [b.emit("transpose", g, permutation=inverse)]


TRANSPOSE = OpDef(
    name="transpose", summary="Permutes the axes.",
    operands=(OperandDef("operand", "tensor"),),
    attrs=(AttrDef("permutation", "ints", "result axis i is operand axis permutation[i]"),),
    dtype_rule="result dtype = dtype(operand)",
    shape_rule_text="shape(result)[i] = shape(operand)[permutation[i]]",
    constraints=(ConstraintDef("C1", "E3002", "size(permutation) = rank(operand)"),
                 ConstraintDef("C2", "E3008", "permutation is a permutation of [0, rank)")),
    infer=_transpose_infer,
    semantics="result[i_0, …, i_{r-1}] = operand[j] where j[permutation[k]] = i_k",
    edge_cases="None: the op is total on every input that satisfies its constraints.",
    accuracy="exact", vjp_text="d operand = transpose(g, inverse(permutation))", vjp=_vjp_transpose,
    examples=(Example("swap axes", """func @main(%x: f32[2, 3]) -> (f32[3, 2]) {
  %0 = transpose(%x) {permutation = [1, 0]} : f32[3, 2]
  return %0
}""", {"x": [[1, 2, 3], [4, 5, 6]]}, [[[1, 4], [2, 5], [3, 6]]]),),
    laws=("transpose(transpose(x, p), inverse(p)) = x",),
)


def slice_extent(A: Any, start: Any, stop: Any, step: Any) -> Any:
    """Number of indices start, start+step, … strictly before stop (in the direction of step)."""
    return A.ite(A.gt(step, 0), A.max(0, A.ceildiv(stop - start, step)),
                 A.max(0, A.ceildiv(start - stop, 0 - step)))


def _slice_infer(ctx: ShapeContext, xs: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    A = ctx.A
    x = xs[0]
    start, stop, step = attrs["start"], attrs["stop"], attrs["step"]
    ctx.require("C1", len(start) == len(stop) == len(step) == x.rank,
                lambda: f"start/stop/step have lengths {len(start)}/{len(stop)}/{len(step)}, rank is {x.rank}")
    shape = []
    for axis, (n, b, e, s) in enumerate(zip(x.shape, start, stop, step)):
        ctx.require("C2", A.ne(s, 0), lambda axis=axis: f"step of axis {axis} is 0")
        in_range = A.or_(
            A.and_(A.gt(s, 0), A.le(0, b), A.le(b, n), A.le(0, e), A.le(e, n)),
            A.and_(A.lt(s, 0), A.le(-1, b), A.le(b, n - 1), A.le(-1, e), A.le(e, n - 1)))
        ctx.require("C3", in_range,
                    lambda axis=axis, n=n, b=b, e=e, s=s: (
                        f"slice {format_dim(b)}:{format_dim(e)}:{format_dim(s)} is out of range for axis {axis} "
                        f"of extent {format_dim(n)}"),
                    help="step > 0 needs 0 ≤ start, stop ≤ n; step < 0 needs -1 ≤ start, stop ≤ n - 1")
        shape.append(ctx.dim_choice("C3", lambda b=b, e=e, s=s: slice_extent(A, b, e, s)))
    return TensorType(x.dtype, tuple(shape))


def _vjp_slice(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    A = b.arith
    x = op.operands[0]
    starts, stops, steps, los, his, inters = [], [], [], [], [], []
    for axis, (n, start, step, m) in enumerate(zip(x.type.shape, op.attrs["start"], op.attrs["step"],
                                                    op.result.type.shape)):
        nonempty = A.ge(m, 1)
        if nonempty is False:
            return [None]  # an empty window reads nothing: the cotangent is zero
        if nonempty is not True and abs(step) != 1:
            need_int(m, f"the extent of sliced axis {axis} (step {step})", op.span)
        lo, hi, interior, rev = slice_vjp_params(A, n, start, step, m)
        los.append(need_int(lo, f"the low padding of axis {axis}", op.span))
        his.append(need_int(hi, f"the high padding of axis {axis}", op.span))
        inters.append(interior)
        starts.append(m - 1 if rev else 0)
        stops.append(-1 if rev else m)
        steps.append(-1 if rev else 1)
    if any(s < 0 for s in steps):
        g = b.emit("slice", g, start=tuple(starts), stop=tuple(stops), step=tuple(steps))
    if any(los) or any(his) or any(inters):
        g = b.emit("pad", g, scalar(b, 0, g.type.dtype), lo=tuple(los), hi=tuple(his), interior=tuple(inters))
    return [g]


SLICE = OpDef(
    name="slice", summary="A strided window of each axis; negative steps walk backwards.",
    operands=(OperandDef("operand", "tensor"),),
    attrs=(AttrDef("start", "dims", "first index per axis"),
           AttrDef("stop", "dims", "exclusive bound per axis"),
           AttrDef("step", "ints", "non-zero stride per axis")),
    dtype_rule="result dtype = dtype(operand)",
    shape_rule_text="shape(result)[a] = max(0, ceil((stop[a] - start[a]) / step[a]))",
    constraints=(ConstraintDef("C1", "E4007", "size(start) = size(stop) = size(step) = rank(operand)"),
                 ConstraintDef("C2", "E3006", "step[a] ≠ 0"),
                 ConstraintDef("C3", "E3006", "step[a] > 0: 0 ≤ start[a] ≤ n and 0 ≤ stop[a] ≤ n; "
                               "step[a] < 0: -1 ≤ start[a] ≤ n - 1 and -1 ≤ stop[a] ≤ n - 1 "
                               "(n = shape(operand)[a]), so every index read is in range")),
    infer=_slice_infer,
    semantics="result[i] = operand[start + i * step] (per axis); indices are literal, not Python-style "
              "(the frontend normalises negative and out-of-range Python bounds before lowering)",
    edge_cases="Empty windows give extent 0. Attributes are checked statically (C3), so no read is out of range.",
    accuracy="exact",
    vjp_text="step > 0: d operand = pad(g, 0, lo = start, hi = n - 1 - last, interior = step - 1); "
             "step < 0: reverse g along the axis (slice with step -1), then pad as for the mirrored "
             "positive-step window (lo = last, hi = n - 1 - start, interior = -step - 1), "
             "with last = start + (m - 1) * step; an empty window gives no cotangent; lo and hi must be "
             "concrete (E5004 otherwise)",
    vjp=_vjp_slice,
    examples=(Example("forward and backward strides", """func @main(%x: i32[6]) -> (i32[3], i32[3]) {
  %0 = slice(%x) {start = [0], stop = [6], step = [2]} : i32[3]
  %1 = slice(%x) {start = [5], stop = [-1], step = [-2]} : i32[3]
  return %0, %1
}""", {"x": [0, 1, 2, 3, 4, 5]}, [[0, 2, 4], [5, 3, 1]]),),
    laws=("pad(slice(x)) has shape(x) when lo/hi/interior are the VJP's",),
)


def pad_extent(A: Any, n: Any, lo: Any, hi: Any, interior: Any) -> Any:
    return lo + hi + n + A.max(n - 1, 0) * interior


def _pad_infer(ctx: ShapeContext, xs: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    A = ctx.A
    x, value = xs
    lo, hi, interior = attrs["lo"], attrs["hi"], attrs["interior"]
    ctx.require("C1", value.rank == 0, lambda: f"padding value has rank {value.rank}, not 0")
    ctx.require("C2", value.dtype is x.dtype,
                lambda: f"padding value has dtype {value.dtype.value}, operand {x.dtype.value}")
    ctx.require("C3", len(lo) == len(hi) == len(interior) == x.rank,
                lambda: f"lo/hi/interior have lengths {len(lo)}/{len(hi)}/{len(interior)}, rank is {x.rank}")
    shape = []
    for axis, (n, l, h, i) in enumerate(zip(x.shape, lo, hi, interior)):
        ctx.require("C4", A.and_(A.ge(l, 0), A.ge(h, 0), A.ge(i, 0)),
                    lambda axis=axis: f"negative padding on axis {axis}")
        shape.append(pad_extent(A, n, l, h, i))
    return TensorType(x.dtype, tuple(shape))


def _vjp_pad(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    A = b.arith
    x, value = op.operands
    out: list[VjpValue | None] = [None, None]
    if wants[0]:
        starts, stops, steps = [], [], []
        for axis, (n, lo, interior) in enumerate(zip(x.type.shape, op.attrs["lo"], op.attrs["interior"])):
            start, stop, step = pad_vjp_params(A, n, lo, interior)
            if A.ge(stop, 0) is not True:  # n = 0 with lo < interior: read nothing
                if A.eq(n, 0) is not True:
                    need_int(n, f"the extent of padded axis {axis}", op.span)
                stop = start
            starts.append(start)
            stops.append(stop)
            steps.append(step)
        if all(s == 1 for s in steps) and all(a == 0 for a in starts) and \
                all(A.eq(e, m) is True for e, m in zip(stops, g.type.shape)):
            out[0] = g
        else:
            out[0] = b.emit("slice", g, start=tuple(starts), stop=tuple(stops), step=tuple(steps))
    if wants[1]:
        holes = b.emit("pad", zeros_like(b, x), scalar(b, 1, x.type.dtype), lo=op.attrs["lo"],
                       hi=op.attrs["hi"], interior=op.attrs["interior"])
        out[1] = b.emit("reduce_sum", b.emit("mul", g, holes), axes=tuple(range(g.type.rank)), keepdims=False)
    return out


PAD = OpDef(
    name="pad", summary="Pads each axis at both ends and between elements with a scalar value.",
    operands=(OperandDef("operand", "tensor"), OperandDef("value", "rank-0 tensor of the same dtype")),
    attrs=(AttrDef("lo", "ints", "elements added before each axis"),
           AttrDef("hi", "ints", "elements added after each axis"),
           AttrDef("interior", "ints", "elements added between neighbours")),
    dtype_rule="result dtype = dtype(operand)",
    shape_rule_text="shape(result)[a] = lo[a] + hi[a] + n + max(n - 1, 0) * interior[a]",
    constraints=(ConstraintDef("C1", "E3002", "rank(value) = 0"),
                 ConstraintDef("C2", "E2004", "dtype(value) = dtype(operand)"),
                 ConstraintDef("C3", "E4007", "size(lo) = size(hi) = size(interior) = rank(operand)"),
                 ConstraintDef("C4", "E3006", "lo, hi, interior ≥ 0")),
    infer=_pad_infer,
    semantics="result[lo + i * (interior + 1)] = operand[i] per axis; every other element is value",
    edge_cases="None: the op is total on every input that satisfies its constraints.",
    accuracy="exact",
    vjp_text="d operand = slice(g, start = lo, stop = lo + n * (interior + 1) - interior, step = interior + 1) "
             "(= lo + (n - 1) * (interior + 1) + 1; start = stop = lo when n = 0); "
             "d value = reduce_sum(g * pad(zeros(shape(operand)), 1)) over all axes "
             "(g summed over the padding positions, without cancellation)",
    vjp=_vjp_pad,
    examples=(Example("edge and interior padding", """func @main(%x: i32[3], %v: i32[]) -> (i32[8]) {
  %0 = pad(%x, %v) {lo = [1], hi = [2], interior = [1]} : i32[8]
  return %0
}""", {"x": [1, 2, 3], "v": 0}, [[0, 1, 0, 2, 0, 3, 0, 0]]),),
)


def _gather_infer(ctx: ShapeContext, xs: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    x, idx = xs
    axis = attrs["axis"]
    ctx.require("C1", idx.dtype in (DType.I32, DType.I64),
                lambda: f"indices have dtype {idx.dtype.value}, not i32 or i64")
    ctx.require("C2", 0 <= axis < x.rank, lambda: f"axis {axis} is out of range for rank {x.rank}",
                help=f"axis is in [0, {x.rank})")
    return TensorType(x.dtype, tuple(x.shape[:axis]) + tuple(idx.shape) + tuple(x.shape[axis + 1:]))


def _vjp_gather(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    import numpy as np

    A = b.arith
    x, idx = op.operands
    axis = op.attrs["axis"]
    n = need_int(x.type.shape[axis], f"the extent of gathered axis {axis} (for the one-hot iota constant)",
                 op.span)
    if n == 0:
        return [b.splat(0, x.type.dtype, x.type.shape) if all(isinstance(d, int) for d in x.type.shape)
                else None, None]
    pre, post = x.type.shape[:axis], x.type.shape[axis + 1:]
    m = A.prod(idx.type.shape)
    p, q = A.prod(pre), A.prod(post)
    itype = idx.type.dtype
    flat = reshape_to(b, idx, (1, m))
    # onehot[k, j] = (clamp(idx[j], 0, n - 1) == k) = (lower[k] <= idx[j]) * (idx[j] <= upper[k]) with
    # lower = iota except lower[0] = INT_MIN and upper = iota except upper[n - 1] = INT_MAX.
    lower = np.arange(n, dtype=itype.numpy).reshape(n, 1)
    upper = lower.copy()
    lower[0, 0], upper[n - 1, 0] = itype.int_min, itype.int_max
    ge = b.emit("convert", b.emit("compare", b.const(lower, itype), flat, direction="le"), dtype=x.type.dtype)
    le = b.emit("convert", b.emit("compare", b.const(upper, itype), flat, direction="ge"), dtype=x.type.dtype)
    onehot = b.emit("mul", ge, le)  # [n, m]
    g3 = reshape_to(b, g, (p, m, q))
    d = b.emit("matmul", onehot, g3)  # [p, n, q]
    return [reshape_to(b, d, x.type.shape), None]


GATHER = OpDef(
    name="gather", summary="Picks slices of one axis by integer indices.",
    operands=(OperandDef("operand", "tensor"), OperandDef("indices", "i32 or i64 tensor")),
    attrs=(AttrDef("axis", "int", "the axis indexed"),),
    dtype_rule="result dtype = dtype(operand)",
    shape_rule_text="shape(operand)[:axis] ++ shape(indices) ++ shape(operand)[axis+1:]",
    constraints=(ConstraintDef("C1", "E2005", "dtype(indices) ∈ {i32, i64}"),
                 ConstraintDef("C2", "E3004", "0 ≤ axis < rank(operand)")),
    infer=_gather_infer,
    semantics="result[p, i, q] = operand[p, clamp(indices[i], 0, n - 1), q] with n = shape(operand)[axis]",
    edge_cases="Out-of-range indices are clamped into [0, n - 1] (negative indices read element 0; they "
               "do not count from the end). If n = 0 every result element is 0 (false for bool).",
    accuracy="exact",
    vjp_text="d operand = the scatter-add of g at the clamped indices, written as a contraction of g with "
             "the one-hot matrix compare(eq, clamp(indices), iota(n)): "
             "reshape(matmul(onehot, reshape(g, [P, M, Q])), shape(operand)) where onehot[k, j] = "
             "(clamp(indices[j], 0, n - 1) == k), written without a clamp as "
             "convert(compare(lower, idx, le)) * convert(compare(upper, idx, ge)) with idx = reshape(indices, [1, M]), "
             "lower = iota(n) as [n, 1] with lower[0] = INT_MIN, upper = iota(n) with upper[n - 1] = INT_MAX; "
             "P, M, Q the products of the leading, index and trailing extents; n must be concrete "
             "(E5004 otherwise); d indices: none",
    vjp=_vjp_gather,
    examples=(Example("clamped indices", """func @main(%x: f32[3, 2], %i: i64[4]) -> (f32[4, 2]) {
  %0 = gather(%x, %i) {axis = 0} : f32[4, 2]
  return %0
}""", {"x": [[1, 2], [3, 4], [5, 6]], "i": [2, 0, 7, -1]}, [[[5, 6], [1, 2], [5, 6], [1, 2]]]),),
)


OPS = (CONST, REDUCE_SUM, REDUCE_MAX, RESHAPE, TRANSPOSE, SLICE, PAD, GATHER)
