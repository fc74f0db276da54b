"""Core IR → an ONNX model (``mind export --to onnx``), opset 20, written by ``protobuf``.

Each op is written to compute the MIND spec's semantics where ONNX leaves a case undefined or
differs: integer ``div`` is guarded (``x / 0 = 0``, ``INT_MIN / -1 = INT_MIN``), float→integer
``Cast`` saturates and maps NaN to 0 through ``Where``, ``x → bool`` is ``x != 0``, ``gather`` clips
its indices (ONNX wraps negative ones and rejects out-of-range ones), ``reduce_*`` over no axes is
the identity (ONNX would reduce all), ``Reshape`` has ``allowzero = 1``, ``Slice`` to the start with a
negative step uses INT64_MIN, interior padding (``pad``) and input dilation (``conv2d``) are built from
``Reshape``/``Pad``/``Slice``.  Integer conv2d cannot be expressed (ONNX ``Conv`` is float-only):
E6003 naming ``conv2d.semantics``.  Assumed, as for StableHLO: two's complement wrap-around of
integer Add/Sub/Mul/MatMul and of integer ``Cast``, and truncating integer ``Div``.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from mind.compiler.export import protobuf as pb
from mind.compiler.export.common import cannot_express, require_concrete
from mind.ir.core import Function, Module, Value
from mind.calling import select_function
from mind.spec.dtypes import DType

OPSET = 20
_CMP = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual"}


class Graph:
    """Nodes in order; every value a name with its dtype and shape."""

    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.count = 0

    def fresh(self) -> str:
        self.count += 1
        return f"v{self.count}"

    def node(self, op_type: str, inputs: Sequence[str], attrs: Sequence[bytes] = (), out: str | None = None) -> str:
        name = out or self.fresh()
        self.nodes.append(pb.node(op_type, inputs, [name], f"n{len(self.nodes)}", attrs))
        return name

    def const(self, value: Any, dtype: DType, shape: Sequence[int] = ()) -> str:
        arr = np.broadcast_to(np.asarray(value, dtype=dtype.numpy), tuple(shape))
        name = self.fresh()
        t = pb.tensor(name, dtype.value, arr.shape, np.asarray(arr, order="C").astype(arr.dtype.newbyteorder("<")).tobytes())
        return self.node("Constant", [], [pb.attribute_tensor("value", t)], out=name)

    def ints(self, values: Sequence[int]) -> str:
        return self.const(np.asarray(list(values), dtype=np.int64), DType.I64, (len(values),))


def _shape(v: Value) -> tuple[int, ...]:
    return tuple(int(d) for d in v.type.shape)


def _div(g: Graph, a: str, b: str, dtype: DType) -> str:
    if dtype.is_float:
        return g.node("Div", [a, b])
    zero, one = g.const(0, dtype), g.const(1, dtype)
    is_zero = g.node("Equal", [b, zero])
    ovf = g.node("And", [g.node("Equal", [a, g.const(dtype.int_min, dtype)]), g.node("Equal", [b, g.const(-1, dtype)])])
    safe = g.node("Where", [g.node("Or", [is_zero, ovf]), one, b])
    return g.node("Where", [is_zero, zero, g.node("Div", [a, safe])])


def _convert(g: Graph, x: str, src: DType, dst: DType) -> str:
    if dst is DType.BOOL:
        return g.node("Not", [g.node("Equal", [x, g.const(0, src)])])
    if src.is_float and dst.is_int:
        lo, hi = g.const(float(dst.int_min), src), g.const(float(dst.int_max) + 1.0, src)
        inside = g.node("And", [g.node("GreaterOrEqual", [x, lo]), g.node("Less", [x, hi])])
        r = g.node("Cast", [g.node("Where", [inside, x, g.const(0, src)])], [pb.attribute_int("to", pb.ELEM_TYPE[dst.value])])
        r = g.node("Where", [g.node("GreaterOrEqual", [x, hi]), g.const(dst.int_max, dst), r])
        return g.node("Where", [g.node("Less", [x, lo]), g.const(dst.int_min, dst), r])
    if src is dst:
        return g.node("Identity", [x])
    return g.node("Cast", [x], [pb.attribute_int("to", pb.ELEM_TYPE[dst.value])])


def _compare(g: Graph, a: str, b: str, dtype: DType, direction: str) -> str:
    if direction == "ne":
        return g.node("Not", [g.node("Equal", [a, b])])
    if dtype is DType.BOOL and direction != "eq":  # ONNX orders numbers only: false < true as 0 < 1
        to_i32 = [pb.attribute_int("to", pb.ELEM_TYPE["i32"])]
        a, b = g.node("Cast", [a], to_i32), g.node("Cast", [b], to_i32)
    return g.node(_CMP[direction], [a, b])


def _reduce(g: Graph, x: str, dtype: DType, axes: Sequence[int], keepdims: bool, op_type: str) -> str:
    if not axes:
        return g.node("Identity", [x])
    keep = [pb.attribute_int("keepdims", int(keepdims))]
    if dtype is DType.BOOL:  # max of bools is their or: reduce 0/1 as i32 (INT_MIN when empty), then > 0
        x = g.node("Cast", [x], [pb.attribute_int("to", pb.ELEM_TYPE["i32"])])
        r = g.node(op_type, [x, g.ints(axes)], keep)
        return g.node("Greater", [r, g.const(0, DType.I32)])
    return g.node(op_type, [x, g.ints(axes)], keep)


def _slice(g: Graph, x: str, shape: Sequence[int], start: Sequence[int], stop: Sequence[int], step: Sequence[int],
           out: Sequence[int]) -> str:
    starts, ends, steps = [], [], []
    for n, b, e, s, m in zip(shape, start, stop, step, out):
        if m == 0:
            starts.append(0), ends.append(0), steps.append(1)
        elif s > 0:
            starts.append(b), ends.append(e), steps.append(s)
        else:  # a negative end counts from the back in ONNX: INT64_MIN means "before index 0"
            starts.append(b), ends.append(e if e >= 0 else -(1 << 63)), steps.append(s)
    axes = list(range(len(shape)))
    return g.node("Slice", [x, g.ints(starts), g.ints(ends), g.ints(axes), g.ints(steps)])


def _interior(g: Graph, x: str, shape: list[int], axis: int, k: int, value: str) -> tuple[str, list[int]]:
    """Insert ``k`` copies of ``value`` between neighbours along ``axis``: reshape to [P, n, 1, Q],
    pad the unit axis to 1 + k, reshape to [P, n(1 + k), Q], drop the last k, reshape back."""
    n = shape[axis]
    if k == 0 or n <= 1:
        return x, shape
    p, q = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    allow = [pb.attribute_int("allowzero", 1)]
    y = g.node("Reshape", [x, g.ints([p, n, 1, q])], allow)
    y = g.node("Pad", [y, g.ints([0, 0, 0, 0, 0, 0, k, 0]), value], [])
    y = g.node("Reshape", [y, g.ints([p, n * (1 + k), q])], allow)
    y = g.node("Slice", [y, g.ints([0]), g.ints([n * (1 + k) - k]), g.ints([1]), g.ints([1])])
    new = list(shape)
    new[axis] = n + (n - 1) * k
    return g.node("Reshape", [y, g.ints(new)], allow), new


def _pad(g: Graph, x: str, v: str, shape: Sequence[int], lo: Sequence[int], hi: Sequence[int], interior: Sequence[int]) -> str:
    cur = list(shape)
    for axis, k in enumerate(interior):
        x, cur = _interior(g, x, cur, axis, k, v)
    if any(lo) or any(hi):
        x = g.node("Pad", [x, g.ints(list(lo) + list(hi)), v])
    return x


def _gather(g: Graph, x: str, idx: str, itype: DType, n: int, axis: int, dtype: DType, out: Sequence[int]) -> str:
    if n == 0:
        return g.const(0, dtype, out)
    clipped = g.node("Clip", [idx, g.const(0, itype), g.const(n - 1, itype)])
    return g.node("Gather", [x, clipped], [pb.attribute_int("axis", axis)])


def _conv2d(g: Graph, op: Any, x: str, w: str) -> str:
    dtype = op.result.type.dtype
    if not dtype.is_float:
        raise cannot_express("ONNX", op, "conv2d.semantics",
                             f"ONNX Conv is defined on floating-point tensors only, not {dtype.value}")
    a = op.attrs
    shape = list(_shape(op.operands[0]))
    nchw = g.node("Transpose", [x], [pb.attribute_ints("perm", [0, 3, 1, 2])])
    cur = [shape[0], shape[3], shape[1], shape[2]]
    zero = g.const(0, dtype)
    for i in range(2):
        nchw, cur = _interior(g, nchw, cur, 2 + i, a["lhs_dilation"][i] - 1, zero)
    oihw = g.node("Transpose", [w], [pb.attribute_ints("perm", [3, 2, 0, 1])])
    (pt, pb_), (pl, pr) = a["padding"]
    y = g.node("Conv", [nchw, oihw], [pb.attribute_ints("strides", a["strides"]),
                                      pb.attribute_ints("pads", [pt, pl, pb_, pr]),
                                      pb.attribute_ints("dilations", a["rhs_dilation"])])
    return g.node("Transpose", [y], [pb.attribute_ints("perm", [0, 2, 3, 1])])


def lower_op(g: Graph, op: Any, ins: list[str]) -> str:
    name, a = op.op, op.attrs
    dtype, out = op.result.type.dtype, _shape(op.result)
    in_dtype = op.operands[0].type.dtype if op.operands else dtype
    if name == "const":
        return g.const(a["value"], dtype, out)
    if name in ("add", "sub", "mul"):
        return g.node({"add": "Add", "sub": "Sub", "mul": "Mul"}[name], ins)
    if name == "div":
        return _div(g, ins[0], ins[1], dtype)
    if name in ("exp", "log"):
        return g.node({"exp": "Exp", "log": "Log"}[name], ins)
    if name == "compare":
        return _compare(g, ins[0], ins[1], in_dtype, a["direction"])
    if name == "select":
        return g.node("Where", ins)
    if name == "convert":
        return _convert(g, ins[0], in_dtype, a["dtype"])
    if name in ("reduce_sum", "reduce_max"):
        return _reduce(g, ins[0], dtype, a["axes"], a["keepdims"], "ReduceSum" if name == "reduce_sum" else "ReduceMax")
    if name == "reshape":
        return g.node("Reshape", [ins[0], g.ints(out)], [pb.attribute_int("allowzero", 1)])
    if name == "transpose":
        return g.node("Transpose", ins, [pb.attribute_ints("perm", a["permutation"])])
    if name == "slice":
        return _slice(g, ins[0], _shape(op.operands[0]), a["start"], a["stop"], a["step"], out)
    if name == "pad":
        return _pad(g, ins[0], ins[1], _shape(op.operands[0]), a["lo"], a["hi"], a["interior"])
    if name == "gather":
        return _gather(g, ins[0], ins[1], op.operands[1].type.dtype, _shape(op.operands[0])[a["axis"]], a["axis"],
                       dtype, out)
    if name == "matmul":
        return g.node("MatMul", ins)
    if name == "conv2d":
        return _conv2d(g, op, ins[0], ins[1])
    raise KeyError(name)


def export_function(fn: Function) -> bytes:
    from mind.version import __version__

    require_concrete(fn, "ONNX")
    g = Graph()
    values: dict[int, str] = {}
    inputs = []
    for p in fn.params:
        values[id(p)] = f"in_{p.name}"
        inputs.append(pb.value_info(values[id(p)], p.type.dtype.value, _shape(p)))
    for op in fn.ops:
        values[id(op.result)] = lower_op(g, op, [values[id(v)] for v in op.operands])
    outputs = []
    for k, v in enumerate(fn.results):
        g.node("Identity", [values[id(v)]], out=f"out{k}")
        outputs.append(pb.value_info(f"out{k}", v.type.dtype.value, _shape(v)))
    return pb.model(pb.graph(fn.name, g.nodes, inputs, outputs), OPSET, "mind", __version__)


def export(module: Module, function: str | None = None) -> bytes:
    return export_function(select_function(module, function))
