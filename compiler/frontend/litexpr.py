"""Literal expressions whose dtype the context decides.

A literal has no dtype until it meets one (``x * 2`` takes x's dtype).  The same holds for
expressions made only of literals: ``1.0 / 3.0`` used as an f64 is the f64 quotient, not the f32
one; ``if c { 1 } else { 0 }`` returned from a function declared ``-> i64`` is an i64 ``select``.
``LitExpr`` keeps such an expression (integer arithmetic on literals is folded exactly instead,
``Lit``) and ``materialize`` computes it in the dtype finally asked for, with NumPy's arithmetic in
that dtype (the semantics of the IR ops), or emits the ``select`` of a tensor condition.

Chains can be long (``1.0 + 2.0 + ... ``): evaluation walks the tree with an explicit stack.
"""

from __future__ import annotations

import operator
from typing import Any

from mind.ir.core import Value
from mind.spec.dtypes import DType

from .values import Lit

_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
_CMP = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
        ">=": operator.ge}
DEFAULT = {"int": DType.I32, "float": DType.F32, "bool": DType.BOOL}


class LitExpr:
    """``op`` of ``args``: arithmetic ("+", "-", "*", "/", "neg") or a comparison on literals and
    literal expressions, or "select" of (a rank-0 bool ``Value``, a, b).  ``kind`` is "int", "float"
    or "bool", as for ``Lit``."""

    __slots__ = ("op", "args", "kind", "span")

    def __init__(self, op: str, args: tuple[Any, ...], kind: str, span: tuple[int, int]):
        self.op = op
        self.args = args
        self.kind = kind
        self.span = span


LITERALS = (Lit, LitExpr)


def combine(op: str, a: Any, b: Any, span: tuple[int, int]) -> LitExpr | None:
    """``a op b`` for two literal values that ``fold`` did not compute exactly, or ``None``."""
    if op in _ARITH:
        if a.kind == "bool" or b.kind == "bool":
            return None
        return LitExpr(op, (a, b), "float" if "float" in (a.kind, b.kind) else "int", span)
    if op in _CMP:
        if (a.kind == "bool") != (b.kind == "bool"):
            return None
        return LitExpr(op, (a, b), "bool", span)
    return None


def negate(a: Any, span: tuple[int, int]) -> LitExpr:
    return LitExpr("neg", (a,), a.kind, span)


def choose(c: Value, a: Any, b: Any, span: tuple[int, int]) -> LitExpr | None:
    """``select(c, a, b)`` of two literal values of compatible kinds, or ``None``."""
    if (a.kind == "bool") != (b.kind == "bool"):
        return None
    return LitExpr("select", (c, a, b), "float" if "float" in (a.kind, b.kind) else a.kind, span)


def _operand_dtype(node: Any, dt: DType) -> DType:
    """The dtype the operands of a comparison are computed in (the comparison itself is bool)."""
    kinds = [x.kind for x in node.args]
    if "bool" in kinds:
        return DType.BOOL
    return DEFAULT["float" if "float" in kinds else "int"]


def materialize(E: Any, v: Any, dt: DType | None = None) -> Value:
    """The ``Value`` of the literal expression ``v`` as ``dt`` (its kind's default if ``None``):
    constants computed in ``dt``, ``select`` ops for tensor conditions."""
    import numpy as np

    dt = dt or DEFAULT[v.kind]
    results: dict[int, Any] = {}  # id(node) -> NumPy scalar (constant) or Value
    stack: list[tuple[Any, DType, bool]] = [(v, dt, False)]
    while stack:
        node, want, ready = stack.pop()
        key = id(node)
        if key in results:
            continue
        if type(node) is Lit:
            results[key] = E.lit_value(node, want)
            continue
        subs = [(x, _operand_dtype(node, want) if node.op in _CMP else want)
                for x in (node.args[1:] if node.op == "select" else node.args)]
        if not ready:
            stack.append((node, want, True))
            stack.extend((x, w, False) for x, w in subs if id(x) not in results)
            continue
        vals = [results[id(x)] for x, _ in subs]
        if node.op == "select":
            a, b = (x if type(x) is Value else E.const(x, want) for x in vals)
            results[key] = E.emit("select", (node.args[0], a, b), node.span, "if")
            continue
        if any(type(x) is Value for x in vals):  # an operand holds a select: compute with ops
            xs = [x if type(x) is Value else E.const(x, w) for x, (_, w) in zip(vals, subs)]
            results[key] = _emit(E, node, xs)
            continue
        with np.errstate(all="ignore"):  # a literal past f32's range is ±inf, as IEEE rounds it
            nps = [np.asarray(x, dtype=w.numpy) for x, (_, w) in zip(vals, subs)]
            if node.op == "neg":
                out = -nps[0]
            elif node.op in _ARITH:
                out = _ARITH[node.op](nps[0], nps[1])
                if want.is_int and node.op == "/":  # total integer division: truncate, x / 0 = 0
                    out = np.where(nps[1] == 0, 0, np.trunc(nps[0] / np.where(nps[1] == 0, 1, nps[1])))
            else:
                out = _CMP[node.op](nps[0], nps[1])
        results[key] = np.asarray(out).astype(want.numpy)[()]
    out = results[id(v)]
    return out if type(out) is Value else E.const(out, dt)


def _emit(E: Any, node: LitExpr, xs: list[Value]) -> Value:
    if node.op == "neg":
        return E.emit("mul", (xs[0], E.const(-1, xs[0].type.dtype)), node.span, "-")
    if node.op in _ARITH:
        return E.emit({"+": "add", "-": "sub", "*": "mul", "/": "div"}[node.op], tuple(xs), node.span, node.op)
    direction = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}[node.op]
    return E.emit("compare", tuple(xs), node.span, node.op, direction=direction)


def constant(E: Any, v: Any) -> Any:
    """The value of a literal expression without a ``select``, in its kind's default dtype, or
    ``None`` (for a compile-time condition)."""
    out = materialize(E, v)
    known = E.static.of(out)
    return None if known is None else known[()]
