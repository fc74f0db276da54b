"""Shape-rule building blocks shared by several ops (broadcasting, axis checks)."""

from __future__ import annotations

from typing import Any, Sequence

from mind.spec.dims import DimExpr, format_dim
from mind.spec.ops.base import ShapeContext, TensorType


def show_dim(d: Any) -> str:
    """A dim in a message: canonical text for ints and ``DimExpr``, ``str`` for anything else (a Z3
    term when a rule runs in the verifier)."""
    return format_dim(d) if isinstance(d, (int, DimExpr)) else str(d)


def fmt_shape(shape: Sequence[Any]) -> str:
    return "[" + ", ".join(show_dim(d) for d in shape) + "]"


def broadcast(ctx: ShapeContext, label: str, *shapes: Sequence[Any]) -> tuple[Any, ...]:
    """NumPy broadcasting: right-align, pad with 1s; per axis equal, or one side is 1.

    The result dim is ``ite(a == 1, b, a)``, so with a symbol ``B`` against ``1`` it stays ``B``
    (true whether or not ``B`` is 1), and ``B`` against ``3`` is undecided rather than merged.
    """
    fast = broadcast_fast(shapes)
    return fast if fast is not None else broadcast_general(ctx, label, *shapes)


def broadcast_general(ctx: ShapeContext, label: str, *shapes: Sequence[Any]) -> tuple[Any, ...]:
    """``broadcast`` with every condition built and checked through ``ctx`` (``broadcast_fast``
    gives the same result without them wherever it applies)."""
    A = ctx.A
    rank = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    out: list[Any] = []
    for axis in range(rank):
        dims = [p[axis] for p in padded]
        acc = dims[0]
        for other in dims[1:]:
            a, b = acc, other
            ctx.require(label, A.or_(A.eq(a, b), A.eq(a, 1), A.eq(b, 1)),
                        lambda a=a, b=b, axis=axis: (
                            f"shapes {' and '.join(fmt_shape(s) for s in shapes)} do not broadcast: "
                            f"axis {axis - rank} has extents {format_dim(a)} and {format_dim(b)}"),
                        help="extents must be equal, or one of them 1")
            if type(b) is int and b == 1:  # ite(a == 1, 1, a) is a, whether or not a is 1
                continue
            if type(a) is int and a == 1:
                acc = b
                continue
            acc = ctx.dim_choice(label, lambda a=a, b=b: A.ite(A.eq(a, 1), b, a))
        out.append(acc)
    return tuple(out)


def broadcast_fast(shapes: Sequence[Sequence[Any]]) -> tuple[Any, ...] | None:
    """The common cases without building conditions: per axis the extents are structurally equal
    (ints, or the same symbolic ``DimExpr``), or all but one are the literal 1.  These are exactly
    the axes where ``broadcast``'s conditions are trivially true and its ``ite`` picks the other
    extent; anything else (a symbol against another extent, a mismatch, a Z3 term in the verifier)
    returns None and the general path decides, with its label."""
    rank = 0
    for s in shapes:
        for d in s:
            if type(d) is not int and type(d) is not DimExpr:
                return None
        if len(s) > rank:
            rank = len(s)
    if len(shapes) == 2:
        a, b = shapes
        if a == b:  # equal shapes (the common case) broadcast to themselves
            return tuple(a)
        if not b and type(a) is tuple:  # against a scalar
            return a
        if not a and type(b) is tuple:
            return b
        if len(b) < len(a) and a[len(a) - len(b):] == b:  # e.g. a bias row against its matrix
            return tuple(a)
        if len(a) < len(b) and b[len(b) - len(a):] == a:
            return tuple(b)
    out: list[Any] = [1] * rank
    for s in shapes:
        offset = rank - len(s)
        for i, d in enumerate(s):
            cur = out[offset + i]
            if d == cur or d == 1:
                continue
            if cur == 1:
                out[offset + i] = d
            else:
                return None  # incompatible or undecided: the general path reports it with its label
    return tuple(out)


def same_dtype(ctx: ShapeContext, label: str, types: Sequence[TensorType]) -> None:
    first = types[0].dtype
    for t in types[1:]:
        if t.dtype is first:  # ``require`` of True does nothing
            continue
        ctx.require(label, False,
                    lambda t=t: f"operand dtypes differ: {first.value} and {t.dtype.value}",
                    help="insert a `convert` to make the dtypes equal")


def check_axes(ctx: ShapeContext, range_label: str, order_label: str, axes: Sequence[int],
               rank: int) -> None:
    """Axes lie in [0, rank) and are strictly increasing (so unique and canonical)."""
    for a in axes:
        ctx.require(range_label, 0 <= a < rank, lambda a=a: f"axis {a} is out of range for rank {rank}",
                    help=f"axes are in [0, {rank})")
    for a, b in zip(axes, axes[1:]):
        ctx.require(order_label, a < b, lambda: f"axes {list(axes)} are not unique and increasing")

