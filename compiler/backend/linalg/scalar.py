"""The spec's total scalar semantics written with ``arith`` ops, where MLIR's own op is partial.

Integer division selects a safe divisor before ``arith.divsi`` (``x / 0 = 0``, ``INT_MIN / -1 =
INT_MIN``); float -> int conversion clamps and maps NaN to 0 before ``arith.fptosi`` (which is poison
out of range); comparisons produce an ``i1`` widened to the one-byte bool of ``mlir_text.ELEM``.
"""

from __future__ import annotations

from mind.spec.dtypes import DType

from .emitter import Body
from .mlir_text import ELEM, float_bits

__all__ = ["int_div", "convert", "compare", "FLOAT_PREDICATES", "SIGNED_PREDICATES", "UNSIGNED_PREDICATES"]

FLOAT_PREDICATES = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
"""Ordered comparisons (false on NaN), but ``ne`` unordered (true on NaN), as IEEE says."""
SIGNED_PREDICATES = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
UNSIGNED_PREDICATES = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}
"""bool bytes (0 < 1)."""


def int_div(b: Body, x: str, y: str, elem: str) -> str:
    """``x / y`` truncated, with ``x / 0 = 0`` and ``INT_MIN / -1 = INT_MIN``."""
    bits = 32 if elem == "i32" else 64
    zero, one = b.const("0", elem), b.const("1", elem)
    m1, mn = b.const("-1", elem), b.const(str(-(1 << (bits - 1))), elem)
    bz = b.cmpi("eq", y, zero, elem)
    am = b.cmpi("eq", x, mn, elem)
    bm = b.cmpi("eq", y, m1, elem)
    ov = b.binary("andi", am, bm, "i1")
    bad = b.binary("ori", bz, ov, "i1")
    ys = b.select(bad, one, y, elem)
    q = b.binary("divsi", x, ys, elem)   # INT_MIN / 1 = INT_MIN covers the overflow case
    return b.select(bz, zero, q, elem)


def compare(b: Body, direction: str, x: str, y: str, src: DType) -> str:
    """``x <direction> y`` on two elements of ``src`` as the bool byte."""
    e = ELEM[src]
    if src.is_float:
        c = b.cmpf(FLOAT_PREDICATES[direction], x, y, e)
    else:
        c = b.cmpi((UNSIGNED_PREDICATES if src is DType.BOOL else SIGNED_PREDICATES)[direction], x, y, e)
    return b.cast("extui", c, "i1", "i8")


def convert(b: Body, x: str, src: DType, dst: DType) -> str:
    """``x`` of ``src`` as ``dst``: to bool is ``!= 0``; float -> int truncates toward zero, saturates
    and maps NaN to 0."""
    se, de = ELEM[src], ELEM[dst]
    if src is dst:
        return x
    if dst is DType.BOOL:
        if src.is_float:
            c = b.cmpf("une", x, b.const(float_bits(0.0, se), se), se)
        else:
            c = b.cmpi("ne", x, b.const("0", se), se)
        return b.cast("extui", c, "i1", "i8")
    if src is DType.BOOL:
        return b.cast("uitofp" if dst.is_float else "extui", x, "i8", de)
    if src.is_float and dst.is_float:
        return b.cast("extf" if se == "f32" else "truncf", x, se, de)
    if src.is_int and dst.is_int:
        return b.cast("extsi" if se == "i32" else "trunci", x, se, de)
    if src.is_int and dst.is_float:
        return b.cast("sitofp", x, se, de)
    bits = 32 if de == "i32" else 64
    lo = b.const(float_bits(-float(1 << (bits - 1)), se), se)
    hi = b.const(float_bits(float(1 << (bits - 1)), se), se)
    fz = b.const(float_bits(0.0, se), se)
    below = b.cmpf("olt", x, lo, se)
    above = b.cmpf("oge", x, hi, se)
    nan = b.cmpf("uno", x, x, se)
    c1 = b.select(below, lo, x, se)
    bad = b.binary("ori", above, nan, "i1")
    c2 = b.select(bad, fz, c1, se)
    q = b.cast("fptosi", c2, se, de)
    mx = b.const(str((1 << (bits - 1)) - 1), de)
    return b.select(above, mx, q, de)
