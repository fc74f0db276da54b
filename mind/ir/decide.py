"""The one decision procedure for shape constraints over symbolic dims.

Every place that checks a constraint under a function's premises asks a ``Decider``: the Core IR
verifier (``mind ir``, ``mind run``, ``mind.compile``), the frontend's shape rules and declared
types, and ``mind verify`` (which is the same verifier).  So one condition gets one verdict
everywhere.  The premises of a function are its ``where`` assumptions, every symbol ≥ 0 and every
parameter dim ≥ 0.

A condition reaches the decider only when the cheap path (``SymArith``: normal forms and interval
bounds) left it ``Unknown``.  Then, in order:

1. **Sampling on plain ints.**  A fixed, deterministic set of small assignments (the lower bounds
   the assumptions give, shifted and mixed; the same set on every run) is filtered by the premises.
   An allowed assignment where the condition is false is a counterexample; one where it is true a
   witness.  Both found: ``depends``, with no solver at all.
2. **Z3**, imported only now: ``premises ∧ ¬c`` unsatisfiable is ``holds``; a model is a
   counterexample (minimized, then re-checked on plain ints: one that does not reproduce is never
   reported as one); ``premises ∧ c`` unsatisfiable then means ``fails`` (for every allowed value).

Every solver call is a fresh solver bounded by ``SolverLimits``: Z3's resource limit (``rlimit``,
deterministic) and a wall-clock timeout as the safety net (Z3's nonlinear integer reasoning can run
forever in ways the rlimit does not count).  A call that hits either ends as ``unknown`` and says
which limit ended it.  Decisions are remembered per condition, so a dump that repeats one relation
costs one proof.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from mind.spec.dims import (DimExpr, Decision, Facts, Formula, Unknown, eval_formula, formula_symbols)
from mind.ir.solver_limits import DEFAULT_LIMITS, DeciderStats, SolverLimits

__all__ = ["SolverLimits", "DEFAULT_LIMITS", "DeciderStats", "Decider", "premise_formulas"]

_REL = {">=": lambda l, r: ("le", r, l), "<=": lambda l, r: ("le", l, r), "==": lambda l, r: ("eq", l, r),
        ">": lambda l, r: ("le", r + 1, l), "<": lambda l, r: ("le", l + 1, r)}

# Sampling: offsets tried above each symbol's lower bound, how many pseudo-random points, and the
# most formula evaluations one decision may spend on sampling.
_SHIFTS = (1, 2, 3, 7)
_EQUAL = (0, 1, 2, 3, 5)
_BUMPS = (1, 2, 4)
_RANDOM_POINTS = 24
_RANDOM_OFFSETS = (0, 1, 1, 2, 2, 3, 4, 5, 8, 13)
_MAX_EVALUATIONS = 512
_SEED = 0x4D494E44




def premise_formulas(params: Iterable[Any], assumptions: Iterable[Any]) -> list[Formula]:
    """The premises as formulas: every symbolic parameter dim ≥ 0, then each assumption."""
    out: list[Formula] = []
    for p in params:
        for d in p.type.shape:
            if isinstance(d, DimExpr):
                out.append(("le", 0, d))
    for a in assumptions:
        out.append(_REL[a.rel](a.lhs, a.rhs))
    return out


class Decider:
    """Decides conditions under the premises of one function (see the module docstring).

    Construction is cheap (nothing is computed until the first question), because every
    ``Function.arith()`` makes one.
    """

    def __init__(self, params: Iterable[Any], assumptions: Iterable[Any], facts: Facts,
                 limits: SolverLimits = DEFAULT_LIMITS, stats: DeciderStats | None = None):
        self._params = params
        self._assumptions = assumptions
        self.facts = facts
        self.limits = limits
        self.stats = stats if stats is not None else DeciderStats()
        self._premises: list[Formula] | None = None
        self._symbols: list[str] = []
        self._points: list[dict[str, int]] | None = None
        self._memo: dict[Formula, Decision] = {}
        self._satisfiable: Decision | None = None

    # premises ------------------------------------------------------------------------------------
    def premises(self) -> list[Formula]:
        if self._premises is None:
            self._premises = premise_formulas(self._params, self._assumptions)
            names: set[str] = set()
            for f in self._premises:
                names |= formula_symbols(f)
            self._symbols = sorted(names)
        return self._premises

    def _holds_on(self, formulas: list[Formula], env: Mapping[str, int]) -> bool:
        try:
            return all(eval_formula(f, env) for f in formulas)
        except (ZeroDivisionError, KeyError):
            return False

    def allowed(self, env: Mapping[str, int]) -> bool:
        """The premises hold for this assignment of plain ints (every symbol ≥ 0 included)."""
        return all(v >= 0 for v in env.values()) and self._holds_on(self.premises(), env)

    def satisfiable(self) -> Decision:
        """Can the premises hold at all?  ``holds`` with an allowed assignment, ``fails`` when
        they contradict each other (every check would hold vacuously), or ``unknown``."""
        if self._satisfiable is None:
            premises = self.premises()
            points = self._premise_points()
            if points or not premises:
                self._satisfiable = Decision("holds", points[0] if points else {})
            else:
                self._satisfiable = self._solve_premises()
        return self._satisfiable

    def example(self) -> dict[str, int] | None:
        """An allowed assignment, if there is one (to illustrate a constraint that always fails)."""
        return self.satisfiable().assignment

    # deciding --------------------------------------------------------------------------------------
    def __call__(self, cond: Unknown) -> Decision:
        f = cond.formula
        if f is None:
            return Decision("unknown", reason="the condition cannot be handed to the decider")
        hit = self._memo.get(f)
        if hit is None:
            self.stats.decisions += 1
            hit = self._memo[f] = self._decide(f)
        return hit

    def _decide(self, f: Formula) -> Decision:
        counter, witness = self._sample(f)
        if counter is not None and witness is not None:
            self.stats.sampled += 1
            return Decision("depends", counter)
        if counter is None:
            status, model, reason = self._solve(f, negate=True)
            if status == "unsat":
                self.stats.proved += 1
                return Decision("holds")
            if status == "unknown":
                return Decision("unknown", reason=reason)
            counter = model
        if witness is None:
            status, _model, _reason = self._solve(f, negate=False, minimize=False)
            if status == "unsat":
                return Decision("fails", counter)
        return Decision("depends", counter)

    # sampling on plain ints -----------------------------------------------------------------------
    def _premise_points(self) -> list[dict[str, int]]:
        if self._points is None:
            premises = self.premises()
            self._points = [p for p in _candidates(self._symbols, self.facts) if self._holds_on(premises, p)]
        return self._points

    def _sample(self, f: Formula) -> tuple[dict[str, int] | None, dict[str, int] | None]:
        """(counterexample, witness) among the sampled allowed assignments (either may be None)."""
        points = self._premise_points()  # first: it fixes the premises' symbols
        extra = sorted(formula_symbols(f) - set(self._symbols))
        ext_points = _candidates(extra, Facts.empty())[:8] if extra else [{}]
        best: tuple | None = None
        counter = witness = None
        budget = _MAX_EVALUATIONS
        for p in points:
            for e in ext_points:
                budget -= 1
                if budget < 0:
                    return counter, witness
                env = {**p, **e}
                try:
                    ok = eval_formula(f, env)
                except (ZeroDivisionError, KeyError):
                    continue
                if ok:
                    witness = witness or env
                    continue
                key = (sum(env.values()), tuple(env[n] for n in sorted(env)))
                if best is None or key < best:
                    best, counter = key, env
        return counter, witness

    # the solver -----------------------------------------------------------------------------------
    def _solve(self, f: Formula | None, negate: bool, minimize: bool = True) -> tuple[str, Any, str | None]:
        """``premises ∧ (¬)f`` by Z3: ("unsat" | "sat" | "unknown", model on plain ints, reason).
        A model that does not satisfy the query on plain ints is answered as unknown."""
        from mind.ir import z3dims

        goal = [] if f is None else [("not", f) if negate else f]
        query = self.premises() + goal
        names = sorted(set(self._symbols).union(*(formula_symbols(g) for g in goal)))
        status, model, reason = z3dims.check(query, names, self.limits, minimize, self.stats)
        if status == "sat":
            if not (self.allowed(model) and self._holds_on(goal, model)):
                return "unknown", None, "the solver's model did not reproduce on plain ints"
        return status, model, reason

    def _solve_premises(self) -> Decision:
        status, model, reason = self._solve(None, negate=False)
        if status == "unsat":
            return Decision("fails")
        if status == "sat":
            self._premise_points().append(model)  # sampling had found none: now it has one
            return Decision("holds", model)
        return Decision("unknown", reason=reason)


def _candidates(names: list[str], facts: Facts) -> list[dict[str, int]]:
    """The deterministic sample of small assignments to ``names`` (within the interval bounds)."""
    if not names:
        return [{}]
    lo: dict[str, int] = {}
    hi: dict[str, float] = {}
    for n in names:
        a, b = facts.bound(n)
        lo[n] = max(0, int(a)) if a != float("-inf") else 0
        hi[n] = b

    def clamp(n: str, v: int) -> int:
        return int(min(max(v, lo[n]), hi[n])) if hi[n] >= lo[n] else lo[n]

    points: list[dict[str, int]] = [{n: clamp(n, lo[n]) for n in names}]
    points += [{n: clamp(n, lo[n] + k) for n in names} for k in _SHIFTS]
    points += [{n: clamp(n, v) for n in names} for v in _EQUAL]
    for n in names:
        for k in _BUMPS:
            p = dict(points[0])
            p[n] = clamp(n, lo[n] + k)
            points.append(p)
    import random  # here: only symbolic functions get this far

    rng = random.Random(_SEED)
    points += [{n: clamp(n, lo[n] + rng.choice(_RANDOM_OFFSETS)) for n in names} for _ in range(_RANDOM_POINTS)]
    seen: set[tuple[int, ...]] = set()
    out: list[dict[str, int]] = []
    for p in points:
        key = tuple(p[n] for n in names)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
