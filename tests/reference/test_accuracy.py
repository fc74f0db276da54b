"""The accuracy classes applied to one op on arrays (reference/accuracy.py): n, abs_sum, check_op."""

from __future__ import annotations

import numpy as np

from mind.reference.accuracy import TERMS, accumulation, check_op
from mind.spec.accuracy import get
from mind.spec.ops import OPS


def test_every_op_of_a_sum_class_has_a_term_count():
    assert set(TERMS) == {name for name, op in OPS.items() if get(op.accuracy).kind == "sum"}


def test_accumulation_of_each_op():
    x = np.array([[1.0, -2.0], [3.0, -4.0]], dtype=np.float32)
    n, s = accumulation("reduce_sum", [x], {"axes": (1,), "keepdims": False})
    assert n == 2 and s.tolist() == [3.0, 7.0]
    n, s = accumulation("reduce_sum", [x], {"axes": (), "keepdims": True})
    assert n == 1 and s.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    n, s = accumulation("matmul", [x, x], {})
    assert n == 2 and s.tolist() == [[7.0, 10.0], [15.0, 22.0]]
    x4 = np.ones((1, 3, 3, 2), np.float32)
    w4 = -np.ones((2, 2, 2, 1), np.float32)
    attrs = {"strides": (1, 1), "padding": ((0, 0), (0, 0)), "lhs_dilation": (1, 1), "rhs_dilation": (1, 1)}
    n, s = accumulation("conv2d", [x4, w4], attrs)
    assert n == 8 and s.shape == (1, 2, 2, 1) and np.all(s == 8)
    assert s.dtype == np.float64
    assert accumulation("add", [x, x], {}) is None


def test_check_op_uses_the_bound_of_the_op():
    a = np.full((1, 4), 0.1, np.float32)
    b = np.full((4, 1), 0.1, np.float32)
    want = np.array([[0.04]], np.float32)
    nudged = np.nextafter(want, np.float32(1))  # one ULP: inside the dot bound, not bit-exact
    assert check_op("matmul", [a, b], {}, nudged, want) is None
    assert check_op("add", [want, want], {}, nudged, want) is not None
    far = want * np.float32(1.01)
    assert check_op("matmul", [a, b], {}, far, want, dtype="f32") is not None
    ints = np.array([[3]], np.int32)
    assert check_op("matmul", [ints, ints], {}, ints + 1, np.array([[9]], np.int32)) is not None


def test_check_op_admits_an_overflowing_f32_accumulation():
    big = np.finfo(np.float32).max
    a = np.array([[big, big, -big]], np.float32)
    b = np.ones((3, 1), np.float32)
    want = np.array([[big]], np.float32)  # the reference sums in f64: Ω + Ω − Ω = Ω
    assert check_op("matmul", [a, b], {}, np.array([[np.inf]], np.float32), want) is None
    assert check_op("reduce_sum", [a], {"axes": (1,), "keepdims": True}, np.array([[np.nan]], np.float32),
                    want) is None
    # the same wrong answer where nothing can overflow
    small = a / np.float32(8)
    assert check_op("matmul", [small, b], {}, np.array([[np.inf]], np.float32), want / 8) is not None


def test_check_op_admits_nan_where_an_overflowing_product_meets_an_infinite_term():
    # found by the differential test (thorough): 2.5 · 3.4e38 overflows f32 to +inf, which meets the
    # -inf term: NaN, where the exact result is -inf
    y = np.array([[0.0, 2.5, 0.0, 1.0]], np.float32)
    w = np.array([[3.4e38], [3.4e38], [0.0], [-np.inf]], np.float32)
    want = np.array([[-np.inf]], np.float32)
    assert check_op("matmul", [y, w], {}, np.array([[np.nan]], np.float32), want) is None
    # +inf is not the exact -inf and cannot come from an accumulation holding the -inf term
    assert check_op("matmul", [y, w], {}, np.array([[np.inf]], np.float32), want) is not None
    # without the overflowing product, the -inf must be matched
    assert check_op("matmul", [y / np.float32(4), w], {}, np.array([[np.nan]], np.float32), want) is not None
    n, s = accumulation("matmul", [y, w], {}, finite_only=True)
    assert n == 4 and s.tolist() == [[2.5 * float(np.float32(3.4e38))]]
