"""Gradients from the autodiff transform against central finite differences, in float64 on the
reference interpreter: one case per differentiable op (rule) and random compositions of ops.

Domains (chosen per op to avoid kinks and singularities; written down here and in ``CASES``):

* add, sub, mul, select branches, reshape, transpose, slice, pad, gather, reduce_sum, matmul,
  conv2d, convert: standard normal inputs (these are polynomial, so no kinks; select's predicate and
  gather's indices are constants, so the function is smooth in the float inputs).
* div: the divisor is drawn from ±[0.5, 2] (away from the pole at 0).
* exp: inputs in [-2, 2] (so |f'''| stays ≤ e² times the weights).
* log: inputs in [0.5, 3] (away from the pole at 0).
* reduce_max: each window holds distinct values at least 0.25 apart (a random permutation of a
  spaced grid), so the maximiser is unique and no step of the difference crosses a tie (h ≪ 0.25).
* convert f64→f32→f64: the f32 round trip makes f piecewise constant at the f32 grid, so the step is
  h = 2^-4 and the rounding term uses f32's unit roundoff (below).

Error model (tolerance derived, not tuned).  For the central difference D(h) = (f(x+h) - f(x-h))/2h:

* truncation: D(h) - f'(x) = h²/6 · f'''(ξ) + O(h⁴).  Estimated per component by Richardson:
  D(2h) - D(h) ≈ h²/2 · f''' so the truncation error of D(h) is ≈ |D(2h) - D(h)| / 3;
* rounding: each evaluation of f carries an absolute error ≤ γ_n · F where F = Σ|terms| is bounded
  by the loss evaluated on |inputs| (we take F = max(1, |f(x)|, |f(|x|)|)) and γ_n = n·u/(1 - n·u)
  (``mind.spec.accuracy.gamma``) with n the op count of the function; the difference divides two
  such errors by 2h, so the rounding error of D(h) is ≤ γ_n · F / h;
* the gradient program itself is evaluated in float64 with the same kind of bound γ_m · G.

A component passes when |grad - D(h)| ≤ 4 · (trunc + round + γ_m·G) + 1e-300; the factor 4 covers
the Richardson estimate's own O(h⁴) error and the γ bound's first-order approximation.  The check
also reports how much of the gradient's magnitude the tolerance allows, so a vacuous pass (a
tolerance as large as the gradient) is visible as a failure (``max_rel_tol``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from mind.ir.builder import FunctionBuilder
from mind.ir.core import Function
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

F64 = DType.F64
H_DEFAULT = 2.0 ** -14


def _gamma(n: int, dtype: DType = F64) -> float:
    try:
        from mind.spec.accuracy import gamma

        return float(gamma(n, dtype))
    except Exception:  # spec.accuracy not available: γ_n = n·u / (1 - n·u)
        u = dtype.unit_roundoff
        return n * u / (1 - n * u)


@dataclass
class Case:
    """A function of float64 parameters with a scalar loss, and how to draw its inputs."""

    name: str
    build: Callable[[], Function]
    draw: Callable[[np.random.Generator], list[np.ndarray]]
    h: float = H_DEFAULT
    rounding_dtype: DType = F64
    domain: str = "standard normal"


def scalar_loss(b: FunctionBuilder, y: Any, seed: int = 7) -> Any:
    """loss = Σ y ⊙ W with a fixed pseudo-random weight W (so the cotangent is not uniform)."""
    shape = tuple(int(d) for d in y.type.shape)
    w = np.random.default_rng(seed).uniform(0.5, 1.5, size=shape) * np.where(
        np.random.default_rng(seed + 1).random(shape) < 0.5, -1.0, 1.0)
    wv = b.const(w.astype(y.type.dtype.numpy), y.type.dtype)
    return b.emit("reduce_sum", b.emit("mul", y, wv), axes=tuple(range(len(shape))), keepdims=False)


def op_case(name: str, op: str, shapes: Sequence[Sequence[int]], attrs: dict[str, Any] | None = None,
            consts: dict[int, np.ndarray] | None = None,
            draw: Callable[[np.random.Generator, tuple[int, ...], int], np.ndarray] | None = None,
            **kw: Any) -> Case:
    """A case applying one op; operands listed in ``consts`` (index → array) are constants."""
    attrs = attrs or {}
    consts = consts or {}

    def build() -> Function:
        b = FunctionBuilder(f"fd_{name}")
        operands = []
        for i, s in enumerate(shapes):
            if i in consts:
                arr = consts[i]
                from mind.spec.dtypes import from_numpy

                operands.append(b.const(arr, from_numpy(arr.dtype)))
            else:
                operands.append(b.param(f"x{i}", TensorType(F64, tuple(s))))
        y = b.emit(op, *operands, **attrs)
        if not y.type.dtype.is_float:
            raise ValueError(f"{op} has no float result")
        if y.type.dtype is not F64:
            y = b.emit("convert", y, dtype=F64)
        return b.finish([scalar_loss(b, y)])

    def drawer(rng: np.random.Generator) -> list[np.ndarray]:
        out = []
        for i, s in enumerate(shapes):
            if i in consts:
                continue
            out.append(draw(rng, tuple(s), i) if draw else rng.standard_normal(tuple(s)))
        return out

    return Case(name, build, drawer, **kw)


def _spaced(rng: np.random.Generator, shape: tuple[int, ...], i: int) -> np.ndarray:
    n = int(np.prod(shape)) if shape else 1
    return (rng.permutation(n).astype(np.float64) * 0.25 - 0.125 * n).reshape(shape)


def _uniform(lo: float, hi: float, signed: bool = False):
    def draw(rng: np.random.Generator, shape: tuple[int, ...], i: int) -> np.ndarray:
        x = rng.uniform(lo, hi, size=shape)
        return x * np.where(rng.random(shape) < 0.5, -1.0, 1.0) if signed else x
    return draw


def _div_draw(rng: np.random.Generator, shape: tuple[int, ...], i: int) -> np.ndarray:
    return rng.standard_normal(shape) if i == 0 else _uniform(0.5, 2.0, True)(rng, shape, i)


def _convert_roundtrip() -> Case:
    def build() -> Function:
        b = FunctionBuilder("fd_convert")
        x = b.param("x0", TensorType(F64, (3, 4)))
        y = b.emit("convert", b.emit("convert", x, dtype=DType.F32), dtype=F64)
        return b.finish([scalar_loss(b, y)])
    return Case("convert", build, lambda rng: [rng.standard_normal((3, 4))], h=2.0 ** -4,
                rounding_dtype=DType.F32, domain="standard normal; f64→f32→f64, h = 2^-4 (f is linear up to "
                "f32 rounding, so no truncation error; the rounding term uses f32's unit roundoff)")


def _conv_attrs(strides=(1, 1), padding=((0, 0), (0, 0)), lhs=(1, 1), rhs=(1, 1)) -> dict[str, Any]:
    return {"strides": tuple(strides), "padding": tuple(tuple(p) for p in padding),
            "lhs_dilation": tuple(lhs), "rhs_dilation": tuple(rhs)}


def rule_cases() -> list[Case]:
    """One or more cases per differentiable rule (names ``op`` or ``op/variant``)."""
    idx = np.array([[2, 0], [7, -1], [1, 1]], dtype=np.int64)  # clamped, repeated
    pred = np.array([[True, False, True], [False, False, True]])
    return [
        op_case("add", "add", [(2, 3), (3,)]),
        op_case("sub", "sub", [(2, 1), (1, 3)]),
        op_case("mul", "mul", [(2, 3), (2, 1)]),
        op_case("div", "div", [(2, 3), (3,)], draw=_div_draw, domain="rhs in ±[0.5, 2]"),
        op_case("exp", "exp", [(2, 3)], draw=_uniform(-2, 2), domain="[-2, 2]"),
        op_case("log", "log", [(2, 3)], draw=_uniform(0.5, 3), domain="[0.5, 3]"),
        op_case("select", "select", [(2, 3), (2, 3), (3,)], consts={0: pred}),
        _convert_roundtrip(),
        op_case("reduce_sum", "reduce_sum", [(2, 3, 4)], {"axes": (0, 2), "keepdims": False}),
        op_case("reduce_max", "reduce_max", [(2, 3, 4)], {"axes": (1,), "keepdims": True}, draw=_spaced,
                domain="distinct values ≥ 0.25 apart"),
        op_case("reshape", "reshape", [(2, 6)], {"shape": (3, 2, 2)}),
        op_case("transpose", "transpose", [(2, 3, 4)], {"permutation": (2, 0, 1)}),
        op_case("slice", "slice", [(5, 6)], {"start": (1, 5), "stop": (5, -1), "step": (2, -2)}),
        op_case("pad", "pad", [(2, 3), ()], {"lo": (1, 0), "hi": (0, 2), "interior": (1, 2)}),
        op_case("gather", "gather", [(4, 3), (3, 2)], {"axis": 0}, consts={1: idx}),
        op_case("matmul", "matmul", [(2, 1, 3, 4), (3, 4, 2)]),
        op_case("conv2d", "conv2d", [(2, 5, 6, 2), (2, 3, 2, 3)],
                _conv_attrs(strides=(2, 1), padding=((1, 0), (2, 1)), lhs=(1, 2), rhs=(2, 1))),
    ]


# ---------------------------------------------------------------------------------------------
# random compositions
# ---------------------------------------------------------------------------------------------


def random_composition(seed: int, n_ops: int = 6) -> Case:
    """A random chain of smooth ops over [3, 4] values (domains kept safe: log and div see
    exp(·) + 0.5 ≥ 0.5, and exp sees inputs squashed by x / (1 + x²) ∈ [-0.5, 0.5])."""
    rng = np.random.default_rng(seed)
    plan = [int(rng.integers(0, 9)) for _ in range(n_ops)]
    partners = [int(rng.integers(0, 3)) for _ in range(n_ops)]

    def build() -> Function:
        b = FunctionBuilder(f"fd_random_{seed}")
        xs = [b.param(f"x{i}", TensorType(F64, (3, 4))) for i in range(3)]
        vals = list(xs)
        cur = xs[0]
        half = b.const(0.5, F64)
        one = b.const(1.0, F64)
        for kind, p in zip(plan, partners):
            other = vals[p]
            if kind == 0:
                cur = b.emit("add", cur, other)
            elif kind == 1:
                cur = b.emit("mul", cur, other)
            elif kind == 2:  # x / (1 + x²) is smooth and bounded
                cur = b.emit("div", cur, b.emit("add", one, b.emit("mul", cur, cur)))
            elif kind == 3:
                cur = b.emit("log", b.emit("add", b.emit("exp", b.emit("div", cur, b.emit("add", one, b.emit("mul", cur, cur)))), half))
            elif kind == 4:
                cur = b.emit("sub", other, cur)
            elif kind == 5:
                t = b.emit("transpose", cur, permutation=(1, 0))
                cur = b.emit("reshape", b.emit("matmul", b.emit("reshape", t, shape=(2, 6)),
                                                b.emit("reshape", other, shape=(6, 2))), shape=(2, 2))
                cur = b.emit("pad", cur, half, lo=(1, 1), hi=(0, 1), interior=(0, 0))
            elif kind == 6:
                s = b.emit("reduce_sum", cur, axes=(1,), keepdims=True)
                cur = b.emit("mul", cur, b.emit("div", s, b.emit("add", b.emit("mul", s, s), one)))
            elif kind == 7:
                cur = b.emit("add", b.emit("slice", cur, start=(2, 3), stop=(-1, -1), step=(-1, -1)), other)
            else:
                c = b.emit("compare", cur, other, direction="gt")
                cur = b.emit("select", c, cur, b.emit("mul", other, half))
            vals.append(cur)
        return b.finish([scalar_loss(b, cur, seed)])

    def draw(r: np.random.Generator) -> list[np.ndarray]:
        return [r.standard_normal((3, 4)) for _ in range(3)]

    return Case(f"random/{seed}", build, draw, domain="standard normal; select keeps |x - y| ≥ 0.05")


# ---------------------------------------------------------------------------------------------
# the check
# ---------------------------------------------------------------------------------------------


@dataclass
class FDResult:
    name: str
    ok: bool
    max_err: float
    max_tol: float
    max_rel_tol: float  # tolerance relative to max |gradient| (a vacuous check shows as large)
    detail: str = ""


def _eval(fn: Function, args: Sequence[np.ndarray]) -> float:
    from mind.calling import run_reference

    return float(run_reference(fn, list(args))[0])


def check_case(case: Case, seed: int = 0) -> FDResult:
    """The gradient of ``case`` by the registered autodiff transform (``mind.backends.TRANSFORMS``:
    the compiler's, reached by name as backends are, so this check sits beside the compiler and
    not above it) against central finite differences."""
    from mind.backends import transform
    from mind.calling import run_reference

    grad_function = transform("grad")

    fn = case.build()
    rng = np.random.default_rng(seed)
    args = case.draw(rng)
    if case.name.startswith("random/"):
        args = _avoid_ties(fn, args, rng)
    gfn = grad_function(fn)
    outs = run_reference(gfn, args)
    grads = outs[len(fn.results):]
    n_ops = len(fn.ops) + 2
    u_round = _gamma(n_ops, case.rounding_dtype)
    f0 = _eval(fn, args)
    fabs = _eval(fn, [np.abs(a) for a in args])
    scale_f = max(1.0, abs(f0), abs(fabs))
    h = case.h
    max_err = max_tol = 0.0
    gmax = max((float(np.max(np.abs(g))) for g in grads if g.size), default=0.0)
    g_round = _gamma(len(gfn.ops), F64) * max(1.0, gmax) * 4
    for a_i, (a, g) in enumerate(zip(args, grads)):
        for j in np.ndindex(a.shape):
            def d(step: float) -> float:
                ap, am = [x.copy() for x in args], [x.copy() for x in args]
                ap[a_i][j] += step
                am[a_i][j] -= step
                return (_eval(fn, ap) - _eval(fn, am)) / (2 * step)
            d1, d2 = d(h), d(2 * h)
            trunc = abs(d2 - d1) / 3
            tol = 4 * (trunc + u_round * scale_f / h + g_round) + 1e-300
            err = abs(float(g[j]) - d1)
            max_err, max_tol = max(max_err, err), max(max_tol, tol)
            if err > tol:
                return FDResult(case.name, False, err, tol, tol / max(gmax, 1e-300),
                                f"d/d x{a_i}{list(j)}: transform {float(g[j])!r}, FD {d1!r}")
    rel = max_tol / max(gmax, 1e-300)
    return FDResult(case.name, rel < 1e-3, max_err, max_tol, rel,
                    "" if rel < 1e-3 else "tolerance too loose for a meaningful check")


def _avoid_ties(fn: Function, args: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
    """Random compositions contain select(compare(x, y, gt), ...): redraw until no compare operand
    pair is within 0.05 (the kink), so finite differences never straddle it."""
    from mind.calling import run_reference

    cmp_ops = [op for op in fn.ops if op.op == "compare"]
    if not cmp_ops:
        return args
    probe = Function(fn.name, fn.params, fn.ops, [v for op in cmp_ops for v in op.operands], fn.assumptions)
    for _ in range(200):
        vals = run_reference(probe, args)
        if all(np.min(np.abs(vals[2 * k] - vals[2 * k + 1])) >= 0.05 for k in range(len(cmp_ops))):
            return args
        args = [rng.standard_normal(a.shape) for a in args]
    return args


def run_all(n_random: int = 4) -> list[tuple[FDResult, float]]:
    out = []
    for case in rule_cases() + [random_composition(s) for s in range(n_random)]:
        t0 = time.perf_counter()
        out.append((check_case(case), time.perf_counter() - t0))
    return out
