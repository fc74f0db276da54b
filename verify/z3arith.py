"""A shape context that turns every symbolic ``require`` into a recorded proof obligation, for the
proofs about the spec itself (``mind verify --spec``, the autodiff shape proofs).

The arithmetic on Z3 terms it runs rules with (``Z3Arith``) lives with the decision procedure, at
the IR layer (``mind.ir.z3dims``).  Z3 is imported here, so import this module lazily (never from
``import mind``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import z3

from mind.ir.z3dims import Z3_ARITH
from mind.spec.dims import Arith
from mind.spec.ops.base import ConstraintViolation, ShapeContext


def render_detail(detail: Any, label: str | None) -> str | None:
    if detail is None or isinstance(detail, str):
        return detail
    try:
        return str(detail())
    except Exception:  # a spec detail that cannot print Z3 terms
        return f"constraint {label} does not hold" if label else None


@dataclass
class Obligation:
    label: str
    cond: Any  # z3 BoolRef
    detail: Any  # str or a callable producing it (rendered on demand)

    @property
    def text(self) -> str:
        return render_detail(self.detail, self.label) or self.label


class Z3Context(ShapeContext):
    """Runs a shape rule on Z3 terms, recording each symbolic constraint instead of deciding it.

    A constraint that folds to ``False`` still raises ``ConstraintViolation`` (as in every
    interpretation); one that folds to ``True`` is dropped.
    """

    def __init__(self, arith: Arith | None = None):
        super().__init__(arith or Z3_ARITH)
        self.obligations: list[Obligation] = []

    def require(self, label: str, cond: Any, detail: Any, help: Any = None) -> None:
        # Like ShapeContext.require, but the detail stays lazy: spec details call ``format_dim``,
        # which only knows ints and DimExpr, so rendering them for Z3 terms may fail.
        if cond is True:
            return
        if cond is False:
            raise ConstraintViolation(label, render_detail(detail, label), render_detail(help, None))
        self.obligation(label, cond, detail)

    def obligation(self, label: str, cond: Any, detail: Any) -> None:
        self.obligations.append(Obligation(label, cond, detail))

    def precondition(self) -> Any:
        if not self.obligations:
            return z3.BoolVal(True)
        return z3.And(*[o.cond for o in self.obligations])

    def dim_choice(self, label: str, fn: Callable[[], Any]) -> Any:
        return fn()


def evaluate_term(term: Any, env: Mapping[Any, int]) -> Any:
    """Value of a Z3 term (or Python int/bool) under a full assignment ``{z3 var: int}``."""
    if isinstance(term, (bool, int)):
        return term
    pairs = [(k, z3.IntVal(v)) for k, v in env.items()]
    v = z3.simplify(z3.substitute(term, *pairs) if pairs else term)
    if z3.is_int_value(v):
        return v.as_long()
    if z3.is_true(v):
        return True
    if z3.is_false(v):
        return False
    raise ValueError(f"term does not evaluate to a constant: {v}")
