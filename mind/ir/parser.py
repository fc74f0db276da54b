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
from typing import Any

from mind.diagnostics import Diagnostic, MindError, Span
from mind.ir.core import MAX_CONST_ELEMENTS, RELATIONS, Assumption, Function, Module, Operation, Value
from mind.spec.dims import Dim, DimExpr, INT_ARITH, sym
from mind.spec.dtypes import DType, parse_dtype
from mind.spec.ops import OPS, TensorType
from mind.spec.record import FrozenRecord


class Limits(FrozenRecord):
    """Resource bounds for untrusted IR text (a frozen record: importing the parser builds no
    dataclass, which matters on the warm start that reads the frontend cache).

    A product like ``(A + B + 1) * (A + B + 1) * ...`` expands to a polynomial whose size grows
    exponentially in the text, and coefficients like ``2^48 * 2^48 * ...`` without bound: both are
    refused (E1012) before they are built (``max_dim_terms``, ``max_coef``)."""

    __slots__ = ("max_bytes", "max_ops", "max_functions", "max_rank", "max_nesting", "max_dim",
                 "max_const_elements", "max_dim_terms", "max_coef")

    def __init__(self, max_bytes: int = 64 * 1024 * 1024, max_ops: int = 1_000_000, max_functions: int = 10_000,
                 max_rank: int = 16, max_nesting: int = 64, max_dim: int = 1 << 48,
                 max_const_elements: int = MAX_CONST_ELEMENTS, max_dim_terms: int = 256,
                 max_coef: int = 1 << 62) -> None:
        for name, value in zip(self.__slots__, (max_bytes, max_ops, max_functions, max_rank, max_nesting,
                                                max_dim, max_const_elements, max_dim_terms, max_coef)):
            object.__setattr__(self, name, value)


#: Integer literals longer than this are refused before conversion (Python's ``int`` of a string
#: is quadratic, and refuses over 4,300 digits): every limit above fits in far fewer digits.
MAX_INT_DIGITS = 40

DEFAULT_LIMITS = Limits()

_TOKEN_CLASSES = (
    ("value", r"%[A-Za-z0-9_.]+"),
    ("func", r"@[A-Za-z_][A-Za-z0-9_.]*"),
    ("number", r"(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?"),
    ("ident", r"[A-Za-z_][A-Za-z0-9_]*"),
    ("punct", r"->|>=|<=|==|[()\[\]{},:=+\-*<>]"),
    ("invalid", r"[^ \t\r\n]"),  # any other character
    ("eof", r"\Z"),  # trailing whitespace and comments: searching on from inside them would find tokens
)
_WS = r"(?:[ \t\r\n]+|//[^\n]*)*+"  # possessive: a comment is never given back to match a token
_TOKEN_PATTERN = _WS + "(?:\n    " + "\n  | ".join(f"(?P<{k}>{p})" for k, p in _TOKEN_CLASSES) + "\n)"
"""One token after any whitespace and comments, in a group named after its kind (compiled on first
use, ``_token_re``: only positions need it)."""
_COMPILED: list[re.Pattern[str]] = []


def _token_re() -> re.Pattern[str]:
    if not _COMPILED:
        _COMPILED.append(re.compile(_TOKEN_PATTERN, re.VERBOSE))
    return _COMPILED[0]

_TOKEN_TEXT = re.compile(_WS + "(" + "|".join(p for _, p in _TOKEN_CLASSES) + ")", re.VERBOSE)
"""The same tokens as plain texts, for ``findall`` (no match object per token: ~2.5x faster)."""

_KIND_OF_FIRST = {**{c: "ident" for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"},
                  **{c: "number" for c in "0123456789."}, **{c: "punct" for c in "()[]{},:=+-*<>"},
                  "%": "value", "@": "func"}
"""A token's kind from its first character (characters missing here are ``invalid``, and so is a lone
``%``, ``@`` or ``.``: no other class matches them)."""


class Tok:
    """One token with its position (``IRParser.tok``; the parser itself keeps a list of texts)."""

    __slots__ = ("kind", "text", "start", "end")

    def __init__(self, kind: str, text: str, start: int, end: int) -> None:
        self.kind, self.text, self.start, self.end = kind, text, start, end


class IRParser:
    """Recursive descent over a token list.

    Tokens are a list of their texts, ``texts`` (no object per token; a token's kind follows from
    its first character, ``kind_of``; the last one is ``""``, the end), and their start offsets
    ``_starts`` are computed only where a position is needed: always with ``spans=True``
    (every value, op and function gets its source span), only for a diagnostic with ``spans=False``
    (text whose positions nobody will see, like the frontend cache's entries: train_step's module
    parses in 0.8 instead of 1.3 ms)."""

    def __init__(self, text: str, filename: str = "<ir>", limits: Limits = DEFAULT_LIMITS, *,
                 spans: bool = True):
        self.text = text
        self.filename = filename
        self._line_starts: list[int] | None = None
        self.limits = limits
        self.spans = spans
        self._starts: list[int] | None = None
        self._types: dict[tuple[str, ...], TensorType] = {}
        self._scan()
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

    def _fail_at(self, code: str, message: str, i: int, j: int | None = None, **kw: Any) -> MindError:
        """``fail`` at tokens ``i`` to ``j`` (default ``i``)."""
        return self.fail(code, message, self.start_of(i), self.end_of(i if j is None else j), **kw)

    def _span_of(self, i: int, j: int) -> Span | None:
        """The span of tokens ``i`` to ``j`` for an IR object (None with ``spans=False``)."""
        return self.span(self.start_of(i), self.end_of(j)) if self.spans else None

    # lexing -------------------------------------------------------------------------------------
    def _tokenize(self) -> list[Tok]:
        """Every token with its position (the last one ``eof``); E1002 at the first invalid character."""
        texts, kinds, starts = self._positioned_tokens()
        return [Tok(k, t, s, s + len(t)) for k, t, s in zip(kinds, texts, starts)]

    def _positioned_tokens(self) -> tuple[list[str], list[str], list[int]]:
        """Texts, kinds and start offsets of every token, the last one ``eof``; E1002 at the first
        invalid character."""
        text = self.text
        self._check_size()
        texts: list[str] = []
        kinds: list[str] = []
        starts: list[int] = []
        for m in _token_re().finditer(text):
            kind = m.lastgroup
            if kind == "eof":
                break
            start = m.start(kind)
            if kind == "invalid":
                raise self.fail("E1002", f"invalid character {text[start]!r} in IR text", start,
                                help="IR text uses ASCII identifiers, numbers and punctuation")
            texts.append(m.group(kind))
            kinds.append(kind)  # type: ignore[arg-type]
            starts.append(start)
        texts.append("")
        kinds.append("eof")
        starts.append(len(text))
        return texts, kinds, starts

    def _check_size(self) -> None:
        if len(self.text) > self.limits.max_bytes:
            raise self.fail("E1012", f"IR text is {len(self.text)} characters, over the limit of "
                                     f"{self.limits.max_bytes}", 0)

    def _scan(self) -> None:
        """Fill ``texts`` (and ``_starts`` with ``spans``)."""
        if self.spans:
            self.texts, _, self._starts = self._positioned_tokens()
            return
        self._check_size()
        texts = _TOKEN_TEXT.findall(self.text)
        while texts and texts[-1] == "":  # the end of the text (see ``_TOKEN_CLASSES``)
            texts.pop()
        if any(t[0] not in _KIND_OF_FIRST or t in ("%", "@", ".") for t in set(texts)):
            self._positioned_tokens()  # raises E1002 at the first invalid character
        texts.append("")
        self.texts = texts

    def kind_of(self, i: int) -> str:
        """The kind of token ``i`` (``eof`` for the end)."""
        text = self.texts[i]
        return _KIND_OF_FIRST[text[0]] if text else "eof"

    def start_of(self, i: int) -> int:
        """The offset where token ``i`` starts."""
        if self._starts is None:
            self._starts = self._positioned_tokens()[2]
        return self._starts[i]

    def end_of(self, i: int) -> int:
        return self.start_of(i) + len(self.texts[i])

    # token helpers ------------------------------------------------------------------------------
    @property
    def tok(self) -> Tok:
        """The current token as an object (for subclasses; the parser itself reads the lists)."""
        i = self.pos
        return Tok(self.kind_of(i), self.texts[i], self.start_of(i), self.end_of(i))

    def next(self) -> Tok:
        t = self.tok
        if t.kind != "eof":
            self.pos += 1
        return t

    def at(self, text: str) -> bool:
        """Whether the current token is the punctuation or keyword ``text`` (no token of another kind
        can have such a text)."""
        return self.texts[self.pos] == text

    def accept(self, text: str) -> bool:
        if self.texts[self.pos] == text:
            self.pos += 1
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> int:
        """Consume the punctuation or keyword ``text``; its token index."""
        i = self.pos
        if self.texts[i] == text:
            self.pos = i + 1
            return i
        raise self._unexpected(f"`{text}`" if what is None else what)

    def expect_kind(self, kind: str, what: str) -> int:
        """Consume a token of ``kind``; its token index."""
        i = self.pos
        if self.kind_of(i) == kind:
            self.pos = i + 1
            return i
        raise self._unexpected(what)

    def _unexpected(self, expected: str) -> MindError:
        i = self.pos
        found = "end of input" if not self.texts[i] else f"`{self.texts[i]}`"
        start = self.start_of(i)
        return self.fail("E1010", f"expected {expected}, found {found}", start, max(self.end_of(i), start + 1))

    # grammar ------------------------------------------------------------------------------------
    def parse_module(self) -> Module:
        funcs: list[Function] = []
        while self.texts[self.pos]:
            if len(funcs) >= self.limits.max_functions:
                raise self.fail("E1012", "too many functions", self.start_of(self.pos))
            funcs.append(self.parse_function())
        return Module(funcs)

    def parse_function(self) -> Function:
        start = self.expect("func", "`func`")
        name = self.texts[self.expect_kind("func", "a function name like `@main`")][1:]
        self.expect("(")
        params: list[Value] = []
        param_toks: list[int] = []
        if not self.at(")"):
            while True:
                vt = self.expect_kind("value", "a parameter like `%x`")
                self.expect(":")
                ty = self.parse_type()
                params.append(Value(self.texts[vt][1:], ty, self._span_of(vt, vt)))
                param_toks.append(vt)
                if not self.accept(","):
                    break
        self.expect(")", "`)` or `,`")
        self.expect("->")
        self.expect("(")
        declared: list[tuple[TensorType, int, int]] = []
        if not self.at(")"):
            while True:
                t0 = self.pos
                declared.append((self.parse_type(), t0, self.pos - 1))
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
        lines: list[tuple[int, str, list[int], dict[str, tuple[Any, int]], TensorType, int]] = []
        texts = self.texts
        while texts[self.pos] != "return":
            if not texts[self.pos] or texts[self.pos] == "}":
                raise self._unexpected("an operation or `return`")
            lines.append(self.parse_op_line())
        self.pos += 1
        ret_toks: list[int] = []
        if texts[self.pos][:1] == "%":
            ret_toks.append(self.pos)
            self.pos += 1
            while self.accept(","):
                ret_toks.append(self.expect_kind("value", "a value like `%0`"))
        end = self.expect("}", "`}` after `return`")
        return self._build(name, params, param_toks, declared, assumptions, lines, ret_toks, start, end)

    def _build(self, name, params, param_toks, declared, assumptions, lines, ret_toks, start, end) -> Function:
        """Resolve names to values.  Unknown names are errors here; order is the verifier's."""
        defs: dict[str, Value] = {}
        diags: list[Diagnostic] = []
        texts = self.texts
        for p, t in zip(params, param_toks):
            if p.name in defs:
                diags.append(Diagnostic("E4002", f"value %{p.name} is defined more than once", self._error_span(t, t)))
            defs.setdefault(p.name, p)
        results: list[Value] = []
        for res_tok, _op, _ops, _attrs, ty, _end in lines:
            v = Value(texts[res_tok][1:], ty, self._span_of(res_tok, res_tok))
            results.append(v)
            if v.name in defs:
                diags.append(Diagnostic("E4002", f"value %{v.name} is defined more than once",
                                        self._error_span(res_tok, res_tok),
                                        help="every SSA value is assigned exactly once"))
            else:
                defs[v.name] = v

        def resolve(t: int) -> Value | None:
            v = defs.get(texts[t][1:])
            if v is None:
                diags.append(Diagnostic("E4001", f"use of undefined value {texts[t]}", self._error_span(t, t)))
            return v

        ops: list[Operation] = []
        for (res_tok, opname, operand_toks, attrs, _ty, op_end), result in zip(lines, results):
            operands = [resolve(t) for t in operand_toks]
            if None in operands:
                continue
            values = {k: v for k, (v, _t) in attrs.items()}
            ops.append(Operation(opname, tuple(operands), values, result,  # type: ignore[arg-type]
                                 self._span_of(res_tok, op_end)))
        rets = [resolve(t) for t in ret_toks]
        if len(declared) != len(ret_toks):
            diags.append(Diagnostic("E4010", f"function @{name} declares {len(declared)} results but "
                                             f"returns {len(ret_toks)}", self._error_span(start, end)))
        if diags:
            raise MindError(diags, {self.filename: self.text})
        fn = Function(name, params, ops, [r for r in rets if r is not None], assumptions, self._span_of(start, end))
        if any(dty != r.type for (dty, _d0, _d1), r in zip(declared, rets)):
            # written differently from the returned values' types: the verifier proves them equal
            # under the premises (``f32[max(B, 3)]`` is ``f32[B]`` where B >= 3)
            fn.result_decls = tuple((dty, self._error_span(d0, d1)) for dty, d0, d1 in declared)
        return fn

    def _error_span(self, i: int, j: int) -> Span:
        return self.span(self.start_of(i), self.end_of(j))

    def parse_op_line(self) -> tuple:
        """``%r = op(%a, ...) {attrs} : type``: (result token, op name, operand tokens, attributes with
        their tokens, type, last token).  The common path reads the token list directly (the module
        of a warm start is parsed this way); anything unexpected goes through ``_unexpected``."""
        texts = self.texts
        res = self.pos
        if texts[res][:1] != "%":
            raise self._unexpected("a result like `%0` or `return`")
        self.n_ops += 1
        if self.n_ops > self.limits.max_ops:
            raise self.fail("E1012", f"more than {self.limits.max_ops} operations", self.start_of(res))
        if texts[res + 1] != "=":
            self.pos = res + 1
            raise self._unexpected("`=`")
        op_tok = res + 2
        opdef = OPS.get(texts[op_tok])
        if opdef is None:
            self.pos = op_tok
            if self.kind_of(op_tok) != "ident":
                raise self._unexpected("an op name")
            raise self._fail_at("E4006", f"unknown op `{texts[op_tok]}`", op_tok,
                                help="Core IR has exactly these ops: " + ", ".join(OPS))
        i = op_tok + 1
        operands: list[int] = []
        if texts[i] == "(":  # optional for ops without operands: `%0 = const {value = 1} : i32[]`
            i += 1
            if texts[i] != ")":
                while True:
                    if texts[i][:1] != "%":
                        self.pos = i
                        raise self._unexpected("an operand like `%x`")
                    operands.append(i)
                    if texts[i + 1] != ",":
                        break
                    i += 2
                i += 1
            if texts[i] != ")":
                self.pos = i
                raise self._unexpected("`)` or `,`")
            i += 1
        elif opdef.operands:
            self.pos = i
            raise self._unexpected("`(`")
        self.pos = i
        raw_attrs: dict[str, tuple[Any, int]] = {}
        adefs: dict[str, Any] = {}
        if texts[self.pos] == "{":
            self.pos += 1
            adefs = {a.name: a for a in opdef.attrs}
            while True:
                name_tok = self.expect_kind("ident", "an attribute name")
                attr = texts[name_tok]
                adef = adefs.get(attr)
                if adef is None:
                    raise self._fail_at("E4008", f"`{opdef.name}` has no attribute `{attr}`", name_tok,
                                        help="attributes of " + opdef.name + ": " +
                                             (", ".join(adefs) if adefs else "none"))
                if attr in raw_attrs:
                    raise self._fail_at("E4008", f"attribute `{attr}` is given twice", name_tok)
                self.expect("=")
                raw_attrs[attr] = (self.parse_attr_value(adef), name_tok)
                if not self.accept(","):
                    break
            self.expect("}", "`}` or `,`")
        if texts[self.pos] != ":":
            raise self._unexpected("`:`")
        self.pos += 1
        ty = self.parse_type()
        for name, (raw, tok) in raw_attrs.items():
            if adefs[name].kind == "tensor":
                raw_attrs[name] = (self._tensor_value(raw, ty), tok)
        return (res, opdef.name, operands, raw_attrs, ty, self.pos - 1)

    # types and dims -----------------------------------------------------------------------------
    def parse_type(self) -> TensorType:
        """A tensor type; a type whose tokens were parsed before is looked up (a module repeats a few
        types many times)."""
        i = self.pos
        texts = self.texts
        try:
            j = texts.index("]", i) + 1
        except ValueError:
            j = i
        key = tuple(texts[i:j])
        ty = self._types.get(key)
        if ty is not None:
            self.pos = j
            return ty
        ty = self._parse_type()
        if self.pos == j:
            self._types[key] = ty
        return ty

    def _parse_type(self) -> TensorType:
        t = self.expect_kind("ident", "a type like `f32[2, 3]`")
        dtype = parse_dtype(self.texts[t])
        if dtype is None:
            raise self._fail_at("E2005", f"unknown dtype `{self.texts[t]}`", t,
                                help="dtypes are bool, i32, i64, f32, f64")
        self.expect("[", "`[` after the dtype")
        dims: list[Dim] = []
        if not self.at("]"):
            while True:
                d_start = self.pos
                d = self.parse_dim()
                if isinstance(d, int) and d < 0:
                    raise self._fail_at("E3006", f"negative dimension {d}", d_start, self.pos - 1)
                dims.append(d)
                if not self.accept(","):
                    break
        close = self.expect("]", "`]` or `,`")
        if len(dims) > self.limits.max_rank:
            raise self._fail_at("E1012", f"rank {len(dims)} is over the limit of {self.limits.max_rank}", t, close)
        return TensorType(dtype, tuple(dims))

    def parse_dim(self, depth: int = 0) -> Dim:
        if depth > self.limits.max_nesting:
            raise self.fail("E1012", "dimension expression nested too deeply", self.start_of(self.pos))
        first = self.pos
        value = self._dim_term(depth)
        while self.texts[self.pos] in ("+", "-"):
            op = self.texts[self.pos]
            self.pos += 1
            rhs = self._dim_term(depth)
            value = value + rhs if op == "+" else value - rhs
            self._check_dim_size(value, first)
        return value

    def _dim_term(self, depth: int) -> Dim:
        first = self.pos
        value = self._dim_unary(depth)
        while self.accept("*"):
            rhs = self._dim_unary(depth)
            if _nterms(value) * _nterms(rhs) > self.limits.max_dim_terms:  # before the work
                raise self._too_large(first)
            value = value * rhs
            self._check_dim_size(value, first)
        return value

    def _check_dim_size(self, d: Dim, first: int) -> None:
        if _nterms(d) > self.limits.max_dim_terms or _maxcoef(d) > self.limits.max_coef:
            raise self._too_large(first)

    def _too_large(self, first: int) -> MindError:
        return self._fail_at("E1012", f"dimension expression is too large (over {self.limits.max_dim_terms} "
                                      f"terms or a coefficient over {self.limits.max_coef})", first, self.pos - 1)

    def _dim_unary(self, depth: int) -> Dim:
        if self.accept("-"):
            if depth >= self.limits.max_nesting:
                raise self.fail("E1012", "dimension expression nested too deeply", self.start_of(self.pos))
            return 0 - self._dim_unary(depth + 1)
        i = self.pos
        text = self.texts[i]
        kind = self.kind_of(i)
        if kind == "number":
            self.pos = i + 1
            if not text.isdigit():
                raise self._fail_at("E1005", f"dimension `{text}` is not an integer", i)
            v = self._int_literal(i, "dimension")
            if v > self.limits.max_dim:
                raise self._fail_at("E1012", f"dimension {v} is over the limit of {self.limits.max_dim}", i)
            return v
        if kind == "ident":
            self.pos = i + 1
            if text in ("floordiv", "max", "min") and self.at("("):
                self.pos += 1
                a = self.parse_dim(depth + 1)
                self.expect(",")
                b = self.parse_dim(depth + 1)
                self.expect(")")
                if text == "floordiv":
                    if not (isinstance(b, int) and b > 0):
                        raise self.fail("E3006", "floordiv needs a positive constant divisor", self.start_of(i))
                    return INT_ARITH.floordiv(a, b)
                return INT_ARITH.max(a, b) if text == "max" else INT_ARITH.min(a, b)
            return sym(text)
        if self.accept("("):
            v = self.parse_dim(depth + 1)
            self.expect(")")
            return v
        raise self._unexpected("a dimension (integer or symbol)")

    def parse_assumption(self) -> Assumption:
        lhs = self.parse_dim()
        rel = self.texts[self.pos]
        if rel not in RELATIONS:
            raise self._unexpected("one of " + ", ".join(f"`{r}`" for r in RELATIONS))
        self.pos += 1
        return Assumption(lhs, rel, self.parse_dim())

    # attributes ---------------------------------------------------------------------------------
    def parse_attr_value(self, adef) -> Any:
        kind = adef.kind
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
            if self.texts[tok] not in adef.choices:
                raise self._fail_at("E4008", f"`{self.texts[tok]}` is not a valid {adef.name}", tok,
                                    help="choose one of " + ", ".join(adef.choices))
            return self.texts[tok]
        if kind == "dtype":
            tok = self.expect_kind("ident", "a dtype")
            dt = parse_dtype(self.texts[tok])
            if dt is None:
                raise self._fail_at("E2005", f"unknown dtype `{self.texts[tok]}`", tok)
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
            first = self.pos
            return (self._literal(0), first)
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

    def _int_literal(self, i: int, what: str) -> int:
        """The value of the all-digit token ``i``, refusing (E1012) one too long to be under any limit."""
        text = self.texts[i]
        if len(text) > MAX_INT_DIGITS:
            raise self._fail_at("E1012", f"{what} `{text[:20]}...` has {len(text)} digits, over the limit of "
                                         f"{MAX_INT_DIGITS}", i)
        return int(text)

    def _signed_int(self) -> int:
        neg = self.accept("-")
        t = self.expect_kind("number", "an integer")
        text = self.texts[t]
        if not text.isdigit():
            raise self._fail_at("E1005", f"`{text}` is not an integer", t)
        v = self._int_literal(t, "integer")
        if v > self.limits.max_dim:
            raise self._fail_at("E1012", f"integer {v} is over the limit of {self.limits.max_dim}", t)
        return -v if neg else v

    def _literal(self, depth: int) -> Any:
        """A raw literal: a scalar (``_scalar``), ('splat', scalar) or a nested list."""
        if depth > self.limits.max_nesting:
            raise self.fail("E1012", "literal nested too deeply", self.start_of(self.pos))
        if self.at("splat"):
            self.pos += 1
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
        """(text with its sign, token index of the number)."""
        neg = self.accept("-")
        i = self.pos
        text = self.texts[i]
        kind = self.kind_of(i)
        if kind == "number" or (kind == "ident" and text in ("nan", "inf", "true", "false")):
            self.pos = i + 1
            return (("-" if neg else "") + text, i)
        raise self._unexpected("a number, `nan`, `inf`, `true` or `false`")

    def _tensor_value(self, raw: tuple[Any, int], ty: TensorType) -> Any:
        import numpy as np

        lit, first = raw
        if any(not isinstance(d, int) for d in ty.shape):
            raise self._fail_at("E4005", "a constant must have a static shape", first, label="const.C1")
        count = 1
        for d in ty.shape:
            count *= d
        if count > self.limits.max_const_elements:
            raise self.fail("E1012", f"constant of {count} elements is over the limit", self.start_of(first))
        if isinstance(lit, tuple) and lit and lit[0] == "splat":
            return np.broadcast_to(np.asarray(self._convert_scalar(lit[1], ty.dtype), ty.dtype.numpy), ty.shape)
        flat: list[Any] = []
        shape = self._literal_shape(lit, flat, first)
        if tuple(shape) != tuple(ty.shape) and not (count == 0 and not flat):
            raise self._fail_at("E4005", f"constant literal has shape {list(shape)} but its type is {ty}",
                                first, label="const.C1")
        values = [self._convert_scalar(x, ty.dtype) for x in flat]
        return np.array(values, dtype=ty.dtype.numpy).reshape(ty.shape)

    def _literal_shape(self, lit: Any, flat: list, first: int) -> list[int]:
        if isinstance(lit, list):
            shapes = [self._literal_shape(x, flat, first) for x in lit]
            if any(s != shapes[0] for s in shapes):
                raise self._fail_at("E4005", "constant literal is ragged", first, label="const.C1")
            return [len(lit)] + (shapes[0] if shapes else [])
        if isinstance(lit, tuple) and lit and lit[0] == "splat":
            raise self._fail_at("E4005", "`splat` is only allowed as the whole value", first, label="const.C1")
        flat.append(lit)
        return []

    def _convert_scalar(self, item: tuple[str, int], dtype: DType) -> Any:
        import numpy as np

        text, i = item
        body = text.lstrip("-")
        if dtype is DType.BOOL:
            if body not in ("true", "false") or text.startswith("-"):
                raise self._fail_at("E4005", f"`{text}` is not a bool literal", i, label="const.C1")
            return body == "true"
        if body in ("true", "false"):
            raise self._fail_at("E4005", f"`{text}` is not a {dtype.value} literal", i, label="const.C1")
        if dtype.is_int:
            if not body.isdigit():
                raise self._fail_at("E4005", f"`{text}` is not an integer literal", i, label="const.C1")
            if len(body) > MAX_INT_DIGITS:
                raise self._fail_at("E4005", f"`{text[:20]}...` does not fit in {dtype.value}", i, label="const.C1")
            v = int(text)
            if not dtype.int_min <= v <= dtype.int_max:
                raise self._fail_at("E4005", f"{v} does not fit in {dtype.value}", i, label="const.C1")
            return v
        with np.errstate(over="ignore"):
            return dtype.numpy.type(float(text))


def _nterms(d: Dim) -> int:
    return len(d.terms) if isinstance(d, DimExpr) else 1


def _maxcoef(d: Dim) -> int:
    if isinstance(d, DimExpr):
        return max(abs(c) for c in d.terms.values())
    return max(abs(d), 1)


def parse_module(text: str, filename: str = "<ir>", limits: Limits = DEFAULT_LIMITS, *,
                 spans: bool = True) -> Module:
    """Parse IR text into a module; raises ``MindError`` on malformed input.  ``spans=False`` leaves
    every span of the module None (diagnostics still point into ``text``)."""
    return IRParser(text, filename, limits, spans=spans).parse_module()


def parse_file(path: str, limits: Limits = DEFAULT_LIMITS) -> Module:
    from mind.driver_io import read_source

    return parse_module(read_source(path), path, limits)
