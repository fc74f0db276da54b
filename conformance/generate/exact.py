"""Correctly rounded ``exp`` and ``log`` for expected values, with Python's ``decimal`` module.

Why not the reference's ``numpy.exp``: NumPy computes f64 ``exp``/``log`` with its own SIMD code on
some CPUs and with the C library on others, so the last bit of an expected value would depend on the
machine that generated the suite.  ``decimal`` computes ``exp`` and ``ln`` correctly rounded at any
precision on every machine; rounding that 60-digit value to the nearest float of the dtype (ties to
even) gives the float nearest to the exact result, which is also the best expected value: the spec's
ULP bounds are distances from the exact result.
"""

from __future__ import annotations

import decimal
import math

import numpy as np

from mind.spec.dtypes import DType

_CTX = decimal.Context(prec=60, Emax=999_999, Emin=-999_999, rounding=decimal.ROUND_HALF_EVEN)


def nearest(value: decimal.Decimal, dtype: DType) -> float:
    """The float of ``dtype`` nearest to ``value`` (ties to an even significand; beyond the largest
    finite value by half an ULP or more: ±inf)."""
    np_t = dtype.numpy
    top = float(np.finfo(np_t).max)
    below_top = float(np.nextafter(np_t.type(top), np_t.type(0)))
    half_ulp = _CTX.divide(_CTX.subtract(decimal.Decimal(top), decimal.Decimal(below_top)), 2)
    if abs(value) >= _CTX.add(decimal.Decimal(top), half_ulp):
        return math.copysign(math.inf, value)
    with np.errstate(over="ignore"):
        c = np_t.type(float(value))
        if np.isinf(c):
            c = np_t.type(math.copysign(top, value))
        cands = {float(c), float(np.nextafter(c, np_t.type(math.inf))),
                 float(np.nextafter(c, np_t.type(-math.inf)))}
    finite = [x for x in cands if math.isfinite(x)]
    best = min(finite, key=lambda x: (abs(_CTX.subtract(decimal.Decimal(x), value)), _odd(x, dtype)))
    if best == 0.0 and value < 0:
        return -0.0
    return best


def _odd(x: float, dtype: DType) -> int:
    """1 if the significand of x (as a ``dtype`` value) is odd: ties go to the even one."""
    bits = np.array([x], dtype=dtype.numpy).view(np.uint32 if dtype is DType.F32 else np.uint64)[0]
    return int(bits) & 1


def exp(x: float, dtype: DType) -> float:
    if math.isnan(x):
        return math.nan
    if math.isinf(x):
        return math.inf if x > 0 else 0.0
    if x == 0:
        return 1.0
    if x > 1000:
        return math.inf
    if x < -1000:  # below the smallest subnormal of both dtypes
        return 0.0
    return nearest(_CTX.exp(decimal.Decimal(x)), dtype)


def log(x: float, dtype: DType) -> float:
    if math.isnan(x) or x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    if math.isinf(x):
        return math.inf
    if x == 1:
        return 0.0
    return nearest(_CTX.ln(decimal.Decimal(x)), dtype)


FUNCTIONS = {"exp": exp, "log": log}


def apply(op: str, operand: np.ndarray) -> np.ndarray:
    """``op`` (exp or log) on every element, correctly rounded to the operand's dtype."""
    from mind.spec.dtypes import from_numpy

    dt = from_numpy(operand.dtype)
    fn = FUNCTIONS[op]
    flat = [fn(float(x), dt) for x in operand.reshape(-1)]
    return np.array(flat, dtype=operand.dtype).reshape(operand.shape)
