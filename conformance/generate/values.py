"""Seeded strategies for element values and shapes, by dtype and value class.

Every stream of random numbers is a NumPy ``Generator`` seeded from the SHA-256 of a stable name
(``rng_for("gen/add/f32/nan")``), so a cell of the generated tier never depends on how many other
cells exist or in which order they are generated: adding cases leaves every released case as it was.
NumPy's PCG64 streams and its ``integers``/``random`` transformations give the same numbers on every
platform for a pinned NumPy, and nothing here goes through a platform's maths library: floats are
drawn uniformly with IEEE arithmetic only (NumPy's normal sampler calls the C library's ``log`` and
``exp`` in its tails, whose last bit may differ between machines).
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from mind.spec.dtypes import DType

F32_NANS = (0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF)
F64_NANS = (0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FFFFFFFFFFFFFFF)


def rng_for(name: str) -> np.random.Generator:
    seed = int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng(seed)


def _nan(rng: np.random.Generator, dtype: DType) -> np.ndarray:
    pats = F32_NANS if dtype is DType.F32 else F64_NANS
    bits = np.array([pats[rng.integers(len(pats))]], dtype=np.uint32 if dtype is DType.F32 else np.uint64)
    return bits.view(dtype.numpy)


def _float_extremes(dtype: DType) -> list[float]:
    fi = np.finfo(dtype.numpy)
    sub_min = float(np.nextafter(dtype.numpy.type(0), dtype.numpy.type(1)))
    sub_max = float(np.nextafter(dtype.numpy.type(fi.tiny), dtype.numpy.type(0)))
    mags = [float(fi.max), float(fi.max) / 2, float(fi.tiny), sub_min, sub_max, sub_min * 3,
            88.72 if dtype is DType.F32 else 709.78, -103.9 if dtype is DType.F32 else -745.1]
    return mags + [-m for m in mags]


def _int_extremes(dtype: DType) -> list[int]:
    lo, hi = dtype.int_min, dtype.int_max
    return [lo, hi, lo + 1, hi - 1, -1, 1, hi // 2 + 1, lo // 2 - 1]


def values(rng: np.random.Generator, dtype: DType, shape: Sequence[int], cls: str, *,
           positive: bool = False, scale: float = 4.0, int_range: int = 100) -> np.ndarray:
    """An array of ``dtype`` and ``shape`` whose elements exercise ``cls``: ``normal`` values, with
    ``zero`` (±0), ``inf``, ``nan`` (several bit patterns, signalling included) or ``extreme``
    values (range ends, subnormals) mixed in; ``empty``/``symbolic`` cells get normal values.
    ``positive`` keeps normal float values above zero (log's domain)."""
    shape = tuple(int(d) for d in shape)
    size = int(np.prod(shape))
    if dtype is DType.BOOL:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.is_int:
        out = rng.integers(-int_range, int_range + 1, size=size).astype(np.int64)
        out[out == 0] = 1
        if cls == "zero" and size:
            out[rng.random(size) < 0.4] = 0
            out[rng.integers(size)] = 0
        elif cls == "extreme" and size:
            pool = _int_extremes(dtype)
            pick = rng.random(size) < 0.6
            pick[rng.integers(size)] = True
            out[pick] = [pool[j] for j in rng.integers(len(pool), size=int(pick.sum()))]
        return out.astype(dtype.numpy).reshape(shape)
    out = ((rng.random(size) * 2.0 - 1.0) * scale).astype(dtype.numpy)  # uniform in (-scale, scale)
    if positive:
        out = np.abs(out) + dtype.numpy.type(0.001)
    if size == 0:
        return out.reshape(shape)
    if cls == "zero":
        pick = rng.random(size) < 0.5
        pick[rng.integers(size)] = True
        signs = rng.integers(0, 2, size=size).astype(bool)
        out[pick & signs] = -0.0
        out[pick & ~signs] = 0.0
        if positive:  # log: negative inputs (NaN results) belong to its edge cases too
            out[rng.random(size) < 0.2] *= -1
    elif cls == "inf":
        pick = rng.random(size) < 0.4
        pick[rng.integers(size)] = True
        out[pick] = np.where(rng.random(int(pick.sum())) < 0.5, np.inf, -np.inf)
    elif cls == "nan":
        pick = rng.random(size) < 0.4
        pick[rng.integers(size)] = True
        for j in np.flatnonzero(pick):
            out[j] = _nan(rng, dtype)[0]
    elif cls == "extreme":
        pool = _float_extremes(dtype)
        if positive:
            pool = [abs(p) for p in pool]
        pick = rng.random(size) < 0.6
        pick[rng.integers(size)] = True
        with np.errstate(over="ignore"):
            out[pick] = np.array([pool[j] for j in rng.integers(len(pool), size=int(pick.sum()))], dtype=dtype.numpy)
    return out.reshape(shape)


def shape(rng: np.random.Generator, rank: int, *, empty: bool = False, hi: int = 4, lo: int = 1) -> list[int]:
    """A shape of ``rank`` extents in [lo, hi]; with ``empty`` one extent is 0."""
    s = [int(x) for x in rng.integers(lo, hi + 1, size=rank)]
    if empty and rank:
        s[int(rng.integers(rank))] = 0
    return s


def broadcast_operand(rng: np.random.Generator, result: Sequence[int]) -> list[int]:
    """A shape that broadcasts to ``result``: some leading axes dropped, some extents set to 1."""
    drop = int(rng.integers(0, len(result) + 1)) if rng.random() < 0.4 else 0
    out = [d if rng.random() < 0.7 else 1 for d in result[drop:]]
    return out
