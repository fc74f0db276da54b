"""Numerics: each op's accuracy class and bound, and every place where the spec's total semantics
decides an outcome that IEEE 754 or NumPy would not.

The accuracy classes and bounds are the spec's (``mind.spec.accuracy``); this module only states
them per op application, with the accumulation length ``n`` of ``sum``/``dot`` ops written over
the program's sizes.

A *total-semantics site* is an op application whose result, for some operand values, is fixed by
MIND's spec where IEEE 754 has no answer or NumPy gives another (a trap, a warning, an exception,
an index that counts from the end).  The sites are one table, ``SITES``: the op, the dtypes it
applies to, the operand whose values matter, and a test on one value.  Each site is decided
statically where the operand is a ``const`` (its values are in the program): ``occurs`` (some value
triggers it: a warning), ``excluded`` (none does: a pass), otherwise ``depends`` on the values at
run time (a note).  A reduction over an extent that may be zero is decided on the sizes instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from mind.ir.core import Function, Module, Operation
from mind.spec import accuracy as acc
from mind.spec.dims import DimExpr, format_dim
from mind.spec.dtypes import DType
from mind.spec.ops import OPS

__all__ = ["SITES", "Site", "numerics_section"]


def _int_info(dtype: DType) -> Any:
    return np.iinfo(np.dtype(dtype.value.replace("i", "int")))


@dataclass(frozen=True)
class Site:
    """One kind of total-semantics outcome (see the module docstring)."""

    id: str
    op: str
    applies: Callable[[Operation], bool]
    operand: int
    triggers: Callable[[Operation, np.ndarray], np.ndarray]  # element-wise: does this value trigger it
    spec: str  # what the spec says happens
    ieee_numpy: str  # what IEEE 754 / NumPy would do instead

    @property
    def label(self) -> str:
        return f"{self.op}.edge_cases"


def _is_int(op: Operation) -> bool:
    return op.result.type.dtype.is_int


def _float_to_int(op: Operation) -> bool:
    return op.operands[0].type.dtype.is_float and op.result.type.dtype.is_int


def _is_float_input(op: Operation) -> bool:
    return op.operands[0].type.dtype.is_float


def _outside_int_range(op: Operation, x: np.ndarray) -> np.ndarray:
    info = _int_info(op.result.type.dtype)
    with np.errstate(invalid="ignore"):
        return np.isnan(x) | (np.trunc(x) > info.max) | (np.trunc(x) < info.min)


def _gather_out_of_range(op: Operation, idx: np.ndarray) -> np.ndarray:
    axis = op.attrs["axis"]
    n = op.operands[0].type.shape[axis]
    if isinstance(n, DimExpr):
        return idx < 0  # the upper end depends on the size: only negative indices are certain
    return (idx < 0) | (idx > n - 1)


SITES: tuple[Site, ...] = (
    Site("div.integer_by_zero", "div", _is_int, 1, lambda op, x: x == 0,
         "x / 0 = 0 for every integer x (no trap)",
         "IEEE 754 has no integer division; NumPy returns 0 with a RuntimeWarning; C and LLVM's sdiv are "
         "undefined (the hardware traps)"),
    Site("div.int_min_by_minus_one", "div", _is_int, 1, lambda op, x: x == -1,
         "INT_MIN / -1 = INT_MIN (the wrapped quotient)",
         "the quotient overflows: undefined in C and LLVM (x86 traps); NumPy wraps silently"),
    Site("gather.clamped_index", "gather", lambda op: True, 1, _gather_out_of_range,
         "out-of-range indices are clamped into [0, n - 1]; a negative index reads element 0",
         "NumPy counts a negative index from the end and raises IndexError past it"),
    Site("convert.saturating", "convert", _float_to_int, 0, _outside_int_range,
         "float → int truncates toward zero and saturates: above the range INT_MAX, below INT_MIN, NaN 0",
         "NumPy's astype gives an unspecified value (and a RuntimeWarning); C and LLVM's fptosi are undefined"),
    Site("reduce_max.nan", "reduce_max", _is_float_input, 0, lambda op, x: np.isnan(x),
         "NaN anywhere in the window gives NaN",
         "IEEE 754-2019's maximumNumber and C's fmax ignore a NaN (NumPy's max propagates it, as MIND does)"),
)


def _const_values(fn_producers: dict[int, Operation], v: Any) -> np.ndarray | None:
    """The values of ``v`` if a ``const`` op of the function produces it."""
    p = fn_producers.get(id(v))
    if p is None or p.op != "const":
        return None
    return np.asarray(p.attrs["value"])


def _location(op: Operation, fn: Function) -> dict[str, Any] | None:
    span = op.span or fn.span
    return span.to_json() if span is not None else None


def _site_verdicts(fn: Function) -> list[dict[str, Any]]:
    producers = {id(op.result): op for op in fn.ops}
    by_op: dict[str, list[Site]] = {}
    for s in SITES:
        by_op.setdefault(s.op, []).append(s)
    out = []
    for op in fn.ops:
        for site in by_op.get(op.op, ()):
            if not site.applies(op):
                continue
            if site.id == "div.int_min_by_minus_one":
                verdict = _int_min_by_minus_one(op, producers)
            else:
                values = _const_values(producers, op.operands[site.operand])
                verdict = "depends" if values is None else ("occurs" if np.any(site.triggers(op, values))
                                                             else "excluded")
            out.append(_site_row(site.id, site.label, verdict, op, fn, site.spec, site.ieee_numpy))
        if op.op == "reduce_max":
            out.append(_empty_reduction(op, fn))
    return out


def _int_min_by_minus_one(op: Operation, producers: dict[int, Operation]) -> str:
    """Both operands matter: excluded when either const rules its part out."""
    info = _int_info(op.result.type.dtype)
    a = _const_values(producers, op.operands[0])
    b = _const_values(producers, op.operands[1])
    if (a is not None and not np.any(a == info.min)) or (b is not None and not np.any(b == -1)):
        return "excluded"
    if a is not None and b is not None:
        return "occurs"
    return "depends"


def _empty_reduction(op: Operation, fn: Function) -> dict[str, Any]:
    """``reduce_max`` over a window that may be empty gives the identity of max."""
    shape = op.operands[0].type.shape
    extents = [shape[a] for a in op.attrs["axes"]]
    if any(e == 0 for e in extents if isinstance(e, int)):
        verdict = "occurs"
    elif all(isinstance(e, int) for e in extents):
        verdict = "excluded"
    else:
        verdict = "depends"
    return _site_row("reduce_max.empty_window", "reduce_max.edge_cases", verdict, op, fn,
                     "the maximum of no elements is -inf for floats, INT_MIN for integers, false for bool",
                     "NumPy's max raises ValueError on an empty window")


def _site_row(sid: str, label: str, verdict: str, op: Operation, fn: Function, spec: str, other: str) -> dict[str, Any]:
    return {"site": sid, "label": label, "function": fn.name, "value": op.result.name, "op": op.op,
            "verdict": verdict, "location": _location(op, fn), "spec": spec, "ieee_numpy": other}


def accumulation_length(op: Operation) -> str | None:
    """``n`` of a ``sum``/``dot`` class op, over the program's sizes (text), or None."""
    shapes = [v.type.shape for v in op.operands]
    if op.op == "reduce_sum":
        dims = [shapes[0][a] for a in op.attrs["axes"]]
    elif op.op == "matmul":
        dims = [shapes[0][-1]] if shapes[0] else []
    elif op.op == "conv2d":
        dims = list(shapes[1][1:4]) if len(shapes[1]) == 4 else []
    else:
        return None
    return " · ".join(format_dim(d) for d in dims) if dims else "1"


def _bound(op: Operation) -> str:
    cls = acc.get(OPS[op.op].accuracy)
    dtype = op.result.type.dtype
    if not dtype.is_float or cls.kind == "exact":
        return "exact (0 ULP; any NaN matches any NaN)" if dtype.is_float else "exact"
    if cls.kind == "ulp":
        return f"≤ {cls.ulp[dtype.value]} ULP"
    return f"|error| ≤ γ(n)·Σ|x| + n·η with n = {accumulation_length(op)}, u = 2^{-24 if dtype is DType.F32 else -53}"


def numerics_section(module: Module) -> dict[str, Any]:
    """Accuracy per op application (grouped by op, dtype and bound) and the total-semantics sites."""
    groups: dict[tuple[str, str, str, str], list[str]] = {}
    sites: list[dict[str, Any]] = []
    for fn in module.functions:
        for op in fn.ops:
            if op.op not in OPS:
                continue
            key = (op.op, op.result.type.dtype.value, OPS[op.op].accuracy, _bound(op))
            groups.setdefault(key, []).append(f"{fn.name}/%{op.result.name}")
        sites += _site_verdicts(fn)
    accuracy = [{"op": o, "dtype": d, "class": c, "bound": b, "summary": acc.get(c).summary, "count": len(vs),
                 "values": vs} for (o, d, c, b), vs in sorted(groups.items())]
    return {"accuracy": accuracy, "total_semantics": sites}
