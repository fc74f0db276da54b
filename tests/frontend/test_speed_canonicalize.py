"""The fused canonicalizer (``mind.compiler.passes.canonicalize``) gives exactly what the
composition of the reference passes gives: ``rewrite`` with ``combined_rule``, then
``dead_code_elimination``, then ``renumber``."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mind.compiler.frontend.api import lower_source
from mind.compiler.passes import canonicalize, combined_rule
from mind.compiler.passes.rewrite import dead_code_elimination, renumber, rewrite
from mind.ir.builder import FunctionBuilder
from mind.ir.core import Module
from mind.ir.printer import print_module
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

from .helpers import BENCH, EXAMPLES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ir"))
from ir_strategies import functions  # noqa: E402

FILES = sorted(BENCH.glob("*.mind")) + sorted(EXAMPLES.glob("*.mind"))
PROGRAMS = [
    "let x: Tensor[f32,(4,4)] = 1;\nlet y = x * 1.0 + 0.0;\nlet z = x * 1.0;\ny + z - 0.0",
    "fn f(x: Tensor<f32, [B, 3]>) -> Tensor<f32, [B, 3]> { tensor.tanh(x) + tensor.sigmoid(x) }",
    "fn f(x: Tensor<f32, [2, 3]>) { (tensor.relu(x), tensor.relu(x), tensor.abs(x), tensor.sqrt(x)) }",
    "let a = tensor.ones([2, 3]);\nlet b = tensor.zeros([2, 3]);\nlet c = tensor.full([2, 3], 2.0);\n"
    "(a + b, a * c, tensor.transpose(tensor.transpose(a)), tensor.reshape(tensor.reshape(a, (3, 2)), (6,)))",
    "let x: Tensor[f32,(2,2)] = [[1.0, 2.0], [3.0, 4.0]];\nlet y: Tensor[f32,(2,2)] = [[1.0, 2.0], [3.0, 4.0]];\n"
    "(x + y, tensor.matmul(x, y), tensor.mean(x), x * -0.0, tensor.maximum(x, y))",
    "fn g(x: Tensor<i32, [3]>) { (x + 0, x - 0, x * 1, x / 1, tensor.where(true, x, x + 1)) }",
    "fn h(x: Tensor<f64, [3]>, y: Tensor<f64, [3]>) { (x + y, y + x, x * y, y * x, tensor.sum(x, axes=[0]), "
    "tensor.sum(x, axes=[0]), tensor.cast(x, f64), tensor.softmax(x)) }",
]


def reference(fn, rename=True):
    out = dead_code_elimination(rewrite(fn, combined_rule()))
    return renumber(out) if rename else out


def same(fn) -> None:
    for rename in (True, False):
        want = print_module(Module([reference(fn, rename)]))
        got = print_module(Module([canonicalize(fn, rename=rename)]))
        assert got == want


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_examples_canonicalize_the_same(path):
    for f in lower_source(path.read_text()).functions:
        same(f)


@pytest.mark.parametrize("src", PROGRAMS)
def test_programs_canonicalize_the_same(src):
    for f in lower_source(src).functions:
        same(f)


def test_duplicate_constants_and_collisions():
    fb = FunctionBuilder("main")
    x = fb.param("x", fb.const(np.float32(0), DType.F32).type)  # rank-0 f32 parameter
    fb.ops.clear()
    vals = [fb.const(1.0, DType.F32), fb.const(1.0, DType.F32), fb.const(2.0, DType.F32),
            fb.splat(1.0, DType.F32, (3,)), fb.const(np.ones(3), DType.F32), fb.splat(1.0, DType.F32, (3,)),
            fb.const(np.arange(100), DType.F32), fb.const(np.arange(100), DType.F32),
            fb.splat(-0.0, DType.F32, (100,)), fb.splat(0.0, DType.F32, (100,))]
    outs = [fb.emit("add", x, v) for v in vals] + [fb.emit("add", v, x) for v in vals]
    outs += [fb.emit("compare", x, vals[0], direction=d) for d in ("lt", "le", "lt")]
    fn = fb.finish(outs)
    same(fn)
    assert len(canonicalize(fn).ops) < len(fn.ops)


def test_coarse_key_collisions_dead_chains_and_commuted_operands():
    """Ops that share a CSE bucket but differ in attributes, several merges in one bucket, commuted
    operands of ``add``/``mul``, and dead chains that only a removed op used."""
    fb = FunctionBuilder("main")
    x = fb.param("x", TensorType(DType.F32, (4, 6)))
    y = fb.param("y", TensorType(DType.F32, (4, 6)))
    a = fb.emit("slice", x, start=(0, 0), stop=(4, 3), step=(1, 1))
    b = fb.emit("slice", x, start=(0, 3), stop=(4, 6), step=(1, 1))  # same bucket, other attrs
    c = fb.emit("slice", x, start=(0, 0), stop=(4, 3), step=(1, 1))  # merges with a
    d = fb.emit("slice", x, start=(0, 3), stop=(4, 6), step=(1, 1))  # merges with b
    s1, s2 = fb.emit("add", x, y), fb.emit("add", y, x)  # commuted: one op
    m1, m2 = fb.emit("mul", a, b), fb.emit("mul", d, c)  # commuted after the merges
    dead = fb.emit("exp", fb.emit("exp", s2))  # a dead chain
    fb.emit("exp", dead)
    fn = fb.finish([s1, s2, m1, m2])
    same(fn)
    out = canonicalize(fn)
    assert [op.op for op in out.ops] == ["slice", "slice", "add", "mul"]


def test_canonical_input_is_not_rebuilt_but_the_function_is_new():
    fn = lower_source((BENCH / "large_network.mind").read_text()).functions[0]
    out = canonicalize(fn)
    assert out is not fn and out.ops is not fn.ops
    assert print_module(Module([out])) == print_module(Module([reference(fn)]))


def _random_args(fn, seed):
    """Inputs for ``fn`` with every symbol bound to 2 (None if a shape is not that simple)."""
    from mind.spec.dims import evaluate

    rng = np.random.default_rng(seed)
    env = {s: 2 for s in fn.symbols()}
    args = []
    for p in fn.params:
        try:
            shape = tuple(evaluate(d, env) for d in p.type.shape)
        except KeyError:
            return None
        np_dtype = p.type.dtype.numpy
        if np_dtype.kind == "f":
            args.append(rng.standard_normal(shape).astype(np_dtype))
        elif np_dtype.kind == "b":
            args.append(rng.random(shape) < 0.5)
        else:
            args.append(rng.integers(-5, 6, shape).astype(np_dtype))
    return args


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(functions(max_ops=12))
def test_random_functions_canonicalize_soundly(fn):
    """Canonical output verifies, is a fixed point, and computes bit-identical results."""
    from mind.ir.verify import check_module
    from mind.calling import run_reference
    from mind.diagnostics import MindError

    out = canonicalize(fn)
    assert check_module(Module([out])) == []
    assert print_module(Module([canonicalize(out)])) == print_module(Module([out]))
    args = _random_args(fn, 0)
    if args is None:
        return
    try:
        want = run_reference(fn, args)
    except MindError:  # the arguments violate a declared assumption
        return
    got = run_reference(out, args)
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and w.shape == g.shape
        assert w.tobytes() == g.tobytes() or (w.dtype.kind == "f" and np.array_equal(w, g, equal_nan=True))
