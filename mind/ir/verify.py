"""The structural IR verifier.

Checks single definition, def-before-use, operand counts, attribute presence and kinds, assumption
symbols, and re-runs every op's shape/dtype rule from the spec under the function's assumptions.
Every failure becomes a diagnostic naming its spec label (``matmul.C4``); all failures are reported.
"""

from __future__ import annotations

from typing import Any

from mind.diagnostics import Diagnostic, MindError
from mind.ir.core import Function, Module, Operation
from mind.spec.dims import DimExpr, SymArith, Unknown
from mind.spec.dtypes import DType
from mind.spec.ops import OPS, ConstraintUndecided, ConstraintViolation, OpDef, TensorType, infer_type


def verify_module(module: Module, sources: dict[str, str] | None = None) -> None:
    """Raise ``MindError`` with every problem found; return quietly if the module is valid."""
    diags = check_module(module)
    if diags:
        raise MindError(diags, sources or {})


def check_module(module: Module) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    seen: set[str] = set()
    for fn in module.functions:
        if fn.name in seen:
            diags.append(Diagnostic("E4002", f"function @{fn.name} is defined more than once", fn.span))
        seen.add(fn.name)
        diags.extend(check_function(fn))
    return diags


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


def check_function(fn: Function) -> list[Diagnostic]:
    diags = signature_problems(fn)
    arith = fn.arith()
    defined: set[int] = set()
    names: set[str] = set()
    for p in fn.params:
        if p.name in names:
            diags.append(Diagnostic("E4002", f"value %{p.name} is defined more than once", p.span))
        names.add(p.name)
        defined.add(id(p))
    for op in fn.ops:
        for v in op.operands:
            if id(v) not in defined:
                diags.append(Diagnostic("E4001", f"%{v.name} is used by `{op.op}` before it is defined",
                                        op.span, help="operations must appear after their operands"))
        if op.result.name in names:
            diags.append(Diagnostic("E4002", f"value %{op.result.name} is defined more than once", op.span))
        names.add(op.result.name)
        defined.add(id(op.result))
        diags.extend(check_operation(op, arith))
    for v in fn.results:
        if id(v) not in defined:
            diags.append(Diagnostic("E4003", f"returned value %{v.name} is not defined in @{fn.name}", fn.span))
    return diags


def check_operation(op: Operation, arith: SymArith) -> list[Diagnostic]:
    opdef = OPS.get(op.op)
    if opdef is None:
        return [Diagnostic("E4006", f"unknown op `{op.op}`", op.span)]
    if len(op.operands) != opdef.arity:
        return [Diagnostic("E4009", f"`{op.op}` takes {opdef.arity} operands, got {len(op.operands)}",
                           op.span, label=None)]
    problems = _attr_problems(opdef, op.attrs)
    if problems:
        return [Diagnostic("E4008", p, op.span) for p in problems]
    try:
        inferred = infer_type(opdef, [v.type for v in op.operands], op.attrs, arith)
    except ConstraintViolation as exc:
        c = opdef.constraint(exc.label)
        return [Diagnostic(c.code, exc.detail, op.span, label=f"{op.op}.{exc.label}", help=exc.help,
                           notes=(f"{op.op}.{exc.label}: {c.text}",))]
    except ConstraintUndecided as exc:
        c = opdef.constraint(exc.label)
        return [Diagnostic("E3011", f"cannot prove {exc.cond.text} from the declared assumptions",
                           op.span, label=f"{op.op}.{exc.label}",
                           help="add an assumption (`where ...`) or make the dimension concrete",
                           notes=(f"{op.op}.{exc.label}: {c.text}", exc.detail))]
    return _result_type_problems(op, inferred, arith)


def _result_type_problems(op: Operation, inferred: TensorType, arith: SymArith) -> list[Diagnostic]:
    declared = op.result.type
    ok = declared.dtype is inferred.dtype and declared.rank == inferred.rank
    if ok:
        for a, b in zip(declared.shape, inferred.shape):
            c = arith.eq(a, b)
            if c is not True:
                ok = False
                break
    if ok:
        return []
    return [Diagnostic("E4010", f"`{op.op}` declares result type {declared}, but its operands give {inferred}",
                       op.span, help=f"write `: {inferred}`")]


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


__all__ = ["verify_module", "check_module", "check_function", "check_operation", "signature_problems", "Unknown"]
