"""The IR verifier: the one checker behind ``mind ir``, ``mind run``, ``mind.compile`` and
``mind verify``.

Checks single definition, def-before-use, operand counts, attribute presence and kinds, assumption
symbols, that the premises can hold at all, and re-runs every op's shape/dtype rule from the spec
under the function's premises (its assumptions, every symbol ≥ 0, every parameter dim ≥ 0).  The
arithmetic is a parameter: ``Function.arith()`` is the cheap symbolic path with the decider of
``mind.ir.decide`` for what it leaves open, so every entry point gives one condition one verdict.

Verdicts per constraint: it holds for every allowed size (nothing reported); it fails for every
allowed size (the constraint's code, with an allowed assignment as example); it fails for some
(``E3011``, with a counterexample); or the solver hit a limit (``E3011``, naming the limit).  A
declared result type that differs for some allowed size is ``E4010`` with a counterexample.  Every
assignment shown has been re-checked by substituting it and re-running the spec's rule on plain
ints; one that does not reproduce is never shown.  Every failure names its spec label
(``matmul.C4``); all failures are reported.
"""

from __future__ import annotations

from typing import Any, Mapping

from mind.diagnostics import Diagnostic, MindError
from mind.ir.core import Function, Module, Operation
from mind.ir.decide import DEFAULT_LIMITS, DeciderStats, SolverLimits
from mind.spec.dims import INT_ARITH, Decision, DimExpr, SymArith, Unknown, evaluate
from mind.spec.dtypes import DType
from mind.spec.ops import OPS, ConstraintUndecided, ConstraintViolation, OpDef, TensorType, infer_type
from mind.spec.record import Record

_DECIDE_HELP = "add an assumption (`where ...`) or make the dimension concrete"


class Finding(Record):
    """A diagnostic and, when it has one, the assignment of the symbols it was shown with (a
    counterexample, re-checked on plain ints)."""

    _fields = ("diag", "counterexample")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, diag: Diagnostic, counterexample: Mapping[str, int] | None = None) -> None:
        self.diag = diag
        self.counterexample = None if counterexample is None else dict(counterexample)

    def to_json(self) -> dict[str, Any]:
        d = self.diag.to_json()
        d["counterexample"] = self.counterexample
        return d


class CheckStats:
    """What a verification run did: functions and ops checked, ops settled without the solver, and
    the decider's own counters."""

    __slots__ = ("functions", "ops", "decided_cheaply", "decider")

    def __init__(self) -> None:
        self.functions = self.ops = self.decided_cheaply = 0
        self.decider = DeciderStats()


def verify_module(module: Module, sources: dict[str, str] | None = None,
                  limits: SolverLimits = DEFAULT_LIMITS) -> None:
    """Raise ``MindError`` with every problem found; return quietly if the module is valid."""
    diags = check_module(module, limits)
    if diags:
        raise MindError(diags, sources or {})


def check_module(module: Module, limits: SolverLimits = DEFAULT_LIMITS) -> list[Diagnostic]:
    return [f.diag for f in module_findings(module, limits)]


def module_findings(module: Module, limits: SolverLimits = DEFAULT_LIMITS,
                    stats: CheckStats | None = None) -> list[Finding]:
    out: list[Finding] = []
    seen: set[str] = set()
    stats = stats or CheckStats()
    for fn in module.functions:
        if fn.name in seen:
            out.append(Finding(Diagnostic("E4002", f"function @{fn.name} is defined more than once", fn.span)))
        seen.add(fn.name)
        out.extend(function_findings(fn, fn.arith(limits, stats.decider), stats))
    return out


def signature_problems(fn: Function) -> list[Diagnostic]:
    """Parameter dims are non-negative and every assumption names only the parameters' symbols."""
    diags: list[Diagnostic] = []
    param_symbols: set[str] = set()
    for p in fn.params:
        for d in p.type.shape:
            if isinstance(d, DimExpr):
                param_symbols |= d.symbols()
            elif d < 0:
                diags.append(Diagnostic("E3006", f"parameter %{p.name} has a negative dimension", p.span))
    for a in fn.assumptions:
        unknown = a.symbols() - param_symbols
        if unknown:
            diags.append(Diagnostic("E4011", f"assumption `{a}` names {', '.join(sorted(unknown))}, "
                                             f"which no parameter type uses", fn.span))
    return diags


def check_function(fn: Function, arith: SymArith | None = None) -> list[Diagnostic]:
    return [f.diag for f in function_findings(fn, arith)]


def function_findings(fn: Function, arith: SymArith | None = None,
                      stats: CheckStats | None = None) -> list[Finding]:
    arith = arith if arith is not None else fn.arith()
    stats = stats or CheckStats()
    stats.functions += 1
    out = [Finding(d) for d in signature_problems(fn)]
    premises = _premise_problem(fn, arith)
    if premises is not None:
        out.append(premises)
        return out  # every check would hold vacuously, or could not be trusted
    defined: set[int] = set()
    names: set[str] = set()
    for p in fn.params:
        if p.name in names:
            out.append(Finding(Diagnostic("E4002", f"value %{p.name} is defined more than once", p.span)))
        names.add(p.name)
        defined.add(id(p))
    solver = arith.decider.stats if arith.decider is not None else None
    for op in fn.ops:
        stats.ops += 1
        ok = True
        for v in op.operands:
            if id(v) not in defined:
                ok = False
                out.append(Finding(Diagnostic("E4001", f"%{v.name} is used by `{op.op}` before it is defined",
                                              op.span, help="operations must appear after their operands")))
        if op.result.name in names:
            out.append(Finding(Diagnostic("E4002", f"value %{op.result.name} is defined more than once", op.span)))
        names.add(op.result.name)
        defined.add(id(op.result))
        if ok:
            calls = solver.solver_calls if solver is not None else 0
            out.extend(operation_findings(op, arith))
            if solver is None or solver.solver_calls == calls:
                stats.decided_cheaply += 1
    for v in fn.results:
        if id(v) not in defined:
            out.append(Finding(Diagnostic("E4003", f"returned value %{v.name} is not defined in @{fn.name}", fn.span)))
    for (declared, span), v in zip(fn.result_decls, fn.results):
        out.extend(_type_findings(declared, v.type, arith, fn, None, span,
                                  f"@{fn.name} declares result type {declared}, but returns %{v.name} of type {v.type}"))
    return out


def _premise_problem(fn: Function, arith: SymArith) -> Finding | None:
    """Premises that no sizes satisfy make every check hold vacuously: that is a finding, not a
    licence.  So is not knowing (a solver limit)."""
    decider = arith.decider
    if decider is None or not decider.premises():
        return None
    sat = decider.satisfiable()
    if sat.status == "holds":
        return None
    if sat.status == "fails":
        if fn.assumptions:
            return Finding(Diagnostic(
                "E4011", f"the assumptions of @{fn.name} contradict each other or the parameter dims (no sizes "
                         f"satisfy them with every dim ≥ 0), so every check would hold vacuously", fn.span,
                help="remove or correct the contradictory assumptions"))
        return Finding(Diagnostic(
            "E4004", f"the parameter dims of @{fn.name} cannot all be ≥ 0 for any sizes, so every check "
                     f"would hold vacuously", fn.span, help="correct the parameter types"))
    return Finding(Diagnostic("E3011", f"cannot decide whether any sizes satisfy the assumptions and "
                                       f"parameter dims of @{fn.name} ({sat.reason})", fn.span,
                              help="simplify the assumptions or the parameter dims"))


def check_operation(op: Operation, arith: SymArith) -> list[Diagnostic]:
    return [f.diag for f in operation_findings(op, arith)]


def operation_findings(op: Operation, arith: SymArith) -> list[Finding]:
    opdef = OPS.get(op.op)
    if opdef is None:
        return [Finding(Diagnostic("E4006", f"unknown op `{op.op}`", op.span))]
    if len(op.operands) != opdef.arity:
        return [Finding(Diagnostic("E4009", f"`{op.op}` takes {opdef.arity} operands, got {len(op.operands)}",
                                   op.span))]
    problems = _attr_problems(opdef, op.attrs)
    if problems:
        return [Finding(Diagnostic("E4008", p, op.span)) for p in problems]
    try:
        inferred = infer_type(opdef, [v.type for v in op.operands], op.attrs, arith)
    except ConstraintViolation as exc:
        return [_violation(op, opdef, exc, arith)]
    except ConstraintUndecided as exc:
        return [_undecided(op, opdef, exc, arith)]
    return _type_findings(op.result.type, inferred, arith, None, op, op.span,
                          f"`{op.op}` declares result type {op.result.type}, but its operands give {inferred}")


def _violation(op: Operation, opdef: OpDef, exc: ConstraintViolation, arith: SymArith) -> Finding:
    """A constraint that fails for every allowed size; shown with one allowed assignment."""
    c = opdef.constraint(exc.label)
    label = f"{op.op}.{exc.label}"
    notes = [f"{label}: {c.text}"]
    example = exc.example
    if example is None and arith.decider is not None and _op_symbols(op):
        example = arith.decider.example()
    if example is not None and not (_allowed(arith, example) and _reproduces(op, example, exc.label)):
        example = None
    msg = exc.detail
    if example:
        assign = _assign(example)
        msg = f"{exc.detail}; {label} fails when {assign}"
        notes.append(f"fails for every assignment allowed by the assumptions, e.g. {assign}")
    return Finding(Diagnostic(c.code, msg, op.span, label=label, help=exc.help, notes=tuple(notes)),
                   example or None)


def _undecided(op: Operation, opdef: OpDef, exc: ConstraintUndecided, arith: SymArith) -> Finding:
    """A constraint the premises do not imply: a counterexample where it fails, or the limit that
    ended the search."""
    c = opdef.constraint(exc.label)
    label = f"{op.op}.{exc.label}"
    notes = [f"{label}: {c.text}", exc.detail]
    decision = _checked(exc.decision, arith, lambda env: _reproduces(op, env, exc.label))
    msg = f"cannot prove {exc.cond.text} from the declared assumptions"
    cex = decision.assignment if decision.status == "depends" else None
    if cex is not None:
        assign = _assign(cex)
        msg = f"{msg}; {label} fails when {assign}"
        notes.append(f"counterexample (satisfies the declared assumptions): {assign}")
    elif decision.reason:
        msg = f"{msg} ({decision.reason})"
    return Finding(Diagnostic("E3011", msg, op.span, label=label, help=_DECIDE_HELP, notes=tuple(notes)), cex)


def _type_findings(declared: TensorType, inferred: TensorType, arith: SymArith, fn: Function | None,
                   op: Operation | None, span: Any, message: str) -> list[Finding]:
    """``declared`` equals ``inferred`` for every allowed size, or an E4010 (with a counterexample
    where one exists) / E3011 (the limit that ended the search)."""
    help = f"write `: {inferred}`"
    if declared.dtype is not inferred.dtype or declared.rank != inferred.rank:
        return [Finding(Diagnostic("E4010", message, span, help=help))]
    conds = [arith.eq(a, b) for a, b in zip(declared.shape, inferred.shape)]
    cond = arith.and_(*conds) if conds else True
    if cond is True:
        return []
    if op is not None:
        reproduces = lambda env: _reproduces(op, env, None)  # noqa: E731
    else:
        reproduces = lambda env: _differs(declared, inferred, env)  # noqa: E731
    if cond is False:
        decision = Decision("fails", arith.decider.example() if arith.decider is not None else None)
    else:
        decision = arith.decide(cond)
    decision = _checked(decision, arith, reproduces)
    if decision.status == "holds":
        return []
    if decision.status == "unknown":
        what = f"`{op.op}` gives" if op is not None else f"@{fn.name if fn else '?'} returns"
        return [Finding(Diagnostic("E3011", f"cannot prove that {what} the declared result type {declared} "
                                            f"({decision.reason})", span, help=_DECIDE_HELP))]
    cex = decision.assignment or None
    notes: tuple[str, ...] = ()
    if cex:
        assign = _assign(cex)
        message = f"{message}; they differ when {assign}"
        notes = ((f"fails for every assignment allowed by the assumptions, e.g. {assign}"
                  if decision.status == "fails" else f"counterexample (satisfies the declared assumptions): {assign}"),)
    return [Finding(Diagnostic("E4010", message, span, help=help, notes=notes), cex)]


def _allowed(arith: SymArith, env: Mapping[str, int]) -> bool:
    return arith.decider is None or arith.decider.allowed(env)


def _checked(decision: Decision, arith: SymArith, reproduces: Any) -> Decision:
    """The decision, with its assignment dropped unless the premises hold for it and the failure
    reproduces on plain ints: a ``depends`` whose counterexample does not becomes ``unknown``."""
    env = decision.assignment
    if env is None or decision.status not in ("depends", "fails"):
        return decision
    if _allowed(arith, env) and reproduces(env):
        return decision
    if decision.status == "fails":
        return Decision("fails")
    return Decision("unknown", reason="the counterexample found did not reproduce on plain ints")


# -- concrete re-checks -----------------------------------------------------------------------------


def _op_symbols(op: Operation) -> set[str]:
    syms: set[str] = set()
    for v in (*op.operands, op.result):
        for d in v.type.shape:
            if isinstance(d, DimExpr):
                syms |= d.symbols()
    for val in op.attrs.values():
        if isinstance(val, tuple):
            for x in val:
                if isinstance(x, DimExpr):
                    syms |= x.symbols()
    return syms


def _full(env: Mapping[str, int], symbols: set[str]) -> dict[str, int]:
    """``env`` with every other symbol at 0: symbols the premises do not mention are free (≥ 0)."""
    return {**{s: 0 for s in symbols}, **env}


def _concrete(t: TensorType, env: Mapping[str, int]) -> TensorType:
    return TensorType(t.dtype, tuple(evaluate(d, env) for d in t.shape))


def _reproduces(op: Operation, env: Mapping[str, int], label: str | None) -> bool:
    """Substitute ``env`` and re-run the spec's rule on plain ints: does constraint ``label`` fail
    (or, for ``label`` None, does the declared result type differ from the inferred one)?"""
    opdef = OPS[op.op]
    full = _full(env, _op_symbols(op))
    try:
        types = [_concrete(v.type, full) for v in op.operands]
        attrs = {a.name: (tuple(evaluate(x, full) for x in op.attrs[a.name]) if a.kind == "dims"
                          else op.attrs[a.name]) for a in opdef.attrs}
        declared = _concrete(op.result.type, full)
        inferred = infer_type(opdef, types, attrs, INT_ARITH)
    except ConstraintViolation as exc:
        return exc.label == label
    except (ConstraintUndecided, ZeroDivisionError, KeyError, ValueError, OverflowError):
        return False
    return label is None and inferred != declared


def _differs(declared: TensorType, actual: TensorType, env: Mapping[str, int]) -> bool:
    syms = {s for t in (declared, actual) for d in t.shape if isinstance(d, DimExpr) for s in d.symbols()}
    full = _full(env, syms)
    try:
        return _concrete(declared, full) != _concrete(actual, full)
    except (ZeroDivisionError, KeyError):
        return False


def _assign(env: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(env.items()))


_KIND_CHECK = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "dtype": lambda v: isinstance(v, DType),
    "enum": lambda v: isinstance(v, str),
    "ints": lambda v: isinstance(v, tuple) and all(isinstance(x, int) and not isinstance(x, bool) for x in v),
    "dims": lambda v: isinstance(v, tuple) and all(
        (isinstance(x, int) and not isinstance(x, bool)) or isinstance(x, DimExpr) for x in v),
    "pairs": lambda v: isinstance(v, tuple) and all(
        isinstance(p, tuple) and len(p) == 2 and all(isinstance(x, int) for x in p) for p in v),
    "tensor": lambda v: hasattr(v, "dtype") and hasattr(v, "shape"),
}


def _attr_problems(opdef: OpDef, attrs: dict[str, Any]) -> list[str]:
    out = []
    expected = {a.name: a for a in opdef.attrs}
    for name in attrs:
        if name not in expected:
            out.append(f"`{opdef.name}` has no attribute `{name}`")
    for name, a in expected.items():
        if name not in attrs:
            out.append(f"`{opdef.name}` is missing attribute `{name}` ({a.doc})")
        elif not _KIND_CHECK[a.kind](attrs[name]):
            out.append(f"attribute `{name}` of `{opdef.name}` must be of kind {a.kind}")
        elif a.kind == "enum" and attrs[name] not in a.choices:
            out.append(f"`{attrs[name]}` is not a valid {name}; choose one of {', '.join(a.choices)}")
    return out


__all__ = ["verify_module", "check_module", "module_findings", "check_function", "function_findings",
           "check_operation", "operation_findings", "signature_problems", "Finding", "CheckStats", "Unknown"]
