"""Transposing copies get square one-vector tiles (``transforms._transpose_tiles``): exact against
NumPy on aligned, odd and batched shapes, every dtype, with and without a fused consumer."""

from __future__ import annotations

import numpy as np
import pytest

import mind

NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}


def T(dt: str, *shape: int) -> str:
    return f"Tensor<{dt}, [{', '.join(map(str, shape))}]>"


@pytest.mark.parametrize("dt", list(NP))
@pytest.mark.parametrize("shape,perm", [((64, 48), (1, 0)), ((37, 129), (1, 0)), ((3, 32, 40), (0, 2, 1)),
                                        ((5, 16, 17), (2, 1, 0)), ((4, 6, 32, 16), (0, 1, 3, 2))])
def test_transpose_matches_numpy(dt, shape, perm):
    x = (np.random.default_rng(len(shape)).standard_normal(shape) * 100).astype(NP[dt])
    out = tuple(shape[p] for p in perm)
    src = (f"fn f(x: {T(dt, *shape)}) -> {T(dt, *out)} {{ transpose(x, permutation=[{', '.join(map(str, perm))}]) }}")
    for opts in ({"schedule": "all", "threads": 1}, {"schedule": "all", "threads": 2}):
        assert np.array_equal(mind.compile(src, **opts)(x), x.transpose(perm)), opts
    src2 = (f"fn f(x: {T(dt, *shape)}) -> {T(dt, *out)} {{ transpose(x, permutation=[{', '.join(map(str, perm))}]) + "
            f"transpose(x, permutation=[{', '.join(map(str, perm))}]) }}")
    assert np.array_equal(mind.compile(src2, schedule="all")(x), x.transpose(perm) + x.transpose(perm))
