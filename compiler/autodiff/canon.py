"""Minimal canonicalization of gradient functions: common-subexpression elimination and dead-code
elimination (all Core IR ops are pure), then deterministic renaming of the transform's values.

Used when ``mind.compiler.passes.canonicalize`` is not available; see ``canonicalize``.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

from mind.ir.core import Function, Operation, Value
from mind.spec.dims import DimExpr, format_dim
from mind.spec.ops import OPS


def _attr_key(kind: str, value: Any) -> Any:
    if kind == "tensor":
        import numpy as np

        arr = np.ascontiguousarray(value)
        return ("tensor", arr.dtype.str, arr.shape, hashlib.sha256(arr.tobytes()).hexdigest())
    if kind == "dims":
        return tuple(format_dim(d) for d in value)
    if kind == "dtype":
        return value.value
    if isinstance(value, DimExpr):
        return format_dim(value)
    return value


def _op_key(op: Operation, rename: dict[int, Value]) -> tuple:
    opdef = OPS[op.op]
    attrs = tuple((a.name, _attr_key(a.kind, op.attrs[a.name])) for a in opdef.attrs if a.name in op.attrs)
    return (op.op, tuple(id(rename.get(id(v), v)) for v in op.operands), attrs)


def cse(fn: Function) -> Function:
    """Merge operations with the same op, operands and attributes (the first one stays)."""
    seen: dict[tuple, Value] = {}
    rename: dict[int, Value] = {}
    ops: list[Operation] = []
    for op in fn.ops:
        key = _op_key(op, rename)
        if key in seen:
            rename[id(op.result)] = seen[key]
            continue
        operands = tuple(rename.get(id(v), v) for v in op.operands)
        new = op if operands == op.operands else Operation(op.op, operands, op.attrs, op.result, op.span)
        seen[key] = new.result
        ops.append(new)
    results = [rename.get(id(v), v) for v in fn.results]
    return Function(fn.name, list(fn.params), ops, results, list(fn.assumptions), fn.span)


def dce(fn: Function) -> Function:
    """Drop operations whose results no returned value depends on."""
    live: set[int] = {id(v) for v in fn.results}
    keep: list[Operation] = []
    for op in reversed(fn.ops):
        if id(op.result) in live:
            keep.append(op)
            live.update(id(v) for v in op.operands)
    keep.reverse()
    return Function(fn.name, list(fn.params), keep, list(fn.results), list(fn.assumptions), fn.span)


def rename_values(fn: Function, ids: Iterable[int], prefix: str = "d") -> Function:
    """Give the values whose ids are in ``ids`` the names prefix0, prefix1, … in program order
    (skipping names that other values already use), so the text does not depend on how many
    values the transform created and later dropped."""
    ids = set(ids)
    taken = {p.name for p in fn.params} | {op.result.name for op in fn.ops if id(op.result) not in ids}
    k = 0
    for op in fn.ops:
        if id(op.result) in ids:
            while f"{prefix}{k}" in taken:
                k += 1
            op.result.name = f"{prefix}{k}"
            taken.add(op.result.name)
            k += 1
    return fn


def canonicalize(fn: Function) -> Function:
    """``mind.compiler.passes.canonicalize`` when that pass exists, else CSE + DCE (here)."""
    try:
        from mind.compiler.passes import canonicalize as passes_canonicalize  # type: ignore[attr-defined]
    except ImportError:
        passes_canonicalize = None
    if passes_canonicalize is not None:
        import inspect

        if "rename" in inspect.signature(passes_canonicalize).parameters:
            return passes_canonicalize(fn, rename=False)  # names are chosen by ``rename_values``
        return passes_canonicalize(fn)
    return dce(cse(fn))
