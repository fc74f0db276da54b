"""The audit's evidence about rules the program relies on: the VJP rules of its gradients and the
canonicalizer's steps that produced its Core IR.  Each is re-checked in this run by the checkers
MIND already has (``verify.autodiff_report``, ``verify.rewrites``); nothing here proves anything
itself.
"""

from __future__ import annotations

from typing import Any

#: Canonicalization steps that are not rules of the table, and why no proof is needed for them.
NON_RULE_STEPS = {
    "fold": "constant folding: the op is evaluated by the reference interpreter on constant operands "
            "(its result is the spec's semantics by definition), within the folding bounds",
    "cse": "common subexpression elimination: two applications of the same pure op to the same "
           "operands and attributes are merged (every Core IR op is a function of its operands)",
}


def gradients_section(vjp_rules: list[str]) -> dict[str, Any]:
    """The VJP rules the program's gradients use, each with every check of ``mind verify
    --autodiff`` that backs it, run now (timings left out: they vary between runs)."""
    if not vjp_rules:
        return {"rules": [], "checks": [], "note": "the program contains no gradient"}
    from mind.verify.autodiff_report import autodiff_table

    rows = autodiff_table(rules=set(vjp_rules))
    checks = [{"rule": r["rule"], "check": r["check"], "verdict": r["verdict"], "detail": r["detail"]} for r in rows]
    return {"rules": list(vjp_rules), "checks": checks}


def canonicalization_section(steps: dict[str, int], agrees: bool, source_format: str) -> dict[str, Any]:
    """The canonicalizer's steps with their counts; every rewrite rule used, proved now by
    ``mind verify --rewrites`` (every dtype, ranks up to the default bound)."""
    if source_format != "mind":
        return {"applied": False, "note": "the input is IR: it is audited as given, MIND does not canonicalize it",
                "steps": [], "rules": []}
    from mind.ir.rewrite_rules import BY_NAME

    rules = [BY_NAME[name] for name in steps if name in BY_NAME]
    proofs: list[dict[str, Any]] = []
    rank_bound = None
    if rules:
        from mind.verify.rewrites import prove_rules

        rep = prove_rules(rules)
        rank_bound = rep.rank_bound
        proofs = [v.to_json() for v in rep.verdicts]
    out_steps = [{"step": name, "count": n, "kind": "rule" if name in BY_NAME else "builtin",
                  "why": NON_RULE_STEPS.get(name, "")} for name, n in steps.items()]
    return {"applied": True, "observed_matches_frontend": agrees, "steps": out_steps, "rules": proofs,
            "rank_bound": rank_bound}
