"""Common-subexpression elimination: identical op, operands and attributes compute the same value.

Sound because every Core IR op is a pure, deterministic function of its operands and attributes;
the operands of a commutative op are compared as a multiset, by the proved commutativity rules of
``mind.ir.rewrite_rules``.
"""

from __future__ import annotations

from typing import Any, Callable

from mind.ir.core import Function, Operation, Value
from mind.ir.rewrite_rules import COMMUTATIVE_OPS
from mind.compiler.passes.rewrite import RewriteContext, rewrite


#: Constants of at most this many bytes key on their bytes; larger ones on the SHA-256 of them
#: (equal dtype and shape imply equal sizes, so two constants that may be equal key alike).
DIGEST_ABOVE_BYTES = 4096


def attr_key(value: Any) -> Any:
    """A hashable key for an attribute value; constants key on dtype, shape and exact bytes."""
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        import numpy as np

        if value.ndim and value.size and all(st == 0 for st in value.strides):
            # a splat view: key on the one element, never on a materialised copy
            return ("splat", str(value.dtype), value.shape, np.asarray(value).reshape(-1)[:1].tobytes())
        arr = np.ascontiguousarray(value)
        data: bytes | str = arr.tobytes()
        if len(data) > DIGEST_ABOVE_BYTES:
            import hashlib  # only for large constants (loading OpenSSL costs milliseconds)

            data = hashlib.sha256(data).hexdigest()
        return ("tensor", str(arr.dtype), arr.shape, data)
    if isinstance(value, tuple):
        return tuple(attr_key(v) for v in value)
    return (type(value).__name__, value)


#: Ops whose operand order does not matter: those with a commutativity rule in the rule table
#: (``add-commute``, ``mul-commute``), which ``mind verify --rewrites`` proves.
COMMUTATIVE = COMMUTATIVE_OPS


def op_key(op: Operation, operands: tuple[Value, ...]) -> tuple:
    ids = tuple(id(v) for v in operands)
    if op.op in COMMUTATIVE:
        ids = tuple(sorted(ids))
    return (op.op, ids,
            tuple((k, attr_key(v)) for k, v in op.attrs.items()), op.result.type)


def cse_rule() -> "Callable[[Operation, tuple[Value, ...], RewriteContext], Value | None]":
    """A rule that maps an op to an earlier identical op's result (state: the ops seen so far)."""
    seen: dict[tuple, Value] = {}

    def rule(op: Operation, operands: tuple[Value, ...], ctx: RewriteContext) -> Value | None:
        key = op_key(op, operands)
        prior = seen.get(key)
        if prior is not None:
            return prior
        seen[key] = op.result
        return None

    return rule


def common_subexpression_elimination(fn: Function) -> Function:
    return rewrite(fn, cse_rule())
