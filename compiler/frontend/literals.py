"""Large numeric array literals, read in bulk.

Why: read token by token, a literal costs some 7 µs and 500 bytes per element (the lexer's token
lists, an AST node and a ``Lit`` per element, a Python float per element): 30 s and 2 GB for four
million numbers.  So the lexer hands every bracketed literal of at least ``DENSE_MIN_CHARS``
characters that holds only numbers, commas, brackets and blanks to ``find_dense``, which checks
that it is rectangular and reads all its numbers at once with NumPy's text reader (correctly
rounded, as Python's ``float`` is).  The lexer then emits one ``DENSE`` token for it, the parser
one ``ArrayLit`` holding the ``DenseArray``, and the elaborator builds the constant from its
values in one vectorized step (``DenseArray.as_array``).

Exactness: the bulk path takes only literals it reads exactly as the token path would (decimal
numbers with at most one leading ``-``, integers of at most 18 digits, finite floats), and a value
that needs a per-element decision (out of range for the dtype, an integer inexact in a float
literal, a bool context) falls back to the token path: the parser's ``parse_dense`` parses the same text
into ordinary nodes, so results and diagnostics are the same by construction.

Resource limits (E1012): an array literal read in bulk holds at most ``MAX_LITERAL_ELEMENTS``
elements, one read token by token at most ``MAX_TOKEN_LITERAL_ELEMENTS``; larger data is passed as
an input array.
"""

from __future__ import annotations

import re
from functools import cache
from math import prod
from typing import Any

__all__ = ["DenseArray", "find_dense", "DENSE_MIN_CHARS", "MAX_LITERAL_ELEMENTS", "MAX_TOKEN_LITERAL_ELEMENTS",
           "TOO_MANY_HELP"]

DENSE_MIN_CHARS = 2048
"""Literals shorter than this go through the token path (the bulk path's fixed cost is larger)."""

MAX_DENSE_RANK = 32
"""Literals nested deeper are read token by token (no data is; it bounds the patterns ``_closer``
compiles and keeps a text of many ``[`` linear)."""

MAX_LITERAL_ELEMENTS = 1 << 20
"""The most elements of one array literal read in bulk (E1012)."""

MAX_TOKEN_LITERAL_ELEMENTS = 1 << 16
"""The most elements of one array literal read token by token (E1012): one not in the bulk form
(with comments, digit separators or trailing commas) costs some 9 µs and 450 bytes per element."""

TOO_MANY_HELP = ("pass large data as an input array instead: a parameter, given with "
                 "`mind run --input NAME=FILE.npy` or as an argument of the compiled function")

_RUN = re.compile(r"\[[\[\]0-9.eE_+\-, \t\r\n]{%d,}" % (DENSE_MIN_CHARS - 1))
_LEAD = re.compile(r"(?:\[[ \t\r\n]*)+")
_LONG_INT = re.compile(r",-?\d{19}")  # (in "," + the numbers) an integer of 19 digits or more
_INEXACT_INT = re.compile(r",(?:-?\d{8,}|-0+)(?=,|$)")  # an integer past 2**24 in f32, or -0 (read as 0)
_NUMBER_TEXT = re.compile(r"-?[0-9.][0-9.eE+\-]*")  # (in a validated literal: exactly its numbers)
_DROP_BLANKS = {ord(c): None for c in " \t\r\n"}
_DROP_BRACKETS = {ord("["): None, ord("]"): None}
_STRUCTURE = {c: None for c in range(128) if chr(c) not in "[],"}


class DenseArray:
    """A rectangular numeric array literal at ``source.text[start:end]``, read in bulk."""

    __slots__ = ("start", "end", "source", "shape", "kind", "values", "per_element")

    def __init__(self, start: int, end: int, source: Any, shape: tuple[int, ...], kind: str, values: Any,
                 per_element: bool = False) -> None:
        self.start = start
        self.end = end
        self.source = source  # the lexer.SourceMap of the whole text
        self.shape = shape
        self.kind = kind  # "int" or "float", as the token path's ArrLit.kind
        self.values = values  # int64 or float64, flat; None past MAX_LITERAL_ELEMENTS
        self.per_element = per_element  # a float literal holding an integer the token path may round

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def count(self) -> int:
        return prod(self.shape)

    @property
    def text(self) -> str:
        return self.source.text[self.start:self.end]

    def numbers(self) -> list[tuple[str, int, int]]:
        """Each element's text and source offsets, in order (what the token path's literal nodes
        hold: a sign belongs to its number, as ``-`` applied to a literal does)."""
        text = self.source.text
        return [(m.group(), m.start(), m.end()) for m in _NUMBER_TEXT.finditer(text, self.start, self.end)]

    def as_array(self, dtype: Any) -> Any:
        """The constant of ``dtype`` (a ``DType``), or None when each element needs the token
        path's decision (``numbers``): a bool context, an integer out of the dtype's range or
        perhaps inexact in it (past 2**24), a float in an integer context, or a float literal
        holding such an integer or ``-0`` (an integer, so the token path reads it as 0)."""
        import numpy as np

        v = self.values
        if v is None or dtype.name == "BOOL" or self.per_element:
            return None
        if self.kind == "int":
            if dtype.is_int:
                if v.size and (v.min() < dtype.int_min or v.max() > dtype.int_max):
                    return None
            elif v.size and np.abs(v).max() > 1 << 24:  # not every such integer is exact in f32/f64
                return None
        elif dtype.is_int:
            return None
        with np.errstate(over="ignore"):  # past f32's range: inf, as the token path rounds it
            return v.astype(dtype.numpy).reshape(self.shape)


def find_dense(text: str, source: Any) -> list[DenseArray]:
    """The bulk-readable literals of ``text`` (``source``: its SourceMap), in order, disjoint.
    A region inside a comment or a string may be among them: the lexer checks each region is
    tokens of the program (see ``lexer.tokenize``).

    Each maximal run of the literals' characters is scanned once; within it, a literal that is
    not bulk-readable (say, with a trailing comma) is tried again from its next ``[``, so its rows
    may be; the work is linear in the run for each level of nesting."""
    found: list[DenseArray] = []
    for run in _RUN.finditer(text):
        pos, run_end = run.start(), run.end()
        while run_end - pos >= DENSE_MIN_CHARS:
            start = text.find("[", pos, run_end)
            if start < 0:
                break
            lead = _LEAD.match(text, start, run_end)
            rank = lead.group().count("[")  # type: ignore[union-attr]
            if rank > MAX_DENSE_RANK:  # (the token path reports nesting past the parser's limit)
                pos = lead.end()  # type: ignore[union-attr]
                continue
            close = _closer(rank).search(text, lead.end(), run_end)  # type: ignore[union-attr]
            dense = None
            if close is not None and close.end() - start >= DENSE_MIN_CHARS:
                dense = _scan(text[start:close.end()], start, close.end(), rank, source)
            if dense is None:
                pos = start + 1  # an inner row may still be one
            else:
                found.append(dense)
                pos = dense.end
    return found


@cache
def _closer(rank: int) -> re.Pattern[str]:
    """The first run of ``rank`` closing brackets: in a rank-``rank`` literal, only its end."""
    return re.compile(r"\]" + r"[ \t\r\n]*\]" * (rank - 1))


def _scan(region: str, start: int, end: int, rank: int, source: Any) -> DenseArray | None:
    """``region`` as a DenseArray, or None when the token path must read it.

    ``find_dense`` saw only brackets, commas, blanks, digits, ``.``, ``e``, ``E``, ``+``, ``-`` and
    ``_``.  The token path then reads the same numbers as NumPy's reader when: there are no digit
    separators ``_``; every ``-`` is a sign (after ``[``, ``,`` or an exponent's ``e``) and every
    ``+`` an exponent's; there is no ``.e`` (``1.e5`` is not a MIND number); the brackets and
    commas make a rectangle without empty or trailing elements; and NumPy's reader, which fails
    on anything else (two numbers separated by blanks, ``1..2``, a lone ``e``, ``- 1``), reads one
    number per element."""
    if "_" in region:
        return None
    compact = region.translate(_DROP_BLANKS)
    count = compact.count
    if count("-") != count("[-") + count(",-") + count("e-") + count("E-") \
            or count("+") != count("e+") + count("E+") or ".e" in compact or ".E" in compact:
        return None
    if "[]" in compact or "[," in compact or ",," in compact or ",]" in compact:
        return None
    shape = _shape(compact.translate(_STRUCTURE), rank)
    if shape is None:
        return None
    kind = "float" if ("." in compact or "e" in compact or "E" in compact) else "int"
    if prod(shape) > MAX_LITERAL_ELEMENTS:
        return DenseArray(start, end, source, shape, kind, None)
    flat = "," + compact.translate(_DROP_BRACKETS)
    if kind == "int" and _LONG_INT.search(flat):
        return None  # an integer that int64 cannot hold
    per_element = kind == "float" and _INEXACT_INT.search(flat) is not None  # (see ``as_array``)
    import numpy as np

    try:  # blanks kept: the reader fails where they separate two numbers
        values = np.fromstring(region.translate(_DROP_BRACKETS), dtype=np.int64 if kind == "int" else np.float64,
                               sep=",")
    except ValueError:
        return None
    if values.size != prod(shape) or (kind == "float" and not np.isfinite(values).all()):
        return None  # (an infinite float is E1005 on the token path)
    return DenseArray(start, end, source, shape, kind, values, per_element)


def _shape(skeleton: str, rank: int) -> tuple[int, ...] | None:
    """The shape of a rectangular literal from its brackets and commas, or None.

    The separator between siblings ``g`` levels above the numbers is ``]``*g ``,`` ``[``*g, and
    it contains every narrower one once, so counting them gives the product of the extents at each
    level; the skeleton built from that shape must then equal the literal's."""
    at_least = [skeleton.count("]" * g + "," + "[" * g) for g in range(rank)] + [0]
    shape: list[int] = []
    outer = 1
    for g in range(rank - 1, -1, -1):  # outermost level first
        inner = outer + at_least[g] - at_least[g + 1]
        if inner % outer:
            return None
        shape.append(inner // outer)
        outer = inner
    built = "[" + "," * (shape[-1] - 1) + "]"
    for n in reversed(shape[:-1]):
        built = "[" + ",".join([built] * n) + "]"
    return tuple(shape) if built == skeleton else None
