"""The one mechanism all canonicalization passes share: rebuild a function op by op.

A pass is a function ``rule(op, operands, ctx) -> Value | Operation | None`` applied to every op in
order, with operands already replaced by earlier rewrites.  Returning an existing ``Value``
replaces the op's result by it; returning an ``Operation`` substitutes it; ``None`` keeps the op.
"""

from __future__ import annotations

from typing import Callable

from mind.ir.core import Function, Operation, Value
from mind.spec.dims import INT_ARITH

class RewriteContext:
    """What a rule may look at besides its op: the function being rewritten and the producer of
    each value among the ops kept so far (``defining_op``; read ``producer`` through it, as a walk
    may fill it lazily)."""

    def __init__(self, fn: Function, kept: list[Operation] | None = None):
        self.fn = fn
        self._arith = None
        # result -> the op producing it in the rewritten function (``Value`` compares and hashes
        # by identity, so it is its own key)
        self.producer: dict[Value, Operation] = {}
        self.splats: dict[int, object] = {}  # id(const op) -> its splat scalar or None (simplify)
        # ``kept``: the list of kept ops a walk appends to; their producers are recorded when a
        # rule first asks (``canonicalize`` calls a rule on few ops, so most never need it)
        self._kept = kept
        self._recorded = 0

    @property
    def arith(self):
        """The function's ``SymArith`` (its assumptions as facts); the shared one when it has none,
        as most functions do (building one costs more than a rule's condition)."""
        if self._arith is None:
            self._arith = self.fn.arith() if self.fn.assumptions else INT_ARITH
        return self._arith

    def defining_op(self, v: Value) -> Operation | None:
        p = self.producer.get(v)
        if p is None and self._kept is not None and self._recorded < len(self._kept):
            self._record()
            p = self.producer.get(v)
        return p

    def _record(self) -> None:
        """Add the producers of the ops appended to ``kept`` since the last call."""
        kept = self._kept
        producer = self.producer
        for op in kept[self._recorded:]:  # type: ignore[index]
            producer[op.result] = op
        self._recorded = len(kept)  # type: ignore[arg-type]


# Defined after ``RewriteContext`` so that it needs no string forward references (typing compiles
# those at import).
Rule = Callable[[Operation, tuple[Value, ...], RewriteContext], Value | Operation | None]


def rewrite(fn: Function, rule: Rule) -> Function:
    ctx = RewriteContext(fn)
    replace: dict[int, Value] = {}
    new_ops: list[Operation] = []
    changed = False
    for op in fn.ops:
        operands = tuple(replace.get(id(v), v) for v in op.operands)
        if operands != op.operands:
            op = Operation(op.op, operands, op.attrs, op.result, op.span)
        out = rule(op, operands, ctx)
        if isinstance(out, Value):
            replace[id(op.result)] = out
            changed = True
            continue
        if isinstance(out, Operation):
            if out.result is not op.result:
                replace[id(op.result)] = out.result
            op = out
            changed = True
        new_ops.append(op)
        ctx.producer[op.result] = op
    if not changed:
        return fn  # passes signal "nothing to do" by identity, so canonicalize stops early
    results = [replace.get(id(v), v) for v in fn.results]
    return fn.rebuilt(new_ops, results)


def dead_code_elimination(fn: Function) -> Function:
    """Drop ops whose results no result depends on (every Core IR op is pure)."""
    live: set[int] = {id(v) for v in fn.results}
    kept: list[Operation] = []
    for op in reversed(fn.ops):
        if id(op.result) in live:
            kept.append(op)
            live.update(id(v) for v in op.operands)
    if len(kept) == len(fn.ops):
        return fn
    kept.reverse()
    return fn.rebuilt(kept, list(fn.results))


def renumber(fn: Function) -> Function:
    """Canonical names: parameters keep theirs, op results become %0, %1, … in program order."""
    taken = {p.name for p in fn.params}
    counter = 0
    mapping: dict[int, Value] = {id(p): p for p in fn.params}
    ops: list[Operation] = []
    for op in fn.ops:
        while str(counter) in taken:
            counter += 1
        result = Value(str(counter), op.result.type, op.result.span)
        counter += 1
        mapping[id(op.result)] = result
        ops.append(op.replaced(tuple([mapping[id(v)] for v in op.operands]), result))
    return fn.rebuilt(ops, [mapping[id(v)] for v in fn.results])
