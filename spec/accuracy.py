"""Accuracy classes: how close an implementation's result must be to the exact mathematical result.

Every op names one class (``OpDef.accuracy``); every comparison of an implementation against the
reference in this project -- tests, conformance cases, differential testing of compiled backends --
goes through :func:`check`, so tolerances are derived from this module and nowhere else.

Classes
-------
``exact``
    Bit-exact.  The one exception is NaN: any NaN matches any NaN, because the sign and payload of a
    NaN result are unspecified (IEEE 754 does not fix them and hardware differs; no Core IR op can
    observe them except ``convert`` to bool, which maps every NaN to true).  ``-0`` and ``+0`` are
    different values under ``exact``.
``exp`` / ``log``
    At most ``ULP_BOUNDS[dtype]`` units in the last place from the exact result: f32 ≤ 4 ULP,
    f64 ≤ 2 ULP.  The special values listed in the op's edge cases (``exp(±0) = 1``,
    ``exp(-inf) = +0``, ``log(1) = +0``, ``log(±0) = -inf``, NaN, ±inf) are exact.  Subnormal inputs
    and results are honoured, never flushed to zero; the ULP distance counts representable values,
    so in the subnormal range one ULP is the smallest subnormal (2^-149 for f32, 2^-1074 for f64).
``sum`` (reduce_sum)
    ``|computed - exact| ≤ γ(n) · Σ|x_i|`` with ``γ(n) = n·u / (1 - n·u)``, ``u`` the unit roundoff of
    the dtype (2^-24 for f32, 2^-53 for f64) and ``n`` the number of summed elements.  This holds
    for every summation order (Higham, *Accuracy and Stability of Numerical Algorithms*, §4.2), so
    implementations may reassociate.  The model assumes no underflow; a further ``n · η`` is
    allowed, ``η`` the smallest positive subnormal of the dtype.  A non-finite exact result
    (NaN, ±inf) must be matched exactly (any NaN for NaN).
``dot`` (matmul, conv2d)
    As ``sum`` with ``Σ|a_k · b_k|`` over the products of one result element and ``n`` the contraction
    length (``K`` for matmul, ``KH · KW · C`` for conv2d, counting padding and dilation holes).

Overflow in ``sum`` and ``dot``
    Higham's bound assumes that no intermediate value overflows.  Let ``Ω`` be the dtype's largest
    finite value (f32 ``(2 − 2^-23)·2^127``, f64 ``(2 − 2^-52)·2^1023``) and ``S`` the exact
    ``Σ|x_i|`` (``Σ|a_k · b_k|``) over the *finite* terms of one result element.  Where
    ``(1 + γ(n)) · S ≥ Ω`` (that is ``S ≥ (1 − n·u) · Ω``), the result may also be NaN, and, where
    every term is finite, ``+inf`` or ``-inf``, whatever the exact result; a finite result must
    still meet the bound.  Why this threshold: in every summation order each computed product and
    partial sum of finite terms has magnitude at most ``(1 + γ(n)) · S`` as long as nothing
    overflowed, so below it nothing can overflow (the rule adds nothing), and above it an
    implementation that accumulates in the dtype itself, in an order the spec leaves free, may
    overflow to ±inf, ``inf − inf`` gives NaN, and an infinite term of the other sign turns the
    exact ±inf into NaN.  This is the practice of numerical libraries: Higham's model, like the
    error analyses of BLAS and LAPACK, assumes no overflow; the reference BLAS ``SDOT``
    accumulates in single precision (``DSDOT`` is the separate routine that accumulates in
    double); StableHLO leaves the order of a reduction to the implementation (a binary tree of its
    choosing) and gives overflow IEEE's default result, ±inf.  Requiring a wider accumulator
    instead would halve the speed of every f32 reduction.

Integer and bool results are always exact, whatever the class: integer arithmetic wraps modulo
``2^bits`` and is fully specified.

Comparing against the reference
-------------------------------
The reference is itself an implementation; :func:`check` compares an ``actual`` result with the
reference's ``expected`` and therefore allows the sum of both sides' bounds:

* ULP classes: ``ulp_distance(actual, expected) ≤ ULP_BOUNDS[dtype] + REFERENCE_ULP`` -- the reference
  computes f32 ``exp``/``log`` in f64 and rounds once, and f64 with the platform libm, both within
  ``REFERENCE_ULP = 1`` of the exact result.
* ``sum``/``dot``: ``|actual - expected| ≤ 2 · (γ(n) · abs_sum + n · η)``; and the overflow rule
  where ``(1 + γ(n))² · S ≥ Ω`` (the reference's ``S`` carries a relative error of at most γ(n)
  itself).  ``S`` is the ``finite_abs_sum`` argument (``mind.reference.accuracy.check_op`` computes
  it from the operands); without it, ``abs_sum`` where the terms are known to be finite (the
  expected value, or ``abs_sum``, is finite: a non-finite term makes both non-finite), else 0.
  Two corners stay strict, on the safe side: a finite ``actual`` where the reference's value is
  non-finite, and, without ``finite_abs_sum``, an element with an infinite term, or an f64 element
  whose ``abs_sum`` overflows f64 (a non-finite term and finite terms of that size cannot be told
  apart there).

This module holds the classes and bounds only; ``n`` and ``abs_sum`` of an op applied to concrete
arrays, and ``check_op`` (``check`` with those filled in), are in ``mind.reference.accuracy``, which
computes them with the reference's own ops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from mind.spec.dtypes import DType, parse_dtype

REFERENCE_ULP = 1


@dataclass(frozen=True)
class AccuracyClass:
    name: str
    kind: str  # "exact" | "ulp" | "sum"
    summary: str
    ulp: Mapping[str, int] = field(default_factory=dict)  # dtype name -> bound, for kind "ulp"


ULP_BOUNDS = {"f32": 4, "f64": 2}

ACCURACY: dict[str, AccuracyClass] = {
    "exact": AccuracyClass(
        "exact", "exact",
        "Bit-exact. NaN matches any NaN: the sign and payload of a NaN result are unspecified. "
        "-0 and +0 differ. Integer and bool results are exact in every class."),
    "exp": AccuracyClass(
        "exp", "ulp",
        "f32 ≤ 4 ULP, f64 ≤ 2 ULP from the exact result; the special values of the edge cases are "
        "exact; subnormal inputs and results are honoured (not flushed), one ULP there being the "
        "smallest subnormal.", ULP_BOUNDS),
    "log": AccuracyClass(
        "log", "ulp",
        "f32 ≤ 4 ULP, f64 ≤ 2 ULP from the exact result; the special values of the edge cases are "
        "exact; subnormal inputs are honoured (not flushed).", ULP_BOUNDS),
    "sum": AccuracyClass(
        "sum", "sum",
        "|computed − exact| ≤ γ(n)·Σ|x_i| (+ n·η for underflow), γ(n) = n·u/(1 − n·u), u the unit "
        "roundoff (f32 2^-24, f64 2^-53), n the number of summed elements; any summation order. "
        "Non-finite exact results are matched exactly. Overflow: where (1 + γ(n))·S ≥ Ω, S the "
        "Σ|x_i| of the finite terms and Ω the dtype's largest finite value, an intermediate sum may "
        "overflow: the result may also be NaN, and ±inf if every term is finite."),
    "dot": AccuracyClass(
        "dot", "sum",
        "|computed − exact| ≤ γ(n)·Σ|a_k·b_k| (+ n·η for underflow), n the contraction length "
        "(K for matmul, KH·KW·C for conv2d); any accumulation order. Non-finite exact results are "
        "matched exactly. Overflow: where (1 + γ(n))·S ≥ Ω, S the Σ|a_k·b_k| of the finite terms "
        "and Ω the dtype's largest finite value, an intermediate product or sum may overflow: the "
        "result may also be NaN, and ±inf if every term is finite."),
}


def get(name: str) -> AccuracyClass:
    try:
        return ACCURACY[name]
    except KeyError:
        raise KeyError(f"unknown accuracy class {name!r}; classes: {', '.join(ACCURACY)}") from None


def as_dtype(dtype: DType | str) -> DType:
    """``dtype`` itself, or the dtype it names (``ValueError`` for an unknown name)."""
    if isinstance(dtype, DType):
        return dtype
    d = parse_dtype(str(dtype))
    if d is None:
        raise ValueError(f"unknown dtype {dtype!r}")
    return d


def unit_roundoff(dtype: DType | str) -> float:
    return as_dtype(dtype).unit_roundoff


def smallest_subnormal(dtype: DType | str) -> float:
    return {"f32": 2.0 ** -149, "f64": 2.0 ** -1074}[as_dtype(dtype).value]


def gamma(n: int, dtype: DType | str) -> float:
    """γ(n) = n·u / (1 − n·u); +inf once n·u ≥ 1 (no bound)."""
    u = unit_roundoff(dtype)
    nu = n * u
    if nu >= 1:
        return float("inf")
    return nu / (1 - nu)


def largest_finite(dtype: DType | str) -> float:
    """Ω: the largest finite value of a float dtype."""
    return {"f32": (2 - 2.0 ** -23) * 2.0 ** 127, "f64": (2 - 2.0 ** -52) * 2.0 ** 1023}[as_dtype(dtype).value]


def may_overflow(n: int, abs_sum: Any, dtype: DType | str, implementations: int = 1) -> Any:
    """Where an accumulation of ``n`` finite terms whose Σ|terms| is ``abs_sum`` may overflow in
    some order: ``(1 + γ(n))^k · abs_sum ≥ Ω`` (elementwise), ``k = implementations`` (2 when
    ``abs_sum`` is itself computed by an implementation, the reference).  An ``abs_sum`` of 0 never
    overflows, even when γ(n) is infinite."""
    import numpy as np

    with np.errstate(invalid="ignore", over="ignore"):
        grown = (1 + gamma(n, dtype)) ** implementations * np.asarray(abs_sum, dtype=np.float64)
        return (np.asarray(abs_sum, dtype=np.float64) > 0) & (grown >= largest_finite(dtype))


def sum_bound(n: int, abs_sum: Any, dtype: DType | str) -> Any:
    """The spec's bound for one implementation: γ(n)·abs_sum + n·η (elementwise on arrays)."""
    import numpy as np

    return gamma(n, dtype) * np.asarray(abs_sum, dtype=np.float64) + n * smallest_subnormal(dtype)


# ---------------------------------------------------------------------------------------------
# ULP distance
# ---------------------------------------------------------------------------------------------

ULP_MAX = (1 << 64) - 1  # distance reported between a finite value and an infinity, or NaN and non-NaN


def ulp_distance(a: Any, b: Any, dtype: DType | str) -> Any:
    """Per-element ULP distance between two float arrays of ``dtype`` (NumPy uint64 array).

    The number of representable values of the dtype strictly between them, plus one (0 if equal).
    ``+0`` and ``-0`` are at distance 0.  NaN against NaN is 0; NaN against anything else, and a
    finite value against an infinity, is ``ULP_MAX``; equal infinities are at distance 0.
    """
    import numpy as np

    dt = as_dtype(dtype)
    if not dt.is_float:
        raise ValueError(f"ULP distance is defined for float dtypes, not {dt.value}")
    a = np.asarray(a, dtype=dt.numpy)
    b = np.asarray(b, dtype=dt.numpy)
    a, b = np.broadcast_arrays(a, b)
    uint = np.uint32 if dt is DType.F32 else np.uint64
    sign = uint(1) << uint(dt.bits - 1)
    ab, bb = a.view(uint), b.view(uint)
    amag, bmag = (ab & ~sign).astype(np.uint64), (bb & ~sign).astype(np.uint64)
    aneg, bneg = (ab & sign) != 0, (bb & sign) != 0
    with np.errstate(over="ignore"):
        same = np.where(amag >= bmag, amag - bmag, bmag - amag)
        diff = amag + bmag  # no overflow: each magnitude < 2**63
    dist = np.where(aneg == bneg, same, diff).astype(np.uint64)
    an, bn = np.isnan(a), np.isnan(b)
    ai, bi = np.isinf(a), np.isinf(b)
    dist = np.where(an != bn, np.uint64(ULP_MAX), dist)
    dist = np.where(an & bn, np.uint64(0), dist)
    dist = np.where((ai | bi) & ~(an | bn) & (a != b), np.uint64(ULP_MAX), dist)
    return dist.astype(np.uint64)


def ulp_histogram(dist: Any) -> dict[str, int]:
    """StableHLO-style histogram of ULP distances: buckets 0, 1, 2, 3, ≥4."""
    import numpy as np

    d = np.asarray(dist, dtype=np.uint64).reshape(-1)
    return {"0": int(np.sum(d == 0)), "1": int(np.sum(d == 1)), "2": int(np.sum(d == 2)),
            "3": int(np.sum(d == 3)), ">=4": int(np.sum(d >= 4))}


# ---------------------------------------------------------------------------------------------
# check
# ---------------------------------------------------------------------------------------------

@dataclass
class Mismatch:
    """Why ``actual`` is not within the accuracy class of ``expected``."""

    accuracy: str
    dtype: str
    reason: str
    index: tuple[int, ...] | None = None  # first failing element (row-major), if any
    actual: Any = None
    expected: Any = None
    allowed: Any = None  # the bound at that element (ULP count or absolute error)
    failing: int = 0  # number of failing elements
    total: int = 0
    histogram: dict[str, int] | None = None  # ULP distances of all elements (floats)
    failures: list[tuple[tuple[int, ...], Any, Any, Any]] = field(default_factory=list)  # first few

    def __str__(self) -> str:
        lines = [f"{self.reason} [accuracy {self.accuracy}, dtype {self.dtype}]"]
        if self.index is not None:
            lines.append(f"  {self.failing} of {self.total} elements fail; first at index {list(self.index)}: "
                         f"actual {self.actual!r}, expected {self.expected!r}, allowed {self.allowed}")
            for idx, act, exp, dist in self.failures[1:]:
                lines.append(f"  at {list(idx)}: actual {act!r}, expected {exp!r} ({dist})")
        if self.histogram is not None:
            lines.append("  ULP distance histogram: " +
                         ", ".join(f"{k}: {v}" for k, v in self.histogram.items()))
        return "\n".join(lines)


def _scalar(x: Any) -> Any:
    return x.item() if hasattr(x, "item") else x


def check(accuracy: str | AccuracyClass, dtype: DType | str, actual: Any, expected: Any, *,
          n: int | None = None, abs_sum: Any = None, finite_abs_sum: Any = None,
          max_reported: int = 5) -> Mismatch | None:
    """Compare an implementation's ``actual`` result with the reference's ``expected``.

    ``accuracy`` is the op's class; ``n`` and ``abs_sum`` (broadcastable to the result shape:
    Σ|x_i| or Σ|a_k·b_k| per result element) are required for ``sum``/``dot`` on float dtypes;
    ``finite_abs_sum`` (the same over the finite terms only) makes the overflow rule exact where
    some terms are infinite (module docstring).
    Returns None when the result is acceptable, else a :class:`Mismatch`.
    """
    import numpy as np

    acc = accuracy if isinstance(accuracy, AccuracyClass) else get(accuracy)
    dt = as_dtype(dtype)
    exp_arr = np.asarray(expected)
    act_arr = np.asarray(actual)
    if act_arr.dtype != dt.numpy:
        return Mismatch(acc.name, dt.value, f"result has dtype {act_arr.dtype}, expected {dt.value}")
    if exp_arr.dtype != dt.numpy:
        exp_arr = exp_arr.astype(dt.numpy)
    if act_arr.shape != exp_arr.shape:
        return Mismatch(acc.name, dt.value,
                        f"result has shape {list(act_arr.shape)}, expected {list(exp_arr.shape)}")
    total = int(exp_arr.size)
    if not dt.is_float:
        bad = act_arr != exp_arr
        return _report(acc, dt, bad, act_arr, exp_arr, 0, None, total, "values differ (integers and "
                       "bools are exact)", max_reported)
    dist = ulp_distance(act_arr, exp_arr, dt)
    hist = ulp_histogram(dist)
    if acc.kind == "exact":
        bits = np.uint32 if dt is DType.F32 else np.uint64
        same_bits = act_arr.view(bits) == exp_arr.view(bits)
        bad = ~(same_bits | (np.isnan(act_arr) & np.isnan(exp_arr)))
        return _report(acc, dt, bad, act_arr, exp_arr, 0, hist, total,
                       "values are not bit-identical", max_reported, dist)
    if acc.kind == "ulp":
        allowed = acc.ulp[dt.value] + REFERENCE_ULP
        bad = dist > np.uint64(allowed)
        return _report(acc, dt, bad, act_arr, exp_arr, allowed, hist, total,
                       f"ULP distance over {allowed}", max_reported, dist)
    # sum / dot
    if n is None or abs_sum is None:
        raise ValueError(f"accuracy class {acc.name} needs n and abs_sum")
    tol = 2.0 * np.broadcast_to(sum_bound(int(n), abs_sum, dt), exp_arr.shape)
    e64, a64 = exp_arr.astype(np.float64), act_arr.astype(np.float64)
    finite_exp = np.isfinite(e64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(a64 - e64)
        ok_finite = finite_exp & np.isfinite(a64) & (err <= tol)
    # a non-finite bound (n·u ≥ 1 or an infinite abs_sum) admits any finite result
    ok_unbounded = finite_exp & ~np.isfinite(tol)
    ok_nonfinite = ~finite_exp & ((np.isnan(e64) & np.isnan(a64)) | (e64 == a64))
    # an accumulation whose finite terms may overflow admits NaN, and ±inf too where every term is
    # finite (module docstring: Overflow); the terms are finite where the expected value or abs_sum is
    sums = np.broadcast_to(np.asarray(abs_sum, dtype=np.float64), exp_arr.shape)
    terms_finite = finite_exp | np.isfinite(sums)
    finite_sums = np.where(terms_finite, sums, 0.0) if finite_abs_sum is None else \
        np.broadcast_to(np.asarray(finite_abs_sum, dtype=np.float64), exp_arr.shape)
    ok_overflow = (np.isnan(a64) | (np.isinf(a64) & terms_finite)) & may_overflow(int(n), finite_sums, dt, 2)
    bad = ~(ok_finite | ok_unbounded | ok_nonfinite | ok_overflow)
    return _report(acc, dt, bad, act_arr, exp_arr, tol, hist, total,
                   f"error over 2·(γ({n})·abs_sum + {n}·η)", max_reported, dist)


def _report(acc: AccuracyClass, dt: DType, bad: Any, act: Any, exp: Any, allowed: Any,
            hist: dict[str, int] | None, total: int, reason: str, max_reported: int,
            dist: Any = None) -> Mismatch | None:
    import numpy as np

    bad = np.asarray(bad)
    count = int(np.sum(bad))
    if count == 0:
        return None
    where = np.argwhere(bad) if bad.ndim else np.zeros((1, 0), dtype=np.int64)
    failures = []
    for idx in where[:max_reported]:
        idx_t = tuple(int(i) for i in idx)
        d = None if dist is None else int(np.asarray(dist)[idx_t])
        d_text = "ULP_MAX" if d == ULP_MAX else (f"{d} ULP" if d is not None else "differs")
        failures.append((idx_t, _scalar(act[idx_t]), _scalar(exp[idx_t]), d_text))
    first = failures[0]
    allowed_here = np.asarray(allowed)
    allowed_here = _scalar(allowed_here[first[0]]) if allowed_here.ndim else _scalar(allowed_here)
    return Mismatch(acc.name, dt.value, reason, first[0], first[1], first[2], allowed_here, count, total,
                    hist, failures)


__all__ = ["ACCURACY", "AccuracyClass", "Mismatch", "ULP_BOUNDS", "REFERENCE_ULP", "ULP_MAX", "get",
           "as_dtype", "gamma", "largest_finite", "may_overflow", "sum_bound", "unit_roundoff",
           "smallest_subnormal", "ulp_distance",
           "ulp_histogram", "check"]
