"""The machine-readable form of an op definition, and the context its shape rule runs in.

An ``OpDef`` is the single place where an op's facts live: operands, attributes (kinds and valid
ranges), the dtype and shape rule, numbered constraints with their diagnostic codes, the semantics
formula, total-semantics notes, the accuracy class, the VJP rule and worked examples.  The human
spec (``docs/spec/ops/*.md``), the IR verifier, the reference interpreter, the Z3 verifier and the
tests all read these objects.
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any, Callable, Mapping, Sequence

from mind.spec.dims import Arith, Cond, Dim, Undecidable, Unknown, format_dim, INT_ARITH
from mind.spec.dtypes import DType


class TensorType:
    """A tensor type: element dtype and a shape of dims (ints, ``DimExpr``, or Z3 terms).

    An immutable value type with the constructor, fields, equality, hashing and ``repr`` of
    ``@dataclass(frozen=True)``; written by hand with ``__slots__`` because one is created for
    every op (a frozen dataclass's ``__init__`` pays for ``object.__setattr__`` per field).
    """

    __slots__ = ("dtype", "shape")
    __match_args__ = ("dtype", "shape")

    dtype: DType
    shape: tuple[Any, ...]

    def __init__(self, dtype: DType, shape: tuple[Any, ...]) -> None:
        _set_dtype(self, dtype)
        _set_shape(self, shape)

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return (self.dtype, self.shape) == (other.dtype, other.shape)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.dtype, self.shape))

    def __repr__(self) -> str:
        return f"TensorType(dtype={self.dtype!r}, shape={self.shape!r})"

    def __reduce__(self) -> Any:
        return (TensorType, (self.dtype, self.shape))

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype.value}[{', '.join(format_dim(d) for d in self.shape)}]"


_set_dtype = TensorType.dtype.__set__  # type: ignore[attr-defined]
_set_shape = TensorType.shape.__set__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class OperandDef:
    name: str
    doc: str


@dataclass(frozen=True)
class AttrDef:
    """An attribute.  ``kind`` fixes its text syntax and Python form:

    int, bool, dtype, enum (``choices``), ints (tuple[int]), dims (tuple[Dim]: ints or symbolic
    expressions), pairs (tuple[tuple[int, int]]), tensor (a NumPy array).
    """

    name: str
    kind: str
    doc: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConstraintDef:
    """A numbered constraint: ``label`` like ``C3``, the diagnostic code, and its statement."""

    label: str
    code: str
    text: str


@dataclass(frozen=True)
class Example:
    """A worked example: a Core IR function, its inputs and its expected results (nested lists)."""

    title: str
    ir: str
    inputs: Mapping[str, Any]
    expected: Sequence[Any]


@dataclass
class OpDef:
    name: str
    summary: str
    operands: tuple[OperandDef, ...]
    attrs: tuple[AttrDef, ...]
    dtype_rule: str
    shape_rule_text: str
    constraints: tuple[ConstraintDef, ...]
    infer: Callable[["ShapeContext", Sequence[TensorType], Mapping[str, Any]], TensorType]
    semantics: str
    edge_cases: str
    accuracy: str  # key of mind.spec.accuracy.ACCURACY
    vjp_text: str
    examples: tuple[Example, ...] = ()
    # The VJP rule as code, next to its text: vjp(builder, op, cotangent) -> one cotangent (or None)
    # per operand, built from the 19 ops through ``mind.ir.builder`` (see the autodiff transform).
    vjp: Callable[..., Sequence[Any]] | None = None
    # The same shape rule restricted to its common concrete case (equal dtypes, int dims that
    # agree): returns the result type, or None when ``infer`` must decide (and report).  It lives
    # here, next to ``infer``, and tests check the two agree; it exists only for compile speed.
    fast_infer: Callable[[Sequence[TensorType]], TensorType | None] | None = None
    laws: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def constraint(self, label: str) -> ConstraintDef:
        for c in self.constraints:
            if c.label == label:
                return c
        raise KeyError(f"{self.name} has no constraint {label}")

    @property
    def arity(self) -> int:
        return len(self.operands)


class ConstraintViolation(Exception):
    """A shape/dtype constraint that does not hold; ``label`` is the op-local label (``C2``)."""

    def __init__(self, label: str, detail: str, help: str | None = None):
        super().__init__(detail)
        self.label = label
        self.detail = detail
        self.help = help


class ConstraintUndecided(Exception):
    """A constraint the declared assumptions neither prove nor refute (symbolic dims)."""

    def __init__(self, label: str, cond: Unknown, detail: str):
        super().__init__(detail)
        self.label = label
        self.cond = cond
        self.detail = detail


class ShapeContext:
    """Runs one shape rule: ``A`` is its arithmetic, ``require`` checks or records a constraint."""

    def __init__(self, arith: Arith = INT_ARITH):
        self.A = arith

    def require(self, label: str, cond: Cond, detail: str | Callable[[], str],
                help: str | Callable[[], str] | None = None) -> None:
        if cond is True:
            return
        text = detail() if callable(detail) else detail
        help_text = help() if callable(help) else help
        if cond is False:
            raise ConstraintViolation(label, text, help_text)
        if isinstance(cond, Unknown):
            raise ConstraintUndecided(label, cond, text)
        self.obligation(label, cond, text)

    def obligation(self, label: str, cond: Any, detail: str) -> None:
        """Record a symbolic condition (Z3 contexts override this)."""
        raise TypeError(f"{type(self).__name__} cannot hold symbolic condition {cond!r}")

    def dim_choice(self, label: str, fn: Callable[[], Dim]) -> Dim:
        """Evaluate a dim that may depend on an undecided condition (``SymArith.ite``)."""
        try:
            return fn()
        except Undecidable as exc:
            raise ConstraintUndecided(label, exc.cond,
                                      f"the result dimension depends on whether {exc.cond.text}") from None
