"""Elementwise ops: add, sub, mul, div, exp, log, compare, select, convert."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from mind.spec.dtypes import DType
from mind.spec.ops.base import (AttrDef, ConstraintDef, Example, OpDef, OperandDef, ShapeContext,
                                TensorType, VjpBuilder, VjpOp, VjpRule, VjpValue)
from mind.spec.ops.common import broadcast, broadcast_fast, same_dtype
from mind.spec.ops.vjp import neg, no_cotangent, scalar, unbroadcast


_BINARY_CONSTRAINTS = (
    ConstraintDef("C1", "E2004", "dtype(lhs) = dtype(rhs)"),
    ConstraintDef("C2", "E2005", "dtype(lhs) ∈ {i32, i64, f32, f64}"),
    ConstraintDef("C3", "E3001", "shape(lhs) and shape(rhs) broadcast (see Broadcasting)"),
)


def _binary_infer(ctx: ShapeContext, xs: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    same_dtype(ctx, "C1", xs)
    ctx.require("C2", xs[0].dtype.is_numeric, lambda: f"dtype {xs[0].dtype.value} is not numeric",
                help="use `convert` to a numeric dtype first")
    return TensorType(xs[0].dtype, broadcast(ctx, "C3", xs[0].shape, xs[1].shape))


def _fast_arith(xs: Sequence[TensorType]) -> TensorType | None:
    """add/sub/mul/div of one numeric dtype and shapes that broadcast without conditions: the type the spec
    rule (``_binary_infer``) gives; None for every other case (the spec rule decides)."""
    if len(xs) != 2:
        return None
    a, b = xs
    d = a.dtype
    if b.dtype is not d or not d.is_numeric:
        return None
    shape = broadcast_fast((a.shape, b.shape))
    return None if shape is None else TensorType(d, shape)


def _binary(name: str, summary: str, semantics: str, edge: str, accuracy: str, vjp_text: str,
            vjp: VjpRule, examples: tuple[Example, ...]) -> OpDef:
    return OpDef(
        name=name, summary=summary,
        operands=(OperandDef("lhs", "tensor"), OperandDef("rhs", "tensor of the same dtype")),
        attrs=(),
        dtype_rule="result dtype = dtype(lhs)",
        shape_rule_text="shape(result) = broadcast(shape(lhs), shape(rhs))",
        constraints=_BINARY_CONSTRAINTS,
        infer=_binary_infer, fast_infer=_fast_arith,
        semantics=semantics, edge_cases=edge, accuracy=accuracy, vjp_text=vjp_text, vjp=vjp,
        examples=examples, laws=("broadcast(shape(lhs), shape(rhs)) is commutative",),
    )


def _ex(title: str, body: str, inputs: Mapping[str, Any], expected: Sequence[Any]) -> Example:
    return Example(title, body, inputs, expected)


_INT_WRAP = ("Integers wrap modulo 2^bits (two's complement). Floats follow IEEE 754 binary32/64 "
             "round-to-nearest-even: NaN operands give NaN, infinities and signed zeros as IEEE.")


def _vjp_add(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    lhs, rhs = op.operands
    return [unbroadcast(b, g, lhs.type, op.span) if wants[0] else None,
            unbroadcast(b, g, rhs.type, op.span) if wants[1] else None]


ADD = _binary(
    "add", "Elementwise sum with broadcasting.",
    "result[i] = lhs[bl(i)] + rhs[br(i)], where bl/br map a result index to the broadcast operand index",
    _INT_WRAP + " inf + (-inf) = NaN; (-0) + (-0) = -0; (+0) + (-0) = +0.",
    "exact", "d lhs = unbroadcast(g, shape(lhs)); d rhs = unbroadcast(g, shape(rhs))",
    _vjp_add,
    (_ex("broadcast a row", """func @main(%a: f32[2, 3], %b: f32[3]) -> (f32[2, 3]) {
  %0 = add(%a, %b) : f32[2, 3]
  return %0
}""", {"a": [[1, 2, 3], [4, 5, 6]], "b": [10, 20, 30]}, [[[11, 22, 33], [14, 25, 36]]]),
     _ex("i32 wraps", """func @main(%a: i32[2], %b: i32[2]) -> (i32[2]) {
  %0 = add(%a, %b) : i32[2]
  return %0
}""", {"a": [2147483647, -2147483648], "b": [1, -1]}, [[-2147483648, 2147483647]])),
)


def _vjp_sub(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    lhs, rhs = op.operands
    return [unbroadcast(b, g, lhs.type, op.span) if wants[0] else None,
            neg(b, unbroadcast(b, g, rhs.type, op.span)) if wants[1] else None]


SUB = _binary(
    "sub", "Elementwise difference with broadcasting.",
    "result[i] = lhs[bl(i)] - rhs[br(i)]",
    _INT_WRAP + " inf - inf = NaN.",
    "exact", "d lhs = unbroadcast(g, shape(lhs)); d rhs = -unbroadcast(g, shape(rhs)) (negation as mul(·, -1))",
    _vjp_sub,
    (_ex("scalar rhs", """func @main(%a: f64[3], %b: f64[]) -> (f64[3]) {
  %0 = sub(%a, %b) : f64[3]
  return %0
}""", {"a": [1.5, 0.0, -2.0], "b": 0.5}, [[1.0, -0.5, -2.5]]),),
)


def _vjp_mul(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    lhs, rhs = op.operands
    return [unbroadcast(b, b.emit("mul", g, rhs), lhs.type, op.span) if wants[0] else None,
            unbroadcast(b, b.emit("mul", g, lhs), rhs.type, op.span) if wants[1] else None]


MUL = _binary(
    "mul", "Elementwise product with broadcasting.",
    "result[i] = lhs[bl(i)] * rhs[br(i)]",
    _INT_WRAP + " 0 * inf = NaN; the sign of a zero product is the XOR of the operand signs.",
    "exact", "d lhs = unbroadcast(g * rhs, shape(lhs)); d rhs = unbroadcast(g * lhs, shape(rhs))",
    _vjp_mul,
    (_ex("outer product by broadcasting", """func @main(%a: i64[2, 1], %b: i64[3]) -> (i64[2, 3]) {
  %0 = mul(%a, %b) : i64[2, 3]
  return %0
}""", {"a": [[1], [2]], "b": [1, 2, 3]}, [[[1, 2, 3], [2, 4, 6]]]),),
)


def _vjp_div(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    lhs, rhs = op.operands
    t = b.emit("div", g, rhs)
    return [unbroadcast(b, t, lhs.type, op.span) if wants[0] else None,
            neg(b, unbroadcast(b, b.emit("mul", t, op.result), rhs.type, op.span)) if wants[1] else None]


DIV = _binary(
    "div", "Elementwise quotient with broadcasting.",
    "floats: result[i] = lhs[bl(i)] / rhs[br(i)] (IEEE); integers: the quotient truncated toward zero",
    "Integer division truncates toward zero; x / 0 = 0 for every integer x (no trap); "
    "INT_MIN / -1 = INT_MIN (the wrapped quotient). Floats: x / ±0 = ±inf with the XOR sign for "
    "x ≠ 0, 0 / 0 = NaN, inf / inf = NaN, NaN propagates.",
    "exact", "d lhs = unbroadcast(g / rhs, shape(lhs)); d rhs = -unbroadcast((g / rhs) * result, shape(rhs)) "
    "(= -g * lhs / rhs², sharing g / rhs; negation as mul(·, -1))",
    _vjp_div,
    (_ex("integer division truncates toward zero and is total", """func @main(%a: i32[5], %b: i32[5]) -> (i32[5]) {
  %0 = div(%a, %b) : i32[5]
  return %0
}""", {"a": [7, -7, 5, -2147483648, 3], "b": [2, 2, 0, -1, -4]}, [[3, -3, 0, -2147483648, 0]]),
     _ex("float division by signed zero", """func @main(%a: f32[4], %b: f32[4]) -> (f32[4]) {
  %0 = div(%a, %b) : f32[4]
  return %0
}""", {"a": [1.0, 1.0, 0.0, 6.0], "b": [0.0, -0.0, 0.0, 4.0]}, [["inf", "-inf", "nan", 1.5]])),
)


_UNARY_FLOAT = (ConstraintDef("C1", "E2005", "dtype(operand) ∈ {f32, f64}"),)


def _unary_float_infer(ctx: ShapeContext, xs: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    ctx.require("C1", xs[0].dtype.is_float, lambda: f"dtype {xs[0].dtype.value} is not a float dtype",
                help="`convert` the operand to f32 or f64 first")
    return xs[0]


def _vjp_exp(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    return [b.emit("mul", g, op.result)]


EXP = OpDef(
    name="exp", summary="Elementwise natural exponential.",
    operands=(OperandDef("operand", "float tensor"),), attrs=(),
    dtype_rule="result dtype = dtype(operand)", shape_rule_text="shape(result) = shape(operand)",
    constraints=_UNARY_FLOAT, infer=_unary_float_infer,
    semantics="result[i] = e ** operand[i]",
    edge_cases="exp(NaN) = NaN, exp(+inf) = +inf, exp(-inf) = +0, exp(±0) = 1; results above the "
               "largest finite value are +inf, results below the smallest subnormal round to +0.",
    accuracy="exp", vjp_text="d operand = g * result", vjp=_vjp_exp,
    examples=(Example("special values", """func @main(%x: f32[5]) -> (f32[5]) {
  %0 = exp(%x) : f32[5]
  return %0
}""", {"x": [0.0, "-inf", "inf", "nan", 1000.0]}, [[1.0, 0.0, "inf", "nan", "inf"]]),),
)


def _vjp_log(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    return [b.emit("div", g, op.operands[0])]


LOG = OpDef(
    name="log", summary="Elementwise natural logarithm.",
    operands=(OperandDef("operand", "float tensor"),), attrs=(),
    dtype_rule="result dtype = dtype(operand)", shape_rule_text="shape(result) = shape(operand)",
    constraints=_UNARY_FLOAT, infer=_unary_float_infer,
    semantics="result[i] = ln(operand[i])",
    edge_cases="log(±0) = -inf, log(x < 0) = NaN, log(-inf) = NaN, log(+inf) = +inf, log(NaN) = NaN, "
               "log(1) = +0; subnormal inputs are honoured (not flushed).",
    accuracy="log", vjp_text="d operand = g / operand", vjp=_vjp_log,
    examples=(Example("domain edges", """func @main(%x: f64[6]) -> (f64[6]) {
  %0 = log(%x) : f64[6]
  return %0
}""", {"x": [1.0, 0.0, -0.0, -1.0, "inf", "nan"]}, [[0.0, "-inf", "-inf", "nan", "inf", "nan"]]),),
)


_DIRECTIONS = ("eq", "ne", "lt", "le", "gt", "ge")


def _compare_infer(ctx: ShapeContext, xs: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    same_dtype(ctx, "C1", xs)
    return TensorType(DType.BOOL, broadcast(ctx, "C2", xs[0].shape, xs[1].shape))


def _fast_compare(xs: Sequence[TensorType]) -> TensorType | None:
    """``_compare_infer`` for one dtype and shapes that broadcast without conditions."""
    if len(xs) != 2 or xs[0].dtype is not xs[1].dtype:
        return None
    shape = broadcast_fast((xs[0].shape, xs[1].shape))
    return None if shape is None else TensorType(DType.BOOL, shape)


COMPARE = OpDef(
    name="compare", summary="Elementwise comparison, giving a bool tensor.",
    operands=(OperandDef("lhs", "tensor"), OperandDef("rhs", "tensor of the same dtype")),
    attrs=(AttrDef("direction", "enum", "the comparison", _DIRECTIONS),),
    dtype_rule="result dtype = bool", shape_rule_text="shape(result) = broadcast(shape(lhs), shape(rhs))",
    constraints=(ConstraintDef("C1", "E2004", "dtype(lhs) = dtype(rhs)"),
                 ConstraintDef("C2", "E3001", "shape(lhs) and shape(rhs) broadcast")),
    infer=_compare_infer, fast_infer=_fast_compare,
    semantics="result[i] = lhs[bl(i)] <direction> rhs[br(i)]",
    edge_cases="IEEE comparisons: every comparison with NaN is false except `ne`, which is true; "
               "-0 == +0. Booleans order false < true.",
    accuracy="exact", vjp_text="not differentiable (bool result): operands receive no cotangent", vjp=no_cotangent,
    examples=(Example("NaN compares unordered", """func @main(%a: f32[3], %b: f32[3]) -> (bool[3], bool[3]) {
  %0 = compare(%a, %b) {direction = lt} : bool[3]
  %1 = compare(%a, %b) {direction = ne} : bool[3]
  return %0, %1
}""", {"a": [1.0, "nan", -0.0], "b": [2.0, 1.0, 0.0]}, [[True, False, False], [True, True, False]]),),
)


def _select_infer(ctx: ShapeContext, xs: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    ctx.require("C1", xs[0].dtype is DType.BOOL, lambda: f"condition has dtype {xs[0].dtype.value}, not bool",
                help="produce the condition with `compare`")
    same_dtype(ctx, "C2", xs[1:])
    return TensorType(xs[1].dtype, broadcast(ctx, "C3", xs[0].shape, xs[1].shape, xs[2].shape))


def _fast_select(xs: Sequence[TensorType]) -> TensorType | None:
    """``_select_infer`` for a bool predicate, one branch dtype and shapes that broadcast without conditions."""
    if len(xs) != 3 or xs[0].dtype is not DType.BOOL or xs[1].dtype is not xs[2].dtype:
        return None
    shape = broadcast_fast((xs[0].shape, xs[1].shape, xs[2].shape))
    return None if shape is None else TensorType(xs[1].dtype, shape)


def _vjp_select(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    pred, on_true, on_false = op.operands
    out: list[VjpValue | None] = [None, None, None]
    if wants[1] or wants[2]:
        zero = scalar(b, 0, g.type.dtype)
        if wants[1]:
            out[1] = unbroadcast(b, b.emit("select", pred, g, zero), on_true.type, op.span)
        if wants[2]:
            out[2] = unbroadcast(b, b.emit("select", pred, zero, g), on_false.type, op.span)
    return out


SELECT = OpDef(
    name="select", summary="Elementwise choice between two tensors by a bool condition.",
    operands=(OperandDef("pred", "bool tensor"), OperandDef("on_true", "tensor"),
              OperandDef("on_false", "tensor of the same dtype")),
    attrs=(),
    dtype_rule="result dtype = dtype(on_true)",
    shape_rule_text="shape(result) = broadcast(shape(pred), shape(on_true), shape(on_false))",
    constraints=(ConstraintDef("C1", "E2005", "dtype(pred) = bool"),
                 ConstraintDef("C2", "E2004", "dtype(on_true) = dtype(on_false)"),
                 ConstraintDef("C3", "E3001", "the three shapes broadcast together")),
    infer=_select_infer, fast_infer=_fast_select,
    semantics="result[i] = on_true[bt(i)] if pred[bp(i)] else on_false[bf(i)]",
    edge_cases="Total: the unselected value is ignored, even if NaN.",
    accuracy="exact",
    vjp_text="d pred: none; d on_true = unbroadcast(select(pred, g, 0)); d on_false = unbroadcast(select(pred, 0, g))",
    vjp=_vjp_select,
    examples=(Example("relu as select", """func @main(%x: f32[4]) -> (f32[4]) {
  %z = const {value = 0.0} : f32[]
  %c = compare(%x, %z) {direction = le} : bool[4]
  %0 = select(%c, %z, %x) : f32[4]
  return %0
}""", {"x": [-1.0, 0.0, 2.5, "nan"]}, [[0.0, 0.0, 2.5, "nan"]]),),
)


def _convert_infer(ctx: ShapeContext, xs: Sequence[TensorType], attrs: Mapping[str, Any]) -> TensorType:
    return TensorType(attrs["dtype"], xs[0].shape)


def _vjp_convert(b: VjpBuilder, op: VjpOp, g: VjpValue, wants: Sequence[bool]) -> list[VjpValue | None]:
    src = op.operands[0].type.dtype
    if not (src.is_float and op.result.type.dtype.is_float):
        return [None]
    return [g if src is g.type.dtype else b.emit("convert", g, dtype=src)]


CONVERT = OpDef(
    name="convert", summary="Elementwise dtype conversion.",
    operands=(OperandDef("operand", "tensor"),),
    attrs=(AttrDef("dtype", "dtype", "the result dtype"),),
    dtype_rule="result dtype = attribute dtype", shape_rule_text="shape(result) = shape(operand)",
    constraints=(), infer=_convert_infer,
    semantics="result[i] = cast(operand[i])",
    edge_cases="float→float rounds to nearest even (overflow gives ±inf). float→int truncates toward "
               "zero and saturates: values above the range give INT_MAX, below give INT_MIN, NaN gives 0. "
               "int→int wraps (two's complement). int→float rounds to nearest even. "
               "x→bool is x != 0 (NaN → true, -0 → false); bool→x is 0 or 1.",
    accuracy="exact",
    vjp_text="between float dtypes: d operand = convert(g, dtype(operand)) (g itself when the dtypes are equal); "
             "otherwise no cotangent",
    vjp=_vjp_convert,
    examples=(Example("saturating float to int", """func @main(%x: f32[5]) -> (i32[5]) {
  %0 = convert(%x) {dtype = i32} : i32[5]
  return %0
}""", {"x": [2.9, -2.9, 1e10, "-inf", "nan"]}, [[2, -2, 2147483647, -2147483648, 0]]),),
)


OPS = (ADD, SUB, MUL, DIV, EXP, LOG, COMPARE, SELECT, CONVERT)
