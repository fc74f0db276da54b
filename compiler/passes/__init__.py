"""Canonicalization: constant folding, exact algebraic simplification, CSE and DCE.

Every rule looks only at an op and the producers of its operands, which a forward walk has already
rewritten, so one walk that applies fold → simplify → CSE to each op (repeating on an op while a
rule changes it) reaches the fixed point; DCE and renumbering follow.  The output is deterministic,
verifies, and (with ``rename=True``) names op results %0, %1, … in program order.

Speed: ``canonicalize`` runs the walk of ``rewrite(fn, combined_rule())`` fused with cheap
pre-checks, so a rule is called only when it can fire (``fold_rule`` needs every operand produced
by a ``const``; the arithmetic identities of ``simplify_rule`` need a ``const`` operand; ops with
no identity are skipped).  CSE first buckets ops by a coarse key (op, operands, result dtype and
shape, and the bytes of a small constant), a projection of ``cse.op_key``, and computes the full
keys only inside a bucket that already holds an op, so the result is exactly that of the dict of
full keys.  DCE and renumbering are one backward and one forward pass; when the names are already
canonical (``%0, %1, …`` in order, as the frontend emits them) the operations are reused instead
of being rebuilt (the returned ``Function`` and its lists are always new).
"""

from __future__ import annotations

from math import copysign

from mind.ir.core import Function, Module, Operation, TensorType, Value
from mind.compiler.passes.cse import common_subexpression_elimination, cse_rule, op_key
from mind.compiler.passes.fold import constant_folding, fold_rule
from mind.compiler.passes.rewrite import RewriteContext, dead_code_elimination, renumber, rewrite
from mind.compiler.passes.simplify import algebraic_simplification, simplify_rule

MAX_STEPS_PER_OP = 8


def combined_rule():
    cse = cse_rule()

    def rule(op: Operation, operands: tuple[Value, ...], ctx: RewriteContext) -> Value | Operation | None:
        current, changed = op, False
        for _ in range(MAX_STEPS_PER_OP):
            out = fold_rule(current, current.operands, ctx) or simplify_rule(current, current.operands, ctx)
            if out is None:
                break
            if isinstance(out, Value):
                return out
            current, changed = out, True
        prior = cse(current, current.operands, ctx)
        if prior is not None:
            return prior
        return current if changed else None

    return rule


# Ops for which ``simplify_rule`` has an identity; for the arithmetic ones it fires only when an
# operand is produced by a ``const``.
_SIMPLIFY_ANY = frozenset({"convert", "reshape", "transpose", "slice", "pad", "reduce_sum",
                           "reduce_max", "select"})
_SIMPLIFY_CONST = frozenset({"mul", "add", "sub", "div"})
_COMMUTATIVE = frozenset({"add", "mul"})
_SMALL_CONST = 64  # constants of at most this many elements bucket on their bytes


def _coarse_key(op: Operation, operands: tuple[Value, ...]) -> tuple:
    """A projection of ``op_key``: equal full keys give equal coarse keys."""
    name = op.op
    t = op.result.type
    if name == "const":
        return _const_coarse_key(op, t)
    if name in _COMMUTATIVE:
        return (name, tuple(sorted(map(id, operands))), id(t.dtype), t.shape)
    return (name, tuple(map(id, operands)), id(t.dtype), t.shape)


def _const_coarse_key(op: Operation, t: TensorType) -> tuple:
    hint = op.hint
    if hint is not None:
        if hint.size > _SMALL_CONST:  # a large deferred splat: no bytes needed
            return ("const", id(t.dtype), t.shape, None)
        if hint.size:  # a small deferred splat: its bytes, unbuilt
            try:
                return ("const", id(t.dtype), t.shape, hint.scalar().tobytes() * hint.size)
            except Exception:  # pragma: no cover - fall back to the array
                pass
    arr = op.attrs.get("value")
    small = None
    try:
        if arr.size <= _SMALL_CONST:
            small = arr.tobytes()
    except Exception:  # pragma: no cover - not an array: bucket by type only
        small = None
    return ("const", id(t.dtype), t.shape, small)


def _may_simplify(name: str, operands: tuple[Value, ...], producer_get) -> bool:
    """False only when no operand is a constant that ``simplify_rule`` could use for ``name``:
    decided from the Python literal of a deferred float splat (other constants: True)."""
    for v in operands:
        p = producer_get(id(v))
        if p is None or p.op != "const":
            continue
        hint = p.hint
        if hint is None or not v.type.dtype.is_float:
            return True
        x = hint.value
        tx = type(x)
        if tx is not int and tx is not float:
            return True
        if name == "add" or name == "sub":
            # fires on a zero (add: -0.0, sub: +0.0); |x| >= 1 never rounds to zero
            if x == 0:
                if (copysign(1.0, x) < 0.0) == (name == "add"):
                    return True
            elif not (1.0 <= abs(x) < 1e38):
                return True
        elif not (x <= 0.5 or 2.0 <= x < 1e38):  # mul, div: fire on a one
            return True
    return False


def canonicalize(fn: Function, *, rename: bool = True) -> Function:
    ops = fn.ops
    if len(ops) == 1 and not fn.params:
        # one operation (e.g. a program folded to a constant): nothing to fold, simplify or merge
        op = ops[0]
        results = fn.results
        if op.op == "const" and len(results) == 1 and results[0] is op.result:
            if not rename:
                return fn
            if op.result.name == "0":
                return fn.rebuilt([op], [op.result])
    ctx = RewriteContext(fn)
    producer = ctx.producer
    replace: dict[int, Value] = {}
    new_ops: list[Operation] = []
    seen: dict[tuple, list] = {}  # coarse key -> [[op, full key or None, result], ...]
    changed = False
    append = new_ops.append
    simplify_const = _SIMPLIFY_CONST
    simplify_any = _SIMPLIFY_ANY
    commutative = _COMMUTATIVE
    producer_get = producer.get
    small_const = _SMALL_CONST
    for op in fn.ops:
        operands = op.operands
        if replace:
            new = tuple([replace.get(id(v), v) for v in operands])
            if new != operands:
                op = Operation(op.op, new, op.attrs, op.result, op.span)
                operands = new
        name = op.op
        current, rewritten = op, False
        if name != "const":
            # fold → simplify, repeated while a rule rewrites the op (``combined_rule``).  The
            # first step, which on most ops finds that no rule can fire, with the producers of the
            # operands looked up once.
            out = None
            nconst = 0
            for v in operands:
                p = producer_get(id(v))
                if p is not None and p.op == "const":
                    nconst += 1
            if nconst and nconst == len(operands):
                out = fold_rule(op, operands, ctx)
            if out is None:
                if name in simplify_const:
                    if nconst and _may_simplify(name, operands, producer_get):
                        out = simplify_rule(op, operands, ctx)
                elif name == "select":
                    # fires on select(c, x, x) or a constant predicate only
                    if operands[1] is operands[2] or nconst and (
                            (p := producer_get(id(operands[0]))) is not None and p.op == "const"):
                        out = simplify_rule(op, operands, ctx)
                elif name in simplify_any:
                    out = simplify_rule(op, operands, ctx)
            steps = MAX_STEPS_PER_OP - 1
            if out is not None and out.__class__ is not Value:
                current, rewritten = out, True
            else:
                steps = 0
            for _ in range(steps):
                name = current.op
                xs = current.operands
                out = None
                if name != "const" and xs:
                    for v in xs:
                        p = producer.get(id(v))
                        if p is None or p.op != "const":
                            break
                    else:
                        out = fold_rule(current, xs, ctx)
                if out is None:
                    if name in simplify_const:
                        for v in xs:
                            p = producer.get(id(v))
                            if p is not None and p.op == "const":
                                out = simplify_rule(current, xs, ctx)
                                break
                    elif name in simplify_any:
                        out = simplify_rule(current, xs, ctx)
                if out is None or out.__class__ is Value:
                    break
                current, rewritten = out, True
            if out is not None and out.__class__ is Value:
                replace[id(op.result)] = out
                changed = True
                continue
            name = current.op
        # CSE
        xs = current.operands
        t = current.result.type
        if name == "const":
            hint = current.hint
            if hint is not None and hint.size > small_const:  # (``_const_coarse_key``, inline)
                ck = ("const", id(t.dtype), t.shape, None)
            else:
                ck = _const_coarse_key(current, t)
        elif name in commutative:
            ck = (name, tuple(sorted(map(id, xs))), id(t.dtype), t.shape)
        else:
            ck = (name, tuple(map(id, xs)), id(t.dtype), t.shape)
        bucket = seen.get(ck)
        if bucket is None:
            seen[ck] = [[current, None, current.result]]
        else:
            full = op_key(current, xs)
            prior = None
            for entry in bucket:
                k = entry[1]
                if k is None:
                    k = entry[1] = op_key(entry[0], entry[0].operands)
                if k == full:
                    prior = entry[2]
                    break
            if prior is not None:
                replace[id(op.result)] = prior
                changed = True
                continue
            bucket.append([current, full, current.result])
        if rewritten:
            if current.result is not op.result:
                replace[id(op.result)] = current.result
            op = current
            changed = True
        append(op)
        producer[id(op.result)] = op
    if changed:
        results = [replace.get(id(v), v) for v in fn.results]
    else:
        new_ops = fn.ops
        results = fn.results
    # DCE
    live: set[int] = {id(v) for v in results}
    kept: list[Operation] = []
    keep = kept.append
    update = live.update
    for op in reversed(new_ops):
        if id(op.result) in live:
            keep(op)
            if op.operands:
                update(map(id, op.operands))
    if len(kept) != len(new_ops):
        changed = True
    kept.reverse()
    if not rename:
        if not changed:
            return fn
        return fn.rebuilt(kept, list(results))
    # renumbering, skipped when the names are already canonical
    params = fn.params
    if params:
        taken = {p.name for p in params}
        counter = 0
        canonical = True
        for op in kept:
            while str(counter) in taken:
                counter += 1
            if op.result.name != str(counter):
                canonical = False
                break
            counter += 1
    else:  # the common case: %0, %1, ... exactly
        canonical = True
        counter = 0
        for op in kept:
            if op.result.name != str(counter):
                canonical = False
                break
            counter += 1
    if canonical:
        return fn.rebuilt(kept, list(results))
    return renumber(fn.rebuilt(kept, list(results)))


def canonicalize_module(module: Module, *, rename: bool = True) -> Module:
    return Module([canonicalize(f, rename=rename) for f in module.functions])


__all__ = ["canonicalize", "canonicalize_module", "constant_folding", "algebraic_simplification",
           "common_subexpression_elimination", "dead_code_elimination", "renumber", "rewrite",
           "combined_rule"]
