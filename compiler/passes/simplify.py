"""Algebraic simplification: the rewrite rules of ``mind.ir.rewrite_rules``, executed.

The rules are data (source pattern, result, dtypes, side conditions) that ``mind verify
--rewrites`` proves for every dtype they apply to; this module only matches them.  For each op it
tries the rules rooted at that op name, in table order, and applies the first whose pattern
matches, whose dtype set holds the op's result dtype and whose conditions all evaluate to ``True``
over the function's ``Arith`` (an undecided symbolic condition does not fire).  The table and why
each rule is exact are in ``docs/rewrites.md``.
"""

from __future__ import annotations

from typing import Any, Callable

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

    def __init__(self, result: Value, values: dict[str, Value], attrs: dict[str, Any]) -> None:
        self.values = values
        self.attrs = attrs
        self.result = result

    def attr(self, name: str) -> Any:
        return self.attrs[name]

    def shape(self, var: str) -> tuple[Any, ...]:
        return (self.result if var == "result" else self.values[var]).type.shape

    def dtype(self, var: str) -> Any:
        return (self.result if var == "result" else self.values[var]).type.dtype


# A pattern compiles to a matcher ``step(value, ctx, values, attrs) -> bool`` that binds into the
# two dicts: closures specialised to the pattern, since the canonicalizer runs them on every op a
# rule may rewrite.
Step = Callable[[Value, RewriteContext, dict, dict], bool]


def _compile(pat: Any) -> Step:
    if isinstance(pat, Var):
        name = pat.name

        def var(v: Value, ctx: RewriteContext, values: dict, attrs: dict) -> bool:
            prior = values.get(name)
            if prior is None:
                values[name] = v
                return True
            return prior is v  # a name used twice is one SSA value
        return var
    if isinstance(pat, Lit):
        lit = pat.literal
        dtypes = frozenset(lit.dtypes)

        def literal(v: Value, ctx: RewriteContext, values: dict, attrs: dict) -> bool:
            dtype = v.type.dtype
            if dtype not in dtypes:
                return False
            s = _splat_value(ctx, v)
            return s is not None and lit.matches(s, dtype)
        return literal
    name, inner = pat.op, _compile_op(pat)

    def produced(v: Value, ctx: RewriteContext, values: dict, attrs: dict) -> bool:
        p = ctx.defining_op(v)
        return p is not None and p.op == name and inner(p, p.operands, ctx, values, attrs)
    return produced


_NEW, _SAME, _SUB = 0, 1, 2  # a first use of a name, a repeated name, any other sub-pattern


def _compile_op(pat: Op) -> Callable[[Operation, tuple[Value, ...], RewriteContext, dict, dict], bool]:
    """A matcher of ``pat``'s attributes and operands against an op and its operands (names are
    bound inline; literals and nested ops through their compiled steps)."""
    binds = pat.attrs
    plan = []
    seen: set[str] = set()
    for i, o in enumerate(pat.operands):
        if isinstance(o, Var):
            plan.append((i, _SAME if o.name in seen else _NEW, o.name, None))
            seen.add(o.name)
        else:
            plan.append((i, _SUB, "", _compile(o)))
    steps = tuple(plan)

    def match(op: Operation, xs: tuple[Value, ...], ctx: RewriteContext, values: dict, attrs: dict) -> bool:
        if binds:
            a = op.attrs
            for key, var in binds:
                attrs[var] = a[key]
        for i, kind, name, sub in steps:
            v = xs[i]
            if kind == _NEW:
                prior = values.get(name)
                if prior is None:
                    values[name] = v
                elif prior is not v:
                    return False
            elif kind == _SAME:
                if values[name] is not v:
                    return False
            elif not sub(v, ctx, values, attrs):
                return False
        return True
    return match


def _attr_order(op: str) -> tuple[str, ...]:
    from mind.spec.ops import OPS

    return tuple(a.name for a in OPS[op].attrs)


class _Compiled:
    """A rule ready to run: its dtypes as a set, its pattern as a matcher, its conditions, and
    for a ``Build`` result the spec's attribute order."""

    __slots__ = ("rule", "dtypes", "match", "conds", "order", "fns")

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.dtypes = frozenset(rule.dtypes)
        self.match = _compile_op(rule.source)
        self.conds = tuple(c.fn for c in rule.where)
        res = rule.result
        if isinstance(res, Build):
            if not all(isinstance(o, Var) for o in res.operands):
                raise ValueError(f"rule {rule.name}: a built op takes pattern values only")
            fns = dict(res.attrs)
            self.order = tuple(k for k in _attr_order(res.op) if k in fns)
            self.fns = tuple(fns[k].fn for k in self.order)
        else:
            self.order, self.fns = (), ()

    def bind(self, op: Operation, xs: tuple[Value, ...], ctx: RewriteContext) -> _Match | None:
        """The bindings if the pattern matches and every condition evaluates to True."""
        values: dict[str, Value] = {}
        attrs: dict[str, Any] = {}
        if not self.match(op, xs, ctx, values, attrs):
            return None
        m = _Match(op.result, values, attrs)
        if self.conds:
            A = ctx.arith
            for fn in self.conds:
                if fn(A, m) is not True:
                    return None
        return m

    def result(self, m: _Match, A: Any, op: Operation) -> Value | Operation:
        res = self.rule.result
        if isinstance(res, Var):
            return m.values[res.name]
        attrs = {k: fn(A, m) for k, fn in zip(self.order, self.fns)}
        return Operation(res.op, tuple(m.values[o.name] for o in res.operands), attrs, op.result, op.span)


def _by_op() -> dict[tuple[str, Any], tuple[_Compiled, ...]]:
    """The rules to try for an op name and result dtype, in table order."""
    from mind.spec.dtypes import ALL_DTYPES

    table: dict[tuple[str, Any], list[_Compiled]] = {}
    for rule in RULES:
        if rule.kind == REWRITE:
            c = _Compiled(rule)
            for d in ALL_DTYPES:
                if d in c.dtypes:
                    table.setdefault((rule.source.op, d), []).append(c)
    return {k: tuple(v) for k, v in table.items()}


BY_OP = _by_op()
RULE_OPS = frozenset(name for name, _ in BY_OP)  # ops some rule may rewrite


def _first_match(op: Operation, xs: tuple[Value, ...], ctx: RewriteContext) -> tuple[_Compiled, _Match] | None:
    """The first rule of the table that applies to ``op`` (operands ``xs``), with its bindings."""
    for c in BY_OP.get((op.op, op.result.type.dtype), ()):
        m = c.bind(op, xs, ctx)
        if m is not None:
            return c, m
    return None


def simplify_rule(op: Operation, xs: tuple[Value, ...], ctx: RewriteContext) -> Value | Operation | None:
    """The first rule of the table that applies to ``op`` (operands ``xs``), applied; else None."""
    for c in BY_OP.get((op.op, op.result.type.dtype), ()):
        m = c.bind(op, xs, ctx)
        if m is not None:
            return c.result(m, ctx.arith, op)
    return None


def rule_for(op: Operation, xs: tuple[Value, ...], ctx: RewriteContext) -> Rule | None:
    """The rule ``simplify_rule`` applies to ``op``, if any (for tests and reports)."""
    hit = _first_match(op, xs, ctx)
    return None if hit is None else hit[0].rule


# ------------------------------------------------------------------------------------------------
# the canonicalizer's pre-check: can any rule fire on this op?  (derived from the patterns)
# ------------------------------------------------------------------------------------------------


def _may_be(p: Operation, v: Value, lits: tuple[Any, ...]) -> bool:
    """Whether the constant ``p`` (producing ``v``) may hold one of ``lits``: decided from the
    Python literal of a deferred float splat, assumed for any other constant."""
    hint = p.hint
    if hint is None or not v.type.dtype.is_float:
        return True
    x = hint.value
    if type(x) is not int and type(x) is not float:
        return True
    for lit in lits:
        if lit.may_round_to(x):
            return True
    return False


class _Needs:
    """What the rules for one op name and dtype need of the op's operands before one of them can
    match, as a union over the rules (a pre-check only has to be conservative): a constant that
    may be one of the literals at a ``Lit`` position, or one value at the two positions of a
    repeated ``Var``.  ``always``: some rule needs neither (it must be tried).  ``met`` is
    specialised to the common layouts (it runs on every candidate op of every compilation)."""

    __slots__ = ("always", "literals", "same", "met")

    def __init__(self, patterns: list[Op]) -> None:
        literals: dict[int, list[Any]] = {}
        same: list[tuple[int, int]] = []
        always = False
        for pat in patterns:
            first: dict[str, int] = {}
            needs = False
            for i, o in enumerate(pat.operands):
                if isinstance(o, Lit):
                    literals.setdefault(i, []).append(o.literal)
                    needs = True
                elif isinstance(o, Var):
                    if o.name in first:
                        same.append((first[o.name], i))
                        needs = True
                    else:
                        first[o.name] = i
            always = always or not needs
        self.always = always
        self.literals = tuple((i, tuple(lits)) for i, lits in sorted(literals.items()))
        self.same = tuple(same)
        self.met = self._specialised()

    def _specialised(self) -> Callable[[tuple[Value, ...], dict[Value, Operation]], bool]:
        same, lits = self.same, self.literals
        if not same and len(lits) == 1:
            (i, ls), = lits

            def one(xs: tuple[Value, ...], consts: dict[Value, Operation]) -> bool:
                p = consts.get(xs[i])
                return p is not None and _may_be(p, xs[i], ls)
            return one
        if not same and len(lits) == 2:
            (i, ls), (j, ms) = lits

            def two(xs: tuple[Value, ...], consts: dict[Value, Operation]) -> bool:
                p = consts.get(xs[i])
                if p is not None and _may_be(p, xs[i], ls):
                    return True
                q = consts.get(xs[j])
                return q is not None and _may_be(q, xs[j], ms)
            return two
        if len(same) == 1 and len(lits) == 1:
            (a, b), = same
            (i, ls), = lits

            def same_or_one(xs: tuple[Value, ...], consts: dict[Value, Operation]) -> bool:
                if xs[a] is xs[b]:
                    return True
                p = consts.get(xs[i])
                return p is not None and _may_be(p, xs[i], ls)
            return same_or_one

        def general(xs: tuple[Value, ...], consts: dict[Value, Operation]) -> bool:
            for a, b in same:
                if xs[a] is xs[b]:
                    return True
            for i, ls in lits:
                p = consts.get(xs[i])
                if p is not None and _may_be(p, xs[i], ls):
                    return True
            return False
        return general


def _needs_by_op() -> dict[str, dict[Any, _Needs]]:
    out: dict[str, dict[Any, _Needs]] = {}
    for (name, dtype), compiled in BY_OP.items():
        out.setdefault(name, {})[dtype] = _Needs([c.rule.source for c in compiled])
    return out


NEEDS = _needs_by_op()  # op name -> result dtype -> what its rules need of the operands

#: Ops every rule of which needs a constant operand: skipped at once when none is constant.
NEED_CONST = frozenset(name for name, by_dtype in NEEDS.items()
                       if all(not n.always and not n.same for n in by_dtype.values()))


def may_fire(op: Operation, operands: tuple[Value, ...], consts: dict[Value, Operation]) -> bool:
    """False only when no rule for ``op`` (its name and result dtype) can match these operands
    (``consts``: the values produced by ``const`` ops, to their op)."""
    needs = NEEDS[op.op].get(op.result.type.dtype)
    if needs is None:
        return False
    return needs.always or needs.met(operands, consts)


def algebraic_simplification(fn):
    return rewrite(fn, simplify_rule)
