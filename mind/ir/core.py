"""Core IR data structures: modules of functions, each an SSA list of op applications.

Every op has exactly one result.  Types are ``TensorType`` (dtype + dims, where a dim is an int or a
symbolic ``DimExpr``).  A function declares assumptions about its symbols (``B >= 1``); they feed
the symbolic checks (``Function.arith``) and the Z3 verifier.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterator

from mind.diagnostics import Span
from mind.spec.dims import Dim, DimExpr, Facts, SymArith, format_dim
from mind.spec.ops import TensorType

__all__ = ["Value", "Operation", "Assumption", "Function", "Module", "TensorType"]


@dataclass(eq=False)
class Value:
    """An SSA value: a function parameter or the result of one operation (compared by identity)."""

    name: str
    type: TensorType
    span: Span | None = None

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


@dataclass(eq=False)
class Operation:
    op: str
    operands: tuple[Value, ...]
    attrs: dict[str, Any]
    result: Value
    span: Span | None = None


RELATIONS = (">=", "<=", "==", ">", "<")


@dataclass(frozen=True)
class Assumption:
    lhs: Dim
    rel: str
    rhs: Dim

    def __str__(self) -> str:
        return f"{format_dim(self.lhs)} {self.rel} {format_dim(self.rhs)}"

    def symbols(self) -> set[str]:
        out: set[str] = set()
        for d in (self.lhs, self.rhs):
            if isinstance(d, DimExpr):
                out |= d.symbols()
        return out


@dataclass(eq=False)
class Function:
    name: str
    params: list[Value]
    ops: list[Operation]
    results: list[Value]
    assumptions: list[Assumption] = field(default_factory=list)
    span: Span | None = None

    @property
    def result_types(self) -> list[TensorType]:
        return [v.type for v in self.results]

    def symbols(self) -> list[str]:
        """Symbols of the parameter types, in order of first appearance."""
        seen: dict[str, None] = {}
        for p in self.params:
            for d in p.type.shape:
                if isinstance(d, DimExpr):
                    for s in sorted(d.symbols()):
                        seen.setdefault(s, None)
        return list(seen)

    def facts(self) -> Facts:
        """Interval bounds implied by assumptions of the form ``symbol rel constant``."""
        facts = Facts.empty()
        for a in self.assumptions:
            lhs, rel, rhs = a.lhs, a.rel, a.rhs
            if isinstance(lhs, int) and isinstance(rhs, DimExpr):  # put the symbol on the left
                lhs, rhs = rhs, lhs
                rel = {">=": "<=", "<=": ">=", ">": "<", "<": ">", "==": "=="}[rel]
            if not (isinstance(lhs, DimExpr) and isinstance(rhs, int)):
                continue
            name = _single_symbol(lhs)
            if name is None:
                continue
            inf = float("inf")
            lo, hi = {">=": (rhs, inf), ">": (rhs + 1, inf), "<=": (-inf, rhs), "<": (-inf, rhs - 1),
                      "==": (rhs, rhs)}[rel]
            facts = facts.with_bound(name, lo, hi)
        return facts

    def arith(self) -> SymArith:
        return SymArith(self.facts())

    def values(self) -> Iterator[Value]:
        yield from self.params
        for op in self.ops:
            yield op.result


def _single_symbol(d: DimExpr) -> str | None:
    if len(d.terms) != 1:
        return None
    (mono, coef), = d.terms.items()
    if coef != 1 or len(mono) != 1 or mono[0][1] != 1 or mono[0][0].kind != "sym":
        return None
    return mono[0][0].name


@dataclass(eq=False)
class Module:
    functions: list[Function] = field(default_factory=list)

    def function(self, name: str) -> Function | None:
        for f in self.functions:
            if f.name == name:
                return f
        return None

    def text(self) -> str:
        from mind.ir.printer import print_module

        return print_module(self)

    def sha256(self) -> str:
        """Content hash of the canonical text: equal modules hash equally in every process."""
        return hashlib.sha256(self.text().encode("utf-8")).hexdigest()
