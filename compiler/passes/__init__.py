"""Canonicalization: constant folding, exact algebraic simplification, CSE and DCE.

Every rule looks only at an op and the producers of its operands, which a forward walk has already
rewritten, so one walk that applies fold → simplify → CSE to each op (repeating on an op while a
rule changes it) reaches the fixed point; DCE and renumbering follow.  The output is deterministic,
verifies, and (with ``rename=True``) names op results %0, %1, … in program order.
"""

from __future__ import annotations

from mind.ir.core import Function, Module, Operation, Value
from mind.compiler.passes.cse import common_subexpression_elimination, cse_rule
from mind.compiler.passes.fold import constant_folding, fold_rule
from mind.compiler.passes.rewrite import RewriteContext, dead_code_elimination, renumber, rewrite
from mind.compiler.passes.simplify import algebraic_simplification, simplify_rule

MAX_STEPS_PER_OP = 8


def combined_rule():
    cse = cse_rule()

    def rule(op: Operation, operands: tuple[Value, ...], ctx: RewriteContext) -> Value | Operation | None:
        current, changed = op, False
        for _ in range(MAX_STEPS_PER_OP):
            out = fold_rule(current, current.operands, ctx) or simplify_rule(current, current.operands, ctx)
            if out is None:
                break
            if isinstance(out, Value):
                return out
            current, changed = out, True
        prior = cse(current, current.operands, ctx)
        if prior is not None:
            return prior
        return current if changed else None

    return rule


def canonicalize(fn: Function, *, rename: bool = True) -> Function:
    fn = dead_code_elimination(rewrite(fn, combined_rule()))
    return renumber(fn) if rename else fn


def canonicalize_module(module: Module, *, rename: bool = True) -> Module:
    return Module([canonicalize(f, rename=rename) for f in module.functions])


__all__ = ["canonicalize", "canonicalize_module", "constant_folding", "algebraic_simplification",
           "common_subexpression_elimination", "dead_code_elimination", "renumber", "rewrite"]
