"""`mind verify --equiv A B`: translation validation of two Core IR functions on concrete shapes.

For inputs of the given shapes, every element of every result of both functions is built as a Z3
term over the input elements (``z3tensor`` index maps, ``z3scalars.ExactScalars`` element
semantics: IEEE f32/f64, wrapping i32/i64 with the spec's total division, bool), with both
functions reading the same input elements and sharing one interpretation of the ops whose spec
result is only bounded (``exp``, ``log``, float ``reduce_sum``/``matmul``/``conv2d``: uninterpreted
functions that keep the values the spec fixes exactly).  An op whose operands are all constants
is computed by the reference interpreter, which *is* the semantics (as the canonicalizer's
constant folding does).

Each pair of result elements is then decided:

* the same term (Z3 terms are hash-consed): equal, no solver call;
* otherwise the solver is asked for inputs on which the two differ (SMT ``=`` on floats is
  bit-exact with one NaN, the spec's ``exact`` class).  Unsat: equal.  Pairs that are the same up
  to renaming of the input elements (the common case for elementwise programs) are decided once.

A model is a candidate counterexample: both functions are run on the reference interpreter with
those inputs.  If a result differs there, the verdict is ``different``: the inputs are written as
``.npy`` files (``mind.driver_io.OutputFolder``: a folder holding one run's files) with the first differing result.  If not, the
model relied on how the bounded ops were interpreted, and the verdict is ``unknown`` (as it is
when a query exhausts its resource limit).  Reports carry no timings: they are byte-identical
across runs.  Z3 is imported here: import lazily.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import z3

from mind.diagnostics import error
from mind.ir.core import Function
from mind.spec.dims import evaluate
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType
from mind.ir.solver_limits import SolverLimits
from mind.ir.z3dims import SEED, new_solver, timed_check
from mind.verify.z3scalars import ExactScalars, allowed_sum, facts, is_bounded
from mind.verify.z3tensor import Flattening, Tensor, Unsupported, apply, constant, leaf

RLIMIT = 20_000_000  # per query
TIMEOUT_S = 120.0  # per query: the safety net behind the rlimit (see docs/verification.md)
#: Nodes ``_absorb`` asks about: arithmetic and choice, whose result may be one of their operands.
_ABSORBING = frozenset({z3.Z3_OP_FPA_ADD, z3.Z3_OP_FPA_SUB, z3.Z3_OP_FPA_MUL, z3.Z3_OP_FPA_DIV, z3.Z3_OP_BADD,
                        z3.Z3_OP_BSUB, z3.Z3_OP_BMUL, z3.Z3_OP_ITE})
PROBES = 16  # random inputs (of special values) run on the reference before a solver query
#: Operators whose two operands may be swapped (IEEE addition and multiplication are commutative:
#: rules ``add-commute`` and ``mul-commute`` of ``mind verify --rewrites``).
_COMMUTATIVE = frozenset({z3.Z3_OP_FPA_ADD, z3.Z3_OP_FPA_MUL, z3.Z3_OP_BADD, z3.Z3_OP_BMUL, z3.Z3_OP_AND,
                          z3.Z3_OP_OR, z3.Z3_OP_EQ})
_DIM_ATTRS = ("shape", "start", "stop")  # attributes whose entries may be symbolic dims


@dataclass
class EquivReport:
    verdict: str  # equal | refines | different | unknown
    function: str
    shapes: dict[str, str]
    elements: int = 0
    identical: int = 0  # element pairs that are one term
    proved: int = 0  # element pairs the solver proved equal (or that repeat a proved pair)
    refined: int = 0  # element pairs where B gives a result the spec allows for A's float sum
    queries: int = 0  # solver calls
    counterexample: dict[str, Any] | None = None
    reason: str | None = None
    files: list[str] = field(default_factory=list)
    rlimit: int = RLIMIT

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "function": self.function, "shapes": self.shapes,
                "elements": self.elements, "identical": self.identical, "proved": self.proved,
                "refined": self.refined,
                "queries": self.queries, "counterexample": self.counterexample, "reason": self.reason,
                "files": self.files, "rlimit": self.rlimit, "seed": SEED}


# ------------------------------------------------------------------------------------------------
# shapes
# ------------------------------------------------------------------------------------------------


def parse_shapes(specs: Sequence[str]) -> dict[str, TensorType]:
    """``--shapes NAME=f32[2, 3]`` entries as concrete parameter types (E7002 / IR type errors)."""
    from mind.ir.parser import IRParser

    out: dict[str, TensorType] = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        name = name.strip().lstrip("%")
        if not sep or not name:
            raise error("E7002", f"--shapes `{spec}` is not of the form NAME=DTYPE[DIMS]",
                        help="for example --shapes x=f32[2,3]")
        p = IRParser(text, "<--shapes>")
        t = p.parse_type()
        if p.tok.kind != "eof":
            raise error("E7002", f"--shapes `{spec}`: unexpected `{p.tok.text}` after the type")
        if not all(isinstance(d, int) for d in t.shape):
            raise error("E7002", f"--shapes `{spec}`: the shape must be concrete")
        if name in out:
            raise error("E7002", f"--shapes gives `{name}` twice")
        out[name] = t
    return out


def _param_types(fa: Function, fb: Function, shapes: Mapping[str, TensorType]) -> list[TensorType]:
    """The concrete type of each parameter (A's names), checked against both functions."""
    import numpy as np

    from mind.calling import bind_arguments

    unknown = sorted(set(shapes) - {p.name for p in fa.params})
    if unknown:
        raise error("E7002", f"--shapes names {', '.join(unknown)}, which @{fa.name} does not take",
                    help="parameters: " + ", ".join(p.name for p in fa.params))
    if len(fa.params) != len(fb.params):
        raise error("E2001", f"@{fa.name} takes {len(fa.params)} parameters and @{fb.name} {len(fb.params)}",
                    help="the two functions must have the same signature")
    types = []
    for p, q in zip(fa.params, fb.params):
        t = shapes.get(p.name)
        if t is None:
            if not all(isinstance(d, int) for d in p.type.shape):
                raise error("E7002", f"%{p.name} has type {p.type}: give its concrete shape",
                            help=f"for example --shapes {p.name}={p.type.dtype.value}[{', '.join('2' for _ in p.type.shape)}]")
            t = p.type
        if q.type.dtype is not t.dtype or q.type.rank != t.rank:
            raise error("E2001", f"parameter %{q.name} of @{fb.name} has type {q.type}, but %{p.name} of "
                                 f"@{fa.name} is {t}", help="the two functions must have the same signature")
        types.append(t)
    zeros = [np.zeros(t.shape, dtype=t.dtype.numpy) for t in types]
    bind_arguments(fa, zeros)  # E6009 when a shape does not fit a parameter type
    bind_arguments(fb, zeros)
    return types


# ------------------------------------------------------------------------------------------------
# evaluation on Z3 terms
# ------------------------------------------------------------------------------------------------


def _run(fn: Function, env: Mapping[str, int], inputs: Sequence[Tensor], alg: ExactScalars,
         fl: Flattening) -> list[Tensor]:
    import numpy as np

    from mind.reference.ops import OP_FUNCTIONS

    vals: dict[int, Tensor] = {id(p): t for p, t in zip(fn.params, inputs)}
    for op in fn.ops:
        xs = [vals[id(v)] for v in op.operands]
        attrs = dict(op.attrs)
        for key in _DIM_ATTRS:
            if key in attrs:
                attrs[key] = tuple(evaluate(d, env) for d in attrs[key])
        dtype = op.result.type.dtype
        shape = tuple(evaluate(d, env) for d in op.result.type.shape)
        if op.op == "const":
            t = constant(np.asarray(attrs["value"]), dtype, alg, fl)
        elif all(x.array is not None for x in xs):  # the reference computes ops on constants
            t = constant(np.asarray(OP_FUNCTIONS[op.op](*[x.array for x in xs], **attrs)), dtype, alg, fl)
        else:
            t = apply(op.op, xs, attrs, dtype, shape, alg, fl)
        vals[id(op.result)] = t
    return [vals[id(v)] for v in fn.results]


def _nodes(terms: Sequence[Any]) -> Any:
    """Every distinct node of ``terms``, depth first, in first-visit order."""
    seen: set[int] = set()
    stack = list(reversed(terms))
    while stack:
        e = stack.pop()
        i = e.get_id()
        if i in seen:
            continue
        seen.add(i)
        yield e
        stack.extend(reversed(e.children()))


def _scan(terms: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """The input elements (uninterpreted constants) and bounded-op applications in ``terms``, in
    first-visit order."""
    leaves: list[Any] = []
    apps: list[Any] = []
    uninterpreted = z3.Z3_OP_UNINTERPRETED
    for e in _nodes(terms):
        if e.num_args() == 0:
            if z3.is_app(e) and e.decl().kind() == uninterpreted:
                leaves.append(e)
        elif is_bounded(e):
            apps.append(e)
    return leaves, apps


def _substitute(t: Any, froms: Any, tos: Any, n: int) -> Any:
    """``z3.substitute`` without its per-pair sort checks (the pairs are built with equal sorts)."""
    return z3.z3._to_expr_ref(z3.Z3_substitute(t.ctx_ref(), t.as_ast(), n, froms, tos), t.ctx)


def _ast_array(terms: Sequence[Any]) -> Any:
    arr = (z3.Ast * len(terms))()
    for k, t in enumerate(terms):
        arr[k] = t.as_ast()
    return arr


def _is_value(e: Any) -> bool:
    """A constant the absorption query keeps: a numeral, a rounding mode, ``true``/``false``."""
    return z3.is_fp_value(e) or z3.is_bv_value(e) or z3.is_true(e) or z3.is_false(e) or z3.is_fprm(e) \
        or (z3.is_app(e) and e.num_args() == 0 and e.decl().kind() != z3.Z3_OP_UNINTERPRETED)


def _special_values(dtype: DType) -> Any:
    import numpy as np

    if dtype.is_float:
        info = np.finfo(dtype.numpy)
        tiny = float(np.nextafter(dtype.numpy.type(0), dtype.numpy.type(1)))
        return np.array([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, np.inf, -np.inf, np.nan, tiny, -tiny,
                         float(info.max), -float(info.max), 3.0, -7.5], dtype=dtype.numpy)
    if dtype.is_int:
        lo, hi = dtype.int_min, dtype.int_max
        return np.array([0, 1, -1, 2, lo, hi, lo + 1, hi - 1, 7, -9], dtype=dtype.numpy)
    return np.array([False, True])


def _bit_equal(a: Any, b: Any) -> Any:
    """Elementwise: the spec's ``exact`` equality (bits, any NaN equals any NaN)."""
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f":
        bits = np.uint32 if a.dtype.itemsize == 4 else np.uint64
        return (a.view(bits) == b.view(bits)) | (np.isnan(a) & np.isnan(b))
    return a == b


# ------------------------------------------------------------------------------------------------
# the check
# ------------------------------------------------------------------------------------------------


class _Checker:
    def __init__(self, fa: Function, fb: Function, types: list[TensorType], rlimit: int,
                 out_dir: str | None) -> None:
        self.fa, self.fb, self.types = fa, fb, types
        self.rlimit = rlimit
        self._reason: str | None = None  # why the last solver call was unknown
        self.out_dir = out_dir
        self.alg = ExactScalars()
        self.fl = Flattening()
        self.rep = EquivReport("equal", fa.name, {p.name: str(t) for p, t in zip(fa.params, types)}, rlimit=rlimit)
        self.decided: dict[tuple[int, int], str] = {}  # canonical pair -> equal | refines | unknown | no
        self._alive: list[Any] = []
        self.proved_pairs: dict[int, tuple[Any, Any]] = {}  # id of a subterm of A -> (it, its equal in B)
        self.same: dict[tuple[int, int], bool] = {}  # (id, id) -> whether congruence showed them equal
        self.absorbed: dict[int, Any] = {}  # id of a term -> it with absorbed operands (``_absorb``)
        self._canon: dict[tuple, Any] = {}
        self._probed = False

    def run(self) -> EquivReport:
        from mind.calling import bind_arguments
        import numpy as np

        fa, fb = self.fa, self.fb
        zeros = [np.zeros(t.shape, dtype=t.dtype.numpy) for t in self.types]
        env_a, env_b = bind_arguments(fa, zeros)[1], bind_arguments(fb, zeros)[1]
        inputs = [leaf(p.name, t.dtype, t.shape, self.alg, self.fl) for p, t in zip(fa.params, self.types)]
        try:
            outs_a = _run(fa, env_a, inputs, self.alg, self.fl)
            outs_b = _run(fb, env_b, inputs, self.alg, self.fl)
        except Unsupported as exc:
            return self._unknown(str(exc))
        if len(outs_a) != len(outs_b):
            raise error("E2001", f"@{fa.name} returns {len(outs_a)} results and @{fb.name} {len(outs_b)}",
                        help="the two functions must have the same signature")
        for r, (a, b) in enumerate(zip(outs_a, outs_b)):
            if a.dtype is not b.dtype or a.shape != b.shape:
                raise error("E2001", f"result {r} has type {TensorType(a.dtype, a.shape)} in @{fa.name} and "
                                     f"{TensorType(b.dtype, b.shape)} in @{fb.name}",
                            help="the two functions must have the same signature")
        unknown: str | None = None
        for r, (a, b) in enumerate(zip(outs_a, outs_b)):
            n = 1
            for d in a.shape:
                n *= d
            if a.array is not None and b.array is not None:  # both folded: compare the arrays
                self.rep.elements += n
                same = _bit_equal(a.array, b.array)
                if not np.all(same):
                    return self._confirm_zeros()
                self.rep.identical += n
                continue
            try:
                for k in range(n):
                    idx = self.fl.unflatten(a.shape, k)
                    self.rep.elements += 1
                    ta, tb = a.at(idx), b.at(idx)
                    if ta.eq(tb):
                        self.rep.identical += 1
                        continue
                    status = self._decide(ta, tb)
                    if status == "different":
                        return self.rep
                    if status == "unknown" and unknown is None:
                        unknown = self.rep.reason
            except Unsupported as exc:
                return self._unknown(str(exc))
        if unknown is not None:
            self.rep.verdict = "unknown"
            self.rep.reason = unknown
        elif self.rep.refined:
            self.rep.verdict = "refines"
        return self.rep

    def _unknown(self, reason: str) -> EquivReport:
        self.rep.verdict = "unknown"
        self.rep.reason = reason
        return self.rep

    def _key(self, ta: Any, tb: Any, leaves: Sequence[Any]) -> tuple[int, int]:
        """The pair up to renaming of its input elements (the renamed terms are kept alive with the
        verdict, since Z3 reuses the ids of freed terms)."""
        if not leaves:
            return ta.get_id(), tb.get_id()
        froms, tos = _ast_array(leaves), _ast_array([self._canonical(k, v) for k, v in enumerate(leaves)])
        ca, cb = _substitute(ta, froms, tos, len(leaves)), _substitute(tb, froms, tos, len(leaves))
        self._alive.append((ca, cb))
        return ca.get_id(), cb.get_id()

    def _canonical(self, k: int, v: Any) -> Any:
        """The k-th canonical input element of ``v``'s sort (``_v0``, ``_v1``, …; made once)."""
        key = (k, v.sort_kind(), v.sort().get_id())
        c = self._canon.get(key)
        if c is None:
            c = self._canon[key] = z3.Const(f"_v{k}", v.sort())
        return c

    def _decide(self, ta: Any, tb: Any) -> str:
        """Decide one pair of result elements.  The pair is first renamed to canonical input
        elements (``_v0, _v1, …`` in order of appearance), so that every later pair of the same
        form is the same Z3 term and hits the caches below; a model is mapped back."""
        leaves, _ = _scan([ta, tb])
        canon = [self._canonical(k, v) for k, v in enumerate(leaves)]
        if leaves:
            froms, tos = _ast_array(leaves), _ast_array(canon)
            ta, tb = _substitute(ta, froms, tos, len(leaves)), _substitute(tb, froms, tos, len(leaves))
        self._alive.append((ta, tb))
        key = (ta.get_id(), tb.get_id())
        known = self.decided.get(key)
        if known in ("equal", "refines", "unknown"):
            self._count(known)
            return known
        verdict = self._decide_canonical(ta, tb, dict(zip(canon, leaves)))
        if verdict != "different":
            self.decided[key] = verdict
            self._count(verdict)
        return verdict

    def _count(self, verdict: str) -> None:
        if verdict == "equal":
            self.rep.proved += 1
        elif verdict == "refines":
            self.rep.refined += 1

    def _decide_canonical(self, ta: Any, tb: Any, originals: dict[Any, Any]) -> str:
        ta, tb = self._absorb(ta), self._absorb(tb)
        if self._congruent(ta, tb, top=True):
            return "equal"
        leaves, apps = _scan([ta, tb])
        if self._refines(ta, tb, apps):
            return "refines"
        if not self._probed:
            self._probed = True
            if self._probe():
                return "different"
        verdict, s = self._solve(self._replace_proved(ta), tb, apps)
        if verdict == "equal":
            return "equal"
        if verdict == "sat":
            if self._confirm(s.model(), [(v, originals.get(v, v)) for v in leaves]):
                return "different"
            self.rep.reason = ("the solver's counterexample depends on how exp/log/sums are approximated "
                               "(it does not reproduce on the reference interpreter)" if apps else
                               "the solver's counterexample does not reproduce on the reference interpreter")
        else:
            self.rep.reason = self._reason
        return "unknown"

    def _refines(self, ta: Any, tb: Any, apps: Sequence[Any]) -> bool:
        """Whether ``tb`` is, for every input, a result the spec allows for the float sum ``ta``
        (``z3scalars.allowed_sum``): B then computes one of A's permitted results."""
        if not (is_bounded(ta) and ta.decl().name().startswith("sum_")):
            return False
        dtype = DType.F32 if ta.sort() == z3.Float32() else DType.F64
        limits = SolverLimits(max(1, self.rlimit // 10), TIMEOUT_S)  # a refinement is quick to show when it holds
        s = new_solver(limits)
        s.add(*[facts(t) for t in apps if not t.eq(ta)], z3.Not(allowed_sum(dtype, ta.children(), tb)))
        self.rep.queries += 1
        return timed_check(s, limits)[0] == z3.unsat

    def _solve(self, ta: Any, tb: Any, apps: Sequence[Any]) -> tuple[str, Any]:
        """Ask for inputs on which ``ta`` and ``tb`` differ: equal | sat | unknown."""
        limits = SolverLimits(self.rlimit, TIMEOUT_S)
        s = new_solver(limits)
        s.add(*[facts(t) for t in apps], ta != tb)
        self.rep.queries += 1
        r, self._reason = timed_check(s, limits)
        return ("equal" if r == z3.unsat else "sat" if r == z3.sat else "unknown"), s

    def _congruent(self, a: Any, b: Any, top: bool = False) -> bool:
        """Whether ``a = b`` follows from congruence: the same op (or commutative op, with its
        operands swapped) on arguments that are equal, each pair decided the same way, and where
        the heads differ, by a solver query on that pair alone (decided once per pair up to
        renaming).  Every op here is a function (the bounded ones are one shared
        interpretation), so equal arguments give equal results.  ``top``: leave a pair with
        different heads to the caller."""
        if a.eq(b):
            return True
        pair = (a.get_id(), b.get_id())
        known = self.same.get(pair)
        if known is not None:
            return known
        n = a.num_args()
        if n and n == b.num_args() and a.decl().eq(b.decl()):
            xs, ys = [a.arg(k) for k in range(n)], [b.arg(k) for k in range(n)]
            ok = all(self._congruent(x, y) for x, y in zip(xs, ys)) or (
                a.decl().kind() in _COMMUTATIVE and n >= 2 and self._swapped(xs, ys))
        elif not n and not b.num_args():
            ok = False  # two different leaves (input elements or values)
        elif top:
            return False
        else:
            leaves, apps = _scan([a, b])
            key = self._key(a, b, leaves)
            verdict = self.decided.get(key)
            if verdict is None:
                verdict = self.decided[key] = self._solve(a, b, apps)[0]
            ok = verdict == "equal"
        self.same[pair] = ok
        self._alive.append((a, b))
        if ok:
            self.proved_pairs[a.get_id()] = (a, b)
        return ok

    def _absorb(self, t: Any) -> Any:
        """``t`` with every arithmetic or ``If`` node that is proved equal to one of its operands
        replaced by that operand, bottom-up (``x·1``, ``x + (-0)``, ``select(c, x, x)``: the identities
        a canonicalizer removes); each replacement is decided by ``_absorbs``."""
        memo = self.absorbed

        def go(e: Any) -> Any:
            i = e.get_id()
            hit = memo.get(i)
            if hit is not None:
                return hit
            n = e.num_args()
            out = e
            if n:
                kids = [go(e.arg(k)) for k in range(n)]
                if any(not k.eq(e.arg(j)) for j, k in enumerate(kids)):
                    out = e.decl()(*kids)
                if z3.is_app(out) and out.decl().kind() in _ABSORBING:
                    for j, k in enumerate(kids):
                        if k.sort() == out.sort() and self._absorbs(out, j):
                            out = k
                            break
            memo[i] = out
            self._alive.append((e, out))
            return out
        return go(t)

    def _absorbs(self, node: Any, j: int) -> bool:
        """Whether ``node`` equals its operand ``j`` whatever its non-constant operands are: the
        query is on the node with those operands generalized to fresh variables (so ``t - (+0)``
        is decided once, as ``v - (+0) = v``, for every ``t``), cached by its form."""
        n = node.num_args()
        args = [node.arg(k) for k in range(n)]
        fresh = [a if _is_value(a) else z3.Const(f"_g{k}", a.sort()) for k, a in enumerate(args)]
        if _is_value(fresh[j]):
            return False
        general = node.decl()(*fresh)
        key = (general.get_id(), fresh[j].get_id())
        known = self.decided.get(key)
        if known is None:
            self._alive.append((general, fresh[j]))
            verdict, _ = self._solve(general, fresh[j], [])
            known = self.decided[key] = "equal" if verdict == "equal" else "no"
        return known == "equal"

    def _replace_proved(self, t: Any) -> Any:
        """``t`` with each subterm already proved equal to a subterm of B replaced by that one:
        the solver then sees the parts the two sides share as one term."""
        pairs = [self.proved_pairs[e.get_id()] for e in _nodes([t]) if e.get_id() in self.proved_pairs]
        return z3.substitute(t, *pairs) if pairs else t

    def _probe(self) -> bool:
        """Run both functions on the reference with a fixed set of inputs built from the values
        where floating-point and wrapping arithmetic differ (±0, ±inf, NaN, subnormals, extremes);
        True (and the verdict filled in) if some input shows a difference."""
        import numpy as np

        rng = np.random.default_rng(SEED)
        pools = [_special_values(t.dtype) for t in self.types]
        sets = [[np.full(t.shape, pool[k % len(pool)], dtype=t.dtype.numpy) for t, pool in zip(self.types, pools)]
                for k in range(max(len(p) for p in pools))] if pools else []
        sets += [[rng.choice(pool, size=t.shape).astype(t.dtype.numpy) for t, pool in zip(self.types, pools)]
                 for _ in range(PROBES)]
        return any(self._report_difference(arrays) for arrays in sets)

    def _swapped(self, xs: list[Any], ys: list[Any]) -> bool:
        """The last two arguments (the operands; a rounding mode may come first) swapped."""
        head = all(self._congruent(x, y) for x, y in zip(xs[:-2], ys[:-2]))
        return head and self._congruent(xs[-2], ys[-1]) and self._congruent(xs[-1], ys[-2])

    # counterexamples -------------------------------------------------------------------------------
    def _inputs(self, model: Any, leaves: Sequence[tuple[Any, Any]]) -> list[Any]:
        """Input arrays from a model: ``leaves`` pairs each constant of the query with the input
        element it stands for (named ``param[i,j]``); the other elements are 0."""
        import numpy as np

        arrays = [np.zeros(t.shape, dtype=t.dtype.numpy) for t in self.types]
        index = {p.name: i for i, p in enumerate(self.fa.params)}
        for v, original in leaves:
            name, _, rest = original.decl().name().rpartition("[")
            i = index.get(name)
            if i is None:
                continue
            pos = tuple(int(s) for s in rest.rstrip("]").split(",") if s)
            val = model.eval(v, model_completion=True)
            arrays[i][pos] = _to_numpy(self.types[i].dtype, val)
        return arrays

    def _confirm(self, model: Any, leaves: Sequence[tuple[Any, Any]]) -> bool:
        return self._report_difference(self._inputs(model, leaves))

    def _confirm_zeros(self) -> EquivReport:
        import numpy as np

        self._report_difference([np.zeros(t.shape, dtype=t.dtype.numpy) for t in self.types])
        return self.rep

    def _report_difference(self, arrays: list[Any]) -> bool:
        """Run both functions on the reference; on a difference fill in the verdict (and write the
        inputs) and return True."""
        import numpy as np

        from mind.calling import run_reference

        ra = run_reference(self.fa, arrays)
        rb = run_reference(self.fb, arrays)
        for r, (a, b) in enumerate(zip(ra, rb)):
            same = _bit_equal(a, b)
            if np.all(same):
                continue
            where = tuple(int(i) for i in np.argwhere(~np.asarray(same))[0]) if np.ndim(same) else ()
            dtype = _dtype_of(a)
            self.rep.verdict = "different"
            self.rep.counterexample = {
                "result": r, "index": list(where),
                "a": _json_scalar(dtype, np.asarray(a)[where]), "b": _json_scalar(dtype, np.asarray(b)[where]),
                "inputs": {p.name: _json_array(arr) for p, arr in zip(self.fa.params, arrays) if arr.size <= 64}}
            if self.out_dir is not None:
                self._write(arrays)
            return True
        return False

    def _write(self, arrays: list[Any]) -> None:
        import numpy as np

        from mind.driver_io import OutputFolder

        names: list[str] = []
        for i, p in enumerate(self.fa.params):
            name = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in p.name)
            names.append(f"{name}.npy" if f"{name}.npy" not in names else f"{name}_{i}.npy")
        folder = OutputFolder(self.out_dir, names)  # type: ignore[arg-type]  # one run's files, see mind.output_dir
        for name, arr in zip(names, arrays):
            folder.write(name, lambda fh, arr=arr: np.save(fh, arr))
            self.rep.files.append(os.path.join(self.out_dir, name))  # type: ignore[arg-type]
        folder.finish()


def _dtype_of(arr: Any) -> DType:
    from mind.spec.dtypes import from_numpy

    return from_numpy(arr.dtype)  # type: ignore[return-value]


def _to_numpy(dtype: DType, val: Any) -> Any:
    import numpy as np

    if dtype.is_float:
        bv = z3.simplify(z3.fpToIEEEBV(val))
        bits = bv.as_long() if z3.is_bv_value(bv) else 0
        return np.array([bits], dtype=np.uint32 if dtype is DType.F32 else np.uint64).view(dtype.numpy)[0]
    if dtype.is_int:
        return val.as_signed_long() if z3.is_bv_value(val) else 0
    return z3.is_true(val)


def _json_scalar(dtype: DType, x: Any) -> Any:
    import numpy as np

    if dtype.is_float:
        f = float(x)
        bits = np.asarray(x, dtype=dtype.numpy).reshape(1).view(np.uint32 if dtype is DType.F32 else np.uint64)[0]
        return {"value": "nan" if f != f else repr(f), "bits": f"0x{int(bits):0{dtype.bits // 4}x}"}
    return bool(x) if dtype is DType.BOOL else int(x)


def _json_array(arr: Any) -> Any:
    """Small input arrays in the JSON report (NaN and infinities as strings)."""
    def enc(x: Any) -> Any:
        if isinstance(x, list):
            return [enc(i) for i in x]
        if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
            return "nan" if x != x else ("inf" if x > 0 else "-inf")
        return x
    return enc(arr.tolist())


def check_equiv(fa: Function, fb: Function, shapes: Mapping[str, TensorType] | None = None, *,
                rlimit: int = RLIMIT, out_dir: str | None = None) -> EquivReport:
    """Translation validation of ``fa`` against ``fb`` for every input of the given shapes."""
    types = _param_types(fa, fb, shapes or {})
    return _Checker(fa, fb, types, rlimit, out_dir).run()


def format_report(rep: EquivReport, a: str, b: str) -> str:
    shapes = ", ".join(f"%{k}: {v}" for k, v in rep.shapes.items()) or "no parameters"
    how = (f"{rep.elements} result elements: {rep.identical} the same term, {rep.proved} proved equal"
           + (f", {rep.refined} results the spec allows for {a}'s sums" if rep.refined else "")
           + f"; {rep.queries} solver {'query' if rep.queries == 1 else 'queries'}")
    if rep.verdict == "equal":
        return f"equal: @{rep.function} of {a} and {b} agree bit for bit on every input ({shapes}; {how})"
    if rep.verdict == "refines":
        return (f"refines: on every input ({shapes}) @{rep.function} of {b} gives a result {a} may give: "
                f"equal bits, or within the spec's bound of a float sum ({how})")
    if rep.verdict == "unknown":
        return f"unknown: @{rep.function} of {a} and {b} ({shapes}): {rep.reason} ({how})"
    c = rep.counterexample or {}
    lines = [f"different: @{rep.function} of {a} and {b} ({shapes}): result {c.get('result')} at "
             f"{c.get('index')} is {_fmt(c.get('a'))} in {a} and {_fmt(c.get('b'))} in {b}"]
    if rep.files:
        lines.append("inputs: " + ", ".join(rep.files))
    return "\n".join(lines)


def _fmt(x: Any) -> str:
    if isinstance(x, dict):
        return f"{x['value']} ({x['bits']})"
    return str(x).lower() if isinstance(x, bool) else str(x)
