"""The generated program tier: random well-typed chains of ops (depth ≥ 2).

A program starts from one parameter and applies 2-5 exact steps, each drawn from the ops that fit the
current value's type (elementwise arithmetic with a new or an earlier value, compare then select,
convert, reduce_max, integer reduce_sum and matmul, reshape, transpose, slice, pad, gather, a
constant operand); a float program may end in one inexact op (exp, log, reduce_sum, matmul), whose
accuracy class is then the result's.  Values are mostly normal with edge values mixed in, so the
programs also exercise NaN and infinities flowing through several ops -- and an implementation that
fuses ``mul`` then ``add`` into one rounding (an FMA) is caught, since the spec rounds each op.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np

from mind.conformance.generate.build import depth, success_case
from mind.conformance.generate.single_ops import ALL, DIRECTIONS, _factor
from mind.conformance.generate.values import rng_for, shape, values
from mind.ir.builder import FunctionBuilder
from mind.ir.core import Module, Value
from mind.spec.dtypes import DType
from mind.spec.ops import TensorType

PROGRAMS = 600
MAX_ELEMENTS = 48
_CLASS_WEIGHTS = (("normal", 0.6), ("zero", 0.1), ("inf", 0.1), ("nan", 0.1), ("extreme", 0.1))


class Program:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.b = FunctionBuilder("main")
        self.inputs: dict[str, np.ndarray] = {}
        self.names = iter(f"p{i}" for i in range(100))

    def cls(self) -> str:
        x = self.rng.random()
        for name, w in _CLASS_WEIGHTS:
            if x < w:
                return name
            x -= w
        return "normal"

    def param(self, dtype: DType, shp: list[int] | tuple[int, ...]) -> Value:
        v = self.b.param(next(self.names), TensorType(dtype, tuple(shp)))
        self.inputs[v.name] = values(self.rng, dtype, shp, self.cls() if dtype.is_float else "normal")
        return v

    def choice(self, seq: Any) -> Any:
        return seq[int(self.rng.integers(len(seq)))]


def _shape(v: Value) -> list[int]:
    return [int(d) for d in v.type.shape]


def _arith(p: Program, v: Value) -> Value:
    op = p.choice(("add", "sub", "mul", "div", "mul", "add"))
    s = _shape(v)
    other = p.param(v.type.dtype, s[int(p.rng.integers(len(s) + 1)):] if p.rng.random() < 0.5 else s)
    return p.b.emit(op, *((v, other) if p.rng.random() < 0.7 else (other, v)))


def _with_const(p: Program, v: Value) -> Value:
    dt = v.type.dtype
    c = p.b.const(values(p.rng, dt, [], "normal"), dt)
    return p.b.emit(p.choice(("add", "mul", "sub")), v, c)


def _compare_select(p: Program, v: Value) -> Value:
    other = p.param(v.type.dtype, _shape(v))
    pred = p.b.emit("compare", v, other, direction=p.choice(DIRECTIONS))
    return p.b.emit("select", pred, v, other)


def _convert(p: Program, v: Value) -> Value:
    return p.b.emit("convert", v, dtype=p.choice([d for d in ALL if d is not v.type.dtype]))


def _reduce(p: Program, v: Value) -> Value:
    rank = len(v.type.shape)
    axes = tuple(i for i in range(rank) if p.rng.random() < 0.5)
    exact_sum = v.type.dtype.is_int
    op = "reduce_sum" if exact_sum and p.rng.random() < 0.5 else "reduce_max"
    return p.b.emit(op, v, axes=axes, keepdims=bool(p.rng.random() < 0.5))


def _reshape(p: Program, v: Value) -> Value:
    total = int(np.prod(_shape(v)))
    return p.b.emit("reshape", v, shape=_factor(p, total, int(p.rng.integers(1, 4))))  # type: ignore[arg-type]


def _transpose(p: Program, v: Value) -> Value:
    return p.b.emit("transpose", v, permutation=tuple(int(i) for i in p.rng.permutation(len(v.type.shape))))


def _slice(p: Program, v: Value) -> Value:
    start, stop, step = [], [], []
    for n in _shape(v):
        s = p.choice((1, 1, 2, -1))
        if s > 0:
            a = int(p.rng.integers(0, n + 1))
            b = int(p.rng.integers(a, n + 1))
        else:
            a = n - 1
            b = int(p.rng.integers(-1, n))
        start.append(a), stop.append(b), step.append(s)
    return p.b.emit("slice", v, start=tuple(start), stop=tuple(stop), step=tuple(step))


def _pad(p: Program, v: Value) -> Value:
    rank = len(v.type.shape)
    value = p.param(v.type.dtype, [])
    ints = lambda hi: tuple(int(i) for i in p.rng.integers(0, hi + 1, size=rank))  # noqa: E731
    return p.b.emit("pad", v, value, lo=ints(1), hi=ints(1), interior=ints(1))


def _gather(p: Program, v: Value) -> Value:
    rank = len(v.type.shape)
    axis = int(p.rng.integers(rank))
    n = _shape(v)[axis]
    itype = p.choice((DType.I32, DType.I64))
    ishape = shape(p.rng, int(p.rng.integers(1, 3)), hi=3)
    i = p.b.param(next(p.names), TensorType(itype, tuple(ishape)))
    p.inputs[i.name] = p.rng.integers(-1, n + 2, size=ishape).astype(itype.numpy)
    return p.b.emit("gather", v, i, axis=axis)


def _int_matmul(p: Program, v: Value) -> Value:
    s = _shape(v)
    w = p.param(v.type.dtype, [s[-1], int(p.rng.integers(1, 4))])
    return p.b.emit("matmul", v, w)


Step = Callable[[Program, Value], Value]


def _steps(v: Value) -> list[Step]:
    t = v.type
    rank = len(t.shape)
    out: list[Step] = [_convert, _reshape, _transpose, _pad, _reduce]
    if t.dtype.is_numeric:
        out += [_arith, _arith, _arith, _with_const]
    out += [_compare_select]
    if rank:
        out += [_slice, _gather]
    if t.dtype.is_int and rank >= 2:
        out.append(_int_matmul)
    return out


def _terminal(p: Program, v: Value) -> Value:
    """An inexact float op at the end, when the value is a float tensor."""
    s = _shape(v)
    options = ["exp", "log", "reduce_sum"] + (["matmul"] if len(s) >= 2 else [])
    op = p.choice(options)
    if op == "reduce_sum":
        return p.b.emit(op, v, axes=tuple(range(len(s))), keepdims=False)
    if op == "matmul":
        return p.b.emit(op, v, p.param(v.type.dtype, [s[-1], 2]))
    return p.b.emit(op, v)


def program_case(k: int) -> dict[str, Any]:
    rng = rng_for(f"prog/{k:04d}")
    for _attempt in range(50):
        p = Program(rng)
        dtype = p.choice((DType.F32, DType.F32, DType.F64, DType.I32, DType.I64, DType.BOOL))
        v = p.param(dtype, shape(rng, int(rng.integers(1, 4)), hi=4))
        results = []
        for _ in range(int(rng.integers(2, 6))):
            v = p.choice(_steps(v))(p, v)
            if int(np.prod(_shape(v))) > MAX_ELEMENTS:
                break
            if rng.random() < 0.15:
                results.append(v)
        if int(np.prod(_shape(v))) > MAX_ELEMENTS or not p.b.ops:
            continue
        if v.type.dtype.is_float and rng.random() < 0.5:
            v = _terminal(p, v)
        results.append(v)
        fn = p.b.finish(results)
        if depth(fn) < 2:
            continue
        return success_case(f"prog/{k:04d}", f"a random program of {len(fn.ops)} ops (seeded draw {k})",
                            Module([fn]).text(), p.inputs, None, source="generated")
    raise RuntimeError(f"prog/{k:04d}: no program within the size bound")


def all_cases() -> Iterator[dict[str, Any]]:
    for k in range(PROGRAMS):
        yield program_case(k)
