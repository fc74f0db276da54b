"""Core IR → StableHLO MLIR text (``mind export --to stablehlo``).

Every op is written so that it computes the MIND spec's semantics, including where StableHLO leaves
the behaviour to the implementation: integer division is guarded (``x / 0 = 0``, ``INT_MIN / -1 =
INT_MIN``), float→integer ``convert`` saturates and maps NaN to 0 with explicit selects, ``gather``
clamps its indices itself, ``x → bool`` is ``x != 0``.  What remains assumed is two's complement
wrap-around of integer ``add``/``sub``/``mul``/``matmul`` and of integer→integer ``convert``, which
StableHLO leaves implementation-defined and every implementation we know does (docs/export.md).
Ops are printed in MLIR's generic form, which every StableHLO version parses the same way.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from mind.compiler.export.common import require_concrete, slice_windows
from mind.ir.core import Function, Module, Value
from mind.calling import select_function
from mind.spec.dtypes import DType

_ELEM = {DType.BOOL: "i1", DType.I32: "i32", DType.I64: "i64", DType.F32: "f32", DType.F64: "f64"}
_CMP = {"eq": "EQ", "ne": "NE", "lt": "LT", "le": "LE", "gt": "GT", "ge": "GE"}


def ttype(dtype: DType, shape: Sequence[int]) -> str:
    dims = "".join(f"{d}x" for d in shape)
    return f"tensor<{dims}{_ELEM[dtype]}>"


def _ints(xs: Sequence[int]) -> str:
    return f"array<i64{': ' if len(xs) else ''}{', '.join(str(int(x)) for x in xs)}>"


def dense(arr: np.ndarray, dtype: DType) -> str:
    """An exact dense attribute: floats as the hex of their little-endian bytes, integers in decimal."""
    a = np.asarray(arr, dtype=dtype.numpy, order="C")
    t = ttype(dtype, a.shape)
    if a.size == 0:
        return f"dense<> : {t}" if a.ndim else f"dense<0> : {t}"
    if a.size > 1 and (a == a.reshape(-1)[0]).all() and not (dtype.is_float and np.isnan(a).any()):
        a = a.reshape(-1)[:1].reshape(())
        if dtype.is_float:
            bits = a.view(np.uint32 if dtype is DType.F32 else np.uint64)
            return f"dense<0x{int(bits):0{dtype.bits // 4}X}> : {t}"
    if dtype.is_float:
        return f'dense<"0x{a.astype(a.dtype.newbyteorder("<")).tobytes().hex().upper()}"> : {t}'
    if dtype is DType.BOOL:
        return f"dense<{_nested(a, lambda x: 'true' if x else 'false')}> : {t}"
    return f"dense<{_nested(a, lambda x: str(int(x)))}> : {t}"


def _nested(a: np.ndarray, fmt: Any) -> str:
    if a.ndim == 0:
        return fmt(a[()])
    return "[" + ", ".join(_nested(x, fmt) for x in a) + "]"


class Emitter:
    """Writes generic-form ops; every value is an SSA name with its (dtype, shape)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.count = 0

    def op(self, name: str, operands: Sequence[tuple[str, DType, tuple[int, ...]]], dtype: DType,
           shape: Sequence[int], attrs: str = "", region: str = "") -> tuple[str, DType, tuple[int, ...]]:
        res = f"%t{self.count}"
        self.count += 1
        ins = ", ".join(o[0] for o in operands)
        types = ", ".join(ttype(o[1], o[2]) for o in operands)
        attr = f" {{{attrs}}}" if attrs else ""
        reg = f" ({region})" if region else ""
        self.lines.append(f'    {res} = "stablehlo.{name}"({ins}){reg}{attr} : ({types}) -> {ttype(dtype, shape)}')
        return res, dtype, tuple(shape)

    def const(self, value: Any, dtype: DType, shape: Sequence[int] = ()) -> tuple[str, DType, tuple[int, ...]]:
        arr = np.broadcast_to(np.asarray(value, dtype=dtype.numpy), tuple(shape))
        return self.op("constant", [], dtype, shape, f"value = {dense(arr, dtype)}")

    def bcast(self, v: tuple[str, DType, tuple[int, ...]], shape: Sequence[int]) -> tuple[str, DType, tuple[int, ...]]:
        shape = tuple(shape)
        if v[2] == shape:
            return v
        dims = list(range(len(shape) - len(v[2]), len(shape)))
        return self.op("broadcast_in_dim", [v], v[1], shape, f"broadcast_dimensions = {_ints(dims)}")

    def compare(self, a: Any, b: Any, direction: str) -> Any:
        kind = "FLOAT" if a[1].is_float else ("UNSIGNED" if a[1] is DType.BOOL else "SIGNED")
        return self.op("compare", [a, b], DType.BOOL, a[2],
                       f"comparison_direction = #stablehlo<comparison_direction {direction}>, "
                       f"compare_type = #stablehlo<comparison_type {kind}>")

    def scalar_region(self, body_op: str, dtype: DType) -> str:
        t = ttype(dtype, ())
        return ("{\n    ^bb0(%lhs: " + t + ", %rhs: " + t + "):\n"
                f'      %r = "stablehlo.{body_op}"(%lhs, %rhs) : ({t}, {t}) -> {t}\n'
                f'      "stablehlo.return"(%r) : ({t}) -> ()\n' + "    }")


V = tuple  # (name, dtype, shape)


def _shape(v: Value) -> tuple[int, ...]:
    return tuple(int(d) for d in v.type.shape)


def _div(e: Emitter, a: V, b: V, dtype: DType, shape: tuple[int, ...]) -> V:
    if dtype.is_float:
        return e.op("divide", [a, b], dtype, shape)
    zero, one = e.const(0, dtype, shape), e.const(1, dtype, shape)
    is_zero = e.compare(b, zero, "EQ")
    ovf = e.op("and", [e.compare(a, e.const(dtype.int_min, dtype, shape), "EQ"),
                       e.compare(b, e.const(-1, dtype, shape), "EQ")], DType.BOOL, shape)
    guard = e.op("or", [is_zero, ovf], DType.BOOL, shape)
    safe = e.op("select", [guard, one, b], dtype, shape)
    q = e.op("divide", [a, safe], dtype, shape)  # INT_MIN / 1 = INT_MIN, as the spec wants
    return e.op("select", [is_zero, zero, q], dtype, shape)


def _convert(e: Emitter, x: V, dst: DType) -> V:
    src, shape = x[1], x[2]
    if dst is DType.BOOL:
        return e.compare(x, e.const(0, src, shape), "NE")  # NaN != 0 is true, -0 != 0 is false
    if src.is_float and dst.is_int:
        lo, hi = float(dst.int_min), float(dst.int_max) + 1.0  # both exact powers of two
        ge_lo = e.compare(x, e.const(lo, src, shape), "GE")
        lt_hi = e.compare(x, e.const(hi, src, shape), "LT")
        inside = e.op("and", [ge_lo, lt_hi], DType.BOOL, shape)  # false for NaN
        safe = e.op("select", [inside, x, e.const(0, src, shape)], src, shape)
        r = e.op("convert", [safe], dst, shape)
        r = e.op("select", [e.compare(x, e.const(hi, src, shape), "GE"), e.const(dst.int_max, dst, shape), r], dst, shape)
        return e.op("select", [e.compare(x, e.const(lo, src, shape), "LT"), e.const(dst.int_min, dst, shape), r],
                    dst, shape)
    if src is dst:
        return x
    return e.op("convert", [x], dst, shape)


def _reduce(e: Emitter, x: V, axes: Sequence[int], keepdims: bool, body: str, init: Any, out_shape: tuple[int, ...]) -> V:
    dtype, shape = x[1], x[2]
    reduced = tuple(d for i, d in enumerate(shape) if i not in axes)
    r = e.op("reduce", [x, e.const(init, dtype)], dtype, reduced, f"dimensions = {_ints(axes)}",
             region=e.scalar_region(body, dtype))
    return e.op("reshape", [r], dtype, out_shape) if keepdims and axes else r


def _slice(e: Emitter, x: V, start: Sequence[int], step: Sequence[int], out: tuple[int, ...]) -> V:
    rev, lo, hi, st = slice_windows(x[2], start, step, out)
    if rev:
        x = e.op("reverse", [x], x[1], x[2], f"dimensions = {_ints(rev)}")
    return e.op("slice", [x], x[1], out, f"start_indices = {_ints(lo)}, limit_indices = {_ints(hi)}, "
                                         f"strides = {_ints(st)}")


def _gather(e: Emitter, x: V, idx: V, axis: int, out: tuple[int, ...]) -> V:
    n = x[2][axis]
    if n == 0:
        return e.const(0, x[1], out)
    it = idx[1]
    clamped = e.op("clamp", [e.const(0, it), idx, e.const(n - 1, it)], it, idx[2])
    r_idx = len(idx[2])
    offset = [d for d in range(len(out)) if d < axis or d >= axis + r_idx]
    sizes = [1 if i == axis else d for i, d in enumerate(x[2])]
    return e.op("gather", [x, clamped], x[1], out,
                f"dimension_numbers = #stablehlo.gather<offset_dims = [{', '.join(map(str, offset))}], "
                f"collapsed_slice_dims = [{axis}], start_index_map = [{axis}], index_vector_dim = {r_idx}>, "
                f"slice_sizes = {_ints(sizes)}, indices_are_sorted = false")


def _matmul(e: Emitter, a: V, b: V, out: tuple[int, ...]) -> V:
    batch = out[:-2]
    nb = len(batch)
    a = e.bcast(a, batch + a[2][-2:])
    b = e.bcast(b, batch + b[2][-2:])
    dims = list(range(nb))
    return e.op("dot_general", [a, b], a[1], out,
                f"dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [{', '.join(map(str, dims))}], "
                f"rhs_batching_dimensions = [{', '.join(map(str, dims))}], lhs_contracting_dimensions = [{nb + 1}], "
                f"rhs_contracting_dimensions = [{nb}]>")


def _conv2d(e: Emitter, x: V, w: V, attrs: dict[str, Any], out: tuple[int, ...]) -> V:
    pad = attrs["padding"]
    return e.op("convolution", [x, w], x[1], out,
                "dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, "
                f"window_strides = {_ints(attrs['strides'])}, "
                f"padding = dense<[[{pad[0][0]}, {pad[0][1]}], [{pad[1][0]}, {pad[1][1]}]]> : tensor<2x2xi64>, "
                f"lhs_dilation = {_ints(attrs['lhs_dilation'])}, rhs_dilation = {_ints(attrs['rhs_dilation'])}, "
                "feature_group_count = 1 : i64, batch_group_count = 1 : i64")


def _max_identity(dtype: DType) -> Any:
    return -math.inf if dtype.is_float else (False if dtype is DType.BOOL else dtype.int_min)


def lower_op(e: Emitter, op: Any, ins: list[V]) -> V:
    name, attrs = op.op, op.attrs
    dtype, out = op.result.type.dtype, _shape(op.result)
    if name == "const":
        return e.op("constant", [], dtype, out, f"value = {dense(attrs['value'], dtype)}")
    if name in ("add", "sub", "mul", "div"):
        a, b = e.bcast(ins[0], out), e.bcast(ins[1], out)
        if name == "div":
            return _div(e, a, b, dtype, out)
        return e.op({"add": "add", "sub": "subtract", "mul": "multiply"}[name], [a, b], dtype, out)
    if name in ("exp", "log"):
        return e.op({"exp": "exponential", "log": "log"}[name], ins, dtype, out)
    if name == "compare":
        return e.compare(e.bcast(ins[0], out), e.bcast(ins[1], out), _CMP[attrs["direction"]])
    if name == "select":
        return e.op("select", [e.bcast(v, out) for v in ins], dtype, out)
    if name == "convert":
        return _convert(e, ins[0], attrs["dtype"])
    if name == "reduce_sum":
        return _reduce(e, ins[0], attrs["axes"], attrs["keepdims"], "add", 0, out)
    if name == "reduce_max":
        body = "or" if dtype is DType.BOOL else "maximum"
        return _reduce(e, ins[0], attrs["axes"], attrs["keepdims"], body, _max_identity(dtype), out)
    if name == "reshape":
        return e.op("reshape", ins, dtype, out)
    if name == "transpose":
        return e.op("transpose", ins, dtype, out, f"permutation = {_ints(attrs['permutation'])}")
    if name == "slice":
        return _slice(e, ins[0], attrs["start"], attrs["step"], out)
    if name == "pad":
        return e.op("pad", ins, dtype, out, f"edge_padding_low = {_ints(attrs['lo'])}, "
                                            f"edge_padding_high = {_ints(attrs['hi'])}, "
                                            f"interior_padding = {_ints(attrs['interior'])}")
    if name == "gather":
        return _gather(e, ins[0], ins[1], attrs["axis"], out)
    if name == "matmul":
        return _matmul(e, ins[0], ins[1], out)
    if name == "conv2d":
        return _conv2d(e, ins[0], ins[1], attrs, out)
    raise KeyError(name)


def export_function(fn: Function) -> str:
    require_concrete(fn, "StableHLO")
    e = Emitter()
    values: dict[int, V] = {}
    params = []
    for i, p in enumerate(fn.params):
        v = (f"%arg{i}", p.type.dtype, _shape(p))
        values[id(p)] = v
        params.append(f"{v[0]}: {ttype(v[1], v[2])}")
    for op in fn.ops:
        values[id(op.result)] = lower_op(e, op, [values[id(v)] for v in op.operands])
    outs = [values[id(v)] for v in fn.results]
    res_types = ", ".join(ttype(v[1], v[2]) for v in outs)
    lines = ["module {", f"  func.func @{fn.name}({', '.join(params)}) -> ({res_types}) {{", *e.lines,
             f"    return {', '.join(v[0] for v in outs)} : {res_types}" if outs else "    return",
             "  }", "}"]
    return "\n".join(lines) + "\n"


def export(module: Module, function: str | None = None) -> str:
    return export_function(select_function(module, function))
