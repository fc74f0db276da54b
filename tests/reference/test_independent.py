"""Each op of the reference against an independent formulation (Python lists/loops, np.pad, slicing),
on random shapes and attributes; tolerances come from spec/accuracy.py only."""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import given, strategies as st

from mind.reference import ops as R
from mind.reference.accuracy import check_op
from mind.spec.accuracy import check
from mind.spec.dtypes import DType

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple)
fdtypes = st.sampled_from([np.float32, np.float64])


def arrays(draw, shape, dtype, lo=-8, hi=8):
    if np.dtype(dtype).kind == "f":
        vals = draw(st.lists(st.floats(lo, hi, width=32), min_size=math.prod(shape), max_size=math.prod(shape)))
    else:
        vals = draw(st.lists(st.integers(lo, hi), min_size=math.prod(shape), max_size=math.prod(shape)))
    return np.array(vals, dtype=dtype).reshape(shape)


def _dt(a):
    return {np.dtype(np.float32): DType.F32, np.dtype(np.float64): DType.F64, np.dtype(np.int32): DType.I32,
            np.dtype(np.int64): DType.I64, np.dtype(bool): DType.BOOL}[a.dtype]


@given(st.data(), shapes, st.sampled_from([np.int32, np.int64]))
def test_integer_div_is_truncation(data, shape, dtype):
    a = arrays(data.draw, shape, dtype, -50, 50)
    b = arrays(data.draw, shape, dtype, -5, 5)
    got = R.div(a, b)
    want = np.array([0 if y == 0 else int(x / y) if abs(x) < 2**52 else 0 for x, y in zip(a.flat, b.flat)],
                    dtype=dtype).reshape(shape)
    assert check("exact", _dt(got), got, want) is None


@given(st.data(), shapes, fdtypes)
def test_exp_log_against_math(data, shape, dtype):
    a = arrays(data.draw, shape, dtype, -20, 20)
    got = R.exp(a)
    want = np.array([math.exp(float(x)) for x in a.flat], dtype=np.float64).astype(dtype).reshape(shape)
    assert check("exp", _dt(got), got, want) is None
    pos = np.abs(a) + dtype(0.5)
    got = R.log(pos)
    want = np.array([math.log(float(x)) for x in pos.flat]).astype(dtype).reshape(shape)
    assert check("log", _dt(got), got, want) is None


@given(st.data(), st.lists(st.integers(0, 5), min_size=1, max_size=3).map(tuple))
def test_slice_is_python_slicing(data, shape):
    a = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    start, stop, step, py = [], [], [], []
    for n in shape:
        s = data.draw(st.sampled_from([1, 2, 3, -1, -2]))
        if s > 0:
            b, e = data.draw(st.integers(0, n)), data.draw(st.integers(0, n))
            py.append(slice(b, e, s))
        else:
            b, e = data.draw(st.integers(-1, n - 1)), data.draw(st.integers(-1, n - 1))
            py.append(slice(b if b >= 0 else None, e if e >= 0 else None, s) if b >= 0 else slice(0, 0, 1))
        start.append(b), stop.append(e), step.append(s)
    got = R.slice(a, start=start, stop=stop, step=step)
    want = a[tuple(py)]
    assert check("exact", DType.I32, got, np.ascontiguousarray(want)) is None


@given(st.data(), shapes)
def test_pad_without_interior_is_np_pad(data, shape):
    a = arrays(data.draw, shape, np.int64, -9, 9)
    lo = [data.draw(st.integers(0, 2)) for _ in shape]
    hi = [data.draw(st.integers(0, 2)) for _ in shape]
    got = R.pad(a, np.int64(7), lo=lo, hi=hi, interior=[0] * len(shape))
    want = np.pad(a, list(zip(lo, hi)), constant_values=7) if shape else a
    assert check("exact", DType.I64, got, want) is None


@given(st.data(), st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple))
def test_pad_interior_by_loops(data, shape):
    a = arrays(data.draw, shape, np.int32, -9, 9)
    lo = [data.draw(st.integers(0, 2)) for _ in shape]
    hi = [data.draw(st.integers(0, 2)) for _ in shape]
    it = [data.draw(st.integers(0, 2)) for _ in shape]
    got = R.pad(a, np.int32(-1), lo=lo, hi=hi, interior=it)
    out_shape = [l + h + n + max(n - 1, 0) * i for n, l, h, i in zip(shape, lo, hi, it)]
    want = np.full(out_shape, -1, dtype=np.int32)
    for idx in itertools.product(*[range(n) for n in shape]):
        want[tuple(l + k * (i + 1) for k, l, i in zip(idx, lo, it))] = a[idx]
    assert check("exact", DType.I32, got, want) is None


@given(st.data(), st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple))
def test_gather_by_python_lists(data, shape):
    a = arrays(data.draw, shape, np.float32)
    axis = data.draw(st.integers(0, len(shape) - 1))
    idx = np.array(data.draw(st.lists(st.integers(-5, 8), max_size=4)), dtype=np.int64)
    got = R.gather(a, idx, axis=axis)
    n = shape[axis]
    lst = a.tolist()

    def pick(x, depth):
        if depth == axis:
            if n == 0:
                return None
            return [x[min(max(int(i), 0), n - 1)] for i in idx]
        return [pick(y, depth + 1) for y in x]

    out_shape = shape[:axis] + idx.shape + shape[axis + 1:]
    want = np.zeros(out_shape, np.float32) if n == 0 or 0 in shape[:axis] else \
        np.array(pick(lst, 0), dtype=np.float32).reshape(out_shape)
    assert check("exact", DType.F32, got, want) is None


@given(st.data(), st.integers(1, 3), st.integers(0, 4), st.integers(1, 3), fdtypes)
def test_matmul_by_loops(data, m, k, n, dtype):
    a = arrays(data.draw, (2, m, k), dtype)
    b = arrays(data.draw, (k, n), dtype)
    want = np.zeros((2, m, n), dtype=np.float64)
    for bi, i, j in itertools.product(range(2), range(m), range(n)):
        want[bi, i, j] = math.fsum(float(a[bi, i, t]) * float(b[t, j]) for t in range(k))
    got = R.matmul(a, b)
    assert check_op("matmul", [a, b], {}, got, want.astype(dtype)) is None


@given(st.data(), fdtypes)
def test_conv2d_by_loops(data, dtype):
    n, h, w, c, o = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4)),
                     data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2)))
    kh, kw = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    s = [data.draw(st.integers(1, 2)) for _ in range(2)]
    p = [(data.draw(st.integers(0, 1)), data.draw(st.integers(0, 1))) for _ in range(2)]
    ld = [data.draw(st.integers(1, 2)) for _ in range(2)]
    rd = [data.draw(st.integers(1, 2)) for _ in range(2)]
    x = arrays(data.draw, (n, h, w, c), dtype)
    f = arrays(data.draw, (kh, kw, c, o), dtype)

    def at(b, y, xx, ch):  # the dilated, padded input, by definition
        y -= p[0][0]
        xx -= p[1][0]
        if y < 0 or xx < 0 or y % ld[0] or xx % ld[1]:
            return 0.0
        y, xx = y // ld[0], xx // ld[1]
        return float(x[b, y, xx, ch]) if y < h and xx < w else 0.0

    dh = (h - 1) * ld[0] + 1 + p[0][0] + p[0][1]
    dw = (w - 1) * ld[1] + 1 + p[1][0] + p[1][1]
    oh = max(0, (dh - ((kh - 1) * rd[0] + 1)) // s[0] + 1)
    ow = max(0, (dw - ((kw - 1) * rd[1] + 1)) // s[1] + 1)
    want = np.zeros((n, oh, ow, o))
    for b, y, xx, oc in itertools.product(range(n), range(oh), range(ow), range(o)):
        want[b, y, xx, oc] = math.fsum(at(b, y * s[0] + i * rd[0], xx * s[1] + j * rd[1], ch) * float(f[i, j, ch, oc])
                                       for i in range(kh) for j in range(kw) for ch in range(c))
    attrs = {"strides": s, "padding": p, "lhs_dilation": ld, "rhs_dilation": rd}
    got = R.conv2d(x, f, **attrs)
    assert check_op("conv2d", [x, f], attrs, got, want.astype(dtype)) is None


def _spec_max(col: list[float]) -> float:
    """The spec's max, independently: NaN wins, +0 is greater than -0, empty gives -inf."""
    if any(math.isnan(v) for v in col):
        return math.nan
    return max(col, key=lambda v: (v, math.copysign(1.0, v)), default=-math.inf)


@given(st.data(), st.lists(st.integers(0, 4), min_size=1, max_size=3).map(tuple), fdtypes, st.booleans())
def test_reductions_by_fsum_and_max(data, shape, dtype, keepdims):
    a = arrays(data.draw, shape, dtype)
    axes = sorted(data.draw(st.sets(st.integers(0, len(shape) - 1))))
    got = R.reduce_sum(a, axes=axes, keepdims=keepdims)
    moved = np.moveaxis(a, axes, list(range(len(axes)))) if axes else a[None]
    flat = moved.reshape((-1,) + moved.shape[len(axes) if axes else 1:]) if moved.size else \
        np.zeros((0,) + moved.shape[len(axes) if axes else 1:], dtype)
    want = np.zeros(flat.shape[1:])
    mx = np.full(flat.shape[1:], -np.inf)
    for idx in itertools.product(*[range(d) for d in flat.shape[1:]]):
        col = [float(v) for v in flat[(slice(None),) + idx]]
        want[idx] = math.fsum(col)
        mx[idx] = _spec_max(col)
    if keepdims:
        want = want.reshape([1 if i in axes else d for i, d in enumerate(shape)])
        mx = mx.reshape(want.shape)
    assert check_op("reduce_sum", [a], {"axes": axes, "keepdims": keepdims}, got, want.astype(dtype)) is None
    assert check("exact", _dt(a), R.reduce_max(a, axes=axes, keepdims=keepdims), mx.astype(dtype)) is None


@given(st.data(), shapes)
def test_convert_float_to_int_by_python(data, shape):
    a = np.array(data.draw(st.lists(st.floats(width=32), min_size=math.prod(shape), max_size=math.prod(shape))),
                 dtype=np.float32).reshape(shape)
    got = R.convert(a, dtype=DType.I32)

    def cv(x):
        if math.isnan(x):
            return 0
        if math.isinf(x):
            return 2**31 - 1 if x > 0 else -2**31
        return max(-2**31, min(2**31 - 1, math.trunc(x)))

    want = np.array([cv(float(x)) for x in a.flat], dtype=np.int32).reshape(shape)
    assert check("exact", DType.I32, got, want) is None


@given(st.data(), shapes, st.sampled_from([np.int32, np.int64]))
def test_wrapping_arithmetic_by_python_ints(data, shape, dtype):
    info = np.iinfo(dtype)
    ints = st.integers(int(info.min), int(info.max))
    n = math.prod(shape)
    a = np.array(data.draw(st.lists(ints, min_size=n, max_size=n)), dtype=dtype).reshape(shape)
    b = np.array(data.draw(st.lists(ints, min_size=n, max_size=n)), dtype=dtype).reshape(shape)
    bits = info.bits

    def wrap(v):
        v &= (1 << bits) - 1
        return v - (1 << bits) if v >= 1 << (bits - 1) else v

    for fn, py in ((R.add, lambda x, y: x + y), (R.sub, lambda x, y: x - y), (R.mul, lambda x, y: x * y)):
        want = np.array([wrap(py(int(x), int(y))) for x, y in zip(a.flat, b.flat)], dtype=dtype).reshape(shape)
        assert check("exact", _dt(a), fn(a, b), want) is None


@given(st.data(), st.integers(1, 3), st.integers(0, 6), st.integers(1, 3))
def test_float_contractions_sum_in_one_fixed_order(data, m, k, n):
    """The oracle's bits may not depend on the CPU (BLAS orders sums by the machine): matmul in f64
    is the left-to-right sum over k of the products, bit for bit."""
    a = arrays(data.draw, (2, m, k), np.float64, -1e6, 1e6)
    b = arrays(data.draw, (k, n), np.float64, -1e6, 1e6)
    want = np.zeros((2, m, n))
    for bi, i, j in itertools.product(range(2), range(m), range(n)):
        s = 0.0
        for t in range(k):
            s = s + float(a[bi, i, t]) * float(b[t, j])
        want[bi, i, j] = s
    assert R.matmul(a, b).tobytes() == want.tobytes()
