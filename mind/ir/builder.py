"""Building Core IR programmatically: every emitted op gets its type from the spec's shape rule.

Used by the frontend's lowering, the autodiff transform, the canonicalizer and tests, so no client
ever computes a result type by hand.  Shape-rule failures propagate as the spec's
``ConstraintViolation``/``ConstraintUndecided`` so the caller can attach its own source span.
"""

from __future__ import annotations

from typing import Any, Sequence

from mind.diagnostics import Span
from mind.ir.core import Assumption, Function, Operation, Value
from mind.ir.decide import DEFAULT_LIMITS, SolverLimits
from mind.spec.dims import SymArith
from mind.spec.dtypes import DType
from mind.spec.ops import OPS, TensorType, infer_type


class FunctionBuilder:
    """``limits``: the solver limits of the decider that settles what the cheap symbolic path
    leaves open (``mind.ir.decide``), or None for the cheap path only."""

    def __init__(self, name: str, assumptions: Sequence[Assumption] = (),
                 limits: SolverLimits | None = DEFAULT_LIMITS):
        self.name = name
        self.params: list[Value] = []
        self.ops: list[Operation] = []
        self.assumptions = list(assumptions)
        self.limits = limits
        self._names: set[str] = set()
        self._counter = 0
        self._arith: SymArith | None = None

    @property
    def arith(self) -> SymArith:
        if self._arith is None:
            self._arith = Function(self.name, self.params, [], [], self.assumptions).arith(self.limits)
        return self._arith

    def fresh_name(self, hint: str | None = None) -> str:
        if hint and hint not in self._names:
            self._names.add(hint)
            return hint
        while str(self._counter) in self._names:
            self._counter += 1
        name = str(self._counter)
        self._counter += 1
        self._names.add(name)
        return name

    def param(self, name: str, type: TensorType, span: Span | None = None) -> Value:
        v = Value(self.fresh_name(name), type, span)
        self.params.append(v)
        self._arith = None
        return v

    def assume(self, assumption: Assumption) -> None:
        self.assumptions.append(assumption)
        self._arith = None

    #: The span of an op emitted without one: a transform sets it to the op it is expanding (the
    #: autodiff's VJP of one op), so every op it emits points at the source of that op.
    default_span: Span | None = None

    def emit(self, op: str, *operands: Value, span: Span | None = None, name: str | None = None,
             **attrs: Any) -> Value:
        if span is None:
            span = self.default_span
        opdef = OPS[op]
        ordered = {a.name: attrs[a.name] for a in opdef.attrs if a.name in attrs}
        result_type = infer_type(opdef, [v.type for v in operands], ordered, self.arith)
        result = Value(self.fresh_name(name), result_type, span)
        self.ops.append(Operation(op, tuple(operands), ordered, result, span))
        return result

    def const(self, value: Any, dtype: DType, span: Span | None = None) -> Value:
        import numpy as np

        arr = np.asarray(value, dtype=dtype.numpy)
        return self.emit("const", span=span, value=arr)

    def splat(self, scalar: Any, dtype: DType, shape: Sequence[int], span: Span | None = None) -> Value:
        import numpy as np

        arr = np.broadcast_to(np.asarray(scalar, dtype=dtype.numpy), tuple(shape))
        return self.emit("const", span=span, value=arr)

    def finish(self, results: Sequence[Value], span: Span | None = None) -> Function:
        return Function(self.name, list(self.params), list(self.ops), list(results), list(self.assumptions), span)
