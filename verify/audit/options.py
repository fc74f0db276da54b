"""The options of one audit, resolved once at the front door (``mind audit``) into one record."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from mind.ir.decide import DEFAULT_LIMITS, SolverLimits

__all__ = ["AuditOptions", "DIFFERENTIAL_SEED"]

#: The seed of the differential runs' random inputs (recorded in the bundle; ``--check`` reuses it).
DIFFERENTIAL_SEED = 20240601


@dataclass(frozen=True)
class AuditOptions:
    """``file``: the program; ``out``: the bundle folder; ``fn``: one function only; ``backends``:
    the compiled backends to audit; ``limits``: every solver call's bounds; ``timings``: also write
    the wall-clock times (``timings.json``, the one file that differs between runs);
    ``source_date_epoch``: the bundle's date (``SOURCE_DATE_EPOCH``; without it the bundle has none)."""

    file: str
    out: str
    fn: str | None = None
    backends: tuple[str, ...] = ()
    limits: SolverLimits = DEFAULT_LIMITS
    seed: int = DIFFERENTIAL_SEED
    timings: bool = False
    source_date_epoch: int | None = None

    def command(self) -> list[str]:
        """The command that makes this bundle again, without ``--out`` (the folder a bundle is in is
        not part of it: a copied bundle is the same bundle)."""
        argv = ["mind", "audit", self.file]
        if self.fn:
            argv += ["--fn", self.fn]
        if self.backends:
            argv += ["--backend", ",".join(self.backends)]
        if self.limits != DEFAULT_LIMITS:
            argv += ["--rlimit", str(self.limits.rlimit), "--timeout", f"{self.limits.timeout_s:g}"]
        if self.timings:
            argv.append("--timings")
        return argv

    def recorded(self) -> dict[str, Any]:
        return {"fn": self.fn, "backends": list(self.backends), "rlimit": self.limits.rlimit,
                "timeout_s": self.limits.timeout_s, "differential_seed": self.seed, "timings": self.timings,
                "source_date_epoch": self.source_date_epoch}

    def created(self) -> str | None:
        """The bundle's date: ``SOURCE_DATE_EPOCH`` in UTC (ISO 8601), or None when it is not set."""
        if self.source_date_epoch is None:
            return None
        when = datetime.datetime.fromtimestamp(self.source_date_epoch, datetime.timezone.utc)
        return when.isoformat().replace("+00:00", "Z")
