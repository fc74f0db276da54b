"""The cuda lowering checked against the reference without a GPU: its loop program (every stage but
the GPU mapping: reductions split into partials, parallel dims first, strided copies as loops, serial
parts wrapped, loop dims reversed, matmuls and convolutions as calls of the library kernels, whose
LLVM IR runs in the block emulator with the plan's arguments) run on the CPU by ``host_emulation``, on the conformance suite's
programs (a representative subset; all under ``MIND_HYPOTHESIS_PROFILE=thorough``) and on the cpu
differential test's random programs, every op's value checked against the reference applied to the
emulated operands (the first diverging op named)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, reject, settings, strategies as st

from mind.calling import bind_arguments, run_reference
from mind.conformance.encoding import decode
from mind.conformance import expectations
from mind.conformance.suite import all_labels, load_suite
from mind.conformance.verdict import Answer, judge
from mind.diagnostics import MindError
from mind.ir.parser import parse_module
from mind.reference.bisect import divergence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "backend_cpu"))
from host_emulation import run_on_host  # noqa: E402
from test_differential import TILED_DIMS, programs  # noqa: E402
from test_ptxas import PROGRAMS  # noqa: E402 - the same subset of the suite

_CI = os.environ.get("MIND_HYPOTHESIS_PROFILE", "ci") == "ci"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _check_every_op(fn, inputs) -> None:
    """Every op's emulated value against the reference applied to the emulated operands (every op's
    value is a result of these programs, in program order).  A program with a part that does not
    map to the GPU yet (E6003, listed in the docs) is rejected: hypothesis draws another, and fails
    the test if too many are."""
    arrays, _ = bind_arguments(fn, inputs)
    try:
        got = run_on_host(fn, arrays)
    except MindError as e:
        if e.diagnostics[0].code == "E6003":
            reject()
        raise
    with np.errstate(all="ignore"):
        first = divergence(fn, arrays, {}, got)
    assert first is None, f"{first}\n{fn}"


@settings(max_examples=15, deadline=None) if _CI else settings(max_examples=400, deadline=None)
@given(programs())
def test_random_programs_through_the_cuda_lowering(prog):
    fn, inputs = prog
    if fn.ops:
        _check_every_op(fn, inputs)


@settings(max_examples=8, deadline=None) if _CI else settings(max_examples=200, deadline=None)
@given(programs(st.sampled_from(TILED_DIMS)))
def test_random_programs_with_tiled_shapes_through_the_cuda_lowering(prog):
    """Rows long enough to be split (up to 64: 16 partials of 4), several dims to reverse."""
    fn, inputs = prog
    if fn.ops:
        _check_every_op(fn, inputs)


EXPECT = expectations.load(os.path.join(ROOT, "conformance", "expectations", "cuda.expect"), set(all_labels()))
"""The cuda backend's known departures (strict: a case listed there that passes fails here)."""

# the thorough profile's cases listed in cuda.expect, so that the CI profile checks them too
EXPECTED = [(e.id, c["ir"], c["inputs"]) for e in load_suite().entries if EXPECT.lookup(e.id) is not None
            for c in [load_suite().case(e)]]


@pytest.mark.parametrize("case_id,ir_text,inputs", PROGRAMS + [p for p in EXPECTED if p not in PROGRAMS],
                         ids=[c for c, _, _ in PROGRAMS + [p for p in EXPECTED if p not in PROGRAMS]])
def test_suite_programs_through_the_cuda_lowering(case_id, ir_text, inputs):
    suite = load_suite()
    case = suite.case(suite.entry(case_id))
    fn = parse_module(ir_text).functions[0]
    arrays, env = bind_arguments(fn, [decode(x) for x in inputs])
    try:
        got = run_on_host(fn, arrays, env)
    except MindError as e:
        if e.diagnostics[0].code == "E6003":
            pytest.xfail(f"{case_id}: {e.diagnostics[0].message}")
        raise
    verdict = judge(case, Answer("ok", got))
    expected = EXPECT.lookup(case_id)
    if expected is not None:
        assert not verdict.passed, f"{case_id} passes: remove its line from cuda.expect"
        pytest.xfail(f"{case_id}: {expected.reason}")
    assert verdict.passed, f"{case_id}: {verdict.message}"


ROWS = """func @main(%x: {t}[{r}, {k}]) -> ({t}[{r}], {t}[{r}], {t}[{k}], {t}[{k}, {r}]) {{
  %0 = reduce_max(%x) {{axes = [1], keepdims = false}} : {t}[{r}]
  %1 = reduce_sum(%x) {{axes = [1], keepdims = false}} : {t}[{r}]
  %2 = reduce_max(%x) {{axes = [0], keepdims = false}} : {t}[{k}]
  %3 = transpose(%x) {{permutation = [1, 0]}} : {t}[{k}, {r}]
  return %0, %1, %2, %3
}}
"""


@pytest.mark.parametrize("t,r,k", [("f32", 3, 4096), ("f32", 5000, 1000), ("f64", 2, 64), ("i32", 7, 300),
                                   ("f32", 4, 1009), ("i64", 1, 32), ("f32", 1, 1 << 16)])
def test_row_reductions_split_or_not_agree_with_the_reference(t, r, k):
    """Few rows split wide and their partials split again (3 x 4096: 1,024, then 256, then 64
    partials; one row of 65,536: 1,024, 256, 64), many rows into 25 partials, 7 rows of 300 into 75;
    a prime row and short rows that are not split; a column max (its loops interchanged); a
    transpose (its loop dims reversed); NaN and infinities among the values."""
    fn = parse_module(ROWS.format(t=t, r=r, k=k)).functions[0]
    rng = np.random.default_rng(r * k)
    dtype = fn.params[0].type.dtype.numpy
    if np.issubdtype(dtype, np.floating):
        x = rng.standard_normal((r, k)).astype(dtype)
        x.flat[rng.integers(0, x.size, 3)] = [np.nan, np.inf, -np.inf]
    else:
        x = rng.integers(-1000, 1000, (r, k)).astype(dtype)
    _check_every_op(fn, {"x": x})
    if np.issubdtype(dtype, np.floating):  # the NaN row: max and sum are NaN there, as the reference says
        want = run_reference(fn, [x])
        np.testing.assert_array_equal(np.isnan(run_on_host(fn, [x])[0]), np.isnan(want[0]))


def test_two_results_from_one_shared_init_keep_their_values():
    """Found by the random programs above: two matmuls whose zero fills CSE merged into one init
    (both results returned) — one-shot bufferization computed the second in place in the first's
    out-parameter, which the first's copy then overwrote, so both results were the first's.  Each
    user of a shared init gets its own now (``untie_shared_inits``, as the cpu backend does)."""
    fn = parse_module("func @main(%x: f32[2, 1]) -> (f32[2, 1], f32[2, 1]) {\n"
                      "  %1 = const {value = [[0.0]]} : f32[1, 1]\n  %2 = matmul(%x, %1) : f32[2, 1]\n"
                      "  %3 = const {value = [[1.0]]} : f32[1, 1]\n  %4 = matmul(%x, %3) : f32[2, 1]\n"
                      "  return %2, %4\n}\n").functions[0]
    x = np.array([[0.0], [1.0]], np.float32)
    first, second = run_on_host(fn, [x])
    assert np.array_equal(first, [[0.0], [0.0]]) and np.array_equal(second, [[0.0], [1.0]])
