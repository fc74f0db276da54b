"""Proof obligations about the spec itself: every op's shape rule, run on Z3 terms.

Each op's rule is the spec's single definition (``OpDef.infer``), evaluated by ``Z3Context`` on Z3
integer constants for the dims (premise: every dim ≥ 0) and for the integer attributes the rule
treats through ``Arith`` (reshape target dims, slice start/stop/step, pad lo/hi/interior, conv
strides/padding/dilations: unconstrained integers).  Axes, permutations, dtypes and ranks are
concrete: ranks are enumerated up to ``rank_bound`` (default 6; conv2d is rank 4 by definition),
axes and permutations exhaustively for each rank.  The constraints a rule records are the
preconditions ``P`` of the obligations.  Obligations (a verdict per op and obligation, over all
enumerated cases):

``nonneg``          P ⇒ every result dim ≥ 0.
``concrete``        The Python-int interpretation agrees with the Z3 one on sampled points (dims in
                    [0, 4], attributes in [-3, 4], so both valid and invalid inputs): the first
                    recorded constraint that is false at the point is exactly the label the Python
                    run raises, and otherwise the result dims are equal.  Sampled, so this is
                    evidence, not a proof; the universal statement is the ``reference``
                    obligation plus lemma ``arith/floordiv`` (Z3's ``floordiv`` term is Python's
                    ``//`` for every non-zero divisor), proved for all integers.
``dtype``           The dtype rule and the dtype/rank constraints, by exhaustive enumeration of dtypes.
``reference``       P ⇒ the result equals an independent definition (written here, not taken from the
                    spec's helpers), e.g. slice extent = the number of k ≥ 0 with start + k·step
                    before stop; conv2d output = the number of o ≥ 0 with
                    o·s + (k-1)·rd ≤ dilated(n) + lo + hi - 1.
``fails-exactly``   P ⇔ an independent statement of when the op is defined (broadcasting: no aligned
                    pair differs with neither side 1).
laws                commutative, associative, identity (broadcasting), element count and round trip
                    (reshape), inverse (transpose), VJP duals (slice ↔ pad, matmul).

Non-vacuity: obligations are implications from P, so each op also gets ``satisfiable``: P is
satisfiable with a non-trivial result (some result dim ≥ 2) for every case.  A rule whose
constraints are contradictory would prove every other obligation vacuously; this one would fail.
"""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

import z3

from mind.spec.dims import INT_ARITH
from mind.spec.dtypes import ALL_DTYPES, DType
from mind.spec.ops import OPS, ConstraintViolation, ShapeContext, TensorType
from mind.spec.ops.common import broadcast as spec_broadcast
from mind.spec.ops.contraction import dilated
from mind.spec.ops.structure import pad_extent, slice_extent
from mind.ir.z3dims import Z3_ARITH, zint
from mind.verify.prove import Case, Prover, SpecReport, Verdict, discharge
from mind.verify.z3arith import Z3Context, evaluate_term

DEFAULT_RANK_BOUND = 6
F32 = DType.F32


# ------------------------------------------------------------------------------------------------
# Instances: one op application, built from a factory that hands out symbolic or concrete values.
# ------------------------------------------------------------------------------------------------


class Sym:
    """Factory of Z3 constants; remembers which are dims (premise ≥ 0)."""

    def __init__(self) -> None:
        self.vars: list[Any] = []
        self.dims: list[Any] = []

    def dim(self, name: str) -> Any:
        v = z3.Int(name)
        self.vars.append(v)
        self.dims.append(v)
        return v

    def int(self, name: str) -> Any:
        v = z3.Int(name)
        self.vars.append(v)
        return v

    def premises(self) -> list[Any]:
        return [d >= 0 for d in self.dims]


class Concrete:
    """Factory of Python ints drawn by a seeded RNG (dims in [0, 4], attributes in [-3, 4])."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.env: dict[str, int] = {}

    def dim(self, name: str) -> int:
        v = self.env[name] = self.rng.choice((0, 1, 1, 2, 3, 4))
        return v

    def int(self, name: str) -> int:
        v = self.env[name] = self.rng.randint(-3, 4)
        return v


# An instance builder: factory -> (operand types, attrs)
Builder = Callable[[Any], tuple[list[TensorType], dict]]


def shape(f: Any, prefix: str, rank: int) -> tuple[Any, ...]:
    return tuple(f.dim(f"{prefix}{i}") for i in range(rank))


@dataclass
class Run:
    ctx: Z3Context
    result: TensorType | None
    violation: str | None  # a constraint that folded to False (concrete)


def run_sym(opname: str, types: Sequence[TensorType], attrs: dict, ctx: Z3Context | None = None) -> Run:
    ctx = ctx or Z3Context()
    try:
        return Run(ctx, OPS[opname].infer(ctx, list(types), attrs), None)
    except ConstraintViolation as exc:
        return Run(ctx, None, exc.label)


def run_int(opname: str, types: Sequence[TensorType], attrs: dict) -> tuple[TensorType | None, str | None]:
    try:
        return OPS[opname].infer(ShapeContext(INT_ARITH), list(types), attrs), None
    except ConstraintViolation as exc:
        return None, exc.label


def conj(cs: Iterable[Any]) -> Any:
    cs = [z3.BoolVal(c) if isinstance(c, bool) else c for c in cs]
    return z3.And(*cs) if cs else z3.BoolVal(True)


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, int) or isinstance(y, int):
        return isinstance(x, int) and isinstance(y, int) and x == y
    return x.eq(y)


def eqs(a: Sequence[Any], b: Sequence[Any]) -> Any:
    """Z3 ``a == b`` elementwise; pairs that are the same term are dropped (hash-consed ASTs)."""
    if len(a) != len(b):
        return z3.BoolVal(False)
    return conj(zint(x) == zint(y) for x, y in zip(a, b) if not _same(x, y))


# ------------------------------------------------------------------------------------------------
# Generic obligations over a family of instances
# ------------------------------------------------------------------------------------------------


@dataclass
class Family:
    """An op with the instances (rank/axes choices) its obligations range over."""

    op: str
    instances: list[tuple[str, Builder]]  # (case description, builder)
    samples: list[tuple[str, Builder]]  # instances used for sampled concrete agreement


def _sym_instance(opname: str, build: Builder) -> tuple[Sym, Run]:
    f = Sym()
    types, attrs = build(f)
    return f, run_sym(opname, types, attrs)


def cases_nonneg(fam: Family) -> Iterator[Case]:
    for desc, build in fam.instances:
        f, r = _sym_instance(fam.op, build)
        if r.result is None:
            continue
        # a result dim that is literally an operand dim (or a constant ≥ 0) is ≥ 0 by the premises
        dims = {d.get_id() for d in f.dims}
        rest = [d for d in r.result.shape
                if not (isinstance(d, int) and d >= 0) and not (not isinstance(d, int) and d.get_id() in dims)]
        yield Case(desc, f.premises() + [r.ctx.precondition()] if rest else [],
                   conj(zint(d) >= 0 for d in rest), f.vars)


def cases_satisfiable(fam: Family) -> Iterator[Case]:
    """P ∧ every operand dim ≥ 1 is satisfiable (an all-zero witness would be a weak one)."""
    for desc, build in fam.instances:
        f, r = _sym_instance(fam.op, build)
        if r.result is None:
            yield Case(desc, [], z3.BoolVal(True), [])  # a concrete violation: unsatisfiable
            continue
        if not r.ctx.obligations:  # no constraint on the dims at all: all dims 1 is a witness
            yield Case(desc, [], z3.BoolVal(False), [])
            continue
        nontrivial = conj(d >= 1 for d in f.dims)
        # "P is satisfiable" is proved by refuting its negation: goal Not(...) must be refuted
        yield Case(desc, [], z3.Not(conj([r.ctx.precondition(), nontrivial])), f.vars)


def cases_concrete(fam: Family, points: int = 16, seed: int = 20240601) -> Iterator[Case]:
    rng = random.Random(seed)
    for desc, build in fam.samples:
        def check(desc=desc, build=build) -> dict | None:
            f, r = _sym_instance(fam.op, build)
            names = {str(v): v for v in f.vars}
            for _ in range(points):
                c = Concrete(rng)
                types, attrs = build(c)
                res, label = run_int(fam.op, types, attrs)
                env = {names[k]: v for k, v in c.env.items()}
                if r.violation is not None:
                    predicted, shape_ = r.violation, None
                else:
                    predicted = None
                    for ob in r.ctx.obligations:
                        if evaluate_term(ob.cond, env) is False:
                            predicted = ob.label
                            break
                    shape_ = None if predicted else tuple(evaluate_term(d, env) for d in r.result.shape)
                if predicted != label or (res is not None and (tuple(res.shape) != shape_
                                                               or res.dtype is not r.result.dtype)):
                    return dict(c.env)
            return None
        yield Case(desc, check=check)


# ------------------------------------------------------------------------------------------------
# Broadcasting (add, sub, mul, div, compare, select; matmul batch dims)
# ------------------------------------------------------------------------------------------------

BroadcastFn = Callable[..., tuple[Any, ...]]


def _bshape(prefix: str, r: int) -> tuple[Any, ...]:
    return tuple(z3.Int(f"{prefix}{i}") for i in range(r))


def _bcast(fn: BroadcastFn, *shapes: Sequence[Any]) -> tuple[Any, Any]:
    """(precondition, result) of ``fn`` (the spec's ``broadcast`` by default) on Z3 shapes."""
    ctx = Z3Context()
    try:
        out = fn(ctx, "C", *shapes)
    except ConstraintViolation:
        return z3.BoolVal(False), None
    return ctx.precondition(), out


def _aligned(*shapes: Sequence[Any]) -> list[list[Any]]:
    """Columns of the right-aligned shapes, padded on the left with 1s."""
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    return [[p[i] for p in padded] for i in range(rank)]


def defined_ref(*shapes: Sequence[Any]) -> Any:
    """Independent: no aligned axis holds two extents that differ with neither 1."""
    bad = []
    for col in _aligned(*shapes):
        for x, y in itertools.combinations(col, 2):
            bad.append(z3.And(zint(x) != zint(y), zint(x) != 1, zint(y) != 1))
    return z3.Not(z3.Or(*bad)) if bad else z3.BoolVal(True)


def result_ref(out: Sequence[Any], *shapes: Sequence[Any]) -> Any:
    """Independent: each result extent is the operands' common non-1 extent, or 1 if all are 1."""
    conds = []
    for r, col in zip(out, _aligned(*shapes)):
        conds.append(z3.And(*[z3.Implies(zint(x) != 1, zint(r) == zint(x)) for x in col],
                            z3.Implies(z3.And(*[zint(x) == 1 for x in col]), zint(r) == 1)))
    return conj(conds)


def broadcast_law_cases(law: str, bound: int, fn: BroadcastFn = spec_broadcast) -> Iterator[Case]:
    ranks = range(bound + 1)
    if law == "associative":
        combos: Iterable[tuple[int, ...]] = itertools.product(ranks, repeat=3)
    elif law == "identity":
        combos = ((r,) for r in ranks)
    else:
        combos = itertools.product(ranks, repeat=2)
    for rs in combos:
        shapes = [_bshape(p, r) for p, r in zip("abc", rs)]
        vs = [d for s in shapes for d in s]
        prem = [d >= 0 for d in vs]
        desc = "ranks " + ", ".join(map(str, rs))
        if law == "commutative":
            p1, o1 = _bcast(fn, shapes[0], shapes[1])
            p2, o2 = _bcast(fn, shapes[1], shapes[0])
            goal = z3.And(p1 == p2, z3.Implies(p1, eqs(o1, o2)) if o1 is not None and o2 is not None
                          else z3.Not(p1))
        elif law == "associative":
            pab, oab = _bcast(fn, shapes[0], shapes[1])
            pbc, obc = _bcast(fn, shapes[1], shapes[2])
            pl, ol = _bcast(fn, oab, shapes[2]) if oab is not None else (z3.BoolVal(False), None)
            pr, or_ = _bcast(fn, shapes[0], obc) if obc is not None else (z3.BoolVal(False), None)
            left, right = z3.And(pab, pl), z3.And(pbc, pr)
            goal = z3.And(left == right, z3.Implies(left, eqs(ol, or_)) if ol is not None and or_ is not None
                          else z3.Not(left))
        elif law == "identity":
            p1, o1 = _bcast(fn, shapes[0], ())
            p2, o2 = _bcast(fn, (), shapes[0])
            goal = z3.And(p1, p2, eqs(o1, shapes[0]) if o1 is not None else False,
                          eqs(o2, shapes[0]) if o2 is not None else False)
        elif law == "fails-exactly":
            p1, _ = _bcast(fn, shapes[0], shapes[1])
            goal = p1 == defined_ref(shapes[0], shapes[1])
        elif law == "reference":
            p1, o1 = _bcast(fn, shapes[0], shapes[1])
            goal = z3.Implies(p1, result_ref(o1, shapes[0], shapes[1])) if o1 is not None else z3.BoolVal(True)
        else:
            raise ValueError(law)
        yield Case(desc, prem, goal, vs)


BROADCAST_LAWS = {
    "commutative": "broadcast(a, b) is defined iff broadcast(b, a) is, and then equal",
    "associative": "broadcast(broadcast(a, b), c) = broadcast(a, broadcast(b, c)), definedness included",
    "identity": "broadcast(a, []) = broadcast([], a) = a, always defined",
    "fails-exactly": "broadcast(a, b) is defined iff no aligned pair differs with neither equal to 1",
    "reference": "each result extent is the common non-1 extent, or 1 (independent definition)",
}


# ------------------------------------------------------------------------------------------------
# Per-op families
# ------------------------------------------------------------------------------------------------


def _binary_family(op: str, bound: int, dtype: DType) -> Family:
    def inst(r1: int, r2: int) -> Builder:
        return lambda f: ([TensorType(dtype, shape(f, "a", r1)), TensorType(dtype, shape(f, "b", r2))], {})
    insts = [(f"ranks {r1}, {r2}", inst(r1, r2)) for r1 in range(bound + 1) for r2 in range(bound + 1)]
    samples = [(f"ranks {r1}, {r2}", inst(r1, r2)) for r1, r2 in ((0, 0), (1, 2), (3, 3), (bound, bound - 2))]
    return Family(op, insts, samples)


def _binary_op_law_cases(op: str, law: str, bound: int, dtype: DType) -> Iterator[Case]:
    """Laws stated on the op itself (its whole rule, not only the helper)."""
    def app(a, b):
        r = run_sym(op, [TensorType(dtype, a), TensorType(dtype, b)], {})
        return (r.ctx.precondition(), r.result.shape) if r.result is not None else (z3.BoolVal(False), None)

    def fn(ctx, label, *shapes):  # the op as a broadcast function, so the generic law cases apply
        pre, out = app(*shapes)
        if out is None:
            raise ConstraintViolation(label, "undefined")
        ctx.obligation(label, pre, "op precondition")
        return tuple(out)
    # compare gives bool, so chaining it needs bool operands (its dtype constraint is only equality)
    yield from broadcast_law_cases(law, bound, fn)


def _unary_family(op: str, bound: int, dtype: DType, attrs: dict | None = None) -> Family:
    def inst(r: int) -> Builder:
        return lambda f: ([TensorType(dtype, shape(f, "x", r))], dict(attrs or {}))
    insts = [(f"rank {r}", inst(r)) for r in range(bound + 1)]
    return Family(op, insts, insts[:3] + insts[-1:])


def _select_family(bound: int) -> Family:
    def inst(rs: tuple[int, int, int]) -> Builder:
        return lambda f: ([TensorType(DType.BOOL, shape(f, "p", rs[0])), TensorType(F32, shape(f, "t", rs[1])),
                           TensorType(F32, shape(f, "e", rs[2]))], {})
    insts = [(f"ranks {rs}", inst(rs)) for rs in itertools.product(range(bound + 1), repeat=3)]
    samples = [(f"ranks {rs}", inst(rs)) for rs in ((0, 0, 0), (1, 2, 1), (3, 3, 3), (2, bound, 1))]
    return Family("select", insts, samples)


def _reduce_family(op: str, bound: int) -> Family:
    def inst(r: int, axes: tuple[int, ...], keep: bool) -> Builder:
        return lambda f: ([TensorType(F32, shape(f, "x", r))], {"axes": axes, "keepdims": keep})
    insts = []
    for r in range(bound + 1):
        for k in range(r + 1):
            for axes in itertools.combinations(range(r), k):
                for keep in (False, True):
                    insts.append((f"rank {r}, axes {list(axes)}, keepdims {keep}", inst(r, axes, keep)))
    samples = [(d, b) for d, b in insts if d.startswith(("rank 2", "rank 3"))][:6]
    return Family(op, insts, samples)


def _reshape_family(bound: int) -> Family:
    def inst(r: int, t: int) -> Builder:
        return lambda f: ([TensorType(F32, shape(f, "x", r))], {"shape": tuple(f.int(f"s{i}") for i in range(t))})
    insts = [(f"rank {r} -> {t}", inst(r, t)) for r in range(bound + 1) for t in range(bound + 1)]
    samples = [(d, b) for d, b in insts if d in ("rank 0 -> 0", "rank 1 -> 2", "rank 2 -> 1", "rank 2 -> 2")]
    return Family("reshape", insts, samples)


def _transpose_family(bound: int) -> Family:
    def inst(perm: tuple[int, ...]) -> Builder:
        return lambda f: ([TensorType(F32, shape(f, "x", len(perm)))], {"permutation": perm})
    insts = [(f"perm {list(p)}", inst(p)) for r in range(bound + 1) for p in itertools.permutations(range(r))]
    return Family("transpose", insts, insts[:4])


def _slice_family(bound: int) -> Family:
    def inst(r: int) -> Builder:
        return lambda f: ([TensorType(F32, shape(f, "n", r))],
                          {"start": tuple(f.int(f"b{i}") for i in range(r)),
                           "stop": tuple(f.int(f"e{i}") for i in range(r)),
                           "step": tuple(f.int(f"s{i}") for i in range(r))})
    insts = [(f"rank {r}", inst(r)) for r in range(bound + 1)]
    return Family("slice", insts, insts[1:4])


def _pad_family(bound: int) -> Family:
    def inst(r: int) -> Builder:
        return lambda f: ([TensorType(F32, shape(f, "n", r)), TensorType(F32, ())],
                          {"lo": tuple(f.int(f"lo{i}") for i in range(r)),
                           "hi": tuple(f.int(f"hi{i}") for i in range(r)),
                           "interior": tuple(f.int(f"in{i}") for i in range(r))})
    insts = [(f"rank {r}", inst(r)) for r in range(bound + 1)]
    return Family("pad", insts, insts[:4])


def _gather_family(bound: int) -> Family:
    def inst(r: int, ri: int, axis: int) -> Builder:
        return lambda f: ([TensorType(F32, shape(f, "x", r)), TensorType(DType.I64, shape(f, "i", ri))],
                          {"axis": axis})
    insts = [(f"rank {r}, indices rank {ri}, axis {a}", inst(r, ri, a))
             for r in range(1, bound + 1) for ri in range(bound + 1) for a in range(r)]
    return Family("gather", insts, insts[:3] + insts[-1:])


def _matmul_family(bound: int) -> Family:
    def inst(r1: int, r2: int) -> Builder:
        return lambda f: ([TensorType(F32, shape(f, "a", r1)), TensorType(F32, shape(f, "b", r2))], {})
    insts = [(f"ranks {r1}, {r2}", inst(r1, r2)) for r1 in range(2, bound + 1) for r2 in range(2, bound + 1)]
    return Family("matmul", insts, insts[:2] + insts[-1:])


def _conv_builder(f: Any) -> tuple[list[TensorType], dict]:
    return ([TensorType(F32, shape(f, "x", 4)), TensorType(F32, shape(f, "w", 4))],
            {"strides": (f.int("sh"), f.int("sw")),
             "padding": ((f.int("pt"), f.int("pb")), (f.int("pl"), f.int("pr"))),
             "lhs_dilation": (f.int("dh"), f.int("dw")), "rhs_dilation": (f.int("rh"), f.int("rw"))})


def _conv_family() -> Family:
    return Family("conv2d", [("rank 4", _conv_builder)], [("rank 4", _conv_builder)])


def _const_cases() -> Iterator[Case]:
    import numpy as np

    def check() -> dict | None:
        rng = random.Random(7)
        for dt in ALL_DTYPES:
            for r in range(7):
                shp = tuple(rng.choice((0, 1, 2, 3)) for _ in range(r))
                res, label = run_int("const", [], {"value": np.zeros(shp, dtype=dt.numpy)})
                if label is not None or res.dtype is not dt or res.shape != shp:
                    return {"rank": r, "dtype": dt.value}
        for npdt in (np.uint8, np.complex64, np.float16):
            _, label = run_int("const", [], {"value": np.zeros((2,), dtype=npdt)})
            if label != "C1":
                return {"numpy dtype": str(np.dtype(npdt))}
        return None
    yield Case("all dtypes, ranks 0..6, and unsupported element types", check=check)


# ------------------------------------------------------------------------------------------------
# Dtype rules by enumeration
# ------------------------------------------------------------------------------------------------

def _dtype_cases(op: str, nin: int, expect: Callable[..., tuple[DType | None, str | None]],
                 attrs: dict | None = None, shapes: Sequence[tuple] | None = None) -> Iterator[Case]:
    def check() -> dict | None:
        for dts in itertools.product(ALL_DTYPES, repeat=nin):
            shp = shapes or [(2,)] * nin
            res, label = run_int(op, [TensorType(d, s) for d, s in zip(dts, shp)], dict(attrs or {}))
            want_dt, want_label = expect(*dts)
            got = (res.dtype if res is not None else None, label)
            if got != (want_dt, want_label):
                return {f"dtype{i}": d.value for i, d in enumerate(dts)} | {"got": str(got)}
        return None
    yield Case(f"all {len(ALL_DTYPES) ** nin} dtype combinations", check=check)


def _num(d: DType) -> bool:
    return d in (DType.I32, DType.I64, DType.F32, DType.F64)


# ------------------------------------------------------------------------------------------------
# Op-specific obligations
# ------------------------------------------------------------------------------------------------


def _reduce_ref_cases(fam: Family) -> Iterator[Case]:
    for desc, build in fam.instances:
        f, r = _sym_instance(fam.op, build)
        types, attrs = build(Sym())
        x = [z3.Int(f"x{i}") for i in range(types[0].rank)]
        axes, keep = attrs["axes"], attrs["keepdims"]
        if keep:
            want = [(1 if i in axes else d) for i, d in enumerate(x)]
        else:
            want = [d for i, d in enumerate(x) if i not in axes]
        # element count: Π result · Π reduced = Π operand (keepdims or not)
        red = Z3_ARITH.prod(d for i, d in enumerate(x) if i in axes)
        yield Case(desc, f.premises(), z3.And(eqs(r.result.shape, want),
                                              zint(Z3_ARITH.prod(r.result.shape)) * zint(red) == zint(Z3_ARITH.prod(x))),
                   f.vars)


def _axes_cases(op: str, range_label: str, order_label: str) -> Iterator[Case]:
    def check() -> dict | None:
        for r in range(4):
            for k in range(4):
                for axes in itertools.product(range(-1, r + 1), repeat=k):
                    res, label = run_int(op, [TensorType(F32, (2,) * r)], {"axes": tuple(axes), "keepdims": False})
                    want = range_label if any(not 0 <= a < r for a in axes) else \
                        order_label if any(a >= b for a, b in zip(axes, axes[1:])) else None
                    if label != want:
                        return {"rank": r, "axes": str(list(axes)), "got": str(label)}
        return None
    yield Case("ranks 0..3, all axis lists of length ≤ 3 over [-1, rank]", check=check)


def _perm_cases(bound: int) -> Iterator[Case]:
    for r in range(bound + 1):
        for p in itertools.permutations(range(r)):
            x = tuple(z3.Int(f"x{i}") for i in range(r))
            r1 = run_sym("transpose", [TensorType(F32, x)], {"permutation": p})
            inv = tuple(sorted(range(r), key=lambda i: p[i]))
            r2 = run_sym("transpose", [r1.result], {"permutation": inv})
            goal = z3.And(r1.ctx.precondition(), r2.ctx.precondition(), eqs(r2.result.shape, x)) \
                if r2.result is not None else z3.BoolVal(False)
            yield Case(f"perm {list(p)}", [d >= 0 for d in x], goal, list(x))


def _bad_perm_cases() -> Iterator[Case]:
    def check() -> dict | None:
        for r in range(4):
            for k in range(5):
                for p in itertools.product(range(-1, r + 1), repeat=k):
                    _, label = run_int("transpose", [TensorType(F32, (2,) * r)], {"permutation": p})
                    want = "C1" if k != r else (None if sorted(p) == list(range(r)) else "C2")
                    if label != want:
                        return {"rank": r, "permutation": str(list(p)), "got": str(label)}
        return None
    yield Case("ranks 0..3, all integer lists of length ≤ 4 over [-1, rank]", check=check)


def _reshape_law_cases(fam: Family, law: str) -> Iterator[Case]:
    for desc, build in fam.instances:
        f, r = _sym_instance("reshape", build)
        types, _ = build(Sym())
        x = tuple(z3.Int(f"x{i}") for i in range(types[0].rank))
        pre = f.premises() + [r.ctx.precondition()]
        if law == "count":
            goal = zint(Z3_ARITH.prod(r.result.shape)) == zint(Z3_ARITH.prod(x))
        else:  # round trip
            back = run_sym("reshape", [r.result], {"shape": x})
            goal = z3.And(back.ctx.precondition(), eqs(back.result.shape, x)) if back.result is not None \
                else z3.BoolVal(False)
        yield Case(desc, pre, goal, f.vars)


def _per_axis(fam: Family, goal_fn: Callable[[Any, Any, Any, Any, Any], Any]) -> Iterator[Case]:
    """Slice cases: goal_fn(n, start, stop, step, extent) for each axis, conjoined."""
    for desc, build in fam.instances:
        f, r = _sym_instance("slice", build)
        types, attrs = build(Sym())
        n = [z3.Int(f"n{i}") for i in range(types[0].rank)]
        b = [z3.Int(f"b{i}") for i in range(len(n))]
        e = [z3.Int(f"e{i}") for i in range(len(n))]
        s = [z3.Int(f"s{i}") for i in range(len(n))]
        goal = conj(goal_fn(n[i], b[i], e[i], s[i], r.result.shape[i]) for i in range(len(n)))
        yield Case(desc, f.premises() + [r.ctx.precondition()], goal, f.vars)


def _slice_reference(n, b, e, s, x) -> Any:
    """Independent: x = #{k ≥ 0 : b + k·s strictly before e in the direction of s}."""
    x = zint(x)
    before = lambda i: z3.If(s > 0, i < e, i > e)  # noqa: E731
    return z3.And(x >= 0, z3.Implies(x >= 1, before(b + (x - 1) * s)), z3.Not(before(b + x * s)))


def _slice_in_bounds(n, b, e, s, x) -> Any:
    x = zint(x)
    return z3.Implies(x >= 1, z3.And(0 <= b, b <= n - 1, 0 <= b + (x - 1) * s, b + (x - 1) * s <= n - 1))


def _slice_vjp(n, b, e, s, x) -> Any:
    """step > 0: pad(result, lo = b, hi = n - 1 - last, interior = s - 1) is valid and has extent n."""
    x = zint(x)
    last = b + (x - 1) * s
    hi = z3.If(x >= 1, n - 1 - last, n - b)
    ctx = Z3Context()
    out = OPS["pad"].infer(ctx, [TensorType(F32, (x,)), TensorType(F32, ())],
                           {"lo": (b,), "hi": (hi,), "interior": (s - 1,)})
    return z3.Implies(s > 0, z3.And(ctx.precondition(), zint(out.shape[0]) == n))


def _slice_mirror(n, b, e, s, x) -> Any:
    """step < 0: the mirrored window (start = last, stop = b + 1, step = -s) is valid, same extent."""
    x = zint(x)
    last = b + (x - 1) * s
    ctx = Z3Context()
    out = OPS["slice"].infer(ctx, [TensorType(F32, (n,))], {"start": (last,), "stop": (b + 1,), "step": (-s,)})
    return z3.Implies(z3.And(s < 0, x >= 1), z3.And(ctx.precondition(), zint(out.shape[0]) == x))


def _pad_cases(fam: Family, law: str) -> Iterator[Case]:
    for desc, build in fam.instances:
        f, r = _sym_instance("pad", build)
        types, attrs = build(Sym())
        rank = types[0].rank
        n = [z3.Int(f"n{i}") for i in range(rank)]
        lo = [z3.Int(f"lo{i}") for i in range(rank)]
        hi = [z3.Int(f"hi{i}") for i in range(rank)]
        it = [z3.Int(f"in{i}") for i in range(rank)]
        goals = []
        for i in range(rank):
            out = zint(r.result.shape[i])
            if law == "reference":  # independent: lo + hi + n elements + (n - 1) gaps of `interior`
                goals.append(z3.If(n[i] >= 1, out == lo[i] + hi[i] + n[i] + (n[i] - 1) * it[i],
                                   out == lo[i] + hi[i]))
            else:  # VJP: slice(result, lo, lo + (n-1)(in+1) + 1, in + 1) is valid with extent n (n ≥ 1)
                ctx = Z3Context()
                sl = OPS["slice"].infer(ctx, [TensorType(F32, (out,))],
                                        {"start": (lo[i],), "stop": (lo[i] + (n[i] - 1) * (it[i] + 1) + 1,),
                                         "step": (it[i] + 1,)})
                goals.append(z3.Implies(n[i] >= 1, z3.And(ctx.precondition(), zint(sl.shape[0]) == n[i])))
        yield Case(desc, f.premises() + [r.ctx.precondition()], conj(goals), f.vars)


def _gather_ref_cases(fam: Family) -> Iterator[Case]:
    for desc, build in fam.instances:
        f, r = _sym_instance("gather", build)
        types, attrs = build(Sym())
        x = [z3.Int(f"x{i}") for i in range(types[0].rank)]
        ix = [z3.Int(f"i{i}") for i in range(types[1].rank)]
        a = attrs["axis"]
        yield Case(desc, f.premises(), eqs(r.result.shape, x[:a] + ix + x[a + 1:]), f.vars)


def _gather_axis_cases() -> Iterator[Case]:
    def check() -> dict | None:
        for r in range(5):
            for a in range(-2, r + 2):
                _, label = run_int("gather", [TensorType(F32, (2,) * r), TensorType(DType.I32, (3,))], {"axis": a})
                if label != (None if 0 <= a < r else "C2"):
                    return {"rank": r, "axis": a, "got": str(label)}
        return None
    yield Case("ranks 0..4, axes -2..rank+1", check=check)


def _matmul_cases(fam: Family, law: str) -> Iterator[Case]:
    for desc, build in fam.instances:
        f, r = _sym_instance("matmul", build)
        types, _ = build(Sym())
        a = [z3.Int(f"a{i}") for i in range(types[0].rank)]
        b = [z3.Int(f"b{i}") for i in range(types[1].rank)]
        P = r.ctx.precondition()
        if law == "fails-exactly":
            goal = P == z3.And(a[-1] == b[-2], defined_ref(a[:-2], b[:-2]))
            yield Case(desc, f.premises(), goal, f.vars)
            continue
        if law == "reference":
            goal = z3.And(zint(r.result.shape[-2]) == a[-2], zint(r.result.shape[-1]) == b[-1],
                          result_ref(r.result.shape[:-2], a[:-2], b[:-2]))
            yield Case(desc, f.premises() + [P], goal, f.vars)
            continue
        # VJP: matmul(g, swap(rhs)) and matmul(swap(lhs), g) are defined; their last two dims are
        # lhs's and rhs's, and their batch dims broadcast back onto the operands' (unbroadcast).
        g = r.result

        def swap(t: TensorType) -> Run:
            p = tuple(range(t.rank - 2)) + (t.rank - 1, t.rank - 2)
            return run_sym("transpose", [t], {"permutation": p})
        tb, ta = swap(types[1]), swap(types[0])
        dl = run_sym("matmul", [g, tb.result], {})
        dr = run_sym("matmul", [ta.result, g], {})
        goal = z3.And(dl.ctx.precondition(), dr.ctx.precondition(),
                      eqs(dl.result.shape[-2:], a[-2:]), eqs(dr.result.shape[-2:], b[-2:]),
                      eqs(dl.result.shape[:-2], g.shape[:-2]), eqs(dr.result.shape[:-2], g.shape[:-2]))
        yield Case(desc, f.premises() + [P], goal, f.vars)


def _conv_cases(law: str) -> Iterator[Case]:
    f = Sym()
    types, attrs = _conv_builder(f)
    r = run_sym("conv2d", types, attrs)
    P = r.ctx.precondition()
    x, w = types[0].shape, types[1].shape
    goals = []
    for i in range(2):
        n, k, s = x[1 + i], w[i], attrs["strides"][i]
        lo, hi = attrs["padding"][i]
        ld, rd = attrs["lhs_dilation"][i], attrs["rhs_dilation"][i]
        out = zint(r.result.shape[1 + i])
        if law == "reference":
            # independent: OH = #{o ≥ 0 : o·s + (k-1)·rd ≤ L - 1}, L = (dilated input) + lo + hi
            L = z3.If(n >= 1, (n - 1) * ld + 1, 0) + lo + hi
            fits = lambda o: o * s + (k - 1) * rd <= L - 1  # noqa: E731
            goals.append(z3.And(out >= 0, z3.Implies(out >= 1, fits(out - 1)), z3.Not(fits(out))))
        else:  # fails-exactly
            goals.append(z3.And(s >= 1, ld >= 1, rd >= 1, lo >= 0, hi >= 0, k >= 1))
    if law == "reference":
        goal = z3.And(*goals, zint(r.result.shape[0]) == x[0], zint(r.result.shape[3]) == w[3])
        yield Case("rank 4, strides/padding/dilations symbolic", f.premises() + [P], goal, f.vars)
    else:
        yield Case("rank 4", f.premises(), P == z3.And(*goals, x[3] == w[2]), f.vars)


def _floordiv_cases() -> Iterator[Case]:
    a, b = z3.Ints("a b")
    q = zint(Z3_ARITH.floordiv(a, b))
    c = zint(Z3_ARITH.ceildiv(a, b))
    yield Case("floordiv, all a and b ≠ 0", [b != 0],
               z3.If(b > 0, z3.And(q * b <= a, a < q * b + b), z3.And(q * b >= a, a > q * b + b)), [a, b])
    yield Case("ceildiv, all a and b > 0", [b > 0], z3.And(c * b >= a, a > (c - 1) * b), [a, b])
    yield Case("max/min", [], z3.And(zint(Z3_ARITH.max(a, b)) >= a, zint(Z3_ARITH.max(a, b)) >= b,
                                     z3.Or(zint(Z3_ARITH.max(a, b)) == a, zint(Z3_ARITH.max(a, b)) == b),
                                     zint(Z3_ARITH.min(a, b)) <= a, zint(Z3_ARITH.min(a, b)) <= b,
                                     z3.Or(zint(Z3_ARITH.min(a, b)) == a, zint(Z3_ARITH.min(a, b)) == b)), [a, b])

    def check() -> dict | None:  # and the z3 terms evaluate like Python on a grid
        for x in range(-7, 8):
            for y in list(range(-4, 0)) + list(range(1, 5)):
                for fn, py in ((Z3_ARITH.floordiv, lambda u, v: u // v),
                               (Z3_ARITH.ceildiv, lambda u, v: INT_ARITH.ceildiv(u, v))):
                    if evaluate_term(zint(fn(a, b)), {a: x, b: y}) != py(x, y):
                        return {"a": x, "b": y}
        return None
    yield Case("grid a ∈ [-7, 7], b ∈ [-4, 4] \\ {0}", check=check)


# ------------------------------------------------------------------------------------------------
# The catalogue
# ------------------------------------------------------------------------------------------------

@dataclass
class SpecObligation:
    op: str
    name: str
    text: str
    cases: Callable[[], Iterable[Case]]


def catalogue(rank_bound: int = DEFAULT_RANK_BOUND) -> list[SpecObligation]:
    R = rank_bound
    out: list[SpecObligation] = []

    def add(op: str, name: str, text: str, cases: Callable[[], Iterable[Case]]) -> None:
        out.append(SpecObligation(op, name, text, cases))

    def generic(fam: Family) -> None:
        add(fam.op, "satisfiable", "the constraints admit a non-trivial result (non-vacuity)",
            lambda: (_flip(c) for c in cases_satisfiable(fam)))
        add(fam.op, "nonneg", "constraints ⇒ every result dim ≥ 0", lambda: cases_nonneg(fam))
        add(fam.op, "concrete", "Python-int evaluation = Z3 evaluation on sampled points (incl. failures)",
            lambda: cases_concrete(fam))

    add("arith", "floordiv", "Z3Arith floordiv/ceildiv/max/min are Python's //, ceil, max, min",
        _floordiv_cases)
    for law, text in BROADCAST_LAWS.items():
        add("broadcast", law, text + f" (ranks ≤ {min(R, 4) if law == 'associative' else R})",
            lambda law=law: broadcast_law_cases(law, min(R, 4) if law == "associative" else R))

    for op in ("add", "sub", "mul", "div", "compare"):
        dt = DType.BOOL if op == "compare" else F32
        fam = _binary_family(op, R, dt)
        generic(fam)
        for law in ("commutative", "identity", "fails-exactly"):
            add(op, law, f"{op} shape: " + BROADCAST_LAWS[law] + f" (ranks ≤ {R})",
                lambda op=op, law=law, dt=dt: _binary_op_law_cases(op, law, R, dt))
        if op == "compare":
            add(op, "dtype", "result bool; C1 iff dtypes differ",
                lambda: _dtype_cases("compare", 2, lambda a, b: (DType.BOOL, None) if a is b else (None, "C1"),
                                     {"direction": "lt"}))
        else:
            add(op, "dtype", "result dtype = lhs; C1 iff dtypes differ, else C2 iff not numeric",
                lambda op=op: _dtype_cases(op, 2, lambda a, b: (None, "C1") if a is not b else
                                           ((a, None) if _num(a) else (None, "C2"))))
    for op in ("exp", "log"):
        fam = _unary_family(op, R, F32)
        generic(fam)
        add(op, "dtype", "C1 iff dtype is not f32/f64; result dtype = operand",
            lambda op=op: _dtype_cases(op, 1, lambda a: (a, None) if a in (DType.F32, DType.F64) else (None, "C1")))
    fam = _unary_family("convert", R, F32, {"dtype": DType.I32})
    generic(fam)
    add("convert", "dtype", "result dtype = attribute dtype, for every pair",
        lambda: (Case(f"to {t.value}", check=lambda t=t: _convert_check(t)) for t in ALL_DTYPES))
    add("const", "concrete", "result = the value's dtype and shape; C1 for unsupported element types",
        _const_cases)

    sel = _select_family(min(R, 4))
    generic(sel)
    add("select", "fails-exactly", f"defined iff the three shapes broadcast (independent; ranks ≤ {min(R, 4)})",
        lambda: (Case(d, c.premises, c.goal, c.vars) for d, c in _select_ref(sel, "fails-exactly")))
    add("select", "reference", f"result extent = common non-1 extent, or 1 (ranks ≤ {min(R, 4)})",
        lambda: (Case(d, c.premises, c.goal, c.vars) for d, c in _select_ref(sel, "reference")))
    add("select", "dtype", "C1 iff pred not bool, else C2 iff branch dtypes differ; result = on_true's",
        lambda: _dtype_cases("select", 3, lambda p, t, e: (None, "C1") if p is not DType.BOOL else
                             ((None, "C2") if t is not e else (t, None))))

    for op in ("reduce_sum", "reduce_max"):
        fam = _reduce_family(op, R)
        generic(fam)
        add(op, "reference", "result = operand with reduced axes removed or set to 1; "
                             "Π result · Π reduced = Π operand", lambda fam=fam: _reduce_ref_cases(fam))
        add(op, "axes", "C1 iff an axis is outside [0, rank), else C2 iff axes not strictly increasing",
            lambda op=op: _axes_cases(op, "C1", "C2"))
    add("reduce_sum", "dtype", "C3 iff bool", lambda: _dtype_cases(
        "reduce_sum", 1, lambda a: (a, None) if _num(a) else (None, "C3"), {"axes": (0,), "keepdims": False}))

    fam = _reshape_family(R)
    generic(fam)
    add("reshape", "element-count", "reshape preserves the element count",
        lambda: _reshape_law_cases(_reshape_family(R), "count"))
    add("reshape", "round-trip", "reshape(reshape(x, s), shape(x)) is defined and has shape(x)",
        lambda: _reshape_law_cases(_reshape_family(R), "round"))

    fam = _transpose_family(R)
    generic(fam)
    add("transpose", "inverse", f"transpose(transpose(x, p), inverse(p)) = x for all permutations (ranks ≤ {R})",
        lambda: _perm_cases(R))
    add("transpose", "permutation", "C1 iff length ≠ rank, else C2 iff not a permutation", _bad_perm_cases)

    fam = _slice_family(R)
    generic(fam)
    add("slice", "reference", "extent = #{k ≥ 0 : start + k·step strictly before stop} (independent)",
        lambda: _per_axis(_slice_family(R), _slice_reference))
    add("slice", "in-bounds", "every index read, start + k·step for k < extent, lies in [0, n)",
        lambda: _per_axis(_slice_family(R), _slice_in_bounds))
    add("slice", "vjp-pad", "step > 0: pad(g, lo = start, hi = n - 1 - last, interior = step - 1) "
                            "is defined and gives back n (hi = n - start when empty)",
        lambda: _per_axis(_slice_family(R), _slice_vjp))
    add("slice", "vjp-mirror", "step < 0: the mirrored positive window is defined with the same extent",
        lambda: _per_axis(_slice_family(R), _slice_mirror))

    fam = _pad_family(R)
    generic(fam)
    add("pad", "reference", "extent = lo + hi + n + (n - 1)·interior, or lo + hi when n = 0 (independent)",
        lambda: _pad_cases(_pad_family(R), "reference"))
    add("pad", "vjp-slice", "n ≥ 1: slice(g, lo, lo + (n-1)(interior+1) + 1, interior + 1) is defined, extent n",
        lambda: _pad_cases(_pad_family(R), "vjp"))
    add("pad", "dtype", "C1 iff value rank ≠ 0, C2 iff dtypes differ",
        lambda: _dtype_cases("pad", 2, lambda a, b: (a, None) if a is b else (None, "C2"),
                             {"lo": (0,), "hi": (0,), "interior": (0,)}, [(2,), ()]))

    fam = _gather_family(R)
    generic(fam)
    add("gather", "reference", "shape = x[:axis] ++ indices ++ x[axis+1:]", lambda: _gather_ref_cases(_gather_family(R)))
    add("gather", "axis", "C2 iff axis outside [0, rank)", _gather_axis_cases)

    fam = _matmul_family(R)
    generic(fam)
    for law, text in (("fails-exactly", "defined iff K matches and batch dims broadcast (independent)"),
                      ("reference", "result = broadcast batch ++ [M, N]"),
                      ("vjp", "matmul(g, swapT(rhs)) has [..., M, K], matmul(swapT(lhs), g) has [..., K, N]")):
        add("matmul", law, text, lambda law=law: _matmul_cases(_matmul_family(R), law))

    fam = _conv_family()
    generic(fam)
    add("conv2d", "reference", "OH = #{o ≥ 0 : o·s + (k-1)·rd ≤ dilated(H) + lo + hi - 1}, OW likewise",
        lambda: _conv_cases("reference"))
    add("conv2d", "fails-exactly", "defined iff C_in matches, strides/dilations ≥ 1, padding ≥ 0, KH, KW ≥ 1",
        lambda: _conv_cases("fails-exactly"))
    return out


def _flip(c: Case) -> Case:
    """``satisfiable``: the case proves when Z3 finds P satisfiable (it refutes the negation)."""
    def check(c=c) -> dict | None:
        if z3.is_false(c.goal):
            return None
        if z3.is_true(c.goal):
            return {"status": "unsat"}
        s = _sat_solver()
        s.push()
        s.add(z3.Not(c.goal))
        r = s.check()
        s.pop()
        return None if r == z3.sat else {"status": str(r)}
    return Case(c.desc, check=check)


_SAT: list = []


def _sat_solver() -> Any:
    from mind.ir.z3dims import new_solver
    from mind.verify.prove import spec_limits

    if not _SAT:
        _SAT.append(new_solver(spec_limits()))
    return _SAT[0]


def _convert_check(t: DType) -> dict | None:
    for d in ALL_DTYPES:
        res, label = run_int("convert", [TensorType(d, (3, 0))], {"dtype": t})
        if label is not None or res.dtype is not t or res.shape != (3, 0):
            return {"from": d.value, "to": t.value}
    return None


def _select_ref(fam: Family, law: str) -> Iterator[tuple[str, Case]]:
    for desc, build in fam.instances:
        f, r = _sym_instance("select", build)
        types, _ = build(Sym())
        shapes = [[z3.Int(f"{p}{i}") for i in range(t.rank)] for p, t in zip("pte", types)]
        P = r.ctx.precondition()
        if law == "fails-exactly":
            yield desc, Case(desc, f.premises(), P == defined_ref(*shapes), f.vars)
        else:
            yield desc, Case(desc, f.premises() + [P], result_ref(r.result.shape, *shapes), f.vars)


def run_spec(rank_bound: int = DEFAULT_RANK_BOUND, prover: Prover | None = None,
             only: Sequence[str] | None = None) -> SpecReport:
    prover = prover or Prover()
    t0 = time.perf_counter()
    rep = SpecReport(rank_bound=rank_bound)
    for ob in catalogue(rank_bound):
        if only and ob.op not in only:
            continue
        rep.verdicts.append(discharge(ob.op, ob.name, ob.text, ob.cases(), prover))
    rep.seconds = time.perf_counter() - t0
    return rep


def verdict_for(op: str, name: str, cases: Iterable[Case], prover: Prover | None = None) -> Verdict:
    return discharge(op, name, "", cases, prover or Prover())
