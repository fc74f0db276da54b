"""Shared helpers for the frontend tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from mind.compiler.frontend.parser import parse
from mind.diagnostics import MindError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BENCH = EXAMPLES / "bench"


def errors_of(source: str | bytes, filename: str = "t.mind") -> list[tuple[str, int, int]]:
    """Parse ``source`` expecting failure; return ``(code, line, col)`` of every diagnostic."""
    with pytest.raises(MindError) as info:
        parse(source, filename)
    return [(d.code, d.span.line, d.span.col) for d in info.value.diagnostics]


def diags_of(source: str | bytes, filename: str = "t.mind"):
    with pytest.raises(MindError) as info:
        parse(source, filename)
    return info.value.diagnostics


def compile_diagnostics(source: str, filename: str = "t.mind"):
    """Compile ``source`` expecting failure; return every diagnostic."""
    from mind.compiler.frontend.api import compile_source

    with pytest.raises(MindError) as info:
        compile_source(source, filename)
    return info.value.diagnostics
