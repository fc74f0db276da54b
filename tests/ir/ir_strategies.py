"""Hypothesis strategies: random well-typed Core IR modules over all 19 ops.

Functions are built with ``mind.ir.builder.FunctionBuilder`` (so every result type comes from the
spec's shape rules), with optional symbolic dims and ``where`` assumptions.  A draw that violates
a constraint is simply skipped; ``OPS_USED`` records which ops were emitted.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from hypothesis import strategies as st

from mind.ir.builder import FunctionBuilder
from mind.ir.core import Assumption, Module
from mind.spec.dims import sym
from mind.spec.dtypes import ALL_DTYPES, DType, FLOAT_DTYPES, NUMERIC_DTYPES
from mind.spec.ops import OPS, ConstraintUndecided, ConstraintViolation, TensorType

OP_NAMES = list(OPS)
OPS_USED: set[str] = set()

SPECIAL_FLOATS = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1e-45, 5e-324, 1.5, -2.25, 3.4e38, 0.1]


def _scalar(draw, dtype: DType) -> Any:
    if dtype is DType.BOOL:
        return draw(st.booleans())
    if dtype.is_int:
        return draw(st.integers(dtype.int_min, dtype.int_max))
    return draw(st.one_of(st.sampled_from(SPECIAL_FLOATS),
                          st.floats(width=32 if dtype is DType.F32 else 64, allow_nan=False)))


def _array(draw, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    size = int(np.prod(shape)) if shape else 1
    if draw(st.booleans()):
        vals = [_scalar(draw, dtype)] * size  # a splat
    else:
        vals = [_scalar(draw, dtype) for _ in range(size)]
    with np.errstate(over="ignore"):
        return np.array(vals, dtype=dtype.numpy).reshape(shape)


def _static(t: TensorType) -> bool:
    return all(isinstance(d, int) for d in t.shape)


@st.composite
def functions(draw, name: str = "main", max_ops: int = 8):
    use_sym = draw(st.booleans())
    fb = FunctionBuilder(name)
    B = sym("B")
    if use_sym:
        fb.assume(Assumption(B, ">=", 1))
        if draw(st.booleans()):
            fb.assume(Assumption(B, "<=", draw(st.integers(1, 4096))))
    values = []
    for i in range(draw(st.integers(1, 3))):
        dtype = draw(st.sampled_from(ALL_DTYPES))
        shape = list(draw(st.lists(st.integers(0, 4), min_size=0, max_size=4)))
        if use_sym and shape and draw(st.booleans()):
            shape[0] = B
        values.append(fb.param(f"p{i}", TensorType(dtype, tuple(shape))))
    if use_sym and not any(isinstance(d, type(B)) for v in values for d in v.type.shape):
        values.append(fb.param("s", TensorType(DType.F32, (B, 2))))
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(st.sampled_from(OP_NAMES))
        try:
            v = _emit(draw, fb, op, values)
        except (ConstraintViolation, ConstraintUndecided):
            continue
        if v is not None:
            values.append(v)
            OPS_USED.add(op)
    k = draw(st.integers(1, min(3, len(values))))
    results = draw(st.lists(st.sampled_from(values), min_size=1, max_size=k))
    return fb.finish(results)


#: Byte strings ``mutate`` inserts: tokens that break grammar, limits and number syntax.
MUTATIONS = (b"*", b"B", b"(", b"]", b"-", b"9999999999", b"%0", b",", b"?", b"\xff", b"where N >= 1",
             b" * (A + B + 1)", b"\xd9\xa3", b"-" * 64, b"1" * 60, b"outputs: %0\n", b"[?, 3]", b"max(B, 3)")


def mutate(draw, data: bytes, rounds: tuple[int, int] = (0, 4)) -> bytes:
    """``data`` after a few random byte-level edits: deletions, insertions of ``MUTATIONS``,
    overwritten bytes, appended noise (IR text as a careless or hostile sender makes it)."""
    base = bytearray(data)
    for _ in range(draw(st.integers(*rounds))):
        kind = draw(st.integers(0, 3))
        pos = draw(st.integers(0, max(len(base) - 1, 0)))
        if kind == 0 and base:
            del base[pos:pos + draw(st.integers(1, 8))]
        elif kind == 1:
            base[pos:pos] = draw(st.sampled_from(MUTATIONS))
        elif kind == 2 and base:
            base[pos] = draw(st.integers(0, 255))
        else:
            base += draw(st.binary(max_size=8))
    return bytes(base)


@st.composite
def modules(draw):
    n = draw(st.integers(1, 2))
    return Module([draw(functions(name=f"f{i}" if i else "main")) for i in range(n)])


def _const(draw, fb, dtype, shape):
    return fb.emit("const", value=_array(draw, dtype, tuple(shape)))


def _emit(draw, fb: FunctionBuilder, op: str, values: list):
    x = draw(st.sampled_from(values))
    t = x.type
    A = fb.arith
    if op == "const":
        dtype = draw(st.sampled_from(ALL_DTYPES))
        shape = draw(st.lists(st.integers(0, 3), max_size=3))
        return _const(draw, fb, dtype, shape)
    if op in ("add", "sub", "mul", "div", "compare"):
        kind = draw(st.sampled_from(["self", "other", "scalar"]))
        if kind == "self":
            y = x
        elif kind == "other":
            y = draw(st.sampled_from(values))
        else:
            if t.dtype is DType.BOOL and op != "compare":
                return None
            y = _const(draw, fb, t.dtype, ())
        if op == "compare":
            return fb.emit(op, x, y, direction=draw(st.sampled_from(OPS["compare"].attrs[0].choices)))
        return fb.emit(op, x, y)
    if op in ("exp", "log"):
        if not t.dtype.is_float:
            x = fb.emit("convert", x, dtype=draw(st.sampled_from(FLOAT_DTYPES)))
        return fb.emit(op, x)
    if op == "select":
        z = _const(draw, fb, t.dtype, ())
        pred = fb.emit("compare", x, x, direction="eq")
        return fb.emit("select", pred, x, z) if draw(st.booleans()) else fb.emit("select", pred, z, x)
    if op == "convert":
        return fb.emit(op, x, dtype=draw(st.sampled_from(ALL_DTYPES)))
    if op in ("reduce_sum", "reduce_max"):
        if op == "reduce_sum" and t.dtype is DType.BOOL:
            return None
        axes = sorted(draw(st.sets(st.integers(0, max(t.rank - 1, 0)), max_size=t.rank))) if t.rank else []
        return fb.emit(op, x, axes=tuple(axes), keepdims=draw(st.booleans()))
    if op == "reshape":
        mode = draw(st.sampled_from(["flat", "split", "same"]))
        if mode == "flat":
            shape = (A.prod(t.shape),)
        elif mode == "split" and t.rank >= 1:
            shape = (1,) + tuple(t.shape) + (1,)
        else:
            shape = tuple(t.shape)
        return fb.emit(op, x, shape=shape)
    if op == "transpose":
        perm = draw(st.permutations(list(range(t.rank))))
        return fb.emit(op, x, permutation=tuple(perm))
    if op == "slice":
        start, stop, step = [], [], []
        for d in t.shape:
            if isinstance(d, int):
                s = draw(st.sampled_from([1, 2, 3, -1, -2]))
                if s > 0:
                    b = draw(st.integers(0, d))
                    e = draw(st.integers(0, d))
                else:
                    b = draw(st.integers(-1, d - 1)) if d >= 0 else -1
                    e = draw(st.integers(-1, d - 1))
            else:
                if draw(st.booleans()):
                    s, b, e = 1, 0, d
                else:
                    s, b, e = -1, d - 1, -1
            start.append(b), stop.append(e), step.append(s)
        return fb.emit(op, x, start=tuple(start), stop=tuple(stop), step=tuple(step))
    if op == "pad":
        v = _const(draw, fb, t.dtype, ())
        r = t.rank
        ints = st.lists(st.integers(0, 2), min_size=r, max_size=r)
        return fb.emit(op, x, v, lo=tuple(draw(ints)), hi=tuple(draw(ints)), interior=tuple(draw(ints)))
    if op == "gather":
        if t.rank == 0:
            return None
        idx = _const(draw, fb, draw(st.sampled_from([DType.I32, DType.I64])),
                     draw(st.lists(st.integers(0, 3), max_size=2)))
        return fb.emit(op, x, idx, axis=draw(st.integers(0, t.rank - 1)))
    if op == "matmul":
        if t.rank < 2 or t.dtype is DType.BOOL:
            return None
        perm = tuple(range(t.rank - 2)) + (t.rank - 1, t.rank - 2)
        xt = fb.emit("transpose", x, permutation=perm)
        return fb.emit(op, x, xt)
    if op == "conv2d":
        dtype = t.dtype if t.dtype in NUMERIC_DTYPES else DType.F32
        if t.rank == 4 and isinstance(t.shape[3], int) and t.dtype in NUMERIC_DTYPES:
            inp = x
        else:
            inp = _const(draw, fb, dtype, draw(st.tuples(st.integers(1, 2), st.integers(1, 4),
                                                          st.integers(1, 4), st.integers(1, 2))))
        c = inp.type.shape[3]
        kh, kw, o = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
        w = _const(draw, fb, dtype, (kh, kw, c, o))
        small = st.integers(1, 2)
        pad = st.tuples(st.integers(0, 1), st.integers(0, 1))
        return fb.emit(op, inp, w, strides=(draw(small), draw(small)), padding=(draw(pad), draw(pad)),
                       lhs_dilation=(draw(small), draw(small)), rhs_dilation=(draw(small), draw(small)))
    raise AssertionError(op)
