"""The default schedule: which kernels get tiled/vectorized, and regressions it once had."""

from __future__ import annotations

import numpy as np

from mind.compiler.backend.cpu.api import compile_function
from mind.ir.parser import parse_module
from mind.reference.interpreter import select_function


def _fn(text: str):
    return select_function(parse_module(text, "t"), None)


def _kernel(run):
    return next(iter(run._kernels.values()))


def test_matmul_and_elementwise_are_scheduled_by_default():
    fn = _fn("func @main(%a: f32[16, 32], %b: f32[32, 64]) -> (f32[16, 64]) {\n"
             "  %0 = matmul(%a, %b) : f32[16, 64]\n  %1 = exp(%0) : f32[16, 64]\n  return %1\n}\n")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 32), dtype=np.float32) * 0.1
    b = rng.standard_normal((32, 64), dtype=np.float32) * 0.1
    run = compile_function(fn, threads=1)
    out = run([a, b])[0]
    assert _kernel(run).scheduled
    np.testing.assert_allclose(out, np.exp(a.astype(np.float64) @ b), rtol=1e-5)


def test_broadcast_size_one_tiles_do_not_hang():
    # tiles [1, 1] with a broadcast operand made the vector lowering patterns loop forever
    fn = _fn("func @main(%x: f64[3, 1], %y: f64[1]) -> (f64[3, 1]) {\n  %0 = add(%y, %x) : f64[3, 1]\n"
             "  return %0\n}\n")
    x, y = np.array([[1.0], [2.0], [3.0]]), np.array([0.5])
    run = compile_function(fn, threads=1)
    np.testing.assert_array_equal(run([x, y])[0], y + x)
    assert _kernel(run).scheduled


def test_unit_step_slice_smaller_than_input():
    # `d0 + 0` simplifies to `d0`: linalg inferred the loop range from the input (E6012 at parse)
    fn = _fn("func @main(%x: i32[2, 1, 3]) -> (i32[1, 1, 3]) {\n"
             "  %0 = slice(%x) {start = [0, 0, 2], stop = [1, -1, -1], step = [1, -1, -1]} : i32[1, 1, 3]\n"
             "  return %0\n}\n")
    x = np.arange(6, dtype=np.int32).reshape(2, 1, 3)
    for schedule in (False, True):
        np.testing.assert_array_equal(compile_function(fn, threads=1, schedule=schedule)([x])[0],
                                      x[0:1, 0:1, ::-1])


def test_reductions_stay_unscheduled():
    fn = _fn("func @main(%x: f64[1, 3]) -> (f64[1, 1]) {\n"
             "  %0 = reduce_max(%x) {axes = [0, 1], keepdims = true} : f64[1, 1]\n  return %0\n}\n")
    x = np.array([[-0.0, 0.0, -1.0]])
    run = compile_function(fn, threads=1)
    got = run([x])[0]
    assert not _kernel(run).scheduled
    assert got[0, 0] == 0.0 and not np.signbit(got[0, 0])
