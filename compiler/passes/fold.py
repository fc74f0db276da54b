"""Constant folding, bit-exact with the reference semantics because it *is* the reference.

An op whose operands are all constants is evaluated by ``mind.reference.ops`` and replaced by a
``const``.  Folding is bounded in what it computes and in what it creates, so that compiling a
program costs time and memory in proportion to its text, whatever sizes it names: results larger
than ``FOLD_LIMIT`` elements are folded only when every operand is a splat and the op is
elementwise, and then only up to the IR's constant limit (``MAX_CONST_ELEMENTS``, so the folded
IR stays printable and parsable); one element is computed and the constant is a zero-strided view
of it (no memory per element).  Beyond that the op is kept: it is computed when the program runs.
"""

from __future__ import annotations

from typing import Any

from mind.spec.ops import elementwise as elementwise_ops
from mind.ir.core import MAX_CONST_ELEMENTS, Function, Operation, Value
from mind.reference.memory import representable
from mind.compiler.passes.rewrite import RewriteContext, rewrite

FOLD_LIMIT = 1 << 16  # elements of a folded result
WORK_LIMIT = 1 << 18  # multiply-adds or elements read to fold one op; programs are not run at compile time
ELEMENTWISE = frozenset(op.name for op in elementwise_ops.OPS)  # the spec groups the elementwise ops


def is_splat(arr: Any) -> bool:
    import numpy as np

    if arr.size <= 1:
        return True
    if 0 in arr.strides and arr.strides.count(0) == arr.ndim:
        return True
    flat = np.ascontiguousarray(arr).reshape(-1)
    if arr.dtype.kind == "f":
        bits = flat.view(np.uint32 if arr.dtype.itemsize == 4 else np.uint64)
        return bool(np.all(bits == bits[0]))
    return bool(np.all(flat == flat[0]))


def static_size(shape: tuple) -> int | None:
    n = 1
    for d in shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n


def fold_work(op: Operation, operand_sizes: list[int], result_size: int) -> int:
    """Elements touched to evaluate ``op``: contractions count multiply-adds."""
    if op.op == "matmul":
        return result_size * int(op.operands[0].type.shape[-1])
    if op.op == "conv2d":
        kh, kw, c, _ = op.operands[1].type.shape
        return result_size * int(kh) * int(kw) * int(c)
    return max([result_size, *operand_sizes])


def _const_size(op: Operation) -> int:
    hint = op.hint
    if hint is not None:
        return hint.size
    return op.attrs["value"].size


def fold_rule(op: Operation, operands: tuple[Value, ...], ctx: RewriteContext) -> Operation | None:
    """Replace an op on constants by the constant the reference computes (bounded work)."""
    if op.op == "const" or not operands:
        return None
    producers = []
    for v in operands:
        p = ctx.defining_op(v)
        if p is None or p.op != "const":
            return None
        producers.append(p)
    return fold_constants(op, producers)


def fold_constants(op: Operation, producers: list[Operation]) -> Operation | None:
    """``fold_rule`` for an op whose operands the ``const`` ops ``producers`` produce (in order):
    the constant the reference computes, or None where folding is out of its bounds."""
    size = static_size(op.result.type.shape)
    if size is None:
        return None
    # Sizes first (a deferred splat constant knows its size without building its array), so
    # the operand arrays are read only when the op is actually folded.
    sizes = [_const_size(p) for p in producers]
    small = size <= FOLD_LIMIT and fold_work(op, sizes, size) <= WORK_LIMIT
    if not small and (op.op not in ELEMENTWISE or size > MAX_CONST_ELEMENTS):
        return None  # (what the branches below decide, before any import)
    if not representable(op.result.type, {}):  # (NumPy refuses some empty shapes)
        return None
    import numpy as np

    from mind.reference.ops import OP_FUNCTIONS

    if small:
        values = [p.attrs["value"] for p in producers]
        out = OP_FUNCTIONS[op.op](*[np.asarray(v) for v in values], **op.attrs)
        return Operation("const", (), {"value": np.asarray(out)}, op.result, op.span)
    if all(is_splat(p.attrs["value"]) for p in producers):  # elementwise, up to MAX_CONST_ELEMENTS
        from mind.compiler.frontend.values import SplatAttrs

        scalars = [np.asarray(p.attrs["value"]).reshape(-1)[:1].reshape(()) for p in producers]
        one = np.asarray(OP_FUNCTIONS[op.op](*scalars, **op.attrs))[()]
        # a deferred splat, as the frontend makes them: its array is one element with zero
        # strides, and the op's hint lets later passes (and pickling) skip building it
        make = SplatAttrs(one, op.result.type.dtype, tuple(op.result.type.shape), size)
        return Operation.deferred("const", (), make, op.result, op.span, make)
    return None


def constant_folding(fn: Function) -> Function:
    return rewrite(fn, fold_rule)
