"""The MIND lexer: one compiled regular expression, one pass, precise character offsets.

Tokens are kept in four parallel lists (``kinds``, ``texts``, ``starts``, ``ends``) instead of one
object per token: that is what keeps lexing of a benchmark program in the low microseconds.
The fast path of a text without comments leaves ``starts`` to be computed on first read (as
``ends[i] - len(texts[i])``); the parser computes the start offsets it needs the same way.

Token kinds
    * punctuation and operators: the kind is the text itself (``"("``, ``"->"``, ``"=="`` ...);
    * keywords (``KEYWORDS``): the kind is the word itself (``"let"``);
    * ``IDENT`` (ASCII or Unicode letters: XID_Start/XID_Continue, checked after the match),
      ``INT``, ``RADIX`` (``0x2A``, ``0b1010``, ``0o52``), ``FLOAT``, ``STR`` (text is the raw
      source, quotes included);
    * ``NL``: a statement-separating line break (see below), ``EOF`` at the end.

Newlines separate statements (as ``;`` does), except inside ``(...)`` and ``[...]``, where they
are plain whitespace; runs of line breaks produce one ``NL`` token, and a line break before a token
that can only continue an expression (a binary operator other than ``-``, ``.``, ``as``) is dropped,
so ``a\n    + b`` is one statement.  A block comment that contains a
line break counts as a line break.  Words such as ``Tensor``, ``tensor``, ``diff``, ``f32`` are not
keywords: they are identifiers with a meaning in type position only (``CONTEXTUAL``).

Lexical errors (E1001-E1006) are all collected (up to ``MAX_ERRORS``) and raised together as one
``MindError``.

Large numeric array literals (``literals.find_dense``) become one ``DENSE`` token each (its text
is the literal's source text; ``Tokens.dense`` maps its end offset to the ``DenseArray``): the
text is lexed with each such literal blanked to ``[   ]``, and the two bracket tokens are replaced by
the ``DENSE`` token, after checking they are tokens of the program (not inside a comment or a
string).  ``tokenize(..., dense=False)`` lexes everything token by token.

Speed: ``tokenize`` first tries a fast path that does no per-token Python work on valid input:
one ``findall`` with a regex that has only the *valid* token alternatives of ``_TOKEN_PATTERN``
(in an equivalent order), offsets rebuilt from the match lengths with ``itertools.accumulate``, kinds
looked up in a (self-filling) dict keyed by token text, and line breaks filtered by a bracket-depth
prefix sum.  If the matches do not tile the whole text (there is a lexical error somewhere) the
precise single-pass lexer (``_tokenize_precise``) runs instead and produces the diagnostics; when a
line break lies inside brackets, a small loop over the already split tokens applies the newline
rules.  ``tests/frontend/test_frontend_speed_equivalence.py`` checks both paths agree.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import cache
from itertools import accumulate, chain, repeat
from operator import itemgetter, sub

from mind.diagnostics import Diagnostic, MindError, Span

from .literals import DENSE_MIN_CHARS, DenseArray, find_dense

__all__ = [
    "KEYWORDS", "CONTEXTUAL", "PUNCTUATION", "Tokens", "SourceMap", "tokenize", "decode_source",
    "MAX_SOURCE_CHARS", "MAX_ERRORS",
]

#: Reserved words: they cannot be used as names.
KEYWORDS: frozenset[str] = frozenset({
    "fn", "let", "return", "import", "true", "false",
    "mut", "if", "else", "for", "in", "while", "loop", "break", "continue", "struct", "pub", "as",
    "const", "match",
})

#: Identifiers with a meaning in type position (and ``Custom``/``Valid``/``Same`` in expressions
#: are plain names).  They remain usable as ordinary names elsewhere.
CONTEXTUAL: frozenset[str] = frozenset({"Tensor", "tensor", "diff", "i32", "i64", "f32", "f64",
                                        "bool", "use", "range", "rev", "step_by", "unit"})

#: Every punctuation / operator token the lexer produces.
PUNCTUATION: frozenset[str] = frozenset({
    "->", "::", "==", "!=", "<=", ">=", "&&", "||", "..", "..=", "...",
    "+=", "-=", "*=", "/=", "%=",
    "+", "-", "*", "/", "%", "@", "<", ">", "=", "!", ",", ";", ":", ".", "|", "?", "#", "&", "^",
    "(", ")", "[", "]", "{", "}",
})

#: Resource limits (E1012).
MAX_SOURCE_CHARS = 8 * 1024 * 1024
MAX_ERRORS = 20

_DIGITS = r"\d(?:_?\d)*"
_EXP = r"[eE][+-]?\d(?:_?\d)*"
# `0x2A`, `0b1010`, `0o52` (digits may be separated by single `_`); kind RADIX, value ``int(t, 0)``
_RADIX = r"0(?:[xX][0-9a-fA-F](?:_?[0-9a-fA-F])*|[bB][01](?:_?[01])*|[oO][0-7](?:_?[0-7])*)(?![\w.])"
_ESCAPE_OK = r"""\\(?:[\\"'ntr0]|u\{[0-9a-fA-F]{1,6}\})"""

# The precise patterns are compiled on first use (``_token_re()``, ``_bad_escape_re()``), not
# when the module is imported: only text with a lexical error needs them (see ``tokenize``).

# Leading trivia (spaces, tabs, line comments, newline-free block comments) is folded into every
# match, so the Python loop runs once per token.  Alternatives are ordered by frequency.
_TOKEN_PATTERN = (
    r"(?:[ \t\r\f\v]+|//[^\n]*|/\*(?:[^*\n]|\*(?!/))*\*/)*+"
    r"(?:"
    r"(?P<IDENT>[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_\x80-\U0010ffff]*)"
    r"|(?P<P>->|::|==|!=|<=|>=|&&|\|\||\.\.[.=]?|[-+*/%]=|[-+*%@<>=!,;:|?#&^]|\.(?!\d)|/(?!\*))"
    r"|(?P<OPEN>[(\[{])"
    r"|(?P<CLOSE>[)\]}])"
    rf"|(?P<FLOAT>(?:(?:{_DIGITS})?\.{_DIGITS}(?:{_EXP})?|{_DIGITS}{_EXP}|{_DIGITS}\.(?![\w.]))(?![\w.]))"
    rf"|(?P<RADIX>{_RADIX})"
    rf"|(?P<INT>{_DIGITS}(?!\w|\.\d))"
    r"|(?P<NL>\n|/\*[^*]*(?:\*(?!/)[^*]*)*\*/)"
    rf"|(?P<STR>\"(?:[^\"\\\n]|{_ESCAPE_OK})*\")"
    r"|(?P<BADNUM>\.?\d(?:[\w.]|(?<=[eE])[+-])*)"
    r"|(?P<BADSTR>\"(?:[^\"\\\n]|\\[^\n])*\")"
    r"|(?P<UNTERM>\"(?:[^\"\\\n]|\\[^\n])*\\?)"
    r"|(?P<UNTERMC>/\*)"
    r"|(?P<EOF>\Z)"
    r"|(?P<ERR>.)"
    r")"
)


@cache
def _token_re() -> re.Pattern[str]:
    return re.compile(_TOKEN_PATTERN, re.DOTALL | re.ASCII)


@cache
def _bad_escape_re() -> re.Pattern[str]:
    return re.compile(_ESCAPE_OK + r"|(\\[^\n]?)")


_OPENERS = {"(": ")", "[": "]", "{": "}"}
_RADIX_MARKS = frozenset("xXbBoO")

# The fast path: the valid alternatives of _TOKEN_PATTERN only, without groups, most frequent first.
# Reordering is safe because alternatives that can start with the same character keep their
# relative order (multi-character operators before one-character ones, FLOAT before INT) or are
# disjoint by a lookahead (`.` vs `.5`, `/` vs `/*`).  A position where _TOKEN_PATTERN would produce an
# error token matches nothing here, so ``findall`` skips it and the matches do not tile the text.
# The third alternative is a shortcut for the most frequent number, digits not followed by a word
# character or `.`: no FLOAT alternative matches there, and INT matches exactly those digits.
_VALID = (
    r"[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_\x80-\U0010ffff]*+"  # (non-ASCII: checked after)
    r"|[(\[{)\]},;\n@?#^]"  # one-character tokens that never start a longer one
    r"|[+*%]=?"
    r"|\d++(?![\w.])"  # a plain integer: FLOAT cannot match it and INT matches exactly it
    # operators: the longer form first (`->?` is `->` or `-`)
    r"|-[>=]?|::?|==?|!=?|<=?|>=?|&&?|\|\|?|\.\.[.=]?|\.(?!\d)|/=|/(?!\*)"
    rf"|{_RADIX}"
    rf"|(?:(?:{_DIGITS})?\.{_DIGITS}(?:{_EXP})?|{_DIGITS}{_EXP}|{_DIGITS}\.(?![\w.]))(?![\w.])"
    rf"|{_DIGITS}(?!\w|\.\d)"
    rf"|\"(?:[^\"\\\n]|{_ESCAPE_OK})*\""
)
# Text without `//` and `/*`: trivia is blanks only, one string per token (blanks + token).
_FAST_BLANK = r"[ \t\r\f\v]*+(?:{valid}|\Z)"
# Text with comments: (trivia, token) pairs; a block comment spanning lines is a line break.
_FAST_TRIVIA = (r"((?:[ \t\r\f\v]+|//[^\n]*|/\*(?:[^*\n]|\*(?!/))*\*/)*+)"
                r"({valid}|/\*[^*]*(?:\*(?!/)[^*]*)*\*/|\Z)")
# Each in two forms: for any text, and for ASCII text (most programs), whose identifier class has
# no range beyond ASCII for the matcher to test (the forms match the same on ASCII text).  The forms
# for any text are compiled when a text first needs them: their class up to U+10FFFF takes ``re``
# about 5 ms each to compile, which every fresh process paid at import for programs that are ASCII.
_VALID_ASCII = _VALID.replace(r"\x80-\U0010ffff", "")


@cache
def _fast_unicode_re(trivia: bool) -> re.Pattern[str]:
    return re.compile((_FAST_TRIVIA if trivia else _FAST_BLANK).format(valid=_VALID), re.DOTALL | re.ASCII)


_FAST_BLANK_ASCII_RE = re.compile(_FAST_BLANK.format(valid=_VALID_ASCII), re.DOTALL | re.ASCII)
_FAST_TRIVIA_ASCII_RE = re.compile(_FAST_TRIVIA.format(valid=_VALID_ASCII), re.DOTALL | re.ASCII)
_BLANKS = " \t\r\f\v"
_SECOND = itemgetter(1)
_DEPTH = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}
_KIND_CACHE_LIMIT = 4096
# A leading line break (``match``) or a repeated one (``search``).  Two patterns rather than one
# alternation: a pattern that starts with a literal `\n` is searched for with a fast scan.
_LEAD_NL_RE = re.compile(r"[ \t\r\f\v]*+\n")
_REPEATED_NL_RE = re.compile(r"\n[ \t\r\f\v]*+\n")
_STRUCTURE = {c: None for c in range(128) if chr(c) not in "()[]{}\n"}


class _KindTable(dict):
    """Token text -> kind.  Punctuation, keywords, ``"\\n"`` and ``""`` are fixed entries; other
    (valid) texts are classified on first sight and remembered, up to a size limit."""

    __slots__ = ("base",)

    def __init__(self, base: dict[str, str]) -> None:
        super().__init__(base)
        self.base = base

    def __missing__(self, text: str) -> str:
        c = text[0]
        if c == '"':
            return "STR"
        if c == "/":  # a block comment containing a line break
            return "NL"
        if "0" <= c <= "9" or c == ".":
            kind = "INT" if text.replace("_", "").isdigit() else (
                "RADIX" if text[1:2] in _RADIX_MARKS else "FLOAT")
        else:
            kind = "IDENT"
        if len(text) <= 64:
            if len(self) >= _KIND_CACHE_LIMIT:
                self.clear()
                self.update(self.base)
            self[text] = kind
        return kind


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


class SourceSpan(Span):
    """The ``Span`` of an op the frontend emitted, resolved to lines and columns on first read.

    Why lazy: every op of a program carries its source range (so a runtime error, an audit finding
    or a bisection names the source line of the op, not only its function), but turning an offset
    into a line and column for every op would cost the frontend more than the rest of its work on
    a small program; almost no span is ever read.  It equals, hashes and pickles as the plain
    ``Span`` it resolves to."""

    __slots__ = ("_map", "_off", "_resolved")
    _fields = Span._fields

    def __init__(self, source: SourceMap, off: tuple[int, int]) -> None:
        _SET_MAP(self, source)
        _SET_OFF(self, off)

    @classmethod
    def at(cls, source: SourceMap, off: tuple[int, int]) -> "SourceSpan":
        """``SourceSpan(source, off)`` without a Python ``__init__`` frame (the elaborator makes one
        per op)."""
        span = _NEW(cls)
        _SET_MAP(span, source)
        _SET_OFF(span, off)
        return span

    def resolved(self) -> Span:
        """The plain ``Span`` this stands for."""
        try:
            return self._resolved
        except AttributeError:
            span = self._map.span(self._off)
            object.__setattr__(self, "_resolved", span)
            return span

    file = property(lambda self: self.resolved().file)
    line = property(lambda self: self.resolved().line)
    col = property(lambda self: self.resolved().col)
    end_line = property(lambda self: self.resolved().end_line)
    end_col = property(lambda self: self.resolved().end_col)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Span):
            return self._values() == other._values()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __reduce__(self) -> tuple:
        return (Span, self._values())


_NEW = object.__new__
_SET_MAP = SourceSpan._map.__set__  # type: ignore[attr-defined]
_SET_OFF = SourceSpan._off.__set__  # type: ignore[attr-defined]


class Tokens:
    """The token stream of one source: parallel lists plus the source map, and the bulk-read
    array literals of its ``DENSE`` tokens by end offset."""

    __slots__ = ("kinds", "texts", "_starts", "ends", "source", "dense")

    def __init__(self, kinds: list[str], texts: list[str], starts: list[int] | None,
                 ends: list[int], source: SourceMap) -> None:
        self.kinds = kinds
        self.texts = texts
        self._starts = starts  # None: ``ends[i] - len(texts[i])`` (computed when first read)
        self.ends = ends
        self.source = source
        self.dense: dict[int, DenseArray] = {}

    @property
    def starts(self) -> list[int]:
        """Start offsets.  The fast lexer leaves them to be computed from ``ends`` and ``texts``
        (exact there: it gives ``None`` only when no token's text was rewritten)."""
        starts = self._starts
        if starts is None:
            starts = self._starts = list(map(sub, self.ends, map(len, self.texts)))
        return starts

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


def _char_message(ch: str) -> str:
    if ch.isprintable() and not ch.isspace():
        return f"invalid character `{ch}` (U+{ord(ch):04X})"
    return f"invalid character U+{ord(ch):04X}"


def _bad_ident_char(ch: str, s: int, source: SourceMap, errors: list[Diagnostic]) -> None:
    errors.append(_diag("E1002", _char_message(ch), source, s, s + 1,
                        "identifiers consist of letters, digits and `_` (Unicode XID_Start / "
                        "XID_Continue), and do not start with a digit"))


def _lex_error(k: str, m: re.Match[str], source: SourceMap, errors: list[Diagnostic]) -> None:
    s, e = m.span(k)
    if k == "ERR":
        ch = m.group(k)
        hint = "string literals use double quotes" if ch in "'`" else None
        errors.append(_diag("E1002", _char_message(ch), source, s, e, hint))
    elif k == "BADNUM":
        errors.append(_diag("E1005", f"invalid numeric literal `{m.group(k)}`", source, s, e,
                            "numbers look like `42`, `1_000`, `0x2A`, `0b1010`, `0o52`, `3.14`, `2.`, `.5` or `1e-3`"))
    elif k == "BADSTR":
        raw = m.group(k)
        for em in _bad_escape_re().finditer(raw):
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


_KINDS = _KindTable({**{p: p for p in PUNCTUATION}, **{w: w for w in KEYWORDS},
                     "\n": "NL", "": "EOF"})


def tokenize(data: str | bytes, filename: str = "<input>", *, dense: bool = True) -> Tokens:
    """Split ``data`` into tokens; raises ``MindError`` with every lexical error found.  With
    ``dense``, large numeric array literals are single ``DENSE`` tokens (module docstring)."""
    text = data if type(data) is str and not data.startswith("\ufeff") \
        else decode_source(data, filename)
    n = len(text)
    if n > MAX_SOURCE_CHARS:
        raise MindError([_diag("E1012", f"input is too large ({n} characters; the limit is "
                               f"{MAX_SOURCE_CHARS})", SourceMap(filename, text), 0, 1)],
                        {filename: text})
    source = SourceMap(filename, text)
    if dense and n >= DENSE_MIN_CHARS and "[" in text:
        regions = find_dense(text, source)
        for _ in range(2):  # a region inside a comment or a string is dropped, once
            if not regions:
                break
            toks = _tokenize(_blanked(text, regions), source)
            kept = [r for r in regions if _is_token_pair(toks, r)]
            if len(kept) == len(regions):
                return _with_dense(toks, regions)
            regions = kept
    return _tokenize(text, source)


def _blanked(text: str, regions: list[DenseArray]) -> str:
    """``text`` with each region replaced by ``[``, blanks and ``]`` (same offsets)."""
    parts = []
    pos = 0
    for r in regions:
        parts += [text[pos:r.start], "[", " " * (r.end - r.start - 2), "]"]
        pos = r.end
    parts.append(text[pos:])
    return "".join(parts)


def _is_token_pair(toks: Tokens, r: DenseArray) -> bool:
    """Whether the blanked region ``r`` lexed as a ``[`` token and the ``]`` token right after it."""
    j = bisect_right(toks.ends, r.start + 1) - 1
    return j >= 0 and toks.ends[j] == r.start + 1 and toks.kinds[j] == "[" \
        and j + 1 < len(toks.kinds) and toks.kinds[j + 1] == "]" and toks.ends[j + 1] == r.end


def _with_dense(toks: Tokens, regions: list[DenseArray]) -> Tokens:
    """Replace each region's bracket pair by one ``DENSE`` token (the last region first)."""
    kinds, texts, ends, starts = toks.kinds, toks.texts, toks.ends, toks._starts
    text = toks.source.text
    for r in reversed(regions):
        j = bisect_right(ends, r.start + 1) - 1
        kinds[j:j + 2] = ["DENSE"]
        texts[j:j + 2] = [text[r.start:r.end]]
        ends[j:j + 2] = [r.end]
        if starts is not None:
            starts[j:j + 2] = [r.start]
        toks.dense[r.end] = r
    return toks


def _tokenize(scan: str, source: SourceMap) -> Tokens:
    """Tokens of ``scan``, which is ``source.text`` or has the same length (with blanked regions)."""
    text = scan
    n = len(text)
    plain = '"' not in text
    is_ascii = text.isascii()
    if "//" in text or "/*" in text:
        plain = False
        pairs = (_FAST_TRIVIA_ASCII_RE if is_ascii else _fast_unicode_re(True)).findall(text)
        offs = list(accumulate(map(len, chain.from_iterable(pairs))))
        if offs[-1] != n:  # a lexical error somewhere
            return _tokenize_precise(text, source)
        texts = list(map(_SECOND, pairs))
        starts = offs[0::2]
        ends = offs[1::2]
    else:
        raw = (_FAST_BLANK_ASCII_RE if is_ascii else _fast_unicode_re(False)).findall(text)
        ends = list(accumulate(map(len, raw)))
        if ends[-1] != n:
            return _tokenize_precise(text, source)
        texts = list(map(str.lstrip, raw, repeat(_BLANKS)))
        starts = None  # no comments: every text is the source text (see ``Tokens.starts``)
    if len(texts) > 1 and not texts[-2]:  # `\Z` matched twice (after trailing trivia)
        del texts[-1], ends[-1]
        if starts is not None:
            del starts[-1]
    kinds = list(map(_KINDS.__getitem__, texts))
    if not is_ascii and _bad_identifier(kinds, texts) is not None:
        return _tokenize_precise(text, source)  # it makes the diagnostic
    nl = text.find("\n")
    if nl >= 0 and not (plain and (
            # one line break, at the very end, not leading and with no bracket open: it is kept
            (nl == n - 1 and kinds[0] != "NL" and "(" not in text and "[" not in text
             and "{" not in text) or _newlines_all_separate(text))):
        return _join_continuations(_newlines(kinds, texts, starts, ends, source))
    if nl < 0 or nl == n - 1:  # no line break, or one at the very end: no line to continue
        return Tokens(kinds, texts, starts, ends, source)
    return _join_continuations(Tokens(kinds, texts, starts, ends, source))


def _bad_identifier(kinds: list[str], texts: list[str]) -> int | None:
    """The index of the first token that the identifier pattern matched but that is no identifier
    (non-ASCII characters are allowed only where Unicode's XID_Start / XID_Continue allow them)."""
    for i, (kind, t) in enumerate(zip(kinds, texts)):
        if kind == "IDENT" and not t.isascii() and _bad_char(t) is not None:
            return i
    return None


def _bad_char(word: str) -> int | None:
    """The offset of the first character of ``word`` that cannot be part of an identifier there."""
    if not word.isidentifier():
        if not word[0].isidentifier():
            return 0
        for j in range(1, len(word)):
            if not ("a" + word[j]).isidentifier():
                return j
    return None


#: Tokens that cannot start a statement but continue an expression: a line break before one of them
#: does not end the statement (``a\n    + b``, ``x\n    .sum()``).  ``-`` is not one (it may start
#: an expression).
_CONTINUATION = frozenset({"+", "*", "/", "%", "@", "&&", "||", "==", "!=", "<", "<=", ">", ">=",
                           ".", "as", "?"})


# a line whose first token may continue the previous line (checked on the text first: cheap)
_CONTINUATION_LINE_RE = re.compile(r"\n[ \t\r\f\v]*+(?:[-+*/%@&|=!<>.?]|as\b)")


def _join_continuations(toks: Tokens) -> Tokens:
    kinds = toks.kinds
    if _CONTINUATION_LINE_RE.search(toks.source.text) is None or "NL" not in kinds:
        return toks
    texts, ends, starts = toks.texts, toks.ends, toks._starts
    j = kinds.index("NL")
    drop = []
    while True:
        if kinds[j + 1] in _CONTINUATION:
            drop.append(j)
        try:
            j = kinds.index("NL", j + 1)
        except ValueError:
            break
    for j in reversed(drop):
        del kinds[j], texts[j], ends[j]
        if starts is not None:
            del starts[j]
    return toks


def _newlines_all_separate(text: str) -> bool:
    """For a text without comments and strings (so every ``\\n`` is an NL token and every bracket
    character a bracket token): true when every line break is a statement separator that is kept,
    i.e. none is inside brackets, leading or repeated.  (False means: apply the rules.)"""
    if _LEAD_NL_RE.match(text) or _REPEATED_NL_RE.search(text):
        return False
    brackets = text.translate(_STRUCTURE)  # brackets and line breaks only
    for _ in range(8):  # removes matched pairs, innermost first (8 levels, then give up)
        reduced = brackets.replace("()", "").replace("[]", "").replace("{}", "")
        if reduced == brackets:
            return not reduced.replace("\n", "")
        brackets = reduced
    return False


def _newlines(kinds: list[str], texts: list[str], starts: list[int] | None, ends: list[int],
              source: SourceMap) -> Tokens:
    """Drops the NL tokens that do not separate statements (leading, repeated, inside ``()`` or
    ``[]``); multi-line block comments become ``"\\n"``."""
    count = kinds.count("NL")
    if count:
        nls = []
        j = -1
        for _ in range(count):
            j = kinds.index("NL", j + 1)
            nls.append(j)
        depth = list(accumulate(map(_DEPTH.get, kinds, repeat(0))))
        if min(depth) < 0 or any(map(depth.__getitem__, nls)):
            # a line break inside brackets (or a stray closer): apply the rules token by token
            return _filter_newlines(kinds, texts, starts, ends, source)
        for j in reversed(nls):  # no brackets open: only leading and repeated breaks go
            if j == 0 or kinds[j - 1] == "NL":
                del kinds[j], texts[j], ends[j]
                if starts is not None:
                    del starts[j]
            elif texts[j] != "\n":
                texts[j] = "\n"
    return Tokens(kinds, texts, starts, ends, source)


def _filter_newlines(kinds: list[str], texts: list[str], starts: list[int] | None,
                     ends: list[int],
                     source: SourceMap) -> Tokens:
    """The newline rules of ``_tokenize_precise`` applied to an already split token list."""
    ok: list[str] = []
    ot: list[str] = []
    os_: list[int] = []
    oe: list[int] = []
    stack: list[str] = []
    last = "NL"
    if starts is None:
        starts = list(map(sub, ends, map(len, texts)))
    for kind, t, s, e in zip(kinds, texts, starts, ends):
        if kind == "NL":
            if last == "NL" or (stack and stack[-1] != "{"):
                continue
            t = "\n"
        elif kind in _OPENERS:
            stack.append(kind)
        elif kind == ")" or kind == "]" or kind == "}":
            if stack:
                stack.pop()
        ok.append(kind)
        ot.append(t)
        os_.append(s)
        oe.append(e)
        last = kind
    return Tokens(ok, ot, os_, oe, source)


def _tokenize_precise(text: str, source: SourceMap) -> Tokens:
    """The reference lexer: one ``finditer`` pass, every lexical error diagnosed (``text`` is
    ``source.text``, or has the same length with blanked regions)."""
    filename = source.file
    kinds: list[str] = []
    texts: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    ka, ta, sa, ea = kinds.append, texts.append, starts.append, ends.append
    stack: list[str] = []  # open brackets, to decide whether a newline separates statements
    errors: list[Diagnostic] | None = None
    last = "NL"  # suppresses leading and repeated NL tokens
    for m in _token_re().finditer(text):
        k = m.lastgroup
        if k == "IDENT":
            t = m.group(k)
            kind = t if t in KEYWORDS else k
            if not t.isascii():
                j = _bad_char(t)
                if j is not None:  # report the character, go on after it
                    if errors is None:
                        errors = []
                    _bad_ident_char(t[j], m.start(k) + j, source, errors)
                    if len(errors) >= MAX_ERRORS:
                        break
                    continue
        elif k == "RADIX":
            t = m.group(k)
            kind = k
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
        raise MindError(errors, {filename: source.text})
    if not kinds or kinds[-1] != "EOF":  # pragma: no cover - the EOF alternative always matches
        ka("EOF"); ta(""); sa(len(text)); ea(len(text))
    return _join_continuations(Tokens(kinds, texts, starts, ends, source))
