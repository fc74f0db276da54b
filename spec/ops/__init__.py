"""The Core IR op registry: exactly 19 ops, each defined once (see ``base.OpDef``)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from mind.spec.dims import Arith, INT_ARITH
from mind.spec.ops.base import (AttrDef, ConstraintDef, ConstraintUndecided, ConstraintViolation,
                                Example, OpDef, OperandDef, ShapeContext, TensorType)
from mind.spec.ops import contraction, elementwise, structure

OPS: dict[str, OpDef] = {op.name: op for op in (*structure.OPS[:1], *elementwise.OPS,
                                                *structure.OPS[1:], *contraction.OPS)}

assert len(OPS) == 19, sorted(OPS)

__all__ = ["OPS", "OpDef", "AttrDef", "OperandDef", "ConstraintDef", "Example", "TensorType",
           "ShapeContext", "ConstraintViolation", "ConstraintUndecided", "infer_type", "get_op"]


def get_op(name: str) -> OpDef | None:
    return OPS.get(name)


def infer_type(op: str | OpDef, operand_types: Sequence[TensorType], attrs: Mapping[str, Any],
               arith: Arith = INT_ARITH) -> TensorType:
    """Result type of ``op``; raises ``ConstraintViolation``/``ConstraintUndecided`` with a label."""
    opdef = OPS[op] if isinstance(op, str) else op
    if opdef.fast_infer is not None:
        fast = opdef.fast_infer(operand_types)
        if fast is not None:
            return fast
    return opdef.infer(ShapeContext(arith), operand_types, attrs)
