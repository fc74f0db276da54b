"""The reference interpreter: argument checking, symbolic dims, probe mode."""

from __future__ import annotations

import os

import numpy as np
import pytest

from mind.diagnostics import MindError
from mind.ir.parser import parse_module
from mind.calling import run_reference, select_function
from mind.spec.dims import evaluate

AFFINE = open(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "affine.mir")).read()


def _fn(text, name=None):
    return select_function(parse_module(text), name)


def test_symbolic_batch_binds_from_arguments():
    fn = _fn(AFFINE)
    x = np.ones((5, 3), np.float32)
    w = np.ones((3, 2), np.float32)
    b = np.array([-4.0, 1.0], np.float32)
    (out,) = run_reference(fn, {"x": x, "w": w, "b": b})
    assert out.shape == (5, 2) and out.dtype == np.float32
    assert out.tolist() == [[0.0, 4.0]] * 5


@pytest.mark.parametrize("args,code", [
    ({"x": np.ones((5, 3), np.float64), "w": np.ones((3, 2), np.float32), "b": np.ones(2, np.float32)}, "E6009"),
    ({"x": np.ones((5, 4), np.float32), "w": np.ones((3, 2), np.float32), "b": np.ones(2, np.float32)}, "E6009"),
    ({"x": np.ones((5,), np.float32), "w": np.ones((3, 2), np.float32), "b": np.ones(2, np.float32)}, "E6009"),
    ({"x": np.ones((0, 3), np.float32), "w": np.ones((3, 2), np.float32), "b": np.ones(2, np.float32)}, "E6009"),
    ({"x": np.ones((5, 3), np.float32), "w": np.ones((3, 2), np.float32)}, "E6010"),
    ({"x": np.ones((5, 3), np.float32), "w": np.ones((3, 2), np.float32), "b": np.ones(2, np.float32),
      "zz": np.ones(1)}, "E6009"),
])
def test_bad_arguments_are_coded(args, code):
    with pytest.raises(MindError) as info:
        run_reference(_fn(AFFINE), args)
    assert info.value.codes[0] == code


def test_positional_argument_count():
    with pytest.raises(MindError) as info:
        run_reference(_fn(AFFINE), [np.ones((1, 3), np.float32)])
    assert info.value.codes == ["E6010"]


def test_repeated_symbol_must_agree():
    fn = _fn("func @main(%a: f32[N], %b: f32[N]) -> (f32[N]) {\n  %0 = add(%a, %b) : f32[N]\n  return %0\n}\n")
    with pytest.raises(MindError) as info:
        run_reference(fn, [np.ones(2, np.float32), np.ones(3, np.float32)])
    assert info.value.codes == ["E6009"]


def test_select_function():
    two = "func @f() -> () {\n  return\n}\nfunc @g() -> () {\n  return\n}\n"
    with pytest.raises(MindError) as info:
        select_function(parse_module(two), None)
    assert info.value.codes == ["E7002"]
    with pytest.raises(MindError) as info:
        select_function(parse_module(two), "h")
    assert info.value.codes == ["E4003"]
    assert select_function(parse_module(two), "g").name == "g"


def test_rank0_argument_keeps_rank0():
    fn = _fn("func @main(%a: f32[]) -> (f32[]) {\n  %0 = exp(%a) : f32[]\n  return %0\n}\n")
    (out,) = run_reference(fn, [np.float32(0.0)])
    assert out.shape == ()


def test_probe_sees_every_value_in_program_order():
    fn = _fn(AFFINE)
    args = {"x": np.ones((2, 3), np.float32), "w": np.ones((3, 2), np.float32), "b": np.ones(2, np.float32)}
    seen = []
    (out,) = run_reference(fn, args, probe=lambda value, op, arr: seen.append((value, op, arr)))
    assert [v for v, _, _ in seen] == list(fn.params) + [op.result for op in fn.ops]
    assert [op for _, op, _ in seen] == ["param"] * len(fn.params) + [op.op for op in fn.ops]
    for value, _, arr in seen:
        assert list(arr.shape) == [evaluate(d, {"B": 2}) for d in value.type.shape]
    assert np.array_equal(seen[-1][2], out)


def test_rank0_movement_ops_keep_rank0():
    """Regression: np.ascontiguousarray turned rank-0 results into shape (1,)."""
    import mind.reference.ops as R

    x = np.array(np.float32(2.5))
    assert R.transpose(x, permutation=()).shape == ()
    assert R.slice(x, start=(), stop=(), step=()).shape == ()
    assert R.gather(np.array([1.0, 2.0]), np.array(np.int64(5)), axis=0).shape == ()
