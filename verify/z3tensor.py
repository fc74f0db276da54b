"""Tensors as element functions on Z3 terms: each op's index map, over concrete or symbolic shapes.

A ``Tensor`` is a dtype, a shape (ints or Z3 integer terms) and ``at(index)``, the element at a
multi-index, plus ``flat(k)``, the element at a row-major position (what ``reshape`` reads).
Element values come from a scalar algebra (``z3scalars``), so the same index maps serve

* translation validation (``equiv``): concrete shapes, indices are Python ints, every element of a
  result is a term over the input elements;
* rewrite proofs (``rewrites``): symbolic shapes and attributes, a symbolic in-bounds index.

The index maps transcribe the spec's semantics formulas (``spec/ops``): broadcasting reads axis
``a`` of an operand at 0 when its extent is 1; ``transpose`` reads ``operand[j]`` with
``j[permutation[k]] = i[k]``; ``slice`` reads ``start + i·step``; ``pad`` reads ``operand[q]`` where
``i = lo + q·(interior + 1)`` and ``0 ≤ q < n``, else the padding value; ``reshape`` keeps the
row-major position.  Over symbolic shapes the row-major position is an uninterpreted function of
the shape and the index (``Flattening``): a proof then holds for every numbering of the elements,
the row-major one included, and needs no nonlinear arithmetic.

``Unsupported`` is raised where a map needs a concrete extent (a reduction over symbolic axes, a
contraction): the callers turn it into an ``unknown`` verdict.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Mapping, Sequence

import z3

from mind.spec.dtypes import DType
from mind.verify.z3arith import Z3_ARITH

A = Z3_ARITH


class Unsupported(Exception):
    """An index map that needs concrete extents (or an op the tensor model does not cover)."""


def _isint(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


class Flattening:
    """Row-major positions: exact arithmetic for concrete shapes; uninterpreted functions of the
    shape and index for symbolic ones (``flat_r(shape, index)`` and its inverse per axis)."""

    def __init__(self) -> None:
        self._funcs: dict[tuple, Any] = {}

    def _f(self, name: str, arity: int) -> Any:
        key = (name, arity)
        f = self._funcs.get(key)
        if f is None:
            f = self._funcs[key] = z3.Function(f"{name}{arity}", *([z3.IntSort()] * arity), z3.IntSort())
        return f

    def flatten(self, shape: Sequence[Any], idx: Sequence[Any]) -> Any:
        if all(_isint(d) for d in shape) and all(_isint(i) for i in idx):
            k = 0
            for d, i in zip(shape, idx):
                k = k * d + i
            return k
        r = len(shape)
        return self._f("flat", 2 * r)(*[_z(d) for d in shape], *[_z(i) for i in idx]) if r else z3.IntVal(0)

    def unflatten(self, shape: Sequence[Any], k: Any) -> tuple[Any, ...]:
        if all(_isint(d) for d in shape) and _isint(k):
            out = []
            for d in reversed(shape):
                out.append(k % d if d else 0)
                k = k // d if d else 0
            return tuple(reversed(out))
        r = len(shape)
        return tuple(self._f(f"unflat{a}_", r + 1)(*[_z(d) for d in shape], _z(k)) for a in range(r))


def _z(x: Any) -> Any:
    return z3.IntVal(x) if _isint(x) else x


class Tensor:
    """``dtype``, ``shape``, ``at(index)`` and ``flat(k)``; ``array``: the NumPy value when the
    tensor is a known constant (translation validation folds ops on those by the reference)."""

    __slots__ = ("dtype", "shape", "_at", "_flat", "array", "_memo")

    def __init__(self, dtype: DType, shape: tuple[Any, ...], at: Callable[[tuple], Any],
                 flat: Callable[[Any], Any] | None, fl: Flattening, array: Any = None) -> None:
        self.dtype = dtype
        self.shape = shape
        self._at = at
        self._flat = flat if flat is not None else (lambda k: at(fl.unflatten(shape, k)))
        self.array = array
        self._memo: dict[tuple, Any] | None = {} if all(_isint(d) for d in shape) else None

    def at(self, idx: tuple) -> Any:
        memo = self._memo
        if memo is not None:
            hit = memo.get(idx)
            if hit is None:
                hit = memo[idx] = self._at(idx)
            return hit
        return self._at(idx)

    def flat(self, k: Any) -> Any:
        return self._flat(k)

    @property
    def rank(self) -> int:
        return len(self.shape)


def leaf(name: str, dtype: DType, shape: tuple[Any, ...], alg: Any, fl: Flattening) -> Tensor:
    """An input tensor: independent elements.  Concrete shapes: one constant per element
    (``name[i,j]``); symbolic: one uninterpreted function of the row-major position."""
    if all(_isint(d) for d in shape):
        cells: dict[int, Any] = {}

        def flat(k: int) -> Any:
            e = cells.get(k)
            if e is None:
                idx = fl.unflatten(shape, k)
                e = cells[k] = alg.leaf(f"{name}[{','.join(map(str, idx))}]", dtype)
            return e
        return Tensor(dtype, shape, lambda i: flat(fl.flatten(shape, i)), flat, fl)
    f = z3.Function(f"{name}_elements", z3.IntSort(), alg.sort(dtype))
    return Tensor(dtype, shape, lambda i: f(fl.flatten(shape, i)), lambda k: f(_z(k)), fl)


def splat(dtype: DType, shape: tuple[Any, ...], element: Any, fl: Flattening) -> Tensor:
    return Tensor(dtype, shape, lambda i: element, lambda k: element, fl)


def constant(arr: Any, dtype: DType, alg: Any, fl: Flattening) -> Tensor:
    """A NumPy constant (concrete shape)."""
    import numpy as np

    shape = tuple(int(d) for d in arr.shape)
    flat_arr = np.asarray(arr).reshape(-1)
    return Tensor(dtype, shape, lambda i: alg.literal(dtype, flat_arr[fl.flatten(shape, i)]),
                  lambda k: alg.literal(dtype, flat_arr[k]), fl, array=np.asarray(arr))


# ------------------------------------------------------------------------------------------------
# index maps, one per op: (operands, attrs, result dtype and shape, algebra, flattening) -> Tensor
# ------------------------------------------------------------------------------------------------


def broadcast_index(shape: tuple[Any, ...], idx: tuple[Any, ...]) -> tuple[Any, ...]:
    """The index of an operand of ``shape`` read at result index ``idx`` (right-aligned; an axis of
    extent 1 is read at 0)."""
    off = len(idx) - len(shape)
    return tuple(A.ite(A.eq(d, 1), 0, idx[off + a]) for a, d in enumerate(shape))


def _elementwise(fn: Callable[..., Any]) -> Callable[..., Tensor]:
    def build(xs: Sequence[Tensor], attrs: Mapping[str, Any], dtype: DType, shape: tuple, alg: Any,
              fl: Flattening) -> Tensor:
        def at(i: tuple) -> Any:
            return fn(alg, xs, attrs, [x.at(broadcast_index(x.shape, i)) for x in xs])
        return Tensor(dtype, shape, at, None, fl)
    return build


def _reshape(xs, attrs, dtype, shape, alg, fl):
    x = xs[0]
    return Tensor(dtype, shape, lambda i: x.flat(fl.flatten(shape, i)), x.flat, fl)


def _transpose(xs, attrs, dtype, shape, alg, fl):
    x = xs[0]
    perm = tuple(attrs["permutation"])

    def at(i: tuple) -> Any:
        if all(_isint(p) for p in perm):
            j: list[Any] = [0] * len(perm)
            for k, p in enumerate(perm):
                j[p] = i[k]
            return x.at(tuple(j))
        # symbolic permutation: axis a of the operand is the result axis k with perm[k] = a
        out = []
        for a in range(len(perm)):
            e = i[-1]
            for k in range(len(perm) - 2, -1, -1):
                e = A.ite(A.eq(perm[k], a), i[k], e)
            out.append(e)
        return x.at(tuple(out))
    return Tensor(dtype, shape, at, None, fl)


def _slice(xs, attrs, dtype, shape, alg, fl):
    x = xs[0]
    start, step = attrs["start"], attrs["step"]
    return Tensor(dtype, shape, lambda i: x.at(tuple(b + k * s for b, k, s in zip(start, i, step))), None, fl)


def _pad(xs, attrs, dtype, shape, alg, fl):
    x, value = xs
    lo, interior = attrs["lo"], attrs["interior"]

    def at(i: tuple) -> Any:
        conds, q = [], []
        for j, n, l, s in zip(i, x.shape, lo, interior):
            off = j - l
            if _isint(off) and _isint(s):
                hit = off >= 0 and off % (s + 1) == 0 and off // (s + 1) < n
                conds.append(hit)
                q.append(off // (s + 1))
                continue
            zoff, step = _z(off), _z(s) + 1
            conds.append(z3.And(zoff >= 0, zoff % step == 0, zoff / step < _z(n)))
            q.append(zoff / step)
        cond = A.and_(*conds)
        if cond is True:
            return x.at(tuple(q))
        if cond is False:
            return value.at(())
        return z3.If(cond, x.at(tuple(q)), value.at(()))
    return Tensor(dtype, shape, at, None, fl)


def _window(x: Tensor, axes: Sequence[int], keepdims: bool, i: tuple) -> list[tuple]:
    """The operand indices reduced into result index ``i`` (row-major order)."""
    extents = [x.shape[a] for a in axes]
    if not all(_isint(e) for e in extents):
        raise Unsupported("a reduction over an axis of symbolic extent")
    if keepdims:
        base = list(i)
    else:
        base = []
        it = iter(i)
        for a in range(x.rank):
            base.append(0 if a in axes else next(it))
    out = []
    for combo in itertools.product(*[range(e) for e in extents]):
        idx = list(base)
        for a, k in zip(axes, combo):
            idx[a] = k
        out.append(tuple(idx))
    return out


def _reduce_sum(xs, attrs, dtype, shape, alg, fl):
    x = xs[0]
    axes, keep = tuple(attrs["axes"]), bool(attrs["keepdims"])
    return Tensor(dtype, shape, lambda i: alg.sum(dtype, [x.at(j) for j in _window(x, axes, keep, i)]), None, fl)


def _reduce_max(xs, attrs, dtype, shape, alg, fl):
    x = xs[0]
    axes, keep = tuple(attrs["axes"]), bool(attrs["keepdims"])

    def at(i: tuple) -> Any:
        m = alg.max_identity(dtype)
        for j in _window(x, axes, keep, i):
            m = alg.max(dtype, m, x.at(j))
        return m
    return Tensor(dtype, shape, at, None, fl)


def _gather(xs, attrs, dtype, shape, alg, fl):
    x, idx = xs
    axis = attrs["axis"]
    n = x.shape[axis]
    if not _isint(n):
        raise Unsupported("gather from an axis of symbolic extent")

    def at(i: tuple) -> Any:
        pre, mid, post = i[:axis], i[axis:axis + idx.rank], i[axis + idx.rank:]
        if n == 0:
            return alg.zero(dtype)
        c = idx.at(tuple(mid))
        e = x.at((*pre, n - 1, *post))
        for k in range(n - 2, -1, -1):  # clamp(c, 0, n - 1) is the first k with c ≤ k
            e = alg.select(alg.index_at_most(idx.dtype, c, k), x.at((*pre, k, *post)), e)
        return e
    return Tensor(dtype, shape, at, None, fl)


def _matmul(xs, attrs, dtype, shape, alg, fl):
    a, b = xs
    k_extent = a.shape[-1]
    if not _isint(k_extent):
        raise Unsupported("matmul with a symbolic contracting dimension")

    def at(i: tuple) -> Any:
        batch, m, n = i[:-2], i[-2], i[-1]
        ba = broadcast_index(a.shape[:-2], batch)
        bb = broadcast_index(b.shape[:-2], batch)
        return alg.dot(dtype, [a.at((*ba, m, k)) for k in range(k_extent)],
                       [b.at((*bb, k, n)) for k in range(k_extent)])
    return Tensor(dtype, shape, at, None, fl)


def _conv2d(xs, attrs, dtype, shape, alg, fl):
    x, w = xs
    if not all(_isint(d) for d in (*x.shape, *w.shape)):
        raise Unsupported("conv2d with symbolic extents")
    kh, kw, cin, _ = w.shape
    strides, padding = attrs["strides"], attrs["padding"]
    ld, rd = attrs["lhs_dilation"], attrs["rhs_dilation"]
    zero = alg.zero(dtype)

    def source(p: int, axis: int) -> int | None:
        """The input position read at padded-and-dilated position p of spatial axis ``axis``."""
        q = p - padding[axis][0]
        if q < 0 or q % ld[axis]:
            return None
        q //= ld[axis]
        return q if q < x.shape[1 + axis] else None

    def at(i: tuple) -> Any:
        nb, oy, ox, co = i
        lhs, rhs = [], []
        for ky in range(kh):
            for kx in range(kw):
                sy = source(oy * strides[0] + ky * rd[0], 0)
                sx = source(ox * strides[1] + kx * rd[1], 1)
                for ci in range(cin):
                    lhs.append(zero if sy is None or sx is None else x.at((nb, sy, sx, ci)))
                    rhs.append(w.at((ky, kx, ci, co)))
        return alg.dot(dtype, lhs, rhs)
    return Tensor(dtype, shape, at, None, fl)


MAPS: dict[str, Callable[..., Tensor]] = {
    "add": _elementwise(lambda alg, xs, attrs, e: alg.arith("add", xs[0].dtype, e[0], e[1])),
    "sub": _elementwise(lambda alg, xs, attrs, e: alg.arith("sub", xs[0].dtype, e[0], e[1])),
    "mul": _elementwise(lambda alg, xs, attrs, e: alg.arith("mul", xs[0].dtype, e[0], e[1])),
    "div": _elementwise(lambda alg, xs, attrs, e: alg.arith("div", xs[0].dtype, e[0], e[1])),
    "exp": _elementwise(lambda alg, xs, attrs, e: alg.exp(xs[0].dtype, e[0])),
    "log": _elementwise(lambda alg, xs, attrs, e: alg.log(xs[0].dtype, e[0])),
    "compare": _elementwise(lambda alg, xs, attrs, e: alg.compare(attrs["direction"], xs[0].dtype, e[0], e[1])),
    "select": _elementwise(lambda alg, xs, attrs, e: alg.select(e[0], e[1], e[2])),
    "convert": _elementwise(lambda alg, xs, attrs, e: alg.convert(xs[0].dtype, attrs["dtype"], e[0])),
    "reshape": _reshape, "transpose": _transpose, "slice": _slice, "pad": _pad,
    "reduce_sum": _reduce_sum, "reduce_max": _reduce_max, "gather": _gather,
    "matmul": _matmul, "conv2d": _conv2d,
}


def apply(op: str, xs: Sequence[Tensor], attrs: Mapping[str, Any], dtype: DType, shape: tuple[Any, ...],
          alg: Any, fl: Flattening) -> Tensor:
    """The result of ``op`` on ``xs`` (its type given: from the IR, or from the spec's shape rule)."""
    build = MAPS.get(op)
    if build is None:
        raise Unsupported(f"no index map for `{op}`")
    return build(xs, attrs, dtype, tuple(shape), alg, fl)
