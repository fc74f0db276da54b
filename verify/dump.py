"""``mind verify DUMP``: well-formedness and every shape/dtype constraint of an IR dump, proved for all
values of its symbolic dims that satisfy the declared assumptions.

Pipeline per function: structural checks (single definition, def-before-use, operand counts,
attribute kinds, assumption symbols); then, per op, the spec's rule on ``SymArith`` (cheap: normal
forms and interval bounds).  Only what that leaves undecided goes to Z3: the rule is re-run on Z3
terms (``Z3Context``) and each recorded constraint, and the declared result type, is proved under
the premises (the declared assumptions, every symbol ≥ 0, every parameter dim ≥ 0) or refuted with a
minimized counterexample.  One solver per function holds the premises; each query is a push/pop.
Dumps are untrusted: see ``SafeIRParser`` for the extra resource bounds of this layer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from mind.diagnostics import Diagnostic, MindError, Span
from mind.ir.core import Function, Module, Operation
from mind.ir.parser import IRParser, Limits
from mind.spec.dims import DimExpr, format_dim
from mind.spec.ops import OPS, ConstraintUndecided, ConstraintViolation, TensorType, infer_type

# Bounds of this layer, on top of the parser's ``Limits``.
VERIFY_LIMITS = Limits(max_bytes=32 * 1024 * 1024, max_ops=200_000, max_functions=1_000, max_rank=16,
                       max_nesting=32, max_dim=1 << 48, max_const_elements=1 << 22)
MAX_DIM_TERMS = 256  # monomials in one dimension expression (bounds Z3 term size)
MAX_COEF = 1 << 62  # magnitude of a coefficient in a dimension expression
DUMP_RLIMIT = 500_000  # Z3 resource limit per query (deterministic; no wall-clock timeouts)


class SafeIRParser(IRParser):
    """The Core IR parser with bounded dimension arithmetic.

    A product like ``(A + B + 1) * (A + B + 1) * ...`` expands to a polynomial whose size grows
    exponentially in the text; coefficients like ``2^48 * 2^48 * ...`` grow without bound.  Both are
    refused (E1012) before they are built.
    """


    def _dim_term(self, depth: int):
        start = self.tok.start
        value = self._dim_unary(depth)
        while self.accept("*"):
            rhs = self._dim_unary(depth)
            _check_product(self, value, rhs, start)
            value = value * rhs
        _check_size(self, value, start)
        return value

    def parse_dim(self, depth: int = 0):
        start = self.tok.start
        value = super().parse_dim(depth)
        _check_size(self, value, start)
        return value


def _nterms(d: Any) -> int:
    return len(d.terms) if isinstance(d, DimExpr) else 1


def _maxcoef(d: Any) -> int:
    if isinstance(d, DimExpr):
        return max((abs(c) for c in d.terms.values()), default=0)
    return abs(d)


def _check_product(p: IRParser, a: Any, b: Any, start: int) -> None:
    if _nterms(a) * _nterms(b) > MAX_DIM_TERMS or _maxcoef(a) * max(_maxcoef(b), 1) > MAX_COEF * max(_nterms(a), 1):
        raise p.fail("E1012", f"dimension expression is too large (over {MAX_DIM_TERMS} terms or "
                              f"coefficients over 2^62)", start)


def _check_size(p: IRParser, d: Any, start: int) -> None:
    if _nterms(d) > MAX_DIM_TERMS or _maxcoef(d) > MAX_COEF:
        raise p.fail("E1012", f"dimension expression is too large (over {MAX_DIM_TERMS} terms or "
                              f"coefficients over 2^62)", start)


# ------------------------------------------------------------------------------------------------


@dataclass
class Finding:
    """A diagnostic and, for a refuted constraint, the counterexample assignment."""

    diag: Diagnostic
    counterexample: dict[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        d = self.diag.to_json()
        d["counterexample"] = self.counterexample
        return d


@dataclass
class Stats:
    functions: int = 0
    ops: int = 0
    decided_cheaply: int = 0
    z3_queries: int = 0
    proved: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"functions": self.functions, "ops": self.ops, "decided_without_z3": self.decided_cheaply,
                "z3_queries": self.z3_queries, "z3_proved": self.proved, "seconds": round(self.seconds, 6)}


@dataclass
class DumpReport:
    filename: str
    format: str  # core | public
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    stats: Stats = field(default_factory=Stats)
    module: Module | None = None
    unreadable: bool = False

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def exit_code(self) -> int:
        if self.ok:
            return 0
        return 2 if self.unreadable else 1

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "file": self.filename, "format": self.format, "notes": self.notes,
                "diagnostics": [f.to_json() for f in self.findings], "stats": self.stats.to_json()}


UNREADABLE_PREFIXES = ("E1", "E7")


def is_unreadable(code: str) -> bool:
    return code.startswith(UNREADABLE_PREFIXES)


def detect_format(text: str) -> str:
    """``core`` if the first meaningful token is ``func``; ``public`` for `%id = Opcode(` lines."""
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("//") or s.startswith("#"):
            continue
        if s.startswith("func"):
            return "core"
        if s.startswith("outputs") or (s.startswith("%") and "=" in s):
            rhs = s.split("=", 1)[1].strip()
            if rhs[:1].isupper() or rhs.startswith("%"):
                return "public"
        return "core"
    return "core"


def verify_text(text: str, filename: str = "<dump>", fmt: str = "auto",
                rlimit: int = DUMP_RLIMIT) -> DumpReport:
    t0 = time.perf_counter()
    if fmt == "auto":
        fmt = detect_format(text)
    rep = DumpReport(filename, fmt, sources={filename: text})
    try:
        if fmt == "public":
            from mind.verify.legalize_public import legalize

            module, notes = legalize(text, filename)
            rep.notes.extend(notes)
        else:
            module = SafeIRParser(text, filename, VERIFY_LIMITS).parse_module()
    except MindError as exc:
        rep.sources.update(exc.sources)
        for d in exc.diagnostics:
            if d.code == "E4005" and d.label is None:  # the parser checks const.C1 itself
                d = Diagnostic(d.code, d.message, d.span, "const.C1", d.help,
                               d.notes + (f"const.C1: {OPS['const'].constraint('C1').text}",))
            rep.findings.append(Finding(d))
        rep.unreadable = any(is_unreadable(d.code) for d in exc.diagnostics)
        rep.stats.seconds = time.perf_counter() - t0
        return rep
    rep.module = module
    seen: set[str] = set()
    for fn in module.functions:
        if fn.name in seen:
            rep.findings.append(Finding(Diagnostic("E4002", f"function @{fn.name} is defined more than once",
                                                   fn.span)))
        seen.add(fn.name)
        FunctionVerifier(fn, rep, rlimit).run()
    rep.stats.seconds = time.perf_counter() - t0
    return rep


class FunctionVerifier:
    def __init__(self, fn: Function, rep: DumpReport, rlimit: int):
        self.fn = fn
        self.rep = rep
        self.rlimit = rlimit
        self.arith = fn.arith()
        self._solver: Any = None
        self._table: Any = None
        self._cache: dict = {}
        self.symbols: list[str] = []

    # z3 state, created on first need ----------------------------------------------------------
    def solver(self) -> Any:
        if self._solver is None:
            import z3

            from mind.verify.prove import new_solver
            from mind.verify.z3arith import SymbolTable

            self._z3 = z3
            self._table = SymbolTable()
            s = new_solver(self.rlimit)
            syms: set[str] = set()
            for p in self.fn.params:
                for d in p.type.shape:
                    if isinstance(d, DimExpr):
                        syms |= d.symbols()
                        s.add(self.z(d) >= 0)
            for a in self.fn.assumptions:
                syms |= a.symbols()
            self.symbols = sorted(syms)
            for name in self.symbols:
                s.add(self._table.var(name) >= 0)
            for a in self.fn.assumptions:
                lhs, rhs = self.z(a.lhs), self.z(a.rhs)
                s.add({">=": lambda: lhs >= rhs, "<=": lambda: lhs <= rhs, "==": lambda: lhs == rhs,
                       ">": lambda: lhs > rhs, "<": lambda: lhs < rhs}[a.rel]())
            self._solver = s
        return self._solver

    def z(self, d: Any) -> Any:
        from mind.verify.z3arith import zint

        if self._table is None:
            self.solver()
        return zint(self._table.to_z3(d, self._cache))

    def zdims(self, shape: Any) -> tuple:
        return tuple(self._table.to_z3(d, self._cache) for d in shape)

    def prove(self, cond: Any) -> tuple[str, dict[str, int] | None, str | None]:
        """('proved'|'refuted'|'unknown', counterexample, reason) for ``premises ⇒ cond``."""
        from mind.verify.prove import minimize, reason_text

        z3 = self._z3
        s = self.solver()
        if isinstance(cond, bool):
            cond = z3.BoolVal(cond)
        self.rep.stats.z3_queries += 1
        s.push()
        try:
            s.add(z3.Not(cond))
            r = s.check()
            if r == z3.unsat:
                self.rep.stats.proved += 1
                return "proved", None, None
            if r == z3.sat:
                vs = [self._table.var(n) for n in self.symbols]
                return "refuted", minimize(s, vs, s.model()), None
            return "unknown", None, reason_text(s, self.rlimit)
        finally:
            s.pop()

    def assumptions_consistent(self) -> bool:
        s = self.solver()
        r = s.check()
        z3 = self._z3
        return r != z3.unsat

    # --------------------------------------------------------------------------------------------
    def add(self, diag: Diagnostic, cex: dict[str, int] | None = None) -> None:
        self.rep.findings.append(Finding(diag, cex))

    def run(self) -> None:
        from mind.ir.verify import _attr_problems, signature_problems

        fn = self.fn
        st = self.rep.stats
        st.functions += 1
        for diag in signature_problems(fn):
            self.add(diag)
        if fn.assumptions and not self.assumptions_consistent():
            self.add(Diagnostic("E4011", f"the assumptions of @{fn.name} contradict each other "
                                         f"(no values satisfy them), so every check would hold vacuously",
                                fn.span, help="remove or correct the contradictory assumptions"))
            return
        defined: set[int] = {id(p) for p in fn.params}
        names: set[str] = set()
        for p in fn.params:
            if p.name in names:
                self.add(Diagnostic("E4002", f"value %{p.name} is defined more than once", p.span))
            names.add(p.name)
        for op in fn.ops:
            st.ops += 1
            ok = True
            for v in op.operands:
                if id(v) not in defined:
                    ok = False
                    self.add(Diagnostic("E4001", f"%{v.name} is used by `{op.op}` before it is defined",
                                        op.span, help="operations must appear after their operands"))
            if op.result.name in names:
                self.add(Diagnostic("E4002", f"value %{op.result.name} is defined more than once", op.span))
            names.add(op.result.name)
            defined.add(id(op.result))
            opdef = OPS.get(op.op)
            if opdef is None:
                self.add(Diagnostic("E4006", f"unknown op `{op.op}`", op.span))
                continue
            if len(op.operands) != opdef.arity:
                self.add(Diagnostic("E4009", f"`{op.op}` takes {opdef.arity} operands, got {len(op.operands)}",
                                    op.span))
                continue
            problems = _attr_problems(opdef, op.attrs)
            if problems:
                for pr in problems:
                    self.add(Diagnostic("E4008", pr, op.span))
                continue
            if ok:
                self.check_op(op)
        for v in fn.results:
            if id(v) not in defined:
                self.add(Diagnostic("E4003", f"returned value %{v.name} is not defined in @{fn.name}", fn.span))

    @staticmethod
    def _relevant(op: Operation, cex: dict[str, int] | None) -> dict[str, int] | None:
        """Restrict a counterexample to the symbols the op's operands and attributes mention."""
        if not cex:
            return cex
        syms: set[str] = set()
        for v in list(op.operands) + [op.result]:
            for d in v.type.shape:
                if isinstance(d, DimExpr):
                    syms |= d.symbols()
        for val in op.attrs.values():
            if isinstance(val, tuple):
                for x in val:
                    if isinstance(x, DimExpr):
                        syms |= x.symbols()
        out = {k: v for k, v in cex.items() if k in syms}
        return out or cex

    def _constraint_diag(self, op: Operation, label: str, detail: str, help: str | None,
                         cex: dict[str, int] | None, always: bool) -> None:
        cex = self._relevant(op, cex)
        c = OPS[op.op].constraint(label)
        notes = [f"{op.op}.{label}: {c.text}"]
        msg = detail
        if cex:
            assign = ", ".join(f"{k}={v}" for k, v in cex.items())
            msg = f"{detail}; {op.op}.{label} fails when {assign}"
            notes.append(("fails for every assignment allowed by the assumptions, e.g. " if always
                          else "counterexample (satisfies the declared assumptions): ") + assign)
        self.add(Diagnostic(c.code, msg, op.span, label=f"{op.op}.{label}", help=help, notes=tuple(notes)), cex)

    def _example(self) -> dict[str, int] | None:
        """A minimal assignment satisfying the premises (for a constraint false for all values)."""
        if not self.fn.symbols() and not self.fn.assumptions:
            return None
        from mind.verify.prove import minimize

        s = self.solver()
        if not self.symbols:
            return None
        s.push()
        try:
            if s.check() != self._z3.sat:
                return None
            return minimize(s, [self._table.var(n) for n in self.symbols], s.model())
        finally:
            s.pop()

    def check_op(self, op: Operation) -> None:
        opdef = OPS[op.op]
        types = [v.type for v in op.operands]
        try:
            inferred = infer_type(opdef, types, op.attrs, self.arith)
        except ConstraintViolation as exc:
            self._constraint_diag(op, exc.label, exc.detail, exc.help, self._example(), True)
            return
        except ConstraintUndecided:
            self.check_op_z3(op)
            return
        declared = op.result.type
        if declared.dtype is not inferred.dtype or declared.rank != inferred.rank:
            self._type_diag(op, inferred)
            return
        pending = []
        for a, b in zip(declared.shape, inferred.shape):
            c = self.arith.eq(a, b)
            if c is False:
                self._type_diag(op, inferred, self._example())
                return
            if c is not True:
                pending.append((a, b))
        if not pending:
            self.rep.stats.decided_cheaply += 1
            return
        self.solver()
        self._prove_result(op, inferred, [(self.z(a), self.z(b)) for a, b in pending])

    def _prove_result(self, op: Operation, inferred: TensorType, pairs: list) -> None:
        z3 = self._z3
        from mind.verify.z3arith import zint

        cond = z3.And(*[zint(a) == zint(b) for a, b in pairs]) if pairs else z3.BoolVal(True)
        status, cex, reason = self.prove(cond)
        if status == "refuted":
            self._type_diag(op, inferred, cex)
        elif status == "unknown":
            self.add(Diagnostic("E3011", f"cannot prove that `{op.op}` gives the declared result type "
                                         f"{op.result.type} ({reason})", op.span,
                                help="add an assumption (`where ...`) or simplify the dims"))

    def _type_diag(self, op: Operation, inferred: TensorType, cex: dict[str, int] | None = None) -> None:
        cex = self._relevant(op, cex)
        msg = f"`{op.op}` declares result type {op.result.type}, but its operands give {_fmt_type(inferred)}"
        notes: tuple[str, ...] = ()
        if cex:
            assign = ", ".join(f"{k}={v}" for k, v in cex.items())
            msg += f"; they differ when {assign}"
            notes = (f"counterexample (satisfies the declared assumptions): {assign}",)
        self.add(Diagnostic("E4010", msg, op.span, help=f"write `: {_fmt_type(inferred)}`", notes=notes), cex)

    def check_op_z3(self, op: Operation) -> None:
        from mind.verify.z3arith import Z3Context

        self.solver()
        opdef = OPS[op.op]
        types = [TensorType(v.type.dtype, self.zdims(v.type.shape)) for v in op.operands]
        attrs = {}
        for a in opdef.attrs:
            v = op.attrs[a.name]
            attrs[a.name] = tuple(self._table.to_z3(x, self._cache) for x in v) if a.kind == "dims" else v
        ctx = Z3Context()
        try:
            result = opdef.infer(ctx, types, attrs)
        except ConstraintViolation as exc:
            self._constraint_diag(op, exc.label, exc.detail, exc.help, self._example(), True)
            return
        for ob in ctx.obligations:
            status, cex, reason = self.prove(ob.cond)
            if status == "refuted":
                self._constraint_diag(op, ob.label, _detail_text(ob, op, self.arith), None, cex, False)
                return
            if status == "unknown":
                c = opdef.constraint(ob.label)
                self.add(Diagnostic("E3011", f"cannot prove {op.op}.{ob.label} from the declared assumptions "
                                             f"({reason})", op.span, label=f"{op.op}.{ob.label}",
                                    help="add an assumption (`where ...`) or make the dimension concrete",
                                    notes=(f"{op.op}.{ob.label}: {c.text}",)))
                return
        declared = op.result.type
        inferred_text = TensorType(result.dtype, tuple(_show(d) for d in result.shape))
        if declared.dtype is not result.dtype or declared.rank != result.rank:
            self._type_diag(op, inferred_text)
            return
        self._prove_result(op, inferred_text, [(self.z(a), b) for a, b in zip(declared.shape, result.shape)])


class _Shown:
    """A Z3 term shown in a type (``format_dim`` only knows ints and ``DimExpr``)."""

    def __init__(self, term: Any):
        self.term = term

    def __str__(self) -> str:
        return str(self.term)


def _show(d: Any) -> Any:
    return d if isinstance(d, int) else _Shown(d)


def _fmt_type(t: TensorType) -> str:
    return f"{t.dtype.value}[{', '.join(format_dim(d) if isinstance(d, (int, DimExpr)) else str(d) for d in t.shape)}]"


def _detail_text(ob: Any, op: Operation, arith: Any = None) -> str:
    """The spec's detail for a refuted obligation, rendered on the declared (DimExpr) operand types."""
    from mind.spec.dims import SymArith
    from mind.spec.ops import ShapeContext

    class _Found(Exception):
        pass

    class _DetailCtx(ShapeContext):
        def require(self, label, cond, detail, help=None):  # noqa: A002
            if cond is True or label != ob.label:
                return
            raise _Found(detail() if callable(detail) else detail)

        def dim_choice(self, label, fn):
            try:
                return fn()
            except Exception:
                return 0

    try:
        OPS[op.op].infer(_DetailCtx(arith or SymArith()), [v.type for v in op.operands], op.attrs)
    except _Found as f:
        return str(f.args[0])
    except Exception:
        pass
    return ob.text
