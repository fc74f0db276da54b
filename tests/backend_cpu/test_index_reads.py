"""Pads and gathers (generics whose body reads computed indices) are tiled and vectorized with the
vectorizer's ``vectorize_nd_extract``: contiguous loads where a row is read whole (a gather of rows),
vector gathers elsewhere (a pad's clamped indices).  Each schedule is checked bit-exactly against
the reference (op by op, as the differential tests do), on both vector units, on one and two threads, with out-of-range indices (clamped),
interior padding, NaN pad values and integer elements."""

from __future__ import annotations

import numpy as np
import pytest

from mind.backends import compile_for
from mind.calling import select_function
from mind.compiler.backend.cpu.kernel_library import host_isa
from mind.ir.parser import parse_module
from mind.reference.accuracy import check_op
from mind.reference.ops import OP_FUNCTIONS

CPUS = ["host"] + (["x86-64-v3"] if host_isa() is not None else [])

PROGRAMS = {
    "pad_rows_and_columns": ("func @main(%x: f32[33, 64], %v: f32[]) -> (f32[37, 66]) {\n"
                             "  %0 = pad(%x, %v) {lo = [3, 1], hi = [1, 1], interior = [0, 0]} : f32[37, 66]\n"
                             "  return %0\n}\n"),
    "pad_interior_i32": ("func @main(%x: i32[16, 24], %v: i32[]) -> (i32[34, 50]) {\n"
                         "  %0 = pad(%x, %v) {lo = [2, 0], hi = [1, 3], interior = [1, 1]} : i32[34, 50]\n"
                         "  return %0\n}\n"),
    "pad_then_exp_f64": ("func @main(%x: f64[8, 30], %v: f64[]) -> (f64[8, 32], f64[8, 32]) {\n"
                         "  %0 = pad(%x, %v) {lo = [0, 1], hi = [0, 1], interior = [0, 0]} : f64[8, 32]\n"
                         "  %1 = exp(%0) : f64[8, 32]\n  return %0, %1\n}\n"),
    "gather_rows": ("func @main(%t: f32[50, 64], %i: i32[96]) -> (f32[96, 64]) {\n"
                    "  %0 = gather(%t, %i) {axis = 0} : f32[96, 64]\n  return %0\n}\n"),
    "gather_columns_i64": ("func @main(%t: f32[40, 70], %i: i64[3, 16]) -> (f32[40, 3, 16]) {\n"
                           "  %0 = gather(%t, %i) {axis = 1} : f32[40, 3, 16]\n  return %0\n}\n"),
    "gather_rows_times_two": ("func @main(%t: f64[20, 32], %i: i32[64]) -> (f64[64, 32], f64[64, 32]) {\n"
                              "  %0 = gather(%t, %i) {axis = 0} : f64[64, 32]\n"
                              "  %1 = add(%0, %0) : f64[64, 32]\n  return %0, %1\n}\n"),
}


def _inputs(fn, rng):
    out = {}
    for p in fn.params:
        shape, dt = p.type.shape, p.type.dtype.numpy
        if np.issubdtype(dt, np.integer) and p.name in ("i",):
            bound = 80
            out[p.name] = rng.integers(-5, bound, shape).astype(dt)  # out of range: clamped
        elif np.issubdtype(dt, np.integer):
            out[p.name] = rng.integers(-1000, 1000, shape).astype(dt)
        else:
            out[p.name] = np.asarray(rng.standard_normal(shape), dtype=dt)
    if "v" in out and out["v"].dtype.kind == "f":
        out["v"] = np.asarray(np.nan, dtype=out["v"].dtype)  # a NaN pad value must come through as is
    return out


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("cpu", CPUS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_scheduled_index_reads_match_the_reference(name, cpu, threads):
    fn = select_function(parse_module(PROGRAMS[name], "t"), None)
    inputs = _inputs(fn, np.random.default_rng(len(name)))
    runner = compile_for(fn, "cpu", threads=threads, cpu=cpu, schedule="all")
    got = runner(inputs)
    assert all(k.scheduled for k in runner._kernels.values())
    values = {p.name: inputs[p.name] for p in fn.params}
    values.update({v.name: g for v, g in zip(fn.results, got)})  # every op's result is returned
    for op in fn.ops:  # each op against the reference on the compiled operands (bit-exact for copies)
        operands = [values[v.name] for v in op.operands]
        attrs = dict(op.attrs)
        expected = OP_FUNCTIONS[op.op](*operands, **attrs)
        assert check_op(op.op, operands, attrs, values[op.result.name], expected,
                        dtype=op.result.type.dtype) is None, op.op
