"""Algebraic simplification: the rewrite rules of ``mind.ir.rewrite_rules``, executed.

The rules are data (source pattern, result, dtypes, side conditions) that ``mind verify
--rewrites`` proves for every dtype they apply to; this module only matches them.  For each op it
tries the rules rooted at that op name, in table order, and applies the first whose pattern
matches, whose dtype set holds the op's result dtype and whose conditions all evaluate to ``True``
over the function's ``Arith`` (an undecided symbolic condition does not fire).  The table and why
each rule is exact are in ``docs/rewrites.md``.
"""

from __future__ import annotations

from typing import Any

from mind.ir.core import Operation, Value
from mind.ir.rewrite_rules import REWRITE, RULES, Bindings, Build, Lit, Op, Rule, Var
from mind.compiler.passes.fold import is_splat
from mind.compiler.passes.rewrite import RewriteContext, rewrite


def _splat_value(ctx: RewriteContext, v: Value) -> Any | None:
    """The scalar if ``v`` is a constant whose elements are all bit-identical, else None."""
    op = ctx.defining_op(v)
    if op is None or op.op != "const":
        return None
    memo = ctx.splats
    key = id(op)
    if key in memo:
        return memo[key]
    hint = op.hint
    if hint is not None:  # a deferred splat constant: its element, without building the array
        s = memo[key] = hint.scalar() if hint.size else None
        return s
    s = memo[key] = _splat_scalar(op.attrs["value"])
    return s


def _splat_scalar(arr: Any) -> Any | None:
    import numpy as np

    if type(arr) is np.ndarray and arr.size:
        ndim = arr.ndim
        if ndim == 0 or not any(arr.strides):  # a scalar or a zero-strided splat view
            return arr[(0,) * ndim]
    if arr.size == 0 or not is_splat(arr):
        return None
    return np.asarray(arr).reshape(-1)[0]


class _Match(Bindings):
    """The values and attributes a pattern bound, read by the rule's conditions."""

    __slots__ = ("values", "attrs", "result")

    def __init__(self, result: Value) -> None:
        self.values: dict[str, Value] = {}
        self.attrs: dict[str, Any] = {}
        self.result = result

    def attr(self, name: str) -> Any:
        return self.attrs[name]

    def shape(self, var: str) -> tuple[Any, ...]:
        return (self.result if var == "result" else self.values[var]).type.shape

    def dtype(self, var: str) -> Any:
        return (self.result if var == "result" else self.values[var]).type.dtype


def _match(pat: Any, v: Value, ctx: RewriteContext, m: _Match) -> bool:
    kind = pat.__class__
    if kind is Var:
        prior = m.values.get(pat.name)
        if prior is None:
            m.values[pat.name] = v
            return True
        return prior is v  # a name used twice is one SSA value
    if kind is Lit:
        s = _splat_value(ctx, v)
        return s is not None and pat.literal.matches(s, v.type.dtype)
    p = ctx.defining_op(v)
    return p is not None and p.op == pat.op and _match_op(pat, p, p.operands, ctx, m)


def _match_op(pat: Op, op: Operation, operands: tuple[Value, ...], ctx: RewriteContext, m: _Match) -> bool:
    if pat.attrs:
        attrs = op.attrs
        for key, name in pat.attrs:
            m.attrs[name] = attrs[key]
    for sub, v in zip(pat.operands, operands):
        if not _match(sub, v, ctx, m):
            return False
    return True


def _attr_order(op: str) -> tuple[str, ...]:
    from mind.spec.ops import OPS

    return tuple(a.name for a in OPS[op].attrs)


class _Compiled:
    """A rule ready to run: its dtypes as a set and, for a ``Build``, the spec's attribute order."""

    __slots__ = ("rule", "dtypes", "order")

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.dtypes = frozenset(rule.dtypes)
        res = rule.result
        if isinstance(res, Build):
            if not all(isinstance(o, Var) for o in res.operands):
                raise ValueError(f"rule {rule.name}: a built op takes pattern values only")
            self.order = _attr_order(res.op)
        else:
            self.order = ()

    def result(self, m: _Match, A: Any, op: Operation) -> Value | Operation:
        res = self.rule.result
        if isinstance(res, Var):
            return m.values[res.name]
        fns = dict(res.attrs)
        attrs = {k: fns[k].fn(A, m) for k in self.order if k in fns}
        return Operation(res.op, tuple(m.values[o.name] for o in res.operands), attrs, op.result, op.span)


def _by_op() -> dict[str, tuple[_Compiled, ...]]:
    table: dict[str, list[_Compiled]] = {}
    for rule in RULES:
        if rule.kind == REWRITE:
            table.setdefault(rule.source.op, []).append(_Compiled(rule))
    return {k: tuple(v) for k, v in table.items()}


BY_OP = _by_op()
RULE_OPS = frozenset(BY_OP)  # ops some rule may rewrite


def _first_match(op: Operation, xs: tuple[Value, ...], ctx: RewriteContext) -> tuple[_Compiled, _Match] | None:
    """The first rule of the table that applies to ``op`` (operands ``xs``), with its bindings."""
    compiled = BY_OP.get(op.op)
    if compiled is None:
        return None
    dtype = op.result.type.dtype
    for c in compiled:
        if dtype not in c.dtypes:
            continue
        m = _Match(op.result)
        if not _match_op(c.rule.source, op, xs, ctx, m):
            continue
        A = ctx.arith
        for cond in c.rule.where:
            if cond.fn(A, m) is not True:
                break
        else:
            return c, m
    return None


def simplify_rule(op: Operation, xs: tuple[Value, ...], ctx: RewriteContext) -> Value | Operation | None:
    """The first rule of the table that applies to ``op`` (operands ``xs``), applied; else None."""
    hit = _first_match(op, xs, ctx)
    if hit is None:
        return None
    c, m = hit
    return c.result(m, ctx.arith, op)


def rule_for(op: Operation, xs: tuple[Value, ...], ctx: RewriteContext) -> Rule | None:
    """The rule ``simplify_rule`` applies to ``op``, if any (for tests and reports)."""
    hit = _first_match(op, xs, ctx)
    return None if hit is None else hit[0].rule


# ------------------------------------------------------------------------------------------------
# the canonicalizer's pre-check: can any rule fire on this op?  (derived from the patterns)
# ------------------------------------------------------------------------------------------------


class _Needs:
    """What a rule's root pattern needs of the op's operands before it can match: a constant at
    each ``Lit`` position, and the same value at the positions of a repeated ``Var``."""

    __slots__ = ("literals", "same")

    def __init__(self, pat: Op) -> None:
        self.literals = tuple((i, o.literal) for i, o in enumerate(pat.operands) if isinstance(o, Lit))
        first: dict[str, int] = {}
        same = []
        for i, o in enumerate(pat.operands):
            if isinstance(o, Var):
                if o.name in first:
                    same.append((first[o.name], i))
                else:
                    first[o.name] = i
        self.same = tuple(same)

    def met(self, operands: tuple[Value, ...], consts: dict[Value, Operation]) -> bool:
        for i, j in self.same:
            if operands[i] is not operands[j]:
                return False
        for i, lit in self.literals:
            v = operands[i]
            p = consts.get(v)
            if p is None:
                return False
            hint = p.hint
            if hint is not None and v.type.dtype.is_float:
                x = hint.value
                if (type(x) is int or type(x) is float) and not lit.may_round_to(x):
                    return False  # a float splat that cannot round to the literal
        return True


def _needs_by_op() -> dict[str, tuple[_Needs, ...] | None]:
    out: dict[str, tuple[_Needs, ...] | None] = {}
    for name, compiled in BY_OP.items():
        needs = tuple(_Needs(c.rule.source) for c in compiled)
        out[name] = None if any(not n.literals and not n.same for n in needs) else needs
    return out


_NEEDS = _needs_by_op()


def may_fire(name: str, operands: tuple[Value, ...], consts: dict[Value, Operation]) -> bool:
    """False only when no rule of ``name`` can match these operands (``consts``: the values
    produced by ``const`` ops, to their op); True for an op with a rule that needs nothing."""
    needs = _NEEDS.get(name, ())
    if needs is None:
        return True
    for n in needs:
        if n.met(operands, consts):
            return True
    return False


def algebraic_simplification(fn):
    return rewrite(fn, simplify_rule)
