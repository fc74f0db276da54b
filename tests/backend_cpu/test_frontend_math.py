"""The math builtins' decompositions (TwoSum, exact products, ``convert`` rounding) keep their
accuracy when compiled to native code: the backend must not reassociate or contract them."""

from __future__ import annotations

import numpy as np

import mind


def _f32_exact(fn, x):
    return fn(x.astype(np.float64)).astype(np.float32)


def test_native_math_builtins_are_as_accurate_as_documented():
    src = """fn f(x: Tensor<f32, [N]>, y: Tensor<f32, [N]>) -> (Tensor<f32, [N]>, Tensor<f32, [N]>,
        Tensor<f32, [N]>, Tensor<f32, [N]>, Tensor<f32, [N]>, Tensor<f32, [N]>) {
    (sin(x), cos(x), floor(x), round(x), log2(abs(x) + 1.0), pow(abs(x) + 0.5, y))
}"""
    f = mind.compile(src, backend="cpu")
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.uniform(-10, 10, 500), rng.uniform(-1e6, 1e6, 200),
                        10.0 ** rng.uniform(-20, 38, 300) * rng.choice([-1, 1], 300),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 2.5, -2.5, 0.5]]).astype(np.float32)
    y = rng.uniform(-3, 3, x.size).astype(np.float32)
    s, c, fl, ro, l2, pw = f(x, y)
    with np.errstate(all="ignore"):
        shifted = np.abs(x) + np.float32(1.0)  # the f32 operands of log2 and pow, as the program computes them
        base = np.abs(x) + np.float32(0.5)
        for got, want in ((s, _f32_exact(np.sin, x)), (c, _f32_exact(np.cos, x)),
                          (l2, _f32_exact(np.log2, shifted)),
                          (pw, base.astype(np.float64) ** y.astype(np.float64))):
            want = want.astype(np.float32)
            finite = np.isfinite(want)
            ulps = np.abs(got[finite].astype(np.float64) - want[finite]) / np.spacing(np.abs(want[finite]))
            assert ulps.max() <= 1, ulps.max()
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(fl, np.floor(x))
        np.testing.assert_array_equal(ro, np.round(x))
    assert np.signbit(s[x.size - 7])  # sin(-0) = -0


def test_sin_and_cos_of_f32_arguments_at_every_window_start():
    """An f32 argument's window into 2/π starts at chunk i0 = (E - 27) // 24, which four compares of
    |x| with 2^51, 2^75, 2^99 and 2^123 give (``builtins_math.reduce_pio2``): arguments just below,
    at and above every power of two from 2^40 on are within an ulp of f64's values."""
    src = """fn f(x: Tensor<f32, [N]>) -> (Tensor<f32, [N]>, Tensor<f32, [N]>) { (sin(x), cos(x)) }"""
    f = mind.compile(src, backend="cpu")
    mags = [np.ldexp(np.float32(m), k) for k in range(40, 128) for m in (1 - 2.0 ** -24, 1.0, 1 + 2.0 ** -23)]
    x = np.array([s * v for v in mags for s in (1, -1)], np.float32)
    s, c = f(x)
    for got, want in ((s, _f32_exact(np.sin, x)), (c, _f32_exact(np.cos, x))):
        ulps = np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want))
        assert np.isfinite(got).all() and ulps.max() <= 1, ulps.max()
