"""The MIND parser: recursive descent for statements and types, precedence climbing for operators.

Entry points::

    parse(source: str | bytes, filename: str = "<input>") -> ast.Module
    parse_expr(source: str | bytes, filename: str = "<input>") -> ast.Expr
    parse_type(source: str | bytes, filename: str = "<input>") -> ast.Type

All raise ``mind.diagnostics.MindError`` (never anything else) on bad input:

* E1001-E1006 from the lexer (all lexical errors of the file, before any parsing);
* E1010 ``expected X, found Y`` with a help line;
* E1011 for a delimiter that is never closed (or closed by the wrong bracket), pointing at the
  opener;
* E1012 when a resource limit is exceeded (input size, nesting depth ``MAX_DEPTH``, integer
  literal length ``MAX_INT_DIGITS``);
* E1013 for a construct MIND does not have (``match``, ``enum``, references, bit operators ...),
  naming it and what to write instead (``parse_control.UNSUPPORTED``).

Control flow, items, attributes and indexing are parsed by the mixin ``parse_control.ControlSyntax``.

Syntax errors are recovered from at statement level (the rest of the statement is skipped, up to
the next ``;``/line break at the same bracket depth, a ``}`` closing the enclosing block, or a
statement keyword), so independent errors in one file are reported together, up to
``lexer.MAX_ERRORS``.  The grammar is ``spec/grammar/mind.ebnf``.
"""

from __future__ import annotations

from mind.diagnostics import Diagnostic, MindError

from . import ast as A
from .lexer import MAX_ERRORS, Tokens, tokenize
from .literals import MAX_LITERAL_ELEMENTS, MAX_TOKEN_LITERAL_ELEMENTS, TOO_MANY_HELP, DenseArray
from .parse_control import UNSUPPORTED, UNSUPPORTED_PREFIX, ControlSyntax

__all__ = ["parse", "parse_expr", "parse_type", "parse_tokens", "MAX_DEPTH", "MAX_INT_DIGITS"]

#: Most digits in an integer literal (E1012): Python's own bound on converting text to an
#: int (``sys.get_int_max_str_digits``), past which conversion time grows quadratically.
MAX_INT_DIGITS = 4300

#: Maximum nesting of brackets, closures, blocks and types (E1012).  Each level costs at most
#: about five Python frames, so the default recursion limit is never approached.
MAX_DEPTH = 100

_BINARY = A.BINARY_OPS
_COMPARISON = frozenset({"==", "!=", "<", "<=", ">", ">="})
_SEPARATORS = frozenset({"NL", ";"})
_STMT_KEYWORDS = frozenset({"let", "fn", "import", "return", "struct", "const", "for", "while",
                            "loop", "pub"})
#: Statements that end with a block need no `;` or line break after them.
_BLOCK_STMTS = frozenset({A.FnDef, A.StructDef, A.For, A.While, A.Loop})
_BLOCK_EXPRS = frozenset({A.If, A.BlockExpr})
_ASSIGN = frozenset(A.ASSIGN_OPS) | {"="}
#: Statement keywords and the parser method for each.
_STMT_RULES = {"fn": "parse_fn", "import": "parse_import", "struct": "parse_struct",
               "const": "parse_const", "for": "parse_for", "while": "parse_while",
               "loop": "parse_loop", "break": "parse_jump", "continue": "parse_jump"}
_CLOSERS = {"(": ")", "[": "]", "{": "}", "|": "|"}
_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r", "0": "\0"}
_EXPR_HELP = ("an expression starts with a number, `true`/`false`, a string, a name, `(`, `[`, `{`, `if`, "
              "`-`, `!` or a closure `|x| ...`")
_TYPE_HELP = ("types are `f32`, `i32`, `i64`, `f64`, `bool`, `Tensor<f32, [B, 10]>`, "
              "`Tensor[f32,(10,20)]`, `tensor<f32[10,20]>`, `diff <tensor type>` or a tuple `(T, U)`")


class _Abort(Exception):
    """A syntax error: unwinds to the enclosing statement loop."""

    def __init__(self, diag: Diagnostic) -> None:
        self.diag = diag


class _Stop(Exception):
    """Parsing cannot go on (too many errors or a resource limit)."""


def _describe(kind: str, text: str) -> str:
    if kind == "EOF":
        return "end of file"
    if kind == "NL":
        return "a line break"
    if kind == "IDENT":
        return f"identifier `{text}`"
    if kind == "INT":
        return f"integer literal `{text}`"
    if kind == "FLOAT":
        return f"float literal `{text}`"
    if kind == "STR":
        return f"string literal {text}"
    if kind.isalpha():
        return f"keyword `{text}`"
    return f"`{text}`"


def _decode_string(raw: str) -> str:
    body = raw[1:-1]
    if "\\" not in body:
        return body
    out = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c != "\\":
            j = body.find("\\", i)
            j = n if j < 0 else j
            out.append(body[i:j])
            i = j
            continue
        c = body[i + 1]
        if c == "u":  # \u{XXXX}, validated by the lexer
            j = body.index("}", i)
            cp = int(body[i + 3:j], 16)
            out.append(chr(cp) if cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF else "\ufffd")
            i = j + 1
        else:
            out.append(_ESCAPES[c])
            i += 2
    return "".join(out)


_Name = A.Name
_IntLit = A.IntLit
_Binary = A.Binary
_Attribute = A.Attribute
_Call = A.Call
_Keyword = A.Keyword
_Dim = A.Dim
_TensorType = A.TensorType
_ScalarType = A.ScalarType
_NamePattern = A.NamePattern
_Let = A.Let
_SCALAR_TYPES = A.SCALAR_TYPES
#: _NESTS[p]: the tokens after a simple operand (a name or an integer) on the right of an operator
#: of precedence ``p`` that make it more than that operand (a call, an attribute, a tighter op).
_NESTS = {p: frozenset({"(", ".", "[", "::", "as", "{"} | {op for op, q in _BINARY.items() if q > p})
          for p in set(_BINARY.values())}
#: Tokens that continue an operand: a call, a field or path `::`, an index.
_POSTFIX = frozenset({"(", ".", "[", "::", "?"})
_RANGES = frozenset({"..", "..="})
_BITS_HELP = ("MIND computes with numbers, not bits: write `*`, `/` and `%` (`x / 65536` for `x >> 16` "
              "of a non-negative x), and `&&`, `||`, `!` for bools")
#: Operators of other languages, reported where they follow an operand.
_BITWISE = {op: (f"the bitwise operator `{op}` is not supported", _BITS_HELP) for op in ("&", "|", "^")}
_BITWISE.update({op: (f"the shift operator `{op}` is not supported", _BITS_HELP) for op in ("<<", ">>")})
#: Tokens after a complete operand that need a look (``_after_operand``) rather than ending it.
_AFTER_OPERAND = _RANGES | {"&", "|", "^"}
#: Tokens after `..` that end a range with no upper bound (`a..`).
_RANGE_END = frozenset({")", "]", "}", ",", "NL", ";", "EOF", "{"})
_TYPE_EXAMPLES = {"angle": "Tensor<f32, [2, 3]>", "legacy": "Tensor[f32,(2,3)]",
                  "compact": "tensor<f32[2,3]>"}


class _Parser(ControlSyntax):
    """Recursive descent over the token lists.

    Written for speed (it runs once per compilation): the common cases of the hot rules (a name or
    an integer operand, a ``let`` with a name, tensor types, call arguments) are handled inline with
    local variables, and help strings that need formatting are built only on error paths.  Every
    error path reports exactly what the straightforward formulation does.
    """

    __slots__ = ("k", "t", "toks", "e", "i", "depth", "errors", "src", "lit_open", "lit_leaves", "lit_total",
                 "nostruct", "nopath")

    def __init__(self, toks: Tokens) -> None:
        self.nostruct = False  # true in `if`/`while`/`for` headers: `x {` starts the body
        self.nopath = False  # true in `x[...]`: `a::k` is a slice, not a path
        self.k = toks.kinds
        self.t = toks.texts
        self.toks = toks
        self.e = toks.ends
        self.i = 0
        self.depth = 0
        self.lit_open = -1  # the `[` token of the outermost array literal being parsed
        self.lit_leaves = 0  # its elements read token by token so far (``MAX_TOKEN_LITERAL_ELEMENTS``)
        self.lit_total = 0  # and all its elements, bulk-read rows included (``MAX_LITERAL_ELEMENTS``)
        self.errors: list[Diagnostic] = []
        self.src = toks.source

    # -- errors ---------------------------------------------------------------------------------

    def _err(self, code: str, message: str, i: int, help: str | None = None,
             notes: tuple[str, ...] = ()) -> _Abort:
        s, e = self.toks.starts[i], self.e[i]
        return _Abort(Diagnostic(code, message, self.src.span(s, e), help=help, notes=notes))

    def _unexpected(self, expected: str, help: str | None = None) -> _Abort:
        i = self.i
        if self.k[i] == "DENSE":  # report the literal's first token, as the token path would
            self._expand(i)
        return self._err("E1010", f"expected {expected}, found {_describe(self.k[i], self.t[i])}",
                         i, help)

    def _expect(self, kind: str, help: str | None = None) -> int:
        i = self.i
        if self.k[i] == kind:
            self.i = i + 1
            return i
        raise self._unexpected(f"`{kind}`", help)

    def _close(self, closer: str, opener: int, expected: str) -> int:
        """Consume ``closer`` for the bracket opened at token ``opener``, or report why not."""
        i = self.i
        kind = self.k[i]
        if kind == closer:
            self.i = i + 1
            return i
        if kind == "EOF" or kind in (")", "]", "}"):
            found = _describe(kind, self.t[i])
            line, col = self.src.line_col(self.toks.starts[i])
            raise self._err("E1011", f"unclosed delimiter `{self.t[opener]}`", opener,
                            f"close it with `{closer}`",
                            (f"expected {expected}, found {found} at {line}:{col}",))
        raise self._unexpected(expected)

    def _enter(self, i: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self._too_deep(i)

    def _too_deep(self, i: int) -> None:
        self.errors.append(Diagnostic(
            "E1012", f"nesting is too deep (the limit is {MAX_DEPTH} levels)",
            self.src.span(self.toks.starts[i], self.e[i]), help="split the expression with `let`"))
        raise _Stop

    def _int(self, i: int) -> int:
        """The value of the INT token ``i``; E1012 past ``MAX_INT_DIGITS`` digits."""
        text = self.t[i]
        if len(text) <= MAX_INT_DIGITS:
            return int(text)
        digits = len(text) - text.count("_")
        if digits <= MAX_INT_DIGITS:
            return int(text)
        raise self._err("E1012", f"integer literal of {digits} digits: the limit is {MAX_INT_DIGITS}", i,
                        "every dtype overflows long before (i64 at 19 digits, f64 at 309); "
                        "write a float with an exponent, e.g. `1e400`")

    def _expand(self, i: int) -> str:
        """Replace the ``DENSE`` token ``i`` by the literal's ordinary tokens (for any use other
        than an expression operand); returns the kind of token ``i`` now."""
        if self.k[i] != "DENSE":
            return self.k[i]
        toks = _dense_tokens(self.toks.dense[self.e[i]])
        self.k[i:i + 1] = toks.kinds[:-1]  # (without its EOF)
        self.t[i:i + 1] = toks.texts[:-1]
        self.e[i:i + 1] = toks.ends[:-1]
        starts = self.toks._starts
        if starts is not None:
            starts[i:i + 1] = toks.starts[:-1]
        return self.k[i]

    def _too_many_elements(self) -> _Abort:
        return self._err("E1012", f"an array literal of more than {MAX_TOKEN_LITERAL_ELEMENTS} elements that "
                                  "is not in the plain form MIND reads in bulk", self.lit_open,
                         f"write it with numbers, commas, brackets and blanks only (no comments, digit "
                         f"separators or trailing commas) for up to {MAX_LITERAL_ELEMENTS} elements, or "
                         + TOO_MANY_HELP)

    def _skip_nl(self) -> None:
        while self.k[self.i] == "NL":
            self.i += 1

    # -- statements -----------------------------------------------------------------------------

    def parse_module(self) -> A.Module:
        stmts, result = self.parse_stmts("EOF")
        n = len(self.src.text)
        return A.Module(stmts, result, (0, n), self.src)

    def parse_stmts(self, closer: str) -> tuple[tuple[A.Stmt, ...], A.Expr | None]:
        k = self.k
        stmts: list[A.Stmt] = []
        while True:
            i = self.i
            kind = k[i]
            while kind == "NL" or kind == ";":
                i += 1
                kind = k[i]
            self.i = i
            if kind == closer or kind == "EOF":
                break
            try:
                if kind == "#":  # an attribute: accepted, no effect
                    self.skip_attribute()
                    continue
                st = self.parse_let() if kind == "let" else self.parse_stmt()
                kind = k[self.i]
                if kind == "NL" or kind == ";":
                    self.i += 1
                elif kind != closer and kind != "EOF" and kind != "}" and not self._ends_in_block(st):
                    if kind == "{" and type(st) is A.ExprStmt and type(st.expr) is A.Call:
                        raise self.unsupported(
                            self.i, f"a block after the call `{self._text(st.expr.func.span)}(...)` "
                                    f"(e.g. a device block `on(gpu0) {{ ... }}`) is not supported",
                            "write the block's statements directly; `mind run --backend` picks "
                            "the device")
                    raise self._unexpected(
                        "`;` or a line break after the statement",
                        "statements are separated by `;` or line breaks")
                stmts.append(st)
            except _Abort as ab:
                self.errors.append(ab.diag)
                if len(self.errors) >= MAX_ERRORS:
                    raise _Stop from None
                self._sync(i)
        if stmts and type(stmts[-1]) is A.ExprStmt:
            return tuple(stmts[:-1]), stmts[-1].expr  # type: ignore[attr-defined]
        return tuple(stmts), None

    @staticmethod
    def _ends_in_block(st: A.Stmt) -> bool:
        t = type(st)
        return t in _BLOCK_STMTS or (t is A.ExprStmt and type(st.expr) in _BLOCK_EXPRS)  # type: ignore[attr-defined]

    def _text(self, span: A.Offsets) -> str:
        return self.src.text[span[0]:span[1]]

    def _sync(self, start: int) -> None:
        """Skip the rest of a statement that had a syntax error."""
        k = self.k
        i = self.i
        if i == start and k[i] != "EOF":
            i += 1
        braces = parens = 0
        while True:
            kind = k[i]
            if kind == "EOF":
                break
            if kind == "(" or kind == "[":
                parens += 1
            elif kind == ")" or kind == "]":
                parens -= 1
            elif kind == "{":
                braces += 1
            elif kind == "}":
                if braces <= 0:
                    break
                braces -= 1
            elif braces <= 0:
                if (kind == "NL" or kind == ";") and parens <= 0:
                    i += 1
                    break
                if kind in _STMT_KEYWORDS:
                    break
            i += 1
        self.i = i

    def parse_stmt(self) -> A.Stmt:
        k = self.k
        i = self.i
        kind = k[i]
        if kind == "let":
            return self.parse_let()
        if kind == "IDENT":
            nk = k[i + 1]
            if nk == "=":
                j = i + 2
                while k[j] == "NL":
                    j += 1
                self.i = j
                value = self.parse_expr()
                e = self.e[i]
                start = e - len(self.t[i])
                return A.Assign(_Name(self.t[i], (start, e)), None, value, (start, value.span[1]))
            if nk == "IDENT" or nk == "{" or nk == "STR":
                word = self.t[i]
                if word in UNSUPPORTED and (nk == "IDENT" or word != "type"):
                    raise self.unsupported(i, *UNSUPPORTED[word])
                if word == "use" and nk == "IDENT":
                    return self.parse_import()
        rule = _STMT_RULES.get(kind)
        if rule is not None:
            return getattr(self, rule)()
        if kind == "return":
            self.i = i + 1
            nk = k[i + 1]
            if nk == "NL" or nk == ";" or nk == "}" or nk == "EOF":
                return A.Return(None, (self.e[i] - len(self.t[i]), self.e[i]))
            value = self.parse_expr()
            return A.Return(value, (self.e[i] - len(self.t[i]), value.span[1]))
        if kind == "pub":  # visibility: every function is visible; `pub(crate)` too
            self.i = i + 1
            if k[i + 1] == "(":
                self.i = self._skip_group(i + 1)
            return self.parse_stmt()
        if kind == "match":
            raise self.unsupported(i, *UNSUPPORTED["match"])
        expr = self.parse_expr()
        op = k[self.i]
        if op in _ASSIGN:
            if type(expr) not in (A.Name, A.Attribute, A.Index):
                raise self._err("E1010", "only a name, a field `s.f` or an element `x[i]` can be "
                                         "assigned to", self.i, "e.g. `x = x + 1` or `x += 1`")
            self.i += 1
            self._skip_nl()
            value = self.parse_expr()
            return A.Assign(expr, A.ASSIGN_OPS.get(op), value, (expr.span[0], value.span[1]))
        return A.ExprStmt(expr, expr.span)

    def _skip_group(self, op: int) -> int:
        """The index after the `)` that closes the `(` at ``op``."""
        depth = 0
        k = self.k
        i = op
        while True:
            kind = k[i]
            if kind == "(":
                depth += 1
            elif kind == ")":
                depth -= 1
                if depth == 0:
                    return i + 1
            elif kind == "EOF":
                self.i = i
                self._close(")", op, "`)`")
            i += 1

    def parse_let(self) -> A.Let:
        k = self.k
        i0 = self.i
        i = i0 + 1
        mutable = k[i] == "mut"
        if mutable:
            i += 1
        if k[i] == "IDENT":
            target: A.Pattern = _NamePattern(self.t[i], (self.e[i] - len(self.t[i]), self.e[i]))
            i += 1
            self.i = i
        else:
            self.i = i
            target = self.parse_pattern()
            i = self.i
        ty = None
        if k[i] == ":":
            self.i = i + 1
            ty = self.parse_type()
            i = self.i
        if k[i] != "=":
            raise self._unexpected("`=`" if ty is not None else "`:` or `=`",
                                   "a `let` binds a value: `let x = ...` or `let x: T = ...`")
        i += 1
        while k[i] == "NL":
            i += 1
        self.i = i
        value = self.parse_expr()
        return _Let(target, ty, value, (self.e[i0] - len(self.t[i0]), value.span[1]), mutable)

    def parse_pattern(self) -> A.Pattern:
        i = self.i
        kind = self.k[i]
        if kind == "mut":  # `let (mut a, b) = ...`: every binding may be reassigned anyway
            i += 1
            self.i = i
            kind = self.k[i]
        if kind == "IDENT":
            self.i = i + 1
            return _NamePattern(self.t[i], (self.e[i] - len(self.t[i]), self.e[i]))
        if kind == "(":
            self._enter(i)
            self.i = i + 1
            elts: list[A.Pattern] = []
            trailing = False
            while self.k[self.i] != ")":
                elts.append(self.parse_pattern())
                trailing = False
                if self.k[self.i] != ",":
                    break
                self.i += 1
                trailing = True
            j = self._close(")", i, "`,` or `)`")
            self.depth -= 1
            if len(elts) == 1 and not trailing:
                return elts[0]
            return A.TuplePattern(tuple(elts), (self.e[i] - len(self.t[i]), self.e[j]))
        raise self._unexpected("a name or a tuple pattern `(a, b)`",
                               "`let` binds a name, e.g. `let h = ...` or `let (a, b) = ...`")

    def parse_fn(self) -> A.FnDef:
        k = self.k
        i0 = self.i
        self.i += 1
        ni = self._expect("IDENT", "a function needs a name: `fn name(x: f32) -> f32 { ... }`")
        if k[self.i] == "<":
            raise self.unsupported(self.i, "generic type parameters `<T>` are not supported",
                                   "functions are generic over shapes already: use symbolic "
                                   "dimensions, e.g. `x: Tensor<f32, [B, N]>`")
        op = self._expect("(", "the parameter list comes next: `fn name(x: f32, ...)`")
        params: list[A.Param] = []
        while k[self.i] != ")":
            if k[self.i] == "mut":
                self.i += 1
            pi = self.i
            if k[pi] == "IDENT" and self.t[pi] == "self":
                raise self.unsupported(pi, "methods (a `self` parameter) are not supported",
                                       "write a free function with an ordinary parameter")
            if k[pi] == "&":
                raise self.unsupported(pi, *UNSUPPORTED_PREFIX["&"])
            if k[pi] != "IDENT":
                raise self._unexpected("a parameter name or `)`",
                                       "parameters look like `x: Tensor<f32, [B, 784]>`")
            self.i += 1
            self._expect(":", "every parameter needs a type: `x: f32`")
            ty = self.parse_type()
            params.append(A.Param(self.t[pi], ty, (self.e[pi] - len(self.t[pi]), ty.span[1])))
            if k[self.i] != ",":
                break
            self.i += 1
        self._close(")", op, "`,` or `)`")
        ret = None
        self._skip_nl()
        if k[self.i] == "->":
            self.i += 1
            ret = self.parse_type()
        if k[self.i] == ";":
            raise self.unsupported(i0, f"a function without a body (`fn {self.t[ni]}(...);`, as "
                                       f"for `extern` functions) is not supported",
                                   "give the function a body: `{ ... }`")
        self._skip_nl()
        if k[self.i] == "IDENT" and self.t[self.i] == "where":
            raise self.unsupported(self.i, "`where` clauses are not supported",
                                   "constrain shapes with symbolic dimensions in the types")
        if k[self.i] != "{":
            raise self._unexpected("`{`" if ret is not None else "`->` or `{`",
                                   "the function body is a block: `{ ... }`")
        body = self.parse_block()
        return A.FnDef(self.t[ni], tuple(params), ret, body,
                       (self.e[i0] - len(self.t[i0]), body.span[1]),
                       (self.e[ni] - len(self.t[ni]), self.e[ni]))

    def parse_block(self) -> A.Block:
        op = self.i
        self._enter(op)
        self.i += 1
        stmts, tail = self.parse_stmts("}")
        j = self._close("}", op, "`}`")
        self.depth -= 1
        return A.Block(stmts, tail, (self.e[op] - len(self.t[op]), self.e[j]))

    def parse_import(self) -> A.Import:
        k = self.k
        i0 = self.i
        self.i += 1
        help = "imports look like `import tensor::zeros` or `import tensor::{zeros, ones}`"
        path = [self.t[self._expect("IDENT", help)]]
        names = None
        end = self.e[self.i - 1]
        while k[self.i] == "::" or k[self.i] == ".":
            self.i += 1
            if k[self.i] == "{":
                op = self.i
                self.i += 1
                self._skip_nl()
                names = []
                while k[self.i] == "IDENT":
                    names.append(self.t[self.i])
                    self.i += 1
                    self._skip_nl()
                    if k[self.i] != ",":
                        break
                    self.i += 1
                    self._skip_nl()
                j = self._close("}", op, "a name, `,` or `}`")
                end = self.e[j]
                names = tuple(names)
                break
            j = self._expect("IDENT", help)
            path.append(self.t[j])
            end = self.e[j]
        return A.Import(tuple(path), names, (self.e[i0] - len(self.t[i0]), end))

    # -- types ----------------------------------------------------------------------------------

    def parse_type(self) -> A.Type:
        k, t = self.k, self.t
        i = self.i
        kind = k[i]
        if kind == "IDENT":
            word = t[i]
            if word in _SCALAR_TYPES:
                self.i = i + 1
                return _ScalarType(word, (self.e[i] - len(self.t[i]), self.e[i]))
            if word == "Tensor" or word == "tensor":
                return self._tensor_type(i, False)
            if word == "diff" and k[i + 1] == "IDENT":
                if t[i + 1] in ("Tensor", "tensor"):
                    return self._tensor_type(i + 1, True)
                if t[i + 1] in _SCALAR_TYPES:  # `diff f32`: every float value is differentiable
                    self.i = i + 2
                    return _ScalarType(t[i + 1], (self.e[i] - len(self.t[i]), self.e[i + 1]))
            self.i = i + 1
            return A.TypeName(word, (self.e[i] - len(self.t[i]), self.e[i]))
        elif kind == "(":
            self._enter(i)
            self.i = i + 1
            elts: list[A.Type] = []
            trailing = False
            while k[self.i] != ")":
                elts.append(self.parse_type())
                trailing = False
                if k[self.i] != ",":
                    break
                self.i += 1
                trailing = True
            j = self._close(")", i, "`,` or `)`")
            self.depth -= 1
            if len(elts) == 1 and not trailing:
                return elts[0]
            return A.TupleType(tuple(elts), (self.e[i] - len(self.t[i]), self.e[j]))
        elif kind == "&":
            raise self.unsupported(i, "reference types `&T` are not supported",
                                   "tensors are values: write the type itself, e.g. `Tensor<f32, [3]>`")
        elif kind == "[":
            raise self.unsupported(i, "array types `[T; n]` are not supported",
                                   "write a tensor type, e.g. `Tensor<f32, [3]>`")
        elif kind == "fn":
            raise self.unsupported(i, "function types are not supported",
                                   "pass the function's inputs instead, or call it inside")
        raise self._unexpected("a type", _TYPE_HELP)

    def _tensor_type(self, i: int, diff: bool) -> A.TensorType:
        k, t, e = self.k, self.t, self.e
        start = e[i - 1] - len(t[i - 1]) if diff else e[i] - len(t[i])
        word = t[i]
        op = i + 1
        self.i = op
        kind = self._expand(op)
        if word == "Tensor":
            if kind == "<":  # Tensor<f32, [2, 3]>
                style, dims_open, close = "angle", "[", "]"
            elif kind == "[":  # Tensor[f32,(2,3)]
                style, dims_open, close = "legacy", "(", ")"
            else:
                raise self._unexpected("`<` or `[` after `Tensor`",
                                       "write `Tensor<f32, [2, 3]>` or `Tensor[f32,(2,3)]`")
        else:  # tensor<f32[2, 3]>
            if kind != "<":
                raise self._unexpected("`<` after `tensor`", "write `tensor<f32[2, 3]>`")
            style, dims_open, close = "compact", "[", "]"
        di = op + 1
        self.i = di
        dt = t[di]
        if k[di] != "IDENT" or dt not in _SCALAR_TYPES:
            dt = self._element_type(di)
        i = di + 1
        self.i = i
        if style != "legacy" and (k[i] == ">" or k[i] == ">="):
            # `tensor<f32>` is a scalar; `Tensor<f32>` a tensor of any shape (dims None)
            dims = () if style == "compact" else None
            if k[i] == ">=":  # `tensor<f32>= 1`: split the token
                k[i] = t[i] = "="
                if self.toks._starts is not None:
                    self.toks._starts[i] += 1
                return _TensorType(dt, dims, diff, style, (start, e[i] - 1))  # type: ignore[arg-type]
            self.i = i + 1
            return _TensorType(dt, dims, diff, style, (start, e[i]))  # type: ignore[arg-type]
        if style != "compact":
            if k[i] != ",":
                raise self._unexpected(
                    "`,`", f"the shape follows the element type: `{_TYPE_EXAMPLES[style]}`")
            i += 1
            self.i = i
        if self._expand(i) != dims_open:
            raise self._unexpected(f"`{dims_open}`", f"write `{_TYPE_EXAMPLES[style]}`")
        # the dimensions (`_dims`, inlined)
        dop = i
        i += 1
        dims: list[A.Dim] = []
        while True:
            kind = k[i]
            if kind == "INT":
                dims.append(_Dim(self._int(i), (e[i] - len(t[i]), e[i])))
            elif kind == "IDENT":
                dims.append(_Dim(t[i], (e[i] - len(t[i]), e[i])))
            elif kind == "?":
                dims.append(_Dim(None, (e[i] - len(t[i]), e[i])))
            elif kind == close:
                break
            else:
                self.i = i
                raise self._unexpected(f"a dimension or `{close}`",
                                       "dimensions are integers, names (symbolic sizes) or `?`")
            i += 1
            if k[i] != ",":
                break
            i += 1
        if k[i] == close:
            i += 1
        else:
            self.i = i
            i = self._close(close, dop, f"`,` or `{close}`") + 1
        closer = "]" if style == "legacy" else ">"
        kind = k[i]
        if kind == closer:
            self.i = i + 1
            return _TensorType(dt, tuple(dims), diff, style, (start, e[i]))
        self.i = i
        if kind == ">=" and closer == ">":  # `tensor<f32[2]>= 1`: split the token
            k[i] = "="
            t[i] = "="
            starts = self.toks._starts
            if starts is not None:
                starts[i] += 1
            return _TensorType(dt, tuple(dims), diff, style, (start, e[i] - 1))
        j = self._close(closer, op, f"`{closer}`")  # raises
        return _TensorType(dt, tuple(dims), diff, style, (start, e[j]))  # pragma: no cover

    def _element_type(self, i: int) -> str:
        """The dtype named at token ``i`` in any case (`F32` is `f32`), or a diagnostic."""
        word = self.t[i]
        if self.k[i] == "IDENT":
            if word.lower() in _SCALAR_TYPES:
                return word.lower()
            raise self._err("E1010", f"expected an element type, found `{word}`", i,
                            "element types are `f32`, `f64`, `i32`, `i64` and `bool`")
        raise self._unexpected("an element type", "element types are `f32`, `f64`, `i32`, "
                               "`i64` and `bool`")

    # -- expressions ----------------------------------------------------------------------------

    def parse_expr(self, min_prec: int = 1) -> A.Expr:
        k = self.k
        i = self.i
        kind = k[i]
        # the operand; names and integers (most operands) inline
        if kind == "IDENT":
            left: A.Expr = _Name(self.t[i], (self.e[i] - len(self.t[i]), self.e[i]))
            i += 1
            self.i = i
            kind = k[i]
            if kind in _POSTFIX:
                left = self._postfix(left, kind)
                kind = k[self.i]
            elif kind == "{" and self.is_struct_lit(i - 1):
                left = self._postfix(self.parse_struct_lit(i - 1), k[self.i])
                kind = k[self.i]
        elif kind == "INT":
            left = _IntLit(self._int(i), (self.e[i] - len(self.t[i]), self.e[i]))
            i += 1
            self.i = i
            kind = k[i]
            if kind in _POSTFIX:
                left = self._postfix(left, kind)
                kind = k[self.i]
        else:
            left = self.parse_operand()
            kind = k[self.i]
        if kind == "as":
            left = self._cast(left)
            kind = k[self.i]
        prec = _BINARY.get(kind)
        if prec is None or prec < min_prec:
            if kind in _AFTER_OPERAND:
                return self._after_operand(left, kind, min_prec)
            return left
        # precedence climbing: `kind` is a binary operator binding at least as tight as min_prec
        while True:
            if prec == 3 and k[self.i + 1] == kind and (kind == "<" or kind == ">"):
                raise self.unsupported(self.i, *_BITWISE[kind + kind])
            i = self.i + 1
            while k[i] == "NL":
                i += 1
            rkind = k[i]
            if rkind == "IDENT" and k[i + 1] not in _NESTS[prec]:  # `op name`, no recursion
                right: A.Expr = _Name(self.t[i], (self.e[i] - len(self.t[i]), self.e[i]))
                self.i = i + 1
            elif rkind == "INT" and k[i + 1] not in _NESTS[prec]:
                right = _IntLit(self._int(i), (self.e[i] - len(self.t[i]), self.e[i]))
                self.i = i + 1
            else:
                self.i = i
                right = self.parse_expr(prec + 1)
            left = _Binary(kind, left, right, (left.span[0], right.span[1]))
            kind = k[self.i]
            if prec == 3 and kind in _COMPARISON:
                raise self._err("E1010", "comparison operators cannot be chained", self.i,
                                "use parentheses or `&&`: `a < b && b < c`")
            prec = _BINARY.get(kind)
            if prec is None or prec < min_prec:
                if kind in _AFTER_OPERAND:
                    return self._after_operand(left, kind, min_prec)
                return left

    def _after_operand(self, left: A.Expr, kind: str, min_prec: int) -> A.Expr:
        """A range ``left..`` (at the outermost level), or an operator of another language."""
        if kind in _RANGES:
            return self._range(left) if min_prec == 1 else left
        raise self.unsupported(self.i, *_BITWISE[kind])

    def _cast(self, value: A.Expr) -> A.Expr:
        """``value as T`` (repeated: ``x as i64 as f32``)."""
        while self.k[self.i] == "as":
            self.i += 1
            ty = self.parse_type()
            value = A.Cast(value, ty, (value.span[0], ty.span[1]))
        return value

    def _range(self, start: A.Expr | None) -> A.Range:
        """``start..stop`` / ``start..=stop`` / ``start..`` (``self.i`` is at the ``..``)."""
        i = self.i
        inclusive = self.k[i] == "..="
        self.i = i + 1
        stop = None
        if self.k[i + 1] not in _RANGE_END:
            stop = self.parse_expr()
        begin = start.span[0] if start is not None else self.e[i] - len(self.t[i])
        return A.Range(start, stop, inclusive, (begin, stop.span[1] if stop is not None else self.e[i]))

    def parse_operand(self) -> A.Expr:
        k = self.k
        i = self.i
        kind = k[i]
        if kind == "-" or kind == "!":
            ops = []
            while kind == "-" or kind == "!":
                ops.append(i)
                i += 1
                kind = k[i]
            self.i = i
            expr = self.parse_operand()
            e = self.e
            for oi in reversed(ops):
                expr = A.Unary(k[oi], expr, (e[oi] - 1, expr.span[1]))  # `-` or `!`
            return expr
        expr = self.parse_primary()
        kind = k[self.i]
        if kind in _POSTFIX:
            return self._postfix(expr, kind)
        if kind == "{" and type(expr) is _Name and self.is_struct_lit(self.i - 1):
            return self._postfix(self.parse_struct_lit(self.i - 1), k[self.i])
        return expr

    def _postfix(self, expr: A.Expr, kind: str) -> A.Expr:
        """Attribute accesses, paths, calls and indexing after an operand; ``kind`` is the token
        after it (nothing happens unless it is one of ``_POSTFIX``)."""
        k = self.k
        dotted = expr.id if type(expr) is _Name else None  # type: ignore[attr-defined]
        while True:
            if kind == "." or kind == "::":  # `math::sin` names what `math.sin` does
                if kind == "::" and self.nopath:
                    return expr
                j = self.i + 1
                if k[j] != "IDENT":
                    self.i = j
                    raise self._unexpected(f"a name after `{kind}`", "e.g. `tensor.matmul(a, b)`")
                attr = self.t[j]
                expr = _Attribute(expr, attr, (expr.span[0], self.e[j]))
                dotted = dotted + "." + attr if dotted is not None else None
                self.i = j + 1
            elif kind == "(":
                expr = self._call(expr, dotted)
                dotted = None
            elif kind == "[":
                expr = self.parse_index(expr)
                dotted = None
            else:
                if kind == "?":
                    raise self.unsupported(self.i, "the `?` operator is not supported",
                                           "MIND has no fallible values: use the value itself")
                return expr
            kind = k[self.i]

    def _call(self, func: A.Expr, name: str | None) -> A.Call:
        k = self.k
        op = self.i
        depth = self.depth + 1
        self.depth = depth
        if depth > MAX_DEPTH:
            self._too_deep(op)
        i = op + 1
        self.i = i
        args: list[A.Expr] = []
        kwargs: list[A.Keyword] = []
        while k[i] != ")":
            if k[i] == "IDENT" and k[i + 1] == "=":
                self.i = i + 2
                value = self.parse_expr()
                kwargs.append(_Keyword(self.t[i], value,
                                       (self.e[i] - len(self.t[i]), value.span[1])))
            else:
                value = self.parse_expr()
                if kwargs:
                    raise _err_at(self, "E1010", "positional argument after a keyword argument",
                                  value.span, "put positional arguments first: "
                                  "`tensor.sum(x, axes=[0])`")
                args.append(value)
            i = self.i
            if k[i] != ",":
                break
            i += 1
            self.i = i
        if k[i] == ")":
            self.i = i + 1
        else:
            i = self._close(")", op, "`,` or `)`")
        self.depth -= 1
        return _Call(func, tuple(args), tuple(kwargs), name, (func.span[0], self.e[i]))

    def parse_primary(self) -> A.Expr:
        k = self.k
        i = self.i
        kind = k[i]
        if kind == "IDENT":
            self.i = i + 1
            return A.Name(self.t[i], (self.e[i] - len(self.t[i]), self.e[i]))
        if kind == "INT":
            self.i = i + 1
            return A.IntLit(self._int(i), (self.e[i] - len(self.t[i]), self.e[i]))
        if kind == "FLOAT":
            self.i = i + 1
            text = self.t[i]
            value = float(text)
            if value == float("inf"):
                raise self._err("E1005", f"float literal `{text}` is out of range", i,
                                "the largest finite f64 is about 1.8e308")
            return A.FloatLit(value, text, (self.e[i] - len(self.t[i]), self.e[i]))
        if kind == "(":
            return self._paren(i)
        if kind == "[":
            self._enter(i)
            self.i = i + 1
            outer = self.lit_open < 0
            if outer:
                self.lit_open, self.lit_leaves, self.lit_total = i, 0, 0
            elts: list[A.Expr] = []
            try:
                while k[self.i] != "]":
                    elt = self.parse_expr()
                    elts.append(elt)
                    if type(elt) is not A.ArrayLit:
                        self.lit_leaves += 1
                        self.lit_total += 1
                        if self.lit_leaves > MAX_TOKEN_LITERAL_ELEMENTS:
                            raise self._too_many_elements()
                    elif elt.dense is not None:
                        self.lit_total += elt.dense.count
                    if self.lit_total > MAX_LITERAL_ELEMENTS:
                        raise self._err("E1012", f"an array literal of more than {MAX_LITERAL_ELEMENTS} elements",
                                        self.lit_open, TOO_MANY_HELP)
                    if k[self.i] != ",":
                        break
                    self.i += 1
            finally:
                if outer:
                    self.lit_open = -1
            j = self._close("]", i, "`,` or `]`")
            self.depth -= 1
            return A.ArrayLit(tuple(elts), (self.e[i] - len(self.t[i]), self.e[j]))
        if kind == "DENSE":
            dense = self.toks.dense[self.e[i]]
            if dense.count > MAX_LITERAL_ELEMENTS:
                raise self._err("E1012", f"an array literal of {dense.count} elements: the limit is "
                                         f"{MAX_LITERAL_ELEMENTS}", i, TOO_MANY_HELP)
            if self.depth + dense.rank <= MAX_DEPTH:
                self.i = i + 1
                return A.ArrayLit(None, (dense.start, dense.end), dense, parse_dense)
            self._expand(i)  # too deep: the token path reports it
            return self.parse_primary()
        if kind == "true" or kind == "false":
            self.i = i + 1
            return A.BoolLit(kind == "true", (self.e[i] - len(self.t[i]), self.e[i]))
        if kind == "STR":
            self.i = i + 1
            return A.StrLit(_decode_string(self.t[i]), (self.e[i] - len(self.t[i]), self.e[i]))
        if kind == "|" or kind == "||":
            return self._closure(i)
        if kind == "if":
            return self.parse_if()
        if kind == "{":
            blk = self.parse_block()
            return A.BlockExpr(blk, blk.span)
        if kind == "RADIX":
            self.i = i + 1
            return A.IntLit(int(self.t[i].replace("_", ""), 0), (self.e[i] - len(self.t[i]), self.e[i]))
        if kind in _RANGES:
            return self._range(None)
        bad = UNSUPPORTED_PREFIX.get(kind)
        if bad is not None:
            raise self.unsupported(i, *bad)
        raise self._unexpected("an expression", _EXPR_HELP)

    def _paren(self, i: int) -> A.Expr:
        k = self.k
        self._enter(i)
        self.i = i + 1
        elts: list[A.Expr] = []
        trailing = False
        while k[self.i] != ")":
            elts.append(self.parse_expr())
            trailing = False
            if k[self.i] != ",":
                break
            self.i += 1
            trailing = True
        j = self._close(")", i, "`,` or `)`")
        self.depth -= 1
        if len(elts) == 1 and not trailing:
            return elts[0]
        return A.TupleExpr(tuple(elts), (self.e[i] - len(self.t[i]), self.e[j]))

    def _closure(self, i: int) -> A.Closure:
        k = self.k
        self._enter(i)
        params: list[A.Param] = []
        if k[i] == "||":
            self.i = i + 1
        else:
            self.i = i + 1
            while k[self.i] != "|":
                pi = self.i
                if k[pi] != "IDENT":
                    raise self._unexpected("a parameter name or `|`",
                                           "closures look like `|a, b| f(a, b)`")
                self.i += 1
                ty = None
                end = self.e[pi]
                if k[self.i] == ":":
                    self.i += 1
                    ty = self.parse_type()
                    end = ty.span[1]
                params.append(A.Param(self.t[pi], ty, (self.e[pi] - len(self.t[pi]), end)))
                if k[self.i] != ",":
                    break
                self.i += 1
            self._close("|", i, "`,` or `|`")
        body = self.parse_expr()
        self.depth -= 1
        return A.Closure(tuple(params), body, (self.e[i] - len(self.t[i]), body.span[1]))


def _err_at(p: _Parser, code: str, message: str, span: A.Offsets, help: str | None) -> _Abort:
    return _Abort(Diagnostic(code, message, p.src.span(span), help=help))


def _run(toks: Tokens, what: str) -> A.Node:
    p = _Parser(toks)
    src = toks.source
    try:
        if what == "module":
            node: A.Node = p.parse_module()
        else:
            try:
                node = p.parse_expr() if what == "expr" else p.parse_type()
                while p.k[p.i] == "NL" or p.k[p.i] == ";":
                    p.i += 1
                if p.k[p.i] != "EOF":
                    raise p._unexpected("end of input")
            except _Abort as ab:
                p.errors.append(ab.diag)
    except _Stop:
        pass
    except RecursionError:  # pragma: no cover - MAX_DEPTH keeps far from the limit
        p.errors.append(Diagnostic("E1012", "input is nested too deeply",
                                   src.span(0, 1)))
    if p.errors:
        raise MindError(p.errors, {src.file: src.text})
    return node


def _dense_tokens(dense: DenseArray) -> Tokens:
    """The ordinary tokens of a bulk-read literal, at its offsets in the whole source."""
    toks = tokenize(dense.text, dense.source.file, dense=False)
    shift = dense.start
    return Tokens(toks.kinds, toks.texts, [s + shift for s in toks.starts], [e + shift for e in toks.ends],
                  dense.source)


def parse_dense(dense: DenseArray) -> tuple[A.Expr, ...]:
    """The element nodes of a bulk-read literal, as the token path parses them (``ast.ArrayLit.elts``)."""
    p = _Parser(_dense_tokens(dense))
    node = p.parse_primary()
    assert type(node) is A.ArrayLit, node  # the literal was validated by ``literals.find_dense``
    return node.elts


def parse_tokens(toks: Tokens) -> A.Module:
    return _run(toks, "module")  # type: ignore[return-value]


def parse(source: str | bytes, filename: str = "<input>") -> A.Module:
    """Parse a whole MIND source file (either surface syntax) into an ``ast.Module``."""
    return _run(tokenize(source, filename), "module")  # type: ignore[return-value]


def parse_expr(source: str | bytes, filename: str = "<input>") -> A.Expr:
    """Parse a single expression (the whole input)."""
    return _run(tokenize(source, filename), "expr")  # type: ignore[return-value]


def parse_type(source: str | bytes, filename: str = "<input>") -> A.Type:
    """Parse a single type (the whole input)."""
    return _run(tokenize(source, filename), "type")  # type: ignore[return-value]
