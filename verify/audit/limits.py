"""Assumptions and limits of an audit, stated plainly: the trusted base, what is proved and what
is only tested, and the known limitations.  One table, printed in every bundle (``audit.json``,
``audit.html``) and in ``docs/audit.md``."""

from __future__ import annotations

from typing import Any

__all__ = ["ASSUMPTIONS"]

ASSUMPTIONS: dict[str, Any] = {
    "trusted_base": [
        "CPython and the standard library that run MIND",
        "NumPy: the reference interpreter computes every op's semantics with it",
        "Z3 and cvc5: an obligation is proved when both answer `unsat` (`sat` for premises); a bug common "
        "to both solvers would go unnoticed",
        "MIND's own translation of each obligation into SMT-LIB (verify/audit/proofs.py) and the spec's "
        "shape rules it runs (spec/ops), which the spec's own proofs (`mind verify --spec`) check separately",
        "sympy (the symbolic proofs of the elementwise VJP rules)",
        "MLIR, LLVM and llvmlite, the linker and the OpenMP runtime (compiled code is tested, not proved)",
        "the CPU, its floating-point unit and the operating system",
    ],
    "proved": [
        "every shape and dtype obligation of the audited program, for every size its symbols may take under "
        "its assumptions (both solvers, from the SMT-LIB files in the bundle)",
        "the rewrite rules its canonicalization used: for every dtype, on tensors of every rank up to the "
        "stated bound (`mind verify --rewrites`)",
        "the elementwise VJP rules (sympy) and the cotangent shapes of every VJP rule (Z3)",
    ],
    "tested": [
        "the values the reference interpreter computes: by the conformance cases that cover each label",
        "the linear VJP rules (adjoint identity on sampled shapes) and every VJP rule (finite differences)",
        "compiled code: a rebuild compared byte for byte, and a differential run against the reference on "
        "seeded random and edge-value inputs, each op within its accuracy bound",
    ],
    "limitations": [
        "The rewrite rules are proved for ranks up to a bound, not for every rank.",
        "Finite differences, adjoint tests, conformance cases and differential runs are samples: they find "
        "errors, they do not exclude them.",
        "Total-semantics sites are decided statically only where an operand is a constant of the program; "
        "elsewhere the outcome depends on the inputs and is listed as a note.",
        "For MIND source, an obligation points at the expression its op comes from (a gradient's ops at "
        "the op they differentiate); constants that canonicalization made, and checks of a whole "
        "function, point at the function.",
        "The VJP rules listed under Gradients are those of every gradient in the source file, also when "
        "`--fn` selects one function.",
        "The repository's own test suite is not part of an installed MIND and is not re-run by an audit.",
        "The bundle is not signed: `mind audit --check` detects any change to a file against the manifest "
        "and any manifest that does not describe the folder, but a bundle replaced as a whole must be caught "
        "by a signature over manifest.json (for example an in-toto/DSSE signer).",
        "Each solver call is bounded (rlimit, timeout); a query that reaches a bound is `unknown`, a finding.",
    ],
}
