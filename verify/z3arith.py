"""``Z3Arith``: the spec's ``Arith`` interface over Z3 integer terms, and a shape context that turns
every symbolic ``require`` into a recorded proof obligation.

Python ints stay Python ints (so rank-driven branches and constant folding behave exactly as in the
concrete interpretation); as soon as a Z3 term is involved the result is a Z3 term, and conditions
become Z3 ``BoolRef``.  Z3's integer ``/`` is Euclidean division, which equals floor division only
for a positive divisor; ``floordiv`` guards the negative case with an ``If`` so that the term
denotes Python's ``//`` for every non-zero divisor (lemma ``arith/floordiv`` in ``verify.obligations``).

Z3 is imported here, so import this module lazily (never from ``import mind``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import z3

from mind.spec.dims import Arith, Atom, DimExpr
from mind.spec.ops.base import ConstraintViolation, ShapeContext


def is_z3(x: Any) -> bool:
    return isinstance(x, z3.ExprRef)


def _isint(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def zint(x: Any) -> Any:
    if is_z3(x):
        return x
    if _isint(x):
        return z3.IntVal(x)
    raise TypeError(f"not an integer term: {x!r}")


def zbool(c: Any) -> Any:
    if isinstance(c, bool):
        return z3.BoolVal(c)
    return c


class Z3Arith(Arith):
    """Arithmetic on Python ints and Z3 ``ArithRef``; conditions are Python bools or Z3 ``BoolRef``."""

    def eq(self, a: Any, b: Any) -> Any:
        if _isint(a) and _isint(b):
            return a == b
        return zint(a) == zint(b)

    def ne(self, a: Any, b: Any) -> Any:
        return self.not_(self.eq(a, b))

    def le(self, a: Any, b: Any) -> Any:
        if _isint(a) and _isint(b):
            return a <= b
        return zint(a) <= zint(b)

    def lt(self, a: Any, b: Any) -> Any:
        if _isint(a) and _isint(b):
            return a < b
        return zint(a) < zint(b)

    def and_(self, *cs: Any) -> Any:
        rest = []
        for c in cs:
            if c is False:
                return False
            if c is True:
                continue
            rest.append(c)
        if not rest:
            return True
        return rest[0] if len(rest) == 1 else z3.And(*rest)

    def or_(self, *cs: Any) -> Any:
        rest = []
        for c in cs:
            if c is True:
                return True
            if c is False:
                continue
            rest.append(c)
        if not rest:
            return False
        return rest[0] if len(rest) == 1 else z3.Or(*rest)

    def not_(self, c: Any) -> Any:
        if isinstance(c, bool):
            return not c
        return z3.Not(c)

    def ite(self, c: Any, a: Any, b: Any) -> Any:
        if isinstance(c, bool):
            return a if c else b
        if _isint(a) and _isint(b) and a == b:
            return a
        return z3.If(c, zint(a), zint(b))

    def floordiv(self, a: Any, b: Any) -> Any:
        if _isint(a) and _isint(b):
            return a // b
        if _isint(b):
            if b > 0:
                return zint(a) / b
            if b < 0:
                return (-zint(a)) / (-b)
        za, zb = zint(a), zint(b)
        return z3.If(zb < 0, (-za) / (-zb), za / zb)

    def max(self, a: Any, b: Any) -> Any:
        if _isint(a) and _isint(b):
            return a if a >= b else b
        return z3.If(zint(b) <= zint(a), zint(a), zint(b))

    def min(self, a: Any, b: Any) -> Any:
        if _isint(a) and _isint(b):
            return a if a <= b else b
        return z3.If(zint(a) <= zint(b), zint(a), zint(b))


Z3_ARITH = Z3Arith()


def render_detail(detail: Any, label: str | None) -> str | None:
    if detail is None or isinstance(detail, str):
        return detail
    try:
        return str(detail())
    except Exception:  # a spec detail that cannot print Z3 terms
        return f"constraint {label} does not hold" if label else None


@dataclass
class Obligation:
    label: str
    cond: Any  # z3 BoolRef
    detail: Any  # str or a callable producing it (rendered on demand)

    @property
    def text(self) -> str:
        return render_detail(self.detail, self.label) or self.label


class Z3Context(ShapeContext):
    """Runs a shape rule on Z3 terms, recording each symbolic constraint instead of deciding it.

    A constraint that folds to ``False`` still raises ``ConstraintViolation`` (as in every
    interpretation); one that folds to ``True`` is dropped.
    """

    def __init__(self, arith: Arith | None = None):
        super().__init__(arith or Z3_ARITH)
        self.obligations: list[Obligation] = []

    def require(self, label: str, cond: Any, detail: Any, help: Any = None) -> None:
        # Like ShapeContext.require, but the detail stays lazy: spec details call ``format_dim``,
        # which only knows ints and DimExpr, so rendering them for Z3 terms may fail.
        if cond is True:
            return
        if cond is False:
            raise ConstraintViolation(label, render_detail(detail, label), render_detail(help, None))
        self.obligation(label, cond, detail)

    def obligation(self, label: str, cond: Any, detail: Any) -> None:
        self.obligations.append(Obligation(label, cond, detail))

    def precondition(self) -> Any:
        if not self.obligations:
            return z3.BoolVal(True)
        return z3.And(*[o.cond for o in self.obligations])

    def dim_choice(self, label: str, fn: Callable[[], Any]) -> Any:
        return fn()


# ------------------------------------------------------------------------------------------------
# DimExpr -> Z3
# ------------------------------------------------------------------------------------------------


@dataclass
class SymbolTable:
    """Z3 constants for the symbols of a function (created on first use)."""

    vars: dict[str, Any] = field(default_factory=dict)

    def var(self, name: str) -> Any:
        v = self.vars.get(name)
        if v is None:
            v = self.vars[name] = z3.Int(name)
        return v

    def to_z3(self, d: Any, cache: dict | None = None) -> Any:
        """A dim (int or ``DimExpr``) as a Z3 term (ints stay ints)."""
        if _isint(d):
            return d
        if not isinstance(d, DimExpr):
            raise TypeError(f"not a dimension: {d!r}")
        if cache is not None:
            hit = cache.get(d)
            if hit is not None:
                return hit
        total: Any = 0
        for mono, coef in d.terms.items():
            term: Any = coef
            for atom, power in mono:
                a = self._atom(atom, cache)
                for _ in range(power):
                    term = term * a if not (_isint(term) and term == 1) else a
            total = term if (_isint(total) and total == 0) else total + term
        if cache is not None:
            cache[d] = total
        return total

    def _atom(self, atom: Atom, cache: dict | None) -> Any:
        if atom.kind == "sym":
            return self.var(atom.name)
        a, b = (self.to_z3(x, cache) for x in atom.args)
        if atom.kind == "floordiv":
            return zint(Z3_ARITH.floordiv(a, b))
        if atom.kind == "max":
            return zint(Z3_ARITH.max(a, b))
        return zint(Z3_ARITH.min(a, b))


def evaluate_term(term: Any, env: Mapping[Any, int]) -> Any:
    """Value of a Z3 term (or Python int/bool) under a full assignment ``{z3 var: int}``."""
    if isinstance(term, (bool, int)):
        return term
    pairs = [(k, z3.IntVal(v)) for k, v in env.items()]
    v = z3.simplify(z3.substitute(term, *pairs) if pairs else term)
    if z3.is_int_value(v):
        return v.as_long()
    if z3.is_true(v):
        return True
    if z3.is_false(v):
        return False
    raise ValueError(f"term does not evaluate to a constant: {v}")
