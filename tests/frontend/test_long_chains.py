"""Long expressions are not deep nesting: a flat sum of 800 terms and a 10,000-term expression go
through parsing, elaboration, canonicalization, autodiff, printing, re-parsing and verification
without any recursion limit (issue 21)."""

from __future__ import annotations

import numpy as np

from mind.compiler.frontend.api import compile_source
from mind.ir.parser import parse_module
from mind.ir.printer import print_module
from mind.ir.verify import check_module
from mind.calling import run_reference


def test_a_flat_sum_of_800_literal_terms_is_one_constant():
    m = compile_source("let x = 1.0" + " + 1.0" * 800 + "\nx", "t.mind")
    (got,) = run_reference(m.functions[0], [])
    assert got == 801.0 and len(m.functions[0].ops) == 1


def test_long_chains_of_every_kind():
    n = 10_000
    terms = " + ".join(f"x * {i % 7}.5" for i in range(n))
    mixed = " - ".join(["x"] * 800) + " * 2.0 / 3.0"
    src = (f"fn f(x: Tensor<f32, [B]>) -> Tensor<f32, [B]> {{ {terms} }}\n"
           f"fn g(x: Tensor<f32, [3]>) -> Tensor<f32, [3]> {{ grad(|a| sum({terms.replace('x', 'a')}), x) }}\n"
           f"fn h(x: f64) -> f64 {{ {mixed} + {'-' * 2000}x }}\n"
           f"fn k(x: Tensor<f32, [2]>) -> Tensor<f32, [2]> {{ let mut y = x; {'y = y + x; ' * 2000} y }}")
    m = compile_source(src, "t.mind")
    f, g, h, k = m.functions
    assert len(f.ops) > n
    x = np.ones(4, np.float32)
    want = np.float32(sum((i % 7) + 0.5 for i in range(n)))
    np.testing.assert_allclose(run_reference(f, [x])[0], want * x, rtol=1e-5)
    np.testing.assert_allclose(run_reference(g, [x[:3]])[0], want, rtol=1e-5)
    assert run_reference(h, [np.float64(3.0)])[0] == 3.0 - 798 * 3.0 - 3.0 * 2.0 / 3.0 + 3.0
    np.testing.assert_array_equal(run_reference(k, [np.ones(2, np.float32)])[0], [2001.0, 2001.0])
    text = print_module(m)
    again = parse_module(text)
    assert print_module(again) == text and check_module(again) == []
