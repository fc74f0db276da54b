"""The reference walks any function-shaped object: the IR's classes have every field its protocols
name, and a function built from plain objects runs on the interpreter."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from mind.ir.parser import parse_module
from mind.reference.interpreter import evaluate_function
from mind.reference.program import FunctionLike, OperationLike, ValueLike
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

SRC = "func @main(%x: f32[3]) -> (f32[3]) {\n  %0 = exp(%x) : f32[3]\n  %1 = add(%0, %x) : f32[3]\n  return %1\n}\n"


def _fields(protocol: type) -> set[str]:
    names = set(getattr(protocol, "__annotations__", {}))
    return names | {n for n, v in vars(protocol).items() if isinstance(v, property)}


def test_the_ir_classes_have_what_the_protocols_name():
    fn = parse_module(SRC).functions[0]
    for obj, protocol in ((fn, FunctionLike), (fn.ops[0], OperationLike), (fn.params[0], ValueLike),
                          (fn.ops[0].result, ValueLike)):
        missing = [f for f in sorted(_fields(protocol)) if not hasattr(obj, f)]
        assert not missing, f"{type(obj).__name__} lacks {missing} of {protocol.__name__}"


def test_the_interpreter_runs_a_function_of_plain_objects():
    t = TensorType(DType.F32, (3,))
    x = SimpleNamespace(name="x", type=t, span=None)
    e = SimpleNamespace(name="0", type=t, span=None)
    s = SimpleNamespace(name="1", type=t, span=None)
    ops = [SimpleNamespace(op="exp", operands=(x,), attrs={}, result=e, span=None),
           SimpleNamespace(op="add", operands=(e, x), attrs={}, result=s, span=None)]
    fn = SimpleNamespace(name="main", params=[x], ops=ops, results=[s], assumptions=[], span=None)
    a = np.array([0.0, 1.0, -2.0], np.float32)
    (got,) = evaluate_function(fn, [a], {})
    (want,) = evaluate_function(parse_module(SRC).functions[0], [a], {})
    np.testing.assert_array_equal(got, want)
