"""The MIND lexer: one compiled regular expression, one pass, precise character offsets.

Tokens are kept in four parallel lists (``kinds``, ``texts``, ``starts``, ``ends``) instead of one
object per token: that is what keeps lexing of a benchmark program in the low microseconds.

Token kinds
    * punctuation and operators: the kind is the text itself (``"("``, ``"->"``, ``"=="`` ...);
    * keywords (``KEYWORDS``): the kind is the word itself (``"let"``);
    * ``IDENT``, ``INT``, ``FLOAT``, ``STR`` (text is the raw source, quotes included);
    * ``NL``: a statement-separating line break (see below), ``EOF`` at the end.

Newlines separate statements (as ``;`` does), except inside ``(...)`` and ``[...]``, where they
are plain whitespace; runs of line breaks produce one ``NL`` token.  A block comment that contains a
line break counts as a line break.  Words such as ``Tensor``, ``tensor``, ``diff``, ``f32`` are not
keywords: they are identifiers with a meaning in type position only (``CONTEXTUAL``).

Lexical errors (E1001-E1006) are all collected (up to ``MAX_ERRORS``) and raised together as one
``MindError``.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from mind.diagnostics import Diagnostic, MindError, Span

__all__ = [
    "KEYWORDS", "CONTEXTUAL", "PUNCTUATION", "Tokens", "SourceMap", "tokenize", "decode_source",
    "MAX_SOURCE_CHARS", "MAX_ERRORS",
]

#: Reserved words: they cannot be used as names.
KEYWORDS: frozenset[str] = frozenset({"fn", "let", "return", "import", "true", "false"})

#: Identifiers with a meaning in type position (and ``Custom``/``Valid``/``Same`` in expressions
#: are plain names).  They remain usable as ordinary names elsewhere.
CONTEXTUAL: frozenset[str] = frozenset({"Tensor", "tensor", "diff", "i32", "i64", "f32", "f64",
                                        "bool"})

#: Every punctuation / operator token the lexer produces.
PUNCTUATION: frozenset[str] = frozenset({
    "->", "::", "==", "!=", "<=", ">=", "&&", "||",
    "+", "-", "*", "/", "@", "<", ">", "=", "!", ",", ";", ":", ".", "|", "?",
    "(", ")", "[", "]", "{", "}",
})

#: Resource limits (E1012).
MAX_SOURCE_CHARS = 8 * 1024 * 1024
MAX_ERRORS = 20

_DIGITS = r"\d(?:_?\d)*"
_EXP = r"[eE][+-]?\d(?:_?\d)*"
_ESCAPE_OK = r"""\\(?:[\\"'ntr0]|u\{[0-9a-fA-F]{1,6}\})"""

# Leading trivia (spaces, tabs, line comments, newline-free block comments) is folded into every
# match, so the Python loop runs once per token.  Alternatives are ordered by frequency.
_TOKEN_RE = re.compile(
    r"(?:[ \t\r\f\v]+|//[^\n]*|/\*(?:[^*\n]|\*(?!/))*\*/)*+"
    r"(?:"
    r"(?P<IDENT>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<P>->|::|==|!=|<=|>=|&&|\|\||[-+*@<>=!,;:|?]|\.(?!\d)|/(?!\*))"
    r"|(?P<OPEN>[(\[{])"
    r"|(?P<CLOSE>[)\]}])"
    rf"|(?P<FLOAT>(?:(?:{_DIGITS})?\.{_DIGITS}(?:{_EXP})?|{_DIGITS}{_EXP}|{_DIGITS}\.(?![\w.]))(?![\w.]))"
    rf"|(?P<INT>{_DIGITS}(?!\w|\.\d))"
    r"|(?P<NL>\n|/\*[^*]*(?:\*(?!/)[^*]*)*\*/)"
    rf"|(?P<STR>\"(?:[^\"\\\n]|{_ESCAPE_OK})*\")"
    r"|(?P<BADNUM>\.?\d(?:[\w.]|(?<=[eE])[+-])*)"
    r"|(?P<BADSTR>\"(?:[^\"\\\n]|\\[^\n])*\")"
    r"|(?P<UNTERM>\"(?:[^\"\\\n]|\\[^\n])*\\?)"
    r"|(?P<UNTERMC>/\*)"
    r"|(?P<EOF>\Z)"
    r"|(?P<ERR>.)"
    r")",
    re.DOTALL | re.ASCII,
)
_BAD_ESCAPE_RE = re.compile(_ESCAPE_OK + r"|(\\[^\n]?)")
_OPENERS = {"(": ")", "[": "]", "{": "}"}


class SourceMap:
    """Converts character offsets of one source text into 1-based ``Span``s (lazily)."""

    __slots__ = ("file", "text", "_line_starts")

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.text = text
        self._line_starts: list[int] | None = None

    def line_col(self, offset: int) -> tuple[int, int]:
        starts = self._line_starts
        if starts is None:
            starts = [0]
            text = self.text
            find = text.find
            i = find("\n")
            while i >= 0:
                starts.append(i + 1)
                i = find("\n", i + 1)
            self._line_starts = starts
        idx = bisect_right(starts, offset) - 1
        return idx + 1, offset - starts[idx] + 1

    def span(self, start: int | tuple[int, int], end: int | None = None) -> Span:
        """``span((start, end))`` or ``span(start, end)``: a diagnostics ``Span`` (end exclusive)."""
        if end is None:
            start, end = start  # type: ignore[misc]
        line, col = self.line_col(start)  # type: ignore[arg-type]
        if end <= start:  # type: ignore[operator]
            return Span(self.file, line, col, line, col + 1)
        eline, ecol = self.line_col(end)
        return Span(self.file, line, col, eline, ecol)

    def __repr__(self) -> str:
        return f"SourceMap({self.file!r}, {len(self.text)} chars)"


class Tokens:
    """The token stream of one source: parallel lists plus the source map."""

    __slots__ = ("kinds", "texts", "starts", "ends", "source")

    def __init__(self, kinds: list[str], texts: list[str], starts: list[int], ends: list[int],
                 source: SourceMap) -> None:
        self.kinds = kinds
        self.texts = texts
        self.starts = starts
        self.ends = ends
        self.source = source

    def __len__(self) -> int:
        return len(self.kinds)

    def pairs(self) -> list[tuple[str, str]]:
        """``(kind, text)`` for every token (for tests and debugging)."""
        return list(zip(self.kinds, self.texts))


def _diag(code: str, message: str, source: SourceMap, start: int, end: int,
          help: str | None = None) -> Diagnostic:
    return Diagnostic(code, message, source.span(start, end), help=help)


def decode_source(data: bytes | str, filename: str) -> str:
    """UTF-8 decode (E1001 on invalid bytes, pointing at the first bad byte); strips a BOM."""
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            prefix = bytes(data)[: exc.start].decode("utf-8", errors="replace")
            sm = SourceMap(filename, prefix)
            n = len(prefix)
            bad = bytes(data)[exc.start: exc.end]
            raise MindError([_diag(
                "E1001", f"invalid UTF-8 in input: byte 0x{bad[0]:02x} at byte offset {exc.start}",
                sm, n, n + 1, help="MIND source files must be encoded in UTF-8")],
                {filename: prefix}) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def _lex_error(k: str, m: re.Match[str], source: SourceMap, errors: list[Diagnostic]) -> None:
    s, e = m.span(k)
    if k == "ERR":
        ch = m.group(k)
        if ch.isprintable() and not ch.isspace():
            msg = f"invalid character `{ch}` (U+{ord(ch):04X})"
        else:
            msg = f"invalid character U+{ord(ch):04X}"
        if ch.isalpha():
            hint = "identifiers consist of ASCII letters, digits and `_`"
        elif ch == "&":
            hint = "the logical and operator is `&&`"
        elif ch in "'`":
            hint = "string literals use double quotes"
        else:
            hint = None
        errors.append(_diag("E1002", msg, source, s, e, hint))
    elif k == "BADNUM":
        errors.append(_diag("E1005", f"invalid numeric literal `{m.group(k)}`", source, s, e,
                            "numbers look like `42`, `1_000`, `3.14`, `2.`, `.5` or `1e-3`"))
    elif k == "BADSTR":
        raw = m.group(k)
        for em in _BAD_ESCAPE_RE.finditer(raw):
            if em.group(1) is not None:
                errors.append(_diag("E1004", f"invalid escape sequence `{em.group(1)}`", source,
                                    s + em.start(1), s + em.end(1),
                                    r'valid escapes are \\ \" \' \n \t \r \0 and \u{XXXX}'))
                break
    elif k == "UNTERM":
        errors.append(_diag("E1003", "unterminated string literal", source, s, s + 1,
                            'close the string with `"` before the end of the line'))
    else:  # UNTERMC
        errors.append(_diag("E1006", "unterminated block comment", source, s, s + 2,
                            "close the comment with `*/`"))


def tokenize(data: str | bytes, filename: str = "<input>") -> Tokens:
    """Split ``data`` into tokens; raises ``MindError`` with every lexical error found."""
    text = decode_source(data, filename)
    source = SourceMap(filename, text)
    if len(text) > MAX_SOURCE_CHARS:
        raise MindError([_diag("E1012", f"input is too large ({len(text)} characters; the limit is "
                               f"{MAX_SOURCE_CHARS})", source, 0, 1)], {filename: text})
    kinds: list[str] = []
    texts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    ka, ta, sa, ea = kinds.append, texts.append, starts.append, ends.append
    stack: list[str] = []  # open brackets, to decide whether a newline separates statements
    errors: list[Diagnostic] | None = None
    last = "NL"  # suppresses leading and repeated NL tokens
    for m in _TOKEN_RE.finditer(text):
        k = m.lastgroup
        if k == "IDENT":
            t = m.group(k)
            kind = t if t in KEYWORDS else k
        elif k == "P":
            kind = t = m.group(k)
        elif k == "OPEN":
            kind = t = m.group(k)
            stack.append(t)
        elif k == "CLOSE":
            kind = t = m.group(k)
            if stack:
                stack.pop()
        elif k == "INT" or k == "FLOAT" or k == "STR":
            t = m.group(k)
            kind = k
        elif k == "NL":
            if last == "NL" or (stack and stack[-1] != "{"):
                continue
            kind = k
            t = "\n"
        elif k == "EOF":
            s = m.end()
            ka("EOF"); ta(""); sa(s); ea(s)
            break
        else:
            if errors is None:
                errors = []
            _lex_error(k, m, source, errors)
            if len(errors) >= MAX_ERRORS:
                break
            continue
        ka(kind)
        ta(t)
        sa(m.start(k))
        ea(m.end())
        last = kind
    if errors:
        raise MindError(errors, {filename: text})
    if not kinds or kinds[-1] != "EOF":  # pragma: no cover - the EOF alternative always matches
        ka("EOF"); ta(""); sa(len(text)); ea(len(text))
    return Tokens(kinds, texts, starts, ends, source)
