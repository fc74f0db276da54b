"""Indexing and slicing ``x[...]``, and assignment to a window ``x[...] = v``.

Each item of ``x[i, a:b:k, ..., idx]`` is, per axis: an integer known at compile time (the axis is
dropped), a slice with bounds known at compile time (Python's rules: negative bounds count from the
end, out-of-range bounds clamp, a negative step walks backwards), ``...`` (as many full axes as
needed), a range ``a..b`` (a slice), or an integer tensor computed at run time (NumPy's indexing
with an array: a ``gather`` along that axis; a negative index counts from the end).  Lowering: one
``slice`` for every window, a ``reshape`` that drops the integer-indexed axes, then a ``gather``
for the tensor index (at most one).

``x[...] = v`` gives ``x`` a new value: the window's elements are ``v`` (broadcast), the rest are
``x``'s: ``select(mask, pad(v), x)`` where ``pad`` places ``v`` into the window and ``mask`` is the
window padded likewise (steps become interior padding).  It needs static extents and positive steps.
"""

from __future__ import annotations

from typing import Any

from mind.ir.core import Value
from mind.spec.dims import format_dim
from mind.spec.dtypes import DType

from . import ast as A
from .values import POISON, ArrLit, Lit, StructVal, Tup

Item = tuple  # ("full",) | ("int", i, span) | ("slice", (start, stop, step), span) | ("tensor", v, span)


def py_slice(n: Any, start: int | None, stop: int | None, step: int) -> tuple[Any, Any]:
    """Python's slice bounds for an axis of extent ``n`` (``step`` ≠ 0), as the IR's ``slice``
    takes them; with a symbolic ``n``, negative bounds count from the end and nothing is clamped."""
    if type(n) is int:
        b, e, _ = slice(start, stop, step).indices(n)
        if step < 0 and e < -1:
            e = -1
        return b, e

    def norm(v: int | None, default: Any) -> Any:
        if v is None:
            return default
        return n + v if v < 0 else v
    if step > 0:
        return norm(start, 0), norm(stop, n)
    return norm(start, n - 1), norm(stop, -1) if stop is not None else -1


def index_expr(E: Any, node: A.Index) -> Any:
    called = E.builtin_named(node.value)
    if called is not None:  # `tensor.zeros[f64, (n,)]`: an old call form
        inside = E.source_text((node.items[0].span[0], node.items[-1].span[1])) if node.items else ""
        raise E.fail("E2009", f"the builtin `{called}` is called with parentheses", node.span,
                     f"write `{called}({inside})`")
    base = E.ev(node.value)
    if base is POISON:
        return POISON
    if type(base) in (Tup, StructVal):
        items = base.items
        if len(node.items) == 1 and type(node.items[0]) not in (A.SliceItem, A.EllipsisItem, A.Range):
            i = E.static_int(node.items[0], "a tuple index")
            if -len(items) <= i < len(items):
                return items[i]
            raise E.fail("E3006", f"index {i} is out of range for a tuple of {len(items)}", node.items[0].span)
        raise E.fail("E2009", "a tuple is indexed by one integer known at compile time", node.span)
    if type(base) is ArrLit or type(base) is Lit:
        base = E.materialize(base)
    x = E.tensor(base, node.value.span, "the indexed value")
    return basic_index(E, x, items_of(E, x, node), node.span)


def items_of(E: Any, x: Value, node: A.Index) -> list[Item]:
    """The items of ``node`` normalized to one per axis of ``x``."""
    rank = x.type.rank
    raw = node.items
    ellipses = [i for i, it in enumerate(raw) if type(it) is A.EllipsisItem]
    if len(ellipses) > 1:
        raise E.fail("E2009", "an index has at most one `...`", raw[ellipses[1]].span)
    n_axes = len(raw) - len(ellipses)
    if n_axes > rank:
        raise E.fail("E3004", f"too many indices: {n_axes} for a tensor of rank {rank} ({x.type})",
                     node.span, "index each axis at most once")
    items: list[Item] = []
    for it in raw:
        t = type(it)
        if t is A.EllipsisItem:
            items.extend([("full",)] * (rank - n_axes))
        elif t is A.SliceItem:
            step = 1 if it.step is None else E.static_int(it.step, "a slice step")
            start = None if it.start is None else E.static_int(it.start, "a slice bound")
            stop = None if it.stop is None else E.static_int(it.stop, "a slice bound")
            items.append(("slice", (start, stop, step), it.span))
        elif t is A.Range:
            start = None if it.start is None else E.static_int(it.start, "a range bound")
            stop = None if it.stop is None else E.static_int(it.stop, "a range bound")
            if it.inclusive and stop is not None:
                stop = stop + 1 if stop != -1 else None
            items.append(("slice", (start, stop, 1), it.span))
        else:
            items.append(_index_item(E, it))
    items.extend([("full",)] * (rank - len(items)))
    return items


def _index_item(E: Any, node: A.Expr) -> Item:
    v = E.ev(node)
    if v is POISON:
        raise E.Reported()
    if type(v) is Lit:
        if v.kind != "int":
            raise E.fail("E2004", f"an index must be an integer, found a {v.kind} literal", node.span)
        return ("int", v.value, node.span)
    if type(v) is ArrLit:
        v = E.materialize(v)
    if type(v) is not Value:
        raise E.fail("E2009", "an index is an integer, a slice `a:b:k`, `...` or an integer tensor",
                     node.span)
    dt = v.type.dtype
    if dt is DType.BOOL:
        raise E.fail("E3011", "indexing with a bool mask gives a shape known only at run time",
                     node.span, "choose elementwise instead: `where(mask, x, 0.0)`")
    if not dt.is_int:
        raise E.fail("E2004", f"an index must be an integer, found {E.fmt_type(v.type)}", node.span,
                     "`cast(i, i32)` it")
    if v.type.rank == 0:
        known = E.static.of(v)
        if known is not None:
            return ("int", int(known), node.span)
    return ("tensor", v, node.span)


def basic_index(E: Any, x: Value, items: list[Item], off: tuple[int, int]) -> Value:
    shape = x.type.shape
    rank = len(shape)
    start, stop, step = [0] * rank, list(shape), [1] * rank
    sliced = False
    drop: list[int] = []
    tensors: list[tuple[int, Value, Any]] = []
    for ax, it in enumerate(items):
        kind = it[0]
        if kind == "int":
            i, span = it[1], it[2]
            n = shape[ax]
            if type(n) is int:
                if not -n <= i < n:
                    raise E.fail("E3006", f"index {i} is out of bounds for axis {ax} of extent {n}", span,
                                 f"indices are in [{-n}, {n})")
                i = i + n if i < 0 else i
            elif i < 0:
                i = n + i
            start[ax], stop[ax] = i, i + 1
            drop.append(ax)
            sliced = True
        elif kind == "slice":
            s, e, k = it[1]
            if k == 0:
                raise E.fail("E3006", "slice step cannot be 0", it[2])
            start[ax], stop[ax] = py_slice(shape[ax], s, e, k)
            step[ax] = k
            sliced = True
        elif kind == "tensor":
            tensors.append((ax, it[1], it[2]))
    y = x
    if sliced:
        y = E.emit("slice", (x,), off, "[]", start=tuple(start), stop=tuple(stop), step=tuple(step))
    if drop:
        y = E.emit("reshape", (y,), off, "[]",
                   shape=tuple(d for i, d in enumerate(y.type.shape) if i not in drop))
    if len(tensors) > 1:
        raise E.fail("E2009", "at most one index may be a tensor", tensors[1][2],
                     "index one axis at a time: `x[i][:, j]`")
    for ax, idx, span in tensors:
        pos = ax - sum(1 for d in drop if d < ax)
        n = y.type.shape[pos]
        if type(n) is int:  # a negative index counts from the end (gather would clamp it to 0)
            dt = idx.type.dtype
            zero = E.const(0, dt)
            idx = E.emit("select", (E.emit("compare", (idx, zero), span, "[]", direction="lt"),
                                    E.emit("add", (idx, E.const(n, dt)), span, "[]"), idx), span, "[]")
        y = E.emit("gather", (y, idx), off, "[]", axis=pos)
    return y


def take_row(E: Any, x: Value, i: int, off: tuple[int, int]) -> Value:
    """``x[i]`` for an integer ``i`` known at compile time."""
    return basic_index(E, x, [("int", i, off)] + [("full",)] * (x.type.rank - 1), off)


def index_update(E: Any, base: Any, target: A.Index, new: Any) -> Value:
    """The value of ``base`` after ``base[...] = new``."""
    if type(base) is ArrLit:
        base = E.materialize(base)
    x = E.tensor(base, target.value.span, "the indexed value")
    items = items_of(E, x, target)
    shape = x.type.shape
    lo, hi, interior, window, drop = [], [], [], [], []
    for ax, it in enumerate(items):
        n = shape[ax]
        if type(n) is not int:
            raise E.fail("E3011", f"assigning to a window of an axis of symbolic extent {format_dim(n)}",
                         target.span, "give the axis a concrete size")
        kind = it[0]
        if kind == "tensor":
            raise E.fail("E2009", "assigning through a tensor index is not supported", it[2],
                         "use integers or slices known at compile time")
        if kind == "full":
            s, m, k = 0, n, 1
        elif kind == "int":
            i = it[1]
            if not -n <= i < n:
                raise E.fail("E3006", f"index {i} is out of bounds for axis {ax} of extent {n}", it[2])
            s, m, k = (i + n if i < 0 else i), 1, 1
            drop.append(ax)
        else:
            a, b, k = it[1]
            if k <= 0:
                raise E.fail("E2009", "assigning to a slice with a step ≤ 0 is not supported", it[2],
                             "write the window with a positive step")
            s, e = py_slice(n, a, b, k)
            m = max(0, -(-(e - s) // k))
        window.append(m)
        lo.append(s)
        interior.append(k - 1)
        hi.append(n - (s + (m - 1) * k + 1) if m else n - s)
    dt = x.type.dtype
    if type(new) in (Lit, ArrLit):
        new = E.materialize(new, dt)
    v = E.tensor(new, target.span, "the assigned value")
    if v.type.dtype is not dt:
        raise E.fail("E2004", f"assigning {E.fmt_type(v.type)} into {E.fmt_type(x.type)}", target.span,
                     f"`cast(..., {dt.value})` the value")
    off = target.span
    if v.type.rank == len(window) - len(drop) and drop:  # the window without the indexed axes
        v = E.emit("reshape", (v,), off, "[]=", shape=tuple(
            d for d in _with_ones(v.type.shape, drop, len(window))))
    true = E.splat(True, DType.BOOL, tuple(window), off)
    fill = E.const(False if dt is DType.BOOL else 0, dt)
    vb = E.emit("select", (true, v, E.splat(False if dt is DType.BOOL else 0, dt, tuple(window), off)),
                off, "[]=")
    attrs = {"lo": tuple(lo), "hi": tuple(hi), "interior": tuple(interior)}
    placed = E.emit("pad", (vb, fill), off, "[]=", **attrs)
    mask = E.emit("pad", (true, E.const(False, DType.BOOL)), off, "[]=", **attrs)
    return E.emit("select", (mask, placed, x), off, "[]=")


def _with_ones(shape: tuple, drop: list[int], rank: int) -> list[Any]:
    out = list(shape)
    for ax in sorted(drop):
        out.insert(ax, 1)
    assert len(out) == rank
    return out
