"""Elaboration: type checking and lowering to Core IR in one pass over the AST.

Every tensor operation is emitted through the IR builder, so every result type comes from the op's
shape rule in ``mind.spec.ops`` (the single source of shape rules); a rule that fails becomes a
diagnostic with the op's constraint code and the span of the surface expression.  User functions
are inlined at each call; each top-level function is also elaborated on its own (its parameters
become IR parameters, its symbolic dims IR symbols with the assumption ``S >= 1``).  Statements
outside functions form the function ``main``.

Errors do not stop elaboration: an expression that fails evaluates to ``POISON``, whose uses are
silent, so every independent error in a file is reported once.  See ``docs/frontend.md``.
"""

from __future__ import annotations

import operator
from functools import partial
from typing import Any, Sequence

from mind.diagnostics import Diagnostic, MindError, Span
from mind.ir.core import Assumption, Function, Module, Operation, Value
from mind.spec.dims import DimExpr, Unknown, format_dim, substitute
from mind.spec.dtypes import DType, parse_dtype
from mind.spec.ops import OPS, ConstraintUndecided, ConstraintViolation, TensorType
from mind.reference.memory import representable

from . import ast as A
from . import control, diffcalls, library, litexpr
from .builtins import BUILTINS, call_builtin
from .consteval import StaticValues
from .indexing import index_expr
from .litexpr import LITERALS, LitExpr
from .lexer import SourceSpan
from .structs import check_struct, get_field, named_type, struct_lit, struct_params
from .values import (MAX_CONST_ELEMENTS, NAMED_RESULTS, POISON, RESULT_NAMES, ConstantTooLarge, ArrLit, FnRef,
                     Callback, Closure, ConstRef, LeanBuilder, Lit, Scope, StructInfo, StructType, StructVal,
                     Tup, describe, np_scalar, suggest)

#: Resource limits: ops emitted per function (inlining can multiply code), inlining depth.
MAX_OPS = 200_000
MAX_INLINE_DEPTH = 64
MAX_DIAGNOSTICS = 50

_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_DEFAULT_HELP = {
    "E2004": "make the dtypes equal, e.g. with `cast(x, f32)`",
    "E2005": "`cast` the operand to a suitable dtype first",
    "E3001": "extents must be equal, or one of them 1",
    "E3002": "check the ranks of the operands",
    "E3003": "check the dimensions of the operands",
    "E3004": "axes are in [-rank, rank)",
    "E3005": "list each axis once",
    "E3007": "the element count must be preserved",
    "E3008": "a permutation lists each axis exactly once",
}
_DTYPES = {d.value: d for d in DType}
_CMP = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
_ARITH = {"+": "add", "-": "sub", "*": "mul", "/": "div"}
_TYPE_OF = operator.attrgetter("type")
_VALUE_OF = operator.attrgetter("value")
_PY_CMP = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
           ">=": operator.ge}


class _NotLiteral(Exception):
    """An element of an array literal is not a scalar literal (the array stacks values)."""


class Reported(Exception):
    """A diagnostic was recorded; unwinds to the enclosing expression, which becomes POISON."""


class _Abort(Exception):
    """Elaboration cannot go on (a resource limit or too many diagnostics)."""


class Frame:
    """One function being elaborated (or inlined): its dim symbols and inline stack."""

    __slots__ = ("dims", "stack")

    def __init__(self, dims: dict[str, Any], stack: tuple[str, ...]):
        self.dims = dims
        self.stack = stack


def _np_array(values: list[Any], dtype: Any) -> Any:
    """``values`` as an array of ``dtype``; floats past f32's range round to ±inf, quietly (IEEE)."""
    import numpy as np

    with np.errstate(over="ignore"):
        return np.array(values, dtype=dtype)


def _dense_lits(dense: Any) -> list[Lit]:
    """The ``Lit`` of each element of a bulk-read literal, as the token path makes them (for the
    element-by-element decisions of ``lit_value``)."""
    return [Lit(float(t), "float", (s, e), t) if "." in t or "e" in t or "E" in t else Lit(int(t), "int", (s, e))
            for t, s, e in dense.numbers()]


class Elaborator:
    Reported = Reported

    # Control flow (``control``): the path condition of a tensor `if` being elaborated, a pending
    # `return`/`break`/`continue`, the returns of the current function (made at its first
    # `return`), the log of assignments made in a branch, the loop nesting and the iteration
    # budget.  Their values at the start of a function are class attributes (an instance sets its
    # own when they change), so that making an Elaborator costs only what every program needs.
    path: Value | None = None
    flow: str | None = None
    returns: "control.Returns | None" = None
    assign_log: list | None = None
    loop_depth = 0
    loop_budget = control.MAX_LOOP_ITERATIONS
    _static: StaticValues | None = None
    module_scope: Scope | None = None
    _fresh = 0
    b: LeanBuilder = None  # type: ignore[assignment]  # the function being built (``start_function``)
    frame: Frame = None  # type: ignore[assignment]

    def __init__(self, module: A.Module):
        self.module = module
        self.src = module.source
        self.diags: list[Diagnostic] = []
        self._seen: set[tuple] = set()
        self._syms: dict[str, DimExpr] = {}

    def start_function(self, name: str) -> None:
        """A new IR function (``self.b``) with its own constants and compile-time state."""
        self.b = LeanBuilder(name)
        self._consts = {}
        self._static = None
        self.loop_budget = control.MAX_LOOP_ITERATIONS
        self._const_values: dict[int, Any] = {}

    @property
    def static(self) -> StaticValues:
        """The constant-only values of the function being built (made on first use)."""
        st = self._static
        if st is None or st.ops is not self.b.ops:
            st = self._static = StaticValues(self.b.ops)
        return st

    def assign_var(self, scope: Scope, name: str, value: Any) -> None:
        """Bind ``name`` in ``scope`` to its next value (logged while a tensor `if` is elaborated)."""
        log = self.assign_log
        if log is not None:
            log.append((scope, name, scope.names[name]))
        scope.names[name] = value

    def bind_in(self, scope: Scope, pat: A.Pattern, v: Any) -> None:
        saved = self.scope
        self.scope = scope
        try:
            self.bind(pat, v)
        finally:
            self.scope = saved

    @staticmethod
    def fmt_type(t: TensorType) -> str:
        return _fmt_type(t)

    # -- diagnostics ------------------------------------------------------------------------------
    def span(self, off: tuple[int, int] | None) -> Span | None:
        return self.src.span(off) if off is not None else None

    def report(self, code: str, message: str, off: tuple[int, int] | None, help: str | None = None,
               label: str | None = None, notes: Sequence[str] = ()) -> None:
        key = (code, message, off)
        if key in self._seen:
            return
        self._seen.add(key)
        self.diags.append(Diagnostic(code, message, self.span(off), label, help, tuple(notes)))
        if len(self.diags) >= MAX_DIAGNOSTICS:
            raise _Abort()

    def fail(self, code: str, message: str, off: tuple[int, int] | None, help: str | None = None,
             **kw: Any) -> Reported:
        self.report(code, message, off, help, **kw)
        return Reported()

    # -- emission ---------------------------------------------------------------------------------
    _span_off: tuple[int, int] | None = None
    _span: SourceSpan | None = None

    def op_span(self, off: tuple[int, int] | None) -> SourceSpan | None:
        """The span of an op emitted for the expression at ``off``: one object for the ops of one
        expression (a builtin's decomposition emits several in a row)."""
        if off is self._span_off:
            return self._span
        span = self._span = SourceSpan.at(self.src, off) if off is not None else None
        self._span_off = off
        return span

    def emit(self, op: str, operands: tuple, off: tuple[int, int], surface: str | None = None,
             **attrs: Any) -> Value:
        """Emit ``op``; a failing spec constraint becomes a diagnostic at ``off`` (raises Reported)."""
        ops = self.b.ops
        n = len(ops)
        if n >= MAX_OPS:
            self.report("E1012", f"the program expands to more than {MAX_OPS} operations", off,
                        "inlining multiplies code: call fewer functions or split the program")
            raise _Abort()
        fast = OPS[op].fast_infer
        if fast is not None:  # the spec rule's concrete fast path (``b.emit_fast``'s, inline)
            if len(operands) == 2:  # most ops (a list display is cheaper than a comprehension)
                x, y = operands
                t = fast([x.type, y.type])
            else:
                t = fast(list(map(_TYPE_OF, operands)))  # (no comprehension: no frame)
            if t is not None:
                span = self.op_span(off)
                result = Value(RESULT_NAMES[n] if n < NAMED_RESULTS else str(n), t, span)
                ops.append(Operation(op, operands, attrs, result, span))
                return result
        try:
            return self.b.emit_fast(op, operands, self.op_span(off), attrs)
        except ConstraintViolation as exc:
            c = OPS[op].constraint(exc.label)
            what = f"`{surface}`: " if surface and surface != op else ""
            raise self.fail(c.code, what + exc.detail, off, exc.help or _DEFAULT_HELP.get(c.code),
                            label=f"{op}.{exc.label}", notes=(f"{op}.{exc.label}: {c.text}",))
        except ConstraintUndecided as exc:
            raise self.undecided(op, exc, off, surface)

    def undecided(self, op: str, exc: ConstraintUndecided, off: tuple[int, int],
                  surface: str | None) -> Reported:
        c = OPS[op].constraint(exc.label)
        alts = _alternatives(exc.cond)
        what = f"`{surface or op}`" if surface else f"`{op}`"
        msg = f"{what} needs {alts}, which the declared dimensions do not decide"
        if len(alts.split(" or ")) > 1:
            help = f"make the dimension concrete, or use the same symbol: this holds only if {alts}"
        else:
            help = f"make the dimension concrete or use the same symbol, so that {alts}"
        return self.fail("E3011", msg, off, help, label=f"{op}.{exc.label}",
                         notes=(f"{op}.{exc.label}: {c.text}",))

    def const(self, value: Any, dtype: DType, off: tuple[int, int] | None = None) -> Value:
        """A rank-0 constant (shared within a function)."""
        key = (dtype, type(value), repr(value))
        v = self._consts.get(key)
        if v is None:
            v = self.b.const_array(_np_scalar(value, dtype), None, dtype)
            self._consts[key] = v
        return v

    def splat(self, value: Any, dtype: DType, shape: tuple[int, ...],
              off: tuple[int, int] | None = None) -> Value:
        """A constant of ``shape`` whose elements all equal ``value`` (zero strides, read-only; the
        array is built when the op's ``attrs`` are first read).  Too many elements is E1012."""
        if not representable(TensorType(dtype, shape), {}):  # (an empty one may have huge extents)
            raise self.fail("E1012", f"a constant of shape {_fmt(shape)} cannot be represented: its nonzero "
                                     "extents times the element size exceed 2**63 bytes", off,
                            "use smaller extents")
        try:
            return self.b.const_splat(value, dtype, shape)
        except ConstantTooLarge as exc:
            raise self.too_large(shape, exc, off) from None

    def too_large(self, shape: tuple[int, ...], exc: ConstantTooLarge,
                  off: tuple[int, int] | None) -> Reported:
        """Report E1012 for a constant fill of ``shape`` past the IR's constant limit (the
        returned exception unwinds to the enclosing expression)."""
        return self.fail("E1012", f"a constant of shape {_fmt(shape)} has {exc.count} elements, over "
                                  f"the limit of {MAX_CONST_ELEMENTS}", off,
                         "pass large tensors as function parameters instead of constant fills")

    # -- literals ---------------------------------------------------------------------------------
    def lit_value(self, lit: Lit, dtype: DType) -> Any:
        """The Python value of ``lit`` as ``dtype``; E2004/E2001 when it does not fit exactly."""
        kind = lit.kind
        if kind == "int" and (dtype is DType.I32 or dtype is DType.I64):  # the common case
            v = lit.value
            if _I32_MIN <= v <= _I32_MAX:  # fits both
                return v
        if dtype is DType.BOOL:
            if kind != "bool":
                raise self.fail("E2004", f"{kind} literal `{_lit_text(lit)}` used where a bool is expected",
                                lit.span, "write `true` or `false`, or compare: `x != 0`")
            return lit.value
        if kind == "bool":
            raise self.fail("E2004", f"bool literal used where {dtype.value} is expected", lit.span,
                            f"write a number, or `cast(...)` the bool to {dtype.value}")
        if dtype.is_int:
            if kind == "float":
                raise self.fail("E2004", f"float literal `{_lit_text(lit)}` used with {dtype.value}",
                                lit.span, f"write an integer, or `cast` the {dtype.value} operand to f32")
            if not dtype.int_min <= lit.value <= dtype.int_max:
                raise self.fail("E2001", f"integer literal {lit.value} does not fit in {dtype.value}",
                                lit.span, f"{dtype.value} holds {dtype.int_min} ..= {dtype.int_max}")
            return lit.value
        if kind == "int":
            v = lit.value
            if -16777216 <= v <= 16777216:  # exactly representable in f32 and f64
                return float(v)
            f = _np_scalar(lit.value, dtype)[()] if abs(lit.value) < (1 << 1000) else None
            if f is None or not (f == f and abs(f) != float("inf")) or int(f) != lit.value:
                raise self.fail("E2001", f"integer literal {lit.value} is not exactly representable "
                                         f"as {dtype.value}", lit.span,
                                "write it as a float literal to accept rounding")
            return float(f)
        return float(lit.text.replace("_", "")) if lit.text is not None else lit.value

    def materialize(self, v: Any, dtype: DType | None = None) -> Any:
        """A Value for ``v`` (literals get ``dtype`` or their default); Tup/FnRef pass through."""
        if type(v) is LitExpr:
            return litexpr.materialize(self, v, dtype)
        if type(v) is Lit:
            kind = v.kind
            dt = dtype or _DEFAULT_DTYPE[kind]
            x = v.value
            if not (kind == "int" and (dt is DType.I32 or dt is DType.I64) and _I32_MIN <= x <= _I32_MAX):
                x = self.lit_value(v, dt)  # (else ``lit_value``'s common case, inline)
            return self.const(x, dt, v.span)
        if type(v) is ArrLit:
            dt = dtype or _DEFAULT_DTYPE[v.kind]
            import numpy as np

            npdt = _np_scalar(0, dt).dtype
            pieces: list[Any] = []  # flat arrays, in order
            vals: list[Any] = []  # values of the elements since the last piece
            for x in ([v.node.dense] if v.items is None else v.items):
                if type(x) is Lit:
                    vals.append(self.lit_value(x, dt))
                    continue
                arr = x.as_array(dt)  # a bulk-read literal or row (``literals``): one step, or
                if arr is None:  # element by element where one needs a decision
                    vals += [self.lit_value(lit, dt) for lit in _dense_lits(x)]
                    continue
                if vals:
                    pieces.append(_np_array(vals, npdt))
                    vals = []
                pieces.append(arr.reshape(-1))
            if vals or not pieces:
                pieces.append(_np_array(vals, npdt))
            arr = (pieces[0] if len(pieces) == 1 else np.concatenate(pieces)).reshape(v.shape)
            return self.b.const_array(arr, None, dt)
        return v

    def tensor(self, v: Any, off: tuple[int, int], what: str = "this argument") -> Any:
        """``v`` as a tensor Value (literals default-typed); POISON passes; else E2001."""
        if v is POISON or type(v) is Value:
            return v
        if type(v) is Lit or type(v) is ArrLit or type(v) is LitExpr:
            return self.materialize(v)
        if type(v) is Tup:
            raise self.fail("E2001", f"{what} is a tuple of {len(v.items)} values, a tensor is expected",
                            off, "destructure it first: `let (a, b) = ...`")
        if type(v) is FnRef:
            raise self.fail("E2001", f"{what} is the function `{v.node.name}`, a tensor is expected",
                            off, f"call it: `{v.node.name}(...)`")
        raise self.fail("E2009", f"{what} is not a tensor", off)

    def pair(self, a: Any, b: Any, off: tuple[int, int]) -> tuple[Any, Any]:
        """Materialize two operands: a literal adopts the other operand's dtype."""
        if type(a) is Value and type(b) is Value:  # the common case: nothing to materialize
            return a, b
        la, lb = type(a) in _LITERAL_TYPES, type(b) in _LITERAL_TYPES
        if la and not lb and type(b) is Value:
            return self.materialize(a, b.type.dtype), b
        if lb and not la and type(a) is Value:
            return a, self.materialize(b, a.type.dtype)
        if la and lb:
            dt = DType.F32 if "float" in (a.kind, b.kind) else (DType.BOOL if a.kind == b.kind == "bool"
                                                                 else DType.I32)
            if a.kind == "bool" or b.kind == "bool":
                dt = DType.BOOL if a.kind == b.kind else dt
            return self.materialize(a, dt), self.materialize(b, dt)
        return self.tensor(a, off, "the left operand"), self.tensor(b, off, "the right operand")

    # -- symbols and types ------------------------------------------------------------------------
    def sym(self, name: str) -> DimExpr:
        s = self._syms.get(name)
        if s is None:
            s = self._syms[name] = DimExpr.symbol(name)
        return s

    def fresh_sym(self) -> DimExpr:
        self._fresh += 1
        return self.sym(f"_{self._fresh}")

    def type_of(self, t: A.Type, env: dict[str, Any] | None, bind: bool) -> Any:
        """A ``TensorType`` (or tuple of them) from a type annotation.

        Symbols resolve through ``env``; with ``bind`` an unknown symbol becomes an IR symbol
        (parameters), otherwise it stays ``None`` to be unified with the value's dim."""
        if type(t) is A.ScalarType:
            return TensorType(parse_dtype(t.name), ())
        if type(t) is A.TensorType:
            dt = parse_dtype(t.dtype)
            if dt is None:
                raise self.fail("E2005", f"`{t.dtype}` is not a dtype", t.span,
                                "dtypes are f32, f64, i32, i64 and bool")
            if t.dims is None:  # `Tensor<f32>`: any shape
                if bind:
                    raise self.fail("E3011", f"a parameter of type `{self.source_text(t.span)}` needs "
                                             f"a shape", t.span,
                                    "give the shape, with symbols for sizes that vary: "
                                    "`Tensor<f32, [B, N]>`")
                return TensorType(dt, None)  # type: ignore[arg-type]
            dims: list[Any] = []
            for d in t.dims:
                v = d.value
                if type(v) is int:
                    dims.append(v)
                elif v is None:
                    dims.append(self.fresh_sym() if bind else None)
                else:
                    if env is not None and v in env:
                        dims.append(env[v])
                    elif bind:
                        s = self.sym(v)
                        if env is not None:
                            env[v] = s
                        dims.append(s)
                    else:
                        dims.append(("?", v))
            return TensorType(dt, tuple(dims))
        if type(t) is A.TupleType:
            return tuple(self.type_of(e, env, bind) for e in t.elts)
        if type(t) is A.TypeName:
            return named_type(self, t, env, bind)
        raise self.fail("E2009", "unsupported type", t.span)

    def check_type(self, v: Any, want: Any, env: dict[str, Any], off: tuple[int, int], what: str) -> Any:
        """Check (and coerce literals of) ``v`` against an annotation type; bind unknown symbols."""
        if v is POISON:
            return v
        if type(want) is StructType:
            return check_struct(self, v, want, env, off, what)
        if isinstance(want, tuple):
            if type(v) is not Tup or len(v.items) != len(want):
                n = len(v.items) if type(v) is Tup else 1
                raise self.fail("E2001", f"{what} has {n} value(s), the declared type has {len(want)}",
                                off, "make the value match the declared tuple type")
            return Tup([self.check_type(x, w, env, off, what) for x, w in zip(v.items, want)], v.span)
        if type(v) is LitExpr:
            v = self.materialize(v, want.dtype)
            if want.shape:  # a fill: broadcast the scalar (``select`` broadcasts its operands)
                full = self.splat(True, DType.BOOL, self.static_shape(want, off, "a literal fill"), off)
                v = self.emit("select", (full, v, v), off, "=")
        if type(v) is Lit:
            if want.shape is None:
                return self.materialize(v, want.dtype)
            if want.shape:
                shape = self.static_shape(want, off, "a literal fill")
                return self.splat(self.lit_value(v, want.dtype), want.dtype, shape, off)
            return self.materialize(v, want.dtype)
        if type(v) is ArrLit and want.shape is None:
            v = self.materialize(v, want.dtype)
        if type(v) is ArrLit:
            shape = tuple(d if type(d) is int else None for d in want.shape)
            if len(v.shape) != len(shape) or any(s is not None and s != d for s, d in zip(shape, v.shape)):
                raise self.fail("E3010", f"array literal has shape {_fmt(v.shape)}, the declared type "
                                         f"is {_fmt_type(want)}", v.span,
                                "give the literal the declared number of rows and columns")
            v = self.materialize(v, want.dtype)
        v = self.tensor(v, off, what)
        t = v.type
        if t.dtype is not want.dtype:
            raise self.fail("E2004", f"{what} has dtype {t.dtype.value}, the declared type is "
                                     f"{_fmt_type(want)}", off, f"`cast(..., {want.dtype.value})` the value")
        if want.shape is None:  # `Tensor<f32>`: any shape
            return v
        if t.rank != len(want.shape):
            raise self.fail("E3002", f"{what} has type {t}, rank {t.rank}; the declared type "
                                     f"{_fmt_type(want)} has rank {len(want.shape)}", off)
        arith = self.b.arith
        for i, (have, d) in enumerate(zip(t.shape, want.shape)):
            if d is None:
                continue
            if type(d) is tuple:  # an unbound symbol: bind it
                env[d[1]] = have
                continue
            c = arith.truth(arith.eq(have, d))  # the shared decider settles what is left open
            if c is True:
                continue
            if c is False:
                raise self.fail("E3003", f"{what} has type {t}; the declared type is {_fmt_type(want)} "
                                         f"(axis {i}: {format_dim(have)} vs {format_dim(d)})", off)
            raise self.fail("E3011", f"{what} has type {t}; the declared type {_fmt_type(want)} needs "
                                     f"{format_dim(have)} == {format_dim(d)}, which the declared "
                                     f"dimensions do not decide", off,
                            "use the same symbol or a concrete dimension")
        return v

    def static_shape(self, t: TensorType, off: tuple[int, int], what: str) -> tuple[int, ...]:
        if all(type(d) is int for d in t.shape):
            return t.shape  # type: ignore[return-value]
        raise self.fail("E3011", f"{what} needs a static shape, not {_fmt_type(t)}", off,
                        "fills and constants have concrete shapes; derive symbolic shapes from parameters")

    # -- static (compile-time) arguments ----------------------------------------------------------
    def static_int(self, node: A.Expr, what: str) -> int:
        t = type(node)
        if t is A.IntLit:
            return node.value
        if t is A.Unary and node.op == "-":
            return -self.static_int(node.operand, what)
        if t is A.Name:
            v, _ = self.scope.lookup(node.id)
            if type(v) is Lit and v.kind == "int":
                return v.value
        raise self.fail("E2009", f"{what} must be an integer constant", node.span,
                        "write an integer literal, e.g. `axis=1`")

    def static_ints(self, node: A.Expr, what: str, allow_scalar: bool = True) -> list[int]:
        t = type(node)
        if t is A.ArrayLit or t is A.TupleExpr:
            return [self.static_int(e, what) for e in node.elts]
        if allow_scalar:
            return [self.static_int(node, what)]
        raise self.fail("E2009", f"{what} must be a list of integers", node.span, "e.g. `[0, 1]`")

    def static_dim(self, node: A.Expr, what: str) -> Any:
        if type(node) is A.Name:
            v, _ = self.scope.lookup(node.id)
            if v is None and node.id in self.frame.dims:
                return self.frame.dims[node.id]
        return self.static_int(node, what)

    def static_dims(self, node: A.Expr, what: str) -> list[Any]:
        t = type(node)
        if t is A.ArrayLit or t is A.TupleExpr:
            return [self.static_dim(e, what) for e in node.elts]
        return [self.static_dim(node, what)]

    # -- expressions ------------------------------------------------------------------------------
    def ev(self, node: A.Expr) -> Any:
        """The value of ``node``; POISON if it reported a diagnostic."""
        t = type(node)
        try:
            # the most frequent nodes dispatched here, the rest by ``_ev``
            if t is A.Name:
                # a name bound in the innermost scope (no function boundary crossed), inline
                v = self.scope.names.get(node.id)
                return v if v is not None else self.name(node)
            if t is A.Call:
                return self.call(node)
            if t is A.Binary:
                return self.binary(node)
            if t is A.IntLit:
                return Lit(node.value, "int", node.span)
            return self._ev(node)
        except Reported:
            return POISON

    def _ev(self, node: A.Expr) -> Any:
        """The less frequent nodes (``ev`` dispatches names, calls, binaries and integers itself)."""
        t = type(node)
        if t is A.FloatLit:
            return Lit(node.value, "float", node.span, node.text)
        if t is A.Unary:
            return self.unary(node)
        if t is A.BoolLit:
            return Lit(node.value, "bool", node.span)
        if t is A.TupleExpr:
            return Tup([self.ev(e) for e in node.elts], node.span)
        if t is A.ArrayLit:
            return self.array(node)
        rule = _EXPR_RULES.get(t)
        if rule is not None:
            return rule(self, node)
        if t is A.StrLit:
            raise self.fail("E2009", "a string is not a value here", node.span,
                            "strings are accepted only as options, e.g. `padding=\"same\"`")
        if t is A.Closure:
            return Closure(node, self.scope)
        if t is A.Range:
            raise self.fail("E2009", "a range is not a value", node.span,
                            "ranges are loop bounds (`for i in 0..n`) and slices (`x[1..3]`); "
                            "`arange(a, b)` makes a tensor")
        raise self.fail("E2009", "unsupported expression", node.span)

    def block_expr(self, node: A.BlockExpr) -> Any:
        return self.block(node.block)

    def cast(self, node: A.Cast) -> Any:
        """``x as T``: ``convert`` to the dtype of T (a literal becomes a literal of T's kind)."""
        v = self.ev(node.value)
        if v is POISON:
            return v
        t = node.type
        name = t.name if type(t) is A.ScalarType else (t.dtype if type(t) is A.TensorType else None)
        dt = parse_dtype(name) if name is not None else None
        if dt is None:
            raise self.fail("E2005", f"cannot cast to `{self.source_text(t.span)}`", t.span,
                            "`as` converts to an element type: f32, f64, i32, i64 or bool")
        if type(v) is Lit and v.kind != "bool" and dt is not DType.BOOL:
            if dt.is_int:
                return Lit(int(v.value), "int", node.span)
            return self.materialize(v, dt) if v.kind == "float" else Lit(v.value, "float", node.span)
        x = self.tensor(v, node.value.span, "the operand of `as`")
        return self.emit("convert", (x,), node.span, "as", dtype=dt)

    def attribute(self, node: A.Attribute) -> Any:
        return get_field(self, node)

    def name(self, node: A.Name) -> Any:
        v, crossed = self.scope.lookup(node.id)
        if v is not None:
            tv = type(v)
            if tv is ConstRef:
                return self.const_value(v)
            if tv is StructInfo:
                raise self.fail("E2009", f"`{node.id}` is a struct, not a value", node.span,
                                f"make a value: `{node.id} {{ field: value, ... }}`")
            if crossed and tv is not FnRef:
                raise self.fail("E2002", f"`{node.id}` is a value of an enclosing function; functions "
                                         f"do not capture values", node.span,
                                f"pass `{node.id}` as a parameter")
            return v
        from .builtins import BUILTINS

        if node.id in BUILTINS:
            raise self.fail("E2009", f"the builtin `{node.id}` must be called", node.span,
                            f"call it: `{node.id}(...)`")
        if node.id in self.frame.dims:
            raise self.fail("E2009", f"`{node.id}` is a dimension symbol, not a value", node.span,
                            "dimension symbols may appear in shapes, e.g. `reshape(x, [B, 4])`")
        raise self.fail("E2002", f"cannot find `{node.id}` in this scope", node.span,
                        _suggest(node.id, self.visible_names()))

    def builtin_named(self, node: A.Expr) -> str | None:
        """The builtin that ``node`` (``zeros``, ``tensor.zeros``) names, if it names one that no
        binding hides."""
        name = node.id if type(node) is A.Name else (
            node.value.id + "." + node.attr if type(node) is A.Attribute and type(node.value) is A.Name else None)
        if name is None or name.rsplit(".", 1)[-1] not in BUILTINS:
            return None
        return name if self.scope.lookup(name.split(".", 1)[0])[0] is None else None

    def const_value(self, ref: ConstRef) -> Any:
        """The value of a `const` in the current function (elaborated once per function)."""
        cache = self._const_values
        key = id(ref)
        v = cache.get(key)
        if v is None:
            node = ref.node
            saved, saved_path = self.scope, self.path
            self.scope, self.path = Scope(ref.scope, values_visible=False), None
            try:
                v = self.ev(node.value)
                if node.type is not None and v is not POISON:
                    try:
                        v = self.check_type(v, self.type_of(node.type, {}, bind=False), {},
                                            node.value.span, f"the constant `{node.name}`")
                    except Reported:
                        v = POISON
            finally:
                self.scope, self.path = saved, saved_path
            cache[key] = v
        return v

    def visible_names(self) -> list[str]:
        out: list[str] = []
        s: Scope | None = self.scope
        while s is not None:
            out.extend(s.names)
            s = s.parent
        return out

    def unary(self, node: A.Unary) -> Any:
        """A prefix operator; a chain (``- - !x``, any length) is elaborated with a loop."""
        chain = [node]
        inner = node.operand
        while type(inner) is A.Unary:
            chain.append(inner)
            inner = inner.operand
        v = self.ev(inner)
        for n in reversed(chain):
            if v is POISON:
                return v
            try:
                v = self.apply_unary(n, v)
            except Reported:
                return POISON
        return v

    def apply_unary(self, node: A.Unary, v: Any) -> Any:
        if node.op == "-":
            if type(v) is LitExpr and v.kind != "bool":
                return litexpr.negate(v, node.span)
            if type(v) is Lit:
                if v.kind == "bool":
                    raise self.fail("E2005", "cannot negate a bool", node.span, "use `!` for logical not")
                text = None if v.text is None else (v.text[1:] if v.text.startswith("-") else "-" + v.text)
                return Lit(-v.value, v.kind, node.span, text)
            v = self.tensor(v, node.operand.span, "the operand of `-`")
            if not v.type.dtype.is_numeric:
                raise self.fail("E2005", f"cannot negate a {v.type.dtype.value} tensor", node.span,
                                "use `!` for logical not")
            return self.emit("mul", (v, self.const(-1, v.type.dtype)), node.span, "-")
        # logical not
        if type(v) is Lit:
            if v.kind != "bool":
                raise self.fail("E2005", f"`!` needs a bool, found a {v.kind} literal", node.span,
                                "compare first: `x != 0`")
            return Lit(not v.value, "bool", node.span)
        v = self.tensor(v, node.operand.span, "the operand of `!`")
        if v.type.dtype is not DType.BOOL:
            raise self.fail("E2005", f"`!` needs a bool tensor, found {v.type}", node.span,
                            "compare first: `x != 0`")
        return self.emit("compare", (v, self.const(False, DType.BOOL)), node.span, "!", direction="eq")

    def binary(self, node: A.Binary) -> Any:
        """A binary operator; a left-nested chain (``a + b + c + ...``, any length) is elaborated
        with a loop over its left spine, not by recursion."""
        left = node.left
        if type(left) is not A.Binary:  # the common case: one operator
            right = node.right
            if type(left) is A.IntLit and type(right) is A.IntLit:  # (``apply_binary`` on two int literals)
                rule = _INT_FOLD.get(node.op)
                if rule is not None:
                    return Lit(rule[0](left.value, right.value), rule[1], node.span)
            a = self.ev(left)
            b = self.ev(right)
            if a is POISON or b is POISON:
                return POISON
            return self.apply_binary(node, a, b)
        spine = [node]
        while type(left) is A.Binary:
            spine.append(left)
            left = left.left
        a = self.ev(left)
        for n in reversed(spine):
            b = self.ev(n.right)
            if a is POISON or b is POISON:
                a = POISON
                continue
            try:
                a = self.apply_binary(n, a, b)
            except Reported:
                a = POISON
        return a

    def apply_binary(self, node: A.Binary, a: Any, b: Any) -> Any:
        op = node.op
        if op == "@":
            from .builtins import matmul_values

            return matmul_values(self, self.tensor(a, node.left.span, "the left operand of `@`"),
                                 self.tensor(b, node.right.span, "the right operand of `@`"), node.span, "@")
        ta = type(a)
        if ta is Lit and type(b) is Lit and a.kind == "int" and b.kind == "int":  # (``_fold_literals``, inline)
            rule = _INT_FOLD.get(op)
            if rule is not None:
                return Lit(rule[0](a.value, b.value), rule[1], node.span)
        if ta in LITERALS and type(b) in LITERALS:
            folded = _fold_literals(op, a, b, node.span) if ta is Lit and type(b) is Lit else None
            if folded is None:
                folded = litexpr.combine(op, a, b, node.span)
            if folded is not None:
                return folded
        a, b = self.pair(a, b, node.span)
        if op == "%":
            return self.remainder(a, b, node)
        ir = _ARITH.get(op)
        if ir is not None:
            return self.emit(ir, (a, b), node.span, op)
        d = _CMP.get(op)
        if d is not None:
            return self.emit("compare", (a, b), node.span, op, direction=d)
        # && and ||
        for v, side in ((a, node.left), (b, node.right)):
            if v.type.dtype is not DType.BOOL:
                raise self.fail("E2005", f"`{op}` needs bool operands, found {v.type}", side.span,
                                "compare first: `x != 0`")
        if op == "&&":
            return self.emit("select", (a, b, self.const(False, DType.BOOL)), node.span, op)
        return self.emit("select", (a, self.const(True, DType.BOOL), b), node.span, op)

    def remainder(self, a: Value, b: Value, node: A.Binary) -> Value:
        """Integer ``a % b`` = ``a - b * (a / b)`` with ``/`` truncating: the sign of ``a``, as in C
        and Rust; ``x % 0 = 0`` (the public determinism contract)."""
        dt = a.type.dtype
        if not dt.is_int:
            raise self.fail("E2005", f"`%` needs integer operands, found {a.type}", node.span,
                            "for floats write `x - y * floor(x / y)`")
        off = node.span
        q = self.emit("div", (a, b), off, "%")
        r = self.emit("sub", (a, self.emit("mul", (b, q), off, "%")), off, "%")
        zero = self.const(0, dt)
        return self.emit("select", (self.emit("compare", (b, zero), off, "%", direction="eq"), zero, r),
                         off, "%")

    def array(self, node: A.ArrayLit) -> Any:
        """An array literal (``ArrLit``), or, when an element is a tensor, the elements stacked
        along a new first axis (``[y0, y1]``)."""
        dense = node.dense
        if dense is not None:  # read in bulk: its items are made only if they are needed
            return ArrLit(None, dense.shape, dense.kind, node.span, node)
        return self._array_items(node)

    def _array_items(self, node: A.ArrayLit) -> Any:
        items: list[Lit] = []
        try:
            shape = self._array_shape(node, 0, items)
        except _NotLiteral:
            return self.stack_elements(node)
        kinds = {x.kind for x in items}
        if "bool" in kinds and len(kinds) > 1:
            raise self.fail("E2004", "array literal mixes bools and numbers", node.span)
        kind = "bool" if kinds == {"bool"} else ("float" if "float" in kinds else "int")
        return ArrLit(items, shape, kind, node.span)

    def _array_shape(self, node: A.Expr, depth: int, items: list[Lit]) -> tuple[int, ...]:
        if type(node) is A.ArrayLit and node.dense is not None:  # a bulk-read row of a larger literal
            items.append(node.dense)  # (``materialize`` reads it in one step where it can)
            return node.dense.shape
        if type(node) is A.ArrayLit:
            shapes = [self._array_shape(e, depth + 1, items) for e in node.elts]
            for s, e in zip(shapes[1:], node.elts[1:]):
                if s != shapes[0]:
                    raise self.fail("E3010", f"ragged array literal: an element has shape {_fmt(s)}, "
                                             f"the first {_fmt(shapes[0])}", e.span,
                                    "every row of an array literal has the same length")
            return (len(node.elts),) + (shapes[0] if shapes else ())
        v = self.ev(node)
        if type(v) is not Lit:
            if v is POISON:
                raise Reported()
            raise _NotLiteral()
        items.append(v)
        return ()

    def stack_elements(self, node: A.ArrayLit) -> Value:
        from .builtins import Args, concat_tensors

        vals = [self.ev(e) for e in node.elts]
        if any(v is POISON for v in vals):
            raise Reported()
        dt = next((v.type.dtype for v in vals if type(v) is Value), None)
        xs = []
        for v, e in zip(vals, node.elts):
            v = self.materialize(v, dt) if type(v) in _LITERAL_TYPES else v
            if type(v) is not Value:
                raise self.fail("E2009", f"an array element must be a number or a tensor, found "
                                         f"{describe(v)}", e.span)
            xs.append(self.emit("reshape", (v,), e.span, "[...]", shape=(1,) + tuple(v.type.shape)))
        return concat_tensors(Args(self, node, "array literal", {}), xs, list(node.elts), 0)

    # -- calls ------------------------------------------------------------------------------------
    def call(self, node: A.Call) -> Any:
        name = node.name
        base = _QUALIFIED.get(name)  # type: ignore[arg-type]
        if base is not None:  # `tensor.relu(...)`: the common case of the checks below
            return call_builtin(self, base, node)
        if name is None:
            func = node.func
            if type(func) is A.Call and diffcalls.is_diff_call(func.name):
                return diffcalls.call_result(self, func, node)
            if type(func) is A.Attribute:  # a method on an expression: `(a + b).sum()`
                return self.method(func.value, func.attr, node)
            f = self.ev(func)
            if f is POISON:
                return POISON
            if type(f) in (Closure, Callback, FnRef):
                return self.apply_call(f, node)
            raise self.fail("E2009", "only functions, closures and builtins can be called", func.span)
        if diffcalls.is_diff_call(name):
            return diffcalls.call(self, node)
        if "." in name:
            return self.dotted_call(name, node)
        v, _ = self.scope.lookup(name)
        tv = type(v)
        if tv is FnRef:
            return self.inline(v, node)
        if tv is Closure or tv is Callback:
            return self.apply_call(v, node)
        if v is None and name in BUILTINS:
            return call_builtin(self, name, node)
        if v is not None:
            raise self.fail("E2009", f"`{name}` is a value, not a function", node.func.span)
        refused = library.REFUSED.get(name)
        if refused is not None:
            raise self.fail("E1013", refused[0], node.func.span, refused[1])
        if name == "range":
            raise self.fail("E2009", "`range(...)` is a loop range", node.span,
                            "iterate over it, `for i in range(n) { ... }`, or make a tensor with `arange`")
        raise self.fail("E2008", f"cannot find function `{name}`", node.func.span,
                        _suggest(name, library.known_names() + self.visible_names()))

    def apply_call(self, f: Any, node: A.Call) -> Any:
        """A call of a closure, a compiler-made function or a function value."""
        if node.kwargs:
            raise self.fail("E2009", "closures take positional arguments only", node.kwargs[0].span)
        if type(f) is FnRef:
            return self.inline(f, node)
        args = [(a, self.ev(a)) for a in node.args]
        if any(v is POISON for _, v in args):
            return POISON
        return diffcalls.apply(self, f, args, node)

    def dotted_call(self, name: str, node: A.Call) -> Any:
        """``tensor.zeros(...)``, ``math::sin(x)``, ``std.diff.grad(...)``, or a method ``x.sum()``."""
        func = node.func
        root = name.split(".", 1)[0]
        v, _ = self.scope.lookup(root)
        if v is not None and type(v) is not StructInfo and type(func) is A.Attribute:
            return self.method(func.value, func.attr, node)
        path, base = library.split_qualified(name)
        module = library.module_of(path) if path is not None else None
        if module is None:
            raise self.fail("E2008", f"unknown module `{'::'.join(path or ())}` in `{name}`", func.span,
                            "the standard library's modules are " + ", ".join(
                                "`" + "::".join(m) + "`" for m in library.MODULES))
        if not library.provides(module, base):
            refused = library.REFUSED.get(base)
            if refused is not None:
                raise self.fail("E1013", refused[0], func.span, refused[1])
            raise self.fail("E2008", f"unknown builtin `{name}`", func.span,
                            _suggest(base, library.known_names(), prefix=".".join(path) + "."))
        refused = library.REFUSED.get(base)
        if refused is not None:
            raise self.fail("E1013", refused[0], func.span, refused[1])
        return call_builtin(self, base, node)

    def method(self, receiver: A.Expr, attr: str, node: A.Call) -> Any:
        """``x.f(args)`` is ``f(x, args)`` for a builtin ``f``."""
        if attr not in BUILTINS:
            if attr in ("as_ptr", "len", "copy_to_ptr", "as_mut_ptr", "from_ptr"):
                raise self.fail("E1013", f"`.{attr}()` is not supported: MIND has no pointers", node.func.span,
                                "pass tensors as values")
            raise self.fail("E2008", f"`.{attr}(...)`: no builtin `{attr}`", node.func.span,
                            _suggest(attr, BUILTINS) or "methods are builtins called with the value "
                                                        "first: `x.sum()` is `sum(x)`")
        call = A.Call(A.Name(attr, node.func.span), (receiver,) + node.args, node.kwargs, attr, node.span)
        return call_builtin(self, attr, call)

    def source_text(self, off: tuple[int, int]) -> str:
        """The source text of ``off`` (long or multi-line expressions shortened)."""
        text = " ".join(self.src.text[off[0]:off[1]].split())
        return text if len(text) <= 40 else text[:37] + "..."

    def check_loss(self, loss: Value, off: tuple[int, int], what: str) -> None:
        """E5006 unless ``loss`` is a rank-0 float (``what`` names it in the message)."""
        t = loss.type
        if t.rank != 0:
            raise self.fail("E5006", f"the loss must be a scalar, but {what} has type {t}", off,
                            "reduce it first, e.g. with `sum(...)` or `mean(...)` over every axis")
        if not t.dtype.is_float:
            raise self.fail("E5006", f"the loss must be a float scalar, but {what} has type {t}", off,
                            "`cast` it to f32 or f64")

    def check_wrt(self, w: Value, off: tuple[int, int], what: str) -> None:
        """E5005 unless ``w`` (a differentiation variable, named by ``what``) is a float value."""
        if not w.type.dtype.is_float:
            raise self.fail("E5005", f"cannot differentiate with respect to {what} of type {w.type}: "
                                     f"only float values have gradients", off,
                            "integer and bool values are not differentiable")

    def differentiate(self, loss: Value, wrt: list[Value], off: tuple[int, int]) -> list[Value]:
        from mind.compiler.autodiff.transform import grad_values

        try:
            return grad_values(self.b, loss, wrt)
        except MindError as exc:
            d = exc.diagnostics[0]
            raise self.fail(d.code, d.message, off, d.help) from None

    def inline(self, ref: FnRef, node: A.Call) -> Any:
        fn: A.FnDef = ref.node
        if fn.name in self.frame.stack:
            raise self.fail("E2003", f"recursive call to `{fn.name}`: functions are inlined, so "
                                     f"recursion is not supported", node.span,
                            "rewrite the recursion as a loop-free computation")
        if len(self.frame.stack) >= MAX_INLINE_DEPTH:
            raise self.fail("E1012", f"calls nest more than {MAX_INLINE_DEPTH} deep", node.span)
        params = fn.params
        args: list[Any] = [None] * len(params)
        if len(node.args) > len(params):
            raise self.fail("E2007", f"`{fn.name}` takes {len(params)} argument(s), {len(node.args)} given",
                            node.span, f"the signature is `{_sig(fn)}`")
        for i, a in enumerate(node.args):
            args[i] = (a, self.ev(a))
        index = {p.name: i for i, p in enumerate(params)}
        for kw in node.kwargs:
            i = index.get(kw.name)
            if i is None:
                close = suggest(kw.name, index)
                raise self.fail("E2009", f"`{fn.name}` has no parameter `{kw.name}`", kw.span,
                                (close + " " if close else "") + f"the signature is `{_sig(fn)}`")
            if args[i] is not None:
                raise self.fail("E2009", f"parameter `{kw.name}` is given twice", kw.span)
            args[i] = (kw.value, self.ev(kw.value))
        missing = [p.name for p, a in zip(params, args) if a is None]
        if missing:
            raise self.fail("E2007", f"`{fn.name}` takes {len(params)} argument(s), {len(params) - len(missing)} "
                                     f"given (missing {', '.join(missing)})", node.span,
                            f"the signature is `{_sig(fn)}`")
        if any(v is POISON for _, v in args):
            return POISON
        return self.inline_values(ref, args, node)

    def inline_values(self, ref: FnRef, args: list[tuple[Any, Any]], node: A.Call) -> Any:
        """Inline ``ref`` on already evaluated (argument node, value) pairs."""
        fn: A.FnDef = ref.node
        params = fn.params
        if len(args) != len(params):
            raise self.fail("E2007", f"`{fn.name}` takes {len(params)} argument(s), {len(args)} given",
                            node.span, f"the signature is `{_sig(fn)}`")
        env: dict[str, Any] = {}
        # a nested function sees the bindings of the function it is written in (as they are when
        # it is called); a top-level one sees only functions, structs and constants
        scope = Scope(ref.scope, values_visible=ref.scope is not self.module_scope, function=True)
        for p, (anode, v) in zip(params, args):
            if p.type is None:
                raise self.fail("E2003", f"parameter `{p.name}` needs a type", p.span)
            want = self.type_of(p.type, env, bind=False)
            scope.names[p.name] = self.check_type(v, want, env, anode.span, f"argument `{p.name}`")
        return self.body(fn, scope, env, node.span)

    def function_body(self, run: Any, *args: Any) -> Any:
        """``run(*args)`` (which elaborates a function's or closure's body) with the control-flow
        state of a new function: no path condition, loop or pending `return`; the result is what the
        body's `return`s and its value give together (``control.finish``)."""
        saved = (self.path, self.flow, self.returns, self.loop_depth, self.assign_log)
        self.path, self.flow, self.returns, self.loop_depth, self.assign_log = None, None, None, 0, None
        try:
            value = run(*args)
            # (without a `return` in the body, its value is the result: ``control.finish``'s case)
            return value if self.returns is None else control.finish(self, value, self.module.span)
        except Reported:
            return POISON
        finally:
            self.path, self.flow, self.returns, self.loop_depth, self.assign_log = saved

    def body(self, fn: A.FnDef, scope: Scope, env: dict[str, Any], call_off: tuple[int, int] | None) -> Any:
        saved_scope, saved_frame = self.scope, self.frame
        self.scope = scope
        self.frame = Frame(env, saved_frame.stack + (fn.name,) if saved_frame else (fn.name,))
        try:
            value = self.function_body(self.block, fn.body)
            if value is POISON:
                return POISON
            if fn.ret is not None:
                try:
                    want = self.type_of(fn.ret, env, bind=False)
                except Reported:
                    return POISON
                off = _result_span(fn.body)
                try:
                    value = self.check_type(value, want, env, off, f"the result of `{fn.name}`")
                except Reported:
                    return POISON
            return value
        finally:
            self.scope, self.frame = saved_scope, saved_frame

    # -- statements -------------------------------------------------------------------------------
    def hoist(self, stmts: Sequence[A.Stmt], scope: Scope) -> None:
        """Functions, structs and constants are visible in the whole block (in any order)."""
        for s in stmts:
            t = type(s)
            kind = _ITEMS.get(t)
            if kind is not None:
                if s.name in scope.names:
                    self.report("E2010", f"{kind} `{s.name}` is defined more than once", s.name_span,
                                "rename one of them")
                    continue
                scope.names[s.name] = (FnRef if t is A.FnDef else StructInfo if t is A.StructDef
                                       else ConstRef)(s, scope)
            elif t is A.Import:
                library.check_import(self, s)

    def block(self, blk: A.Block) -> Any:
        scope = Scope(self.scope)
        saved = self.scope
        self.scope = scope
        try:
            self.hoist(blk.stmts, scope)
            control.run(self, blk.stmts)
            if self.flow is None and blk.tail is not None:
                return self.ev(blk.tail)
            return Tup((), blk.span)
        finally:
            self.scope = saved

    def let(self, s: A.Let) -> None:
        ty = s.type
        node = s.value
        if ty is not None and type(ty) is A.TensorType and type(s.target) is A.NamePattern:
            nt = type(node)
            if (nt is A.IntLit or nt is A.FloatLit) and ty.dims:
                # `let x: Tensor[f32, (2, 3)] = 1`: a literal fill of a static shape (the path of
                # ev + type_of + check_type + splat, without the detours)
                dt = _DTYPES.get(ty.dtype)
                dims = tuple(map(_VALUE_OF, ty.dims))
                static = dt is not None and dims
                if static:
                    for d in dims:
                        if type(d) is not int:
                            static = False
                            break
                if static:
                    v = node.value
                    if nt is A.IntLit and dt.is_float and -16777216 <= v <= 16777216:
                        v = float(v)  # what ``lit_value`` gives (exactly representable)
                    else:
                        lit = Lit(v, "int", node.span) if nt is A.IntLit else \
                            Lit(v, "float", node.span, node.text)
                        try:
                            v = self.lit_value(lit, dt)
                        except Reported:
                            v = POISON
                    if v is not POISON:
                        try:  # (``splat``, inline)
                            v = self.b.const_splat(v, dt, dims)
                        except ConstantTooLarge as exc:
                            self.too_large(dims, exc, ty.span)  # reports E1012
                            v = POISON
                    name = s.target.name
                    if name != "_":
                        self.scope.names[name] = v
                    return
        v = self.ev(node)
        if ty is not None and v is not POISON:
            try:
                want = self.type_of(ty, self.frame.dims, bind=False)
                v = self.check_type(v, want, self.frame.dims, node.span, "the value")
            except Reported:
                v = POISON
        target = s.target
        if type(target) is A.NamePattern:  # (``bind``, inline)
            if target.name != "_":
                self.scope.names[target.name] = v
            return
        self.bind(target, v)

    def bind(self, pat: A.Pattern, v: Any) -> None:
        if type(pat) is A.NamePattern:
            if pat.name != "_":
                self.scope.names[pat.name] = v
            return
        n = len(pat.elts)
        if v is not POISON and (type(v) is not Tup or len(v.items) != n):
            have = f"a tuple of {len(v.items)}" if type(v) is Tup else "a single value"
            self.report("E2001", f"the pattern has {n} elements, the value is {have}", pat.span,
                        "make the pattern match the value")
            v = POISON
        seen: set[str] = set()
        for i, p in enumerate(pat.elts):
            if type(p) is A.NamePattern and p.name != "_":
                if p.name in seen:
                    self.report("E2010", f"`{p.name}` is bound twice in this pattern", p.span)
                seen.add(p.name)
            self.bind(p, POISON if v is POISON else v.items[i])

    # -- functions and modules --------------------------------------------------------------------
    def function(self, fn: A.FnDef, scope: Scope) -> Function | None:
        self.start_function(fn.name)
        env: dict[str, Any] = {}
        params: list[Value] = []
        seen: set[str] = set()
        inner = Scope(scope, values_visible=False)
        self.scope, self.frame = inner, Frame(env, ())
        ok = True
        for p in fn.params:
            if p.name in seen:
                self.report("E2010", f"parameter `{p.name}` is declared twice", p.span)
                ok = False
                continue
            seen.add(p.name)
            try:
                if p.type is None:
                    raise self.fail("E2003", f"parameter `{p.name}` needs a type", p.span)
                t = self.type_of(p.type, env, bind=True)
                if isinstance(t, tuple):
                    raise self.fail("E2009", "tuple parameters are not supported", p.type.span,
                                    "pass the elements as separate parameters, or define a `struct`")
                if type(t) is StructType:
                    flat, v = struct_params(self, p.name, t)
                    params.extend(flat)
                    inner.names[p.name] = v
                    continue
            except Reported:
                ok = False
                inner.names[p.name] = POISON
                continue
            v = Value(p.name, t, None)
            params.append(v)
            inner.names[p.name] = v
        names = [v.name for v in params]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            self.report("E2010", f"two parameters of `{fn.name}` are named `{dup}` in the IR (a struct "
                                 f"parameter's fields are named `param_field`)", fn.name_span,
                        "rename one of them")
            ok = False
        self.b.params = params
        for name in sorted({s for p in params for d in p.type.shape if type(d) is DimExpr
                            for s in d.symbols()}):
            self.b.assume(Assumption(self.sym(name), ">=", 1))
        value = self.body(fn, inner, env, None)
        return self.finish(fn.name, value, ok, fn.span)

    def finish(self, name: str, value: Any, ok: bool, off: tuple[int, int]) -> Function | None:
        if value is POISON or not ok:
            return None
        results: list[Value] = []
        try:
            self._flatten(value, results)
        except Reported:
            return None
        b = self.b
        # the span is made when someone reads it (a diagnostic, a printer that shows locations)
        return Function(b.name, list(b.params), list(b.ops), results, list(b.assumptions),
                        span_fn=partial(self.src.span, off))

    def _flatten(self, v: Any, out: list[Value]) -> None:
        tv = type(v)
        if tv is Value:
            out.append(v)
        elif tv is Tup or tv is StructVal:
            for x in v.items:
                self._flatten(x, out)
        elif v is POISON:
            raise Reported()
        elif tv is Lit:
            out.append(self.materialize(v))  # (``tensor``)
        else:
            out.append(self.tensor(v, None, "the result"))

    def main(self, body: Sequence[A.Stmt], result: A.Expr | None, scope: Scope) -> Function | None:
        """The function ``main``: the top-level statements ``body`` (definitions and imports
        excluded) and the program ``result``."""
        self.start_function("main")
        self.scope, self.frame = Scope(scope), Frame({}, ("main",))
        value = self.function_body(self._main_body, body, result)
        return self.finish("main", value, True, self.module.span)

    def _main_body(self, body: Sequence[A.Stmt], result: A.Expr | None) -> Any:
        if body:
            control.run(self, body)
        if self.flow is None and result is not None:
            return self.ev(result)
        return Tup((), self.module.span)


def elaborate(module: A.Module) -> Module:
    """Check and lower a parsed module; raises ``MindError`` with every diagnostic found."""
    return Module(elaborate_functions(module))


def elaborate_functions(module: A.Module) -> list[Function]:
    """``elaborate(module).functions`` (``compile_source`` takes the list, without the Module)."""
    E = Elaborator(module)
    functions: list[Function] = []
    try:
        scope = Scope()
        E.scope = E.module_scope = scope
        stmts = module.stmts
        body = [s for s in stmts if type(s) not in _ITEMS and type(s) is not A.Import] if stmts else []
        has_main = module.result is not None or bool(body)
        if len(body) != len(module.stmts):  # definitions (or imports): elaborate each function
            E.frame = Frame({}, ())
            E.hoist(module.stmts, scope)
            for s in module.stmts:
                ref = scope.names.get(s.name) if type(s) is A.FnDef else None
                if ref is not None and type(ref) is FnRef and ref.node is s:
                    if s.name == "main" and has_main:
                        E.report("E2010", "`fn main` conflicts with the top-level statements, which form `main`",
                                 s.name_span, "rename the function or move the statements into it")
                        continue
                    f = E.function(s, scope)
                    if f is not None:
                        functions.append(f)
        if has_main:
            f = E.main(body, module.result, scope)
            if f is not None:
                functions.append(f)
    except _Abort:
        pass
    except RecursionError:
        E.diags.append(Diagnostic("E1012", "the program nests too deeply", E.span(module.span)))
    if E.diags:
        raise MindError(E.diags, {E.src.file: E.src.text})
    return functions


# -- helpers -------------------------------------------------------------------------------------

_np_scalar = np_scalar
_LITERAL_TYPES = (Lit, ArrLit, LitExpr)
#: Items hoisted in a block: node type -> what the duplicate-definition message calls it.
_ITEMS = {A.FnDef: "function", A.StructDef: "struct", A.ConstDef: "constant"}
#: "tensor.NAME" -> NAME for every builtin but `grad` (which ``Elaborator.call`` treats apart)
_QUALIFIED = {"tensor." + b: b for b in BUILTINS if b != "grad"}


def _int_div(a: int, b: int) -> int:
    """``/`` on integer literals: truncates toward zero, and x / 0 = 0 (as the spec)."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _int_rem(a: int, b: int) -> int:
    """``%`` on integer literals: ``a - b * (a / b)``, the sign of ``a``; x % 0 = 0."""
    return a - b * _int_div(a, b) if b else 0


#: Compile-time arithmetic on two integer literals (exact; loop counters and conditions stay known
#: at compile time) and logic on two bool literals: operator -> (function, kind of the result).
#: Float literals are computed by the ops, in their dtype.
_INT_FOLD: dict[str, tuple[Any, str]] = {
    "+": (operator.add, "int"), "-": (operator.sub, "int"), "*": (operator.mul, "int"),
    "/": (_int_div, "int"), "%": (_int_rem, "int"),
    **{op: (f, "bool") for op, f in _PY_CMP.items()},
}
_BOOL_FOLD: dict[str, Any] = {
    "&&": lambda a, b: a and b, "||": lambda a, b: a or b, "==": operator.eq, "!=": operator.ne,
}


def _fold_literals(op: str, a: Lit, b: Lit, off: tuple[int, int]) -> Lit | None:
    """``a op b`` on two literals where it is computed at compile time (``_INT_FOLD``,
    ``_BOOL_FOLD``); ``None`` for anything else."""
    ka, kb = a.kind, b.kind
    if ka == kb == "int":
        rule = _INT_FOLD.get(op)
        if rule is not None:
            return Lit(rule[0](a.value, b.value), rule[1], off)
    elif ka == kb == "bool":
        f = _BOOL_FOLD.get(op)
        if f is not None:
            return Lit(f(a.value, b.value), "bool", off)
    return None


#: The dtype a literal of each kind has where nothing else gives it one.
_DEFAULT_DTYPE: dict[str, DType] = {"int": DType.I32, "float": DType.F32, "bool": DType.BOOL}


def _default_dtype(kind: str) -> DType:
    return _DEFAULT_DTYPE[kind]


def _lit_text(lit: Lit) -> str:
    if lit.text is not None:
        return lit.text
    if lit.kind == "bool":
        return "true" if lit.value else "false"
    return str(lit.value)


def _fmt(shape: Sequence[Any]) -> str:
    return "[" + ", ".join(format_dim(d) for d in shape) + "]"


def _fmt_type(t: TensorType) -> str:
    if t.shape is None:
        return f"{t.dtype.value}[...]"
    dims = []
    for d in t.shape:
        if d is None:
            dims.append("?")
        elif type(d) is tuple:
            dims.append(d[1])
        else:
            dims.append(format_dim(d))
    return f"{t.dtype.value}[{', '.join(dims)}]"


def _alternatives(cond: Unknown) -> str:
    text = cond.text
    if text.startswith("(") and ") or (" in text and text.endswith(")"):
        return " or ".join(p.strip("()") for p in text.split(") or ("))
    return text


def _sig(fn: A.FnDef) -> str:
    return f"fn {fn.name}({', '.join(p.name for p in fn.params)})"


_suggest = suggest


def _result_span(blk: A.Block) -> tuple[int, int]:
    if blk.tail is not None:
        return blk.tail.span
    for s in reversed(blk.stmts):
        if type(s) is A.Return:
            return s.value.span if s.value is not None else s.span
    return blk.span


#: Expression nodes elaborated outside ``Elaborator.ev``'s inline cases.
_EXPR_RULES = {A.If: control.if_expr, A.BlockExpr: Elaborator.block_expr, A.Cast: Elaborator.cast,
               A.Attribute: Elaborator.attribute, A.Index: index_expr, A.StructLit: struct_lit}

__all__ = ["elaborate", "Elaborator", "MAX_OPS"]
