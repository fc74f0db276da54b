"""Vectorizable exp and log (f32, f64) written in arith/math ops that LLVM lowers to SIMD code.

Why: ``math.exp``/``math.log`` on vectors become scalar libm calls on the CPU (several times slower),
and the MLIR 22 wheels expose no polynomial-approximation pass.  The algorithms are written against a
tiny ``Emitter`` interface and emitted as MLIR text (``exp_text``/``log_text``: SSA lines to paste
into a ``linalg.generic`` body).  Operands may be scalars or vectors.

exp: Cody-Waite reduction x = n ln2 + r (|r| <= ln2/2), 1 + r + r^2 P(r) with P a near-minimax
polynomial (degree 4 for f32, 9 for f64: ``_EXP_F32``, ``_EXP_F64``), scaling by 2^n in two halves so that subnormal results and
overflow to +inf come out right (two multiplies marked for a target that scales in one instruction:
``TextEmitter.scale``); NaN propagates, exp(-inf) = 0, exp(+inf) = +inf.
log: musl/fdlibm: reduce to x = 2^k (1+f) with 1+f in [sqrt2/2, sqrt2), s = f/(2+f), a polynomial
in s^2; subnormal inputs are pre-scaled; log(0) = log(-0) = -inf, log(x<0) = NaN, log(+inf) = +inf.
Float constants are emitted as exact bit patterns, so the text is deterministic and exact.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Emitter", "TextEmitter", "exp_text", "log_text", "build_exp", "build_log", "FloatFormat", "F32", "F64",
           "vector_ops", "SCALE_MARK", "EXP_SHIFT"]

SCALE_MARK = "afn"
"""The fast-math flag on exp's two scaling multiplies (``TextEmitter.scale``)."""


@dataclass(frozen=True)
class FloatFormat:
    """IEEE binary format facts used by the algorithms."""

    name: str        # "f32" | "f64"
    int_name: str    # "i32" | "i64"
    bits: int
    mant: int        # explicit mantissa bits
    bias: int

    def bits_of(self, v: float) -> int:
        if self.bits == 32:
            return struct.unpack("<I", struct.pack("<f", v))[0]
        return struct.unpack("<Q", struct.pack("<d", v))[0]

    def from_bits(self, b: int) -> float:
        if self.bits == 32:
            return struct.unpack("<f", struct.pack("<I", b))[0]
        return struct.unpack("<d", struct.pack("<Q", b))[0]

    def round(self, v: float) -> float:
        """``v`` rounded to this format (exact for values already representable)."""
        return struct.unpack("<f", struct.pack("<f", v))[0] if self.bits == 32 else float(v)


F32 = FloatFormat("f32", "i32", 32, 23, 127)
F64 = FloatFormat("f64", "i64", 64, 52, 1023)


class Emitter:
    """The operations the algorithms need; ``V`` is whatever represents an SSA value."""

    fmt: FloatFormat

    def fconst(self, v: float) -> Any: raise NotImplementedError
    def iconst(self, v: int) -> Any: raise NotImplementedError
    def fbin(self, op: str, a: Any, b: Any) -> Any: raise NotImplementedError  # addf subf mulf divf maximumf minimumf
    def ibin(self, op: str, a: Any, b: Any) -> Any: raise NotImplementedError  # addi subi andi ori shli shrui
    def fma(self, a: Any, b: Any, c: Any) -> Any: raise NotImplementedError
    def cmpf(self, pred: str, a: Any, b: Any) -> Any: raise NotImplementedError
    def select(self, c: Any, a: Any, b: Any) -> Any: raise NotImplementedError
    def to_int_bits(self, a: Any) -> Any: raise NotImplementedError     # bitcast float -> int
    def from_int_bits(self, a: Any) -> Any: raise NotImplementedError   # bitcast int -> float

    def scale(self, y: Any, s1: Any, s2: Any) -> Any:
        """``y * s1 * s2``, where ``s1 * s2`` is exp's 2^n: two multiplies, which an emitter may
        mark for a target that scales by a power of two in one instruction."""
        return self.fbin("mulf", self.fbin("mulf", y, s1), s2)


def _poly(e: Emitter, x: Any, coeffs: list[float]) -> Any:
    """Horner with fused multiply-adds; ``coeffs`` from the highest degree down."""
    acc = e.fconst(coeffs[0])
    for c in coeffs[1:]:
        acc = e.fma(acc, x, e.fconst(c))
    return acc


# (exp(r) - 1 - r) / r^2 on |r| <= ln2/2, least squares on Chebyshev nodes weighted for exp's relative
# error (near minimax), coefficients rounded to the format: f32 degree 4, |error| 3.8e-9 relative
# (0.03 ulp); f64 degree 9, 1.2e-17 (0.06 ulp), two FMAs fewer than Taylor's degree 11
_EXP_F32 = [0.0013751407386735082, 0.008368915878236294, 0.04166953265666962, 0.166665181517601,
            0.49999988079071045]
_EXP_F64 = [2.50246452096493e-08, 2.7631125446226205e-07, 2.755750728541229e-06, 2.480149034623507e-05,
            0.00019841269597118904, 0.0013888888946678828, 0.008333333333451433, 0.04166666666651632,
            0.16666666666666483, 0.5000000000000012]


EXP_SHIFT = {f.name: 2.0 ** f.mant + 2 * (f.bias + 1) for f in (F32, F64)}
"""2^mant + 2 (bias + 1): exp's ``t = x / ln2 + EXP_SHIFT`` holds ``n`` in its low mantissa bits and
``t - EXP_SHIFT`` is ``n`` exactly (``build_exp``)."""


def build_exp(e: Emitter, x: Any) -> Any:
    """exp(x) with the ops of ``e``; see the module docstring for the algorithm.

    No select for NaN: the clamp passes a NaN through (``maximumf``/``minimumf`` propagate it; with a
    constant bound that is neither NaN nor zero LLVM makes each one x86 ``max``/``min``), so ``r``,
    the polynomial and the final products are NaN; the integer halves made from a NaN's bits are
    some floats, and a product with a NaN is a NaN (the spec leaves a NaN's sign and payload free)."""
    f = e.fmt
    if f.bits == 32:
        lo, hi, coeffs = -104.0, 89.0, _EXP_F32
        ln2_hi, ln2_lo = 0.693359375, -2.12194440e-4
    else:
        lo, hi, coeffs = -746.0, 710.0, _EXP_F64
        ln2_hi, ln2_lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
    xs = e.fbin("minimumf", e.fbin("maximumf", x, e.fconst(lo)), e.fconst(hi))
    # n = round(xs / ln2) becomes the low mantissa bits of t = xs / ln2 + 2^mant + 2 (bias + 1): the
    # sum lies in [2^mant, 2^(mant+1)) for every n of the clamped range, where the spacing of the
    # format is 1, so the FMA's one rounding is the rounding to the nearest integer; t - shift is n
    # exactly, and t's bits are what ``_halves_of_pow2`` reads (no floor, no separate add)
    shift = e.fconst(EXP_SHIFT[f.name])
    t = e.fma(xs, e.fconst(1.0 / math.log(2.0)), shift)
    n = e.fbin("subf", t, shift)
    r = e.fma(n, e.fconst(-ln2_hi), xs)
    r = e.fma(n, e.fconst(-ln2_lo), r)
    q = _poly(e, r, coeffs)
    y = e.fbin("addf", e.fma(q, e.fbin("mulf", r, r), r), e.fconst(1.0))
    s1, s2 = _halves_of_pow2(e, e.to_int_bits(t))
    return e.scale(y, s1, s2)


def _halves_of_pow2(e: Emitter, bits: Any) -> tuple[Any, Any]:
    """2^floor(n/2) and 2^ceil(n/2), whose product is 2^n, from the ``bits`` of n + 2^mant + 2 (bias + 1)
    (u = n + 2 (bias + 1), positive for every n of exp's range, in the low mantissa bits).

    Why not ``fptosi``: AVX2 has no f64 -> i64 vector conversion (AVX-512DQ's) and no 64-bit
    arithmetic shift, so LLVM scalarized them, four conversions and inserts per vector.  floor(u/2) - 1
    and ceil(u/2) - 1 are the two biased exponents, each made by a logical shift, an add and a shift
    into the exponent field (the bits above u shift out): as many operations as the conversion's
    path, in every vector unit."""
    f = e.fmt
    half = e.ibin("shrui", bits, e.iconst(1))
    low = e.ibin("addi", half, e.iconst(-1))
    high = e.ibin("addi", e.ibin("subi", bits, half), e.iconst(-1))
    return (e.from_int_bits(e.ibin("shli", low, e.iconst(f.mant))),
            e.from_int_bits(e.ibin("shli", high, e.iconst(f.mant))))


def _exponent(e: Emitter, ix: Any) -> Any:
    """The unbiased exponent field of the bits ``ix`` of a positive float, as a float.

    Why not ``sitofp``: AVX2 has no i64 -> f64 vector conversion (and no 64-bit arithmetic shift),
    so LLVM scalarized it.  The field, shifted down logically, becomes the low mantissa bits of
    2^mant, which then holds 2^mant + field exactly; subtracting 2^mant + bias leaves field - bias."""
    f = e.fmt
    field = e.ibin("shrui", ix, e.iconst(f.mant))
    with_one = e.from_int_bits(e.ibin("ori", field, e.iconst(f.bits_of(2.0 ** f.mant))))
    return e.fbin("subf", with_one, e.fconst(2.0 ** f.mant + f.bias))


def _hexf(bits: int, fmt: FloatFormat) -> float:
    return fmt.from_bits(bits)


def build_log(e: Emitter, x: Any) -> Any:
    """log(x) with the ops of ``e``; see the module docstring for the algorithm."""
    f = e.fmt
    if f.bits == 32:
        one_bits, sqrth_bits, mask = 0x3F800000, 0x3F3504F3, 0x007FFFFF
        ln2_hi, ln2_lo = _hexf(0x3F317180, f), _hexf(0x3717F7D1, f)
        lg = [0xAAAAAA / 2.0**24, 0xCCCE13 / 2.0**25, 0x91E9EE / 2.0**25, 0xF89E26 / 2.0**26]
        pre, min_normal = 25, 2.0**-126
    else:
        one_bits, sqrth_bits, mask = 0x3FF0000000000000, 0x3FE6A09E00000000, 0x000FFFFFFFFFFFFF
        ln2_hi, ln2_lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
        lg = [6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
              2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
              1.479819860511658591e-01]
        pre, min_normal = 54, 2.0**-1022
    tiny = e.cmpf("olt", x, e.fconst(min_normal))
    xs = e.select(tiny, e.fbin("mulf", x, e.fconst(2.0**pre)), x)
    kadj = e.select(tiny, e.fconst(-pre), e.fconst(0.0))
    ix = e.ibin("addi", e.to_int_bits(xs), e.iconst(one_bits - sqrth_bits))
    # a negative x (sign bit set) gives a wrong exponent here and NaN at the end
    dk = e.fbin("addf", _exponent(e, ix), kadj)
    ix = e.ibin("addi", e.ibin("andi", ix, e.iconst(mask)), e.iconst(sqrth_bits))
    fm = e.fbin("subf", e.from_int_bits(ix), e.fconst(1.0))
    s = e.fbin("divf", fm, e.fbin("addf", e.fconst(2.0), fm))
    z = e.fbin("mulf", s, s)
    w = e.fbin("mulf", z, z)
    odd = lg[0::2]   # Lg1, Lg3, ...
    even = lg[1::2]  # Lg2, Lg4, ...
    t1 = e.fbin("mulf", w, _poly(e, w, list(reversed(even))))
    t2 = e.fbin("mulf", z, _poly(e, w, list(reversed(odd))))
    big_r = e.fbin("addf", t2, t1)
    hfsq = e.fbin("mulf", e.fbin("mulf", e.fconst(0.5), fm), fm)
    res = e.fbin("mulf", s, e.fbin("addf", hfsq, big_r))
    res = e.fma(dk, e.fconst(ln2_lo), res)
    res = e.fbin("subf", res, hfsq)
    res = e.fbin("addf", res, fm)
    res = e.fma(dk, e.fconst(ln2_hi), res)
    inf = e.fconst(math.inf)
    res = e.select(e.cmpf("oeq", x, inf), inf, res)
    res = e.select(e.cmpf("oeq", x, e.fconst(0.0)), e.fconst(-math.inf), res)
    res = e.select(e.cmpf("olt", x, e.fconst(0.0)), e.fconst(math.nan), res)
    return e.select(e.cmpf("uno", x, x), x, res)


# ------------------------------------------------------------------------------------ text emission

class TextEmitter(Emitter):
    """Emits textual SSA lines (MLIR custom syntax); ``ty`` is ``f32``/``f64`` or ``vector<...xf32>``."""

    def __init__(self, ty: str, prefix: str = "m") -> None:
        elem = ty.rsplit("x", 1)[-1].rstrip(">") if ty.startswith("vector<") else ty
        if elem not in ("f32", "f64"):
            raise ValueError(f"exp/log support f32 and f64, not {elem}")
        self.fmt = F32 if elem == "f32" else F64
        self.ty = ty
        self.vec = ty.startswith("vector<")
        self.ity = ty.replace(elem + ">", self.fmt.int_name + ">") if self.vec else self.fmt.int_name
        self.bty = ty.replace(elem + ">", "i1>") if self.vec else "i1"
        self.prefix = prefix
        self.lines: list[str] = []
        self._n = 0
        self._consts: dict[tuple[str, int], str] = {}
        self._ints: set[str] = set()  # names of integer-typed values

    def _new(self) -> str:
        self._n += 1
        return f"%{self.prefix}{self._n}"

    def _emit(self, rhs: str) -> str:
        v = self._new()
        self.lines.append(f"{v} = {rhs}")
        return v

    def _const(self, bits: int, ty: str, is_float: bool) -> str:
        key = (ty, bits)
        if key not in self._consts:
            width = self.fmt.bits
            if is_float:
                lit = f"0x{bits:0{width // 4}X}"
            else:
                lit = str(bits - (1 << width) if bits >= 1 << (width - 1) else bits)
            val = f"dense<{lit}>" if self.vec else lit
            self._consts[key] = self._emit(f"arith.constant {val} : {ty}")
        return self._consts[key]

    def fconst(self, v: float) -> str:
        return self._const(self.fmt.bits_of(self.fmt.round(v)), self.ty, True)

    def iconst(self, v: int) -> str:
        return self._int(self._const(v & ((1 << self.fmt.bits) - 1), self.ity, False))

    def _int(self, v: str) -> str:
        self._ints.add(v)
        return v

    def fbin(self, op: str, a: str, b: str) -> str:
        return self._emit(f"arith.{op} {a}, {b} : {self.ty}")

    def ibin(self, op: str, a: str, b: str) -> str:
        return self._int(self._emit(f"arith.{op} {a}, {b} : {self.ity}"))

    def fma(self, a: str, b: str, c: str) -> str:
        return self._emit(f"math.fma {a}, {b}, {c} : {self.ty}")

    def cmpf(self, pred: str, a: str, b: str) -> str:
        return self._emit(f"arith.cmpf {pred}, {a}, {b} : {self.ty}")

    def select(self, c: str, a: str, b: str) -> str:
        ty = self.ity if a in self._ints else self.ty
        v = self._emit(f"arith.select {c}, {a}, {b} : {self.bty}, {ty}" if self.vec
                       else f"arith.select {c}, {a}, {b} : {ty}")
        if ty == self.ity:
            self._ints.add(v)
        return v

    def to_int_bits(self, a: str) -> str:
        return self._int(self._emit(f"arith.bitcast {a} : {self.ty} to {self.ity}"))

    def from_int_bits(self, a: str) -> str:
        return self._emit(f"arith.bitcast {a} : {self.ity} to {self.ty}")

    def scale(self, y: str, s1: str, s2: str) -> str:
        """The two multiplies marked ``fastmath<afn>`` (``SCALE_MARK``), the one place where this
        library writes that flag, so that a backend whose target scales by a power of two in one
        instruction finds them (AVX-512's ``vscalef``: ``cpu.scalef``).  The flag allows nothing
        else: it licenses approximating library functions, and a multiply calls none."""
        a = self._emit(f"arith.mulf {y}, {s1} fastmath<{SCALE_MARK}> : {self.ty}")
        return self._emit(f"arith.mulf {a}, {s2} fastmath<{SCALE_MARK}> : {self.ty}")


def _text(build: Callable[[Emitter, Any], Any], x: str, ty: str, prefix: str) -> tuple[list[str], str]:
    em = TextEmitter(ty, prefix)
    out = build(em, x)
    return em.lines, out


def exp_text(x: str, ty: str = "f32", prefix: str = "exp") -> tuple[list[str], str]:
    """SSA lines computing exp(``x``) (an SSA name like ``%in``) and the name of the result.

    ``prefix`` must make the names unique in the enclosing region (one prefix per use).
    """
    return _text(build_exp, x, ty, prefix)


def log_text(x: str, ty: str = "f32", prefix: str = "log") -> tuple[list[str], str]:
    """SSA lines computing log(``x``) and the name of the result (see ``exp_text``)."""
    return _text(build_log, x, ty, prefix)


def vector_ops(build: Callable[[Emitter, Any], Any], ty: str = "f32") -> int:
    """The instructions one vector of ``build`` (``build_exp``, ``build_log``) costs: its operations
    but the constants (hoisted out of every loop) and the bitcasts (no instruction); what the thread
    cost model charges per element (``cpu.thread_cost``), so that it follows the polynomials here."""
    lines, _ = _text(build, "%x", f"vector<16x{ty}>" if ty else ty, "c")
    return sum(1 for line in lines if "arith.constant" not in line and "arith.bitcast" not in line)
