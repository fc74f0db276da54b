"""Indexing and slicing ``x[...]`` and window assignment ``x[...] = v`` agree with NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mind.compiler.frontend.api import compile_source
from mind.diagnostics import MindError
from mind.calling import run_reference


def _run(src: str, *args):
    f = compile_source(src, "t.mind").functions[0]
    return run_reference(f, [np.asarray(a) for a in args])[0]


def _ty(shape) -> str:
    return f"Tensor<f32, [{', '.join(map(str, shape))}]>"


@st.composite
def index_case(draw):
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    items: list[str] = []
    py: list = []
    axis = 0
    ellipsis = False
    while axis < len(shape):
        kind = draw(st.sampled_from(["int", "slice", "full", "ellipsis", "stop"]))
        n = shape[axis]
        if kind == "stop":
            break
        if kind == "ellipsis" and not ellipsis:
            ellipsis = True
            items.append("...")
            py.append(Ellipsis)
            axis = len(shape)  # the rest of the axes, at least
            continue
        if kind == "int":
            i = draw(st.integers(-n, n - 1))
            items.append(str(i))
            py.append(i)
        else:
            start = draw(st.none() | st.integers(-n - 2, n + 2))
            stop = draw(st.none() | st.integers(-n - 2, n + 2))
            step = draw(st.none() | st.integers(-3, 3).filter(bool))
            text = ("" if start is None else str(start)) + ":" + ("" if stop is None else str(stop))
            if step is not None:
                text += ":" + str(step)
            items.append(text)
            py.append(slice(start, stop, step))
        axis += 1
    return shape, items, tuple(py)


@given(index_case())
@example(((3, 4), ["1", "::2"], (1, slice(None, None, 2))))
@example(((2, 3, 4), ["...", "0"], (Ellipsis, 0)))
@example(((5,), ["::-1"], (slice(None, None, -1),)))
@example(((5,), ["-7:9:-2"], (slice(-7, 9, -2),)))
def test_basic_indexing_matches_numpy(case):
    shape, items, py = case
    if not items:
        return
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    want = x[py]
    src = f"fn f(x: {_ty(shape)}) -> {_ty(want.shape)} {{ x[{', '.join(items)}] }}"
    np.testing.assert_array_equal(_run(src, x), want)


def test_ranges_and_tensor_indices():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    src = """fn f(x: Tensor<f32, [4, 5]>, i: i32, idx: Tensor<i64, [3]>) -> (Tensor<f32, [3]>, Tensor<f32, [4]>,
        Tensor<f32, [5]>, Tensor<f32, [4, 3]>) {
    (x[1, 1..4], x[.., 2], x[i], x[:, idx])
}"""
    f = compile_source(src, "t.mind").functions[0]
    for i in (2, -1):
        a, b, c, d = run_reference(f, [x, np.int32(i), np.array([4, 0, -2])])
        np.testing.assert_array_equal(a, x[1, 1:4])
        np.testing.assert_array_equal(b, x[:, 2])
        np.testing.assert_array_equal(c, x[i])
        np.testing.assert_array_equal(d, x[:, [4, 0, -2]])


def test_index_assignment_matches_numpy():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    src = """fn f(x: Tensor<f32, [2, 3, 4]>) -> Tensor<f32, [2, 3, 4]> {
    let mut y = x
    y[1, 1:, ::2] = -1.0
    y[0, 2] = [7.0, 8.0, 9.0, 10.0]
    y[..., 3] -= 100.0
    y
}"""
    want = x.copy()
    want[1, 1:, ::2] = -1
    want[0, 2] = [7, 8, 9, 10]
    want[..., 3] -= 100
    np.testing.assert_array_equal(_run(src, x), want)


def test_gradient_through_indexing_and_window_assignment():
    src = """fn f(x: Tensor<f32, [3, 4]>) -> Tensor<f32, [3, 4]> {
    grad(|a| { let mut b = a * 1.0; b[1, :2] = 0.0; sum(b[::2] * 3.0) + sum(b[1]) }, x)
}"""
    want = np.zeros((3, 4), np.float32)
    want[::2] = 3.0
    want[1, 2:] = 1.0
    np.testing.assert_array_equal(_run(src, np.ones((3, 4), np.float32)), want)


@pytest.mark.parametrize("expr, code", [
    ("x[5]", "E3006"), ("x[0, 0, 0]", "E3004"), ("x[..., ...]", "E2009"), ("x[::0]", "E3006"),
    ("x[x > 0.0]", "E3011"), ("x[1.5]", "E2004"),
])
def test_index_errors(expr, code):
    with pytest.raises(MindError) as info:
        compile_source(f"fn f(x: Tensor<f32, [3, 2]>) -> f32 {{ sum({expr}) }}", "t.mind")
    assert info.value.diagnostics[0].code == code
