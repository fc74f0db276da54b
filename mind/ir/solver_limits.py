"""The bounds and counters of the decision procedure's solver calls: a leaf module, so that both the
decider (``mind.ir.decide``) and its Z3 half (``mind.ir.z3dims``) use them without importing each
other."""

from __future__ import annotations

from mind.spec.record import FrozenRecord

__all__ = ["SolverLimits", "DEFAULT_LIMITS", "DeciderStats"]


class SolverLimits(FrozenRecord):
    """Bounds of one solver call: Z3's ``rlimit`` (deterministic) and a wall-clock timeout."""

    __slots__ = ("rlimit", "timeout_s")

    def __init__(self, rlimit: int, timeout_s: float) -> None:
        object.__setattr__(self, "rlimit", rlimit)
        object.__setattr__(self, "timeout_s", timeout_s)


#: The limits ``mind ir``, ``mind run`` and ``mind verify`` use unless told otherwise
#: (``mind verify --rlimit N --timeout S``).
DEFAULT_LIMITS = SolverLimits(rlimit=500_000, timeout_s=5.0)


class DeciderStats:
    """Counters a report can show: conditions settled by sampling, solver calls, proofs."""

    __slots__ = ("decisions", "sampled", "solver_calls", "proved")

    def __init__(self) -> None:
        self.decisions = self.sampled = self.solver_calls = self.proved = 0
