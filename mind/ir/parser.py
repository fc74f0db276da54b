"""Parser of the Core IR text (grammar: ``spec/ir.ebnf``).

IR text is untrusted input: the parser never evaluates anything it reads, bounds every resource
(size, op count, rank, nesting, literal size, the size of a dimension expression and of every
integer), and reports malformed input as coded diagnostics with ``file:line:col`` spans.  Numbers
are ASCII digits only.  Every entry point (``mind ir``, ``mind run``, ``mind verify``) parses with
this one parser; only the ``Limits`` differ.  Semantic checks (def-before-use, constraints, declared
result types) are the verifier's job.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

from mind.diagnostics import Diagnostic, MindError, Span
from mind.ir.core import MAX_CONST_ELEMENTS, RELATIONS, Assumption, Function, Module, Operation, Value
from mind.spec.dims import Dim, DimExpr, INT_ARITH, sym
from mind.spec.dtypes import DType, parse_dtype
from mind.spec.ops import OPS, TensorType


@dataclass(frozen=True)
class Limits:
    """Resource bounds for untrusted IR text."""

    max_bytes: int = 64 * 1024 * 1024
    max_ops: int = 1_000_000
    max_functions: int = 10_000
    max_rank: int = 16
    max_nesting: int = 64
    max_dim: int = 1 << 48
    max_const_elements: int = MAX_CONST_ELEMENTS
    # A product like ``(A + B + 1) * (A + B + 1) * ...`` expands to a polynomial whose size grows
    # exponentially in the text, and coefficients like ``2^48 * 2^48 * ...`` without bound: both
    # are refused (E1012) before they are built.
    max_dim_terms: int = 256
    max_coef: int = 1 << 62


#: Integer literals longer than this are refused before conversion (Python's ``int`` of a string
#: is quadratic, and refuses over 4,300 digits): every limit above fits in far fewer digits.
MAX_INT_DIGITS = 40


DEFAULT_LIMITS = Limits()

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\n]+|//[^\n]*)
  | (?P<value>%[A-Za-z0-9_.]+)
  | (?P<func>@[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>->|>=|<=|==|[()\[\]{},:=+\-*<>])
""", re.VERBOSE | re.ASCII)


@dataclass(slots=True)
class Tok:
    kind: str
    text: str
    start: int
    end: int


class IRParser:
    def __init__(self, text: str, filename: str = "<ir>", limits: Limits = DEFAULT_LIMITS):
        self.text = text
        self.filename = filename
        self._line_starts: list[int] | None = None
        self.limits = limits
        self.toks = self._tokenize()
        self.pos = 0
        self.n_ops = 0

    # errors -------------------------------------------------------------------------------------
    def _position(self, offset: int) -> tuple[int, int]:
        """1-based line and column by binary search in a line-start table (linear-time parsing)."""
        if self._line_starts is None:
            starts = [0]
            find = self.text.find
            i = find("\n")
            while i >= 0:
                starts.append(i + 1)
                i = find("\n", i + 1)
            self._line_starts = starts
        line = bisect.bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def span(self, start: int, end: int) -> Span:
        line, col = self._position(start)
        eline, ecol = self._position(max(start, end))
        return Span(self.filename, line, col, eline, ecol)

    def fail(self, code: str, message: str, start: int, end: int | None = None,
             help: str | None = None, label: str | None = None) -> MindError:
        notes: tuple[str, ...] = ()
        if label is not None:
            op, _, c = label.partition(".")
            notes = (f"{label}: {OPS[op].constraint(c).text}",)
        diag = Diagnostic(code, message, self.span(start, end if end is not None else start + 1),
                          label=label, help=help, notes=notes)
        return MindError([diag], {self.filename: self.text})

    # lexing -------------------------------------------------------------------------------------
    def _tokenize(self) -> list[Tok]:
        text = self.text
        if len(text) > self.limits.max_bytes:
            raise self.fail("E1012", f"IR text is {len(text)} characters, over the limit of "
                                     f"{self.limits.max_bytes}", 0)
        toks: list[Tok] = []
        pos, n = 0, len(text)
        match = _TOKEN.match
        while pos < n:
            m = match(text, pos)
            if m is None:
                ch = text[pos]
                raise self.fail("E1002", f"invalid character {ch!r} in IR text", pos,
                                help="IR text uses ASCII identifiers, numbers and punctuation")
            kind = m.lastgroup
            if kind != "ws":
                toks.append(Tok(kind, m.group(), pos, m.end()))
            pos = m.end()
        toks.append(Tok("eof", "", n, n))
        return toks

    # token helpers ------------------------------------------------------------------------------
    @property
    def tok(self) -> Tok:
        return self.toks[self.pos]

    def next(self) -> Tok:
        t = self.toks[self.pos]
        if t.kind != "eof":
            self.pos += 1
        return t

    def at(self, text: str) -> bool:
        t = self.tok
        return t.text == text and t.kind in ("punct", "ident")

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.pos += 1
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> Tok:
        if self.at(text):
            return self.next()
        raise self._unexpected(f"`{text}`" if what is None else what)

    def expect_kind(self, kind: str, what: str) -> Tok:
        if self.tok.kind == kind:
            return self.next()
        raise self._unexpected(what)

    def _unexpected(self, expected: str) -> MindError:
        t = self.tok
        found = "end of input" if t.kind == "eof" else f"`{t.text}`"
        return self.fail("E1010", f"expected {expected}, found {found}", t.start, max(t.end, t.start + 1))

    # grammar ------------------------------------------------------------------------------------
    def parse_module(self) -> Module:
        funcs: list[Function] = []
        while self.tok.kind != "eof":
            if len(funcs) >= self.limits.max_functions:
                raise self.fail("E1012", "too many functions", self.tok.start)
            funcs.append(self.parse_function())
        return Module(funcs)

    def parse_function(self) -> Function:
        start = self.expect("func", "`func`").start
        name = self.expect_kind("func", "a function name like `@main`").text[1:]
        self.expect("(")
        params: list[Value] = []
        if not self.at(")"):
            while True:
                vt = self.expect_kind("value", "a parameter like `%x`")
                self.expect(":")
                ty = self.parse_type()
                params.append(Value(vt.text[1:], ty, self.span(vt.start, vt.end)))
                if not self.accept(","):
                    break
        self.expect(")", "`)` or `,`")
        self.expect("->")
        self.expect("(")
        declared: list[tuple[TensorType, Tok]] = []
        if not self.at(")"):
            while True:
                t0 = self.tok
                declared.append((self.parse_type(), t0))
                if not self.accept(","):
                    break
        self.expect(")", "`)` or `,`")
        assumptions: list[Assumption] = []
        if self.accept("where"):
            while True:
                assumptions.append(self.parse_assumption())
                if not self.accept(","):
                    break
        self.expect("{")
        lines: list[tuple[Tok, str, list[Tok], dict[str, tuple[Any, Tok]], TensorType, int]] = []
        while not self.at("return"):
            if self.tok.kind == "eof" or self.at("}"):
                raise self._unexpected("an operation or `return`")
            lines.append(self.parse_op_line())
        self.expect("return")
        ret_toks: list[Tok] = []
        if self.tok.kind == "value":
            ret_toks.append(self.next())
            while self.accept(","):
                ret_toks.append(self.expect_kind("value", "a value like `%0`"))
        end = self.expect("}", "`}` after `return`").end
        return self._build(name, params, declared, assumptions, lines, ret_toks, start, end)

    def _build(self, name, params, declared, assumptions, lines, ret_toks, start, end) -> Function:
        """Resolve names to values.  Unknown names are errors here; order is the verifier's."""
        defs: dict[str, Value] = {}
        diags: list[Diagnostic] = []
        for p in params:
            if p.name in defs:
                diags.append(Diagnostic("E4002", f"value %{p.name} is defined more than once", p.span))
            defs.setdefault(p.name, p)
        results: list[Value] = []
        for res_tok, _op, _ops, _attrs, ty, _s in lines:
            v = Value(res_tok.text[1:], ty, self.span(res_tok.start, res_tok.end))
            results.append(v)
            if v.name in defs:
                diags.append(Diagnostic("E4002", f"value %{v.name} is defined more than once", v.span,
                                        help="every SSA value is assigned exactly once"))
            else:
                defs[v.name] = v

        def resolve(t: Tok) -> Value | None:
            v = defs.get(t.text[1:])
            if v is None:
                diags.append(Diagnostic("E4001", f"use of undefined value {t.text}",
                                        self.span(t.start, t.end)))
            return v

        ops: list[Operation] = []
        for (res_tok, opname, operand_toks, attrs, ty, (op_start, op_end)), result in zip(lines, results):
            operands = [resolve(t) for t in operand_toks]
            if any(o is None for o in operands):
                continue
            values = {k: v for k, (v, _t) in attrs.items()}
            ops.append(Operation(opname, tuple(operands), values, result,
                                 self.span(op_start, op_end)))
        rets = [resolve(t) for t in ret_toks]
        if len(declared) != len(ret_toks):
            diags.append(Diagnostic("E4010", f"function @{name} declares {len(declared)} results but "
                                             f"returns {len(ret_toks)}", self.span(start, end)))
        if diags:
            raise MindError(diags, {self.filename: self.text})
        fn = Function(name, params, ops, [r for r in rets if r is not None], assumptions, self.span(start, end))
        if any(dty != r.type for (dty, _t), r in zip(declared, rets)):
            # written differently from the returned values' types: the verifier proves them equal
            # under the premises (``f32[max(B, 3)]`` is ``f32[B]`` where B >= 3)
            fn.result_decls = tuple((dty, self.span(dtok.start, dtok.end)) for dty, dtok in declared)
        return fn

    def parse_op_line(self) -> tuple:
        res = self.expect_kind("value", "a result like `%0` or `return`")
        self.n_ops += 1
        if self.n_ops > self.limits.max_ops:
            raise self.fail("E1012", f"more than {self.limits.max_ops} operations", res.start)
        self.expect("=")
        op_tok = self.expect_kind("ident", "an op name")
        opdef = OPS.get(op_tok.text)
        if opdef is None:
            raise self.fail("E4006", f"unknown op `{op_tok.text}`", op_tok.start, op_tok.end,
                            help="Core IR has exactly these ops: " + ", ".join(OPS))
        operands: list[Tok] = []
        if self.accept("("):  # optional for ops without operands: `%0 = const {value = 1} : i32[]`
            if not self.at(")"):
                while True:
                    operands.append(self.expect_kind("value", "an operand like `%x`"))
                    if not self.accept(","):
                        break
            self.expect(")", "`)` or `,`")
        elif opdef.operands:
            raise self._unexpected("`(`")
        raw_attrs: dict[str, tuple[Any, Tok]] = {}
        kinds = {a.name: a for a in opdef.attrs}
        if self.accept("{"):
            while True:
                name_tok = self.expect_kind("ident", "an attribute name")
                adef = kinds.get(name_tok.text)
                if adef is None:
                    raise self.fail("E4008", f"`{opdef.name}` has no attribute `{name_tok.text}`",
                                    name_tok.start, name_tok.end,
                                    help="attributes of " + opdef.name + ": " +
                                         (", ".join(kinds) if kinds else "none"))
                if name_tok.text in raw_attrs:
                    raise self.fail("E4008", f"attribute `{name_tok.text}` is given twice",
                                    name_tok.start, name_tok.end)
                self.expect("=")
                raw_attrs[name_tok.text] = (self.parse_attr_value(adef), name_tok)
                if not self.accept(","):
                    break
            self.expect("}", "`}` or `,`")
        self.expect(":")
        ty = self.parse_type()
        attrs: dict[str, tuple[Any, Tok]] = {}
        for name, (raw, tok) in raw_attrs.items():
            if kinds[name].kind == "tensor":
                raw = self._tensor_value(raw, ty, tok)
            attrs[name] = (raw, tok)
        return (res, opdef.name, operands, attrs, ty, (res.start, self.toks[self.pos - 1].end))

    # types and dims -----------------------------------------------------------------------------
    def parse_type(self) -> TensorType:
        t = self.expect_kind("ident", "a type like `f32[2, 3]`")
        dtype = parse_dtype(t.text)
        if dtype is None:
            raise self.fail("E2005", f"unknown dtype `{t.text}`", t.start, t.end,
                            help="dtypes are bool, i32, i64, f32, f64")
        self.expect("[", "`[` after the dtype")
        dims: list[Dim] = []
        if not self.at("]"):
            while True:
                d_start = self.tok.start
                d = self.parse_dim()
                if isinstance(d, int) and d < 0:
                    raise self.fail("E3006", f"negative dimension {d}", d_start, self.toks[self.pos - 1].end)
                dims.append(d)
                if not self.accept(","):
                    break
        close = self.expect("]", "`]` or `,`")
        if len(dims) > self.limits.max_rank:
            raise self.fail("E1012", f"rank {len(dims)} is over the limit of {self.limits.max_rank}",
                            t.start, close.end)
        return TensorType(dtype, tuple(dims))

    def parse_dim(self, depth: int = 0) -> Dim:
        if depth > self.limits.max_nesting:
            raise self.fail("E1012", "dimension expression nested too deeply", self.tok.start)
        start = self.tok.start
        value = self._dim_term(depth)
        while self.at("+") or self.at("-"):
            op = self.next().text
            rhs = self._dim_term(depth)
            value = value + rhs if op == "+" else value - rhs
            self._check_dim_size(value, start)
        return value

    def _dim_term(self, depth: int) -> Dim:
        start = self.tok.start
        value = self._dim_unary(depth)
        while self.accept("*"):
            rhs = self._dim_unary(depth)
            if _nterms(value) * _nterms(rhs) > self.limits.max_dim_terms:  # before the work
                raise self._too_large(start)
            value = value * rhs
            self._check_dim_size(value, start)
        return value

    def _check_dim_size(self, d: Dim, start: int) -> None:
        if _nterms(d) > self.limits.max_dim_terms or _maxcoef(d) > self.limits.max_coef:
            raise self._too_large(start)

    def _too_large(self, start: int) -> MindError:
        return self.fail("E1012", f"dimension expression is too large (over {self.limits.max_dim_terms} terms "
                                  f"or a coefficient over {self.limits.max_coef})", start,
                         self.toks[self.pos - 1].end)

    def _dim_unary(self, depth: int) -> Dim:
        if self.accept("-"):
            if depth >= self.limits.max_nesting:
                raise self.fail("E1012", "dimension expression nested too deeply", self.tok.start)
            return 0 - self._dim_unary(depth + 1)
        t = self.tok
        if t.kind == "number":
            self.next()
            if not t.text.isdigit():
                raise self.fail("E1005", f"dimension `{t.text}` is not an integer", t.start, t.end)
            v = self._int_literal(t, "dimension")
            if v > self.limits.max_dim:
                raise self.fail("E1012", f"dimension {v} is over the limit of {self.limits.max_dim}",
                                t.start, t.end)
            return v
        if t.kind == "ident":
            self.next()
            if t.text in ("floordiv", "max", "min") and self.at("("):
                self.next()
                a = self.parse_dim(depth + 1)
                self.expect(",")
                b = self.parse_dim(depth + 1)
                self.expect(")")
                if t.text == "floordiv":
                    if not (isinstance(b, int) and b > 0):
                        raise self.fail("E3006", "floordiv needs a positive constant divisor", t.start)
                    return INT_ARITH.floordiv(a, b)
                return INT_ARITH.max(a, b) if t.text == "max" else INT_ARITH.min(a, b)
            return sym(t.text)
        if self.accept("("):
            v = self.parse_dim(depth + 1)
            self.expect(")")
            return v
        raise self._unexpected("a dimension (integer or symbol)")

    def parse_assumption(self) -> Assumption:
        lhs = self.parse_dim()
        t = self.tok
        if t.text not in RELATIONS:
            raise self._unexpected("one of " + ", ".join(f"`{r}`" for r in RELATIONS))
        self.next()
        return Assumption(lhs, t.text, self.parse_dim())

    # attributes ---------------------------------------------------------------------------------
    def parse_attr_value(self, adef) -> Any:
        kind = adef.kind
        t = self.tok
        if kind == "int":
            return self._signed_int()
        if kind == "bool":
            if self.accept("true"):
                return True
            if self.accept("false"):
                return False
            raise self._unexpected("`true` or `false`")
        if kind == "enum":
            tok = self.expect_kind("ident", "one of " + ", ".join(adef.choices))
            if tok.text not in adef.choices:
                raise self.fail("E4008", f"`{tok.text}` is not a valid {adef.name}", tok.start, tok.end,
                                help="choose one of " + ", ".join(adef.choices))
            return tok.text
        if kind == "dtype":
            tok = self.expect_kind("ident", "a dtype")
            dt = parse_dtype(tok.text)
            if dt is None:
                raise self.fail("E2005", f"unknown dtype `{tok.text}`", tok.start, tok.end)
            return dt
        if kind == "ints":
            return tuple(self._list(self._signed_int))
        if kind == "dims":
            return tuple(self._list(self.parse_dim))
        if kind == "pairs":
            def pair() -> tuple[int, int]:
                self.expect("[")
                a = self._signed_int()
                self.expect(",")
                b = self._signed_int()
                self.expect("]")
                return (a, b)
            return tuple(self._list(pair))
        if kind == "tensor":
            return (self._literal(0), t)
        raise AssertionError(kind)

    def _list(self, item) -> list:
        self.expect("[", "`[`")
        out = []
        if not self.at("]"):
            while True:
                out.append(item())
                if not self.accept(","):
                    break
        self.expect("]", "`]` or `,`")
        return out

    def _int_literal(self, t: Tok, what: str) -> int:
        """The value of an all-digit token, refusing (E1012) one too long to be under any limit."""
        if len(t.text) > MAX_INT_DIGITS:
            raise self.fail("E1012", f"{what} `{t.text[:20]}...` has {len(t.text)} digits, over the limit of "
                                     f"{MAX_INT_DIGITS}", t.start, t.end)
        return int(t.text)

    def _signed_int(self) -> int:
        neg = self.accept("-")
        t = self.expect_kind("number", "an integer")
        if not t.text.isdigit():
            raise self.fail("E1005", f"`{t.text}` is not an integer", t.start, t.end)
        v = self._int_literal(t, "integer")
        if v > self.limits.max_dim:
            raise self.fail("E1012", f"integer {v} is over the limit of {self.limits.max_dim}", t.start, t.end)
        return -v if neg else v

    def _literal(self, depth: int) -> Any:
        """A raw literal: scalar token text, ('splat', scalar) or a nested list."""
        if depth > self.limits.max_nesting:
            raise self.fail("E1012", "literal nested too deeply", self.tok.start)
        if self.at("splat"):
            self.next()
            self.expect("(")
            v = self._scalar()
            self.expect(")")
            return ("splat", v)
        if self.accept("["):
            items = []
            if not self.at("]"):
                while True:
                    items.append(self._literal(depth + 1))
                    if not self.accept(","):
                        break
            self.expect("]", "`]` or `,`")
            return items
        return self._scalar()

    def _scalar(self) -> tuple[str, int]:
        neg = self.accept("-")
        t = self.tok
        if t.kind == "number" or (t.kind == "ident" and t.text in ("nan", "inf", "true", "false")):
            self.next()
            return (("-" if neg else "") + t.text, t.start)
        raise self._unexpected("a number, `nan`, `inf`, `true` or `false`")

    def _tensor_value(self, raw: tuple[Any, Tok], ty: TensorType, tok: Tok) -> Any:
        import numpy as np

        lit, start_tok = raw
        if any(not isinstance(d, int) for d in ty.shape):
            raise self.fail("E4005", "a constant must have a static shape", start_tok.start, start_tok.end, label="const.C1")
        count = 1
        for d in ty.shape:
            count *= d
        if count > self.limits.max_const_elements:
            raise self.fail("E1012", f"constant of {count} elements is over the limit", start_tok.start)
        if isinstance(lit, tuple) and lit and lit[0] == "splat":
            return np.broadcast_to(np.asarray(self._convert_scalar(lit[1], ty.dtype), ty.dtype.numpy), ty.shape)
        flat: list[Any] = []
        shape = self._literal_shape(lit, flat, start_tok)
        if tuple(shape) != tuple(ty.shape) and not (count == 0 and not flat):
            raise self.fail("E4005", f"constant literal has shape {list(shape)} but its type is {ty}",
                            start_tok.start, start_tok.end, label="const.C1")
        values = [self._convert_scalar(x, ty.dtype) for x in flat]
        return np.array(values, dtype=ty.dtype.numpy).reshape(ty.shape)

    def _literal_shape(self, lit: Any, flat: list, tok: Tok) -> list[int]:
        if isinstance(lit, list):
            shapes = [self._literal_shape(x, flat, tok) for x in lit]
            if any(s != shapes[0] for s in shapes):
                raise self.fail("E4005", "constant literal is ragged", tok.start, tok.end, label="const.C1")
            return [len(lit)] + (shapes[0] if shapes else [])
        if isinstance(lit, tuple) and lit and lit[0] == "splat":
            raise self.fail("E4005", "`splat` is only allowed as the whole value", tok.start, tok.end, label="const.C1")
        flat.append(lit)
        return []

    def _convert_scalar(self, item: tuple[str, int], dtype: DType) -> Any:
        import numpy as np

        text, start = item
        end = start + len(text.lstrip("-"))
        body = text.lstrip("-")
        if dtype is DType.BOOL:
            if body not in ("true", "false") or text.startswith("-"):
                raise self.fail("E4005", f"`{text}` is not a bool literal", start, end, label="const.C1")
            return body == "true"
        if body in ("true", "false"):
            raise self.fail("E4005", f"`{text}` is not a {dtype.value} literal", start, end, label="const.C1")
        if dtype.is_int:
            if not body.isdigit():
                raise self.fail("E4005", f"`{text}` is not an integer literal", start, end, label="const.C1")
            if len(body) > MAX_INT_DIGITS:
                raise self.fail("E4005", f"`{text[:20]}...` does not fit in {dtype.value}", start, end,
                                label="const.C1")
            v = int(text)
            if not dtype.int_min <= v <= dtype.int_max:
                raise self.fail("E4005", f"{v} does not fit in {dtype.value}", start, end, label="const.C1")
            return v
        with np.errstate(over="ignore"):
            return dtype.numpy.type(float(text))


def _nterms(d: Dim) -> int:
    return len(d.terms) if isinstance(d, DimExpr) else 1


def _maxcoef(d: Dim) -> int:
    if isinstance(d, DimExpr):
        return max(abs(c) for c in d.terms.values())
    return max(abs(d), 1)


def parse_module(text: str, filename: str = "<ir>", limits: Limits = DEFAULT_LIMITS) -> Module:
    """Parse IR text into a module; raises ``MindError`` on malformed input."""
    return IRParser(text, filename, limits).parse_module()


def parse_file(path: str, limits: Limits = DEFAULT_LIMITS) -> Module:
    from mind.driver_io import read_source

    return parse_module(read_source(path), path, limits)
