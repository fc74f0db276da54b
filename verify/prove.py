"""Discharging proof obligations with Z3: proved, refuted (minimized counterexample) or unknown.

Verdicts are reproducible: every query runs under a Z3 resource limit (``rlimit``, counted per
``check`` call) and a fixed random seed; the wall-clock timeout every solver call also carries
(``mind.ir.z3dims``) is a safety net far above what any spec obligation needs.  A refutation's
model is minimized by iterative tightening: while the solver finds a model whose sum of absolute
values of the named variables is smaller than the last one, keep it (each round bounded too).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import z3

from mind.ir.decide import SolverLimits
from mind.ir.z3dims import SEED, minimize, new_solver, timed_check

#: Bounds of each query about the spec: its obligations are fixed, so the rlimit decides (the
#: timeout is only the safety net of every solver call, see ``mind.ir.z3dims``).
DEFAULT_RLIMIT = 2_000_000
SPEC_TIMEOUT_S = 60.0


def spec_limits(rlimit: int = DEFAULT_RLIMIT) -> SolverLimits:
    return SolverLimits(rlimit, SPEC_TIMEOUT_S)


@dataclass
class Case:
    """One query: ``premises ⊢ goal``; ``vars`` are named in a counterexample.

    A case with ``check`` instead is decided by evaluation (sampled concrete agreement): ``check()``
    returns None when it holds, or a counterexample dict.
    """

    desc: str
    premises: Sequence[Any] = ()
    goal: Any = None
    vars: Sequence[Any] = ()
    check: Callable[[], dict | None] | None = None


@dataclass
class Outcome:
    status: str  # proved | refuted | unknown
    counterexample: dict[str, int] | None = None
    case: str | None = None
    reason: str | None = None


def _conjuncts(e: Any, out: list) -> list:
    if z3.is_and(e):
        for c in e.children():
            _conjuncts(c, out)
    else:
        out.append(e)
    return out


def syntactically_implied(premises: Sequence[Any], goal: Any) -> bool:
    """Every conjunct of ``goal`` is literally a conjunct of the premises (no solver needed)."""
    have = set()
    for p in premises:
        if not isinstance(p, bool):
            for c in _conjuncts(p, []):
                have.add(c.get_id())
    return all(z3.is_true(c) or c.get_id() in have for c in _conjuncts(goal, []))


class Prover:
    def __init__(self, limits: SolverLimits | None = None, smt2_dir: str | None = None):
        self.limits = limits or spec_limits()
        self.smt2_dir = smt2_dir
        self._n = 0
        self._solver: Any = None

    def run_case(self, case: Case, tag: str = "query") -> Outcome:
        if case.check is not None:
            cex = case.check()
            return Outcome("proved") if cex is None else Outcome("refuted", cex, case.desc)
        goal = case.goal
        if isinstance(goal, bool):
            goal = z3.BoolVal(goal)
        if z3.is_true(goal):
            return Outcome("proved")
        if goal.num_args() <= 8 and syntactically_implied(case.premises, goal):
            return Outcome("proved")
        query = z3.And(*[z3.BoolVal(p) if isinstance(p, bool) else p for p in case.premises], z3.Not(goal)) \
            if case.premises else z3.Not(goal)
        simple = z3.simplify(query)
        if z3.is_false(simple):
            return Outcome("proved")
        if self.smt2_dir:
            self._write_smt2(simple, tag, case.desc)
        s = self._shared()
        s.push()
        try:
            s.add(simple)
            r, reason = timed_check(s, self.limits)
            if r == z3.unsat:
                return Outcome("proved")
            if r == z3.sat:
                return Outcome("refuted", minimize(s, list(case.vars), s.model(), self.limits), case.desc)
        finally:
            s.pop()
        # the tactic pipeline gave up: try the default engine once before answering unknown
        s2 = new_solver(self.limits)
        s2.add(simple)
        r, reason2 = timed_check(s2, self.limits)
        if r == z3.unsat:
            return Outcome("proved")
        if r == z3.sat:
            return Outcome("refuted", minimize(s2, list(case.vars), s2.model(), self.limits), case.desc)
        return Outcome("unknown", None, case.desc, reason2 or reason)

    def _shared(self) -> Any:
        if self._solver is None:
            self._solver = new_solver(self.limits, tactic=True)
        return self._solver

    def _write_smt2(self, query: Any, tag: str, desc: str) -> None:
        from mind.driver_io import atomic_write

        self._n += 1
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", tag)[:80]
        path = os.path.join(self.smt2_dir, f"{self._n:04d}-{safe}.smt2")
        s = z3.Solver()
        s.add(query)
        rlimit = self.limits.rlimit
        text = (f"; {tag}: {desc}\n; unsat = proved.  rlimit {rlimit}, random_seed {SEED}\n"
                f"(set-option :rlimit {rlimit})\n(set-option :random-seed {SEED})\n" + s.to_smt2())
        atomic_write(path, lambda fh: fh.write(text), mode="w")


@dataclass
class Verdict:
    op: str
    name: str
    text: str
    status: str
    seconds: float
    cases: int
    case: str | None = None
    counterexample: dict[str, int] | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "obligation": self.name, "statement": self.text, "verdict": self.status,
                "seconds": round(self.seconds, 6), "cases": self.cases, "case": self.case,
                "counterexample": self.counterexample, "reason": self.reason}


def discharge(op: str, name: str, text: str, cases: Iterable[Case], prover: Prover) -> Verdict:
    """Prove every case; the first refutation (or unknown) decides the verdict."""
    t0 = time.perf_counter()
    n = 0
    unknown: Outcome | None = None
    for case in cases:
        n += 1
        out = prover.run_case(case, f"{op}.{name}")
        if out.status == "refuted":
            return Verdict(op, name, text, "refuted", time.perf_counter() - t0, n, out.case,
                           out.counterexample)
        if out.status == "unknown" and unknown is None:
            unknown = out
    dt = time.perf_counter() - t0
    if unknown is not None:
        return Verdict(op, name, text, "unknown", dt, n, unknown.case, None, unknown.reason)
    return Verdict(op, name, text, "proved", dt, n)


@dataclass
class SpecReport:
    verdicts: list[Verdict] = field(default_factory=list)
    seconds: float = 0.0
    rank_bound: int = 6

    def counts(self) -> dict[str, int]:
        out = {"proved": 0, "refuted": 0, "unknown": 0}
        for v in self.verdicts:
            out[v.status] += 1
        return out
