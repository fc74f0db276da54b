"""Canonicalization: constant folding, exact algebraic simplification, CSE and DCE.

Every rule looks only at an op and the producers of its operands, which a forward walk has already
rewritten, so one walk that applies fold → simplify → CSE to each op (repeating on an op while a
rule changes it) reaches the fixed point; DCE and renumbering follow.  The output is deterministic,
verifies, and (with ``rename=True``) names op results %0, %1, … in program order.

Speed: ``canonicalize`` runs the walk of ``rewrite(fn, combined_rule())`` fused with cheap
pre-checks, so a rule is called only when it can fire (``fold_rule`` needs every operand produced
by a ``const``; ``simplify.may_fire`` reads from the rule patterns what an op's operands must be:
a ``const`` where a pattern has a literal, one value where it repeats a name; ops with no rule are
skipped); the producer map the rules read is filled only when one runs.  CSE
first buckets ops by a coarse key (op, operands, result shape; for a constant its dtype, shape and,
if small, its bytes), a projection of ``cse.op_key``, and computes the full keys only inside a
bucket that already holds an op, so the result is exactly that of the dict of full keys.  DCE
first checks whether every op's result is used (then nothing is dead), else makes one backward
pass; when the names are already canonical (``%0, %1, …`` in order, as the frontend emits them)
the operations are reused instead of being renumbered (the returned ``Function`` and its lists are
new unless ``rename`` is false and nothing changed).
"""

from __future__ import annotations

from typing import Callable

from mind.ir.core import RESULT_NAMES, Function, Module, Operation, TensorType, Value
from mind.compiler.passes.cse import COMMUTATIVE, common_subexpression_elimination, cse_rule, op_key
from mind.compiler.passes.fold import constant_folding, fold_rule
from mind.compiler.passes.rewrite import RewriteContext, dead_code_elimination, renumber, rewrite
from mind.compiler.passes.simplify import (NEED_CONST, NEEDS, RULE_OPS, algebraic_simplification, may_fire,
                                           rule_for, simplify_rule)

MAX_STEPS_PER_OP = 8


def combined_rule(observe: Callable[[str], None] | None = None):
    """Fold → simplify (repeated) → CSE on one op.  ``observe`` (for ``mind audit``) is told what
    changed each op: ``"fold"``, a rewrite rule's name (``mind.ir.rewrite_rules``) or ``"cse"``."""
    cse = cse_rule()

    def rule(op: Operation, operands: tuple[Value, ...], ctx: RewriteContext) -> Value | Operation | None:
        current, changed = op, False
        for _ in range(MAX_STEPS_PER_OP):
            out = fold_rule(current, current.operands, ctx)
            if out is None:
                fired = rule_for(current, current.operands, ctx) if observe is not None else None
                out = simplify_rule(current, current.operands, ctx)
                if fired is not None and out is not None:
                    observe(fired.name)  # type: ignore[misc]
            elif observe is not None:
                observe("fold")
            if out is None:
                break
            if isinstance(out, Value):
                return out
            current, changed = out, True
        prior = cse(current, current.operands, ctx)
        if prior is not None:
            if observe is not None:
                observe("cse")
            return prior
        return current if changed else None

    return rule


_RULE_OPS = RULE_OPS  # ops a rule may rewrite without all operands constant
_COMMUTATIVE = COMMUTATIVE
_SMALL_CONST = 64  # constants of at most this many elements bucket on their bytes


def _const_coarse_key(op: Operation, t: TensorType) -> tuple:
    """The CSE bucket of a ``const``: dtype, shape and, for a small constant, its bytes (a
    projection of ``op_key``: equal full keys give equal coarse keys)."""
    hint = op.hint
    if hint is not None:
        if hint.size > _SMALL_CONST:  # a large deferred splat: no bytes needed
            return ("const", t.dtype, t.shape, None)
        if hint.size:  # a small deferred splat: its bytes, unbuilt
            try:
                return ("const", t.dtype, t.shape, hint.scalar().tobytes() * hint.size)
            except Exception:  # pragma: no cover - fall back to the array
                pass
    arr = op.attrs.get("value")
    small = None
    try:
        if arr.size <= _SMALL_CONST:
            small = arr.tobytes()
    except Exception:  # pragma: no cover - not an array: bucket by type only
        small = None
    return ("const", t.dtype, t.shape, small)


def _first_step(op: Operation, operands: tuple[Value, ...], nconst: int,
                consts: dict[Value, Operation], ctx: RewriteContext) -> Value | Operation | None:
    """The first fold → simplify step of ``combined_rule`` on a non-``const`` op with ``nconst``
    constant operands, calling a rule only where a pre-check says it can fire (``may_fire``,
    derived from the rule patterns)."""
    name = op.op
    if nconst and nconst == len(operands):
        out = fold_rule(op, operands, ctx)
        if out is not None:
            return out
    if name in _RULE_OPS and (nconst or name not in NEED_CONST):
        needs = NEEDS[name].get(op.result.type.dtype)  # ``may_fire``, inline
        if needs is None:
            return None
        if needs.always or needs.met(operands, consts):
            return simplify_rule(op, operands, ctx)
    return None


def _more_steps(current: Operation, consts: dict[Value, Operation],
                ctx: RewriteContext) -> Value | Operation:
    """Further fold → simplify steps on an op a rule has just rewritten (``combined_rule``'s loop,
    at most ``MAX_STEPS_PER_OP`` steps in all): the final op, or the value replacing it."""
    for _ in range(MAX_STEPS_PER_OP - 1):
        name = current.op
        xs = current.operands
        out = None
        if name != "const" and xs and all(v in consts for v in xs):
            out = fold_rule(current, xs, ctx)
        if out is None and name in _RULE_OPS and may_fire(current, xs, consts):
            out = simplify_rule(current, xs, ctx)
        if out is None:
            break
        if out.__class__ is Value:
            return out
        current = out
    return current


def _cse_prior(bucket: list[Operation], op: Operation, keys: dict[int, tuple]) -> Value | None:
    """The result of an op of ``bucket`` with the same full ``op_key`` as ``op`` (full keys are
    computed only here, memoized in ``keys`` by op id); else adds ``op`` to the bucket."""
    full = op_key(op, op.operands)
    for other in bucket:
        k = keys.get(id(other))
        if k is None:
            k = keys[id(other)] = op_key(other, other.operands)
        if k == full:
            return other.result
    keys[id(op)] = full
    bucket.append(op)
    return None


def _coarse_key(op: Operation) -> tuple:
    """The CSE bucket of ``op``: a projection of ``op_key`` (equal full keys give equal coarse
    keys), cheap to compute: the op, its operands (as a multiset for a commutative op) and result
    shape; for a constant, ``_const_coarse_key``."""
    name = op.op
    t = op.result.type
    if name == "const":
        return _const_coarse_key(op, t)
    xs = op.operands
    return (name, _commuted(xs) if name in _COMMUTATIVE else xs, t.shape)


def _commuted(xs: tuple[Value, ...]) -> tuple[Value, ...]:
    """The operands of a commutative op in a canonical order (by identity): equal as multisets
    gives equal tuples."""
    if len(xs) == 2:
        a, b = xs
        return xs if id(a) <= id(b) else (b, a)
    return tuple(sorted(xs, key=id))


class _Walk:
    """The rewrite walk of ``rewrite(fn, combined_rule())``: fold → simplify (repeated while a
    rule rewrites the op), then CSE, on each op with its operands already replaced.

    It runs on every op of every compilation, so ``run`` keeps the common case (no rule can fire,
    no duplicate) inline; rewrites and merges are methods.  The producer map the rules read
    (``RewriteContext.defining_op``) is filled only when a rule asks."""

    __slots__ = ("ops", "used", "consts", "replace", "seen", "buckets", "keys", "ctx", "changed")

    def __init__(self, fn: Function) -> None:
        self.ops: list[Operation] = []  # the kept ops, in order
        self.used: set[Value] = set()  # the operands of the kept ops (``_live``)
        self.consts: dict[Value, Operation] = {}  # the results of the kept ``const`` ops
        self.replace: dict[Value, Value] = {}  # result of a removed op -> the value replacing it
        # CSE: coarse key -> the first kept op under it; the keys shared by several kept ops ->
        # all of them (most keys have one op, which needs no list)
        self.seen: dict[tuple, Operation] = {}
        self.buckets: dict[tuple, list[Operation]] = {}
        self.keys: dict[int, tuple] = {}  # full CSE keys computed so far (``_cse_prior``)
        self.ctx = RewriteContext(fn, self.ops)
        self.changed = False

    def run(self, fn: Function) -> tuple[list[Operation], list[Value], bool]:
        """The new ops, the results and whether anything changed (if not, ``fn``'s own lists)."""
        append = self.ops.append
        use = self.used.update
        consts = self.consts
        replace = self.replace
        seen = self.seen
        for op in fn.ops:
            name = op.op
            if name == "const":  # no operands, so no rule: CSE only
                t = op.result.type
                hint = op.hint
                if hint is not None and hint.size > _SMALL_CONST:  # (``_const_coarse_key``)
                    ck: tuple = ("const", t.dtype, t.shape, None)
                else:
                    ck = _const_coarse_key(op, t)
                first = seen.setdefault(ck, op)
                if first is not op and self._merged(ck, first, op, op.result):
                    continue
                append(op)
                consts[op.result] = op
                continue
            operands = op.operands
            if replace:
                new = tuple([replace.get(v, v) for v in operands])
                if new != operands:
                    op = Operation(name, new, op.attrs, op.result, op.span)
                    operands = new
            nconst = 0
            for v in operands:
                if v in consts:
                    nconst += 1
            if nconst == len(operands) or name in _RULE_OPS:
                out = _first_step(op, operands, nconst, consts, self.ctx)
                if out is not None:
                    self._rewritten(op, out)
                    continue
            # CSE (``_coarse_key``, inline)
            ck = (name, _commuted(operands) if name in _COMMUTATIVE else operands,
                  op.result.type.shape)
            first = seen.setdefault(ck, op)
            if first is not op and self._merged(ck, first, op, op.result):
                continue
            append(op)
            use(operands)
        if not self.changed:
            return fn.ops, fn.results, False
        return self.ops, [replace.get(v, v) for v in fn.results], True

    def _merged(self, ck: tuple, first: Operation, op: Operation, result: Value) -> bool:
        """CSE of ``op`` against the kept ops of coarse key ``ck`` (``first`` is the first of
        them): if one computes the same, ``result`` is replaced by its result (True); else ``op``
        joins them (False)."""
        bucket = self.buckets.get(ck)
        if bucket is None:
            bucket = self.buckets[ck] = [first]
        prior = _cse_prior(bucket, op, self.keys)
        if prior is None:
            return False
        self.replace[result] = prior
        self.changed = True
        return True

    def _rewritten(self, op: Operation, out: Value | Operation) -> None:
        """Apply a rule's rewrite of ``op``: a value replaces its result; a new op (after the
        further steps of ``_more_steps``) is merged by CSE or kept in its place."""
        self.changed = True
        if out.__class__ is not Value:
            out = _more_steps(out, self.consts, self.ctx)  # type: ignore[arg-type]
        if out.__class__ is Value:
            self.replace[op.result] = out  # type: ignore[assignment]
            return
        current: Operation = out  # type: ignore[assignment]
        ck = _coarse_key(current)
        first = self.seen.setdefault(ck, current)
        if first is not current and self._merged(ck, first, current, op.result):
            return
        if current.result is not op.result:
            self.replace[op.result] = current.result
        self.ops.append(current)
        self.used.update(current.operands)
        if current.op == "const":
            self.consts[current.result] = current


def _live(ops: list[Operation], results: list[Value], used: set[Value]) -> list[Operation]:
    """DCE: the ops some result depends on, in order (every op is pure); ``used`` holds the
    operands of ``ops`` (it is updated).

    When every op's result is a result or an operand, no op is dead (by induction from the last
    op, as an op's users come after it): that common case is checked first, with one set lookup
    per op.  Otherwise one backward pass finds the live ops."""
    used.update(results)
    for op in ops:
        if op.result not in used:
            break
    else:
        return list(ops)
    live = set(results)
    update = live.update
    kept: list[Operation] = []
    keep = kept.append
    for op in reversed(ops):
        if op.result in live:
            keep(op)
            update(op.operands)
    kept.reverse()
    return kept


def _names_canonical(params: list[Value], ops: list[Operation]) -> bool:
    """Whether ``renumber`` would leave every result name as it is: ``%0, %1, ...`` in order,
    skipping the parameters' names."""
    if params or len(ops) > len(RESULT_NAMES):
        taken = {p.name for p in params}
        counter = 0
        for op in ops:
            while str(counter) in taken:
                counter += 1
            if op.result.name != str(counter):
                return False
            counter += 1
        return True
    for op, name in zip(ops, RESULT_NAMES):  # compared, not formatted per op
        if op.result.name != name:
            return False
    return True


def _single_const(fn: Function, rename: bool) -> Function | None:
    """``canonicalize`` of a function that is one ``const`` returned as is (e.g. a program
    folded to a constant): nothing to fold, simplify or merge.  None when that is not the case."""
    op = fn.ops[0]
    results = fn.results
    if op.op == "const" and len(results) == 1 and results[0] is op.result:
        if not rename:
            return fn
        if op.result.name == "0":
            return fn.rebuilt([op], [op.result])
    return None


def canonicalize(fn: Function, *, rename: bool = True) -> Function:
    """Fold, simplify, CSE, DCE and (with ``rename``) renumber ``fn``: exactly
    ``renumber(dead_code_elimination(rewrite(fn, combined_rule())))``, in one forward and one
    backward walk (``tests/frontend/test_speed_canonicalize.py`` checks they agree).  The
    operations are reused when the names are already canonical; the ``Function`` is new unless
    ``rename`` is false and nothing changed."""
    if len(fn.ops) == 1 and not fn.params:
        done = _single_const(fn, rename)
        if done is not None:
            return done
    walk = _Walk(fn)
    new_ops, results, changed = walk.run(fn)
    kept = _live(new_ops, results, walk.used)
    if not rename:
        return fn.rebuilt(kept, list(results)) if changed or len(kept) != len(new_ops) else fn
    out = fn.rebuilt(kept, list(results))
    return out if _names_canonical(fn.params, kept) else renumber(out)


def canonicalize_module(module: Module, *, rename: bool = True) -> Module:
    return Module([canonicalize(f, rename=rename) for f in module.functions])


__all__ = ["canonicalize", "canonicalize_module", "constant_folding", "algebraic_simplification",
           "common_subexpression_elimination", "dead_code_elimination", "renumber", "rewrite",
           "combined_rule"]
