"""Canonicalization: constant folding, algebraic simplification, CSE and DCE, to a fixed point.

``canonicalize`` is what the frontend, the autodiff transform and the backends call; its output
is deterministic, verifies, and (with ``renumber=True``) names op results %0, %1, … in order.
"""

from __future__ import annotations

from mind.ir.core import Function, Module
from mind.compiler.passes.cse import common_subexpression_elimination
from mind.compiler.passes.fold import constant_folding
from mind.compiler.passes.rewrite import dead_code_elimination, renumber, rewrite
from mind.compiler.passes.simplify import algebraic_simplification

PIPELINE = (constant_folding, algebraic_simplification, common_subexpression_elimination,
            dead_code_elimination)
MAX_ROUNDS = 8


def canonicalize(fn: Function, *, rename: bool = True) -> Function:
    for _ in range(MAX_ROUNDS):
        before = len(fn.ops)
        signature = [(op.op, id(op.result)) for op in fn.ops]
        for p in PIPELINE:
            fn = p(fn)
        if len(fn.ops) == before and [(op.op, id(op.result)) for op in fn.ops] == signature:
            break
    return renumber(fn) if rename else fn


def canonicalize_module(module: Module, *, rename: bool = True) -> Module:
    return Module([canonicalize(f, rename=rename) for f in module.functions])


__all__ = ["canonicalize", "canonicalize_module", "constant_folding", "algebraic_simplification",
           "common_subexpression_elimination", "dead_code_elimination", "renumber", "rewrite"]
