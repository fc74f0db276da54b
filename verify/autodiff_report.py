"""The table behind ``mind verify --autodiff``: every VJP rule with each check and its verdict.

Checks: ``sympy`` (elementwise rules equal g · sympy.diff of the scalar formula), ``adjoint``
(⟨t, VJP(c)⟩ = ⟨JVP(t), c⟩ on hypothesis-drawn shapes/attributes), ``z3-shape`` (the cotangent's
shape equals the operand's for all symbolic dims; attribute formulas for all extents), ``fd``
(transform gradients vs central finite differences, per rule and on random compositions).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Collection

from mind.spec.columns import aligned_lines


def _timed(rule: str, check: str, fn: Callable[[], tuple[str, str]]) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        verdict, detail = fn()
    except Exception as exc:  # noqa: BLE001 - a crashing check is reported, not raised
        verdict, detail = "error", f"{type(exc).__name__}: {exc}"
    return {"rule": rule, "check": check, "verdict": verdict, "detail": detail,
            "time": round(time.perf_counter() - t0, 4)}


def autodiff_table(*, adjoint_examples: int = 25, random_compositions: int = 4,
                   checks: tuple[str, ...] = ("sympy", "adjoint", "z3-shape", "fd"),
                   rules: Collection[str] | None = None) -> list[dict[str, Any]]:
    """One row per (rule, check): keys rule, check, verdict, detail, time (seconds).  ``rules``
    (op names) keeps only those rules' rows (``mind audit``: the rules a program's gradients use)."""
    keep: Callable[[str], bool] = (lambda r: True) if rules is None else (lambda r: r.split("/")[0] in rules)
    rows: list[dict[str, Any]] = []
    if "sympy" in checks:
        from mind.verify.autodiff_sympy import ELEMENTWISE_RULES, prove_rule

        for r in filter(keep, ELEMENTWISE_RULES):
            rows.append(_timed(r, "sympy", lambda r=r: prove_rule(r)))
    if "adjoint" in checks:
        from mind.verify.autodiff_adjoint import LINEAR_RULES, run_rule

        for r in filter(keep, LINEAR_RULES):
            rows.append(_timed(r, "adjoint", lambda r=r: run_rule(r, adjoint_examples)))
    if "z3-shape" in checks:
        from mind.verify.autodiff_z3 import all_proofs

        for r, f in all_proofs():
            if keep(r):
                rows.append(_timed(r, "z3-shape", f))
    if "fd" in checks:
        from mind.verify.autodiff_fd import check_case, random_composition, rule_cases

        cases = [c for c in rule_cases() if keep(c.name)]
        if rules is None:
            cases += [random_composition(s) for s in range(random_compositions)]
        for case in cases:
            def run(case=case) -> tuple[str, str]:
                res = check_case(case)
                return ("passed" if res.ok else "failed",
                        f"max |err| {res.max_err:.2e} ≤ tol {res.max_tol:.2e}; domain: {case.domain}"
                        + (f"; {res.detail}" if res.detail else ""))
            rows.append(_timed(case.name, "fd", run))
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    headers = ("rule", "check", "verdict", "time", "detail")
    cells = [[str(r["rule"]), str(r["check"]), str(r["verdict"]), f"{r['time']:.2f}s",
              str(r.get("detail", ""))[:90]] for r in rows]
    out = aligned_lines([list(headers)] + cells)
    bad = [r for r in rows if r["verdict"] not in ("proved", "passed")]
    out.append("")
    out.append(f"{len(rows)} checks: {len(rows) - len(bad)} proved/passed, {len(bad)} other")
    return "\n".join(out)


def all_ok(rows: list[dict[str, Any]]) -> bool:
    return all(r["verdict"] in ("proved", "passed") for r in rows)


if __name__ == "__main__":
    import sys

    rows = autodiff_table()
    print(format_table(rows))
    sys.exit(0 if all_ok(rows) else 1)
