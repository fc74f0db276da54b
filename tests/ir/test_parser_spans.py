"""``parse_module(..., spans=False)`` (the frontend cache's reader) is the same parser without source
positions: the same module text, the same diagnostics at the same places, no span on any object."""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ir_strategies import modules
from mind.diagnostics import MindError
from mind.ir.parser import DEFAULT_LIMITS, IRParser, parse_module
from mind.ir.printer import print_module
from test_malformed import CASES, GOOD


def _outcome(text: str, spans: bool):
    try:
        return print_module(parse_module(text, "t.mir", spans=spans))
    except MindError as e:
        return e.diagnostics


@given(modules())
def test_same_module_without_spans(module):
    text = print_module(module)
    fast = parse_module(text, spans=False)
    assert print_module(fast) == text
    for fn in fast.functions:
        assert fn.span is None
        assert all(p.span is None for p in fn.params)
        assert all(op.span is None and op.result.span is None for op in fn.ops)


@pytest.mark.parametrize("name,text,code,marker", CASES, ids=[c[0] for c in CASES])
def test_same_diagnostics_without_spans(name, text, code, marker):
    assert _outcome(text, False) == _outcome(text, True)


@given(st.text(alphabet="%@.()[]{},:=+-*<>/ \n\tfunc@main%x0123e5abc_é$", max_size=60)
       | st.builds(lambda i, s: GOOD[:i] + s + GOOD[i:], st.integers(0, len(GOOD)), st.text(max_size=4)))
@example("func @f() -> () {\n  return\n} // trailing comment")
@example("%")
@example("func @f(%x: f32[2]) -> () {\n  return\n}\n@")
def test_fast_and_positioned_tokens_agree(text):
    assert _outcome(text, False) == _outcome(text, True)
    p = IRParser.__new__(IRParser)
    p.text, p.filename, p.limits, p._line_starts = text, "t.mir", DEFAULT_LIMITS, None
    try:
        positioned = p._positioned_tokens()
    except MindError:
        return
    fast = IRParser(text, "t.mir", spans=False)
    assert fast.texts == positioned[0]
    assert [fast.kind_of(i) for i in range(len(fast.texts))] == positioned[1]
