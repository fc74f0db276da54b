"""Algebraic laws of the reference ops (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, strategies as st

from mind.reference import ops as R
from mind.spec.accuracy import check
from mind.spec.dtypes import DType

small = st.lists(st.integers(0, 4), min_size=1, max_size=4).map(tuple)


def _arr(data, shape, dtype=np.float32):
    n = math.prod(shape)
    if np.dtype(dtype).kind == "f":
        vals = data.draw(st.lists(st.floats(width=32, allow_nan=True), min_size=n, max_size=n))
    else:
        vals = data.draw(st.lists(st.integers(-100, 100), min_size=n, max_size=n))
    return np.array(vals, dtype=dtype).reshape(shape)


@given(st.data(), small)
def test_transpose_then_inverse(data, shape):
    a = _arr(data, shape)
    perm = data.draw(st.permutations(range(len(shape))))
    inv = [perm.index(i) for i in range(len(shape))]
    back = R.transpose(R.transpose(a, permutation=perm), permutation=inv)
    assert check("exact", DType.F32, back, a) is None


@given(st.data(), small)
def test_reshape_round_trip(data, shape):
    a = _arr(data, shape, np.int32)
    flat = R.reshape(a, shape=(math.prod(shape),))
    assert check("exact", DType.I32, R.reshape(flat, shape=shape), a) is None


@given(st.data(), small)
def test_slice_of_pad_is_identity(data, shape):
    """pad inserts the operand at lo + i*(interior + 1); slicing there gives it back (slice/pad duality)."""
    a = _arr(data, shape, np.int64)
    lo = [data.draw(st.integers(0, 2)) for _ in shape]
    hi = [data.draw(st.integers(0, 2)) for _ in shape]
    it = [data.draw(st.integers(0, 2)) for _ in shape]
    p = R.pad(a, np.int64(-7), lo=lo, hi=hi, interior=it)
    stop = [l + n * (i + 1) - i if n else l for l, n, i in zip(lo, shape, it)]
    back = R.slice(p, start=lo, stop=stop, step=[i + 1 for i in it])
    assert check("exact", DType.I64, back, a) is None


@given(st.data(), small)
def test_pad_of_strided_slice_restores_the_picked_elements(data, shape):
    """The VJP duality: pad(slice(x)) puts each sliced element back at its own index, zeros elsewhere."""
    a = _arr(data, shape, np.int32)
    step = [data.draw(st.integers(1, 3)) for _ in shape]
    start = [data.draw(st.integers(0, n)) for n in shape]
    s = R.slice(a, start=start, stop=list(shape), step=step)
    m = s.shape
    lo = [b if k else 0 for b, k in zip(start, m)]
    last = [b + (k - 1) * st_ if k else -1 for b, k, st_ in zip(start, m, step)]
    hi = [n - 1 - l if k else n for n, l, k in zip(shape, last, m)]
    p = R.pad(s, np.int32(0), lo=lo, hi=hi, interior=[st_ - 1 for st_ in step])
    assert p.shape == a.shape
    mask = np.zeros(shape, bool)
    mask[tuple(slice(b, None, st_) for b, st_ in zip(start, step))] = True
    assert check("exact", DType.I32, p, np.where(mask, a, 0).astype(np.int32)) is None


@given(st.data(), small)
def test_negative_step_slice_reverses(data, shape):
    a = _arr(data, shape, np.int32)
    rev = R.slice(a, start=[n - 1 for n in shape], stop=[-1] * len(shape), step=[-1] * len(shape))
    twice = R.slice(rev, start=[n - 1 for n in shape], stop=[-1] * len(shape), step=[-1] * len(shape))
    assert check("exact", DType.I32, twice, a) is None


@given(st.data(), small)
def test_select_compare_identities(data, shape):
    a = _arr(data, shape)
    b = _arr(data, shape)
    t = R.compare(a, a, direction="eq")
    # select(x == x, x, y) is x except where x is NaN (NaN != NaN)
    sel = R.select(t, a, b)
    assert check("exact", DType.F32, sel, np.where(np.isnan(a), b, a).astype(np.float32)) is None
    # lt and ge are complements only off NaN; ne = not eq always
    ne = R.compare(a, b, direction="ne")
    eq = R.compare(a, b, direction="eq")
    assert np.array_equal(ne, ~eq)
    lt, ge = R.compare(a, b, direction="lt"), R.compare(a, b, direction="ge")
    nan = np.isnan(a) | np.isnan(b)
    assert np.array_equal(lt | ge, ~nan) and not np.any(lt & ge)
    # select with a constant predicate picks one side
    assert check("exact", DType.F32, R.select(np.array(True), a, b), a) is None
    # select(p, x, y) == select(not p, y, x)
    p = R.compare(a, b, direction="gt")
    assert check("exact", DType.F32, R.select(p, a, b), R.select(~p, b, a)) is None


bshape = st.lists(st.sampled_from([1, 2, 3]), min_size=0, max_size=3).map(tuple)


@given(st.data(), bshape, bshape)
def test_broadcasting_commutes(data, s1, s2):
    try:
        np.broadcast_shapes(s1, s2)
    except ValueError:
        return
    a = _arr(data, s1, np.int32)
    b = _arr(data, s2, np.int32)
    for fn in (R.add, R.mul):
        assert check("exact", DType.I32, fn(a, b), fn(b, a)) is None
    assert np.array_equal(R.compare(a, b, direction="lt"), R.compare(b, a, direction="gt"))
    fa = a.astype(np.float64)
    fb = b.astype(np.float64)
    assert check("exact", DType.F64, R.add(fa, fb), R.add(fb, fa)) is None


@given(st.data(), small)
def test_convert_round_trips_where_representable(data, shape):
    a = _arr(data, shape, np.int32)
    f = R.convert(a, dtype=DType.F64)
    assert check("exact", DType.I32, R.convert(f, dtype=DType.I32), a) is None
    assert check("exact", DType.F32, R.convert(R.convert(a.astype(np.float32), dtype=DType.F64), dtype=DType.F32),
                 a.astype(np.float32)) is None
