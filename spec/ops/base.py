"""The machine-readable form of an op definition, and the contexts its rules run in.

An ``OpDef`` is the single place where an op's facts live: operands, attributes (kinds and valid
ranges), the dtype and shape rule (and its fast concrete path), numbered constraints with their
diagnostic codes, the semantics formula, total-semantics notes, the accuracy class, the VJP rule
and worked examples.  The human spec (``docs/spec/ops/*.md``), the IR verifier, the reference
interpreter, the Z3 verifier, the autodiff transform and the tests all read these objects.

A shape rule runs in a ``ShapeContext``; a VJP rule runs against a ``VjpBuilder``, the protocol
below, which the IR layer's ``FunctionBuilder`` implements (the spec names what it needs and
imports nothing above itself).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol, Sequence

from mind.spec.dims import NOT_DECIDED, Arith, Cond, Decision, Dim, Undecidable, Unknown, format_dim, INT_ARITH
from mind.spec.dtypes import DType
from mind.spec.record import FrozenRecord, Record


class TensorType(FrozenRecord):
    """A tensor type: element dtype and a shape of dims (ints, ``DimExpr``, or Z3 terms).

    An immutable value type with the constructor, fields, equality, hashing and ``repr`` of
    ``@dataclass(frozen=True)`` (derived by ``mind.spec.record.FrozenRecord``); its ``__init__`` is
    written by hand with slot setters because one is created for every op (a frozen dataclass's
    ``__init__`` pays for ``object.__setattr__`` per field).
    """

    __slots__ = ("dtype", "shape")
    __match_args__ = ("dtype", "shape")

    dtype: DType
    shape: tuple[Any, ...]

    def __init__(self, dtype: DType, shape: tuple[Any, ...]) -> None:
        _set_dtype(self, dtype)
        _set_shape(self, shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype.value}[{', '.join(format_dim(d) for d in self.shape)}]"


_set_dtype = TensorType.dtype.__set__  # type: ignore[attr-defined]
_set_shape = TensorType.shape.__set__  # type: ignore[attr-defined]


class OperandDef(FrozenRecord):
    __slots__ = ("name", "doc")

    def __init__(self, name: str, doc: str) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "doc", doc)


class AttrDef(FrozenRecord):
    """An attribute.  ``kind`` fixes its text syntax and Python form:

    int, bool, dtype, enum (``choices``), ints (tuple[int]), dims (tuple[Dim]: ints or symbolic
    expressions), pairs (tuple[tuple[int, int]]), tensor (a NumPy array).
    """

    __slots__ = ("name", "kind", "doc", "choices")

    def __init__(self, name: str, kind: str, doc: str, choices: tuple[str, ...] = ()) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "doc", doc)
        object.__setattr__(self, "choices", choices)


class ConstraintDef(FrozenRecord):
    """A numbered constraint: ``label`` like ``C3``, the diagnostic code, and its statement."""

    __slots__ = ("label", "code", "text")

    def __init__(self, label: str, code: str, text: str) -> None:
        object.__setattr__(self, "label", label)
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "text", text)


class Example(FrozenRecord):
    """A worked example: a Core IR function, its inputs and its expected results (nested lists)."""

    __slots__ = ("title", "ir", "inputs", "expected")

    def __init__(self, title: str, ir: str, inputs: Mapping[str, Any], expected: Sequence[Any]) -> None:
        object.__setattr__(self, "title", title)
        object.__setattr__(self, "ir", ir)
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "expected", expected)


class VjpValue(Protocol):
    """An SSA value as a VJP rule sees it (``mind.ir.core.Value``): its type."""

    type: TensorType


class VjpOp(Protocol):
    """The primal op application a VJP rule differentiates (``mind.ir.core.Operation``)."""

    op: str
    operands: tuple[VjpValue, ...]
    attrs: Mapping[str, Any]
    result: VjpValue
    span: Any  # ``mind.diagnostics.Span`` or None: where diagnostics about this op point


class VjpBuilder(Protocol):
    """What a VJP rule builds its IR with: the 19 ops and constants, each result typed by the
    spec's shape rules.  ``arith`` is the dimension arithmetic of the function being built (the
    symbols of its parameters and its assumptions).  ``mind.ir.builder.FunctionBuilder`` implements
    this; ``tests/spec/test_vjp_protocol.py`` checks that it does."""

    @property
    def arith(self) -> Arith: ...

    def emit(self, op: str, *operands: VjpValue, span: Any = None, name: str | None = None,
             **attrs: Any) -> VjpValue: ...

    def const(self, value: Any, dtype: DType, span: Any = None) -> VjpValue: ...

    def splat(self, scalar: Any, dtype: DType, shape: Sequence[int], span: Any = None) -> VjpValue: ...


#: ``vjp(b, op, g, wants)``: the cotangent of each operand of ``op`` (a value emitted through ``b``,
#: or None for zero) given ``g``, the non-zero cotangent of its result; ``wants[i]`` says whether
#: operand ``i``'s cotangent is needed at all.
VjpRule = Callable[[VjpBuilder, VjpOp, VjpValue, Sequence[bool]], Sequence["VjpValue | None"]]

#: ``infer(ctx, operand_types, attrs)``: the shape and dtype rule, checking every constraint through ``ctx``.
ShapeRule = Callable[["ShapeContext", Sequence[TensorType], Mapping[str, Any]], TensorType]

#: ``fast_infer(operand_types)``: the shape rule restricted to its common concrete case, or None.
FastShapeRule = Callable[[Sequence[TensorType]], "TensorType | None"]

_OPDEF_FIELDS = ("name", "summary", "operands", "attrs", "dtype_rule", "shape_rule_text", "constraints",
                 "infer", "semantics", "edge_cases", "accuracy", "vjp_text", "vjp", "examples",
                 "fast_infer", "laws")


class OpDef(Record):
    """One op's definition, complete when constructed (a ``Record`` with the constructor, fields,
    ``repr`` and equality of a dataclass; mutable only so that tests can swap in a wrong rule and
    see the checkers refute it)."""

    _fields = _OPDEF_FIELDS

    def __init__(self, name: str, summary: str, operands: tuple[OperandDef, ...], attrs: tuple[AttrDef, ...],
                 dtype_rule: str, shape_rule_text: str, constraints: tuple[ConstraintDef, ...],
                 infer: ShapeRule, semantics: str, edge_cases: str, accuracy: str, vjp_text: str,
                 vjp: VjpRule, examples: tuple[Example, ...] = (), fast_infer: FastShapeRule | None = None,
                 laws: tuple[str, ...] = ()) -> None:
        self.name = name
        self.summary = summary
        self.operands = operands
        self.attrs = attrs
        self.dtype_rule = dtype_rule
        self.shape_rule_text = shape_rule_text
        self.constraints = constraints
        self.infer = infer
        self.semantics = semantics
        self.edge_cases = edge_cases
        self.accuracy = accuracy  # key of mind.spec.accuracy.ACCURACY
        self.vjp_text = vjp_text
        # The VJP rule as code, next to its text, written in the 19 ops against ``VjpBuilder``.
        self.vjp = vjp
        self.examples = examples
        # The same shape rule restricted to its common concrete case (equal dtypes, int dims that
        # agree): returns the result type, or None when ``infer`` must decide (and report).  It lives
        # here, next to ``infer``, and tests check the two agree; it exists only for compile speed.
        self.fast_infer = fast_infer
        self.laws = laws

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def constraint(self, label: str) -> ConstraintDef:
        for c in self.constraints:
            if c.label == label:
                return c
        raise KeyError(f"{self.name} has no constraint {label}")

    @property
    def arity(self) -> int:
        return len(self.operands)


class ConstraintViolation(Exception):
    """A shape/dtype constraint that does not hold; ``label`` is the op-local label (``C2``).

    With symbolic dims it fails for every value the premises allow; ``example`` is one of them
    (when a decider found it)."""

    def __init__(self, label: str, detail: str, help: str | None = None,
                 example: dict[str, int] | None = None):
        super().__init__(detail)
        self.label = label
        self.detail = detail
        self.help = help
        self.example = example


class ConstraintUndecided(Exception):
    """A constraint the declared assumptions neither prove nor refute (symbolic dims).

    ``decision`` is the decider's answer: ``depends`` (its assignment is an allowed one where the
    constraint fails) or ``unknown`` (its reason); ``NOT_DECIDED`` without a decider."""

    def __init__(self, label: str, cond: Unknown, detail: str, decision: Decision = NOT_DECIDED):
        super().__init__(detail)
        self.label = label
        self.cond = cond
        self.detail = detail
        self.decision = decision


class ShapeContext:
    """Runs one shape rule: ``A`` is its arithmetic, ``require`` checks or records a constraint."""

    def __init__(self, arith: Arith = INT_ARITH):
        self.A = arith

    def require(self, label: str, cond: Cond, detail: str | Callable[[], str],
                help: str | Callable[[], str] | None = None) -> None:
        if cond is True:
            return
        decision = None
        if isinstance(cond, Unknown):  # what the cheap path leaves open, the decider settles
            decision = self.A.decide(cond)
            if decision.status == "holds":
                return
        text = detail() if callable(detail) else detail
        help_text = help() if callable(help) else help
        if cond is False:
            raise ConstraintViolation(label, text, help_text)
        if decision is not None:
            if decision.status == "fails":
                raise ConstraintViolation(label, text, help_text, decision.assignment)
            raise ConstraintUndecided(label, cond, text, decision)
        self.obligation(label, cond, text)

    def obligation(self, label: str, cond: Any, detail: str) -> None:
        """Record a symbolic condition (Z3 contexts override this)."""
        raise TypeError(f"{type(self).__name__} cannot hold symbolic condition {cond!r}")

    def dim_choice(self, label: str, fn: Callable[[], Dim]) -> Dim:
        """Evaluate a dim that may depend on an undecided condition (``SymArith.ite``)."""
        try:
            return fn()
        except Undecidable as exc:
            decision = exc.decision or NOT_DECIDED
            if decision.status == "depends":  # a choice, not a failure: no counterexample to show
                decision = Decision("unknown", reason="the condition holds for some allowed values "
                                                      "and not for others")
            raise ConstraintUndecided(label, exc.cond,
                                      f"the result dimension depends on whether {exc.cond.text}",
                                      decision) from None
