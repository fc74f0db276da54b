"""Cheap elementwise producers recomputed by each consumer instead of stored once and read back.

Why: elementwise fusion (``linalg-fuse-elementwise-ops``) fuses a producer into its consumer only
when the consumer is the producer's one user.  A producer with two users stays a tensor of its own:
a log-softmax's ``x - max`` (read by the row sums of ``exp`` and by the result ``x - max - log(s)``)
or a norm's ``x - mean`` (read by the variance and by the result).  That tensor is written once and
read twice, where each user could compute the same value from ``x``, which it reads anyway in a
fusion group's block, with one subtraction: a store and two reads of a whole tensor (or of a block's
rows, in L2) for nothing.

What: before elementwise fusion, a ``linalg.generic`` whose loops are all parallel, with one result,
a body of at most ``MAX_BODY_OPS`` operations (recomputing it costs about what a load of its result
does) and at most one operand as large as its result, of elements no wider than the result's (the
others are broadcasts, read once per row: recomputing reads no more bytes than reading its result;
a relu's mask of bytes from f32 values is cheaper read back), which other ops read too (so its users
read it anyway; a conv's result that only its bias-add reads keeps that add its one user, the
conv's epilogue), gets one copy per further user, so that each user is the one user of its copy
and fusion fuses it.  Its users must be generics reading it as
an input, or reshapes (``tensor.expand_shape``, ``tensor.collapse_shape``) that fusion folds.  The
copies compute the same operations on the same values: results are bit-identical.  Target-neutral;
the CPU lowering runs it right before ``prefusion``.  MLIR is imported inside functions only.
"""

from __future__ import annotations

from typing import Any

from .payload import (as_operation, body_ops, element_bits, generic_inputs, generic_loops, ops_named, product,
                      static_shape)

__all__ = ["recompute_cheap_producers", "MAX_BODY_OPS"]

MAX_BODY_OPS = 2
"""Body operations (the terminator excluded) of a producer worth recomputing: a subtraction of a
row's statistic, a scale."""

_READERS = frozenset({"linalg.generic", "tensor.expand_shape", "tensor.collapse_shape"})
"""What a recomputed producer's users may be (a generic reading it as an input, or a reshape)."""


def _cheap(op: Any) -> bool:
    """An all-parallel, one-result generic with a small body and at most one operand of its
    result's size (see the module docstring)."""
    loops = generic_loops(op)
    if loops is None or any(k != "parallel" for k in loops[1]) or len(op.results) != 1:
        return False
    body = body_ops(op)
    if len(body) - 1 > MAX_BODY_OPS or any(len(b.regions) for b in body):
        return False
    result = static_shape(op.results[0].type)
    if result is None:
        return False
    size = product(result)
    large = [v for v in generic_inputs(op) if (s := static_shape(v.type)) is not None and product(s) >= size]
    # the large operand is read by others too (a row's statistics): its users then read it anyway;
    # one read by this producer alone (a conv's or matmul's result and its bias) is better left with
    # one user, which can be fused into the contraction's tiles (a conv's epilogue)
    if not large:
        return True
    return len(large) == 1 and element_bits(large[0].type) <= element_bits(op.results[0].type) and \
        sum(1 for _ in large[0].uses) >= 2


def _reads_only(op: Any, users: list[tuple[Any, int]]) -> bool:
    """Whether every use is a generic's input or a reshape's source."""
    for user, index in users:
        if user.name not in _READERS:
            return False
        if user.name == "linalg.generic" and index >= len(generic_inputs(user)):
            return False  # an init: the user writes into it
    return True


def _uses(value: Any) -> list[tuple[Any, int]]:
    out = []
    for use in value.uses:
        owner = use.owner
        out.append((as_operation(owner), use.operand_number))
    return out


def recompute_cheap_producers(module: Any) -> int:
    """Give each further user of a cheap producer (``_cheap``) a copy of its own; returns how many
    copies were made."""
    from mlir import ir
    copies = 0
    for op in ops_named(module, "linalg.generic"):
        op = as_operation(op)
        users = _uses(op.results[0])
        if len(users) < 2 or not _cheap(op) or not _reads_only(op, users):
            continue
        for user, index in users[1:]:
            with ir.InsertionPoint(op):
                clone = op.clone()
            user.operands[index] = clone.results[0]
            copies += 1
    return copies
