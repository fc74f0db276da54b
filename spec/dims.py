"""Dimension arithmetic: the abstract algebra every shape rule is written over.

Each op's shape rule (``mind.spec.ops``) is written once against the ``Arith`` interface below.  The
same rule then runs on

* Python ints (concrete type checking, the reference interpreter),
* ``DimExpr`` symbolic dimensions (the frontend and IR verifier with dims like ``B``), through
  ``SymArith``, which decides conditions by normal forms and interval bounds taken from the declared
  assumptions and answers ``Unknown`` when a condition cannot be decided statically,
* Z3 integer terms (``mind.verify``), which turns every condition into a proof obligation.

``SymArith`` may carry a *decider* (``mind.ir.decide``): where a condition the cheap path leaves
``Unknown`` must be settled (a constraint's ``require``, an ``ite`` choice, a declared type), the
decider answers with a ``Decision`` (holds for every allowed value, fails for every one, depends on
the values, or unknown).  Each ``Unknown`` therefore carries its condition as a ``formula`` of dims.

Rules may branch in Python only on ranks and list lengths; every condition on a dimension or an
integer attribute goes through ``Arith`` so that all three interpretations agree.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Union

from mind.spec.record import FrozenRecord, Record

# --------------------------------------------------------------------------------------------
# Symbolic dimension expressions: polynomials over symbols and opaque atoms, in normal form.
# --------------------------------------------------------------------------------------------


# The small value classes below (Atom, Facts, Unknown) are plain classes with the constructors,
# fields, ``repr``, equality and hashing that ``@dataclass`` gave them (Atom and Unknown frozen:
# immutable and hashable by value, derived from their fields by ``mind.spec.record``); plain, so
# that importing the spec builds no dataclass (see ``mind.spec.record`` for the import-time reason).


class Atom(FrozenRecord):
    """A symbol (``kind == "sym"``) or an operation that does not distribute over polynomials."""

    __slots__ = ("kind", "name", "args")
    __match_args__ = ("kind", "name", "args")

    def __init__(self, kind: str, name: str = "", args: tuple["Dim", ...] = ()) -> None:
        object.__setattr__(self, "kind", kind)  # "sym" | "floordiv" | "max" | "min"
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "args", args)

    @property
    def key(self) -> str:
        return self.name if self.kind == "sym" else f"{self.kind}({', '.join(map(format_dim, self.args))})"

    def __str__(self) -> str:
        if self.kind == "sym":
            return self.name
        return f"{self.kind}({format_dim(self.args[0])}, {format_dim(self.args[1])})"


Monomial = tuple[tuple[Atom, int], ...]  # sorted by atom key; each atom with its power


class DimExpr:
    """A non-constant polynomial with integer coefficients; constants are always plain ``int``."""

    __slots__ = ("terms", "_hash")

    def __init__(self, terms: Mapping[Monomial, int]):
        self.terms: dict[Monomial, int] = dict(terms)
        self._hash = hash(tuple(sorted(((_mono_key(m), c) for m, c in self.terms.items()))))

    # construction ---------------------------------------------------------------------------
    @staticmethod
    def symbol(name: str) -> "DimExpr":
        return DimExpr({((Atom("sym", name), 1),): 1})

    @staticmethod
    def atom(atom: Atom) -> "DimExpr":
        return DimExpr({((atom, 1),): 1})

    # arithmetic -----------------------------------------------------------------------------
    def __add__(self, other: "Dim") -> "Dim":
        return _add(_poly(self), _poly(other))

    __radd__ = __add__

    def __sub__(self, other: "Dim") -> "Dim":
        return _add(_poly(self), _scale(_poly(other), -1))

    def __rsub__(self, other: "Dim") -> "Dim":
        return _add(_poly(other), _scale(_poly(self), -1))

    def __neg__(self) -> "Dim":
        return _norm(_scale(_poly(self), -1))

    def __mul__(self, other: "Dim") -> "Dim":
        return _mul(_poly(self), _poly(other))

    __rmul__ = __mul__

    def __eq__(self, other: object) -> bool:  # structural equality of normal forms
        if isinstance(other, DimExpr):
            return self.terms == other.terms
        return False

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"DimExpr({format_dim(self)!r})"

    def __str__(self) -> str:
        return format_dim(self)

    def symbols(self) -> set[str]:
        out: set[str] = set()
        for mono in self.terms:
            for atom, _ in mono:
                out |= _atom_symbols(atom)
        return out


Dim = Union[int, DimExpr]
Poly = dict  # Monomial -> int, the working form of arithmetic


def _mono_key(m: Monomial) -> tuple:
    return tuple((a.key, p) for a, p in m)


def _atom_symbols(atom: Atom) -> set[str]:
    if atom.kind == "sym":
        return {atom.name}
    out: set[str] = set()
    for a in atom.args:
        if isinstance(a, DimExpr):
            out |= a.symbols()
    return out


def _poly(x: Dim) -> Poly:
    if isinstance(x, DimExpr):
        return x.terms
    if isinstance(x, bool) or not isinstance(x, int):
        raise TypeError(f"not a dimension: {x!r}")
    return {(): x} if x else {}


def _norm(p: Poly) -> Dim:
    p = {m: c for m, c in p.items() if c}
    if not p:
        return 0
    if len(p) == 1 and () in p:
        return p[()]
    return DimExpr(p)


def _add(a: Poly, b: Poly) -> Dim:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + c
    return _norm(out)


def _scale(a: Poly, k: int) -> Poly:
    return {m: c * k for m, c in a.items()}


def _mono_mul(a: Monomial, b: Monomial) -> Monomial:
    powers: dict[Atom, int] = {}
    order: dict[Atom, str] = {}
    for atom, p in a + b:
        powers[atom] = powers.get(atom, 0) + p
        order[atom] = atom.key
    return tuple(sorted(powers.items(), key=lambda ap: order[ap[0]]))


def _mul(a: Poly, b: Poly) -> Dim:
    out: dict[Monomial, int] = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = _mono_mul(ma, mb)
            out[m] = out.get(m, 0) + ca * cb
    return _norm(out)


def sym(name: str) -> DimExpr:
    return DimExpr.symbol(name)


def format_dim(d: Dim) -> str:
    """Canonical text of a dimension: terms by descending degree then name, constant last."""
    if isinstance(d, int) or not isinstance(d, DimExpr):
        return str(d)  # ints, and Z3 terms when a rule runs in the verifier
    terms = sorted(d.terms.items(), key=lambda mc: (-sum(p for _, p in mc[0]), _mono_key(mc[0])))
    parts: list[str] = []
    for mono, coef in terms:
        if not mono:
            body, mag = str(abs(coef)), None
        else:
            factors = []
            for atom, p in mono:
                factors.extend([str(atom)] * p)
            body = "*".join(factors)
            mag = abs(coef)
            if mag != 1:
                body = f"{mag}*{body}"
        sign = "-" if coef < 0 else "+"
        if not parts:
            parts.append(("-" if sign == "-" else "") + body)
        else:
            parts.append(f" {sign} {body}")
    return "".join(parts)


def substitute(d: Dim, env: Mapping[str, Dim]) -> Dim:
    """Replace symbols by dims (ints or expressions) and re-normalise."""
    if isinstance(d, int):
        return d
    total: Dim = 0
    for mono, coef in d.terms.items():
        term: Dim = coef
        for atom, p in mono:
            val = _subst_atom(atom, env)
            for _ in range(p):
                term = _mul(_poly(term), _poly(val))
        total = _add(_poly(total), _poly(term))
    return total


def _subst_atom(atom: Atom, env: Mapping[str, Dim]) -> Dim:
    if atom.kind == "sym":
        return env.get(atom.name, DimExpr.atom(atom))
    args = [substitute(a, env) for a in atom.args]
    return _apply_atom(atom.kind, args[0], args[1])


def _apply_atom(kind: str, a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        if kind == "floordiv":
            return a // b
        return max(a, b) if kind == "max" else min(a, b)
    return DimExpr.atom(Atom(kind, "", (a, b)))


def evaluate(d: Dim, env: Mapping[str, int]) -> int:
    """Concrete value of ``d`` under a full assignment of its symbols (``KeyError`` naming the
    unbound ones otherwise; ``ZeroDivisionError`` for a ``floordiv`` by 0)."""
    if isinstance(d, int):
        return d
    missing = d.symbols() - env.keys()
    if missing:
        raise KeyError(f"unbound symbols in {format_dim(d)}: {sorted(missing)}")
    return _value(d, env)


def _value(d: Dim, env: Mapping[str, int]) -> int:
    if isinstance(d, int):
        return d
    total = 0
    for mono, coef in d.terms.items():
        term = coef
        for atom, p in mono:
            term *= _atom_value(atom, env) ** p
        total += term
    return total


def _atom_value(atom: Atom, env: Mapping[str, int]) -> int:
    if atom.kind == "sym":
        return env[atom.name]
    a, b = (_value(x, env) for x in atom.args)
    if atom.kind == "floordiv":
        return a // b
    return max(a, b) if atom.kind == "max" else min(a, b)


# --------------------------------------------------------------------------------------------
# Facts: what the declared assumptions say about each symbol, as an interval.
# --------------------------------------------------------------------------------------------

INF = math.inf


class Facts(Record):
    """Per-symbol bounds.  Dimensions are never negative, so every symbol starts at [0, inf]."""

    _fields = ("bounds",)
    __match_args__ = ("bounds",)
    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __init__(self, bounds: dict[str, tuple[float, float]]) -> None:
        self.bounds = bounds

    @staticmethod
    def empty() -> "Facts":
        return Facts({})

    def bound(self, name: str) -> tuple[float, float]:
        return self.bounds.get(name, (0, INF))

    def with_bound(self, name: str, lo: float, hi: float) -> "Facts":
        old_lo, old_hi = self.bound(name)
        b = dict(self.bounds)
        b[name] = (max(old_lo, lo), min(old_hi, hi))
        return Facts(b)

    def interval(self, d: Dim) -> tuple[float, float]:
        if isinstance(d, int):
            return (d, d)
        lo_sum, hi_sum = 0.0, 0.0
        for mono, coef in d.terms.items():
            lo, hi = 1.0, 1.0
            for atom, p in mono:
                alo, ahi = self._atom_interval(atom)
                for _ in range(p):
                    lo, hi = _imul((lo, hi), (alo, ahi))
            lo, hi = _imul((lo, hi), (coef, coef))
            lo_sum, hi_sum = lo_sum + lo, hi_sum + hi
        return lo_sum, hi_sum

    def _atom_interval(self, atom: Atom) -> tuple[float, float]:
        if atom.kind == "sym":
            return self.bound(atom.name)
        a, b = (self.interval(x) for x in atom.args)
        if atom.kind == "max":
            return max(a[0], b[0]), max(a[1], b[1])
        if atom.kind == "min":
            return min(a[0], b[0]), min(a[1], b[1])
        # floordiv by a positive divisor
        if b[0] <= 0:
            return -INF, INF
        cands = [_fdiv(x, y) for x in a for y in b]
        return min(cands), max(cands)


def _fdiv(x: float, y: float) -> float:
    if math.isinf(x) or math.isinf(y):
        if math.isinf(y) and not math.isinf(x):
            return 0 if x >= 0 else -1
        return x if y > 0 else -x
    return math.floor(x / y)


def _imul(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    prods = []
    for x in a:
        for y in b:
            if (x == 0 and math.isinf(y)) or (y == 0 and math.isinf(x)):
                prods.append(0.0)
            else:
                prods.append(x * y)
    return min(prods), max(prods)


# --------------------------------------------------------------------------------------------
# Three-valued conditions for symbolic checking.
# --------------------------------------------------------------------------------------------


#: A condition as data, for a decider: ``("eq", a, b)``, ``("le", a, b)`` (dims ``a``, ``b``),
#: ``("and", f, ...)``, ``("or", f, ...)``, ``("not", f)``.
Formula = tuple


class Unknown(FrozenRecord):
    """A condition that the declared assumptions neither prove nor refute (by the cheap path)."""

    __slots__ = ("text", "diff", "formula")
    __match_args__ = ("text", "diff", "formula")

    def __init__(self, text: str, diff: Dim | None = None, formula: Formula | None = None) -> None:
        object.__setattr__(self, "text", text)
        # For an undecided equality ``lhs == rhs`` the difference, used to solve for a symbol.
        object.__setattr__(self, "diff", diff)
        # The condition itself (``Formula``), so that a decider can settle it; None: not decidable.
        object.__setattr__(self, "formula", formula)

    def __bool__(self) -> bool:
        raise TypeError(f"condition {self.text!r} is undecided; use Arith to combine it")

    def __str__(self) -> str:
        return self.text


Cond = Union[bool, Unknown, Any]  # Any: a Z3 BoolRef in the verifier


class Undecidable(Exception):
    """Raised by ``SymArith.ite`` when a choice depends on an undecided condition."""

    def __init__(self, cond: Unknown, decision: "Decision | None" = None):
        super().__init__(cond.text)
        self.cond = cond
        self.decision = decision


class Decision(FrozenRecord):
    """A decider's answer about a condition under a function's premises (its assumptions, every
    symbol ≥ 0, every parameter dim ≥ 0).

    ``status``: ``holds`` (for every allowed value), ``fails`` (for every allowed value;
    ``assignment`` is one of them), ``depends`` (``assignment`` is an allowed assignment where it
    fails: a counterexample) or ``unknown`` (``reason`` says why: no decider, or which solver limit
    ended the search).  Every assignment has been checked on plain ints.
    """

    __slots__ = ("status", "assignment", "reason")

    def __init__(self, status: str, assignment: Mapping[str, int] | None = None,
                 reason: str | None = None) -> None:
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "assignment", None if assignment is None else dict(assignment))
        object.__setattr__(self, "reason", reason)

    __hash__ = None  # type: ignore[assignment]  # holds a dict


#: What a ``SymArith`` without a decider answers about an ``Unknown``.
NOT_DECIDED = Decision("unknown", reason="not decided by normal forms and interval bounds")


_CONNECTIVES: dict[str, Any] = {
    "eq": lambda f, env: evaluate(f[1], env) == evaluate(f[2], env),
    "le": lambda f, env: evaluate(f[1], env) <= evaluate(f[2], env),
    "and": lambda f, env: all(eval_formula(g, env) for g in f[1:]),
    "or": lambda f, env: any(eval_formula(g, env) for g in f[1:]),
    "not": lambda f, env: not eval_formula(f[1], env),
}


def eval_formula(f: Formula, env: Mapping[str, int]) -> bool:
    """The truth of ``f`` under a full assignment of its symbols (plain ints)."""
    return _CONNECTIVES[f[0]](f, env)


def formula_symbols(f: Formula) -> set[str]:
    if f[0] in ("eq", "le"):
        return {s for d in f[1:] if isinstance(d, DimExpr) for s in d.symbols()}
    out: set[str] = set()
    for g in f[1:]:
        out |= formula_symbols(g)
    return out


class Arith:
    """The interface shape rules are written against (see module docstring).

    ``floordiv``/``ceildiv`` take a divisor that is positive wherever the result is used.
    """

    def eq(self, a: Any, b: Any) -> Cond: ...
    def ne(self, a: Any, b: Any) -> Cond: ...
    def le(self, a: Any, b: Any) -> Cond: ...
    def lt(self, a: Any, b: Any) -> Cond: ...
    def ge(self, a: Any, b: Any) -> Cond: return self.le(b, a)
    def gt(self, a: Any, b: Any) -> Cond: return self.lt(b, a)
    def and_(self, *cs: Cond) -> Cond: ...
    def or_(self, *cs: Cond) -> Cond: ...
    def not_(self, c: Cond) -> Cond: ...
    def ite(self, c: Cond, a: Any, b: Any) -> Any: ...
    def floordiv(self, a: Any, b: Any) -> Any: ...
    def max(self, a: Any, b: Any) -> Any: ...
    def min(self, a: Any, b: Any) -> Any: ...

    def ceildiv(self, a: Any, b: Any) -> Any:
        return self.floordiv(a + b - 1, b)

    def decide(self, c: Cond) -> Decision:
        """Settle a condition this arithmetic left open (only ``SymArith`` leaves any)."""
        return NOT_DECIDED

    def prod(self, xs: Iterable[Any]) -> Any:
        out: Any = 1
        for x in xs:
            out = out * x
        return out


class SymArith(Arith):
    """Arithmetic on ints and ``DimExpr``; conditions are True, False or ``Unknown``."""

    def __init__(self, facts: Facts | None = None, decider: Any = None):
        self.facts = facts or Facts.empty()
        # ``decider(cond: Unknown) -> Decision`` (``mind.ir.decide``), or None: the cheap path only.
        self.decider = decider

    def decide(self, c: Cond) -> Decision:
        if c is True:
            return Decision("holds")
        if c is False:
            return Decision("fails")
        if self.decider is None or not isinstance(c, Unknown) or c.formula is None:
            return NOT_DECIDED
        return self.decider(c)

    def truth(self, c: Cond) -> Cond:
        """``c`` settled by the decider where it can: True (holds for every allowed value), False
        (fails for every one), else ``c`` itself."""
        if not isinstance(c, Unknown):
            return c
        status = self.decide(c).status
        return True if status == "holds" else False if status == "fails" else c

    # comparisons ------------------------------------------------------------------------------
    def eq(self, a: Dim, b: Dim) -> Cond:
        if type(a) is int and type(b) is int:
            return a == b
        d = a - b
        if isinstance(d, int):
            return d == 0
        lo, hi = self.facts.interval(d)
        if lo > 0 or hi < 0:
            return False
        if lo == hi == 0:
            return True
        return Unknown(f"{format_dim(a)} == {format_dim(b)}", d, ("eq", a, b))

    def ne(self, a: Dim, b: Dim) -> Cond:
        return self.not_(self.eq(a, b))

    def le(self, a: Dim, b: Dim) -> Cond:
        if type(a) is int and type(b) is int:
            return a <= b
        d = b - a
        if isinstance(d, int):
            return d >= 0
        lo, hi = self.facts.interval(d)
        if lo >= 0:
            return True
        if hi < 0:
            return False
        return Unknown(f"{format_dim(a)} <= {format_dim(b)}", None, ("le", a, b))

    def lt(self, a: Dim, b: Dim) -> Cond:
        return self.le(a + 1, b)

    # logic --------------------------------------------------------------------------------------
    def and_(self, *cs: Cond) -> Cond:
        unknown = [c for c in cs if isinstance(c, Unknown)]
        if any(c is False for c in cs):
            return False
        if not unknown:
            return True
        return unknown[0] if len(unknown) == 1 else _combine("and", unknown)

    def or_(self, *cs: Cond) -> Cond:
        unknown = [c for c in cs if isinstance(c, Unknown)]
        if any(c is True for c in cs):
            return True
        if not unknown:
            return False
        return unknown[0] if len(unknown) == 1 else _combine("or", unknown)

    def not_(self, c: Cond) -> Cond:
        if isinstance(c, Unknown):
            return Unknown(f"not ({c.text})", None, None if c.formula is None else ("not", c.formula))
        return not c

    def ite(self, c: Cond, a: Dim, b: Dim) -> Dim:
        if not isinstance(c, Unknown):
            return a if c else b
        if _same(a, b):
            return a
        # ``ite(s == v, a, b)`` equals ``b`` when ``b`` takes the value ``a`` at ``s = v``.
        solved = _solve_single(c.diff) if c.diff is not None else None
        if solved is not None:
            name, value = solved
            if _same(substitute(a, {name: value}), substitute(b, {name: value})):
                return b
        if self.decider is None:
            raise Undecidable(c)
        decision = self.decide(c)
        if decision.status in ("holds", "fails"):
            return a if decision.status == "holds" else b
        if self.truth(self.eq(a, b)) is True:  # both branches are equal wherever it matters
            return b
        raise Undecidable(c, decision)

    # arithmetic ---------------------------------------------------------------------------------
    def floordiv(self, a: Dim, b: Dim) -> Dim:
        if type(a) is int and type(b) is int:
            return a // b
        if isinstance(b, int) and b == 1:
            return a
        if isinstance(b, int) and b > 0 and isinstance(a, DimExpr) and all(c % b == 0 for c in a.terms.values()):
            return _norm({m: c // b for m, c in a.terms.items()})
        return _apply_atom("floordiv", a, b)

    def max(self, a: Dim, b: Dim) -> Dim:
        if type(a) is int and type(b) is int:
            return a if a >= b else b
        if self.le(b, a) is True:
            return a
        if self.le(a, b) is True:
            return b
        return _apply_atom("max", *sorted((a, b), key=format_dim))

    def min(self, a: Dim, b: Dim) -> Dim:
        if type(a) is int and type(b) is int:
            return a if a <= b else b
        if self.le(a, b) is True:
            return a
        if self.le(b, a) is True:
            return b
        return _apply_atom("min", *sorted((a, b), key=format_dim))


def _combine(kind: str, unknown: list[Unknown]) -> Unknown:
    text = f" {kind} ".join(f"({u})" for u in unknown)
    if any(u.formula is None for u in unknown):
        return Unknown(text)
    return Unknown(text, None, (kind, *(u.formula for u in unknown)))


def _same(a: Dim, b: Dim) -> bool:
    return (a == b) if type(a) is type(b) else False


def _solve_single(d: Dim) -> tuple[str, Dim] | None:
    """If ``d == 0`` pins one symbol as ``s = value`` (``d = ±s + c``), return (s, value)."""
    if not isinstance(d, DimExpr):
        return None
    linear = [(m, c) for m, c in d.terms.items() if m]
    if len(linear) != 1:
        return None
    mono, coef = linear[0]
    if len(mono) != 1 or mono[0][1] != 1 or mono[0][0].kind != "sym" or coef not in (1, -1):
        return None
    const = d.terms.get((), 0)
    return mono[0][0].name, -const * coef


INT_ARITH = SymArith()
