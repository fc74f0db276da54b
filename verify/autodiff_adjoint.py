"""The adjoint identity for the linear and structural VJP rules, in float64:

    ⟨t, VJP(c)⟩ = ⟨JVP(t), c⟩

where the op is linear in the checked operand(s) (the others held as constants), so its JVP is the
op itself applied to the tangent ``t``.  Both sides run on the reference interpreter; shapes and
attributes (strides, padding, dilations, steps including negative ones, broadcasts, clamped
indices) are drawn by hypothesis when it is installed, else by a seeded NumPy generator.

Tolerance: each side is a sum of n products computed in float64 after at most a few exact data
movements and one contraction of length ≤ k, so |error| ≤ γ_{n+k} · (Σ|t|·|VJP(c)| + Σ|JVP(t)|·|c|)
(γ from ``mind.spec.accuracy``); convert f64→f32 rounds each element once more (γ with f32's unit
roundoff on the f32 side).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mind.ir.builder import FunctionBuilder
from mind.spec.dtypes import DType, from_numpy
from mind.spec.ops import OPS, TensorType

F64 = DType.F64


def _gamma(n: int, dtype: DType = F64) -> float:
    try:
        from mind.spec.accuracy import gamma

        return float(gamma(n, dtype))
    except Exception:
        u = dtype.unit_roundoff
        return n * u / (1 - n * u)


class RandomDraw:
    """The drawing interface over a NumPy generator (used when hypothesis is absent)."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def int(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def bool(self) -> bool:
        return bool(self.rng.integers(0, 2))


class HypothesisDraw:
    def __init__(self, data: Any):
        self.data = data

    def int(self, lo: int, hi: int) -> int:
        from hypothesis import strategies as st

        return self.data.draw(st.integers(lo, hi))

    def bool(self) -> bool:
        from hypothesis import strategies as st

        return self.data.draw(st.booleans())


@dataclass
class LinearCase:
    op: str
    operands: list  # TensorType (linear operand) or np.ndarray (a constant)
    attrs: dict
    dtype_in: DType = F64


def _shape(d: Any, rank: int, lo: int = 1, hi: int = 4) -> tuple[int, ...]:
    return tuple(d.int(lo, hi) for _ in range(rank))


def _T(shape: tuple[int, ...], dtype: DType = F64) -> TensorType:
    return TensorType(dtype, tuple(shape))


def draw_case(rule: str, d: Any) -> LinearCase:
    """Draw shapes and attributes for ``rule`` (``op`` or ``op/operand``)."""
    rng = np.random.default_rng(d.int(0, 2 ** 31 - 1))
    if rule == "reshape":
        s = _shape(d, d.int(0, 3))
        n = int(np.prod(s))
        target = (n,) if d.bool() else (1, n)
        return LinearCase("reshape", [_T(s)], {"shape": target})
    if rule == "transpose":
        r = d.int(1, 4)
        perm = tuple(int(i) for i in rng.permutation(r))
        return LinearCase("transpose", [_T(_shape(d, r))], {"permutation": perm})
    if rule == "reduce_sum":
        r = d.int(1, 3)
        axes = tuple(i for i in range(r) if d.bool())
        return LinearCase("reduce_sum", [_T(_shape(d, r, 0, 4))], {"axes": axes, "keepdims": d.bool()})
    if rule == "slice":
        r = d.int(1, 3)
        s = _shape(d, r, 0, 6)
        start, stop, step = [], [], []
        for n in s:
            st = d.int(1, 3) * (1 if d.bool() else -1)
            if st > 0:
                a, e = d.int(0, n), d.int(0, n)
            else:
                a, e = d.int(-1, n - 1), d.int(-1, n - 1)
            start.append(a), stop.append(e), step.append(st)
        return LinearCase("slice", [_T(s)], {"start": tuple(start), "stop": tuple(stop), "step": tuple(step)})
    if rule == "pad":
        r = d.int(1, 3)
        s = _shape(d, r, 0, 4)
        return LinearCase("pad", [_T(s), _T(())], {"lo": tuple(d.int(0, 2) for _ in s),
                                                   "hi": tuple(d.int(0, 2) for _ in s),
                                                   "interior": tuple(d.int(0, 2) for _ in s)})
    if rule == "gather":
        r = d.int(1, 3)
        s = _shape(d, r, 1, 4)
        axis = d.int(0, r - 1)
        ishape = _shape(d, d.int(0, 2), 1, 3)
        idx = rng.integers(-2, s[axis] + 2, size=ishape).astype(np.int64 if d.bool() else np.int32)
        return LinearCase("gather", [_T(s), idx], {"axis": axis})
    if rule.startswith("matmul/"):
        m, k, n = d.int(1, 4), d.int(1, 4), d.int(1, 4)
        ba = _shape(d, d.int(0, 2), 1, 3)
        bb = tuple(x if d.bool() else 1 for x in ba[len(ba) - d.int(0, len(ba)):])
        if d.bool():
            ba, bb = bb, ba
        a, b = _T(ba + (m, k)), _T(bb + (k, n))
        if rule == "matmul/lhs":
            return LinearCase("matmul", [a, rng.standard_normal(b.shape)], {})
        return LinearCase("matmul", [rng.standard_normal(a.shape), b], {})
    if rule.startswith("conv2d/"):
        n, c, o = d.int(1, 2), d.int(1, 3), d.int(1, 3)
        attrs = {"strides": (d.int(1, 3), d.int(1, 3)),
                 "padding": ((d.int(0, 3), d.int(0, 3)), (d.int(0, 3), d.int(0, 3))),
                 "lhs_dilation": (d.int(1, 3), d.int(1, 3)), "rhs_dilation": (d.int(1, 3), d.int(1, 3))}
        x, w = _T((n, d.int(1, 7), d.int(1, 7), c)), _T((d.int(1, 3), d.int(1, 3), c, o))
        if rule == "conv2d/input":
            return LinearCase("conv2d", [x, rng.standard_normal(w.shape)], attrs)
        return LinearCase("conv2d", [rng.standard_normal(x.shape), w], attrs)
    if rule.startswith("convert/"):
        src, dst = (DType.F32, F64) if rule == "convert/f32->f64" else (F64, DType.F32)
        return LinearCase("convert", [_T(_shape(d, d.int(0, 3)), src)], {"dtype": dst}, src)
    raise KeyError(rule)


LINEAR_RULES = ("reshape", "transpose", "reduce_sum", "slice", "pad", "gather", "matmul/lhs", "matmul/rhs",
                "conv2d/input", "conv2d/filter", "convert/f64->f32", "convert/f32->f64")


def check_adjoint(case: LinearCase, seed: int = 0) -> tuple[bool, float, float]:
    """(ok, |lhs - rhs|, tolerance) for one drawn case."""
    from mind.calling import run_reference

    b = FunctionBuilder("adjoint")
    vals, lin = [], []
    for i, t in enumerate(case.operands):
        if isinstance(t, TensorType):
            v = b.param(f"x{i}", t)
            lin.append(i)
        else:
            v = b.const(t, from_numpy(t.dtype))
        vals.append(v)
    y = b.emit(case.op, *vals, **case.attrs)
    fwd = b.ops[-1]
    c = b.param("c", y.type)
    wants = tuple(i in lin for i in range(len(vals)))
    cots = OPS[case.op].vjp(b, fwd, c, wants)
    outs = [y] + [cots[i] if cots[i] is not None else None for i in lin]
    zero_cots = [i for i, v in zip(lin, outs[1:]) if v is None]
    fn = b.finish([v for v in outs if v is not None])
    rng = np.random.default_rng(seed)
    ts = [rng.standard_normal(tuple(case.operands[i].shape)).astype(case.operands[i].dtype.numpy) for i in lin]
    cv = rng.standard_normal(tuple(y.type.shape)).astype(y.type.dtype.numpy)
    res = run_reference(fn, ts + [cv])
    jvp, vjps = res[0].astype(np.float64), [r.astype(np.float64) for r in res[1:]]
    it = iter(vjps)
    vj = [np.zeros(t.shape) if i in zero_cots else next(it) for i, t in zip(lin, ts)]
    lhs_terms = [np.abs(t.astype(np.float64) * v) for t, v in zip(ts, vj)]
    lhs = sum(float(np.sum(t.astype(np.float64) * v)) for t, v in zip(ts, vj))
    rhs = float(np.sum(jvp * cv.astype(np.float64)))
    n = sum(t.size for t in ts) + cv.size + 16
    scale = sum(float(np.sum(x)) for x in lhs_terms) + float(np.sum(np.abs(jvp * cv)))
    tol = 2 * _gamma(n) * scale + 1e-300
    if case.dtype_in is DType.F32 or case.attrs.get("dtype") is DType.F32:
        tol += 2 * _gamma(2, DType.F32) * scale
    return abs(lhs - rhs) <= tol, abs(lhs - rhs), tol


def run_rule(rule: str, examples: int = 25, seed: int = 0) -> tuple[str, str]:
    """passed / failed over ``examples`` drawn cases (hypothesis when installed)."""
    failures: list[str] = []

    def one(d: Any) -> None:
        case = draw_case(rule, d)
        try:
            from mind.spec.ops import infer_type

            infer_type(case.op, [t if isinstance(t, TensorType) else TensorType(from_numpy(t.dtype), t.shape)
                                 for t in case.operands], case.attrs)
        except Exception:
            return  # attributes the op itself rejects (e.g. an empty conv window): nothing to check
        ok, err, tol = check_adjoint(case)
        if not ok:
            failures.append(f"{case.op} {case.attrs} {[getattr(t, 'shape', None) for t in case.operands]}: "
                            f"|Δ| = {err:.3g} > {tol:.3g}")
            raise AssertionError(failures[-1])

    try:
        from hypothesis import HealthCheck, given, settings, strategies as st
    except ImportError:
        for i in range(examples):
            try:
                one(RandomDraw(seed * 1000 + i))
            except Exception as exc:  # noqa: BLE001
                if not failures:
                    failures.append(f"{type(exc).__name__}: {exc}")
                break
        return ("failed", failures[0]) if failures else ("passed", f"{examples} random cases")

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(st.data())
    def prop(data: Any) -> None:
        one(HypothesisDraw(data))

    try:
        prop()
    except Exception as exc:  # noqa: BLE001 - any failure of a drawn case (incl. exception groups)
        return "failed", failures[-1] if failures else f"{type(exc).__name__}: {str(exc)[:300]}"
    return "passed", f"{examples} hypothesis cases"
