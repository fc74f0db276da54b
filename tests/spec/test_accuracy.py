"""The accuracy classes (spec/accuracy.py): ULP distance, histograms and check()."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from mind.spec import accuracy
from mind.spec.accuracy import ACCURACY, ULP_MAX, check, gamma, largest_finite, may_overflow, ulp_distance
from mind.spec.dtypes import DType
from mind.spec.ops import OPS


def test_every_op_names_a_known_class():
    for op in OPS.values():
        assert op.accuracy in ACCURACY, op.name


def test_class_assignment_matches_the_issue():
    exact = {"add", "sub", "mul", "div", "compare", "select", "convert", "const", "reduce_max", "reshape",
             "transpose", "slice", "pad", "gather"}
    for name in exact:
        assert OPS[name].accuracy == "exact"
    assert OPS["exp"].accuracy == "exp" and OPS["log"].accuracy == "log"
    assert OPS["reduce_sum"].accuracy == "sum"
    assert OPS["matmul"].accuracy == OPS["conv2d"].accuracy == "dot"
    assert accuracy.ULP_BOUNDS == {"f32": 4, "f64": 2}


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_ulp_distance_basics(dtype):
    dt = DType(dtype)
    f = dt.numpy.type
    one = f(1.0)
    nxt = np.nextafter(one, f(2.0))
    assert ulp_distance(one, nxt, dt) == 1
    assert ulp_distance(f(0.0), f(-0.0), dt) == 0
    assert ulp_distance(f("nan"), f("nan"), dt) == 0
    assert ulp_distance(f("nan"), one, dt) == ULP_MAX
    assert ulp_distance(f("inf"), np.finfo(dt.numpy).max, dt) == ULP_MAX
    assert ulp_distance(f("inf"), f("inf"), dt) == 0
    assert ulp_distance(f("-inf"), f("inf"), dt) == ULP_MAX
    tiny = np.nextafter(f(0.0), f(1.0))  # smallest subnormal: one ULP from +0 and from -0
    assert ulp_distance(tiny, f(0.0), dt) == 1 and ulp_distance(tiny, f(-0.0), dt) == 1
    assert ulp_distance(tiny, -tiny, dt) == 2


@given(st.floats(width=32, allow_nan=False), st.integers(0, 50))
def test_ulp_distance_counts_nextafter_steps(x, k):
    x = np.float32(x)
    y = x
    with np.errstate(over="ignore"):
        for _ in range(k):
            y = np.nextafter(y, np.float32(np.inf))
    if not np.isfinite(y) or not np.isfinite(x):
        return
    assert int(ulp_distance(x, y, "f32")) == k or (x == 0 and y == 0)


@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False, allow_infinity=False))
def test_ulp_distance_symmetric(a, b):
    assert ulp_distance(a, b, "f64") == ulp_distance(b, a, "f64")


def test_histogram_buckets():
    assert accuracy.ulp_histogram(np.array([0, 0, 1, 2, 3, 4, 100], dtype=np.uint64)) == \
        {"0": 2, "1": 1, "2": 1, "3": 1, ">=4": 2}


def test_exact_class():
    f = np.float32
    assert check("exact", "f32", f([1, np.nan]), f([1, -np.nan])) is None  # any NaN matches any NaN
    m = check("exact", "f32", f([0.0, 1.0]), f([-0.0, 1.0]))  # signed zeros differ
    assert m is not None and m.index == (0,) and m.failing == 1 and m.histogram["0"] == 2
    m = check("exact", "f64", np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.5, 3.5]))
    assert m.index == (1,) and m.failing == 2 and m.actual == 2.0 and m.expected == 2.5
    assert "histogram" in str(m)


def test_integers_are_always_exact():
    for cls in ACCURACY:
        assert check(cls, "i32", np.int32([5]), np.int32([5]), n=1, abs_sum=[5]) is None
        assert check(cls, "i64", np.int64([5]), np.int64([6]), n=1, abs_sum=[5]) is not None
    assert check("exact", "bool", np.array([True]), np.array([False])) is not None


def test_shape_and_dtype_mismatch():
    assert "shape" in check("exact", "f32", np.zeros(2, np.float32), np.zeros(3, np.float32)).reason
    assert "dtype" in check("exact", "f32", np.zeros(2, np.float64), np.zeros(2, np.float32)).reason


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_ulp_classes_allow_bound_plus_reference(dtype):
    dt = DType(dtype)
    bound = accuracy.ULP_BOUNDS[dtype] + accuracy.REFERENCE_ULP
    x = dt.numpy.type(1.5)
    y = x
    for _ in range(bound):
        y = np.nextafter(y, dt.numpy.type(2))
    assert check("exp", dt, np.array([y]), np.array([x])) is None
    y = np.nextafter(y, dt.numpy.type(2))
    m = check("log", dt, np.array([y]), np.array([x]))
    assert m is not None and m.histogram[">=4"] == 1


def test_gamma():
    assert gamma(0, "f32") == 0
    u = 2.0 ** -24
    assert math.isclose(gamma(10, "f32"), 10 * u / (1 - 10 * u))
    assert gamma(2 ** 24, "f32") == math.inf
    assert gamma(10, "f64") < gamma(10, "f32")


def test_sum_class_bound():
    n = 100
    abs_sum = np.array([100.0])
    tol = 2 * (gamma(n, "f32") * 100.0 + n * 2.0 ** -149)
    exp = np.float32([10.0])
    ok = np.float32([10.0 + tol * 0.9])
    bad = np.float32([10.0 + tol * 4])
    assert check("sum", "f32", ok, exp, n=n, abs_sum=abs_sum) is None
    assert check("sum", "f32", bad, exp, n=n, abs_sum=abs_sum) is not None
    # non-finite expected values must be matched exactly
    assert check("dot", "f64", np.array([np.nan]), np.array([np.nan]), n=2, abs_sum=[np.inf]) is None
    assert check("dot", "f64", np.array([np.inf]), np.array([np.nan]), n=2, abs_sum=[np.inf]) is not None
    assert check("dot", "f64", np.array([-np.inf]), np.array([np.inf]), n=2, abs_sum=[np.inf]) is not None
    with pytest.raises(ValueError):
        check("sum", "f32", exp, exp)


# ---------------------------------------------------------------- overflow in sum and dot (spec 1.1)

F32_MAX = np.float32(np.finfo(np.float32).max)


def _f32_left_to_right(terms: list[float]) -> np.float32:
    """What an implementation accumulating f32 in f32, in index order, returns."""
    total = np.float32(-0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        for t in terms:
            total = np.float32(total + np.float32(t))
    return total


def test_largest_finite_is_the_dtypes():
    assert largest_finite("f32") == float(np.finfo(np.float32).max)
    assert largest_finite(DType.F64) == float(np.finfo(np.float64).max)


@pytest.mark.parametrize("terms, exact", [
    ([F32_MAX, F32_MAX, -F32_MAX], F32_MAX),        # a partial sum overflows to +inf: inf - Ω = inf
    ([F32_MAX, F32_MAX, -F32_MAX, -F32_MAX], 0.0),  # +inf where the exact sum is 0
    ([-F32_MAX, -F32_MAX, 2.0, F32_MAX], -F32_MAX + 2.0),  # -inf
])
def test_a_sum_that_overflows_only_in_partial_sums_is_accepted(terms, exact):
    computed = _f32_left_to_right(terms)
    assert not np.isfinite(computed)  # the f32 accumulation did overflow
    want = np.float32([exact])
    abs_sum = [sum(abs(float(t)) for t in terms)]
    assert check("sum", "f32", np.float32([computed]), want, n=len(terms), abs_sum=abs_sum) is None
    for other in (np.inf, -np.inf, np.nan):  # inf - inf in another order: any non-finite value
        assert check("sum", "f32", np.float32([other]), want, n=len(terms), abs_sum=abs_sum) is None
    # a finite answer must still meet the bound
    assert check("sum", "f32", np.float32([exact]), want, n=len(terms), abs_sum=abs_sum) is None


def test_a_dot_product_whose_terms_can_overflow_may_be_non_finite():
    # exact result 0 in f64, but Ω·2 overflows f32 as a product; a partial sum holding it is inf
    want = np.float32([0.0])
    abs_sum = [2.0 * float(F32_MAX) * 2]
    assert check("dot", "f32", np.float32([np.nan]), want, n=2, abs_sum=abs_sum) is None
    # f64: Σ|a_k·b_k| beyond the f64 range: the terms are finite because the expected value is
    assert check("dot", "f64", np.array([np.inf]), np.array([1.0]), n=2, abs_sum=[np.inf]) is None


def test_an_overflow_well_below_the_largest_value_is_refused():
    want = np.float32([1.0])
    for abs_sum in (float(F32_MAX) / 4, float(F32_MAX) * (1 - 2.0 ** -20)):
        for bad in (np.inf, -np.inf, np.nan):
            m = check("sum", "f32", np.float32([bad]), want, n=3, abs_sum=[abs_sum])
            assert m is not None and m.failing == 1


def test_the_overflow_threshold_is_one_plus_gamma_squared_times_the_reference_abs_sum():
    n = 1000
    growth = (1 + gamma(n, "f32")) ** 2
    at = float(F32_MAX) / growth
    below = np.nextafter(at, 0.0) * (1 - 1e-9)
    want = np.float32([0.0])
    assert check("dot", "f32", np.float32([np.inf]), want, n=n, abs_sum=[at * (1 + 1e-12)]) is None
    assert check("dot", "f32", np.float32([np.inf]), want, n=n, abs_sum=[below]) is not None
    # the per-implementation threshold of the spec: (1 + γ(n))·S ≥ Ω, i.e. S ≥ (1 − n·u)·Ω
    s = (1 - n * 2.0 ** -24) * float(F32_MAX)
    assert may_overflow(n, [s * (1 + 1e-12)], "f32").tolist() == [True]
    assert may_overflow(n, [s * (1 - 1e-9)], "f32").tolist() == [False]
    assert may_overflow(n, [0.0], "f32").tolist() == [False]  # zeros never overflow
    assert may_overflow(2 ** 30, [0.0, 1.0], "f32").tolist() == [False, True]  # γ(n) = inf


def test_non_finite_terms_are_still_matched_exactly():
    # a NaN or inf term makes the expected value non-finite and abs_sum infinite: nothing is known
    # about the terms being finite, so the expected value must be matched as before
    assert check("sum", "f32", np.float32([np.inf]), np.float32([np.nan]), n=2, abs_sum=[np.inf]) is not None
    assert check("sum", "f32", np.float32([-np.inf]), np.float32([np.inf]), n=2, abs_sum=[np.inf]) is not None
    assert check("sum", "f32", np.float32([np.inf]), np.float32([np.inf]), n=2, abs_sum=[np.inf]) is None
    # finite terms of f32 (a finite abs_sum) whose exact sum exceeds the range: the reference says
    # +inf, and an f32 accumulation that met +inf and -inf says NaN: both are permitted
    assert check("sum", "f32", np.float32([np.nan]), np.float32([np.inf]), n=4,
                 abs_sum=[4.0 * float(F32_MAX)]) is None


def test_an_infinite_term_with_overflowing_finite_terms_may_give_nan_only():
    big = float(F32_MAX)
    want = np.float32([np.inf])  # the exact result: a +inf term dominates
    # S over the finite terms (given by the caller) reaches Ω: NaN is admitted, -inf is not
    assert check("sum", "f32", np.float32([np.nan]), want, n=3, abs_sum=[np.inf], finite_abs_sum=[2 * big]) is None
    assert check("sum", "f32", np.float32([-np.inf]), want, n=3, abs_sum=[np.inf],
                 finite_abs_sum=[2 * big]) is not None
    # small finite terms: the +inf must be matched
    assert check("sum", "f32", np.float32([np.nan]), want, n=3, abs_sum=[np.inf], finite_abs_sum=[1.0]) is not None
    # without finite_abs_sum (what a conformance case stores), nothing is known: strict
    assert check("sum", "f32", np.float32([np.nan]), want, n=3, abs_sum=[np.inf]) is not None
    # a NaN exact result stays NaN
    assert check("sum", "f32", np.float32([np.inf]), np.float32([np.nan]), n=3, abs_sum=[np.nan],
                 finite_abs_sum=[2 * big]) is not None
