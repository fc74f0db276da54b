"""The spec's element semantics on Z3 terms: one scalar algebra per use.

``ExactScalars`` transcribes each op's semantics (``spec/ops``, normative) into Z3's theories:

* f32/f64: IEEE binary32/64 in Z3's floating-point theory, round-to-nearest-even, signed zeros,
  infinities and subnormals as IEEE; Z3 has one NaN, which is exactly the spec's "NaN is a class"
  (the accuracy class ``exact`` lets any NaN match any NaN), so SMT equality ``=`` of two float
  terms is the spec's bit-exact equality;
* i32/i64: bit-vectors with wrapping ``+ - ×`` and the spec's total division (truncation toward
  zero, ``x / 0 = 0``, ``INT_MIN / -1 = INT_MIN``); ``convert`` saturates float→int, NaN → 0;
* bool: Z3 booleans, ordered false < true.

Ops whose spec result is only bounded (``exp``/``log``: ULP bounds; float ``reduce_sum``,
``matmul``, ``conv2d``: the γ(n) bound of ``spec/accuracy.py``) are *uninterpreted functions*:
the same function applied to the same arguments gives the same value (one implementation), and
``facts(application)`` states what the spec fixes exactly for every implementation (the special
values of ``exp``/``log``; NaN and infinity propagation of sums), read off the application itself
so that it holds of any term built from one (renamed, or with equal operands).  ``allowed_sum``
is the full bound of a float sum, used to prove that a rewrite's result is one the spec allows.

``AbstractScalars`` keeps nothing but structure: every element op is an uninterpreted function over
an uninterpreted sort per dtype (``select`` stays ``If``).  Index-level proofs of rewrite rules use
it, so they hold whatever the element semantics, given the rule's scalar lemma (see ``rewrites``).

Z3 is imported here: import this module lazily.
"""

from __future__ import annotations

from typing import Any, Sequence

import z3

from mind.spec.dtypes import DType


def sort_of(dtype: DType) -> Any:
    return {DType.F32: z3.Float32(), DType.F64: z3.Float64(), DType.I32: z3.BitVecSort(32),
            DType.I64: z3.BitVecSort(64), DType.BOOL: z3.BoolSort()}[dtype]


RNE = z3.RNE()
RTZ = z3.RTZ()


def value_of(dtype: DType, x: Any) -> Any:
    """A Python/NumPy scalar of ``dtype`` as a Z3 value (floats keep their sign and NaN)."""
    if dtype.is_float:
        f = float(x)
        s = sort_of(dtype)
        if f != f:
            return z3.fpNaN(s)
        return z3.FPVal(f, s)
    if dtype.is_int:
        return z3.BitVecVal(int(x), dtype.bits)
    return z3.BoolVal(bool(x))


class ExactScalars:
    """Element semantics of every op, exact where the spec is exact (see the module docstring)."""

    def __init__(self) -> None:
        self.bounded: list[Any] = []  # the applications of bounded ops made, in order
        self._funcs: dict[tuple, Any] = {}

    # leaves and constants ------------------------------------------------------------------------
    def sort(self, dtype: DType) -> Any:
        return sort_of(dtype)

    def leaf(self, name: str, dtype: DType) -> Any:
        return z3.Const(name, sort_of(dtype))

    def literal(self, dtype: DType, x: Any) -> Any:
        return value_of(dtype, x)

    # elementwise ---------------------------------------------------------------------------------
    def arith(self, op: str, dtype: DType, a: Any, b: Any) -> Any:
        if dtype.is_float:
            return {"add": z3.fpAdd, "sub": z3.fpSub, "mul": z3.fpMul, "div": z3.fpDiv}[op](RNE, a, b)
        if op == "add":
            return a + b
        if op == "sub":
            return a - b
        if op == "mul":
            return a * b
        int_min = z3.BitVecVal(dtype.int_min, dtype.bits)
        zero = z3.BitVecVal(0, dtype.bits)
        return z3.If(b == zero, zero, z3.If(z3.And(a == int_min, b == -1), int_min, a / b))

    def compare(self, direction: str, dtype: DType, a: Any, b: Any) -> Any:
        if dtype.is_float:
            return {"eq": z3.fpEQ, "ne": lambda p, q: z3.Not(z3.fpEQ(p, q)), "lt": z3.fpLT,
                    "le": z3.fpLEQ, "gt": z3.fpGT, "ge": z3.fpGEQ}[direction](a, b)
        if dtype is DType.BOOL:
            return {"eq": lambda p, q: p == q, "ne": lambda p, q: p != q,
                    "lt": lambda p, q: z3.And(z3.Not(p), q), "le": lambda p, q: z3.Implies(p, q),
                    "gt": lambda p, q: z3.And(p, z3.Not(q)), "ge": lambda p, q: z3.Implies(q, p)}[direction](a, b)
        return {"eq": lambda p, q: p == q, "ne": lambda p, q: p != q, "lt": lambda p, q: p < q,
                "le": lambda p, q: p <= q, "gt": lambda p, q: p > q, "ge": lambda p, q: p >= q}[direction](a, b)

    def select(self, p: Any, a: Any, b: Any) -> Any:
        return z3.If(p, a, b)

    def convert(self, src: DType, dst: DType, a: Any) -> Any:
        if src is dst:
            return a
        if dst is DType.BOOL:
            if src.is_float:
                return z3.Not(z3.fpIsZero(a))  # NaN → true, ±0 → false
            return a != z3.BitVecVal(0, src.bits)
        if src is DType.BOOL:
            return z3.If(a, value_of(dst, 1), value_of(dst, 0))
        if src.is_float and dst.is_float:
            return z3.fpToFP(RNE, a, sort_of(dst))
        if src.is_int and dst.is_float:
            return z3.fpSignedToFP(RNE, a, sort_of(dst))
        if src.is_int and dst.is_int:
            if dst.bits < src.bits:
                return z3.Extract(dst.bits - 1, 0, a)
            return z3.SignExt(dst.bits - src.bits, a)
        # float → int: truncate toward zero, saturate, NaN → 0
        s = sort_of(src)
        t = z3.fpRoundToIntegral(RTZ, a)
        hi = z3.FPVal(float(2 ** (dst.bits - 1)), s)
        lo = z3.FPVal(-float(2 ** (dst.bits - 1)), s)
        return z3.If(z3.fpIsNaN(a), z3.BitVecVal(0, dst.bits),
                     z3.If(z3.fpGEQ(t, hi), z3.BitVecVal(dst.int_max, dst.bits),
                           z3.If(z3.fpLT(t, lo), z3.BitVecVal(dst.int_min, dst.bits),
                                 z3.fpToSBV(RTZ, a, z3.BitVecSort(dst.bits)))))

    def max(self, dtype: DType, a: Any, b: Any) -> Any:
        """The spec's max: NaN wins, +0 is greater than -0; false < true."""
        if dtype.is_float:
            b_wins = z3.Or(z3.fpLT(a, b), z3.And(z3.fpIsZero(a), z3.fpIsZero(b), z3.fpIsNegative(a)))
            return z3.If(z3.Or(z3.fpIsNaN(a), z3.fpIsNaN(b)), z3.fpNaN(sort_of(dtype)), z3.If(b_wins, b, a))
        if dtype is DType.BOOL:
            return z3.Or(a, b)
        return z3.If(a < b, b, a)

    def max_identity(self, dtype: DType) -> Any:
        if dtype.is_float:
            return z3.fpMinusInfinity(sort_of(dtype))
        if dtype is DType.BOOL:
            return z3.BoolVal(False)
        return z3.BitVecVal(dtype.int_min, dtype.bits)

    def zero(self, dtype: DType) -> Any:
        return value_of(dtype, 0)

    # bounded ops ---------------------------------------------------------------------------------
    def _func(self, name: str, dtype: DType, arity: int) -> Any:
        key = (name, dtype, arity)
        f = self._funcs.get(key)
        if f is None:
            s = sort_of(dtype)
            f = self._funcs[key] = z3.Function(f"{name}_{dtype.value}_{arity}", *([s] * arity), s)
        return f

    def exp(self, dtype: DType, a: Any) -> Any:
        r = self._func("exp", dtype, 1)(a)
        self.bounded.append(r)
        return r

    def log(self, dtype: DType, a: Any) -> Any:
        r = self._func("log", dtype, 1)(a)
        self.bounded.append(r)
        return r

    def sum(self, dtype: DType, xs: Sequence[Any]) -> Any:
        """Σ xs: exact wrapping for integers; for floats an uninterpreted function of the elements
        (in row-major order of the reduced window)."""
        if not dtype.is_float:
            out = value_of(dtype, 0)
            for x in xs:
                out = out + x
            return out
        if not xs:
            return z3.fpPlusZero(sort_of(dtype))
        r = self._func("sum", dtype, len(xs))(*xs)
        self.bounded.append(r)
        return r

    def dot(self, dtype: DType, lhs: Sequence[Any], rhs: Sequence[Any]) -> Any:
        """Σ lhs[k]·rhs[k]: exact wrapping for integers; for floats an uninterpreted function of the
        2n operands."""
        if not dtype.is_float:
            out = value_of(dtype, 0)
            for p, q in zip(lhs, rhs):
                out = out + p * q
            return out
        if not lhs:
            return z3.fpPlusZero(sort_of(dtype))
        r = self._func("dot", dtype, 2 * len(lhs))(*lhs, *rhs)
        self.bounded.append(r)
        return r

    def index_at_most(self, dtype: DType, a: Any, k: int) -> Any:
        """``a ≤ k`` for an integer element (gather's clamp)."""
        return a <= z3.BitVecVal(k, dtype.bits)


def is_bounded(t: Any) -> bool:
    """Whether ``t`` applies one of ``ExactScalars``' uninterpreted (bounded) functions."""
    return z3.is_app(t) and t.num_args() > 0 and t.decl().kind() == z3.Z3_OP_UNINTERPRETED \
        and t.decl().name().split("_", 1)[0] in ("exp", "log", "sum", "dot")


def facts(r: Any) -> Any:
    """What the spec fixes of an application ``r`` of a bounded op, for every implementation:
    exp/log: NaN exactly when the spec says, the exact special values, exp never negative, log of
    a positive finite number finite; sums: NaN for a NaN element or +inf with -inf, else the one
    infinity present; dot products: NaN in an operand gives NaN."""
    kind = r.decl().name().split("_", 1)[0]
    xs = [r.arg(k) for k in range(r.num_args())]
    s = r.sort()
    if kind == "exp":
        a = xs[0]
        return z3.And(z3.fpIsNaN(r) == z3.fpIsNaN(a),
                      z3.Implies(z3.fpIsZero(a), r == z3.FPVal(1.0, s)),
                      z3.Implies(a == z3.fpPlusInfinity(s), r == z3.fpPlusInfinity(s)),
                      z3.Implies(a == z3.fpMinusInfinity(s), r == z3.fpPlusZero(s)),
                      z3.Implies(z3.Not(z3.fpIsNaN(a)), z3.Not(z3.fpIsNegative(r))))
    if kind == "log":
        a = xs[0]
        nan_in = z3.Or(z3.fpIsNaN(a), z3.fpLT(a, z3.fpPlusZero(s)))
        return z3.And(z3.fpIsNaN(r) == nan_in,
                      z3.Implies(z3.fpIsZero(a), r == z3.fpMinusInfinity(s)),
                      z3.Implies(a == z3.fpPlusInfinity(s), r == z3.fpPlusInfinity(s)),
                      z3.Implies(a == z3.FPVal(1.0, s), r == z3.fpPlusZero(s)),
                      z3.Implies(z3.And(z3.Not(nan_in), z3.Not(z3.fpIsZero(a)), a != z3.fpPlusInfinity(s)),
                                 z3.Not(z3.fpIsInf(r))))
    if kind == "sum":
        return _nonfinite_sum(xs, r)
    return z3.Implies(z3.Or(*[z3.fpIsNaN(t) for t in xs]), z3.fpIsNaN(r))


def _nonfinite_sum(xs: list[Any], r: Any) -> Any:
    """What every implementation of a float sum must give when the exact sum is not finite: NaN
    for a NaN element or for +inf and -inf together, else the infinity present."""
    s = r.sort()
    nan = z3.Or(*[z3.fpIsNaN(x) for x in xs])
    pinf = z3.Or(*[x == z3.fpPlusInfinity(s) for x in xs])
    ninf = z3.Or(*[x == z3.fpMinusInfinity(s) for x in xs])
    return z3.And(z3.Implies(z3.Or(nan, z3.And(pinf, ninf)), z3.fpIsNaN(r)),
                  z3.Implies(z3.And(z3.Not(nan), pinf, z3.Not(ninf)), r == z3.fpPlusInfinity(s)),
                  z3.Implies(z3.And(z3.Not(nan), ninf, z3.Not(pinf)), r == z3.fpMinusInfinity(s)))


def allowed_sum(dtype: DType, xs: Sequence[Any], r: Any) -> Any:
    """``r`` is a result the spec allows for the float sum of ``xs`` (``spec/accuracy.py``, class
    ``sum``): the non-finite cases exactly; otherwise ``r`` finite with
    ``|r - Σx| ≤ γ(n)·Σ|x| + n·η`` in exact real arithmetic."""
    from fractions import Fraction

    n = len(xs)
    s = sort_of(dtype)
    u = Fraction(1, 2 ** dtype.mantissa_bits)
    gamma = n * u / (1 - n * u)
    eta = Fraction(1, 2 ** (149 if dtype is DType.F32 else 1074))
    finite = z3.And(*[z3.Not(z3.Or(z3.fpIsNaN(x), z3.fpIsInf(x))) for x in xs]) if xs else z3.BoolVal(True)
    reals = [z3.fpToReal(x) for x in xs]
    exact = z3.Sum(reals) if reals else z3.RealVal(0)
    mag = z3.Sum([z3.If(t >= 0, t, -t) for t in reals]) if reals else z3.RealVal(0)
    err = z3.fpToReal(r) - exact
    bound = z3.RealVal(gamma) * mag + z3.RealVal(n * eta)
    within = z3.And(z3.Not(z3.Or(z3.fpIsNaN(r), z3.fpIsInf(r))), err <= bound, -err <= bound)
    if not xs:
        within = z3.And(within, r == z3.fpPlusZero(s))
    return z3.If(finite, within, _nonfinite_sum(list(xs), r) if xs else z3.BoolVal(True))


class AbstractScalars:
    """Every element op an uninterpreted function over an uninterpreted sort per dtype (bool stays
    Z3's ``Bool`` so that ``select`` is ``If``): proofs over it hold for any element semantics."""

    def __init__(self) -> None:
        self._sorts: dict[DType, Any] = {}
        self._funcs: dict[tuple, Any] = {}
        self.bounded: list[Any] = []

    def sort(self, dtype: DType) -> Any:
        if dtype is DType.BOOL:
            return z3.BoolSort()
        s = self._sorts.get(dtype)
        if s is None:
            s = self._sorts[dtype] = z3.DeclareSort(f"E_{dtype.value}")
        return s

    def _f(self, name: str, args: Sequence[DType], ret: DType) -> Any:
        key = (name, tuple(args), ret)
        f = self._funcs.get(key)
        if f is None:
            f = self._funcs[key] = z3.Function(name, *[self.sort(a) for a in args], self.sort(ret))
        return f

    def leaf(self, name: str, dtype: DType) -> Any:
        return z3.Const(name, self.sort(dtype))

    def literal(self, dtype: DType, x: Any) -> Any:
        if dtype is DType.BOOL:
            return z3.BoolVal(bool(x))
        text = repr(x).replace("-", "neg").replace("+", "pos").replace(".", "_")
        return z3.Const(f"lit_{text}_{dtype.value}", self.sort(dtype))

    def arith(self, op: str, dtype: DType, a: Any, b: Any) -> Any:
        return self._f(f"{op}_{dtype.value}", (dtype, dtype), dtype)(a, b)

    def compare(self, direction: str, dtype: DType, a: Any, b: Any) -> Any:
        return self._f(f"compare_{direction}_{dtype.value}", (dtype, dtype), DType.BOOL)(a, b)

    def select(self, p: Any, a: Any, b: Any) -> Any:
        return z3.If(p, a, b)

    def convert(self, src: DType, dst: DType, a: Any) -> Any:
        return self._f(f"convert_{src.value}_{dst.value}", (src,), dst)(a)

    def max(self, dtype: DType, a: Any, b: Any) -> Any:
        return self._f(f"max_{dtype.value}", (dtype, dtype), dtype)(a, b)

    def max_identity(self, dtype: DType) -> Any:
        return z3.Const(f"max_identity_{dtype.value}", self.sort(dtype))

    def zero(self, dtype: DType) -> Any:
        return self.literal(dtype, 0)

    def exp(self, dtype: DType, a: Any) -> Any:
        return self._f(f"exp_{dtype.value}", (dtype,), dtype)(a)

    def log(self, dtype: DType, a: Any) -> Any:
        return self._f(f"log_{dtype.value}", (dtype,), dtype)(a)

    def sum(self, dtype: DType, xs: Sequence[Any]) -> Any:
        if not xs:
            return self.zero(dtype)
        return self._f(f"sum{len(xs)}_{dtype.value}", (dtype,) * len(xs), dtype)(*xs)

    def dot(self, dtype: DType, lhs: Sequence[Any], rhs: Sequence[Any]) -> Any:
        if not lhs:
            return self.zero(dtype)
        return self._f(f"dot{len(lhs)}_{dtype.value}", (dtype,) * (2 * len(lhs)), dtype)(*lhs, *rhs)

    def index_at_most(self, dtype: DType, a: Any, k: int) -> Any:
        return self._f(f"at_most_{k}_{dtype.value}", (dtype,), DType.BOOL)(a)
