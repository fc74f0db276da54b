"""Differential testing of matmuls whose operands are transposes: random 2-D and batched matmuls (odd
sizes, a batch shared by the rhs, f32 and f64, 1 and 2 threads, this host's GEMM and AVX2's, and the
per-program schedule), compiled for the cpu backend, against the reference.

Where the prebuilt GEMM computes them, ``matmul(a, transpose(b))`` and its batched form read ``b`` in
place (``strided_rhs``: the emitter's ``TRANSPOSED_RHS_MAPS``, the GEMM's transposing pack) and
``matmul(transpose(a), b)`` reads ``a`` in place (``strided_lhs``); without the library
(``matmul="schedule"``, ``cpu="generic"``) the transposes are copies.  The transpose is now and then
a result too (it must then still be materialized), and the inputs carry a NaN or an infinity now
and then.  Each op's result is checked with the spec's accuracy class (``check_op``), the matmul's on
the compiled values of the transposes it reads (the reference's where they are not results: exact).
"""

from __future__ import annotations

import math
import os

import numpy as np
from hypothesis import given, settings, strategies as st

from mind.backends import compile_for
from mind.ir.builder import FunctionBuilder
from mind.reference.accuracy import check_op
from mind.reference.ops import OP_FUNCTIONS
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

_CI = os.environ.get("MIND_HYPOTHESIS_PROFILE", "ci") == "ci"

SIZES = st.one_of(st.integers(1, 20), st.sampled_from([31, 33, 47, 65, 129, 130, 257]))
"""Extents: small ones, and odd ones across the GEMM's register tiles, vectors, column blocks and
K slabs."""

TARGETS = [{}, {"cpu": "x86-64-v3"}, {"matmul": "schedule"}, {"cpu": "generic"}]
"""This host's GEMM, AVX2's, and no library (the transposes stay copies)."""


@st.composite
def transposed_matmuls(draw):
    """(batch, m, k, n, which operands are transposes, whether the rhs has the batch, whether the
    transposes are results too)."""
    batch = draw(st.sampled_from([(), (), (1,), (3,), (5,)]))
    m, k, n = draw(SIZES), draw(SIZES), draw(SIZES)
    while math.prod(batch) * m * k * n > 2_000_000:  # keep the reference's time down
        m, k = max(1, m // 2), max(1, k // 2)
    lhs_t, rhs_t = draw(st.sampled_from([(False, True), (False, True), (True, False), (True, True)]))
    rhs_batched = bool(batch) and draw(st.booleans())
    return batch, m, k, n, lhs_t, rhs_t, rhs_batched, draw(st.booleans())


def _program(case, dt):
    batch, m, k, n, lhs_t, rhs_t, rhs_batched, shown = case
    b = FunctionBuilder("main")
    swap = tuple(range(len(batch))) + (len(batch) + 1, len(batch))
    a_shape = batch + ((k, m) if lhs_t else (m, k))
    rb = batch if rhs_batched else ()
    b_shape = rb + ((n, k) if rhs_t else (k, n))
    a = b.param("a", TensorType(dt, a_shape))
    w = b.param("b", TensorType(dt, b_shape))
    lhs = b.emit("transpose", a, permutation=swap) if lhs_t else a
    rhs = b.emit("transpose", w, permutation=tuple(range(len(rb))) + (len(rb) + 1, len(rb))) if rhs_t else w
    out = b.emit("matmul", lhs, rhs)
    results = [out] + ([v for v, t in ((lhs, lhs_t), (rhs, rhs_t)) if t] if shown else [])
    return b.finish(results), {"a": a_shape, "b": b_shape}


@settings(max_examples=30, deadline=None) if _CI else settings(max_examples=2000, deadline=None)
@given(transposed_matmuls(), st.sampled_from([DType.F32, DType.F64]), st.sampled_from([1, 2]),
       st.sampled_from(range(len(TARGETS))), st.integers(0, 2**32 - 1))
def test_transposed_operands_match_reference(case, dt, threads, target, seed):
    from mind.compiler.backend.cpu.vector_unit import runs_isa
    options = dict(TARGETS[target])
    if "cpu" in options and options["cpu"] != "generic" and not runs_isa(options["cpu"]):
        options = {}
    fn, shapes = _program(case, dt)
    rng = np.random.default_rng(seed)
    inputs = {}
    for name, shape in shapes.items():
        x = rng.standard_normal(shape).astype(dt.numpy)
        if rng.random() < 0.2:
            x.flat[rng.integers(0, x.size)] = rng.choice([np.nan, np.inf, -np.inf])
        inputs[name] = x
    got = compile_for(fn, "cpu", threads=threads, **options)(inputs)
    values = {id(p): inputs[p.name] for p in fn.params}
    for v, g in zip(fn.results, got):
        values.setdefault(id(v), g)
    for op in fn.ops:  # a transpose that is not a result is exact: the reference's value stands in
        operands = [values[id(v)] for v in op.operands]
        attrs = dict(op.attrs)
        want = OP_FUNCTIONS[op.op](*operands, **attrs)
        mm = check_op(op.op, operands, attrs, values.setdefault(id(op.result), want), want, dtype=op.result.type.dtype)
        assert mm is None, (case, dt, threads, options, op.op, mm)
