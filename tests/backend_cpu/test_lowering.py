"""Core IR -> MLIR lowering on the cpu backend: every op's spec examples and every conformance case."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from mind.backends import compile_for
from mind.diagnostics import MindError
from mind.ir.parser import parse_module
from mind.calling import select_function
from mind.spec import accuracy
from mind.spec.ops import OPS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _decode(v):
    if isinstance(v, list):
        return [_decode(u) for u in v]
    if isinstance(v, str):
        return float(v)
    return v


EXAMPLES = [(name, i) for name, od in OPS.items() for i in range(len(od.examples))]


@pytest.mark.parametrize("op,index", EXAMPLES, ids=[f"{n}-{i}" for n, i in EXAMPLES])
def test_spec_example(op, index):
    ex = OPS[op].examples[index]
    fn = select_function(parse_module(ex.ir, "example"), None)
    args = {p.name: np.array(_decode(ex.inputs[p.name]), dtype=p.type.dtype.numpy) for p in fn.params}
    got = compile_for(fn, "cpu", threads=1)(args)
    assert len(got) == len(ex.expected)
    for r, g, want in zip(fn.results, got, ex.expected):
        exp = np.array(_decode(want), dtype=r.type.dtype.numpy)
        # the examples' expected values are exact; ULP classes still apply to exp/log
        cls = OPS[op].accuracy if OPS[op].accuracy in ("exp", "log") else "exact"
        if accuracy.get(OPS[op].accuracy).kind == "sum" and r.type.dtype.is_float:
            mm = accuracy.check(OPS[op].accuracy, r.type.dtype, g, exp, n=1, abs_sum=np.abs(exp))
        else:
            mm = accuracy.check(cls, r.type.dtype, g, exp)
        assert mm is None, str(mm)


# The conformance suite runs on this backend in tests/conformance/test_builtin_runs.py (with its
# expectations file conformance/expectations/cpu.expect).


_DET = """
import sys
from mind.ir.parser import parse_module
from mind.compiler.backend.cpu.api import emit_stage
src = open(sys.argv[1]).read()
m = parse_module(src, "x")
sys.stdout.write(emit_stage(m, sys.argv[2]))
"""

_PROG = """func @main(%x: f32[4, 3], %w: f32[3, 2], %i: i32[2], %b: i64[4]) -> (f32[4, 2], f32[2, 3], bool[4], i64[4], f32[4]) {
  %0 = matmul(%x, %w) : f32[4, 2]
  %1 = exp(%0) : f32[4, 2]
  %2 = gather(%x, %i) {axis = 0} : f32[2, 3]
  %3 = reduce_max(%x) {axes = [1], keepdims = false} : f32[4]
  %z = const {value = 0.0} : f32[]
  %4 = compare(%3, %z) {direction = gt} : bool[4]
  %k = const {value = [1, -2, 3, 0]} : i64[4]
  %5 = div(%b, %k) : i64[4]
  %6 = log(%3) : f32[4]
  return %1, %2, %4, %5, %6
}
"""


@pytest.mark.parametrize("stage", ["mlir", "llvm"])
def test_emit_deterministic_across_hash_seeds(tmp_path, stage):
    src = tmp_path / "p.ir"
    src.write_text(_PROG)
    outs = []
    for seed in ("1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", _DET, str(src), stage], capture_output=True, text=True,
                           env=env, cwd=ROOT, timeout=120)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1]
    assert outs[0].strip()


def test_emit_stage_symbolic_is_coded_error():
    from mind.compiler.backend.cpu.api import emit_stage
    m = parse_module("func @main(%x: f32[N]) -> (f32[N]) {\n  %0 = exp(%x) : f32[N]\n  return %0\n}\n", "s")
    with pytest.raises(MindError) as ei:
        emit_stage(m, "mlir")
    assert ei.value.diagnostics[0].code == "E6003"


def test_symbolic_specializations_cached():
    from mind.compiler.backend.cpu.api import compile_function
    m = parse_module("func @main(%x: f32[N]) -> (f32[N]) {\n  %0 = add(%x, %x) : f32[N]\n  return %0\n}\n", "s")
    f = compile_function(m.functions[0], threads=1)
    for n in (3, 5, 3):
        x = np.arange(n, dtype=np.float32)
        (r,) = f([x])
        assert np.array_equal(r, x + x)
    assert len(f._kernels) == 2


def test_argument_errors_are_coded():
    from mind.compiler.backend.cpu.api import compile_function
    m = parse_module("func @main(%x: f32[3]) -> (f32[3]) {\n  %0 = add(%x, %x) : f32[3]\n  return %0\n}\n", "s")
    f = compile_function(m.functions[0], threads=1)
    with pytest.raises(MindError) as ei:
        f([np.zeros(4, np.float32)])
    assert ei.value.diagnostics[0].code == "E6009"


def test_compile_convenience():
    import mind
    f = mind.compile("func @main(%a: i32[2], %b: i32[2]) -> (i32[2]) {\n  %0 = div(%a, %b) : i32[2]\n  return %0\n}\n")
    r = f(np.array([7, -2147483648], np.int32), np.array([0, -1], np.int32))
    assert r.tolist() == [0, -2147483648]
    r = f(a=np.array([7, -7], np.int32), b=np.array([2, 2], np.int32))
    assert r.tolist() == [3, -3]
