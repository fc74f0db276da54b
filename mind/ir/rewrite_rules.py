"""The canonicalizer's rewrite rules, as data: the one table the passes execute and the verifier proves.

A ``Rule`` names a source pattern, the result that replaces it, the dtypes it applies to and its
side conditions.  ``mind.compiler.passes.simplify`` matches the table against the IR (and
``mind.compiler.passes.cse`` reads its commutativity rules); ``mind.verify.rewrites`` proves every
rule for every dtype it applies to.  Both read the same objects, so what is proved is what runs.

Why here, at the ir layer: the compiler and the verifier are sibling layers and may not import each
other.  The table is pure data over the spec's ops, dtypes and dimension arithmetic (no NumPy, no
Z3, nothing from the compiler), so both can import it from below.

Patterns are small trees:

* ``Var("x")``: any value; a name used twice must be the same SSA value (``select(c, x, x)``);
* ``Lit("one")``: a ``const`` op whose elements are all bit-identical to the literal (``LITERALS``);
* ``Op("transpose", Var("x"), permutation="p")``: the op applied to sub-patterns, binding its
  attributes to names.

A result is a ``Var`` of the pattern or a ``Build`` (an op applied to pattern values, each attribute
computed by an ``AttrFn`` from the bound names).  Side conditions (``Cond``) and attribute
functions are plain functions ``f(A, b)`` written against the spec's ``Arith`` (plus ``pick`` below)
over bindings ``b`` (``b.attr(name)``, ``b.shape(var)``, ``b.dtype(var)``; ``"result"`` is the
source's result).  Over ints and ``DimExpr`` they decide a concrete op; over Z3 terms they are the
premises and attributes of the proof, for all ranks up to the bound.  A condition holds only when it
evaluates to ``True`` (an undecided symbolic condition does not fire the rule).

Constant folding is not a rule: an op on constants is replaced by what the reference interpreter
computes, which is the semantics by definition, so there is nothing to prove about it.
"""

from __future__ import annotations

from math import copysign
from typing import Any, Callable, Mapping

from mind.spec.dtypes import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, NUMERIC_DTYPES, DType
from mind.spec.record import FrozenRecord

# ------------------------------------------------------------------------------------------------
# literals
# ------------------------------------------------------------------------------------------------


class Literal(FrozenRecord):
    """A scalar a splat constant may hold: ``value`` (a Python number or bool) and the dtypes it is
    meant for.  Floats compare by value *and* sign, so ``-0.0`` and ``+0.0`` are different literals."""

    __slots__ = ("name", "value", "dtypes")

    def __init__(self, name: str, value: Any, dtypes: tuple[DType, ...]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "dtypes", dtypes)

    def matches(self, scalar: Any, dtype: DType) -> bool:
        """Whether a constant element ``scalar`` of ``dtype`` is this literal, bit for bit."""
        if dtype not in self.dtypes:
            return False
        if dtype is DType.BOOL:
            return bool(scalar) is self.value
        if scalar != self.value:
            return False
        if dtype.is_float and self.value == 0:
            return (copysign(1.0, scalar) < 0.0) == (copysign(1.0, self.value) < 0.0)
        return True

    def may_round_to(self, x: float) -> bool:
        """False only when the Python float ``x``, rounded to any float dtype, cannot be this
        literal (the canonicalizer's cheap pre-check on a deferred float splat; conservative)."""
        if self.value == 0:
            if x == 0:
                return (copysign(1.0, x) < 0.0) == (copysign(1.0, self.value) < 0.0)
            return not (1.0 <= abs(x) < 1e38)  # |x| ≥ 1 never rounds to zero (nor overflows)
        if self.value == 1:
            return not (x <= 0.5 or 2.0 <= x < 1e38)
        return True

    def __str__(self) -> str:
        return self.name


LITERALS: dict[str, Literal] = {lit.name: lit for lit in (
    Literal("1", 1, NUMERIC_DTYPES),
    Literal("0", 0, INT_DTYPES),
    Literal("-0.0", -0.0, FLOAT_DTYPES),
    Literal("+0.0", 0.0, FLOAT_DTYPES),
    Literal("true", True, (DType.BOOL,)),
    Literal("false", False, (DType.BOOL,)),
)}

# ------------------------------------------------------------------------------------------------
# patterns and results
# ------------------------------------------------------------------------------------------------


class Var(FrozenRecord):
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "name", name)

    def __str__(self) -> str:
        return self.name


class Lit(FrozenRecord):
    """A ``const`` whose elements all equal ``literal`` (any shape: it may broadcast)."""

    __slots__ = ("literal",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "literal", LITERALS[name])

    def __str__(self) -> str:
        return str(self.literal)


class _Apply(FrozenRecord):
    """An op applied to operands, with attributes: the shape of patterns and of built results."""

    __slots__ = ("op", "operands", "attrs")

    def __init__(self, op: str, *operands: Any, **attrs: Any) -> None:
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "operands", tuple(operands))
        object.__setattr__(self, "attrs", tuple(attrs.items()))

    def __str__(self) -> str:
        inner = ", ".join(str(o) for o in self.operands)
        attrs = ", ".join(f"{k}={v}" for k, v in self.attrs)
        return f"{self.op}({inner}){{{attrs}}}" if attrs else f"{self.op}({inner})"


class Op(_Apply):
    """``op`` applied to operand patterns; ``attrs`` binds attribute names to variable names."""

    __slots__ = ()


class Build(_Apply):
    """The op a rule builds: its operands are ``Var``s of the source, each attribute an ``AttrFn``."""

    __slots__ = ()


class _Described(FrozenRecord):
    """A function of ``(A, bindings)`` with the ``text`` that states it for people."""

    __slots__ = ("text", "fn")

    def __init__(self, text: str, fn: Callable[[Any, "Bindings"], Any]) -> None:
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "fn", fn)

    def __str__(self) -> str:
        return self.text


class AttrFn(_Described):
    """An attribute of a result, computed from the bindings."""

    __slots__ = ()


class Cond(_Described):
    """A side condition: the rule applies only where it evaluates to ``True``."""

    __slots__ = ()


class Bindings:
    """What a condition or attribute function reads: the interface both interpretations provide."""

    def attr(self, name: str) -> Any: ...
    def shape(self, var: str) -> tuple[Any, ...]: ...
    def dtype(self, var: str) -> DType: ...


#: ``Rule.kind``: a rewrite the simplifier performs, or an operand order CSE ignores.
REWRITE, COMMUTE = "rewrite", "commute"


class Rule(FrozenRecord):
    """``source`` → ``result`` for ``dtypes`` (of the source's result) under ``where``.

    ``kind`` is ``REWRITE`` (``simplify`` replaces the source by the result) or ``COMMUTE``
    (``cse`` treats the two operand orders of ``source.op`` as the same computation)."""

    __slots__ = ("name", "source", "result", "dtypes", "where", "kind", "why")

    def __init__(self, name: str, source: Op, result: Any, dtypes: tuple[DType, ...],
                 where: tuple[Cond, ...] = (), kind: str = REWRITE, why: str = "") -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "result", result)
        object.__setattr__(self, "dtypes", dtypes)
        object.__setattr__(self, "where", where)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "why", why)

    def __str__(self) -> str:
        return f"{self.source} → {self.result}"


# ------------------------------------------------------------------------------------------------
# the vocabulary of conditions and attribute functions
# ------------------------------------------------------------------------------------------------


def pick(A: Any, seq: tuple[Any, ...], i: Any) -> Any:
    """``seq[i]`` for an index that may be symbolic (an ``ite`` chain over the positions)."""
    if isinstance(i, int):
        return seq[i]
    out = seq[-1]
    for k in range(len(seq) - 2, -1, -1):
        out = A.ite(A.eq(i, k), seq[k], out)
    return out


def conj(A: Any, conds: Any) -> Any:
    """``A.and_`` of ``conds``, deciding Python bools as it goes (the canonicalizer's conditions
    are mostly plain bools; only symbolic ones reach ``A.and_``)."""
    rest = []
    for c in conds:
        if c is False:
            return False
        if c is not True:
            rest.append(c)
    return A.and_(*rest) if rest else True


def same_shape(A: Any, s: tuple[Any, ...], t: tuple[Any, ...]) -> Any:
    if len(s) != len(t):
        return False
    return conj(A, (A.eq(a, c) for a, c in zip(s, t)))


def _all(A: Any, values: Any, want: int) -> Any:
    return conj(A, (A.eq(v, want) for v in values))


def same_type(x: str, y: str = "result") -> Cond:
    """``type(x) = type(y)``: the rewrite never drops a broadcast."""
    return Cond(f"type({x}) = type({y})",
                lambda A, b: b.dtype(x) is b.dtype(y) and same_shape(A, b.shape(x), b.shape(y)))


def all_equal(value: int, *attrs: str) -> Cond:
    return Cond(" and ".join(f"{a} = [{value}, …]" for a in attrs),
                lambda A, b: conj(A, (_all(A, b.attr(a), value) for a in attrs)))


def _identity(A: Any, perm: Any) -> Any:
    return conj(A, (A.eq(p, k) for k, p in enumerate(perm)))


def _compose(A: Any, inner: Any, outer: Any) -> tuple[Any, ...]:
    """The permutation of ``transpose(transpose(x, inner), outer)``: result axis k is axis
    ``outer[k]`` of the inner result, which is axis ``inner[outer[k]]`` of ``x``."""
    return tuple(pick(A, tuple(inner), q) for q in outer)


def _slice_start(A: Any, b: Bindings) -> tuple[Any, ...]:
    return tuple(b1 + b2 * s1 for b1, b2, s1 in zip(b.attr("b1"), b.attr("b2"), b.attr("s1")))


def _slice_step(A: Any, b: Bindings) -> tuple[Any, ...]:
    return tuple(s1 * s2 for s1, s2 in zip(b.attr("s1"), b.attr("s2")))


def _slice_stop(A: Any, b: Bindings) -> tuple[Any, ...]:
    """One past the last index read, in the direction of the step: ``start + (m - 1)·step ± 1``
    for a result extent m ≥ 1, which keeps every stop within the range the spec allows."""
    return tuple(start + (m - 1) * step + A.ite(A.gt(step, 0), 1, -1)
                 for start, step, m in zip(_slice_start(A, b), _slice_step(A, b), b.shape("result")))


def _sum_attrs(x: str, y: str) -> Callable[[Any, Bindings], tuple[Any, ...]]:
    return lambda A, b: tuple(p + q for p, q in zip(b.attr(x), b.attr(y)))


def _attr(name: str) -> Callable[[Any, Bindings], Any]:
    return lambda A, b: b.attr(name)


# ------------------------------------------------------------------------------------------------
# the table
# ------------------------------------------------------------------------------------------------

x, y, c, v = Var("x"), Var("y"), Var("c"), Var("v")

RULES: tuple[Rule, ...] = (
    # arithmetic identities (IEEE-exact: adding -0.0, not +0.0, is the identity of float addition)
    Rule("mul-one-right", Op("mul", x, Lit("1")), x, NUMERIC_DTYPES, (same_type("x"),),
         why="x · 1 = x exactly (NaN stays NaN, -0 stays -0)"),
    Rule("mul-one-left", Op("mul", Lit("1"), x), x, NUMERIC_DTYPES, (same_type("x"),)),
    Rule("add-negzero-right", Op("add", x, Lit("-0.0")), x, FLOAT_DTYPES, (same_type("x"),),
         why="x + (-0) = x for every x; x + (+0) is not (it turns -0 into +0)"),
    Rule("add-negzero-left", Op("add", Lit("-0.0"), x), x, FLOAT_DTYPES, (same_type("x"),)),
    Rule("add-zero-right", Op("add", x, Lit("0")), x, INT_DTYPES, (same_type("x"),)),
    Rule("add-zero-left", Op("add", Lit("0"), x), x, INT_DTYPES, (same_type("x"),)),
    Rule("sub-poszero", Op("sub", x, Lit("+0.0")), x, FLOAT_DTYPES, (same_type("x"),),
         why="x - (+0) = x + (-0) = x"),
    Rule("sub-zero", Op("sub", x, Lit("0")), x, INT_DTYPES, (same_type("x"),)),
    Rule("div-one", Op("div", x, Lit("1")), x, NUMERIC_DTYPES, (same_type("x"),)),
    # conversions and data movement that change nothing
    Rule("convert-same", Op("convert", x, dtype="d"), x, ALL_DTYPES,
         (Cond("d = dtype(x)", lambda A, b: b.attr("d") is b.dtype("x")),)),
    Rule("reshape-same", Op("reshape", x, shape="s"), x, ALL_DTYPES, (same_type("x"),)),
    Rule("reshape-reshape", Op("reshape", Op("reshape", x, shape="s1"), shape="s2"),
         Build("reshape", x, shape=AttrFn("s2", _attr("s2"))), ALL_DTYPES,
         why="reshape keeps the row-major order of the elements"),
    Rule("transpose-identity", Op("transpose", x, permutation="p"), x, ALL_DTYPES,
         (Cond("p = [0, 1, …]", lambda A, b: _identity(A, b.attr("p"))),)),
    Rule("transpose-transpose-inverse",
         Op("transpose", Op("transpose", x, permutation="p"), permutation="q"), x, ALL_DTYPES,
         (Cond("p[q[k]] = k for every k", lambda A, b: _identity(A, _compose(A, b.attr("p"), b.attr("q")))),)),
    Rule("transpose-transpose",
         Op("transpose", Op("transpose", x, permutation="p"), permutation="q"),
         Build("transpose", x, permutation=AttrFn("[p[q[k]] for k]", lambda A, b: _compose(A, b.attr("p"), b.attr("q")))),
         ALL_DTYPES),
    Rule("slice-full", Op("slice", x, start="b", stop="e", step="s"), x, ALL_DTYPES,
         (all_equal(0, "b"), all_equal(1, "s"), same_type("x"))),
    Rule("slice-slice",
         Op("slice", Op("slice", x, start="b1", stop="e1", step="s1"), start="b2", stop="e2", step="s2"),
         Build("slice", x, start=AttrFn("b1 + b2·s1", _slice_start),
               stop=AttrFn("start + (m - 1)·step + sign(step), m the result extent", _slice_stop),
               step=AttrFn("s1·s2", _slice_step)),
         ALL_DTYPES,
         (Cond("every result extent m ≥ 1", lambda A, b: conj(A, (A.ge(m, 1) for m in b.shape("result")))),),
         why="element i of the outer slice is element b2 + i·s2 of the inner one, i.e. element "
             "b1 + (b2 + i·s2)·s1 of x"),
    Rule("pad-none", Op("pad", x, v, lo="l", hi="h", interior="i"), x, ALL_DTYPES,
         (all_equal(0, "l", "h", "i"),)),
    Rule("pad-pad",
         Op("pad", Op("pad", x, v, lo="l1", hi="h1", interior="i1"), v, lo="l2", hi="h2", interior="i2"),
         Build("pad", x, v, lo=AttrFn("l1 + l2", _sum_attrs("l1", "l2")),
               hi=AttrFn("h1 + h2", _sum_attrs("h1", "h2")), interior=AttrFn("i1", _attr("i1"))),
         ALL_DTYPES, (all_equal(0, "i2"),),
         why="the same padding value on the outside of a padded tensor extends its edges"),
    Rule("reduce-sum-none", Op("reduce_sum", x, axes="a", keepdims="k"), x, NUMERIC_DTYPES,
         (Cond("a = []", lambda A, b: len(b.attr("a")) == 0),),
         why="a sum of one element: x itself is within the spec's bound (a refinement for floats)"),
    Rule("reduce-max-none", Op("reduce_max", x, axes="a", keepdims="k"), x, ALL_DTYPES,
         (Cond("a = []", lambda A, b: len(b.attr("a")) == 0),)),
    Rule("select-same", Op("select", c, x, x), x, ALL_DTYPES, (same_type("x"),),
         why="both branches are one value, whatever the predicate (autodiff's zeros select(compare(x, x, eq), 0, 0) become 0)"),
    Rule("select-true", Op("select", Lit("true"), x, y), x, ALL_DTYPES, (same_type("x"),)),
    Rule("select-false", Op("select", Lit("false"), x, y), y, ALL_DTYPES, (same_type("y"),)),
    # operand orders CSE treats as one computation
    Rule("add-commute", Op("add", x, y), Build("add", y, x), NUMERIC_DTYPES, kind=COMMUTE,
         why="IEEE and wrapping addition are commutative (NaN is one class)"),
    Rule("mul-commute", Op("mul", x, y), Build("mul", y, x), NUMERIC_DTYPES, kind=COMMUTE),
)

BY_NAME: Mapping[str, Rule] = {r.name: r for r in RULES}

#: Ops whose operand order CSE ignores: exactly those with a proved commutativity rule.
COMMUTATIVE_OPS: frozenset[str] = frozenset(r.source.op for r in RULES if r.kind == COMMUTE)

__all__ = ["RULES", "BY_NAME", "COMMUTATIVE_OPS", "LITERALS", "Rule", "Op", "Var", "Lit", "Build",
           "AttrFn", "Cond", "Bindings", "Literal", "REWRITE", "COMMUTE", "pick", "same_shape"]
