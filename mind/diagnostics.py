"""Diagnostics: the one way every part of MIND reports bad input.

A diagnostic carries a stable code (see ``mind.spec.errors``), a message, an optional source span,
an optional spec constraint label (``matmul.C2``), a help line and notes.  It renders like rustc
for people and as plain data for ``--json``.  Code that finds bad input raises ``MindError`` with
one or more diagnostics; the CLI catches it, so no input ever yields a Python traceback.
"""

from __future__ import annotations

from typing import Any, Iterable

from mind.spec.errors import lookup
from mind.spec.record import FrozenRecord

# Span and Diagnostic are frozen records (``mind.spec.record.FrozenRecord``: immutable and hashable
# by value, with the constructors, fields, ``repr`` and equality that ``@dataclass(frozen=True)``
# gave them); MindError is compared by value and unhashable.  None is a dataclass, so that importing
# this module (which everything does) does not build dataclasses or import ``inspect``.


class Span(FrozenRecord):
    """A half-open range of one source text; lines and columns are 1-based, columns count characters."""

    __slots__ = ("file", "line", "col", "end_line", "end_col")

    def __init__(self, file: str, line: int, col: int, end_line: int | None = None,
                 end_col: int | None = None) -> None:
        object.__setattr__(self, "file", file)
        object.__setattr__(self, "line", line)
        object.__setattr__(self, "col", col)
        object.__setattr__(self, "end_line", end_line)
        object.__setattr__(self, "end_col", end_col)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.col,
            "end_line": self.end_line if self.end_line is not None else self.line,
            "end_column": self.end_col if self.end_col is not None else self.col + 1,
        }


class Diagnostic(FrozenRecord):
    """One finding: code, message, optional span, spec constraint label (e.g. ``"matmul.C2"``),
    help line, notes and severity."""

    __slots__ = ("code", "message", "span", "label", "help", "notes", "severity")

    def __init__(self, code: str, message: str, span: Span | None = None, label: str | None = None,
                 help: str | None = None, notes: tuple[str, ...] = (), severity: str = "error") -> None:
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "span", span)
        object.__setattr__(self, "label", label)
        object.__setattr__(self, "help", help)
        object.__setattr__(self, "notes", notes)
        object.__setattr__(self, "severity", severity)
        lookup(code)  # unknown codes are programming errors, caught by the tests

    def to_json(self) -> dict[str, Any]:
        return {
            "severity": self.severity,
            "code": self.code,
            "title": lookup(self.code).title,
            "message": self.message,
            "label": self.label,
            "span": self.span.to_json() if self.span else None,
            "help": self.help,
            "notes": list(self.notes),
        }


class MindError(Exception):
    """Raised with every diagnostic found; ``sources`` maps file names to their text for rendering."""

    def __init__(self, diagnostics: list[Diagnostic], sources: dict[str, str] | None = None) -> None:
        self.diagnostics = diagnostics
        self.sources = {} if sources is None else sources
        super().__init__(diagnostics[0].message if diagnostics else "error")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MindError) and other.__class__ is self.__class__:
            return (self.diagnostics, self.sources) == (other.diagnostics, other.sources)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compared by value, so not hashable

    def __repr__(self) -> str:
        return f"MindError(diagnostics={self.diagnostics!r}, sources={self.sources!r})"

    def __str__(self) -> str:
        return render_all(self.diagnostics, self.sources, color=False)

    @property
    def codes(self) -> list[str]:
        return [d.code for d in self.diagnostics]


def error(code: str, message: str, span: Span | None = None, *, label: str | None = None,
          help: str | None = None, notes: Iterable[str] = (), source: str | None = None) -> MindError:
    """Build a ``MindError`` holding one diagnostic (callers ``raise error(...)``)."""
    diag = Diagnostic(code, message, span, label, help, tuple(notes))
    sources = {span.file: source} if (span is not None and source is not None) else {}
    return MindError([diag], sources)


def render(diag: Diagnostic, sources: dict[str, str] | None = None, *, color: bool = False) -> str:
    """Render one diagnostic in the rustc style: header, location, source line, carets, help."""
    bold, red, blue, cyan, reset = ("\x1b[1m", "\x1b[31m", "\x1b[34m", "\x1b[36m", "\x1b[0m") if color \
        else ("", "", "", "", "")
    label = f" [{diag.label}]" if diag.label else ""
    out = [f"{bold}{red}{diag.severity}[{diag.code}]{reset}{bold}: {diag.message}{label}{reset}"]
    span = diag.span
    if span is not None:
        out.append(f"{blue} --> {reset}{span.file}:{span.line}:{span.col}")
        text = (sources or {}).get(span.file)
        lines = text.split("\n") if text is not None else []
        if 1 <= span.line <= len(lines):
            src = lines[span.line - 1].replace("\t", " ")
            gutter = str(span.line)
            pad = " " * len(gutter)
            if span.end_line is None or span.end_line == span.line:
                end_col = span.end_col if span.end_col is not None else span.col + 1
            else:
                end_col = len(src) + 1
            width = max(1, end_col - span.col)
            src, col, width = _window(src, span.col, width)
            out.append(f"{blue}{pad} |{reset}")
            out.append(f"{blue}{gutter} |{reset} {src}")
            out.append(f"{blue}{pad} |{reset} {' ' * (col - 1)}{red}{'^' * width}{reset}")
    for note in diag.notes:
        out.append(f"  = note: {note}")
    if diag.help:
        out.append(f"  = {cyan}help{reset}: {diag.help}")
    return "\n".join(out)


#: A source line longer than this is shown as a window of ``WINDOW`` characters around the caret.
MAX_LINE_SHOWN = 120
WINDOW = 100


def _window(src: str, col: int, width: int) -> tuple[str, int, int]:
    """(the part of the line to show, the caret's column in it, the caret's width): a long line is
    cut around the caret, with ``...`` where it was cut."""
    if len(src) <= MAX_LINE_SHOWN:
        return src, col, width
    start = max(0, min(col - 1 - WINDOW // 3, len(src) - WINDOW))
    end = start + WINDOW
    shown = ("..." if start else "") + src[start:end] + ("..." if end < len(src) else "")
    caret = col - start + (3 if start else 0)
    return shown, caret, max(1, min(width, end - (col - 1)))


def render_all(diags: Iterable[Diagnostic], sources: dict[str, str] | None = None, *,
               color: bool = False) -> str:
    return "\n\n".join(render(d, sources, color=color) for d in diags)


def to_json(diags: Iterable[Diagnostic]) -> list[dict[str, Any]]:
    return [d.to_json() for d in diags]


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a character offset in ``text``."""
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col
