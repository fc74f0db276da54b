"""The Core IR op registry: every op, each defined once, in one place (see ``base.OpDef``).

``OPS`` is the op table that everything else reads (verifier, builder, reference, lowering, docs,
tests); its order is the order of the docs' op table.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from mind.spec.dims import Arith, INT_ARITH
from mind.spec.ops.base import (AttrDef, ConstraintDef, ConstraintUndecided, ConstraintViolation,
                                Example, OpDef, OperandDef, ShapeContext, TensorType)
from mind.spec.ops import contraction, elementwise, structure

_DEFINED = (*structure.OPS[:1], *elementwise.OPS, *structure.OPS[1:], *contraction.OPS)
OPS: dict[str, OpDef] = {op.name: op for op in _DEFINED}

assert len(OPS) == len(_DEFINED), "two op definitions share a name"

__all__ = ["OPS", "OpDef", "AttrDef", "OperandDef", "ConstraintDef", "Example", "TensorType",
           "ShapeContext", "ConstraintViolation", "ConstraintUndecided", "infer_type"]


def infer_type(op: str | OpDef, operand_types: Sequence[TensorType], attrs: Mapping[str, Any],
               arith: Arith = INT_ARITH) -> TensorType:
    """Result type of ``op``; raises ``ConstraintViolation``/``ConstraintUndecided`` with a label."""
    opdef = OPS[op] if isinstance(op, str) else op
    if opdef.fast_infer is not None:
        fast = opdef.fast_infer(operand_types)
        if fast is not None:
            return fast
    return opdef.infer(ShapeContext(arith), operand_types, attrs)
