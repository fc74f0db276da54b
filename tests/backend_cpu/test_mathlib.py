"""exp/log in arith ops: special values and ULP error against numpy (long double reference)."""

from __future__ import annotations

import numpy as np
import pytest

import kernels as K
from mind.compiler.backend.cpu.engine import compile_kernel
from mind.compiler.backend.cpu.options import CpuOptions
from mind.compiler.backend.cpu.vector_unit import runs_isa
from mind.compiler.backend.linalg.mathlib import exp_text, log_text

N = 1 << 21


def max_ulp(got: np.ndarray, ref: np.ndarray, dtype: type) -> float:
    """Max error in units of the last place of the reference rounded to ``dtype``."""
    with np.errstate(all="ignore"):
        r = ref.astype(dtype)
        sp = np.spacing(np.abs(r)).astype(np.longdouble)
        sp[sp == 0] = np.finfo(dtype).smallest_subnormal
        d = np.abs(got.astype(np.longdouble) - ref) / sp
    finite = np.isfinite(r)
    same = (got == r) | (np.isnan(got) & np.isnan(r))
    return float(np.max(np.where(finite, d, np.where(same, 0.0, np.inf))))


# the host's vector unit and AVX2's (x86-64-v3 has no f64 <-> i64 vector conversions, which the
# polynomials therefore do not use: a conversion there was scalarized)
CPUS = ["host"] + (["x86-64-v3"] if runs_isa("x86-64-v3") else [])


@pytest.fixture(scope="module", params=[(dt, cpu) for dt in ("f32", "f64") for cpu in CPUS], ids=str)
def kernels(request):
    dt, cpu = request.param
    npdt = {"f32": np.float32, "f64": np.float64}[dt]
    opts = CpuOptions.resolve(threads=2, cache=False, cpu=cpu)
    return (dt, npdt, compile_kernel(K.exp_kernel(N, dt), "kexp", opts),
            compile_kernel(K.log_kernel(N, dt), "klog", opts))


def _special(npdt):
    tiny = np.finfo(npdt).smallest_subnormal
    return np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1.0, tiny, -tiny, 1e3, -1e3,
                     np.finfo(npdt).max, np.finfo(npdt).tiny], dtype=npdt)


def test_exp_special_values(kernels):
    dt, npdt, kexp, _ = kernels
    sp = _special(npdt)
    got = kexp(np.resize(sp, N))[:len(sp)]
    with np.errstate(all="ignore"):
        ref = np.exp(sp.astype(np.longdouble)).astype(npdt)
    np.testing.assert_allclose(got, ref, rtol=2 * np.finfo(npdt).eps, atol=0)  # exact for inf/0/NaN
    lim = (88.72, 103.98) if dt == "f32" else (709.78, 745.14)
    assert kexp(np.full(N, lim[0] + 0.01, npdt))[0] == np.inf
    assert kexp(np.full(N, -lim[1] - 0.01, npdt))[0] == 0.0


def test_log_special_values(kernels):
    dt, npdt, _, klog = kernels
    sp = _special(npdt)
    got = klog(np.resize(sp, N))[:len(sp)]
    with np.errstate(all="ignore"):
        ref = np.log(sp.astype(np.longdouble)).astype(npdt)
    np.testing.assert_allclose(got, ref, rtol=2 * np.finfo(npdt).eps, atol=0)
    assert got[0] == -np.inf and got[1] == -np.inf and np.isnan(got[5])
    assert got[6] == 0.0 and not np.signbit(got[6])


def test_exp_ulp_sweep(kernels):
    dt, npdt, kexp, _ = kernels
    lo, hi = (-104.0, 89.0) if dt == "f32" else (-746.0, 710.0)
    x = np.linspace(lo, hi, N, dtype=npdt)
    x[: N // 4] = np.linspace(-1, 1, N // 4, dtype=npdt)
    err = max_ulp(kexp(x), np.exp(x.astype(np.longdouble)), npdt)
    assert err <= (4.0 if dt == "f32" else 2.0), err


def test_log_ulp_sweep(kernels):
    dt, npdt, _, klog = kernels
    if dt == "f32":
        bits = np.linspace(1, 0x7F7FFFFF, N).astype(np.uint32)  # all positive finite exponents
        x = bits.view(np.float32)
    else:
        bits = np.linspace(1, 0x7FEFFFFFFFFFFFFF, N).astype(np.uint64)
        x = bits.view(np.float64)
    x = np.ascontiguousarray(x)
    err = max_ulp(klog(x), np.log(x.astype(np.longdouble)), npdt)
    assert err <= (4.0 if dt == "f32" else 2.0), err
    near_one = np.linspace(0.5, 2.0, N, dtype=npdt)
    assert max_ulp(klog(near_one), np.log(near_one.astype(np.longdouble)), npdt) <= 2.0


@pytest.mark.parametrize("text", [exp_text, log_text])
def test_no_int_float_conversions_of_64_bits(text):
    # AVX2 converts neither f64 -> i64 nor i64 -> f64 in vectors and has no 64-bit arithmetic
    # right shift: LLVM scalarized each such op, four scalar conversions and inserts per ymm
    lines, _ = text("%x", "vector<4xf64>", "t")
    assert not [line for line in lines if any(op in line for op in ("fptosi", "sitofp", "shrsi"))]


@pytest.mark.parametrize("ty", ["vector<16xf32>", "vector<8xf64>"])
def test_exp_rounds_by_its_shift_and_selects_nothing(ty):
    # n comes from the FMA that makes the shifted sum (no floor), and a NaN needs no select: the
    # clamp passes it on (test_exp_special_values checks that NaN comes out); 3 instructions fewer
    lines, _ = exp_text("%x", ty, "t")
    assert not [line for line in lines if "math.floor" in line or "arith.select" in line or "arith.cmpf" in line]
