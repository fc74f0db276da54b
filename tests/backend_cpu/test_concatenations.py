"""Concatenations (``concat``, ``stack``: pads of the additive identity, added) emitted as one tensor
(``linalg.joins``, ``Emitter.join``): each operand copied into its window, no fill where the windows
cover the result, no add; values bit for bit the reference's, signed zeros and NaNs included.  The
near misses (another pad value, overlapping windows, a pad with another user, interior padding)
keep their adds."""

from __future__ import annotations

import numpy as np
import pytest

from mind.calling import run_reference
from mind.compiler.backend.cpu.api import compile_function
from mind.compiler.backend.linalg.emit import emit_mlir
from mind.compiler.frontend.api import compile_source
from mind.ir.builder import FunctionBuilder
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType


def _ty(dt: str, shape) -> str:
    return f"Tensor<{dt}, [{', '.join(map(str, shape))}]>"


def _program(dt: str, shapes, out, body: str):
    params = ", ".join(f"x{i}: {_ty(dt, s)}" for i, s in enumerate(shapes))
    return compile_source(f"fn f({params}) -> {_ty(dt, out)} {{ {body} }}").functions[0]


def _inputs(fn, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for p in fn.params:
        t = p.type
        if t.dtype.is_float:
            a = rng.standard_normal(t.shape).astype(t.dtype.numpy)
            flat = a.reshape(-1)
            flat[: min(4, flat.size)] = np.array([0.0, -0.0, np.nan, -np.inf], t.dtype.numpy)[: min(4, flat.size)]
        else:
            a = rng.integers(-100, 100, t.shape).astype(t.dtype.numpy)
        out.append(a)
    return out


def _check(fn, threads: int = 1) -> list[np.ndarray]:
    args = _inputs(fn)
    got = compile_function(fn, threads=threads, cache=False)(args)
    want = run_reference(fn, args)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert g.tobytes() == w.tobytes()  # bit for bit: +0.0 stays +0.0, the NaN's bits kept
    return got


_CONCATS = [  # dtype, operand shapes, result shape, body
    ("f32", [(20, 10), (20, 7)], (20, 17), "concat([x0, x1], axis=1)"),
    ("f32", [(3, 5), (4, 5), (1, 5)], (8, 5), "concat([x0, x1, x2], axis=0)"),
    ("f64", [(2, 3, 4), (2, 5, 4)], (2, 8, 4), "concat([x0, x1], axis=1)"),
    ("i32", [(6, 3), (6, 4), (6, 5)], (6, 12), "concat([x0, x1, x2], axis=1)"),
    ("i64", [(7,), (9,)], (16,), "concat([x0, x1], axis=0)"),
    ("f32", [(30, 40), (30, 40), (30, 40)], (3, 30, 40), "stack([x0, x1, x2], axis=0)"),
    ("f32", [(30, 40), (30, 40)], (30, 2, 40), "stack([x0, x1], axis=1)"),
    ("f32", [(9, 33), (9, 33)], (9, 66), "concat([x0 - x0 * 3.0, x1 * 2.0], axis=1)"),
]


@pytest.mark.parametrize("case", _CONCATS, ids=lambda c: c[3])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_concatenation_is_copies_into_one_tensor(case, threads):
    dt, shapes, out, body = case
    fn = _program(dt, shapes, out, body)
    _check(fn, threads)
    text, _ = emit_mlir(fn, {})
    assert "(a concatenation)" in text and text.count("linalg.copy") == len(shapes)
    assert "arith.addi" not in text and "arith.addf" not in text and "linalg.fill" not in text


def _pads_added(value: float, windows, shape=(4, 10), other_use: bool = False, interior: int = 0):
    """add(pad(x0, value), pad(x1, value), ...) over f32 operands of shape ``shape``, each placed at
    ``lo`` along axis 1 (the windows may overlap or leave gaps)."""
    b = FunctionBuilder("main")
    v = b.const(np.float32(value), DType.F32)
    total = None
    pads = []
    width = max(lo for lo in windows) + shape[1] + (shape[1] - 1) * interior
    for i, lo in enumerate(windows):
        x = b.param(f"x{i}", TensorType(DType.F32, shape))
        hi = width - lo - shape[1] - (shape[1] - 1) * interior
        p = b.emit("pad", x, v, lo=(0, lo), hi=(0, hi), interior=(0, interior))
        pads.append(p)
        total = p if total is None else b.emit("add", total, p)
    results = [total] + ([pads[0]] if other_use else [])
    return b.finish(results)


def test_windows_with_a_gap_fill_it_with_the_identity():
    """Windows that do not cover the result: the rest is -0.0 (-0.0 + -0.0), written by a fill."""
    fn = _pads_added(-0.0, [0, 13])
    got = _check(fn)[0]
    assert np.all(np.signbit(got[:, 10:13])) and np.all(got[:, 10:13] == 0)
    text, _ = emit_mlir(fn, {})
    assert "(a concatenation)" in text and "linalg.fill" in text and "arith.addf" not in text


@pytest.mark.parametrize("near_miss", [
    dict(value=0.0, windows=[0, 10]),  # +0.0 is no identity: -0.0 + +0.0 is +0.0
    dict(value=1.0, windows=[0, 10]),
    dict(value=-0.0, windows=[0, 5]),  # overlapping windows: their elements are sums
    dict(value=-0.0, windows=[0, 10], other_use=True),  # the pad is a result too
    dict(value=-0.0, windows=[0, 20], interior=1),  # interior padding: the gaps are the pad's
])
def test_near_misses_keep_their_adds(near_miss):
    fn = _pads_added(**near_miss)
    _check(fn)
    text, _ = emit_mlir(fn, {})
    assert "(a concatenation)" not in text and "arith.addf" in text


def test_a_concatenation_of_symbolic_extents_is_one_tensor_for_each_call_shape():
    """The windows are compared at the call's extents (``emit_mlir`` specializes the symbols), so a
    concatenation along a static axis of operands with a symbolic batch is one tensor too."""
    fn = _program("f32", [("B", 10), ("B", 7)], ("B", 17), "concat([x0, x1], axis=1)")
    text, _ = emit_mlir(fn, {"B": 5})
    assert "(a concatenation)" in text and "arith.addf" not in text
    run = compile_function(fn, threads=1, cache=False)
    for rows in (5, 9):
        x, y = (np.random.default_rng(rows).standard_normal((rows, n)).astype(np.float32) for n in (10, 7))
        assert run([x, y])[0].tobytes() == np.concatenate([x, y], axis=1).tobytes()
