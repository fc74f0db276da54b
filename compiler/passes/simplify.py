"""Algebraic identities that hold exactly, bit for bit, for every input (IEEE cases included).

Each rewrite fires only when the op's result type equals the value it is replaced by, so
broadcasting ops are never removed.  Identities and why they are exact:

* ``x * 1``, ``1 * x``, ``x / 1``: IEEE multiplication by one returns x (NaN stays NaN, -0 stays -0).
* ``x + (-0.0)``, ``(-0.0) + x`` for floats, ``x + 0`` for integers: (+0) + (-0) = +0 and
  (-0) + (-0) = -0, so adding negative zero is the identity; adding +0 is not (it turns -0 into +0).
* ``x - (+0.0)`` for floats, ``x - 0`` for integers.
* ``convert`` to the same dtype, ``reshape`` to the same shape, identity ``transpose``,
  ``slice`` of a whole axis with step 1, ``pad`` by nothing, ``reduce_sum``/``reduce_max`` over no axes.
* ``transpose(transpose(x, p), q)`` = ``transpose(x, p∘q)``; ``reshape(reshape(x))`` = one reshape.
* ``select(c, x, x)`` = x; ``select`` by a constant predicate picks a branch.
"""

from __future__ import annotations

from math import copysign
from typing import Any

from mind.ir.core import Operation, Value
from mind.compiler.passes.fold import is_splat
from mind.compiler.passes.rewrite import RewriteContext, rewrite


def _splat_value(ctx: RewriteContext, v: Value) -> Any | None:
    """The scalar if ``v`` is a constant whose elements are all bit-identical, else None."""
    op = ctx.defining_op(v)
    if op is None or op.op != "const":
        return None
    memo = ctx.splats
    key = id(op)
    if key in memo:
        return memo[key]
    hint = op.hint
    if hint is not None:  # a deferred splat constant: its element, without building the array
        s = memo[key] = hint.scalar() if hint.size else None
        return s
    s = memo[key] = _splat_scalar(op.attrs["value"])
    return s


def _splat_scalar(arr: Any) -> Any | None:
    import numpy as np

    if type(arr) is np.ndarray and arr.size:
        ndim = arr.ndim
        if ndim == 0 or not any(arr.strides):  # a scalar or a zero-strided splat view
            return arr[(0,) * ndim]
    if arr.size == 0 or not is_splat(arr):
        return None
    return np.asarray(arr).reshape(-1)[0]


def _is(ctx: RewriteContext, v: Value, target: float, negative_zero: bool | None = None) -> bool:
    s = _splat_value(ctx, v)
    if s is None or s != target:
        return False
    if negative_zero is not None and v.type.dtype.is_float:
        return (copysign(1.0, s) < 0.0) == negative_zero
    return True


def _same_type(a: Value, b: Value) -> bool:
    return a.type is b.type or a.type == b.type


def simplify_rule(op: Operation, xs: tuple[Value, ...], ctx: RewriteContext) -> Value | Operation | None:
    name = op.op
    res = op.result
    if name in ("mul", "add") and len(xs) == 2:
        for keep, other in ((xs[0], xs[1]), (xs[1], xs[0])):
            if not _same_type(keep, res):
                continue
            if name == "mul" and _is(ctx, other, 1):
                return keep
            if name == "add" and keep.type.dtype.is_float and _is(ctx, other, 0, negative_zero=True):
                return keep
            if name == "add" and keep.type.dtype.is_int and _is(ctx, other, 0):
                return keep
    if name == "sub" and _same_type(xs[0], res) and _is(ctx, xs[1], 0, negative_zero=False if xs[0].type.dtype.is_float else None):
        return xs[0]
    if name == "div" and _same_type(xs[0], res) and _is(ctx, xs[1], 1):
        return xs[0]
    if name == "convert" and xs[0].type.dtype is op.attrs["dtype"]:
        return xs[0]
    if name == "reshape":
        if _same_type(xs[0], res):
            return xs[0]
        inner = ctx.defining_op(xs[0])
        if inner is not None and inner.op == "reshape":
            return Operation("reshape", (inner.operands[0],), op.attrs, res, op.span)
    if name == "transpose":
        perm = tuple(op.attrs["permutation"])
        if perm == tuple(range(len(perm))):
            return xs[0]
        inner = ctx.defining_op(xs[0])
        if inner is not None and inner.op == "transpose":
            p = inner.attrs["permutation"]
            composed = tuple(p[i] for i in perm)
            if composed == tuple(range(len(composed))):
                return inner.operands[0]
            return Operation("transpose", (inner.operands[0],), {"permutation": composed}, res, op.span)
    if name == "slice" and _same_type(xs[0], res):
        full = all(s == 1 and b == 0 for b, s in zip(op.attrs["start"], op.attrs["step"]))
        if full:
            return xs[0]
    if name == "pad" and not any(op.attrs["lo"]) and not any(op.attrs["hi"]) and not any(op.attrs["interior"]):
        return xs[0]
    if name in ("reduce_sum", "reduce_max") and not op.attrs["axes"]:
        return xs[0]
    if name == "select":
        if xs[1] is xs[2] and _same_type(xs[1], res):
            return xs[1]
        pred = _splat_value(ctx, xs[0])
        if pred is not None:
            branch = xs[1] if bool(pred) else xs[2]
            if _same_type(branch, res):
                return branch
    return None


def algebraic_simplification(fn):
    return rewrite(fn, simplify_rule)
