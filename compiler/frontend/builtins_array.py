"""Array builtins: ``eye``, ``arange``, ``linspace`` (constants), ``flatten``, ``stack``, ``take``,
``take_along_axis``, ``gather`` with one index per row, and the public spec's forms
``index(x, [i, j])`` and ``slice(x, starts, ends, steps)``.

Constants are computed here with NumPy's own definitions (so they are NumPy's values bit for bit)
and become ``const`` ops; the others are compositions of ``reshape``, ``pad``/``concat``,
``compare``/``select``/``reduce_sum``, ``gather`` and ``slice``.
"""

from __future__ import annotations

from typing import Any

from mind.ir.core import Value
from mind.spec.dtypes import DType

from . import ast as A
from .builtins import (REQUIRED, X, Args, _dtype_arg, _norm_axis, _reshape, b_index, b_slice,
                       concat_tensors, tensor_list)
from .builtins import b_gather as b_take
from .values import Lit

#: Elements of a constant made by ``eye``/``arange``/``linspace`` (E1012 beyond).
MAX_GENERATED = 1 << 22


def _const(a: Args, arr: Any, dt: DType) -> Value:
    if arr.size > MAX_GENERATED:
        raise a.fail("E1012", f"`{a.name}` would make {arr.size} elements (the limit is {MAX_GENERATED})",
                     None, "pass large tensors as parameters")
    return a.E.b.const_array(arr, None, dt)


def _number(a: Args, key: str) -> Lit:
    v = a.value(key)
    if type(v) is not Lit or v.kind == "bool":
        raise a.fail("E2009", f"`{key}` of `{a.name}` must be a number known at compile time", key)
    return v


def b_eye(a: Args) -> Any:
    import numpy as np

    n = a.int("n")
    m = a.int("m", n)
    if n < 0 or m < 0:
        raise a.fail("E3006", f"`eye` needs sizes ≥ 0, found {n} and {m}", "n")
    dt = _dtype_arg(a, "dtype") or DType.F32
    return _const(a, np.eye(n, m, dtype=dt.numpy), dt)


def b_arange(a: Args) -> Any:
    """``arange(stop)``, ``arange(start, stop[, step])``: NumPy's values; i32 for integer bounds,
    f32 when any bound is a float, unless ``dtype=`` is given."""
    import numpy as np

    first = _number(a, "start")
    if a.has("stop"):
        start, stop = first, _number(a, "stop")
    else:
        start, stop = Lit(0, "int", first.span), first
    step = _number(a, "step") if a.has("step") else Lit(1, "int", start.span)
    if step.value == 0:
        raise a.fail("E3006", "the step of `arange` cannot be 0", "step")
    floats = "float" in (start.kind, stop.kind, step.kind)
    dt = _dtype_arg(a, "dtype") or (DType.F32 if floats else DType.I32)
    vals = [float(v.value) if floats else int(v.value) for v in (start, stop, step)]
    count = max(0, int(np.ceil((vals[1] - vals[0]) / vals[2])))
    if count > MAX_GENERATED:
        raise a.fail("E1012", f"`arange` would make {count} elements (the limit is {MAX_GENERATED})")
    arr = np.arange(*vals, dtype=np.float64 if floats else np.int64)
    if dt.is_int and not floats:
        if arr.size and (arr.min() < dt.int_min or arr.max() > dt.int_max):
            raise a.fail("E2001", f"`arange` values do not fit in {dt.value}", None)
    return _const(a, arr.astype(dt.numpy), dt)


def b_linspace(a: Args) -> Any:
    """``linspace(start, stop, num)``: NumPy's values (computed in f64, both ends included),
    f32 unless ``dtype=`` is given."""
    import numpy as np

    start, stop = _number(a, "start"), _number(a, "stop")
    num = a.int("num", 50)
    if num < 0:
        raise a.fail("E3006", f"`linspace` needs num ≥ 0, found {num}", "num")
    dt = _dtype_arg(a, "dtype") or DType.F32
    if num > MAX_GENERATED:
        raise a.fail("E1012", f"`linspace` would make {num} elements (the limit is {MAX_GENERATED})")
    arr = np.linspace(float(start.value), float(stop.value), num)
    return _const(a, arr.astype(dt.numpy), dt)


def b_flatten(a: Args) -> Any:
    """All axes into one (``reshape`` to [-1])."""
    x = a.tensor("x")
    n: Any = 1
    arith = a.E.b.arith
    n = arith.prod(x.type.shape)
    return _reshape(a.E, x, [n], a.node.span, "flatten")


def b_stack(a: Args) -> Any:
    """``stack([a, b, ...], axis=0)``: each operand gets an axis of extent 1 at ``axis``, then
    ``concat`` joins them."""
    E = a.E
    xs, nodes = tensor_list(a)
    rank = xs[0].type.rank
    axis = _norm_axis(a, a.int("axis", 0), rank + 1, "axis")
    expanded = []
    for v in xs:
        shape = list(v.type.shape)
        shape.insert(axis, 1)
        expanded.append(_reshape(E, v, shape, a.node.span, "stack"))
    return concat_tensors(a, expanded, nodes, axis)


def _one_hot_pick(a: Args, x: Value, idx: Value, axis: int, keep: bool) -> Value:
    """``out[..., j, ...] = x[..., idx[..., j, ...], ...]`` along ``axis`` (idx has x's rank, or
    x's rank - 1 when ``keep`` is false, i.e. one index per row): compare each index with the
    positions of the axis and add up the one element selected (exact: the other terms are -0.0, or
    0 for integers).  Needs a static extent on ``axis``; out-of-range indices give 0."""
    import numpy as np

    E, off = a.E, a.node.span
    n = x.type.shape[axis]
    if type(n) is not int:
        raise a.fail("E3011", f"`{a.name}` along an axis of symbolic extent", "axis",
                     "give the axis a concrete size")
    r = x.type.rank
    # x as [..., 1, n, ...] (a new axis for the indices next to `axis`), idx as [..., k, 1, ...]
    xs = list(x.type.shape)
    xs.insert(axis, 1)
    x2 = _reshape(E, x, xs, off, a.name)
    ishape = list(idx.type.shape)
    if not keep:
        ishape.insert(axis, 1)
    ishape.insert(axis + 1, 1)
    i2 = _reshape(E, idx, ishape, off, a.name)
    pos_shape = [1] * (r + 1)
    pos_shape[axis + 1] = n
    pos = E.b.const_array(np.arange(n, dtype=idx.type.dtype.numpy).reshape(pos_shape), None, idx.type.dtype)
    hit = E.emit("compare", (i2, pos), off, a.name, direction="eq")
    dt = x.type.dtype
    fill = E.const(False if dt is DType.BOOL else (-0.0 if dt.is_float else 0), dt)
    picked = E.emit("select", (hit, x2, fill), off, a.name)
    if dt is DType.BOOL:
        picked = E.emit("convert", (picked,), off, a.name, dtype=DType.I32)
    out = E.emit("reduce_sum", (picked,), off, a.name, axes=(axis + 1,), keepdims=False)
    if dt is DType.BOOL:
        out = E.emit("compare", (out, E.const(0, DType.I32)), off, a.name, direction="ne")
    if not keep:
        out = _reshape(E, out, [d for i, d in enumerate(out.type.shape) if i != axis], off, a.name)
    return out


def _index_tensor(a: Args, key: str) -> Value:
    idx = a.tensor(key)
    if not idx.type.dtype.is_int:
        raise a.fail("E2005", f"the indices of `{a.name}` must be an integer tensor, found {idx.type}", key,
                     "`cast(idx, i32)` first")
    return idx


def b_take_along_axis(a: Args) -> Any:
    x = a.tensor("x")
    idx = _index_tensor(a, "idx")
    axis = _norm_axis(a, a.int("axis", -1), x.type.rank, "axis")
    if idx.type.rank != x.type.rank:
        raise a.fail("E3002", f"`take_along_axis` needs indices of x's rank {x.type.rank}, found "
                              f"{idx.type.rank}", "idx")
    return _one_hot_pick(a, x, idx, axis, keep=True)


def b_gather(a: Args) -> Any:
    """``gather(x, idx, axis)``: one index per row (``out[b] = x[b, idx[b]]``, the public
    cross-entropy pattern) when ``axis`` is not 0 and idx's shape is x's shape without ``axis``;
    otherwise NumPy's ``take`` (the Core IR ``gather``)."""
    x = a.tensor("x")
    idx = a.tensor("idx")
    rank = x.type.rank
    axis = _norm_axis(a, a.int("axis", 0), rank, "axis")
    rest = [d for i, d in enumerate(x.type.shape) if i != axis]
    if axis > 0 and idx.type.rank == rank - 1 and idx.type.dtype.is_int and \
            all(a.E.b.arith.eq(d, e) is True for d, e in zip(idx.type.shape, rest)):
        return _one_hot_pick(a, x, idx, axis, keep=False)
    return b_take(a)


def b_index_any(a: Args) -> Any:
    """``index(x, axis=a, i=k)`` (public compiler) or ``index(x, [i, j, ...])`` (public spec: one
    index per axis, a scalar result)."""
    n = a.nodes.get("axis")
    if not a.has("i") and n is not None and type(n) in (A.ArrayLit, A.TupleExpr):
        from .indexing import basic_index

        idxs = [a.E.static_int(e, "an index of `index`") for e in n.elts]
        x = a.tensor("x")
        if len(idxs) != x.type.rank:
            raise a.fail("E3002", f"`index` needs one index per axis: {x.type.rank}, found {len(idxs)}",
                         "axis")
        return basic_index(a.E, x, [("int", i, e.span) for i, e in zip(idxs, n.elts)], a.node.span)
    if not a.has("i") or n is None:
        raise a.fail("E2007", "`index` takes `axis=` and `i=`, or a list of indices: `index(x, [0, 1])`")
    return b_index(a)


def b_slice_any(a: Args) -> Any:
    """``slice(x, axis, start, end)`` (public compiler) or ``slice(x, starts, ends[, steps])`` (public
    spec: a list per argument, one entry per axis)."""
    n = a.nodes.get("axis")
    if n is not None and type(n) in (A.ArrayLit, A.TupleExpr):
        from .indexing import basic_index

        x = a.tensor("x")
        starts = a.E.static_ints(n, "a start of `slice`")
        ends = a.E.static_ints(a.nodes["start"], "an end of `slice`") if a.has("start") else None
        steps = a.E.static_ints(a.nodes["end"], "a step of `slice`") if a.has("end") else None
        r = x.type.rank
        if ends is None or len(starts) != r or len(ends) != r or (steps is not None and len(steps) != r):
            raise a.fail("E4007", f"`slice(x, starts, ends, steps)` needs one entry per axis ({r})", "axis")
        items = [("slice", (s, e, k), n.span) for s, e, k in zip(starts, ends, steps or [1] * r)]
        return basic_index(a.E, x, items, a.node.span)
    return b_slice(a)


TABLE: dict[str, tuple[tuple, Any]] = {
    "eye": ((("n", ("N", "rows"), REQUIRED), ("m", ("M", "cols"), None), ("dtype", (), None)), b_eye),
    "arange": ((("start", (), REQUIRED), ("stop", ("end",), None), ("step", (), None), ("dtype", (), None)),
               b_arange),
    "linspace": ((("start", (), REQUIRED), ("stop", ("end",), REQUIRED), ("num", ("steps", "n"), None),
                  ("dtype", (), None)), b_linspace),
    "flatten": (X, b_flatten),
    "stack": ((("xs", ("tensors",), REQUIRED), ("axis", ("dim",), None)), b_stack),
    "take": (X + (("idx", ("indices",), REQUIRED), ("axis", (), None)), b_take),
    "take_along_axis": (X + (("idx", ("indices",), REQUIRED), ("axis", ("dim",), None)), b_take_along_axis),
    "gather": (X + (("idx", ("indices",), REQUIRED), ("axis", ("dim",), None)), b_gather),
    "index": (X + (("axis", ("indices",), None), ("i", ("index",), None)), b_index_any),
    "slice": (X + (("axis", ("starts",), None), ("start", ("ends",), None), ("end", ("stop", "steps"), None)),
              b_slice_any),
}
