"""exp's scaling by 2^n in one AVX-512 ``vscalef`` instead of eight instructions.

``linalg.mathlib``'s exp ends with ``y * s1 * s2``: ``y`` the polynomial's value (in [0.7, 1.42]),
``s1 = 2^floor(n/2)`` and ``s2 = 2^ceil(n/2)`` built from the bits of ``t = x / ln2 + EXP_SHIFT``
by shifts and adds (two halves, so that results below the normal range and overflow to +inf are
rounded once, by the second multiply).  AVX-512's ``vscalefps``/``vscalefpd`` computes
``y * 2^floor(b)`` with one rounding, honouring subnormal results and overflow, in one instruction;
with ``b = t - EXP_SHIFT`` (``n`` exactly) it is the same product rounded once, so the same bits.  The
halves' integer work and the two multiplies are 8 of an f32 exp's 21 vector instructions (of an
f64 exp's 26); ``t - EXP_SHIFT`` is already there (``n``, which the reduction uses).

``rewrite_exp_scaling`` works on the LLVM IR text of a kernel for an x86-64-v4 target: the two
multiplies carry ``mathlib.SCALE_MARK`` (``fmul afn``, which nothing else in a kernel writes); the
second becomes ``vscalef(y, t - EXP_SHIFT)``, ``t`` found by following ``s1``'s definition back
(``bitcast``, ``shl``, ``add``, ``lshr``, ``bitcast``, through the ``insertvalue``/``extractvalue``
pairs MLIR writes around n-D vectors), cut into native widths or widened by ``llvm_vectors``.  A
pair whose ``s1`` is not made that way is left as it is.  The first multiply and the halves are then
dead, and LLVM drops them.
"""

from __future__ import annotations

import re

from ..linalg.mathlib import EXP_SHIFT, F64, SCALE_MARK
from .llvm_vectors import ELEMENT, FORMAT, MASK, NAME, VectorWriter, per_function, with_declares

__all__ = ["rewrite_exp_scaling"]

_MARKED = re.compile(rf"^(\s*)({NAME}) = fmul {SCALE_MARK} <(\d+) x (float|double)> ({NAME}), ({NAME})\s*$")
_EXTRACT = re.compile(rf"^extractvalue \[.*\] ({NAME}), (\d+(?:, \d+)*)$")
_INSERT = re.compile(rf"^insertvalue \[.*\] (poison|undef|{NAME}), <[^>]*> ({NAME}), (\d+(?:, \d+)*)$")


class _Function:
    """One function's lines, each definition looked up when asked for (back from the marked
    multiply, which follows every value it depends on; a kernel's module is megabytes of text, and
    indexing every line cost more than the rest of the rewrite), with MLIR's aggregate wrapping
    seen through."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.at = len(lines)  # the definitions asked for are above this line
        self.found: dict[str, str] = {}

    def definition(self, name: str) -> str:
        """The right-hand side of ``name``'s definition ("" for a parameter)."""
        if name not in self.found:
            head = f"  {name} = "
            self.found[name] = next((self.lines[i][len(head):].strip() for i in range(self.at - 1, -1, -1)
                                     if self.lines[i].startswith(head)), "")
        return self.found[name]

    def value(self, name: str) -> str:
        """``name``, or the vector it is an ``extractvalue`` of (following the ``insertvalue``s
        that built the aggregate)."""
        for _ in range(64):  # an aggregate of n-D vectors has a few rows
            m = _EXTRACT.match(self.definition(name))
            if m is None:
                return name
            agg, index = m.group(1), m.group(2)
            while True:
                ins = _INSERT.match(self.definition(agg))
                if ins is None:
                    return name
                if ins.group(3) == index:
                    name = ins.group(2)
                    break
                agg = ins.group(1)
        return name

    def operand(self, name: str, pattern: str) -> str | None:
        """The value ``pattern`` (a regular expression with one group, the operand) matches in the
        definition of ``name`` (seen through aggregates)."""
        m = re.match(pattern, self.definition(self.value(name)))
        return None if m is None else self.value(m.group(1))

    def exponent_source(self, s1: str, lanes: int, elem: str) -> str | None:
        """``t`` when ``s1`` is ``bitcast(shl(add(lshr(bitcast(t), 1), -1), mant))`` (mathlib's
        ``_halves_of_pow2``), else None."""
        fmt = FORMAT[elem]
        vec, ivec, ity = f"<{lanes} x {elem}>", f"<{lanes} x i{fmt.bits}>", f"i{fmt.bits}"
        u = self.operand(s1, rf"^bitcast {re.escape(ivec)} ({NAME}) to {re.escape(vec)}$")
        v = u and self.operand(u, rf"^shl {re.escape(ivec)} ({NAME}), splat \({ity} {fmt.mant}\)$")
        h = v and self.operand(v, rf"^add {re.escape(ivec)} ({NAME}), splat \({ity} -1\)$")
        bits = h and self.operand(h, rf"^lshr {re.escape(ivec)} ({NAME}), splat \({ity} 1\)$")
        return bits and self.operand(bits, rf"^bitcast {re.escape(vec)} ({NAME}) to {re.escape(ivec)}$")


def _scalef(w: VectorWriter, indent: str, operands: list[str], lanes: int, elem: str) -> str:
    """``vscalef`` of two vectors of one native width."""
    suffix, bits = ELEMENT[elem]
    width = lanes * bits
    vec = f"<{lanes} x {elem}>"
    name = f"@llvm.x86.avx512.mask.scalef.{suffix}.{width}"
    rounding = ", i32 4" if width == 512 else ""  # 4: the current rounding mode
    w.declares.add(f"declare {vec} {name}({vec}, {vec}, {vec}, {MASK[lanes]}{', i32' if rounding else ''})")
    return w.emit(indent, f"call {vec} {name}({vec} {operands[0]}, {vec} {operands[1]}, {vec} zeroinitializer, "
                          f"{MASK[lanes]} -1{rounding})")


def _rewrite_function(lines: list[str], w: VectorWriter) -> list[str]:
    fn = _Function(lines)
    mark = f"fmul {SCALE_MARK} "
    marked = {m.group(2): m for m in (_MARKED.match(x) for x in lines if mark in x) if m}
    out: list[str] = []
    for i, line in enumerate(lines):
        m = _MARKED.match(line) if mark in line else None
        fn.at = i
        first = marked.get(fn.value(m.group(5))) if m else None
        t = first and fn.exponent_source(first.group(6), int(m.group(3)), m.group(4))
        if not t:
            out.append(line)
            continue
        indent, result, lanes, elem = m.group(1), m.group(2), int(m.group(3)), m.group(4)
        vec = f"<{lanes} x {elem}>"
        # LLVM writes a float constant, f32 too, as the hex of its f64 value
        shift = F64.bits_of(EXP_SHIFT[FORMAT[elem].name])
        w.lines = []
        n = w.emit(indent, f"fsub {vec} {t}, splat ({elem} 0x{shift:016X})")
        scaled = w.elementwise(indent, [first.group(5), n], lanes, elem, lambda *a: _scalef(w, *a))
        out.extend(w.lines + [f"{indent}{result} = select i1 true, {vec} {scaled}, {vec} {scaled}"])
    return out


def rewrite_exp_scaling(llvm_ir: str) -> str:
    """``llvm_ir`` with each marked pair of exp's scaling multiplies replaced as the module
    docstring says (for a target with AVX-512 F and VL); unchanged when it has none."""
    if f"fmul {SCALE_MARK} " not in llvm_ir:
        return llvm_ir
    w = VectorWriter("%mind.scalef.")
    out = per_function(llvm_ir, lambda body: _rewrite_function(body, w),
                       lambda body: f"fmul {SCALE_MARK} " in body)
    return with_declares(out, llvm_ir, w.declares)
