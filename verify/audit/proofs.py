"""The program's proof obligations, each as SMT-LIB text that two solvers answer.

Every op of every function runs its spec shape rule (``OpDef.infer``, the single definition) in a
``Z3Context`` on its declared operand types, with every dimension *lifted* to an SMT integer: a
concrete extent ``784`` of operand 1, axis 0 becomes the constant ``a1.0`` with the premise
``a1.0 = 784``; a symbolic one is its polynomial over the function's symbols.  So each ``require``
of the rule becomes a formula over the program's actual sizes, and the obligation is the query

    premises ∧ lifted sizes ∧ ¬ condition        (unsat = the constraint holds for every allowed size)

where the premises are the function's (every symbol and parameter dim ≥ 0 and its ``where``
assumptions; ``mind.ir.decide.premise_formulas``).  Conditions that do not involve dims (dtypes,
ranks, axes, permutations) fold to a Python bool while the rule runs: those are obligations *decided
by evaluation*, listed with no query.  Besides the rules' constraints, each op's declared result type
must equal what the rule gives (kind ``result_type``), each declared function result type the value
it returns (``signature``), and the premises must be satisfiable (``premises``, expecting ``sat``:
contradictory premises would make every other obligation hold vacuously); their spec label is the
IR verifier's, ``ir.verify``.

The IR verifier (``mind.ir.verify``, the one checker behind every entry point, with the decision
procedure of ``mind.ir.decide``) decides the same constraints its own way (cheap path, sampling, Z3);
``audit.py`` compares its findings with the solvers' verdicts op by op, so a disagreement between
the decision procedure and the SMT queries is a finding too.

Queries are named by the SHA-256 of their text: ops with the same operand and result types in one
function have the same queries, which are written and solved once.  Building them is memoized the
same way, so a 10,000-op program of repeated layers costs little more than its distinct ops.

Z3 is imported here: import this module lazily.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterator

import z3

from mind.diagnostics import Span
from mind.ir.core import Function, Module, Operation
from mind.ir.decide import premise_formulas
from mind.ir.z3dims import SymbolTable
from mind.spec.dims import DimExpr
from mind.spec.ops import OPS, ConstraintViolation, TensorType
from mind.spec.record import Record
from mind.verify.z3arith import Z3Context

__all__ = ["Obligation", "program_obligations", "query_name", "KIND_TEXT", "IR_LABEL"]

#: The spec label of the obligations that are the IR verifier's rather than an op's constraint.
IR_LABEL = "ir.verify"

#: The IR-level obligations (kinds other than ``constraint``) and what they state.
KIND_TEXT = {
    "premises": "the function's premises (every symbol and parameter dim ≥ 0, its `where` assumptions) "
                "are satisfiable, so no obligation holds vacuously",
    "result_type": "an op's declared result type equals the type its shape rule gives, for every allowed size",
    "signature": "a function's declared result type equals the type of the value it returns, for every "
                 "allowed size",
}


class Obligation(Record):
    """One obligation: where it comes from, what it states, and how it is decided.

    ``method`` is ``smt`` (``query`` is the SMT-LIB text; ``expect`` the answer that proves it:
    ``unsat``, or ``sat`` for ``ir.premises``) or ``evaluated`` (``value`` is the Python bool the
    rule computed; no query)."""

    _fields = ("id", "function", "op_index", "op", "value_name", "kind", "label", "statement", "span",
               "method", "expect", "query", "value")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, id: str, function: str, op_index: int | None, op: str, value_name: str | None,
                 kind: str, label: str, statement: str, span: Span | None, method: str, expect: str | None,
                 query: str | None, value: bool | None) -> None:
        self.id, self.function, self.op_index, self.op, self.value_name = id, function, op_index, op, value_name
        self.kind, self.label, self.statement, self.span, self.method = kind, label, statement, span, method
        self.expect, self.query, self.value = expect, query, value


def query_name(text: str) -> str:
    """The bundle's file name of a query: its content's SHA-256 (so equal queries share one file)."""
    return f"smt-{hashlib.sha256(text.encode()).hexdigest()[:16]}.smt2"


class _Recorder(Z3Context):
    """A ``Z3Context`` that also keeps the constraints that folded to a Python bool, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[tuple[str, Any]] = []

    def require(self, label: str, cond: Any, detail: Any, help: Any = None) -> None:
        self.steps.append((label, cond))
        super().require(label, cond, detail, help)


class _FunctionQueries:
    """The premises of one function as SMT terms, and the queries of its ops built on them."""

    def __init__(self, fn: Function) -> None:
        table = SymbolTable()
        formulas = premise_formulas(fn.params, fn.assumptions)
        self.premises = [table.formula(f) for f in formulas]
        self.symbols = sorted(table.vars)
        self.premises = [table.var(s) >= 0 for s in self.symbols] + self.premises
        self.memo: dict[Any, list[tuple[str, str, str | None, str | None, bool | None]]] = {}

    def text(self, lifted: list[Any], extra: list[str], goal: Any) -> str:
        """The SMT-LIB query: declarations, premises, lifted sizes, the goal, ``check-sat``."""
        names = sorted(set(self.symbols) | set(extra))
        lines = ["; MIND audit obligation: the spec's constraint holds for every allowed size iff the expected",
                 "; answer (in audit.json) comes back.", "(set-logic ALL)"]
        lines += [f"(declare-const {z3.Int(n).sexpr()} Int)" for n in names]
        lines += [f"(assert {p.sexpr()})" for p in self.premises + lifted]
        if goal is not None:
            lines.append(f"(assert {goal.sexpr()})")
        lines.append("(check-sat)")
        return "\n".join(lines) + "\n"


def _lift(t: TensorType, prefix: str, table: SymbolTable, lifted: list[Any], names: list[str]) -> TensorType:
    dims = []
    for axis, d in enumerate(t.shape):
        if isinstance(d, DimExpr):
            dims.append(table.to_z3(d))
        else:
            name = f"{prefix}.{axis}"
            v = z3.Int(name)
            names.append(name)
            lifted.append(v == d)
            dims.append(v)
    return TensorType(t.dtype, tuple(dims))


def _attrs_key(attrs: dict[str, Any]) -> tuple:
    """A hashable summary of an op's attributes (a tensor attribute by dtype and shape: the shape
    rules read no more of it)."""
    out = []
    for k in sorted(attrs):
        v = attrs[k]
        if hasattr(v, "shape") and hasattr(v, "dtype"):
            v = ("tensor", str(v.dtype), tuple(v.shape))
        out.append((k, v))
    return tuple(out)


def _dim_term(d: Any, table: SymbolTable) -> Any:
    return table.to_z3(d) if isinstance(d, DimExpr) else d




def _type_goal(declared: TensorType, actual: TensorType, table: SymbolTable) -> Any:
    """``declared == actual`` (a Python bool when dtype or rank already differ, or no dim is symbolic)."""
    if declared.dtype is not actual.dtype or declared.rank != actual.rank:
        return False
    conds = []
    for a, b in zip(declared.shape, actual.shape):
        a, b = _dim_term(a, table), _dim_term(b, table)
        if isinstance(a, int) and isinstance(b, int):
            if a != b:
                return False
            continue
        conds.append(z3.IntVal(a) == b if isinstance(a, int) else a == b)
    return z3.And(*conds) if conds else True


def _steps(q: _FunctionQueries, op: Operation) -> list[tuple[str, str, str | None, str | None, bool | None]]:
    """(constraint label or "result_type", method, expect, query, value) of each obligation of
    ``op``, in the rule's order."""
    key = (op.op, tuple(v.type for v in op.operands), op.result.type, _attrs_key(op.attrs))
    hit = q.memo.get(key)
    if hit is not None:
        return hit
    table = SymbolTable()
    lifted: list[Any] = []
    names: list[str] = []
    types = [_lift(v.type, f"a{i}", table, lifted, names) for i, v in enumerate(op.operands)]
    opdef = OPS[op.op]
    attrs = dict(op.attrs)
    for a in opdef.attrs:
        if a.kind == "dims" and a.name in attrs:
            attrs[a.name] = tuple(_dim_term(d, table) for d in attrs[a.name])
    ctx = _Recorder()
    inferred = None
    try:
        inferred = opdef.infer(ctx, types, attrs)
    except ConstraintViolation:
        pass  # recorded as the last step (False); the rule cannot go on, as in the IR verifier
    out: list[tuple[str, str, str | None, str | None, bool | None]] = []
    extra = sorted(set(names) | set(table.vars))

    def add(label: str, cond: Any) -> None:
        if isinstance(cond, bool):
            out.append((label, "evaluated", None, None, cond))
        else:
            out.append((label, "smt", "unsat", q.text(lifted, extra, z3.Not(cond)), None))

    for label, cond in ctx.steps:
        add(label, cond)
    if inferred is not None:
        add("result_type", _type_goal(op.result.type, inferred, table))
    q.memo[key] = out
    return out


def _function_obligations(fn: Function) -> Iterator[Obligation]:
    q = _FunctionQueries(fn)
    if q.premises:
        yield Obligation(f"{fn.name}/premises", fn.name, None, "", None, "premises", IR_LABEL,
                         KIND_TEXT["premises"], fn.span, "smt", "sat", q.text([], [], None), None)
    for index, op in enumerate(fn.ops):
        opdef = OPS.get(op.op)
        if opdef is None:
            continue  # an unknown op: the IR verifier's finding (E4006) says so
        seen: dict[str, int] = {}
        for step, method, expect, query, value in _steps(q, op):
            k = seen[step] = seen.get(step, -1) + 1
            if step == "result_type":
                kind, label, statement = step, IR_LABEL, KIND_TEXT[step]
            else:
                kind, label, statement = "constraint", f"{op.op}.{step}", opdef.constraint(step).text
            oid = f"{fn.name}/%{op.result.name}/{label if kind == 'constraint' else kind}" + (f"#{k}" if k else "")
            yield Obligation(oid, fn.name, index, op.op, op.result.name, kind, label, statement,
                             op.span, method, expect, query, value)
    table = SymbolTable()
    extra: list[str] = []
    for i, ((declared, span), v) in enumerate(zip(fn.result_decls, fn.results)):
        goal = _type_goal(declared, v.type, table)
        extra = sorted(set(extra) | set(table.vars))
        oid = f"{fn.name}/result{i}/signature"
        text = KIND_TEXT["signature"]
        if isinstance(goal, bool):
            yield Obligation(oid, fn.name, None, "", v.name, "signature", IR_LABEL, text, span or fn.span,
                             "evaluated", None, None, goal)
        else:
            yield Obligation(oid, fn.name, None, "", v.name, "signature", IR_LABEL, text, span or fn.span,
                             "smt", "unsat", q.text([], extra, z3.Not(goal)), None)


def program_obligations(module: Module) -> list[Obligation]:
    """Every obligation of every function, in program order."""
    return [o for fn in module.functions for o in _function_obligations(fn)]


# ------------------------------------------------------------------------------------------------
# Verdicts: both solvers on every distinct query, and the decision procedure beside them
# ------------------------------------------------------------------------------------------------

#: How the two solvers' answers combine, for an obligation whose expected answer is ``expect``:
#: both give it (proved), both give the other (refuted), one each (a disagreement between the
#: solvers), one gives it and the other cannot say (proved by one solver only: unconfirmed).
def combine(expect: str, answers: dict[str, str]) -> str:
    other = "sat" if expect == "unsat" else "unsat"
    got = set(answers.values())
    if got == {expect}:
        return "proved"
    if expect in got and other in got:
        return "disagreement"
    if other in got:
        return "refuted"
    if expect in got:
        return "unconfirmed"
    return "unknown"


def solve_queries(queries: dict[str, tuple[str, str]], limits: Any) -> dict[str, dict[str, Any]]:
    """file name -> the record of one distinct query: its hash, expected answer, each solver's
    answer and the combined verdict.  ``queries``: file name -> (text, expect)."""
    from mind.verify.audit.solvers import check_text

    out = {}
    for name in sorted(queries):
        text, expect = queries[name]
        answers = check_text(text, limits)
        out[name] = {"file": name, "sha256": hashlib.sha256(text.encode()).hexdigest(), "expect": expect,
                     "solvers": {k: a.to_json() for k, a in answers.items()},
                     "verdict": combine(expect, {k: a.status for k, a in answers.items()})}
    return out


def _span_key(span: Span | None) -> tuple | None:
    return None if span is None else (span.file, span.line, span.col)


def decision_procedure_view(module: Module, findings: list[Any]) -> dict[tuple[str, int | None], list[Any]]:
    """The IR verifier's findings by (function, op index); findings that point at no op are the
    function's (index None)."""
    where: dict[tuple, tuple[str, int | None]] = {}
    for fn in module.functions:
        key = _span_key(fn.span)
        if key is not None:
            where.setdefault(key, (fn.name, None))
        for i, op in enumerate(fn.ops):
            key = _span_key(op.span)
            if key is not None:
                where[key] = (fn.name, i)
    out: dict[tuple[str, int | None], list[Any]] = {}
    first = module.functions[0].name
    for f in findings:
        at = where.get(_span_key(f.diag.span), (first, None))
        out.setdefault(at, []).append(f)
    return out
