"""Float sums are blocked (``linalg.lowerings.reduce_sum``): about as accurate as NumPy's pairwise sum,
with the spec's signed zeros and special values kept."""

from __future__ import annotations

import numpy as np
import pytest

import mind


def _sum_fn(shape: tuple[int, ...], axes: list[int], dt: str = "f32") -> str:
    kept = [n for i, n in enumerate(shape) if i not in axes]
    out = f"Tensor<{dt}, [{', '.join(map(str, kept))}]>" if kept else dt
    return (f"fn f(x: Tensor<{dt}, [{', '.join(map(str, shape))}]>) -> {out} "
            f"{{ sum(x, axes={axes}, keepdims=false) }}")


@pytest.mark.parametrize("shape,axes", [((6480,), [0]), ((80, 81), [0, 1]), ((512, 1000), [0, 1]),
                                        ((64, 4096), [1]), ((3, 127, 129), [1, 2])])
def test_float_sum_as_accurate_as_numpy(shape, axes):
    # before blocking: 1.6e-5 relative for 512x1000 (one running sum), NumPy 1e-9
    x = np.random.default_rng(0).random(shape).astype(np.float32)
    got = np.asarray(mind.compile(_sum_fn(shape, axes))(x), np.float64)
    exact = x.astype(np.float64).sum(axis=tuple(axes))
    err = np.max(np.abs(got - exact) / np.abs(exact))
    numpy_err = np.max(np.abs(x.sum(axis=tuple(axes)).astype(np.float64) - exact) / np.abs(exact))
    assert err <= max(4 * numpy_err, 1e-7)


def test_blocked_sum_keeps_signed_zeros_and_specials():
    src = _sum_fn((4, 300), [1])
    x = np.full((4, 300), -0.0, np.float32)
    x[1, 7] = 0.0
    x[2, 299] = np.inf
    x[3, 0], x[3, 1] = np.inf, -np.inf
    got = mind.compile(src)(x)
    assert np.signbit(got[0]) and got[0] == 0 and not np.signbit(got[1]) and got[1] == 0
    assert got[2] == np.inf and np.isnan(got[3])
