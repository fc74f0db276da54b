"""Deferred work of the frontend is invisible to readers.

Splat constants (``let x: Tensor[f32, (2, 3)] = 1``, ``zeros``/``ones``/``full``) carry their NumPy
array as deferred ``attrs`` (``Operation.deferred``), and a function's span is computed on first
read.  Whoever reads them gets exactly what eager construction gave: a read-only, zero-strided view
of one element of the right dtype, and the same ``Span``.
"""

from __future__ import annotations

import numpy as np

from mind.compiler.frontend.api import compile_source, lower_source
from mind.compiler.passes import canonicalize
from mind.ir.core import Function, Operation, Value
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

def _consts(module):
    return [op for f in module.functions for op in f.ops if op.op == "const"]


def test_splat_constants_materialize_as_before():
    m = lower_source("let x: Tensor[f32,(4,3)] = 1;\nlet b: Tensor[f64,(3)] = -0.0;\n"
                     "let i: Tensor[i32,(5)] = 7;\nlet z = tensor.zeros([2, 2]);\n(x, b, i, z)")
    vals = [op.attrs["value"] for op in _consts(m)]
    assert [(v.dtype, v.shape, v.strides, v.flags.writeable) for v in vals] == [
        (np.dtype(np.float32), (4, 3), (0, 0), False), (np.dtype(np.float64), (3,), (0,), False),
        (np.dtype(np.int32), (5,), (0,), False), (np.dtype(np.float32), (2, 2), (0, 0), False)]
    assert np.signbit(vals[1]).all() and (vals[2] == 7).all()
    op = _consts(m)[0]
    assert op.attrs is op.attrs  # built once


def test_canonicalize_does_not_build_large_splats():
    src = "let x: Tensor[f32,(128,784)] = 1;\nlet w: Tensor[f32,(784,512)] = 1;\ntensor.matmul(x, w)"
    fn = lower_source(src).functions[0]
    out = canonicalize(fn)
    assert all(op._make is not None for op in out.ops if op.op == "const")
    assert "splat(1.0)" in compile_source(src).text()


def test_function_span_is_computed_on_read():
    m = compile_source("let a = 1;\na + 2", "f.mind")
    f = m.functions[0]
    assert f.span is not None and f.span.file == "f.mind" and f.span.line == 1
    assert f.span is f.span


def test_ir_classes_keep_their_interfaces():
    t = TensorType(DType.F32, (2, 3))
    assert t == TensorType(DType.F32, (2, 3)) and hash(t) == hash((DType.F32, (2, 3)))
    assert repr(t) == "TensorType(dtype=<DType.F32: 'f32'>, shape=(2, 3))" and t.rank == 2
    try:
        t.dtype = DType.F64  # type: ignore[misc]
    except AttributeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("TensorType must stay immutable")
    v = Value("x", t)
    op = Operation("exp", (v,), {}, Value("0", t))
    assert op.attrs == {} and op.span is None and v.span is None
    f = Function("g", [v], [op], [op.result])
    assert f.assumptions == [] and f.span is None
    assert DType.F32.is_float and not DType.I32.is_float and DType.I64.int_max == 2**63 - 1
