"""Compile-time values of the elaborator and the lean IR builder it emits through.

A surface expression elaborates to one of:

* an IR ``Value`` (a tensor; scalars are rank-0 tensors),
* ``Lit``: a scalar literal not yet given a dtype (``1``, ``2.5``, ``true``), so that ``x * 2``
  adopts the dtype of ``x``,
* ``ArrLit``: a nested array literal not yet given a dtype,
* ``Tup``: a tuple of values,
* ``FnRef``: a user function (callable, inlined at each call),
* ``POISON``: the value of an expression that already produced a diagnostic; every use of it is
  silent, so one mistake gives one diagnostic.
"""

from __future__ import annotations

from typing import Any, Sequence

from mind.diagnostics import Span
from mind.ir.builder import FunctionBuilder
from mind.ir.core import Operation, Value
from mind.spec.dims import SymArith
from mind.spec.dtypes import DType
from mind.spec.ops import OPS, ShapeContext, TensorType


class _Poison:
    __slots__ = ()

    def __repr__(self) -> str:
        return "POISON"


POISON: Any = _Poison()


class Lit:
    """A scalar literal: ``kind`` is "int", "float" or "bool"; ``text`` is the float spelling."""

    __slots__ = ("value", "kind", "span", "text")

    def __init__(self, value: Any, kind: str, span: tuple[int, int], text: str | None = None):
        self.value = value
        self.kind = kind
        self.span = span
        self.text = text


class ArrLit:
    """A rectangular nested array literal: flat scalar ``Lit``s, the shape and the widest kind."""

    __slots__ = ("items", "shape", "kind", "span")

    def __init__(self, items: list[Lit], shape: tuple[int, ...], kind: str, span: tuple[int, int]):
        self.items = items
        self.shape = shape
        self.kind = kind
        self.span = span


class Tup:
    __slots__ = ("items", "span")

    def __init__(self, items: Sequence[Any], span: tuple[int, int]):
        self.items = tuple(items)
        self.span = span


class FnRef:
    """A user function: its AST and the scope it was defined in (for nested and sibling calls)."""

    __slots__ = ("node", "scope")

    def __init__(self, node: Any, scope: "Scope"):
        self.node = node
        self.scope = scope


class Scope:
    """Lexical scope: a dict of names, and the parent scope."""

    __slots__ = ("names", "parent", "values_visible")

    def __init__(self, parent: "Scope | None" = None, values_visible: bool = True):
        self.names: dict[str, Any] = {}
        self.parent = parent
        # False for the scope boundary of a function body: outer *values* are not captured.
        self.values_visible = values_visible

    def lookup(self, name: str) -> tuple[Any, bool]:
        """(binding, crossed a function boundary) or (None, ...)."""
        s: Scope | None = self
        crossed = False
        while s is not None:
            v = s.names.get(name)
            if v is not None:
                return v, crossed
            if not s.values_visible:
                crossed = True
            s = s.parent
        return None, crossed


_NP_DTYPES: dict[str, DType] = {"bool": DType.BOOL, "int32": DType.I32, "int64": DType.I64,
                                "float32": DType.F32, "float64": DType.F64}


class LeanBuilder(FunctionBuilder):
    """``FunctionBuilder`` with a leaner ``emit``: the result type still comes from the op's spec
    rule (``OpDef.infer``), but attributes are passed already in spec order and results are named
    by a counter (op results are renumbered by ``canonicalize`` anyway).  Constants, whose type is
    by definition the value's dtype and shape, are appended without running a shape rule."""

    def __init__(self, name: str, assumptions: Sequence[Any] = ()):
        super().__init__(name, assumptions)
        self._ctx: ShapeContext | None = None

    def context(self) -> ShapeContext:
        ctx = self._ctx
        if ctx is None or ctx.A is not self._arith:
            ctx = self._ctx = ShapeContext(self.arith)
        return ctx

    def emit_fast(self, op: str, operands: tuple[Value, ...], span: Span | None, attrs: dict[str, Any]) -> Value:
        ctx = self._ctx
        if ctx is None or ctx.A is not self._arith or self._arith is None:
            ctx = self.context()
        t = OPS[op].infer(ctx, [v.type for v in operands], attrs)
        ops = self.ops
        result = Value(str(len(ops)), t, span)
        ops.append(Operation(op, operands, attrs, result, span))
        return result

    def const_array(self, arr: Any, span: Span | None, dtype: DType | None = None) -> Value:
        t = TensorType(dtype or _NP_DTYPES[arr.dtype.name], arr.shape)
        result = Value(str(len(self.ops)), t, span)
        self.ops.append(Operation("const", (), {"value": arr}, result, span))
        return result

    @property
    def arith(self) -> SymArith:
        if self._arith is None:
            from mind.ir.core import Function

            self._arith = Function(self.name, self.params, [], [], self.assumptions).arith()
        return self._arith
