"""The Python entry point ``mind.compile``: source or module in, callable on NumPy arrays out."""

from __future__ import annotations

import numpy as np
import pytest

import mind
from mind.diagnostics import MindError
from mind.ir.parser import parse_module

SRC = """
fn main(x: Tensor<f32, [B, 3]>, w: Tensor<f32, [3, 2]>) -> (Tensor<f32, [B, 2]>, f32) {
    let y = relu(matmul(x, w));
    (y, sum(y, axes=[], keepdims=false))
}
"""


def test_compile_source_positional_and_keyword_arguments():
    f = mind.compile(SRC, backend="reference")
    x = np.array([[1, -2, 3], [0.5, 0, -1]], np.float32)
    w = np.array([[1, 0], [0, 1], [1, -1]], np.float32)
    y, total = f(x, w)
    want = np.maximum(x.astype(np.float64) @ w, 0)
    assert y.dtype == np.float32 and y.shape == (2, 2)
    np.testing.assert_array_equal(y, want.astype(np.float32))
    assert float(total) == float(want.sum())
    y2, _ = f(x=x, w=w)
    np.testing.assert_array_equal(y, y2)


def test_compile_module_single_result():
    m = parse_module("func @main(%a: i32[2]) -> (i32[2]) {\n  %0 = add(%a, %a) : i32[2]\n  return %0\n}\n")
    f = mind.compile(m, backend="reference")
    assert f(np.array([1, -3], np.int32)).tolist() == [2, -6]


def test_compile_reports_coded_errors():
    with pytest.raises(MindError) as info:
        mind.compile("fn main(x: Tensor<f32, [2]>) -> Tensor<f32, [3]> { x }", backend="reference")
    assert info.value.codes
    f = mind.compile(SRC, backend="reference")
    with pytest.raises(MindError) as info:
        f(np.zeros((2, 4), np.float32), np.zeros((3, 2), np.float32))
    assert info.value.codes == ["E6009"]
