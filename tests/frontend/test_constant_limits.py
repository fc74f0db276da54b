"""Constant fills past the IR's constant limit are a located E1012, never an internal error."""

from __future__ import annotations

import pytest

from mind.compiler.frontend.api import compile_source
from mind.diagnostics import MindError


@pytest.mark.parametrize("src, col", [
    ("let a: Tensor[f32,(100000000,100000000,100000000)] = 1;\na\n", 8),
    ("fn main() -> Tensor<f32, [100000000, 100000000]> { zeros([100000000, 100000000]) }\n", 52),
])
def test_huge_constant_fill_is_e1012(src, col):
    with pytest.raises(MindError) as info:
        compile_source(src, "t.mind")
    (d,) = info.value.diagnostics
    assert d.code == "E1012" and d.span.line == 1 and d.span.col == col


def test_large_fill_within_the_limit_still_compiles():
    m = compile_source("let a: Tensor[f32,(4096,4096)] = 1;\na\n", "t.mind")
    assert str(m.functions[0].result_types[0]) == "f32[4096, 4096]"


def test_empty_fill_with_a_huge_leading_dim_prints_and_reparses_in_constant_space():
    """f32[2**41, 0] has no elements, but its nested literal would list 2**41 empty rows."""
    from mind.ir.parser import parse_module
    from mind.ir.printer import print_module

    m = compile_source("let x: Tensor[f32,(2199023255552, 0)] = 1;\nx\n", "t.mind")
    text = print_module(m)
    assert "splat(0.0)" in text and len(text) < 200
    assert print_module(parse_module(text)) == text
