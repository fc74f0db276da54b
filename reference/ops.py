"""One function per Core IR op: readable transcriptions of the spec's semantics in NumPy.

This module *defines* what each op computes; every backend is tested against it.  Where NumPy's
behaviour differs from the spec (integer division, float→int conversion, signed zeros in max,
out-of-range gather indices, wrapping integer contractions) the spec's rule is written out here.

Float results are as accurate as the reference can cheaply be: f32 transcendental functions,
sums and contractions are computed in f64 and rounded once, so the reference sits well inside the
accuracy bounds the spec grants implementations.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from mind.spec.dtypes import DType
from mind.spec.ops import OPS

Array = np.ndarray


def _quiet() -> Any:
    """IEEE results without warnings: overflow, NaN and division by zero are defined outcomes."""
    return np.errstate(all="ignore")


def _contiguous(x: Array) -> Array:
    """A C-ordered array of the same shape (``np.ascontiguousarray`` would turn rank 0 into [1])."""
    return np.asarray(x, order="C")


def _wide(x: Array) -> Array:
    """The accumulation type: f32 → f64; ints → uint64 (wrapping arithmetic is defined there)."""
    if x.dtype == np.float32:
        return x.astype(np.float64)
    if x.dtype.kind == "i":
        return x.astype(np.int64).view(np.uint64)
    return x


def _narrow(x: Array, dtype: np.dtype) -> Array:
    """Back from the accumulation type: round floats once, wrap integers modulo 2**bits."""
    if dtype.kind == "i":
        return x.astype(np.uint64).astype(dtype.str.replace("i", "u")).view(dtype)
    with _quiet():
        return x.astype(dtype)


# ---------------------------------------------------------------------------------------------
# const and elementwise
# ---------------------------------------------------------------------------------------------

def const(*, value: Array) -> Array:
    return np.array(value)


def add(lhs: Array, rhs: Array) -> Array:
    with _quiet():
        return np.asarray(np.add(lhs, rhs, dtype=lhs.dtype))


def sub(lhs: Array, rhs: Array) -> Array:
    with _quiet():
        return np.asarray(np.subtract(lhs, rhs, dtype=lhs.dtype))


def mul(lhs: Array, rhs: Array) -> Array:
    with _quiet():
        return np.asarray(np.multiply(lhs, rhs, dtype=lhs.dtype))


def div(lhs: Array, rhs: Array) -> Array:
    if lhs.dtype.kind == "f":
        with _quiet():
            return np.asarray(np.true_divide(lhs, rhs, dtype=lhs.dtype))
    # Integers: truncate toward zero; x / 0 = 0; INT_MIN / -1 = INT_MIN (the wrapped quotient).
    a, b = np.broadcast_arrays(lhs, rhs)
    int_min = np.iinfo(lhs.dtype).min
    zero = b == 0
    overflow = (a == int_min) & (b == -1)
    b_safe = np.where(zero | overflow, 1, b)
    q = np.floor_divide(a, b_safe)
    r = a - q * b_safe
    q = q + ((r != 0) & ((a < 0) != (b_safe < 0)))  # floor → truncation when signs differ
    q = np.where(zero, 0, q)
    q = np.where(overflow, int_min, q)
    return np.asarray(q, dtype=lhs.dtype)


def _unary_float(fn: Callable[[Array], Array], x: Array) -> Array:
    with _quiet():
        return np.asarray(fn(x.astype(np.float64)).astype(x.dtype))


def exp(operand: Array) -> Array:
    return _unary_float(np.exp, operand)


def log(operand: Array) -> Array:
    return _unary_float(np.log, operand)


_COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal}


def compare(lhs: Array, rhs: Array, *, direction: str) -> Array:
    with _quiet():
        return np.asarray(_COMPARE[direction](lhs, rhs))


def select(pred: Array, on_true: Array, on_false: Array) -> Array:
    return np.asarray(np.where(pred, on_true, on_false), dtype=on_true.dtype)


def convert(operand: Array, *, dtype: DType) -> Array:
    target = dtype.numpy
    src = operand.dtype
    if dtype is DType.BOOL:
        return np.asarray(operand != 0)
    if src.kind == "f" and target.kind == "i":
        # Truncate toward zero, saturate out-of-range values, NaN → 0.
        x = operand.astype(np.float64)
        lo, hi = float(np.iinfo(target).min), float(np.iinfo(target).max) + 1.0  # 2**(bits-1), exact
        t = np.trunc(np.where(np.isnan(x), 0.0, x))
        inside = (t >= lo) & (t < hi)
        out = np.where(inside, t, 0.0).astype(target)
        out = np.where(t >= hi, np.iinfo(target).max, out)
        out = np.where(t < lo, np.iinfo(target).min, out)
        return np.asarray(out, dtype=target)
    if src.kind in "iub" and target.kind == "i":
        return _narrow(operand.astype(np.int64).view(np.uint64), target) if src.kind != "b" \
            else operand.astype(target)
    with _quiet():
        return np.asarray(operand.astype(target))


# ---------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------

def reduce_sum(operand: Array, *, axes: Sequence[int], keepdims: bool) -> Array:
    axes = tuple(axes)
    wide = _wide(operand)
    with _quiet():
        total = np.sum(wide, axis=axes, keepdims=keepdims, dtype=wide.dtype)
    return np.asarray(_narrow(np.asarray(total), operand.dtype))


def _max_identity(dtype: np.dtype) -> Any:
    if dtype.kind == "f":
        return -np.inf
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


def reduce_max(operand: Array, *, axes: Sequence[int], keepdims: bool) -> Array:
    axes = tuple(axes)
    with _quiet():
        m = np.max(operand, axis=axes, keepdims=keepdims, initial=_max_identity(operand.dtype))
        m = np.asarray(m, dtype=operand.dtype)
        if operand.dtype.kind == "f":
            # +0 is greater than -0: a window holding +0 whose maximum is zero yields +0.
            pos_zero = np.any((operand == 0) & ~np.signbit(operand), axis=axes, keepdims=keepdims)
            m = np.where((m == 0) & pos_zero, np.zeros_like(m), m)
            m = np.asarray(m, dtype=operand.dtype)
    return m


# ---------------------------------------------------------------------------------------------
# data movement
# ---------------------------------------------------------------------------------------------

def reshape(operand: Array, *, shape: Sequence[int]) -> Array:
    return np.reshape(operand, tuple(int(d) for d in shape)).copy()


def transpose(operand: Array, *, permutation: Sequence[int]) -> Array:
    return _contiguous(np.transpose(operand, tuple(permutation)))


def _window(start: int, stop: int, step: int) -> Array:
    """The indices start, start + step, … strictly before stop, in the direction of step."""
    if step > 0:
        size = max(0, -(-(stop - start) // step))
    else:
        size = max(0, -(-(start - stop) // -step))
    return start + step * np.arange(size, dtype=np.int64)


def slice(operand: Array, *, start: Sequence[int], stop: Sequence[int], step: Sequence[int]) -> Array:
    out = operand
    for axis, (b, e, s) in enumerate(zip(start, stop, step)):
        out = np.take(out, _window(int(b), int(e), int(s)), axis=axis)
    return _contiguous(out)


def pad(operand: Array, value: Array, *, lo: Sequence[int], hi: Sequence[int],
        interior: Sequence[int]) -> Array:
    shape = tuple(l + h + n + max(n - 1, 0) * i for n, l, h, i in zip(operand.shape, lo, hi, interior))
    out = np.full(shape, value, dtype=operand.dtype)
    positions = [l + (i + 1) * np.arange(n, dtype=np.int64) for n, l, i in zip(operand.shape, lo, interior)]
    if operand.ndim:
        out[np.ix_(*positions)] = operand
    else:
        out[()] = operand
    return out


def gather(operand: Array, indices: Array, *, axis: int) -> Array:
    n = operand.shape[axis]
    out_shape = operand.shape[:axis] + indices.shape + operand.shape[axis + 1:]
    if n == 0:
        return np.zeros(out_shape, dtype=operand.dtype)
    clamped = np.clip(indices.astype(np.int64), 0, n - 1)
    return _contiguous(np.take(operand, clamped, axis=axis))


# ---------------------------------------------------------------------------------------------
# contractions
# ---------------------------------------------------------------------------------------------

def _dot(a: Array, b: Array) -> Array:
    """``a @ b`` (batch dims broadcast) summed in one fixed order: k = 0, 1, …, K-1.

    Why not ``np.matmul``: on floats it calls BLAS, whose summation order (and so the last bits of
    the result) depends on the CPU it runs on; the oracle must give the same bits on every machine.
    Integer operands (``uint64``, wrapping) are exact in any order."""
    if a.dtype.kind != "f":
        return np.matmul(a, b)
    k = a.shape[-1]
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    acc = np.zeros(shape, dtype=a.dtype)
    term = np.empty(shape, dtype=a.dtype)
    for i in range(k):
        np.multiply(a[..., :, i:i + 1], b[..., i:i + 1, :], out=term)
        np.add(acc, term, out=acc)
    return acc


def matmul(lhs: Array, rhs: Array) -> Array:
    a, b = _wide(lhs), _wide(rhs)
    with _quiet():
        product = _dot(a, b)
    return np.asarray(_narrow(np.asarray(product), lhs.dtype))


def _dilate(x: Array, axis: int, d: int) -> Array:
    """Insert d - 1 zeros between neighbours along ``axis``."""
    n = x.shape[axis]
    if d == 1 or n == 0:
        return x
    shape = list(x.shape)
    shape[axis] = (n - 1) * d + 1
    out = np.zeros(shape, dtype=x.dtype)
    index = [np.s_[:]] * x.ndim
    index[axis] = np.s_[::d]
    out[tuple(index)] = x
    return out


def conv2d(input: Array, filter: Array, *, strides: Sequence[int], padding: Sequence[Sequence[int]],
           lhs_dilation: Sequence[int], rhs_dilation: Sequence[int]) -> Array:
    x, w = _wide(input), _wide(filter)
    for i in range(2):
        x = _dilate(x, 1 + i, lhs_dilation[i])
    (pt, pb), (pl, pr) = padding
    x = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    n, hp, wp, _c = x.shape
    kh, kw, _ci, co = w.shape
    sh, sw = strides
    rh, rw = rhs_dilation
    oh = max(0, (hp - ((kh - 1) * rh + 1)) // sh + 1)
    ow = max(0, (wp - ((kw - 1) * rw + 1)) // sw + 1)
    out = np.zeros((n, oh, ow, co), dtype=x.dtype)
    with _quiet():
        for i in range(kh):
            for j in range(kw):
                window = x[:, i * rh: i * rh + sh * (oh - 1) + 1: sh, j * rw: j * rw + sw * (ow - 1) + 1: sw, :]
                if oh and ow:
                    out = out + _dot(window, w[i, j])
    return np.asarray(_narrow(out, input.dtype))


#: Each op's function, by op name: the function of this module named after the op (an op of the
#: spec without one fails here, at import).
OP_FUNCTIONS: dict[str, Callable[..., Array]] = {name: globals()[name] for name in OPS}
