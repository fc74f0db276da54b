"""Elementwise math builtins decomposed into the 19 Core IR ops: rounding, ``sin``/``cos``/``tan``,
``pow``, ``log2``, ``sign``, ``clip``, and the ``min``/``max`` that are reductions or elementwise.

Every function here is a composition of Core IR ops, so autodiff differentiates it through its
decomposition; each one's special values and accuracy are in ``docs/frontend-builtins.md`` and are
checked against NumPy in ``tests/frontend/test_builtins_math.py``.

Tools used throughout (none of them needs a bit operation):

* ``trunc`` of a float is ``convert`` to i64 and back (exact below 2^52; beyond, every float is an
  integer already), ``floor``/``ceil``/``round`` follow from it;
* ``sin``/``cos`` reduce the argument modulo π/2 exactly (Payne–Hanek): ``x·(2/π)`` is the sum of
  exact products of ``x`` with 24-bit chunks of 2/π, each taken modulo 4 exactly, summed with
  error-free transformations (TwoSum); the window of chunks is chosen per element from the
  exponent of ``x`` with a ``gather`` from a constant table.  Then polynomials on [-π/4, π/4].
"""

from __future__ import annotations

from typing import Any

from mind.ir.core import Value
from mind.spec.dtypes import DType

from .builtins import AXES, REQUIRED, X, Args, _Poisoned, _keepdims, _need, _reduce_axes
from .values import POISON, Lit

# 2/π in hexadecimal, 1272 bits (53 chunks of 24 bits); ``tests/frontend/test_builtins_math.py``
# recomputes it with mpmath.
_TWO_OVER_PI_HEX = (
    "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561b7246e3a424dd2e006492eea09d1921c"
    "fe1deb1cb129a73ee88235f52ebb4484e99c7026b45f7e413991d639835339f49c845f8bbdf9283b1ff897ffde05980f"
    "ef2f118b5a0a6d1f6d367ecf27cb09b74f463f669e5fea2d7527bac7ebe5f17b3d0739f78a5292ea6bfb5fb11f8d5d08"
    "56033046fc7b6babf0cfbc209af436")
CHUNK_BITS = 24
#: π/2 as a sum of two doubles.
PIO2_HI = 1.5707963267948966
PIO2_LO = 6.123233995736766e-17
_INV_LN2 = 1.4426950408889634
#: Taylor coefficients of sin(r)/r - 1 and cos(r) - 1 + r²/2 in powers of r² (|r| ≤ π/4: the
#: truncation error is below 2^-70).
_SIN = [(-1) ** k / _f for k, _f in ((1, 6), (2, 120), (3, 5040), (4, 362880), (5, 39916800),
                                       (6, 6227020800), (7, 1307674368000), (8, 355687428096000),
                                       (9, 121645100408832000))]
_COS = [(-1) ** k / _f for k, _f in ((2, 24), (3, 720), (4, 40320), (5, 3628800), (6, 479001600),
                                       (7, 87178291200), (8, 20922789888000), (9, 6402373705728000),
                                       (10, 2432902008176640000))]


def chunks() -> list[int]:
    """2/π as 24-bit integers C_i: 2/π = Σ C_i · 2^(-24(i+1))."""
    n = int(_TWO_OVER_PI_HEX, 16)
    total = len(_TWO_OVER_PI_HEX) * 4
    return [(n >> (total - CHUNK_BITS * (i + 1))) & ((1 << CHUNK_BITS) - 1)
            for i in range(total // CHUNK_BITS)]


class Em:
    """Emits ops for one builtin call: ``em("add", a, b)``; ``em.c(v)`` a rank-0 constant of the
    working dtype (f64 unless given)."""

    __slots__ = ("E", "off", "surface")

    def __init__(self, E: Any, off: tuple[int, int], surface: str) -> None:
        self.E = E
        self.off = off
        self.surface = surface

    def __call__(self, op: str, *xs: Value, **attrs: Any) -> Value:
        return self.E.emit(op, xs, self.off, self.surface, **attrs)

    def c(self, v: Any, dt: DType = DType.F64) -> Value:
        return self.E.const(v, dt)

    def table(self, values: list[float], dt: DType = DType.F64) -> Value:
        import numpy as np

        return self.E.b.const_array(np.array(values, dtype=dt.numpy), None, dt)

    # small compositions
    def lt(self, a: Value, b: Value) -> Value:
        return self("compare", a, b, direction="lt")

    def cmp(self, a: Value, b: Value, d: str) -> Value:
        return self("compare", a, b, direction=d)

    def both(self, a: Value, b: Value) -> Value:
        return self("select", a, b, self.c(False, DType.BOOL))

    def either(self, a: Value, b: Value) -> Value:
        return self("select", a, self.c(True, DType.BOOL), b)

    def neg(self, a: Value) -> Value:
        return self("mul", a, self.c(-1, a.type.dtype))

    def abs(self, a: Value) -> Value:
        """|a| (|-0| = +0)."""
        zero = self.c(0, a.type.dtype)
        return self("select", self.lt(a, zero), self.neg(a), self("add", a, zero))

    def to_float(self, b: Value, dt: DType) -> Value:
        return self("convert", b, dtype=dt)


# -- rounding -------------------------------------------------------------------------------------

def _exact_int_bound(dt: DType) -> float:
    """Floats of ``dt`` with magnitude at least this are integers."""
    return 2.0 ** 52 if dt is DType.F64 else 2.0 ** 23


def trunc_values(em: Em, x: Value) -> Value:
    """Round toward zero; integers, ±inf and NaN unchanged; the sign of zero kept."""
    dt = x.type.dtype
    t = em("convert", em("convert", x, dtype=DType.I64), dtype=dt)
    return _keep_big(em, x, t)


def _keep_big(em: Em, x: Value, r: Value) -> Value:
    """``r`` (an integer-valued result computed through i64) where |x| is below the bound where
    every float is an integer, ``x`` elsewhere (and for NaN); a zero result takes x's sign."""
    dt = x.type.dtype
    big = _exact_int_bound(dt)
    inside = em.both(em.lt(x, em.c(big, dt)), em.cmp(x, em.c(-big, dt), "gt"))
    r = em("select", inside, r, x)
    return em("select", em.cmp(r, em.c(0, dt), "eq"), em("mul", x, em.c(0, dt)), r)


def floor_values(em: Em, x: Value) -> Value:
    dt = x.type.dtype
    if not dt.is_float:
        return x
    t = em("convert", em("convert", x, dtype=DType.I64), dtype=dt)
    t = em("sub", t, em.to_float(em.cmp(t, x, "gt"), dt))
    return _keep_big(em, x, t)


def ceil_values(em: Em, x: Value) -> Value:
    if not x.type.dtype.is_float:
        return x
    return em.neg(floor_values(em, em.neg(x)))


def round_values(em: Em, x: Value) -> Value:
    """Round half to even (NumPy's ``round``): floor, then up when the rest is above one half, or
    exactly one half with an odd floor."""
    dt = x.type.dtype
    if not dt.is_float:
        return x
    f = floor_values(em, x)
    d = em("sub", x, f)  # exact for |x| below the integer bound
    half = em.c(0.5, dt)
    two = em.c(2, dt)
    odd = em.cmp(em("sub", f, em("mul", two, floor_values(em, em("mul", f, half)))), em.c(1, dt), "eq")
    up = em.either(em.cmp(d, half, "gt"), em.both(em.cmp(d, half, "eq"), odd))
    r = em("add", f, em.to_float(up, dt))
    return _keep_big(em, x, r)


# -- sin and cos ----------------------------------------------------------------------------------

def _two_sum(em: Em, a: Value, b: Value) -> tuple[Value, Value]:
    """s + e = a + b exactly, s = fl(a + b) (Knuth's TwoSum; add and sub only)."""
    s = em("add", a, b)
    bb = em("sub", s, a)
    e = em("add", em("sub", a, em("sub", s, bb)), em("sub", b, bb))
    return s, e


def _mod4(em: Em, t: Value) -> Value:
    """t, less a multiple of 4 when |t| ≥ 4, exactly: t - 4·floor(t/4) ∈ [0, 4) is exact for
    |t| ≥ 4 (it is a multiple of t's last bit), an exact t of magnitude ≥ 2^54 is a multiple of 4,
    and |t| < 4 is kept as it is (4 - 1e-10 would round)."""
    q = em("mul", t, em.c(0.25))
    fq = em("convert", em("convert", q, dtype=DType.I64), dtype=DType.F64)
    fq = em("sub", fq, em.to_float(em.cmp(fq, q, "gt"), DType.F64))
    m = em("sub", t, em("mul", fq, em.c(4.0)))
    at = em.abs(t)
    m = em("select", em.lt(at, em.c(2.0 ** 54)), m, em.c(0.0))
    return em("select", em.lt(at, em.c(4.0)), t, m)


def reduce_pio2(em: Em, ax: Value, narrow: bool) -> tuple[Value, Value]:
    """(q, r) with ax = (4m + q)·π/2 + r, q ∈ {0, 1, 2, 3} (as f64) and |r| ≲ π/4, for f64 ax ≥ 0.

    The chunks c_i = C_i·2^(-24(i+1)) of 2/π whose products with ax are multiples of 4 are skipped:
    from the exponent E of ax (estimated within ±1) the window starts at chunk i0, and ax is scaled
    by 2^(-24·i0) (exact), which puts every product below 2^80.  ``narrow``: ax is an f32 value (24
    significant bits), so ax·C is exact as it is; otherwise ax is split into two 26-bit halves."""
    C = chunks()
    # ax's last bit is 2^(E - 23) (narrow) or 2^(E - 52): the product with c_i is a multiple of 4
    # for i < (E - 25) / 24 or (E - 54) / 24; two bits to spare for the estimate of E
    bias, window, n_exact = (27, 6, 3) if narrow else (56, 10, 4)
    i64 = DType.I64
    if narrow:
        # below 2^128, i0 = (E - bias) // 24 is at most 4: four compares give it from the exact E,
        # where an f64 log of every element cost a fifth of sin's time (docs/backend-cpu.md,
        # Measurements: gathers of elements from dense tensors)
        i0 = None
        for j in range(1, 5):
            step = em("convert", em.cmp(ax, em.c(2.0 ** (bias + CHUNK_BITS * j)), "ge"), dtype=i64)
            i0 = step if i0 is None else em("add", i0, step)
    else:
        e = em("mul", em("log", ax), em.c(_INV_LN2))
        lim = em.c(2000.0)
        e = em("select", em.cmp(e, lim, "gt"), lim, em("select", em.lt(e, em.neg(lim)), em.neg(lim), e))
        e = em("convert", e, dtype=DType.I64)
        i0 = em("div", em("sub", e, em.c(bias, i64)), em.c(CHUNK_BITS, i64))
        i0 = em("select", em.lt(i0, em.c(0, i64)), em.c(0, i64), i0)
    scale = em("gather", em.table([2.0 ** (-CHUNK_BITS * i) for i in range(len(C) - window)]), i0, axis=0)
    xs = em("mul", ax, scale)
    if narrow:
        pieces = [xs]
    else:  # two halves of at most 27 significant bits (Veltkamp): their products are exact
        g = em("mul", xs, em.c(134217729.0))  # 2^27 + 1
        hi = em("sub", g, em("sub", g, xs))
        pieces = [hi, em("sub", xs, hi)]
    ctab = em.table([float(v) for v in C])
    # S = Σ terms (the large ones reduced mod 4) as s + c_hi + c_lo: every term enters s through
    # TwoSum; for an f64 x the rounding errors are summed in double-double (c_hi, c_lo), so that
    # the remainder keeps 53 bits even where x·(2/π) nearly cancels with an integer (|r| ≥ 2^-62
    # for every double); for an f32 x, 2^-69 absolute suffices and the small terms are summed plainly
    s = c_hi = c_lo = None
    for j in range(window):
        cj = em("mul", em("gather", ctab, em("add", i0, em.c(j, i64)), axis=0),
                em.c(2.0 ** (-CHUNK_BITS * (j + 1))))
        for p in pieces:
            t = em("mul", p, cj)
            if j < n_exact:
                t = _mod4(em, t)
            if s is None:
                s = t
                continue
            if narrow and j >= n_exact:  # below 2^-16
                c_hi = em("add", c_hi, t)
                continue
            s, err = _two_sum(em, s, t)
            if c_hi is None:
                c_hi = err
            elif narrow:
                c_hi = em("add", c_hi, err)
            else:
                c_hi, err2 = _two_sum(em, c_hi, err)
                c_lo = err2 if c_lo is None else em("add", c_lo, err2)
    k = floor_values(em, em("add", s, em.c(0.5)))
    f = em("add", em("sub", s, k), c_hi)
    if c_lo is not None:
        f = em("add", f, c_lo)
    q = em("sub", k, em("mul", em.c(4.0), floor_values(em, em("mul", k, em.c(0.25)))))
    r = em("add", em("mul", f, em.c(PIO2_HI)), em("mul", f, em.c(PIO2_LO)))
    return q, r


def _poly(em: Em, z: Value, coeffs: list[float]) -> Value:
    acc = em.c(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = em("add", em.c(c), em("mul", z, acc))
    return acc


def sin_and_cos(em: Em, x: Value) -> tuple[Value, Value]:
    """``sin`` and ``cos`` of the float ``x`` in f64, from one argument reduction of x's own width
    (an f32 x reduces through ``reduce_pio2``'s narrow window: its products are exact as they are)."""
    dt = x.type.dtype
    w = x if dt is DType.F64 else em("convert", x, dtype=DType.F64)
    ax = em.abs(w)
    small = em.cmp(ax, em.c(0.7853981633974483), "le")  # |x| ≤ π/4: r = x, q = 0
    q, r = reduce_pio2(em, ax, narrow=dt is not DType.F64)
    neg = em.lt(w, em.c(0.0))  # x < 0: x = -(4m + q)·π/2 - r, i.e. quadrant -q, remainder -r
    r = em("select", neg, em.neg(r), r)
    q = em("select", em.both(neg, em.cmp(q, em.c(0.0), "ne")), em("sub", em.c(4.0), q), q)
    r = em("select", small, w, r)
    q = em("select", small, em.c(0.0), q)
    z = em("mul", r, r)
    s = em("add", r, em("mul", r, em("mul", z, _poly(em, z, _SIN))))
    # |r| < 2^-27: sin r = r to within 2^-55 (keeps the sign of ±0 and tiny values exactly)
    s = em("select", em.lt(em.abs(r), em.c(2.0 ** -27)), r, s)
    c = em("add", em("sub", em.c(1.0), em("mul", z, em.c(0.5))), em("mul", em("mul", z, z), _poly(em, z, _COS)))
    finite = em.lt(ax, em.c(float("inf")))
    nan = em.c(float("nan"))

    def quadrant(q: Value) -> Value:  # 0: sin r, 1: cos r, 2: -sin r, 3: -cos r
        out = em("select", em.cmp(q, em.c(1.0), "eq"), c,
                 em("select", em.cmp(q, em.c(2.0), "eq"), em.neg(s),
                    em("select", em.cmp(q, em.c(3.0), "eq"), em.neg(c), s)))
        return em("select", finite, out, nan)
    # cos(x) = sin(x + π/2): one quadrant on
    q_cos = em("add", q, em.c(1.0))
    q_cos = em("select", em.cmp(q_cos, em.c(4.0), "eq"), em.c(0.0), q_cos)
    return quadrant(q), quadrant(q_cos)


def sin_cos(em: Em, x: Value, which: str) -> Value:
    """``sin`` or ``cos`` of the float ``x`` (computed in f64, rounded to x's dtype; the other one's
    selects are dead code, which the canonicalization removes)."""
    dt = x.type.dtype
    out = sin_and_cos(em, x)[0 if which == "sin" else 1]
    return out if dt is DType.F64 else em("convert", out, dtype=dt)


def tan_values(em: Em, x: Value) -> Value:
    """sin/cos in f64 (each accurate to about 1e-16) from one argument reduction, rounded once to
    x's dtype.  Why one: an f32 x widened first took two f64-width reductions, 2.8x sin's time."""
    dt = x.type.dtype
    s, c = sin_and_cos(em, x)
    t = em("div", s, c)
    return t if dt is DType.F64 else em("convert", t, dtype=dt)


# -- log2 and pow ---------------------------------------------------------------------------------

def _ldexp_or_inf(m: float, e: int) -> float:
    import math

    try:
        return math.ldexp(m, e)
    except OverflowError:
        return float("inf")


def log2_values(em: Em, x: Value) -> Value:
    """log2(x) = E + log(m)/ln 2 with x = m·2^E, m ∈ [√½, √2): E is exact (powers of two give
    exact integers) and |log(m)/ln 2| ≤ ½.  Computed in f64."""
    dt = x.type.dtype
    w = x if dt is DType.F64 else em("convert", x, dtype=DType.F64)
    lo, hi = -1080, 1030  # exponents of the power-of-two table
    tiny = em.lt(w, em.c(2.0 ** -1000))  # subnormals: scale up first (exactly)
    ws = em("select", tiny, em("mul", w, em.c(2.0 ** 100)), w)
    e = floor_values(em, em("mul", em("log", ws), em.c(_INV_LN2)))
    e = em("select", em.lt(e, em.c(float(lo + 2))), em.c(float(lo + 2)),
           em("select", em.cmp(e, em.c(float(hi - 2)), "gt"), em.c(float(hi - 2)), e))
    pow2 = em.table([_ldexp_or_inf(1.0, -k) for k in range(lo, hi)])  # 2^-k, subnormal ones too
    ei = em("convert", em("sub", e, em.c(float(lo))), dtype=DType.I64)
    m = em("mul", ws, em("gather", pow2, ei, axis=0))  # ws·2^-E, exact
    # correct the estimate of E (off by at most one) and move m into [√½, √2)
    up = em.cmp(m, em.c(1.4142135623730951), "ge")
    down = em.lt(m, em.c(0.7071067811865476))
    m = em("select", up, em("mul", m, em.c(0.5)), em("select", down, em("mul", m, em.c(2.0)), m))
    e = em("add", e, em("sub", em.to_float(up, DType.F64), em.to_float(down, DType.F64)))
    e = em("select", tiny, em("sub", e, em.c(100.0)), e)
    y = em("add", e, em("mul", em("log", m), em.c(_INV_LN2)))
    # special values: log2(0) = -inf, log2(x < 0) = NaN, log2(inf) = inf, NaN stays NaN
    y = em("select", em.cmp(w, em.c(0.0), "eq"), em.c(float("-inf")), y)
    y = em("select", em.lt(w, em.c(0.0)), em.c(float("nan")), y)
    y = em("select", em.cmp(w, em.c(float("inf")), "eq"), em.c(float("inf")), y)
    y = em("select", em.cmp(w, w, "ne"), w, y)
    return y if dt is DType.F64 else em("convert", y, dtype=dt)


def int_power(em: Em, x: Value, n: int) -> Value:
    """x**n for a constant integer n by repeated squaring (⌊log2 n⌋ squarings and one product per
    set bit); a negative n is 1 / x**|n| (floats only)."""
    dt = x.type.dtype
    if n == 0:  # pow(x, 0) = 1, even for NaN; shape of x
        one = em.c(1, dt)
        return em("select", em.c(True, DType.BOOL), one, em("mul", x, em.c(0, dt))) if x.type.rank else one
    k = abs(n)
    result = None
    base = x
    while k:
        if k & 1:
            result = base if result is None else em("mul", result, base)
        k >>= 1
        if k:
            base = em("mul", base, base)
    assert result is not None
    return em("div", em.c(1, dt), result) if n < 0 else result


FLOAT_LITERAL_POWERS = {DType.F32: range(-4, 5), DType.F64: range(-1, 5)}
"""``pow(x, y)`` with y a float literal of one of these integral values (``pow(x, 2.0)``,
``pow(x, -1.0)``) multiplies (``wide_int_power``) instead of taking ``exp(y·log|x|)``: some 100
f64 operations an element for what is one multiply, and less accurate.  Larger powers keep ``exp``
and ``log`` (a product of n factors is off by up to n - 1 roundings), and so do f64's negative
powers beyond -1: x^n would overflow where x^-n is a subnormal."""


def wide_int_power(em: Em, x: Value, n: int) -> Value:
    """x**n for a float x and a small constant integer n (``FLOAT_LITERAL_POWERS``), the products
    taken in f64 and rounded once to x's dtype: an f32 result within one ULP (as ``pow_values``),
    an f64 one within |n| - 1 ULP, one more for a negative n (its roundings).  The special values are the
    multiplications' (C99's pow on each: pow(x, ±0) = 1 even for NaN, pow(±0, -n) = ±inf by n's
    parity, pow(±inf, n), NaN stays NaN)."""
    dt = x.type.dtype
    wide = x if dt is DType.F64 else em("convert", x, dtype=DType.F64)
    y = int_power(em, wide, n)
    return y if dt is DType.F64 else em("convert", y, dtype=dt)


def pow_values(em: Em, x: Value, y: Value) -> Value:
    """x**y for floats: |x|**y = exp(y·log|x|) in f64, the sign for negative x and an odd integer
    y, and C99's special cases (pow(x, ±0) = 1, pow(1, y) = 1, pow(-1, ±inf) = 1, NaN for a
    negative finite x and a finite non-integer y)."""
    dt = x.type.dtype
    f64 = DType.F64
    wx = x if dt is f64 else em("convert", x, dtype=f64)
    wy = y if dt is f64 else em("convert", y, dtype=f64)
    mag = em("exp", em("mul", wy, em("log", em.abs(wx))))
    zero, one, inf = em.c(0.0), em.c(1.0), em.c(float("inf"))
    y_finite = em.lt(em.abs(wy), inf)
    fy = floor_values(em, wy)
    y_int = em.both(em.cmp(fy, wy, "eq"), y_finite)
    half_floor = floor_values(em, em("mul", wy, em.c(0.5)))
    odd = em.both(y_int, em.cmp(em("sub", wy, em("mul", half_floor, em.c(2.0))), one, "eq"))
    x_zero = em.cmp(wx, zero, "eq")
    signbit = em.either(em.lt(wx, zero), em.both(x_zero, em.lt(em("div", one, wx), zero)))
    out = em("select", em.both(signbit, odd), em.neg(mag), mag)
    neg_finite = em.both(em.lt(wx, zero), em.cmp(wx, em.neg(inf), "gt"))
    bad = em.both(em.both(neg_finite, y_finite), em("compare", y_int, em.c(False, DType.BOOL), direction="eq"))
    out = em("select", bad, em.c(float("nan")), out)
    unit = em.either(em.cmp(wx, one, "eq"), em.cmp(wy, zero, "eq"))
    unit = em.either(unit, em.both(em.cmp(wx, em.c(-1.0), "eq"), em.cmp(em.abs(wy), inf, "eq")))
    out = em("select", unit, one, out)
    out = em("select", em.cmp(wy, one, "eq"), wx, out)  # pow(x, 1) = x exactly
    return out if dt is f64 else em("convert", out, dtype=dt)


# -- the builtins ---------------------------------------------------------------------------------

def _float_unary(fn: Any, name: str) -> Any:
    def lower(a: Args) -> Any:
        x = a.tensor("x")
        if fn in (floor_values, ceil_values, round_values, trunc_values) and not x.type.dtype.is_float:
            _need(a, x, lambda d: d.is_numeric, "numeric")
            return x
        _need(a, x, lambda d: d.is_float, "float")
        return fn(Em(a.E, a.node.span, name), x)
    return lower


def _sin_or_cos(which: str) -> Any:
    def lower(a: Args) -> Any:
        x = a.tensor("x")
        _need(a, x, lambda d: d.is_float, "float")
        return sin_cos(Em(a.E, a.node.span, which), x, which)
    return lower


def b_pow(a: Args) -> Any:
    E, off = a.E, a.node.span
    base, expo = a.value("x"), a.value("y")
    em = Em(E, off, "pow")
    if type(expo) is Lit and expo.kind == "int" and abs(expo.value) <= 1 << 16:
        x = base if type(base) is Value else E.materialize(base)
        if type(x) is not Value:
            raise _Poisoned()
        if expo.value < 0 and not x.type.dtype.is_float:
            raise a.fail("E2005", "a negative integer power of an integer tensor", "y",
                         "`cast` the base to f32 first")
        _need(a, x, lambda d: d.is_numeric, "numeric")
        return int_power(em, x, expo.value)
    x, y = E.pair(base, expo, off)
    if x is POISON or y is POISON:
        raise _Poisoned()
    if type(expo) is Lit and expo.kind == "float" and expo.value in FLOAT_LITERAL_POWERS.get(x.type.dtype, ()):
        return wide_int_power(em, x, int(expo.value))
    if not x.type.dtype.is_float:
        raise a.fail("E2005", f"`pow` of {x.type} needs a float tensor or a constant integer exponent",
                     "y", "`cast(x, f32)` first, or write the exponent as an integer literal")
    return pow_values(em, x, y)


def b_sign(a: Args) -> Any:
    """-1, 0 or 1 of x's dtype; sign(±0) = +0 and sign(NaN) = NaN (as NumPy)."""
    x = a.tensor("x")
    _need(a, x, lambda d: d.is_numeric, "numeric")
    em = Em(a.E, a.node.span, "sign")
    dt = x.type.dtype
    zero = em.c(0, dt)
    pos = em.to_float(em.cmp(x, zero, "gt"), dt) if dt.is_float else em("convert", em.cmp(x, zero, "gt"), dtype=dt)
    neg = em.to_float(em.lt(x, zero), dt) if dt.is_float else em("convert", em.lt(x, zero), dtype=dt)
    out = em("sub", pos, neg)
    if dt.is_float:  # sign(±0) = +0 (the sub above), NaN passes through
        out = em("select", em.cmp(x, x, "ne"), x, out)
    return out


def b_clip(a: Args) -> Any:
    """min(max(x, lo), hi) with NaN passing through (NumPy's ``clip``)."""
    E, off = a.E, a.node.span
    x = a.tensor("x")
    em = Em(E, off, a.name)
    out = x
    for key, direction in (("lo", "lt"), ("hi", "gt")):
        if not a.has(key):
            continue
        v = a.value(key)
        v = E.materialize(v, x.type.dtype) if type(v) is Lit else E.tensor(v, a.span(key))
        out = em("select", em.cmp(out, v, direction), v, out)
    return out


def _minmax_dispatch(reduce_fn: Any, elementwise_fn: Any) -> Any:
    """``min``/``max``: a reduction (``max(x)``, ``max(x, 1)``, ``max(x, axes=[0])``) unless the second
    positional argument is a value rather than axes (``max(x, 0.0)``, ``max(a, b)``): then it is
    the elementwise ``minimum``/``maximum``."""
    def lower(a: Args) -> Any:
        second = a.nodes.get("axes")
        if second is not None and len(a.node.args) >= 2 and a.node.args[1] is second \
                and not _is_axes(a, second):
            a.nodes["a"], a.nodes["b"] = a.nodes["x"], second
            return elementwise_fn(a)
        return reduce_fn(a)
    return lower


def _is_axes(a: Args, node: Any) -> bool:
    from . import ast as A

    if type(node) in (A.IntLit, A.ArrayLit, A.TupleExpr):
        return type(node) is A.IntLit or all(type(e) is A.IntLit or
                                             (type(e) is A.Unary and type(e.operand) is A.IntLit)
                                             for e in node.elts)
    if type(node) is A.Unary and type(node.operand) is A.IntLit:
        return True
    v = a.E.ev(node)
    return type(v) is Lit and v.kind == "int"


def b_min_reduce(a: Args) -> Any:
    """min over axes: -max(-x) for floats (exact, NaN propagates), bitwise-not trick for ints:
    min(x) = -1 - max(-1 - x) (exact for every int, no overflow)."""
    E, off = a.E, a.node.span
    x = a.tensor("x")
    em = Em(E, off, "min")
    dt = x.type.dtype
    if dt is DType.BOOL:
        _need(a, x, lambda d: d.is_numeric, "numeric")
    flip = (lambda v: em.neg(v)) if dt.is_float else (lambda v: em("sub", em.c(-1, dt), v))
    m = em("reduce_max", flip(x), axes=tuple(_reduce_axes(a, x)), keepdims=_keepdims(a))
    return flip(m)


def b_prod(a: Args) -> Any:
    """Product over axes as a tree of pairwise ``mul`` (each step multiplies the two halves of the
    reduced axis, padded with 1); the reduced axes are moved last and flattened first.  Needs
    static extents on the reduced axes."""
    E, off = a.E, a.node.span
    x = a.tensor("x")
    _need(a, x, lambda d: d.is_numeric, "numeric")
    em = Em(E, off, "prod")
    axes = _reduce_axes(a, x)
    keep = _keepdims(a)
    shape = list(x.type.shape)
    n = 1
    for ax in axes:
        if type(shape[ax]) is not int:
            raise a.fail("E3011", f"`prod` over an axis of symbolic extent {shape[ax]}", "axes",
                         "give the reduced axes concrete sizes")
        n *= shape[ax]
    rest = [i for i in range(len(shape)) if i not in axes]
    y = x
    if axes != list(range(len(shape) - len(axes), len(shape))):
        y = em("transpose", y, permutation=tuple(rest + axes))
    kept = [shape[i] for i in rest]
    y = em("reshape", y, shape=tuple(kept + [n]))
    one = em.c(1, x.type.dtype)
    if n == 0:
        y = em("reshape", em("pad", y, one, lo=(0,) * (len(kept) + 1), hi=(0,) * len(kept) + (1,),
                             interior=(0,) * (len(kept) + 1)), shape=tuple(kept + [1]))
        n = 1
    r = len(kept)
    while n > 1:
        if n % 2:
            y = em("pad", y, one, lo=(0,) * (r + 1), hi=(0,) * r + (1,), interior=(0,) * (r + 1))
            n += 1
        start, stop = [0] * (r + 1), kept + [n]
        lo = em("slice", y, start=tuple(start), stop=tuple(stop), step=(1,) * r + (2,))
        hi = em("slice", y, start=tuple(start[:-1] + [1]), stop=tuple(stop), step=(1,) * r + (2,))
        y = em("mul", lo, hi)
        n //= 2
    out_shape = [1 if i in axes else d for i, d in enumerate(shape)] if keep else kept
    return em("reshape", y, shape=tuple(out_shape))


def _arg_extreme(direction: str) -> Any:
    """``argmax``/``argmin`` over one axis (default: the last): the first index where the extreme
    is reached (a NaN counts as the extreme, as in NumPy); i32 unless ``dtype=`` says otherwise."""
    def lower(a: Args) -> Any:
        from .builtins import _dtype_arg, _norm_axis

        E, off = a.E, a.node.span
        x = a.tensor("x")
        _need(a, x, lambda d: d.is_numeric, "numeric")
        em = Em(E, off, a.name)
        axis = _norm_axis(a, a.int("axis", -1), x.type.rank, "axis")
        n = x.type.shape[axis]
        if type(n) is not int:
            raise a.fail("E3011", f"`{a.name}` over an axis of symbolic extent", "axis",
                         "give the axis a concrete size")
        dt = _dtype_arg(a, "dtype") or DType.I32
        ext = "reduce_max"
        v = x if direction == "max" else (em.neg(x) if x.type.dtype.is_float else
                                         em("sub", em.c(-1, x.type.dtype), x))
        m = em(ext, v, axes=(axis,), keepdims=True)
        hit = em.cmp(v, m, "eq")
        if x.type.dtype.is_float:
            nan = em.cmp(x, x, "ne")
            any_nan = em("reduce_max", em.to_float(nan, DType.F32), axes=(axis,), keepdims=True)
            hit = em("select", em.cmp(any_nan, em.c(0.0, DType.F32), "gt"), nan, hit)
        import numpy as np

        shape = [1] * x.type.rank
        shape[axis] = n
        iota = E.b.const_array(np.arange(n, dtype=dt.numpy).reshape(shape), None, dt)
        # the first hit: max over (n - 1 - index) where hit
        rev = em("sub", em.c(n - 1, dt), iota)
        score = em("select", hit, rev, em.c(-1, dt))
        best = em("reduce_max", score, axes=(axis,), keepdims=_keepdims(a))
        return em("sub", em.c(n - 1, dt), best)
    return lower


_ROUND = {"floor": floor_values, "ceil": ceil_values, "round": round_values, "trunc": trunc_values}

TABLE: dict[str, tuple[tuple, Any]] = {
    **{name: (X, _float_unary(fn, name)) for name, fn in _ROUND.items()},
    "sin": (X, _sin_or_cos("sin")),
    "cos": (X, _sin_or_cos("cos")),
    "tan": (X, _float_unary(tan_values, "tan")),
    "log2": (X, _float_unary(log2_values, "log2")),
    "pow": ((("x", ("base", "a"), REQUIRED), ("y", ("exponent", "exp", "b"), REQUIRED)), b_pow),
    "sign": (X, b_sign),
    "clip": (X + (("lo", ("min", "a_min", "low"), None), ("hi", ("max", "a_max", "high"), None)), b_clip),
    "argmax": (X + (("axis", ("dim",), None), ("keepdims", (), None), ("dtype", (), None)), _arg_extreme("max")),
    "argmin": (X + (("axis", ("dim",), None), ("keepdims", (), None), ("dtype", (), None)), _arg_extreme("min")),
    "prod": (X + AXES, b_prod),
}
TABLE["clamp"] = TABLE["clip"]


def minmax_table(reductions: dict[str, Any], elementwise: dict[str, Any]) -> dict[str, tuple[tuple, Any]]:
    """``min`` and ``max`` as reduction-or-elementwise builtins (see ``_minmax_dispatch``)."""
    params = X + AXES + (("a", (), None), ("b", (), None))
    return {"max": (params, _minmax_dispatch(reductions["max"], elementwise["maximum"])),
            "min": (params, _minmax_dispatch(b_min_reduce, elementwise["minimum"]))}

