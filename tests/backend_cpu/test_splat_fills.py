"""Splat constants (``ones([784, 512])``) are computed by fills, never written out as data."""

from __future__ import annotations

import numpy as np
import pytest

from mind.compiler.backend.cpu.api import compile_function, emit_stage
from mind.ir.parser import parse_module

# A splat read by a matmul (not foldable into an elementwise body), one read by a reduction, one read
# by an elementwise op (fused as a scalar), and a small one (kept as a constant).
_PROG = """func @main(%x: f32[64, 300]) -> (f32[64, 200], f32[300], f32[64, 300], f32[2, 2]) {
  %w = const {value = splat(0.5)} : f32[300, 200]
  %0 = matmul(%x, %w) : f32[64, 200]
  %s = const {value = splat(2.0)} : f32[64, 300]
  %1 = reduce_sum(%s) {axes = [0], keepdims = false} : f32[300]
  %2 = add(%x, %s) : f32[64, 300]
  %k = const {value = splat(3.0)} : f32[2, 2]
  return %0, %1, %2, %k
}
"""


@pytest.mark.parametrize("schedule", [True, False])
def test_splats_become_fills(schedule):
    module = parse_module(_PROG, "splat")
    llvm = emit_stage(module, "llvm", schedule=schedule)
    # the 60,000-element operand as data would be ~0.9 MB of text (before, 1.2 MB in all)
    assert len(llvm) < 200_000
    x = np.random.default_rng(0).standard_normal((64, 300)).astype(np.float32)
    w, s = np.full((300, 200), 0.5, np.float32), np.full((64, 300), 2.0, np.float32)
    run = compile_function(module.functions[0], threads=1, schedule=schedule)
    mm, red, ew, k = run([x])
    np.testing.assert_allclose(mm, x @ w, rtol=1e-5, atol=1e-4)
    assert np.array_equal(red, s.sum(axis=0))
    assert np.array_equal(ew, x + s)
    assert np.array_equal(k, np.full((2, 2), 3.0, np.float32))
