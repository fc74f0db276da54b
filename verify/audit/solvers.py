"""Two independent SMT solvers answering the same SMT-LIB text: Z3 and cvc5.

An obligation of the audit is a file of SMT-LIB 2.6 text (``proofs.py`` writes it); this module is
the only place that hands such text to a solver.  Both solvers read the *text*, not an object built
in this process, so ``mind audit --check`` re-runs exactly what the bundle holds and an auditor can
re-run a file with either solver's own command-line tool.  Every call is bounded: Z3 by its
deterministic resource limit (``rlimit``) and a wall-clock timeout, cvc5 by its per-check resource
limit (``rlimit-per``) and time limit (``tlimit-per``); both with a fixed random seed.  The two
solvers' resource units differ, so the same number bounds different amounts of work.

cvc5 is imported here only (never from ``import mind``): ``import cvc5`` costs ~50 ms.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from mind.ir.solver_limits import SolverLimits
from mind.spec.record import FrozenRecord

__all__ = ["SolverAnswer", "SOLVERS", "SEED", "solver_versions", "check_text"]

SEED = 0


class SolverAnswer(FrozenRecord):
    """One solver's answer to one query: ``sat`` / ``unsat`` / ``unknown``, why it is unknown,
    and (for ``sat`` from Z3) the model's integer values by name."""

    __slots__ = ("status", "reason", "model")

    def __init__(self, status: str, reason: str | None = None, model: Mapping[str, int] | None = None) -> None:
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "model", None if model is None else dict(sorted(model.items())))

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "model": self.model}


def _z3(text: str, limits: SolverLimits) -> SolverAnswer:
    import z3

    from mind.ir.z3dims import new_solver, timed_check

    try:
        assertions = z3.parse_smt2_string(text)
    except z3.Z3Exception as exc:
        return SolverAnswer("unknown", f"Z3 could not read the query: {exc}")
    s = new_solver(limits)
    s.add(assertions)
    r, reason = timed_check(s, limits)
    if r == z3.unsat:
        return SolverAnswer("unsat")
    if r == z3.sat:
        m = s.model()
        values = {d.name(): m[d].as_long() for d in m.decls() if z3.is_int_value(m[d])}
        return SolverAnswer("sat", model=values)
    return SolverAnswer("unknown", reason)


def _cvc5(text: str, limits: SolverLimits) -> SolverAnswer:
    import cvc5

    solver = cvc5.Solver()
    solver.setOption("seed", str(SEED))
    solver.setOption("rlimit-per", str(limits.rlimit))
    solver.setOption("tlimit-per", str(max(1, int(limits.timeout_s * 1000))))
    symbols = cvc5.SymbolManager(solver.getTermManager())
    parser = cvc5.InputParser(solver, symbols)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "query.smt2")
    answer = ""
    try:
        while True:
            cmd = parser.nextCommand()
            if cmd.isNull():
                break
            out = cmd.invoke(solver, symbols).strip()
            if out:
                answer = out
    except RuntimeError as exc:  # cvc5 reports parse errors and failed commands this way
        return SolverAnswer("unknown", f"cvc5 could not read the query: {exc}")
    if answer in ("sat", "unsat"):
        return SolverAnswer(answer)
    if answer.startswith("(error"):
        return SolverAnswer("unknown", f"cvc5: {answer}")
    return SolverAnswer("unknown", f"cvc5 answered {answer or 'nothing'} (a resource or time limit)")


#: The solvers every obligation goes to, in order: name -> check(text, limits).
SOLVERS: dict[str, Callable[[str, SolverLimits], SolverAnswer]] = {"z3": _z3, "cvc5": _cvc5}


def check_text(text: str, limits: SolverLimits) -> dict[str, SolverAnswer]:
    """Every solver's answer to the SMT-LIB ``text``."""
    return {name: check(text, limits) for name, check in SOLVERS.items()}


def solver_versions() -> dict[str, str]:
    """The exact version of each solver as it reports it."""
    import z3
    from importlib.metadata import version

    return {"z3": z3.get_version_string(), "cvc5": version("cvc5")}
