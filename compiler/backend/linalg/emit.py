"""Core IR ``Function`` -> MLIR text (func/linalg/tensor/arith on static-shape tensors).

``emit_mlir(fn, shapes)`` first specializes every symbolic dim with the symbol environment
``shapes`` (types and the dims attributes ``shape``/``start``/``stop``), then writes one
``func.func`` in the kernels' calling convention: the parameters are tensor arguments, the results
are written into memref out-parameters, and the function returns nothing.  Each op goes through its
lowering (``lowerings.LOWERINGS``).  The text depends only on the function and the shapes.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from mind.diagnostics import error
from mind.ir.core import Function
from mind.spec.dims import substitute
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

from .emitter import Emitter, TensorValue
from .joins import find_joins
from .lowerings import LOWERINGS, OpApplication
from .mlir_text import ELEM, memref_type, tensor_type

__all__ = ["emit_mlir", "specialize_type", "kernel_name", "ELEM", "E_UNSUPPORTED"]

E_UNSUPPORTED = "E6003"


def kernel_name(fn: Function) -> str:
    return "mind_" + re.sub(r"[^A-Za-z0-9_]", "_", fn.name)


def _concrete(d: Any, env: Mapping[str, int], what: object) -> int:
    """``d`` with the symbols of ``env`` substituted; ``what`` (formatted only on error) names it."""
    v = substitute(d, env) if not isinstance(d, int) else d
    if not isinstance(v, int):
        raise error(E_UNSUPPORTED, f"cannot compile: {what} has a symbolic extent without a value",
                    help="call the function with concrete arrays (symbolic dims are specialized per call)")
    return int(v)


def specialize_type(t: TensorType, env: Mapping[str, int]) -> tuple[DType, tuple[int, ...]]:
    shape = t.shape
    if all(type(d) is int for d in shape):  # the common case: nothing to substitute
        return t.dtype, tuple(shape)
    return t.dtype, tuple(_concrete(d, env, t) for d in shape)


def _concrete_attrs(op: str, attrs: Mapping[str, Any], env: Mapping[str, int]) -> dict[str, Any]:
    out = dict(attrs)
    for key in ("shape", "start", "stop"):
        if key in out:
            out[key] = tuple(_concrete(d, env, f"attribute {key} of {op}") for d in out[key])
    return out


def emit_mlir(fn: Function, shapes: Mapping[str, int] | None = None,
              transposed_lhs: frozenset[str] = frozenset(), pad_border: bool = False,
              conv_pixels: int = 24, transposed_rhs: frozenset[str] = frozenset(),
              contractions: frozenset[str] = frozenset()) -> tuple[str, str]:
    """MLIR text of ``fn`` specialized to the symbol values ``shapes``; returns (text, func name).
    ``transposed_lhs``, ``pad_border``, ``conv_pixels``, ``transposed_rhs``, ``contractions``: what
    the target takes (``Emitter``)."""
    env = dict(shapes or {})
    em = Emitter(transposed_lhs, pad_border, conv_pixels, transposed_rhs, contractions)
    name = kernel_name(fn)
    values: dict[int, TensorValue] = {}
    sig: list[str] = []
    for i, p in enumerate(fn.params):
        dtype, shape = specialize_type(p.type, env)
        a = f"%arg{i}"
        em.params.add(a)
        sig.append(f"{a}: {tensor_type(shape, ELEM[dtype])}")
        values[id(p)] = TensorValue(a, shape, ELEM[dtype], dtype)
    outs: list[tuple[str, tuple[int, ...], str]] = []
    for j, r in enumerate(fn.results):
        dtype, shape = specialize_type(r.type, env)
        o = f"%out{j}"
        sig.append(f"{o}: {memref_type(shape, ELEM[dtype])}")
        outs.append((o, shape, ELEM[dtype]))
    joins, folded = find_joins(fn, lambda v: specialize_type(v.type, env)[1])
    for op in fn.ops:
        if id(op.result) in folded:
            continue  # a pad (or add) of a concatenation, emitted with its root (``joins``)
        dtype, shape = specialize_type(op.result.type, env)
        join = joins.get(id(op.result))
        if join is not None:
            em.emit(f"// {op.op} -> %{op.result.name} (a concatenation)")
            pieces = [(values[id(x)], lo) for x, lo in join.pieces]
            joined = em.join(pieces, values[id(join.fill)], shape)
            values[id(op.result)] = TensorValue(joined, shape, ELEM[dtype], dtype)
            continue
        lowering = LOWERINGS.get(op.op)
        if lowering is None:
            raise error(E_UNSUPPORTED, f"the cpu backend cannot lower op `{op.op}`")
        application = OpApplication(op.op, [values[id(v)] for v in op.operands],
                                    _concrete_attrs(op.op, op.attrs, env), dtype, shape)
        em.emit(f"// {op.op} -> %{op.result.name}")
        values[id(op.result)] = TensorValue(lowering(em, application), shape, ELEM[dtype], dtype)
    for (o, shape, elem), r in zip(outs, fn.results):
        v = values[id(r)]
        if shape and em.computed_window(v):
            # copied by an op of its own, which the target plans (tiles, threads), where
            # materializing the window is one serial copy of its rows (the runtime's memrefCopy)
            v = TensorValue(em.copied(v), shape, elem, v.dtype)
        em.emit(f"bufferization.materialize_in_destination {v.name} in restrict writable {o} : "
                f"({v.ty}, {memref_type(shape, elem)}) -> ()")
    em.emit("return")
    text = f"func.func @{name}({', '.join(sig)}) {{\n" + "\n".join(em.lines) + "\n}\n"
    return text, name
