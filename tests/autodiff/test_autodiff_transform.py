"""The transform: compositions, accumulation, broadcasting, symbolic shapes, zero cotangents,
diagnostics, determinism across processes, canonical/verified output, CLI and builder API."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from mind.compiler.autodiff import grad, grad_function, grad_values
from mind.diagnostics import MindError
from mind.ir.builder import FunctionBuilder
from mind.ir.core import Assumption, Module
from mind.ir.parser import parse_module
from mind.ir.printer import print_function
from mind.ir.verify import verify_module
from mind.calling import run_reference
from mind.spec.dims import sym
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType
from mind.verify import autodiff_fd

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
F64 = DType.F64


def T(*shape, dtype=F64):
    return TensorType(dtype, tuple(shape))


@pytest.mark.parametrize("seed", range(6))
def test_random_compositions_against_finite_differences(seed):
    res = autodiff_fd.check_case(autodiff_fd.random_composition(seed, n_ops=7), seed=seed)
    assert res.ok, res


def fd_grad(fn, args, i, h=1e-6):
    out = np.zeros_like(args[i])
    for j in np.ndindex(args[i].shape):
        ap, am = [a.copy() for a in args], [a.copy() for a in args]
        ap[i][j] += h
        am[i][j] -= h
        out[j] = (run_reference(fn, ap)[0] - run_reference(fn, am)[0]) / (2 * h)
    return out


def test_accumulates_multiple_uses_and_broadcasts():
    src = """func @f(%x: f64[2, 3], %b: f64[3]) -> (f64[]) {
  %0 = mul(%x, %x) : f64[2, 3]
  %1 = add(%0, %b) : f64[2, 3]
  %2 = mul(%1, %x) : f64[2, 3]
  %3 = exp(%b) : f64[3]
  %4 = div(%2, %3) : f64[2, 3]
  %5 = reduce_sum(%4) {axes = [0, 1], keepdims = false} : f64[]
  return %5
}"""
    fn = parse_module(src).functions[0]
    g = grad_function(fn)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((2, 3)), rng.standard_normal(3)]
    out = run_reference(g, args)
    for i in range(2):
        np.testing.assert_allclose(out[1 + i], fd_grad(fn, args, i), rtol=1e-6, atol=1e-8)


def test_symbolic_batch_gradient():
    text = open(os.path.join(ROOT, "examples", "affine.mir")).read()
    text = text.replace("-> (f32[B, 2])", "-> (f32[])").replace(
        "return %4", "%5 = reduce_sum(%4) {axes = [0, 1], keepdims = false} : f32[]\n  return %5")
    fn = parse_module(text.replace("f32", "f64")).functions[0]
    g = grad_function(fn, wrt=["x", "w", "b"])
    assert "B" in print_function(g)
    rng = np.random.default_rng(1)
    for batch in (1, 4):
        args = [rng.standard_normal((batch, 3)), rng.standard_normal((3, 2)), rng.standard_normal(2)]
        out = run_reference(g, args)
        for i in range(3):
            np.testing.assert_allclose(out[1 + i], fd_grad(fn, args, i), rtol=1e-6, atol=1e-8)


def test_symbolic_reduce_and_unused_parameter_zero_is_nan_free():
    B = sym("B")
    b = FunctionBuilder("f", [Assumption(B, ">=", 1)])
    x = b.param("x", T(B, 3))
    u = b.param("u", T(B, 2))
    s = b.emit("reduce_sum", b.emit("exp", x), axes=(0, 1), keepdims=False)
    fn = b.finish([s])
    g = grad(fn, wrt=["x", "u"])
    verify_module(Module([g]))
    xv = np.zeros((4, 3))
    uv = np.array([[np.inf, np.nan]] * 4)
    out = run_reference(g, [xv, uv])
    np.testing.assert_allclose(out[1], np.ones((4, 3)))
    assert np.array_equal(out[2], np.zeros((4, 2)))  # zeros of a symbolic shape, even for inf/NaN inputs


def test_zero_cotangents_are_not_materialised():
    b = FunctionBuilder("f")
    x = b.param("x", T(3))
    y = b.param("y", T(3))
    s = b.emit("reduce_sum", x, axes=(0,), keepdims=False)
    t = b.emit("reduce_sum", b.emit("exp", y), axes=(0,), keepdims=False)  # does not reach the loss
    fn = b.finish([s, t])
    g = grad_function(fn, wrt=["x"])
    assert not any(op.op == "exp" for op in g.ops[len(fn.ops):])
    ops = [op.op for op in g.ops]
    assert ops.count("exp") == 1


def test_integer_and_bool_inputs():
    src = """func @f(%x: f64[3], %i: i64[2]) -> (f64[]) {
  %0 = gather(%x, %i) {axis = 0} : f64[2]
  %1 = reduce_sum(%0) {axes = [0], keepdims = false} : f64[]
  return %1
}"""
    fn = parse_module(src).functions[0]
    g = grad_function(fn)  # default wrt: the float parameters only
    assert len(g.results) == 2
    out = run_reference(g, [np.array([1.0, 2.0, 3.0]), np.array([2, 2])])
    np.testing.assert_allclose(out[1], [0, 0, 2])
    with pytest.raises(MindError) as e:
        grad_function(fn, wrt=["i"])
    assert e.value.codes == ["E5005"]


def test_non_scalar_loss_is_E5006():
    src = """func @f(%x: f64[3]) -> (f64[3]) {
  %0 = exp(%x) : f64[3]
  return %0
}"""
    with pytest.raises(MindError) as e:
        grad_function(parse_module(src).functions[0])
    assert e.value.codes == ["E5006"]


def test_gather_on_a_symbolic_axis_is_E5004():
    N = sym("N")
    b = FunctionBuilder("f")
    x = b.param("x", T(N))
    i = b.param("i", T(2, dtype=DType.I64))
    s = b.emit("reduce_sum", b.emit("gather", x, i, axis=0), axes=(0,), keepdims=False)
    with pytest.raises(MindError) as e:
        grad_function(b.finish([s]), wrt=["x"])
    assert e.value.codes == ["E5004"]


def test_grad_values_inside_a_builder():
    b = FunctionBuilder("step")
    w = b.param("w", T(2, 2))
    x = b.param("x", T(2, 2))
    loss = b.emit("reduce_sum", b.emit("mul", b.emit("matmul", x, w), b.emit("matmul", x, w)),
                  axes=(0, 1), keepdims=False)
    (gw,) = grad_values(b, loss, [w])
    fn = b.finish([loss, gw])
    verify_module(Module([fn]))
    xv, wv = np.eye(2), np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(run_reference(fn, [wv, xv])[1], 2 * wv)


def _grad_text(hashseed: str) -> str:
    env = dict(os.environ, PYTHONHASHSEED=hashseed)
    out = subprocess.run([sys.executable, "-m", "mind.cli.main", "grad", os.path.join(ROOT, "examples", "train_mlp.mir"),
                          "--fn", "loss", "--wrt", "w1,b1,w2,b2", "--json"],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout)["text"]


def test_deterministic_across_processes():
    texts = {_grad_text(s) for s in ("0", "1", "12345")}
    assert len(texts) == 1
    fn = parse_module(texts.pop()).functions[0]  # the printed IR parses and verifies
    verify_module(Module([fn]))


def test_cli_grad(capsys):
    from mind.cli.main import main

    path = os.path.join(ROOT, "examples", "train_mlp.mir")
    assert main(["grad", path, "--fn", "loss", "--wrt", "w2,b2"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("func @loss_grad(") and "-> (f32[], f32[256, 10], f32[10])" in text
    assert main(["grad", path, "--fn", "loss", "--wrt", "nope", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["diagnostics"][0]["code"] == "E5005"
    assert main(["grad", os.path.join(ROOT, "examples", "affine.mir")]) == 1
    assert "E5006" in capsys.readouterr().err
