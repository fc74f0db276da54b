"""Float sums are blocked (``linalg.lowerings.reduce_sum``): about as accurate as NumPy's pairwise sum,
with the spec's signed zeros and special values kept."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import mind
import mind.compiler.backend.cpu.lowering as lowering
from mind.compiler.backend.linalg.lowerings import (SUM_RUN, SUM_WIDTH_BYTES, rough_levels, smooth_head, splits_rows,
                                                     sum_levels, sum_width)


def _sum_fn(shape: tuple[int, ...], axes: list[int], dt: str = "f32") -> str:
    kept = [n for i, n in enumerate(shape) if i not in axes]
    out = f"Tensor<{dt}, [{', '.join(map(str, kept))}]>" if kept else dt
    return (f"fn f(x: Tensor<{dt}, [{', '.join(map(str, shape))}]>) -> {out} "
            f"{{ sum(x, axes={axes}, keepdims=false) }}")


@pytest.mark.parametrize("shape,axes", [((6480,), [0]), ((80, 81), [0, 1]), ((512, 1000), [0, 1]),
                                        ((64, 4096), [1]), ((3, 127, 129), [1, 2]), ((16, 3000, 17), [1]),
                                        ((3000, 40), [0]), ((2, 1024, 1024), [0, 1, 2])])
def test_float_sum_as_accurate_as_numpy(shape, axes):
    # before blocking: 1.6e-5 relative for 512x1000 (one running sum), NumPy 1e-9
    x = np.random.default_rng(0).random(shape).astype(np.float32)
    got = np.asarray(mind.compile(_sum_fn(shape, axes))(x), np.float64)
    exact = x.astype(np.float64).sum(axis=tuple(axes))
    err = np.max(np.abs(got - exact) / np.abs(exact))
    numpy_err = np.max(np.abs(x.sum(axis=tuple(axes)).astype(np.float64) - exact) / np.abs(exact))
    assert err <= max(4 * numpy_err, 1e-7)


@pytest.mark.parametrize("shape,axes", [((1009, 997), [0, 1]), ((3, 16411), [1]), ((3, 127, 257), [0, 1, 2])])
def test_long_sums_with_a_large_prime_factor_are_split(shape, axes):
    # one running sum before the split (1009 x 997: 5.3e-6 relative, 16411: 3.4e-6); now a few
    # rounding errors of the result (the last level of each part adds up to 128 partial sums);
    # 3 x 127 x 257 once split its first part again and again (a RecursionError while emitting)
    x = np.random.default_rng(0).random(shape).astype(np.float32)
    got = np.asarray(mind.compile(_sum_fn(shape, axes))(x), np.float64)
    exact = x.astype(np.float64).sum(axis=tuple(axes))
    assert np.max(np.abs(got - exact) / np.abs(exact)) <= 8 * np.finfo(np.float32).eps


def _reduce_fn(kind: str, shape: tuple[int, ...], axes: list[int], dt: str = "f32") -> str:
    return _sum_fn(shape, axes, dt).replace("sum(", f"{kind}(")


@pytest.mark.parametrize("kind", ["sum", "mean", "max"])
@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("shape,axes", [((362, 3376), [0]), ((262, 500), [0]), ((1046, 100), [0]),
                                        ((19, 334, 84), [1]), ((3, 131, 5, 7), [1, 2]), ((411, 9), [0]),
                                        ((1031, 300), [0]), ((10, 301, 82), [1]), ((289, 200), [0]),
                                        ((3, 17, 17, 40), [1, 2])])
def test_rows_that_do_not_block_are_split_and_match_the_reference(kind, dt, shape, axes):
    # a sum over rows whose divisors do not block (362 = 2 x 181: a level of 2 left 181 rows, and
    # wrote half as many partial rows as it read; 1031 rows, a prime, of 1.2 MB or more) is split
    # into rows that block and a few more (lowerings.splits_rows); a max is blocked the same way
    count = int(np.prod([shape[a] for a in axes]))
    row_bytes = int(np.prod(shape[max(axes) + 1:])) * (4 if dt == "f32" else 8)
    assert splits_rows(count, row_bytes)
    src = _reduce_fn(kind, shape, axes, dt)
    x = (np.random.default_rng(0).standard_normal(shape) + 3).astype(dt.replace("f", "float"))
    got = np.asarray(mind.compile(src, fn="f", threads=2, cache=False)(x), np.float64)
    want = np.asarray(mind.compile(src, fn="f", backend="reference")(x), np.float64)
    if kind == "max":
        np.testing.assert_array_equal(got, want)
        return
    terms = np.moveaxis(x.astype(np.float64), axes, list(range(x.ndim - len(axes), x.ndim)))
    terms = terms.reshape(terms.shape[:x.ndim - len(axes)] + (count,))
    exact = np.apply_along_axis(math.fsum, -1, terms) / (count if kind == "mean" else 1)  # correctly rounded
    err = np.max(np.abs(got - exact) / np.abs(exact))
    eps = np.finfo(x.dtype).eps
    assert err <= 8 * eps  # each term in runs of at most SUM_RUN: a few roundings of the result
    np.testing.assert_allclose(got, want, rtol=16 * eps)


def test_which_row_counts_are_split():
    assert not any(map(splits_rows, [128, 4096, 300, 254]))  # they block (300 = 3 x 100, 254 = 2 x 127)
    assert all(map(splits_rows, [362, 262, 394, 655, 16411]))  # a level of 2 or 5 leaves > 128; a long prime
    # a shorter prime keeps one running sum: one pass (131 x 352: the split's ops cost more)
    assert not any(map(splits_rows, [131, 317, 1031]))
    # unless its rows hold more than SPLIT_ROWS_BYTES (1031 rows of 300 f32: 1.2 MB)
    assert splits_rows(1031, 1200) and splits_rows(2957, 1280) and not splits_rows(769, 1280)
    assert not splits_rows(1031, 384) and not splits_rows(128, 1 << 20)  # small; or it blocks
    # rough levels (runs and the rows beside them without a factor from 2 to 4: 301 = 7 x 43) are
    # split at a smooth head, whatever their size; 254 = 2 x 127 and 292 = 4 x 73 are not rough
    assert all(map(rough_levels, [301, 287, 289])) and not any(map(rough_levels, [254, 292, 300, 128, 4096]))
    assert all(map(splits_rows, [301, 287, 289])) and not any(map(splits_rows, [254, 292]))
    assert [smooth_head(n) for n in (301, 287, 289, 2101, 300)] == [288, 272, 288, 2080, None]


@pytest.mark.parametrize("rows", [301, 287, 289, 2101, 4961, 13 * 1009])
def test_a_smooth_head_blocks_and_leaves_few_rows(rows):
    # rough counts (4961 = 11^2 x 41; 13 x 1009, whose first level leaves more than SUM_RUN) have a
    # head: a multiple of 16, at most a sixteenth of the rows apart, whose levels block and are smooth
    assert rough_levels(rows)
    head = smooth_head(rows)
    assert head is not None and head % 16 == 0 and rows - head <= rows // 16 and not rough_levels(head)
    left = head
    for q in sum_levels(head):
        left //= q
    assert left <= SUM_RUN


@pytest.mark.parametrize("rows", [143, 205, 300, 254, 128, 97])
def test_no_smooth_head_where_none_is_near_or_the_levels_are_smooth(rows):
    # 143 = 11 x 13 and 205 = 5 x 41 are rough, but no multiple of 16 lies within a sixteenth of them
    # (they keep their levels); 300, 254 are not rough; 128 and 97 have no level at all
    assert smooth_head(rows) is None
    assert rough_levels(rows) == (rows in (143, 205))
    assert not splits_rows(rows)  # each keeps its levels (or its one run)


@pytest.mark.parametrize("n", [300, 16411])  # 16411: a prime, split into 16384 terms and 27
def test_blocked_sum_keeps_signed_zeros_and_specials(n):
    src = _sum_fn((4, n), [1])
    x = np.full((4, n), -0.0, np.float32)
    x[1, 7] = 0.0
    x[2, n - 1] = np.inf
    x[3, 0], x[3, n - 1] = np.inf, -np.inf
    got = mind.compile(src)(x)
    assert np.signbit(got[0]) and got[0] == 0 and not np.signbit(got[1]) and got[1] == 0
    assert got[2] == np.inf and np.isnan(got[3])


@pytest.mark.parametrize("n", [129, 1000, 6480, 16384, 16385, 129600, 1 << 22, 31 * 37 * 41, 4000 * 3001, 1009 * 997])
@pytest.mark.parametrize("elem_bytes", [4, 8])
def test_blocks_cover_the_terms_in_short_runs(n, elem_bytes):
    w = sum_width(n, elem_bytes)
    levels = sum_levels(n // w)
    left = n // w
    for q in levels:
        assert 1 < q <= SUM_RUN and left % q == 0
        left //= q
    assert n % w == 0 and w <= SUM_RUN
    if n // max(d for d in range(1, SUM_RUN + 1) if n % d == 0) > SUM_RUN:  # more than one level
        assert w * elem_bytes <= SUM_WIDTH_BYTES
    # every run is short unless the rows have a prime factor above SUM_RUN (3001, 1009 x 997)
    assert left <= SUM_RUN or all(left % d for d in range(2, SUM_RUN + 1))


@pytest.mark.parametrize("shape,dt", [((2048, 2048), "f64"), ((480, 270), "f64"), ((64, 65536), "f32")])
def test_the_first_level_reads_rows_of_the_width_after_fusion(shape, dt):
    # elementwise fusion expands each level's operand into the level before; a width that shrank
    # from level to level became the first level's innermost loop (2048x2048 f64: rows of 2
    # elements, 15x slower than NumPy), which a width kept through the levels never does
    seen: list[str] = []
    real = lowering.cpu_schedule

    def spy(module, *args, **kwargs):
        seen.append(str(module))
        return real(module, *args, **kwargs)
    lowering.cpu_schedule = spy
    try:
        x = np.ones(shape, {"f32": np.float32, "f64": np.float64}[dt])
        assert mind.compile(_sum_fn(shape, [0, 1], dt), threads=1, cache=False)(x) == x.size
    finally:
        lowering.cpu_schedule = real
    n, itemsize = shape[0] * shape[1], x.itemsize
    reads = [tuple(int(d) for d in m.group(1).split("x")) for m in
             re.finditer(r"linalg\.generic .*?ins\(%\S+ : tensor<([0-9x]+)x" + dt, seen[0])]
    first = [r for r in reads if np.prod(r) == n]
    assert first and all(r[-1] == sum_width(n, itemsize) for r in first)
    assert sum_width(n, itemsize) * itemsize >= 64  # at least a cache line (a vector) of partial sums


@pytest.mark.parametrize("shape,axes,keepdims", [((64, 1, 768), [2], True), ((64, 1, 768), [1, 2], False),
                                                 ((8, 1, 3, 1, 5), [1], True), ((1, 64, 1, 30), [3], False),
                                                 ((5, 1, 1), [1, 2], True), ((7, 1, 300), [1], False),
                                                 ((1, 1, 9), [0, 2], True)])
@pytest.mark.parametrize("kind", ["sum", "max", "mean"])
def test_reductions_over_unit_dims_match_the_reference(kind, shape, axes, keepdims):
    # unit dims after the first other one are dropped before the reduction (lowerings._without_unit_dims):
    # a reduced unit dim adds one term (-0 + x, max(-inf, x): x itself, NaN included)
    src = (f"fn f(x: Tensor<f32, [{', '.join(map(str, shape))}]>) -> _ {{ "
           f"{kind}(x, axes={axes}, keepdims={'true' if keepdims else 'false'}) }}")
    kept = [1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes]
    src = src.replace("_", f"Tensor<f32, [{', '.join(map(str, kept))}]>")
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[::7] = -0.0
    flat[3] = np.nan if x.size > 40 else flat[3]
    got = np.asarray(mind.compile(src, fn="f", threads=2, cache=False)(x))
    want = np.asarray(mind.compile(src, fn="f", backend="reference")(x))
    assert got.shape == want.shape
    if kind == "max":  # exact, signed zeros included (a sum's zero sign is its order's: unspecified)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        return
    scale = np.abs(x).sum(axis=tuple(axes), keepdims=keepdims)  # the sum's bound is relative to Σ|x|
    np.testing.assert_array_less(np.abs(got - want)[~np.isnan(want)], (8e-7 * scale + 1e-30)[~np.isnan(want)])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


def test_a_norm_over_a_middle_unit_dim_reduces_without_it():
    # a layer norm over [B, 1, D] (one position of a decoder): its reductions were emitted over
    # [64, 1, 128, 6], their consumers over [64, 768], and no fusion group formed (3.6x slower)
    from mind.compiler.backend.cpu.api import emit_stage
    from mind.compiler.frontend.api import compile_source
    t = "Tensor<f32, [64, 1, 768]>"
    src = (f"fn f(x: {t}) -> {t} {{ let d = x - mean(x, axes=[-1], keepdims=true); "
           f"d / sqrt(mean(d * d, axes=[-1], keepdims=true) + 0.00001) }}")
    text = emit_stage(compile_source(src), "mlir", fn="f")
    operands = [line for line in text.splitlines() if "linalg.generic" in line]
    assert operands and not any("x1x" in line for line in operands)
