"""Compile-time values of the elaborator and the lean IR builder it emits through.

A surface expression elaborates to one of:

* an IR ``Value`` (a tensor; scalars are rank-0 tensors),
* ``Lit``: a scalar literal not yet given a dtype (``1``, ``2.5``, ``true``), so that ``x * 2``
  adopts the dtype of ``x``,
* ``ArrLit``: a nested array literal not yet given a dtype,
* ``Tup``: a tuple of values,
* ``FnRef``: a user function (callable, inlined at each call),
* ``Closure``: a closure ``|a| ...`` with the scope it was written in (callable, inlined),
* ``Callback``: a function made by the compiler (the pullback of ``vjp``), callable,
* ``StructVal``: a value of a ``struct`` (a named tuple of values; ``StructInfo`` is the struct),
* ``POISON``: the value of an expression that already produced a diagnostic; every use of it is
  silent, so one mistake gives one diagnostic.

Bindings in a ``Scope`` may also be ``StructInfo`` (a struct name) and ``ConstRef`` (a ``const``,
elaborated where it is used).
"""

from __future__ import annotations

from math import prod
from typing import Any, Sequence

from mind.diagnostics import Span
from mind.ir.builder import FunctionBuilder
from mind.ir.core import MAX_CONST_ELEMENTS, RESULT_NAMES, Operation, Value
from mind.spec.dims import Facts, SymArith
from mind.spec.dtypes import DType, from_numpy
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
    """A rectangular nested array literal: flat scalar ``Lit``s, the shape and the widest kind.

    A row read in bulk is one ``literals.DenseArray`` among the items, in place of its elements; a
    literal read in bulk as a whole has no ``items`` (None) but its AST ``node`` (whose ``dense``
    holds it).  The elaborator makes ``Lit``s of their elements only when one needs a decision."""

    __slots__ = ("items", "shape", "kind", "span", "node")

    def __init__(self, items: list[Any] | None, shape: tuple[int, ...], kind: str, span: tuple[int, int],
                 node: Any = None):
        self.items = items
        self.shape = shape
        self.kind = kind
        self.span = span
        self.node = node


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


class Closure:
    """``|a, b| body`` with the scope it was written in (it sees that scope's bindings as they are
    when it is called)."""

    __slots__ = ("node", "scope")

    def __init__(self, node: Any, scope: "Scope"):
        self.node = node
        self.scope = scope


class Callback:
    """A compile-time function made by the compiler (e.g. the pullback returned by ``vjp``):
    ``fn(E, args, node)`` computes its result from the evaluated arguments."""

    __slots__ = ("name", "arity", "fn")

    def __init__(self, name: str, arity: int, fn: Any):
        self.name = name
        self.arity = arity
        self.fn = fn


class StructInfo:
    """A ``struct`` definition: its AST node and the scope its field types are resolved in."""

    __slots__ = ("node", "scope", "fields")

    def __init__(self, node: Any, scope: "Scope"):
        self.node = node
        self.scope = scope
        self.fields = tuple(p.name for p in node.fields)

    @property
    def name(self) -> str:
        return self.node.name


class StructVal:
    """A value of a struct: one value per field, in the order of the definition."""

    __slots__ = ("info", "items", "span")

    def __init__(self, info: StructInfo, items: Sequence[Any], span: tuple[int, int]):
        self.info = info
        self.items = tuple(items)
        self.span = span

    def field(self, name: str) -> Any:
        return self.items[self.info.fields.index(name)]

    def replace(self, name: str, value: Any) -> "StructVal":
        items = list(self.items)
        items[self.info.fields.index(name)] = value
        return StructVal(self.info, items, self.span)


class StructType:
    """The type of a struct (the field types resolved in one environment of symbols)."""

    __slots__ = ("info", "types")

    def __init__(self, info: StructInfo, types: Sequence[Any]):
        self.info = info
        self.types = tuple(types)


class ConstRef:
    """A ``const NAME = value``: elaborated in the function that uses it (once per function)."""

    __slots__ = ("node", "scope")

    def __init__(self, node: Any, scope: "Scope"):
        self.node = node
        self.scope = scope


class Scope:
    """Lexical scope: a dict of names, and the parent scope.

    ``values_visible`` is false at the body of a top-level function: the values of the program
    outside it are not captured (functions, structs and constants are).  ``function`` is true at
    the body of every function or closure: assignments do not reach past it."""

    __slots__ = ("names", "parent", "values_visible", "function")

    def __init__(self, parent: "Scope | None" = None, values_visible: bool = True,
                 function: bool = False):
        self.names: dict[str, Any] = {}
        self.parent = parent
        self.values_visible = values_visible
        self.function = function or not values_visible

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

    def owner(self, name: str) -> "Scope | None":
        """The scope of the current function that binds ``name`` (where an assignment goes)."""
        s: Scope | None = self
        while s is not None:
            if name in s.names:
                return s
            if s.function:
                return None
            s = s.parent
        return None

    def chain(self) -> set[int]:
        """The ids of this scope and its ancestors."""
        out = set()
        s: Scope | None = self
        while s is not None:
            out.add(id(s))
            s = s.parent
        return out


def suggest(name: str, candidates: Any, prefix: str = "") -> str | None:
    """A "did you mean" help line: the closest of ``candidates`` to ``name``, if any is close."""
    import difflib

    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f"did you mean `{prefix}{close[0]}`?" if close else None


def _shape_text(shape: Any) -> str:
    from mind.spec.dims import format_dim

    return "[" + ", ".join(format_dim(d) for d in shape) + "]"


#: How ``describe`` words each kind of compile-time value.
_DESCRIBE: dict[type, Any] = {
    Value: lambda v: f"a {v.type.dtype.value}{_shape_text(v.type.shape)} tensor",
    Lit: lambda v: f"a {v.kind} literal",
    ArrLit: lambda v: f"a {v.kind} array literal of shape {_shape_text(v.shape)}",
    Tup: lambda v: f"a tuple of {len(v.items)}",
    StructVal: lambda v: f"a `{v.info.name}`",
    FnRef: lambda v: f"the function `{v.node.name}`",
    Closure: lambda v: "a closure",
}


def describe(v: Any) -> str:
    """A compile-time value's kind and type in words, for messages."""
    words = _DESCRIBE.get(type(v))
    return words(v) if words is not None else "a value"


#: Op results are named by their index, ``str(index)``; the names of the first ``NAMED_RESULTS``
#: are built once (``mind.ir.core.RESULT_NAMES``).
NAMED_RESULTS = len(RESULT_NAMES)


def result_name(index: int) -> str:
    """``str(index)``, the name of the result of op number ``index``."""
    return RESULT_NAMES[index] if index < NAMED_RESULTS else str(index)


_EAGER_SPLAT = 1 << 40
_NP: dict[DType, Any] = {}
_NP_SCALAR: dict[DType, Any] = {}


def np_scalar(value: Any, dtype: DType) -> Any:
    """``value`` as a rank-0 NumPy array of ``dtype`` (a literal beyond a float dtype's range
    rounds to ±inf, as IEEE conversion does)."""
    npdt = _NP.get(dtype)
    if npdt is None:
        npdt = _NP[dtype] = dtype.numpy
    import numpy as np

    tv = type(value)
    if (tv is int or tv is float or tv is bool) and -1e38 < value < 1e38:
        return np.array(value, dtype=npdt)  # cannot overflow any MIND dtype's float range
    with np.errstate(over="ignore"):
        return np.array(value, dtype=npdt)


class SplatAttrs:
    """The deferred ``attrs`` of a splat constant: called (once; later calls return the same
    dict) it builds ``{"value": a read-only zero-strided view of one element}``.

    It is also the op's ``hint`` (``mind.ir.core.Operation.deferred``): ``size`` (the element
    count) and ``scalar()`` (the element, as the array's ``arr[(0,) * ndim]`` gives it) let the
    canonicalizer look at the constant without building the array."""

    __slots__ = ("value", "dtype", "shape", "size", "attrs")

    def __init__(self, value: Any, dtype: DType, shape: tuple[int, ...], size: int) -> None:
        self.value = value
        self.dtype = dtype
        self.shape = shape
        self.size = size
        self.attrs: dict[str, Any] | None = None

    def scalar(self) -> Any:
        v = self.value
        tv = type(v)
        if (tv is float or tv is int or tv is bool) and -1e38 < v < 1e38:
            # the NumPy scalar type's constructor: the element ``np_scalar(v, dtype)[()]`` gives
            st = _NP_SCALAR.get(self.dtype)
            if st is None:
                st = _NP_SCALAR[self.dtype] = self.dtype.numpy.type
            return st(v)
        return np_scalar(v, self.dtype)[()]

    def __call__(self) -> dict[str, Any]:
        attrs = self.attrs
        if attrs is None:
            import numpy as np

            one = np_scalar(self.value, self.dtype)
            shape = self.shape
            arr = np.ndarray(shape, dtype=one.dtype, buffer=one, strides=(0,) * len(shape))
            arr.flags.writeable = False
            attrs = self.attrs = {"value": arr}
        return attrs


class ConstantTooLarge(Exception):
    """A constant with more elements than Core IR text admits (``mind.ir.core.MAX_CONST_ELEMENTS``)."""

    def __init__(self, count: int):
        super().__init__(count)
        self.count = count


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
        fast = OPS[op].fast_infer
        if fast is not None:
            t = fast([v.type for v in operands])
            if t is not None:
                ops = self.ops
                n = len(ops)
                result = Value(RESULT_NAMES[n] if n < NAMED_RESULTS else str(n), t, span)
                ops.append(Operation(op, operands, attrs, result, span))
                return result
        ctx = self._ctx
        if ctx is None or ctx.A is not self._arith or self._arith is None:
            ctx = self.context()
        t = OPS[op].infer(ctx, [v.type for v in operands], attrs)
        ops = self.ops
        result = Value(result_name(len(ops)), t, span)
        ops.append(Operation(op, operands, attrs, result, span))
        return result

    def const_splat(self, value: Any, dtype: DType, shape: tuple[int, ...]) -> Value:
        """A constant of ``shape`` whose elements all equal ``value`` (already checked to be a valid
        ``dtype`` literal).  Its NumPy array (a read-only view with zero strides) is built on the
        first read of the op's ``attrs``; the op's ``hint`` is the ``SplatAttrs``.  Raises
        ``ConstantTooLarge`` past the IR's constant limit (so the IR stays printable and parsable)."""
        n = prod(shape)
        if n > MAX_CONST_ELEMENTS:
            raise ConstantTooLarge(n)
        if n > _EAGER_SPLAT or not n and max(shape) > _EAGER_SPLAT:
            # NumPy refuses arrays this large (an empty one, n == 0, can have such an extent):
            # build it now, so the error surfaces where it did
            return self.const_array(SplatAttrs(value, dtype, shape, n)()["value"], None, dtype)
        ops = self.ops
        index = len(ops)
        t = TensorType(dtype, shape)
        result = Value(RESULT_NAMES[index] if index < NAMED_RESULTS else str(index), t, None)
        make = SplatAttrs(value, dtype, shape, n)
        ops.append(Operation.deferred("const", (), make, result, None, make))
        return result

    def const_array(self, arr: Any, span: Span | None, dtype: DType | None = None) -> Value:
        t = TensorType(dtype or from_numpy(arr.dtype), arr.shape)
        result = Value(result_name(len(self.ops)), t, span)
        self.ops.append(Operation("const", (), {"value": arr}, result, span))
        return result

    @property
    def arith(self) -> SymArith:
        if self._arith is None:
            from mind.ir.core import Function

            if self.assumptions:
                self._arith = Function(self.name, self.params, [], [], self.assumptions).arith()
            else:  # what Function(...).arith() gives without assumptions
                self._arith = SymArith(Facts.empty())
        return self._arith
