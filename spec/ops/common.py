"""Shape-rule building blocks shared by several ops (broadcasting, axis checks)."""

from __future__ import annotations

from typing import Any, Sequence

from mind.spec.dims import format_dim
from mind.spec.ops.base import ShapeContext, TensorType


def _fmt(shape: Sequence[Any]) -> str:
    return "[" + ", ".join(format_dim(d) if isinstance(d, int) or hasattr(d, "terms") else str(d)
                           for d in shape) + "]"


def broadcast(ctx: ShapeContext, label: str, *shapes: Sequence[Any]) -> tuple[Any, ...]:
    """NumPy broadcasting: right-align, pad with 1s; per axis equal, or one side is 1.

    The result dim is ``ite(a == 1, b, a)``, so with a symbol ``B`` against ``1`` it stays ``B``
    (true whether or not ``B`` is 1), and ``B`` against ``3`` is undecided rather than merged.
    """
    fast = broadcast_ints(shapes)
    if fast is not None:
        return fast
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
                            f"shapes {' and '.join(_fmt(s) for s in shapes)} do not broadcast: "
                            f"axis {axis - rank} has extents {format_dim(a)} and {format_dim(b)}"),
                        help="extents must be equal, or one of them 1")
            acc = ctx.dim_choice(label, lambda a=a, b=b: A.ite(A.eq(a, 1), b, a))
        out.append(acc)
    return tuple(out)


def broadcast_ints(shapes: Sequence[Sequence[Any]]) -> tuple[int, ...] | None:
    """The common case of concrete, compatible shapes, without building conditions; None otherwise."""
    rank = 0
    for s in shapes:
        for d in s:
            if type(d) is not int:
                return None
        if len(s) > rank:
            rank = len(s)
    if len(shapes) == 2:
        a, b = shapes
        if a == b:  # equal concrete shapes (the common case) broadcast to themselves
            return tuple(a)
        if not b and type(a) is tuple:  # against a scalar
            return a
        if not a and type(b) is tuple:
            return b
        if len(b) < len(a) and a[len(a) - len(b):] == b:  # e.g. a bias row against its matrix
            return tuple(a)
        if len(a) < len(b) and b[len(b) - len(a):] == a:
            return tuple(b)
    out = [1] * rank
    for s in shapes:
        offset = rank - len(s)
        for i, d in enumerate(s):
            cur = out[offset + i]
            if d == cur or d == 1:
                continue
            if cur == 1:
                out[offset + i] = d
            else:
                return None  # incompatible: the general path reports it with its label
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


def fmt_shape(shape: Sequence[Any]) -> str:
    return _fmt(shape)
