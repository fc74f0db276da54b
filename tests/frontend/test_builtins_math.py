"""The elementwise math builtins (decompositions into the 19 ops) against exact values over edge
cases, their documented accuracy (docs/frontend-builtins.md), and gradients derived from the
decompositions against finite differences."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from mind.compiler.frontend import builtins_math
from mind.compiler.frontend.api import compile_source
from mind.calling import run_reference

DTYPES = {"f32": np.float32, "f64": np.float64}
#: Largest error in ULPs of the correctly rounded result (docs/frontend-builtins.md).
BOUND = {("sin", "f32"): 1, ("cos", "f32"): 1, ("tan", "f32"): 1, ("log2", "f32"): 1, ("pow", "f32"): 1,
         ("sin", "f64"): 2, ("cos", "f64"): 2, ("tan", "f64"): 4, ("log2", "f64"): 2}


def fn1(name: str, dt: str):
    src = f"fn f(x: Tensor<{dt}, [N]>) -> Tensor<{dt}, [N]> {{ {name}(x) }}"
    f = compile_source(src, "t.mind").functions[0]
    return lambda x: run_reference(f, [x])[0]


def edge_values(dt) -> np.ndarray:
    fi = np.finfo(dt)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0, np.pi / 2, np.pi, -np.pi / 4,
            1e4, -1e4, 1e22, fi.max, -fi.max, fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal,
            3.5, -2.5, 0.49999997, 1e-8, 123456.7, 2.0 ** 23 + 0.5, 2.0 ** 52 + 1.0]
    rng = np.random.default_rng(7)
    more = [rng.uniform(-10, 10, 300), rng.uniform(-1e6, 1e6, 100),
            10.0 ** rng.uniform(-30, np.log10(fi.max), 200) * rng.choice([-1, 1], 200)]
    with np.errstate(over="ignore"):
        return np.concatenate([np.array(vals, dtype=np.float64)] + more).astype(dt)


def ulp_error(got: np.ndarray, x: np.ndarray, exact, dt) -> float:
    """The largest error of ``got`` in ULPs of the correctly rounded ``exact(x)`` (computed with
    mpmath); non-finite exact values must match exactly."""
    mpmath.mp.prec = 300
    worst = 0.0
    for g, xi in zip(got, x):
        if not np.isfinite(xi):
            continue
        t = exact(mpmath.mpf(float(xi)))
        if not mpmath.isfinite(t):
            continue
        rounded = dt(float(t))
        if not np.isfinite(rounded):
            assert g == rounded, (xi, g)
            continue
        spacing = float(np.spacing(np.abs(rounded))) if rounded != 0 else float(np.finfo(dt).smallest_subnormal)
        worst = max(worst, float(abs(mpmath.mpf(float(g)) - t) / spacing))
    return worst


@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("name, exact, ref", [
    ("sin", mpmath.sin, np.sin), ("cos", mpmath.cos, np.cos), ("tan", mpmath.tan, np.tan),
])
def test_trigonometric_functions_are_accurate_over_the_whole_range(name, exact, ref, dt):
    x = edge_values(DTYPES[dt])
    got = fn1(name, dt)(x)
    assert ulp_error(got, x, exact, DTYPES[dt]) <= BOUND[name, dt]
    with np.errstate(invalid="ignore"):
        want = ref(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))  # NaN for ±inf and NaN only
    zeros = x == 0
    if name != "cos":  # sin(±0) = ±0, tan(±0) = ±0
        np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(x[zeros]))


def test_range_reduction_of_the_hardest_double():
    # 6381956970095103·2^797 is within 4.7e-19 of a multiple of π/2 (the closest of all doubles)
    x = np.array([6381956970095103 * 2.0 ** 797, 1e300, 2.0 ** 1023], np.float64)
    got = fn1("cos", "f64")(x)
    assert ulp_error(got, x, mpmath.cos, np.float64) <= 1


@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_log2(dt):
    t = DTYPES[dt]
    fi = np.finfo(t)
    x = np.concatenate([edge_values(t), [8.0, 1024.0, 0.125, fi.smallest_subnormal, 3.0, 2.0 ** 100]]).astype(t)
    got = fn1("log2", dt)(x)
    pos = x > 0
    assert ulp_error(got[pos], x[pos], lambda v: mpmath.log(v, 2), t) <= BOUND["log2", dt]
    powers = np.array([2.0 ** k for k in range(-149 if dt == "f32" else -1074, 128 if dt == "f32" else 1024)], t)
    np.testing.assert_array_equal(fn1("log2", dt)(powers), np.log2(powers))  # exact integers
    special = np.array([0.0, -0.0, -1.0, np.inf, np.nan], t)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(fn1("log2", dt)(special), np.log2(special))


@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc"])
def test_rounding_is_exact(name, dt):
    t = DTYPES[dt]
    x = np.concatenate([edge_values(t), np.arange(-5, 5.5, 0.5)]).astype(t)
    np.testing.assert_array_equal(fn1(name, dt)(x), getattr(np, name if name != "round" else "round")(x))
    zeros = np.array([-0.0, -0.3, 0.3, -0.5, 0.5], t)
    np.testing.assert_array_equal(np.signbit(fn1(name, dt)(zeros)), np.signbit(getattr(np, name)(zeros)))


def _pow_cases(t):
    specials = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, np.inf, -np.inf, np.nan, 3.0, -3.0, 1e-300, 1e300]
    xs, ys = np.meshgrid(np.array(specials), np.array(specials + [2.5, -2.5, 1e20, -1e20]))
    return xs.ravel().astype(t), ys.ravel().astype(t)


@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_pow_special_values_follow_c99(dt):
    t = DTYPES[dt]
    with np.errstate(all="ignore"):
        x, y = _pow_cases(t)
        src = f"fn f(x: Tensor<{dt}, [N]>, y: Tensor<{dt}, [N]>) -> Tensor<{dt}, [N]> {{ pow(x, y) }}"
        got = run_reference(compile_source(src, "t.mind").functions[0], [x, y])[0]
        want = np.power(x, y)
    # zeros, infinities, NaNs and their signs, and the exact cases pow(x, 0), pow(1, y), pow(x, 1)
    special = ~np.isfinite(want) | (want == 0) | (y == 0) | (x == 1) | (y == 1)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    assert same[special].all(), list(zip(x[~same & special], y[~same & special], got[~same & special]))
    np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))
    np.testing.assert_allclose(got[~special], want[~special], rtol=4e-7 if dt == "f32" else 1e-13)


@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_pow_accuracy(dt):
    t = DTYPES[dt]
    rng = np.random.default_rng(3)
    x = rng.uniform(0.01, 20, 400).astype(t)
    y = rng.uniform(-20, 20, 400).astype(t)
    src = f"fn f(x: Tensor<{dt}, [N]>, y: Tensor<{dt}, [N]>) -> Tensor<{dt}, [N]> {{ pow(x, y) }}"
    got = run_reference(compile_source(src, "t.mind").functions[0], [x, y])[0]
    mpmath.mp.prec = 200
    for g, a, b in zip(got, x, y):
        exact = mpmath.power(mpmath.mpf(float(a)), mpmath.mpf(float(b)))
        if dt == "f32":
            bound = BOUND["pow", dt]
        else:  # documented: (2 + 2·|y·ln x|) ULP
            bound = 2 + 2 * abs(float(b) * np.log(float(a)))
        r = t(float(exact))
        if np.isfinite(r) and r != 0:
            assert float(abs(mpmath.mpf(float(g)) - exact)) / float(np.spacing(abs(r))) <= bound, (a, b)


def test_integer_literal_powers_multiply():
    src = "fn f(x: Tensor<f32, [4]>) -> (Tensor<f32, [4]>, Tensor<f32, [4]>, Tensor<f32, [4]>) { (pow(x, 2), pow(x, -3), pow(x, 0)) }"
    x = np.array([1.5, -2.0, 0.0, np.nan], np.float32)
    f = compile_source(src, "t.mind").functions[0]
    a, b, c = run_reference(f, [x])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(a, x * x)
        np.testing.assert_array_equal(b, np.float32(1) / (x * x * x))
    np.testing.assert_array_equal(c, [1, 1, 1, 1])  # pow(NaN, 0) = 1
    assert {op.op for op in f.ops} <= {"mul", "div", "const", "select"}


@pytest.mark.parametrize("dt", ["f32", "f64"])
def test_small_integral_float_literal_powers_multiply(dt):
    """``pow(x, 2.0)`` and the other float literals of an integral value from -4 (f64: -1) to 4 are
    products in f64 rounded once (``wide_int_power``), not ``exp(y·log|x|)``: within one f32 ULP,
    |y| - 1 f64 ULPs (one more for -1), C99's special values; 5.0, 2.5 and f64's -2.0 keep exp and log
    (the f64 x⁻² of 1.2e154 is a subnormal where x² overflows)."""
    t = DTYPES[dt]
    powers = [-4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0] if dt == "f32" else [-1.0, 0.0, 1.0, 2.0, 3.0, 4.0]
    outs = ", ".join([f"Tensor<{dt}, [N]>"] * len(powers))
    body = ", ".join(f"pow(x, {p!r})" for p in powers)
    f = compile_source(f"fn f(x: Tensor<{dt}, [N]>) -> ({outs}) {{ ({body}) }}", "t.mind").functions[0]
    assert {op.op for op in f.ops} <= {"mul", "div", "const", "select", "convert"}
    rng = np.random.default_rng(11)
    x = np.concatenate([edge_values(t), [1e-20, -3e-15, 7e30], rng.uniform(-30, 30, 300),
                        rng.uniform(0.999, 1.001, 50)]).astype(t)
    got = run_reference(f, [x])
    mpmath.mp.prec = 200
    for p, g in zip(powers, got):
        with np.errstate(all="ignore"):
            want = np.power(x.astype(np.float64), p).astype(t)
        special = ~np.isfinite(want) | (want == 0) | ~np.isfinite(x) | (x == 0)
        same = (g == want) | (np.isnan(g) & np.isnan(want))
        assert same[special].all(), (p, x[~same & special], g[~same & special])
        np.testing.assert_array_equal(np.signbit(g[want == 0]), np.signbit(want[want == 0]))
        bound = 1 if dt == "f32" else max(1, abs(p) - 1 + (p < 0))
        for gv, xv in zip(g[~special], x[~special]):
            exact = mpmath.power(mpmath.mpf(float(xv)), int(p))
            r = abs(t(float(exact)))
            with np.errstate(over="ignore"):  # the largest finite value: its spacing is below it
                ulp = float(np.spacing(r)) if r < np.finfo(t).max else float(r - np.nextafter(r, t(0)))
            assert float(abs(mpmath.mpf(float(gv)) - exact)) / ulp <= bound, (p, xv, gv)
    for other in ("5.0", "2.5") + (("-2.0",) if dt == "f64" else ()):
        g = compile_source(f"fn f(x: Tensor<{dt}, [N]>) -> Tensor<{dt}, [N]> {{ pow(x, {other}) }}", "t.mind")
        assert "exp" in {op.op for op in g.functions[0].ops}


def test_tan_of_f32_reduces_its_argument_once_in_the_narrow_window():
    """``tan`` shares ``sin`` and ``cos``'s one argument reduction, of x's own width: an f32 x was
    widened first and reduced through the f64 window (an f64 ``log`` for its exponent, the
    argument split in halves), 2.8x ``sin``'s time; now about ``sin``'s own operations."""
    ops = {}
    for name in ("sin", "tan"):
        f = compile_source(f"fn f(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {{ {name}(x) }}", "t.mind").functions[0]
        ops[name] = [op.op for op in f.ops]
    assert "log" not in ops["tan"]
    assert len(ops["tan"]) <= len(ops["sin"]) + 16, (len(ops["tan"]), len(ops["sin"]))


def test_sign_and_clip():
    src = """fn f(x: Tensor<f32, [6]>) -> (Tensor<f32, [6]>, Tensor<f32, [6]>, Tensor<i32, [6]>) {
    (sign(x), clip(x, -1.0, 2.0), sign(cast(x, i32)))
}"""
    x = np.array([-3.0, -0.0, 0.0, 0.5, 7.0, np.nan], np.float32)
    s, c, si = run_reference(compile_source(src, "t.mind").functions[0], [x])
    np.testing.assert_array_equal(s, np.sign(x))
    np.testing.assert_array_equal(np.signbit(s[:3]), np.signbit(np.sign(x[:3])))
    np.testing.assert_array_equal(c, np.clip(x, -1.0, 2.0))
    np.testing.assert_array_equal(si, [-1, 0, 0, 0, 1, 0])  # cast(NaN, i32) = 0 (Core IR convert)


# -- gradients through the decompositions ----------------------------------------------------------

@pytest.mark.parametrize("expr, derivative", [
    ("sin(x)", np.cos), ("cos(x)", lambda v: -np.sin(v)), ("tan(x)", lambda v: 1 / np.cos(v) ** 2),
    ("log2(x)", lambda v: 1 / (v * np.log(2))), ("pow(x, 2.5)", lambda v: 2.5 * v ** 1.5),
    ("pow(2.0, x)", lambda v: np.log(2) * 2.0 ** v), ("floor(x) + x", lambda v: np.ones_like(v)),
    ("round(x) * 0.0 + x * x", lambda v: 2 * v),
])
def test_gradients_against_finite_differences(expr, derivative):
    x = np.array([0.3, 1.7, 2.9, 5.5, 123.4], np.float64)
    src = f"fn g(x: Tensor<f64, [5]>) -> Tensor<f64, [5]> {{ grad(|x| sum({expr}), x) }}\n" \
          f"fn f(x: Tensor<f64, [5]>) -> Tensor<f64, [5]> {{ {expr} }}"
    m = compile_source(src, "t.mind")
    g = run_reference(m.functions[0], [x])[0]
    h = 1e-6 * np.maximum(1.0, np.abs(x))
    f = m.functions[1]
    fd = (run_reference(f, [x + h])[0] - run_reference(f, [x - h])[0]) / (2 * h)  # elementwise
    np.testing.assert_allclose(g, derivative(x), rtol=1e-9)
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_two_over_pi_table():
    mpmath.mp.prec = 1400
    n = int(mpmath.floor(2 / mpmath.pi * mpmath.mpf(2) ** (24 * 53)))
    assert int(builtins_math._TWO_OVER_PI_HEX, 16) == n
    assert sum(c * 2.0 ** (-24 * (i + 1)) for i, c in enumerate(builtins_math.chunks()[:3])) == \
        pytest.approx(2 / np.pi, rel=1e-15)
