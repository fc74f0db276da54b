"""Reverse-mode automatic differentiation over Core IR, at compile time.

The transform walks the ops that lie between the differentiated values and the loss in reverse
program order and asks each op's VJP rule (``OpDef.vjp`` in ``mind.spec.ops``) for the cotangents
of its operands.  Everything it emits goes through a ``FunctionBuilder``, so the gradient program
is ordinary Core IR in the same 19 ops, typed by the spec's shape rules.

* A cotangent that is identically zero is represented by its absence (``None``); nothing is
  materialised for it.  Zeros are built only when a requested gradient receives no contribution.
* Several contributions to one value are accumulated with ``add`` in reverse program order.
* Only float values carry cotangents: integer and bool values (``compare`` results, indices,
  float→int ``convert``) cut the flow.  Asking for the gradient of an integer or bool value is
  E5005; a loss that is not a rank-0 float is E5006.

VJP rule signature: ``vjp(b, op, g, wants) -> list[Value | None]`` (``mind.spec.ops.base.VjpRule``)
with ``b`` the builder, ``op`` the primal ``Operation``, ``g`` the (non-zero) cotangent of its result
and ``wants[i]`` whether operand ``i``'s cotangent is needed; the rule returns one cotangent (or
``None`` = zero) per operand.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, Sequence

from mind.diagnostics import error
from mind.ir.builder import FunctionBuilder
from mind.ir.core import Function, Value
from mind.ir.printer import format_type
from mind.spec.ops import OPS
from mind.spec.ops.vjp import same_shape, scalar, zeros_like


#: The ops whose VJP rules the gradients built in this context used (``recording_vjp_rules``).
_RULES_USED: ContextVar[set[str] | None] = ContextVar("mind_vjp_rules_used", default=None)


@contextmanager
def recording_vjp_rules() -> Iterator[set[str]]:
    """Collect the names of the ops whose VJP rules ``grad_values`` applies inside the block (what
    ``mind audit`` lists as the rules a program's gradients rest on)."""
    used: set[str] = set()
    token = _RULES_USED.set(used)
    try:
        yield used
    finally:
        _RULES_USED.reset(token)


def _is_float(v: Value) -> bool:
    return v.type.dtype.is_float


def grad_values(b: FunctionBuilder, loss: Value, wrt: Sequence[Value], *,
                seed: Value | None = None) -> list[Value]:
    """Emit, into ``b``, the gradients of the rank-0 float ``loss`` with respect to ``wrt`` (values
    already emitted in ``b``: parameters or results of its ops).  Returns one value per ``wrt``, of
    that value's type.  ``seed`` (default ``const 1``) is the cotangent of ``loss``.

    This is the in-builder API used by the frontend's ``grad(loss, wrt=[...])``.
    """
    span = loss.span
    if loss.type.rank != 0:
        raise error("E5006", f"the loss must be a scalar, but %{loss.name} has type {format_type(loss.type)}",
                    span, help="reduce it first, e.g. with reduce_sum over every axis")
    if not _is_float(loss):
        raise error("E5006", f"the loss must be a float scalar, but %{loss.name} has type "
                             f"{format_type(loss.type)}", span, help="`convert` it to f32 or f64")
    for w in wrt:
        if not _is_float(w):
            raise error("E5005", f"cannot differentiate with respect to %{w.name} of type "
                                 f"{format_type(w.type)}: only float values have gradients", w.span,
                        help="integer and bool values are not differentiable")
    ops = list(b.ops)
    wrt_ids = {id(w) for w in wrt}
    # values that depend (through float values) on something in wrt
    active: set[int] = set(wrt_ids)
    for op in ops:
        if _is_float(op.result) and any(id(v) in active for v in op.operands):
            active.add(id(op.result))
    # values the loss depends on
    needed: set[int] = {id(loss)}
    relevant = []
    for op in reversed(ops):
        if id(op.result) in needed:
            needed.update(id(v) for v in op.operands)
            if id(op.result) in active:
                relevant.append(op)
    ct: dict[int, Value] = {}
    used = _RULES_USED.get()
    if id(loss) in active:
        ct[id(loss)] = seed if seed is not None else scalar(b, 1, loss.type.dtype)
    outer_span = b.default_span
    try:
        for op in relevant:  # already in reverse program order
            g = ct.get(id(op.result))
            if g is None:
                continue
            wants = tuple(id(v) in active and id(v) in needed for v in op.operands)
            if not any(wants):
                continue
            b.default_span = op.span or outer_span  # the ops of a VJP point at the op's source
            contributions = OPS[op.op].vjp(b, op, g, wants)
            if used is not None:
                used.add(op.op)
            for v, c, want in zip(op.operands, contributions, wants):
                if c is None or not want:
                    continue
                if not same_shape(b.arith, c.type.shape, v.type.shape) or c.type.dtype is not v.type.dtype:
                    raise AssertionError(f"VJP of {op.op} gave {c.type} for operand {v.type}")  # a rule bug
                prev = ct.get(id(v))
                ct[id(v)] = c if prev is None else b.emit("add", prev, c)
    finally:
        b.default_span = outer_span
    out = []
    for w in wrt:
        g = ct.get(id(w))
        out.append(g if g is not None else zeros_like(b, w))
    return out


def inline_function(b: FunctionBuilder, fn: Function, args: Sequence[Value]) -> list[Value]:
    """Emit ``fn``'s ops into ``b`` with its parameters bound to ``args``; returns its results
    (so a caller can build e.g. ``train_step = forward + grad_values + update`` in one builder)."""
    if len(args) != len(fn.params):
        raise error("E2007", f"@{fn.name} takes {len(fn.params)} arguments, got {len(args)}", fn.span)
    m: dict[int, Value] = {id(p): a for p, a in zip(fn.params, args)}
    for op in fn.ops:
        m[id(op.result)] = b.emit(op.op, *(m[id(v)] for v in op.operands), span=op.span, **op.attrs)
    return [m[id(v)] for v in fn.results]


def _copy_into(fn: Function, name: str) -> tuple[FunctionBuilder, dict[int, Value]]:
    b = FunctionBuilder(name, fn.assumptions)
    m: dict[int, Value] = {}
    for p in fn.params:
        m[id(p)] = b.param(p.name, p.type, p.span)
    for op in fn.ops:
        m[id(op.result)] = b.emit(op.op, *(m[id(v)] for v in op.operands), span=op.span,
                                  name=op.result.name, **op.attrs)
    return b, m


def grad_function(fn: Function, loss_index: int = 0, wrt: Sequence[str] | None = None, *,
                  name: str | None = None) -> Function:
    """A new function returning ``fn``'s results and then d result[loss_index] / d p for every
    parameter named in ``wrt`` (default: every float parameter), canonicalized and verified."""
    from mind.compiler.autodiff.canon import canonicalize, rename_values
    from mind.ir.core import Module
    from mind.ir.verify import verify_module

    if not 0 <= loss_index < len(fn.results):
        raise error("E5006", f"@{fn.name} has {len(fn.results)} results; there is no result {loss_index}",
                    fn.span)
    by_name = {p.name: p for p in fn.params}
    if wrt is None:
        params = [p for p in fn.params if _is_float(p)]
    else:
        params = []
        for n in wrt:
            n = n.lstrip("%")
            if n not in by_name:
                raise error("E5005", f"@{fn.name} has no parameter named `{n}`", fn.span,
                            help="parameters: " + ", ".join(p.name for p in fn.params))
            params.append(by_name[n])
    b, m = _copy_into(fn, name or f"{fn.name}_grad")
    primal_ids = {id(v) for v in m.values()}
    grads = grad_values(b, m[id(fn.results[loss_index])], [m[id(p)] for p in params])
    out = b.finish([m[id(v)] for v in fn.results] + grads, fn.span)
    out = canonicalize(out)
    out = rename_values(out, [id(op.result) for op in out.ops if id(op.result) not in primal_ids])
    verify_module(Module([out]))
    return out


def grad(fn: Function, wrt: Sequence[str] | None = None, loss_index: int = 0) -> Function:
    """The Python API: ``grad(fn, wrt=["w1", "b1"])`` is ``grad_function(fn, loss_index, wrt)``."""
    return grad_function(fn, loss_index, wrt)
