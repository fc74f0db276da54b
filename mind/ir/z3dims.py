"""Dimensions on Z3: the spec's ``Arith`` over Z3 integer terms, ``DimExpr`` and decider formulas as
Z3 terms, and bounded solver calls.

This is the Z3 half of the decision procedure (``mind.ir.decide``) and the base of ``mind.verify``'s
proofs about the spec.  Python ints stay Python ints (so rank-driven branches and constant folding
behave exactly as in the concrete interpretation); as soon as a Z3 term is involved the result is a
Z3 term, and conditions become Z3 ``BoolRef``.  Z3's integer ``/`` is Euclidean division, which
equals floor division only for a positive divisor; ``floordiv`` guards the negative case with an
``If`` so that the term denotes Python's ``//`` for every non-zero divisor (lemma ``arith/floordiv``
in ``verify.obligations``).

Every solver made here is bounded twice (``SolverLimits``): Z3's resource limit, which makes an
answer reproducible, and a wall-clock timeout as the safety net for the nonlinear procedures the
resource limit does not always count.  Z3 reports both as ``canceled``; the elapsed time tells
which one ended the call.

Z3 is imported here, so import this module lazily (never from ``import mind``).
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import z3

from mind.ir.solver_limits import DeciderStats, SolverLimits
from mind.spec.dims import Arith, Atom, DimExpr, Formula

SEED = 0
MINIMIZE_ROUNDS = 8


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
        return _connect(cs, False, z3.And)

    def or_(self, *cs: Any) -> Any:
        return _connect(cs, True, z3.Or)

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


def _connect(cs: Sequence[Any], absorbing: bool, join: Any) -> Any:
    """``and``/``or`` of Python bools and Z3 terms: ``absorbing`` (False for and, True for or)
    decides at once, the other bool drops out, Z3 terms are joined."""
    rest = []
    for c in cs:
        if c is absorbing:
            return absorbing
        if c is not (not absorbing):
            rest.append(c)
    if not rest:
        return not absorbing
    return rest[0] if len(rest) == 1 else join(*rest)


Z3_ARITH = Z3Arith()


# ------------------------------------------------------------------------------------------------
# DimExpr and formulas -> Z3
# ------------------------------------------------------------------------------------------------


class SymbolTable:
    """Z3 constants for the symbols of a function (created on first use)."""

    def __init__(self) -> None:
        self.vars: dict[str, Any] = {}

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

    def formula(self, f: Formula) -> Any:
        """A decider formula (``mind.spec.dims.Formula``) as a Z3 ``BoolRef``."""
        kind = f[0]
        if kind in ("eq", "le"):
            a, b = zint(self.to_z3(f[1])), zint(self.to_z3(f[2]))
            return a == b if kind == "eq" else a <= b
        parts = [self.formula(g) for g in f[1:]]
        if kind == "and":
            return z3.And(*parts)
        if kind == "or":
            return z3.Or(*parts)
        return z3.Not(parts[0])


# ------------------------------------------------------------------------------------------------
# Bounded solver calls
# ------------------------------------------------------------------------------------------------


def new_solver(limits: SolverLimits, tactic: bool = False, ctx: Any = None) -> Any:
    """A solver with the resource limit, the timeout and the seed set.  ``tactic``: first eliminate
    variables that the query defines by equations (``solve-eqs``), which closes the product
    identities of reshape-like rules that the default nonlinear engine may not.  ``ctx``: a Z3
    context of its own (default: Z3's main one)."""
    if tactic:
        s = z3.Then("simplify", "propagate-values", "solve-eqs", "smt", ctx=ctx).solver()
    else:
        s = z3.Solver(ctx=ctx)
    s.set("rlimit", limits.rlimit)
    s.set("timeout", max(1, int(limits.timeout_s * 1000)))
    s.set("random_seed", SEED)
    return s


def reason_text(solver: Any, limits: SolverLimits, seconds: float) -> str:
    """Which limit ended an ``unknown`` check.  Z3 says ``canceled`` for both; a call that ran
    (nearly) the whole timeout was ended by the clock."""
    r = solver.reason_unknown()
    if r in ("canceled", "timeout", "max. resource limit exceeded", "resource limit exceeded"):
        if r == "timeout" or seconds >= 0.9 * limits.timeout_s:
            return f"the solver's time limit ({limits.timeout_s:g} s) was reached"
        return f"the solver's resource limit (rlimit {limits.rlimit}) was reached"
    return f"the solver gave up ({r or 'unknown'})"


def timed_check(solver: Any, limits: SolverLimits) -> tuple[Any, str | None]:
    """``solver.check()`` and, when it is unknown, which limit ended it."""
    t0 = time.perf_counter()
    r = solver.check()
    if r == z3.unknown:
        return r, reason_text(solver, limits, time.perf_counter() - t0)
    return r, None


def model_values(model: Any, vs: Sequence[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in vs:
        val = model.eval(v, model_completion=True)
        if z3.is_int_value(val):
            out[str(v)] = val.as_long()
    return out


def minimize(solver: Any, vs: Sequence[Any], model: Any, limits: SolverLimits,
             rounds: int = MINIMIZE_ROUNDS) -> dict[str, int]:
    """Tighten ``Σ|v|`` below the current model's until unsat/unknown (``solver`` holds the query).
    All rounds together get one timeout's worth of time; each is also under the rlimit."""
    best = model_values(model, vs)
    if not vs:
        return best
    cost = z3.Sum([z3.If(v >= 0, v, -v) for v in vs])
    deadline = time.perf_counter() + limits.timeout_s
    for _ in range(rounds):
        bound = sum(abs(x) for x in best.values())
        left = deadline - time.perf_counter()
        if bound == 0 or left <= 0:
            break
        solver.set("timeout", max(1, int(left * 1000)))
        solver.push()
        solver.add(cost < bound)
        r = solver.check()
        if r == z3.sat:
            best = model_values(solver.model(), vs)
            solver.pop()
        else:
            solver.pop()
            break
    return best


def check(query: Sequence[Formula], names: Sequence[str], limits: SolverLimits, minimize_model: bool = True,
          stats: DeciderStats | None = None) -> tuple[str, dict[str, int] | None, str | None]:
    """Is the conjunction of ``query`` (with every symbol ≥ 0) satisfiable?  One fresh, bounded
    solver: ("unsat" | "sat" | "unknown", a model over ``names`` (minimized), the limit that
    ended an unknown check)."""
    table = SymbolTable()
    s = new_solver(limits)
    for n in names:
        s.add(table.var(n) >= 0)
    for f in query:
        s.add(table.formula(f))
    if stats is not None:
        stats.solver_calls += 1
    r, reason = timed_check(s, limits)
    if r == z3.unsat:
        return "unsat", None, None
    if r != z3.sat:
        return "unknown", None, reason
    vs = [table.var(n) for n in names]
    model = minimize(s, vs, s.model(), limits) if minimize_model else model_values(s.model(), vs)
    return "sat", model, None
