"""Every benchmark program and spec-style example parses; the public scripts' strings verbatim."""

from __future__ import annotations

import pytest

from mind.compiler.frontend import ast as A
from mind.compiler.frontend.ast import dump, walk
from mind.compiler.frontend.parser import parse

from .helpers import BENCH, EXAMPLES

BENCH_NAMES = ["scalar_math", "small_matmul", "medium_matmul", "large_matmul", "simple_mlp",
               "conv2d", "tensor_ops", "reductions", "reshape_ops", "medium_mlp", "large_network"]


def test_all_eleven_benchmarks_exist():
    assert sorted(p.stem for p in BENCH.glob("*.mind")) == sorted(BENCH_NAMES)


@pytest.mark.parametrize("name", BENCH_NAMES)
def test_benchmark_parses(name):
    path = BENCH / f"{name}.mind"
    m = parse(path.read_text(), str(path))
    assert m.result is not None
    assert all(isinstance(s, A.Let) for s in m.stmts)
    for n in walk(m):
        assert 0 <= n.span[0] <= n.span[1] <= len(m.source.text)


def test_benchmark_shapes():
    def lets(name):
        m = parse((BENCH / f"{name}.mind").read_text())
        return {s.target.name: [d.value for d in s.type.dims] for s in m.stmts if s.type}
    assert lets("large_network") == {"x": [128, 784], "w1": [784, 512], "b1": [512],
                                     "w2": [512, 256], "b2": [256], "w3": [256, 10], "b3": [10]}
    assert lets("conv2d") == {"x": [8, 56, 56, 64], "w": [3, 3, 64, 64], "b": [64]}
    assert lets("large_matmul") == {"a": [512, 1024], "b": [1024, 512]}


# The strings exactly as the public benchmark scripts embed them (leading newline, 12-space indent).
SCRIPT_PROGRAMS = {
    "scalar_math": "1 + 2 * 3 - 4 / 2",
    "small_matmul": """
            let a: Tensor[f32,(10,20)] = 1;
            let b: Tensor[f32,(20,30)] = 1;
            tensor.matmul(a, b)
        """,
    "simple_mlp": """
            let input: Tensor[f32,(32,784)] = 0;
            let w1: Tensor[f32,(784,256)] = 1;
            let b1: Tensor[f32,(256)] = 0;
            let w2: Tensor[f32,(256,10)] = 1;
            let b2: Tensor[f32,(10)] = 0;
            let h1 = tensor.relu(tensor.matmul(input, w1) + b1);
            tensor.matmul(h1, w2) + b2
        """,
    "conv2d": """
            let x: Tensor[f32,(8,56,56,64)] = 0;
            let w: Tensor[f32,(3,3,64,64)] = 1;
            let b: Tensor[f32,(64)] = 0;
            tensor.relu(tensor.conv2d(x, w) + b)
        """,
}


@pytest.mark.parametrize("name", sorted(SCRIPT_PROGRAMS))
def test_script_strings_parse_like_the_files(name):
    from_script = parse(SCRIPT_PROGRAMS[name])
    from_file = parse((BENCH / f"{name}.mind").read_text())
    assert dump(from_script) == dump(from_file)


def test_other_public_forms():
    src = """
let x: tensor<f32[4, 8]> = 0
let y: diff tensor<f32[4, 8]> = 1
let s = tensor.sum(x, axes=[0], keepdims=false); let m = tensor.mean(x)
let e = tensor.expand_dims(x, axis=0)
let q = tensor.squeeze(e, axes=[0])
let i = tensor.index(x, axis=0, i=1)
let sl = tensor.slice(x, axis=1, start=0, end=4)
let st = tensor.slice_stride(x, axis=1, start=0, end=8, step=-2)
let idx: Tensor[i32,(3)] = 0
let g = tensor.gather(x, axis=0, idx=idx)
let d = tensor.dot(s, s)
let z = tensor.zeros(f32, (2,3))
let c = tensor.conv2d(x, w, stride_h=1, stride_w=2, padding="same")
let t = tensor.transpose(x)
let gm = grad(tensor.sum(y), wrt=[y])
tensor.reshape(x, (8, 4))
"""
    m = parse(src)
    assert len(m.stmts) == 16 and m.result.name == "tensor.reshape"


def test_spec_style_mlp():
    path = EXAMPLES / "spec_style_mlp.mind"
    m = parse(path.read_text(), str(path))
    assert [f.name for f in m.functions] == ["dense", "forward", "loss", "train_step"]
    assert [i.path for i in m.imports] == [("tensor",), ("tensor", "zeros")]
    fwd = m.function("forward")
    assert isinstance(fwd.ret, A.TupleType) and fwd.params[0].type.dims[0].value == "B"
    assert isinstance(fwd.body.tail, A.TupleExpr)
    loss = m.function("loss")
    assert loss.params[2].type.diff and isinstance(loss.body.stmts[0].target, A.TuplePattern)
    step = m.function("train_step")
    assert isinstance(step.body.stmts[0], A.FnDef)
    g = step.body.stmts[1].value
    assert isinstance(g.func, A.Call) and isinstance(g.func.args[0], A.Closure)


def test_spec_style_ops():
    m = parse((EXAMPLES / "spec_style_ops.mind").read_text())
    (ops,) = m.functions
    calls = {n.name for n in walk(ops) if isinstance(n, A.Call)}
    assert {"transpose", "reshape", "sum", "expand_dims", "zeros", "ones", "conv2d",
            "tensor.conv2d", "Custom"} <= calls
