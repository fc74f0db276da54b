"""`mind verify --rewrites`: every rule of ``mind.ir.rewrite_rules`` proved with Z3.

A rule is proved in two parts, in the manner of Alive's type enumeration:

``scalar <dtype>``, for every dtype the rule applies to
    The rule on rank-0 tensors, with the exact element semantics of ``z3scalars.ExactScalars``:
    IEEE f32/f64 (round-to-nearest-even, NaN one class, ±0, ±inf, subnormals), wrapping i32/i64
    with the spec's total division, bool.  Proved: ``source = target`` for every input (SMT ``=``,
    the spec's bit-exact equality).  Where the source is a bounded op (a float ``reduce_sum``), the
    target must be a result the spec allows for it (``allowed_sum``): a refinement.
``index ranks ≤ R``
    The rule on tensors of every rank up to R (default 6) for each variable, with symbolic
    extents and symbolic per-axis attributes (permutations, slice bounds and steps, padding,
    reshape targets; finite attributes such as reduction axes are enumerated), elements of an
    uninterpreted sort and every element op an uninterpreted function (``AbstractScalars``).
    Premises: extents ≥ 0, the spec's constraints on the source ops (their shape rules run on Z3
    terms) and the rule's side conditions.  Proved: the target's ops satisfy their constraints,
    its shape equals the source's, and at every in-bounds index its element equals the source's,
    given the rule's scalar statement as a lemma (∀ elements: source₀ = target₀, which the scalar
    part proves for the real semantics).  The element type plays no part in this half, so it runs
    once, with the first dtype the rule applies to.

Each rule's premises must also be satisfiable with a non-empty result (a rule whose conditions can
never hold would otherwise be proved vacuously).

Verdicts: ``proved``, ``refuted`` (the solver's model: input elements as values and IEEE bits,
extents and attributes minimized), ``unknown`` (resource limit).  Every query runs under a Z3
``rlimit`` and a fixed seed, so verdicts and counterexamples are reproducible; reports carry no
timings, so they are byte-identical across runs.  Z3 is imported here: import lazily.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import z3

from mind.ir.rewrite_rules import RULES, Bindings, Build, Lit, Op, Rule, Var, pick
from mind.spec.columns import aligned_lines
from mind.spec.dtypes import ALL_DTYPES, DType
from mind.spec.ops import OPS, ConstraintViolation, TensorType
from mind.ir.solver_limits import SolverLimits
from mind.ir.z3dims import SEED, model_values, new_solver, timed_check
from mind.verify.prove import Prover as SpecProver
from mind.verify.z3arith import Z3_ARITH, Z3Context
from mind.verify.z3scalars import AbstractScalars, ExactScalars, allowed_sum
from mind.verify.z3tensor import Flattening, Tensor, Unsupported, apply, leaf, splat

DEFAULT_RANK_BOUND = 6
RLIMIT = 40_000_000  # per query; the f64 multiplication lemmas are the largest (about a fifth of it)
TIMEOUT_S = 120.0  # per query: the safety net behind the rlimit (see docs/verification.md)
A = Z3_ARITH


# ------------------------------------------------------------------------------------------------
# instances of a rule: a choice of dtypes, ranks and finite attributes
# ------------------------------------------------------------------------------------------------


def _leaves(pat: Any, out: list) -> list:
    """The pattern's ``Var`` names (once each) and ``Lit`` nodes, in order (pre-order)."""
    if isinstance(pat, Var):
        if pat.name not in out:
            out.append(pat.name)
    elif isinstance(pat, Lit):
        out.append(pat)
    elif isinstance(pat, Op):
        for o in pat.operands:
            _leaves(o, out)
    return out


def _key(leafnode: Any) -> Any:
    return leafnode if isinstance(leafnode, str) else id(leafnode)


def _leaf_name(leafnode: Any, index: int) -> str:
    return leafnode if isinstance(leafnode, str) else f"lit{index}"


@dataclass
class Choice:
    """One instance: a dtype and rank per leaf, and a value (or a symbolic length) per finite or
    per-axis attribute variable."""

    dtypes: dict[Any, DType]
    ranks: dict[Any, int]
    attrs: dict[str, Any] = field(default_factory=dict)

    def describe(self, leaves: Sequence[Any]) -> str:
        parts = [f"{_leaf_name(n, i)}: {self.dtypes[_key(n)].value}, rank {self.ranks[_key(n)]}"
                 for i, n in enumerate(leaves)]
        parts += [f"{k} = {_show(v)}" for k, v in self.attrs.items() if not (isinstance(v, tuple) and v[:1] == ("sym",))]
        return "; ".join(parts)


def _show(v: Any) -> str:
    if isinstance(v, DType):
        return v.value
    if isinstance(v, tuple):
        return "[" + ", ".join(map(str, v)) + "]"
    return str(v).lower() if isinstance(v, bool) else str(v)


def _attr_kind(op: str, attr: str) -> str:
    for a in OPS[op].attrs:
        if a.name == attr:
            return a.kind
    raise KeyError(f"{op} has no attribute {attr}")


_PER_AXIS = {("transpose", "permutation"), ("slice", "start"), ("slice", "stop"), ("slice", "step"),
             ("pad", "lo"), ("pad", "hi"), ("pad", "interior")}


def _attr_domain(op: str, attr: str, rank: int, bound: int) -> list[Any]:
    """The values an attribute variable takes in the enumeration: ``("sym", n)`` for a symbolic
    tuple of length n, else concrete values."""
    if (op, attr) in _PER_AXIS:
        return [("sym", rank)]
    if (op, attr) == ("reshape", "shape"):
        return [("sym", n) for n in range(bound + 1)]
    kind = _attr_kind(op, attr)
    if attr == "axes":
        return [c for n in range(rank + 1) for c in itertools.combinations(range(rank), n)]
    if kind == "bool":
        return [False, True]
    if kind == "dtype":
        return list(ALL_DTYPES)
    if kind == "enum":
        return [a.choices for a in OPS[op].attrs if a.name == attr][0]
    if kind == "int":
        return list(range(rank))
    raise Unsupported(f"attribute {op}.{attr} of kind {kind} in a rule pattern")


def _result_rank(op: str, ranks: list[int], attrs: dict[str, Any]) -> int:
    if op == "reshape":
        return attrs["shape"][1]
    if op in ("reduce_sum", "reduce_max"):
        return ranks[0] if attrs["keepdims"] else ranks[0] - len(attrs["axes"])
    if op == "gather":
        return ranks[0] - 1 + ranks[1]
    return max(ranks) if op in ("add", "sub", "mul", "div", "compare", "select") else ranks[0]


def _attr_choices(pat: Any, ranks: dict[Any, int], bound: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """(rank of the pattern's result, finite attribute values) for every choice of the pattern's
    attribute variables, given the leaves' ranks."""
    if isinstance(pat, (Var, Lit)):
        yield ranks[_key(pat.name if isinstance(pat, Var) else pat)], {}
        return
    subs = [list(_attr_choices(o, ranks, bound)) for o in pat.operands]
    for combo in itertools.product(*subs):
        op_ranks = [r for r, _ in combo]
        merged: dict[str, Any] = {}
        for _, a in combo:
            merged.update(a)
        domains = [(attr, var, _attr_domain(pat.op, attr, op_ranks[0], bound)) for attr, var in pat.attrs]
        for values in itertools.product(*[d for _, _, d in domains]):
            attrs = dict(merged)
            own = {}
            for (attr, var, _), val in zip(domains, values):
                attrs[var] = val
                own[attr] = val
            r = _result_rank(pat.op, op_ranks, own)
            if r < 0 or r > bound:
                continue
            yield r, attrs


# ------------------------------------------------------------------------------------------------
# building one instance on Z3 terms
# ------------------------------------------------------------------------------------------------


class _Bindings(Bindings):
    def __init__(self) -> None:
        self.tensors: dict[str, Tensor] = {}
        self.values: dict[str, Any] = {}

    def attr(self, name: str) -> Any:
        return self.values[name]

    def shape(self, var: str) -> tuple[Any, ...]:
        return self.tensors[var].shape

    def dtype(self, var: str) -> DType:
        return self.tensors[var].dtype


class Vacuous(Exception):
    """The instance's premises are false before any solving (a Python-level condition)."""


class IllTyped(Exception):
    """The target violates a constraint of its ops at the Python level (e.g. a rank mismatch)."""


def _infer(op: str, types: list[TensorType], attrs: dict[str, Any], ctx: Z3Context) -> TensorType:
    """The spec's shape rule on Z3 terms; ``transpose`` states its constraint C2 (a permutation of
    [0, rank)) over symbolic entries, which its Python rule (``sorted``) cannot take."""
    if op != "transpose":
        return OPS[op].infer(ctx, types, attrs)
    perm = tuple(attrs["permutation"])
    x = types[0]
    if len(perm) != x.rank:
        raise ConstraintViolation("C1", f"permutation of length {len(perm)} for rank {x.rank}")
    if any(isinstance(p, z3.ExprRef) for p in perm):
        zs = [p if isinstance(p, z3.ExprRef) else z3.IntVal(p) for p in perm]
        valid = z3.And(*[z3.And(p >= 0, p < x.rank) for p in zs], z3.Distinct(*zs)) if len(zs) > 1 else \
            z3.And(*[z3.And(p >= 0, p < x.rank) for p in zs]) if zs else z3.BoolVal(True)
        ctx.obligation("C2", valid, "permutation is a permutation of [0, rank)")
    elif sorted(perm) != list(range(x.rank)):
        raise ConstraintViolation("C2", f"{list(perm)} is not a permutation")
    return TensorType(x.dtype, tuple(pick(A, tuple(x.shape), p) for p in perm))


class Instance:
    """A rule at one ``Choice``: the source and target tensors, premises and goals."""

    def __init__(self, rule: Rule, choice: Choice, alg: Any, symbolic: bool, conditions: bool = True) -> None:
        self.rule = rule
        self.choice = choice
        self.alg = alg
        self.fl = Flattening()
        self.symbolic = symbolic
        self.premises: list[Any] = []
        self.ints: list[Any] = []  # extents and attribute entries, named in counterexamples
        self.leaves: list[Any] = []  # scalar leaves (rank-0 instances), named in counterexamples
        self.b = _Bindings()
        self.lit_index = 0
        src_ctx = Z3Context()
        self.source = self._eval(rule.source, src_ctx, source=True)
        self.premises.append(src_ctx.precondition())
        self.b.tensors["result"] = self.source
        for cond in rule.where if conditions else ():
            c = cond.fn(A, self.b)
            if c is False:
                raise Vacuous(cond.text)
            if c is not True:
                self.premises.append(c)
        tgt_ctx = Z3Context()
        self.target = self._eval(rule.result, tgt_ctx, source=False)
        self.target_obligations = tgt_ctx.obligations

    def _int(self, name: str) -> Any:
        v = z3.Int(name)
        self.ints.append(v)
        return v

    def _shape(self, name: str, rank: int) -> tuple[Any, ...]:
        if not self.symbolic:
            return ()
        dims = tuple(self._int(f"{name}.d{k}") for k in range(rank))
        self.premises.extend(d >= 0 for d in dims)
        return dims

    def _eval(self, pat: Any, ctx: Z3Context, source: bool) -> Tensor:
        b = self.b
        if isinstance(pat, Var):
            t = b.tensors.get(pat.name)
            if t is None:
                dtype = self.choice.dtypes[pat.name]
                shape = self._shape(pat.name, self.choice.ranks[pat.name])
                t = b.tensors[pat.name] = leaf(pat.name, dtype, shape, self.alg, self.fl)
                if not shape:
                    self.leaves.append((pat.name, dtype, t.at(())))
            return t
        if isinstance(pat, Lit):
            self.lit_index += 1
            dtype = self.choice.dtypes[id(pat)]
            shape = self._shape(f"lit{self.lit_index}", self.choice.ranks[id(pat)])
            return splat(dtype, shape, self.alg.literal(dtype, pat.literal.value), self.fl)
        xs = [self._eval(o, ctx, source) for o in pat.operands]
        if isinstance(pat, Op):
            attrs = {attr: self._attr_value(var, self.choice.attrs[var]) for attr, var in pat.attrs}
        else:  # Build: attributes computed by the rule
            attrs = {attr: fn.fn(A, b) for attr, fn in pat.attrs}
        types = [TensorType(x.dtype, x.shape) for x in xs]
        try:
            t = _infer(pat.op, types, attrs, ctx)
        except ConstraintViolation as exc:
            if source:
                raise Vacuous(f"{pat.op} {exc.label}") from None
            raise IllTyped(f"{pat.op} {exc.label}: {exc.detail}") from None
        return apply(pat.op, xs, attrs, t.dtype, t.shape, self.alg, self.fl)

    def _attr_value(self, var: str, val: Any) -> Any:
        if isinstance(val, tuple) and val[:1] == ("sym",):
            v = tuple(self._int(f"{var}{k}") for k in range(val[1])) if self.symbolic else ()
            self.b.values[var] = v
            return v
        self.b.values[var] = val
        return val


# ------------------------------------------------------------------------------------------------
# verdicts
# ------------------------------------------------------------------------------------------------


@dataclass
class Part:
    """One obligation of a rule: the scalar lemma of one dtype, or the index proof."""

    name: str
    status: str  # proved | refuted | unknown
    cases: int = 0
    case: str | None = None
    counterexample: dict[str, Any] | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"obligation": self.name, "verdict": self.status, "cases": self.cases, "case": self.case,
                "counterexample": self.counterexample, "reason": self.reason}


@dataclass
class RuleVerdict:
    rule: Rule
    parts: list[Part]

    @property
    def status(self) -> str:
        for s in ("refuted", "unknown"):
            if any(p.status == s for p in self.parts):
                return s
        return "proved"

    def first(self, status: str) -> Part | None:
        return next((p for p in self.parts if p.status == status), None)

    def to_json(self) -> dict[str, Any]:
        r = self.rule
        return {"rule": r.name, "kind": r.kind, "statement": str(r), "conditions": [c.text for c in r.where],
                "dtypes": [d.value for d in r.dtypes], "verdict": self.status,
                "obligations": [p.to_json() for p in self.parts]}


@dataclass
class Report:
    verdicts: list[RuleVerdict]
    rank_bound: int
    rlimit: int
    seconds: float = 0.0  # not in the report's text or JSON (those are byte-identical across runs)
    queries: int = 0

    def counts(self) -> dict[str, int]:
        out = {"proved": 0, "refuted": 0, "unknown": 0}
        for v in self.verdicts:
            out[v.status] += 1
        return out

    @property
    def ok(self) -> bool:
        c = self.counts()
        return c["refuted"] == 0 and c["unknown"] == 0

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "rank_bound": self.rank_bound, "rlimit": self.rlimit, "seed": SEED,
                "counts": self.counts(), "rules": [v.to_json() for v in self.verdicts]}


# ------------------------------------------------------------------------------------------------
# the prover
# ------------------------------------------------------------------------------------------------


def _own(solver: Any, term: Any) -> Any:
    """``term`` in the context of ``solver`` (``Prover._check`` gives each query its own)."""
    return term if term.ctx == solver.ctx else term.translate(solver.ctx)


def smallest(solver: Any, vs: Sequence[Any]) -> dict[str, int]:
    """The model with the smallest Σ|v| over ``vs`` that the solver finds by bisecting the bound
    (each step under the solver's rlimit; an unknown step keeps the best model so far)."""
    vs = [_own(solver, v) for v in vs]
    best = model_values(solver.model(), vs)
    if not vs:
        return best
    cost = z3.Sum([z3.If(v >= 0, v, -v) for v in vs])
    lo, hi = 0, sum(abs(x) for x in best.values())
    while lo < hi:
        mid = (lo + hi) // 2
        solver.push()
        solver.add(cost <= mid)
        r = solver.check()
        if r == z3.sat:
            best = model_values(solver.model(), vs)
            hi = sum(abs(x) for x in best.values())
        solver.pop()
        if r == z3.unsat:
            lo = mid + 1
        elif r != z3.sat:
            break
    return best


def fp_bits(dtype: DType, value: Any) -> tuple[str, str]:
    """A model's float value as (decimal text, IEEE bits in hex)."""
    import numpy as np

    bv = z3.simplify(z3.fpToIEEEBV(value, ctx=value.ctx))  # (z3 would make the term in its main context)
    bits = bv.as_long() if z3.is_bv_value(bv) else 0
    width = dtype.bits // 4
    arr = np.array([bits], dtype=np.uint32 if dtype is DType.F32 else np.uint64).view(dtype.numpy)
    f = float(arr[0])
    text = "nan" if f != f else repr(f)
    return text, f"0x{bits:0{width}x}"


def scalar_value(dtype: DType, value: Any) -> Any:
    """A model value as JSON-able data (floats as {"value", "bits"})."""
    if dtype.is_float:
        text, bits = fp_bits(dtype, value)
        return {"value": text, "bits": bits}
    if dtype.is_int:
        return value.as_signed_long() if z3.is_bv_value(value) else 0
    return z3.is_true(value)


class Prover(SpecProver):
    """Proves rules; shares the spec prover's resource limit, seed and SMT-LIB files."""

    def __init__(self, rank_bound: int = DEFAULT_RANK_BOUND, rlimit: int = RLIMIT, smt2_dir: str | None = None):
        super().__init__(SolverLimits(rlimit, TIMEOUT_S), smt2_dir)
        self.rlimit = rlimit
        self.rank_bound = rank_bound
        self.queries = 0  # solver calls (benchmarks report it)

    # the solver ------------------------------------------------------------------------------
    def _prove(self, premises: list[Any], lemma: Any, goal: Any, tag: str) -> tuple[str, Any, Any]:
        """Whether ``premises ∧ lemma ⇒ goal``: unsat (proved), sat (refuted: the solver holds a
        model) or unknown; a goal the simplifier already decides costs no solver call."""
        query = z3.And(*premises, z3.Not(goal))
        if z3.is_false(z3.simplify(query)):
            return "unsat", None, None
        if lemma is not None:
            query = z3.And(query, lemma)
        verdict, s, reason = self._check(query, tag, tactic=True)
        if verdict == "unknown":  # the tactic pipeline gave up: the default engine once more
            verdict, s, reason = self._check(query, tag, tactic=False, write=False)
        return verdict, s, reason

    def _check(self, query: Any, tag: str, tactic: bool = False, write: bool = True) -> tuple[str, Any, Any]:
        """(sat | unsat | unknown, solver, reason) for ``query`` (SAT = a counterexample).

        The query is copied into a Z3 context of its own: in Z3's main context its terms' ids, and
        with them the solver's search, depend on every term the process made before (a test run's
        random examples): the f64 ``mul-commute`` lemma, a SAT proof that two 53-bit multipliers
        agree, took 425 thousand resource units alone and once ran out of 40 million after a test
        run's other queries.  The solver's terms (its model) are in that context: ``_own``."""
        if self.smt2_dir and write:
            self._write_smt2(query, tag, "a rewrite rule's obligation")
        ctx = z3.Context()
        s = new_solver(self.limits, tactic, ctx)
        self.queries += 1
        s.add(query.translate(ctx))
        r, reason = timed_check(s, self.limits)
        if r == z3.unsat:
            return "unsat", s, None
        if r == z3.sat:
            return "sat", s, None
        return "unknown", s, reason

    # enumeration ------------------------------------------------------------------------------
    def dtype_assignments(self, rule: Rule) -> list[dict[Any, DType]]:
        """Every dtype per leaf for which the source is well-typed with a result dtype the rule
        applies to (checked on rank-0 instances with the spec's shape rules)."""
        leaves = _leaves(rule.source, [])
        domains = [list(ALL_DTYPES) if isinstance(n, str) else list(n.literal.dtypes) for n in leaves]
        out = []
        for combo in itertools.product(*domains):
            dtypes = {_key(n): d for n, d in zip(leaves, combo)}
            for _, attrs in _attr_choices(rule.source, {_key(n): 0 for n in leaves}, 0):
                try:
                    inst = Instance(rule, Choice(dtypes, {_key(n): 0 for n in leaves}, attrs), ExactScalars(), False,
                                    conditions=False)
                except (Vacuous, IllTyped, Unsupported):
                    continue
                if inst.source.dtype in rule.dtypes:
                    out.append(dtypes)
                    break
        return out

    def choices(self, rule: Rule, dtypes: dict[Any, DType], bound: int) -> Iterator[Choice]:
        leaves = _leaves(rule.source, [])
        for ranks in itertools.product(range(bound + 1), repeat=len(leaves)):
            rk = {_key(n): r for n, r in zip(leaves, ranks)}
            for _, attrs in _attr_choices(rule.source, rk, bound):
                yield Choice(dtypes, rk, attrs)

    # the two halves -----------------------------------------------------------------------------
    def scalar_part(self, rule: Rule, dtype: DType, assignments: list[dict[Any, DType]]) -> Part:
        name = f"scalar {dtype.value}"
        cases = 0
        leaves = _leaves(rule.source, [])
        for dtypes in assignments:
            for choice in self.choices(rule, dtypes, 0):
                try:
                    inst = Instance(rule, choice, ExactScalars(), symbolic=False)
                except (Vacuous, Unsupported):
                    continue
                except IllTyped as exc:
                    return Part(name, "refuted", cases + 1, choice.describe(leaves), reason=f"target ill-typed: {exc}")
                if inst.source.dtype is not dtype:
                    continue
                cases += 1
                desc = choice.describe(leaves)
                if inst.target.dtype is not inst.source.dtype:
                    return Part(name, "refuted", cases, desc, reason="the target's dtype differs")
                goal = self._scalar_goal(inst)
                if goal is None:
                    return Part(name, "unknown", cases, desc,
                                reason="the source is a bounded op inside a larger pattern (no witness)")
                query = z3.And(*inst.premises, z3.Not(goal))
                verdict, s, reason = self._check(query, f"{rule.name}.{name}")
                if verdict == "sat":
                    m = s.model()
                    cex = {n: scalar_value(d, m.eval(_own(s, t), model_completion=True)) for n, d, t in inst.leaves}
                    src = m.eval(_own(s, inst.source.at(())), model_completion=True)
                    tgt = m.eval(_own(s, inst.target.at(())), model_completion=True)
                    cex["source"] = scalar_value(inst.source.dtype, src)
                    cex["target"] = scalar_value(inst.target.dtype, tgt)
                    return Part(name, "refuted", cases, desc, cex)
                if verdict == "unknown":
                    return Part(name, "unknown", cases, desc, reason=reason)
        if cases == 0:
            return Part(name, "refuted", 0, None,
                        reason=f"its conditions never hold on a rank-0 source of dtype {dtype.value}")
        return Part(name, "proved", cases)

    def _scalar_goal(self, inst: Instance) -> Any:
        s, t = inst.source.at(()), inst.target.at(())
        alg = inst.alg
        if not alg.bounded:
            return s == t
        # a bounded source op: the target must be one of the results the spec allows it
        if len(alg.bounded) == 1 and s.eq(alg.bounded[0]) and s.decl().name().startswith("sum_"):
            return allowed_sum(inst.source.dtype, s.children(), t)
        return None

    def index_part(self, rule: Rule, dtypes: dict[Any, DType]) -> Part:
        name = f"index ranks ≤ {self.rank_bound}"
        leaves = _leaves(rule.source, [])
        lemma = self._lemma(rule, dtypes)
        cases = 0
        witnessed = False
        for choice in self.choices(rule, dtypes, self.rank_bound):
            try:
                inst = Instance(rule, choice, AbstractScalars(), symbolic=True)
            except Vacuous:
                continue
            except Unsupported as exc:
                return Part(name, "unknown", cases + 1, choice.describe(leaves), reason=str(exc))
            except IllTyped as exc:
                return Part(name, "refuted", cases + 1, choice.describe(leaves), reason=f"target ill-typed: {exc}")
            cases += 1
            desc = choice.describe(leaves)
            src, tgt = inst.source, inst.target
            if tgt.rank != src.rank or tgt.dtype is not src.dtype:
                return Part(name, "refuted", cases, desc, reason=f"the target has type {tgt.dtype.value} of rank "
                                                                 f"{tgt.rank}, the source {src.dtype.value} of rank {src.rank}")
            idx = tuple(z3.Int(f"i{k}") for k in range(src.rank))
            inside = z3.And(*[z3.And(i >= 0, i < d) for i, d in zip(idx, src.shape)])
            goals = [(f"the target violates its constraint {o.label}", o.cond) for o in inst.target_obligations]
            goals += [(f"the shapes differ on axis {k}", _zb(A.eq(a, b)))
                      for k, (a, b) in enumerate(zip(src.shape, tgt.shape))]
            try:
                goals.append(("the elements differ", z3.Implies(inside, src.at(idx) == tgt.at(idx))))
            except Unsupported as exc:
                return Part(name, "unknown", cases, desc, reason=str(exc))
            premises = [_zb(p) for p in inst.premises]
            for what, goal in goals:
                verdict, s, reason = self._prove(premises, lemma, goal, f"{rule.name}.index")
                if verdict == "sat":
                    return Part(name, "refuted", cases, desc, smallest(s, list(inst.ints) + list(idx)), reason=what)
                if verdict == "unknown":
                    return Part(name, "unknown", cases, desc, reason=f"{what}? {reason}")
            if not witnessed:
                nonempty = z3.And(*premises, *[d >= 1 for d in map(_zi, src.shape)],
                                  *[d >= 1 for t in inst.b.tensors.values() for d in map(_zi, t.shape)])
                w, _, _ = self._check(nonempty, f"{rule.name}.satisfiable")
                witnessed = w == "sat"
        if cases == 0 or not witnessed:
            return Part(name, "refuted", cases, None,
                        reason="its conditions never hold on a non-empty tensor (the proof would be vacuous)")
        return Part(name, "proved", cases)

    def _lemma(self, rule: Rule, dtypes: dict[Any, DType]) -> Any:
        """∀ elements: source₀ = target₀ on rank-0 tensors over the abstract algebra (what the scalar
        parts prove for the exact semantics), or None when the two are the same term."""
        leaves = _leaves(rule.source, [])
        for choice in self.choices(rule, dtypes, 0):
            try:
                inst = Instance(rule, choice, AbstractScalars(), symbolic=False)
            except (Vacuous, IllTyped, Unsupported):
                continue
            s, t = z3.simplify(inst.source.at(())), z3.simplify(inst.target.at(()))
            if s.eq(t):
                return None
            bound = [v for _, _, v in inst.leaves]
            return z3.ForAll(bound, s == t) if bound else s == t
        return None

    # one rule, all rules ---------------------------------------------------------------------------
    def prove(self, rule: Rule) -> RuleVerdict:
        assignments = self.dtype_assignments(rule)
        parts = [self.scalar_part(rule, d, assignments) for d in rule.dtypes]
        if not assignments:
            parts.append(Part(f"index ranks ≤ {self.rank_bound}", "refuted", 0, None,
                              reason="the source is ill-typed for every dtype"))
        else:
            parts.append(self.index_part(rule, assignments[0]))
        return RuleVerdict(rule, parts)


def _zb(c: Any) -> Any:
    return z3.BoolVal(c) if isinstance(c, bool) else c


def _zi(d: Any) -> Any:
    return z3.IntVal(d) if isinstance(d, int) else d


def prove_rules(rules: Sequence[Rule] = RULES, rank_bound: int = DEFAULT_RANK_BOUND, rlimit: int = RLIMIT,
                smt2_dir: str | None = None) -> Report:
    t0 = time.perf_counter()
    prover = Prover(rank_bound, rlimit, smt2_dir)
    verdicts = [prover.prove(r) for r in rules]
    return Report(verdicts, rank_bound, rlimit, time.perf_counter() - t0, prover.queries)


def format_report(rep: Report) -> str:
    rows = [("rule", "statement", "dtypes", "verdict", "detail")]
    for v in rep.verdicts:
        r = v.rule
        stmt = str(r) + (f"  if {'; '.join(c.text for c in r.where)}" if r.where else "")
        detail = ""
        bad = v.first("refuted") or v.first("unknown")
        if bad is not None:
            detail = f"{bad.name}: " + (bad.reason or "")
            if bad.case:
                detail += f" [{bad.case}]"
            if bad.counterexample:
                detail += " " + ", ".join(f"{k}={_cex(x)}" for k, x in bad.counterexample.items())
        rows.append((r.name, stmt, " ".join(d.value for d in r.dtypes), v.status, detail))
    lines = aligned_lines(rows, aligned=4)
    c = rep.counts()
    lines.append("")
    lines.append(f"{len(rep.verdicts)} rules: {c['proved']} proved, {c['refuted']} refuted, {c['unknown']} unknown "
                 f"(scalar lemmas for every dtype; index maps for every rank ≤ {rep.rank_bound}; "
                 f"rlimit {rep.rlimit} per query, seed {SEED})")
    return "\n".join(lines)


def _cex(x: Any) -> str:
    if isinstance(x, dict):
        return f"{x['value']} ({x['bits']})"
    return str(x).lower() if isinstance(x, bool) else str(x)


# ------------------------------------------------------------------------------------------------
# the rule table of docs/rewrites.md
# ------------------------------------------------------------------------------------------------

TABLE_BEGIN = "<!-- rules: generated by tools/gen_rewrites.py from mind.ir.rewrite_rules; do not edit -->"
TABLE_END = "<!-- end of rules -->"


def markdown_table(rep: Report) -> str:
    """One row per rule: name, source → result, conditions, dtypes, verdict, why (the verdicts do
    not depend on the rank bound once proved, so the table is the same for every bound)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [TABLE_BEGIN, "",
             "| rule | rewrite | conditions | dtypes | verdict | why |",
             "|---|---|---|---|---|---|"]
    for v in rep.verdicts:
        r = v.rule
        arrow = "≡" if r.kind == "commute" else "→"
        rewrite = f"`{r.source}` {arrow} `{r.result}`"
        conds = "; ".join(f"`{c.text}`" for c in r.where) or "–"
        lines.append(f"| `{r.name}` | {cell(rewrite)} | {cell(conds)} | {' '.join(d.value for d in r.dtypes)} | "
                     f"{v.status} | {cell(r.why) or '–'} |")
    lines += ["", TABLE_END]
    return "\n".join(lines)
