"""Canonical, deterministic text of Core IR (grammar: ``spec/ir.ebnf``).

Printing is a pure function of the module: attribute order is the op definition's, floats print as
the shortest decimal that round-trips in their dtype, and constants whose elements are all
bit-identical print as ``splat(v)``.  So print → parse → print is byte-identical.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from mind.reference.program import FunctionLike, OperationLike
from mind.spec.dims import format_dim
from mind.spec.dtypes import DType
from mind.spec.ops import OPS, TensorType


class ModuleLike(Protocol):
    """What the printer reads of a module (``mind.ir.core.Module``, which prints itself through
    this module: so the printer names no class of ``core``)."""

    functions: Sequence[FunctionLike]


def format_type(t: TensorType) -> str:
    return f"{t.dtype.value}[{', '.join(format_dim(d) for d in t.shape)}]"


def format_scalar(x: Any, dtype: DType) -> str:
    import numpy as np

    if dtype is DType.BOOL:
        return "true" if bool(x) else "false"
    if dtype.is_int:
        return str(int(x))
    v = dtype.numpy.type(x)
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    text = repr(float(v)) if dtype is DType.F64 else str(v)
    if not any(c in text for c in ".en"):
        text += ".0"
    return text


def format_tensor(value: Any, dtype: DType) -> str:
    import numpy as np

    arr = np.asarray(value)
    if arr.ndim == 0:
        return format_scalar(arr[()], dtype)
    if arr.size == 0:  # the nested form of f32[N, 0] lists N empty rows: N may be 2**40
        return f"splat({format_scalar(np.zeros((), arr.dtype)[()], dtype)})"
    if arr.size > 1 and not any(arr.strides):  # a zero-strided view of one element (splats)
        return f"splat({format_scalar(arr[(0,) * arr.ndim], dtype)})"
    if arr.size > 1:
        flat = arr.reshape(-1)
        first = flat[:1]
        if dtype is DType.BOOL or dtype.is_int:
            uniform = bool(np.all(flat == first))
        else:
            bits = flat.view(np.uint32 if dtype is DType.F32 else np.uint64)
            uniform = bool(np.all(bits == bits[0]))
        if uniform:
            return f"splat({format_scalar(first[0], dtype)})"
    return _nested(arr, dtype)


def _nested(arr: Any, dtype: DType) -> str:
    if arr.ndim == 1:
        return "[" + ", ".join(format_scalar(x, dtype) for x in arr) + "]"
    return "[" + ", ".join(_nested(sub, dtype) for sub in arr) + "]"


def format_attr(kind: str, value: Any, result_type: TensorType) -> str:
    if kind == "int":
        return str(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind in ("enum",):
        return str(value)
    if kind == "dtype":
        return value.value
    if kind == "ints":
        return "[" + ", ".join(str(v) for v in value) + "]"
    if kind == "dims":
        return "[" + ", ".join(format_dim(v) for v in value) + "]"
    if kind == "pairs":
        return "[" + ", ".join(f"[{a}, {b}]" for a, b in value) + "]"
    if kind == "tensor":
        return format_tensor(value, result_type.dtype)
    raise ValueError(f"unknown attribute kind {kind!r}")


def format_operation(op: OperationLike) -> str:
    opdef = OPS[op.op]
    operands = f"({', '.join(f'%{v.name}' for v in op.operands)})" if op.operands else ""
    attrs = ""
    if opdef.attrs:
        parts = [f"{a.name} = {format_attr(a.kind, op.attrs[a.name], op.result.type)}"
                 for a in opdef.attrs if a.name in op.attrs]
        attrs = " {" + ", ".join(parts) + "}"
    return f"%{op.result.name} = {op.op}{operands}{attrs} : {format_type(op.result.type)}"


def format_signature(fn: FunctionLike) -> str:
    params = ", ".join(f"%{p.name}: {format_type(p.type)}" for p in fn.params)
    results = ", ".join(format_type(v.type) for v in fn.results)
    where = ""
    if fn.assumptions:
        where = " where " + ", ".join(str(a) for a in fn.assumptions)
    return f"func @{fn.name}({params}) -> ({results}){where}"


def print_function(fn: FunctionLike) -> str:
    lines = [format_signature(fn) + " {"]
    lines.extend("  " + format_operation(op) for op in fn.ops)
    ret = ", ".join(f"%{v.name}" for v in fn.results)
    lines.append(f"  return {ret}".rstrip())
    lines.append("}")
    return "\n".join(lines)


def print_module(module: ModuleLike) -> str:
    return "\n\n".join(print_function(f) for f in module.functions) + "\n"
