"""Core IR data structures: modules of functions, each an SSA list of op applications.

Every op has exactly one result.  Types are ``TensorType`` (dtype + dims, where a dim is an int or a
symbolic ``DimExpr``).  A function declares assumptions about its symbols (``B >= 1``); they feed
the symbolic checks (``Function.arith``) and the Z3 verifier.
"""

from __future__ import annotations

from typing import Any, Iterator

from mind.diagnostics import Span
from mind.ir.decide import DEFAULT_LIMITS, Decider, DeciderStats, SolverLimits
from mind.spec.dims import Dim, DimExpr, Facts, SymArith, format_dim
from mind.spec.ops import TensorType
from mind.spec.record import FrozenRecord

__all__ = ["Value", "Operation", "Assumption", "Function", "Module", "TensorType", "MAX_CONST_ELEMENTS",
           "RESULT_NAMES"]

#: The most elements one ``const`` op may hold: the IR parser's default limit
#: (``mind.ir.parser.Limits.max_const_elements``), which the frontend keeps to as well, so that
#: every module it emits prints to text that parses back.
MAX_CONST_ELEMENTS = 1 << 26

#: The canonical result names ``"0"``, ``"1"``, ... of the first 4096 ops (op results are named by
#: their index), built once: looking one up costs less than formatting the number per op (the
#: frontend names results with them, ``canonicalize`` checks names against them).
RESULT_NAMES: tuple[str, ...] = tuple(map(str, range(4096)))


class Value:
    """An SSA value: a function parameter or the result of one operation (compared by identity)."""

    # A plain slotted class (not a dataclass) because values are created for every op; the
    # constructor, fields and identity semantics are those of ``@dataclass(eq=False)``.
    __slots__ = ("name", "type", "span")
    __match_args__ = ("name", "type", "span")

    def __init__(self, name: str, type: TensorType, span: Span | None = None) -> None:
        self.name = name
        self.type = type
        self.span = span

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


class Operation:
    """One op application: ``op`` name, operand values, attributes (in spec order), result value.

    A slotted class with the constructor, fields and identity semantics of ``@dataclass(eq=False)``.
    ``attrs`` may be computed on first read (``Operation.deferred``): the frontend creates splat
    constants that way, so a constant's NumPy array is only built when someone looks at it.  Every
    reader sees an ordinary dict either way.
    """

    __slots__ = ("op", "operands", "_attrs", "result", "span", "_make", "hint")
    __match_args__ = ("op", "operands", "attrs", "result", "span")

    def __init__(self, op: str, operands: tuple[Value, ...], attrs: dict[str, Any], result: Value,
                 span: Span | None = None) -> None:
        self.op = op
        self.operands = operands
        self._attrs = attrs
        self.result = result
        self.span = span
        self._make = None
        self.hint = None

    @classmethod
    def deferred(cls, op: str, operands: tuple[Value, ...], make: Any, result: Value,
                 span: Span | None = None, hint: Any = None) -> "Operation":
        """An op whose ``attrs`` dict is ``make()``, called once, on the first read of ``attrs``.
        ``hint`` is an optional summary of the attributes for passes that can use it without
        materializing them: for a ``const`` op, an object with ``size`` (the element count) and
        ``scalar()`` (the one element of a splat, as ``value[(0,) * ndim]`` gives it; only
        called when ``size > 0``) (the frontend's splat constants)."""
        self = cls.__new__(cls)
        self.op = op
        self.operands = operands
        self._attrs = None
        self.result = result
        self.span = span
        self._make = make
        self.hint = hint
        return self

    def replaced(self, operands: tuple[Value, ...], result: Value) -> "Operation":
        """The same op and attributes (shared, still deferred if they were) on other operands and
        result: ``Operation(op.op, operands, op.attrs, result, op.span)`` without reading ``attrs``."""
        make = self._make
        if make is not None:
            return Operation.deferred(self.op, operands, make, result, self.span, self.hint)
        new = Operation(self.op, operands, self._attrs, result, self.span)  # type: ignore[arg-type]
        new.hint = self.hint
        return new

    @property
    def attrs(self) -> dict[str, Any]:
        make = self._make
        if make is not None:
            self._attrs = make()
            self._make = None
        return self._attrs  # type: ignore[return-value]

    @attrs.setter
    def attrs(self, value: dict[str, Any]) -> None:
        self._attrs = value
        self._make = None
        self.hint = None

    def __repr__(self) -> str:
        return (f"Operation(op={self.op!r}, operands={self.operands!r}, attrs={self.attrs!r}, "
                f"result={self.result!r}, span={self.span!r})")


RELATIONS = (">=", "<=", "==", ">", "<")


class Assumption(FrozenRecord):
    """``lhs rel rhs`` about a function's symbols (``B >= 1``).

    An immutable value with the constructor, fields, ``repr``, equality and hashing of
    ``@dataclass(frozen=True)`` (a ``mind.spec.record.FrozenRecord``: no dataclass is built when the
    IR is imported).
    """

    __slots__ = ("lhs", "rel", "rhs")
    __match_args__ = ("lhs", "rel", "rhs")

    def __init__(self, lhs: Dim, rel: str, rhs: Dim) -> None:
        object.__setattr__(self, "lhs", lhs)
        object.__setattr__(self, "rel", rel)
        object.__setattr__(self, "rhs", rhs)

    def __str__(self) -> str:
        return f"{format_dim(self.lhs)} {self.rel} {format_dim(self.rhs)}"

    def symbols(self) -> set[str]:
        out: set[str] = set()
        for d in (self.lhs, self.rhs):
            if isinstance(d, DimExpr):
                out |= d.symbols()
        return out


class Function:
    """A function: parameters, an SSA list of ops, results, assumptions about its symbols.

    A slotted class with the constructor, fields, ``repr`` and identity semantics of
    ``@dataclass(eq=False)``.  ``span`` may be computed on first read (``span_fn``, a zero-argument
    callable, instead of ``span``): the frontend makes every function's span that way, since a
    source position is only needed when something is reported.
    """

    __slots__ = ("name", "params", "ops", "results", "assumptions", "_span", "_span_fn", "result_decls",
                 "canonical_text")
    __match_args__ = ("name", "params", "ops", "results", "assumptions", "span")

    def __init__(self, name: str, params: list[Value], ops: list[Operation], results: list[Value],
                 assumptions: list[Assumption] | None = None, span: Span | None = None, *,
                 span_fn: Any = None) -> None:
        self.name = name
        self.params = params
        self.ops = ops
        self.results = results
        self.assumptions = [] if assumptions is None else assumptions
        self._span = span
        self._span_fn = span_fn
        # Result types written in a signature that differ in form from the returned values' types
        # (``f32[max(B, 3)]`` for ``f32[B]``), each with its span: the IR text parser sets them,
        # the verifier proves each equal to its value's type under the premises.
        self.result_decls: tuple[tuple[TensorType, Span | None], ...] = ()
        # The function's canonical text (``mind.ir.printer.print_function``) where whoever made this
        # object had it already: the frontend's disk cache reads functions back from that text, so a
        # backend keys its kernels on it without printing again.  None: print it.  A function that
        # has one is not changed afterwards (cached modules are read-only).
        self.canonical_text: str | None = None

    @property
    def span(self) -> Span | None:
        fn = self._span_fn
        if fn is not None:
            self._span = fn()
            self._span_fn = None
        return self._span

    @span.setter
    def span(self, value: Span | None) -> None:
        self._span = value
        self._span_fn = None

    def rebuilt(self, ops: list[Operation], results: list[Value]) -> "Function":
        """``Function(self.name, list(self.params), ops, results, list(self.assumptions),
        self.span)``, keeping a span that has not been computed yet deferred."""
        return Function(self.name, list(self.params), ops, results, list(self.assumptions),
                        self._span, span_fn=self._span_fn)

    def __repr__(self) -> str:
        return (f"Function(name={self.name!r}, params={self.params!r}, ops={self.ops!r}, "
                f"results={self.results!r}, assumptions={self.assumptions!r}, span={self.span!r})")

    @property
    def result_types(self) -> list[TensorType]:
        return [v.type for v in self.results]

    def symbols(self) -> list[str]:
        """Symbols of the parameter types, in order of first appearance."""
        seen: dict[str, None] = {}
        for p in self.params:
            for d in p.type.shape:
                if isinstance(d, DimExpr):
                    for s in sorted(d.symbols()):
                        seen.setdefault(s, None)
        return list(seen)

    def facts(self) -> Facts:
        """Interval bounds implied by assumptions of the form ``symbol rel constant``."""
        facts = Facts.empty()
        for a in self.assumptions:
            lhs, rel, rhs = a.lhs, a.rel, a.rhs
            if isinstance(lhs, int) and isinstance(rhs, DimExpr):  # put the symbol on the left
                lhs, rhs = rhs, lhs
                rel = {">=": "<=", "<=": ">=", ">": "<", "<": ">", "==": "=="}[rel]
            if not (isinstance(lhs, DimExpr) and isinstance(rhs, int)):
                continue
            name = _single_symbol(lhs)
            if name is None:
                continue
            inf = float("inf")
            lo, hi = {">=": (rhs, inf), ">": (rhs + 1, inf), "<=": (-inf, rhs), "<": (-inf, rhs - 1),
                      "==": (rhs, rhs)}[rel]
            facts = facts.with_bound(name, lo, hi)
        return facts

    def arith(self, limits: SolverLimits | None = DEFAULT_LIMITS, stats: DeciderStats | None = None) -> SymArith:
        """The arithmetic that checks this function's shapes: the cheap path (normal forms,
        interval bounds) with the decider (``mind.ir.decide``) for what it leaves open, under the
        solver limits ``limits`` (``None``: the cheap path only)."""
        facts = self.facts()
        if limits is None:
            return SymArith(facts)
        return SymArith(facts, Decider(self.params, self.assumptions, facts, limits, stats))

    def values(self) -> Iterator[Value]:
        yield from self.params
        for op in self.ops:
            yield op.result


def _single_symbol(d: DimExpr) -> str | None:
    if len(d.terms) != 1:
        return None
    (mono, coef), = d.terms.items()
    if coef != 1 or len(mono) != 1 or mono[0][1] != 1 or mono[0][0].kind != "sym":
        return None
    return mono[0][0].name


class Module:
    """A list of functions; compared by identity (the constructor, field and ``repr`` of
    ``@dataclass(eq=False)``)."""

    __match_args__ = ("functions",)

    def __init__(self, functions: list[Function] | None = None) -> None:
        self.functions = [] if functions is None else functions

    def __repr__(self) -> str:
        return f"Module(functions={self.functions!r})"

    def function(self, name: str) -> Function | None:
        for f in self.functions:
            if f.name == name:
                return f
        return None

    def text(self) -> str:
        from mind.ir.printer import print_module

        return print_module(self)

    def sha256(self) -> str:
        """Content hash of the canonical text: equal modules hash equally in every process."""
        import hashlib  # here, not at the top: loading OpenSSL is a large part of importing this module

        return hashlib.sha256(self.text().encode("utf-8")).hexdigest()
