"""Differential testing of fusion: chains of movement ops, identity reductions, pads and broadcasts
feeding contractions, compiled for the cpu backend and compared bit-exactly with the reference.

Why a strategy of its own: ``test_differential`` returns every op's value (so that each op is checked
on its own), which gives every producer a second user, and MLIR's elementwise fusion only fuses a
producer with one user, so those programs hardly ever fuse.  Here only the last value of a chain is
returned (sometimes twice, sometimes with one intermediate value), so producers fuse into their
consumers as they would in a user's program; the miscompile of conformance case prog/0284 was of
this kind (an identity ``reduce_sum`` fused into a batched matmul).

The programs are compared with the reference bit for bit: the inputs are small integers, integer
arithmetic wraps (any order gives the same bits) and a float program is kept only if every value
and every accumulation of the reference run stays an integer below 2^p (p: the dtype's precision),
where every order of evaluation is exact too.
"""

from __future__ import annotations

import math
import os

import numpy as np
from hypothesis import assume, given, settings, strategies as st

from mind.backends import compile_for
from mind.ir.builder import FunctionBuilder
from mind.reference.accuracy import accumulation
from mind.calling import run_reference
from mind.spec.dtypes import DType
from mind.spec.ops import ConstraintViolation, TensorType

DTYPES = [DType.F32, DType.F64, DType.I32, DType.I64]
SMALL = [-2, -1, 0, 1, 2, 3]
MOVES = ["transpose", "reshape", "slice", "pad", "identity_sum", "identity_max", "broadcast_into",
         "broadcast_from", "select", "convert"]
CONSUMERS = ["matmul", "matmul_rhs", "batched_matmul", "conv2d", "reduce", "gather", "broadcast_into"]
_PRECISION = {DType.F32: 24, DType.F64: 53}


def _try(b: FunctionBuilder, op: str, *xs, **attrs):
    try:
        return b.emit(op, *xs, **attrs)
    except (ConstraintViolation, ValueError, IndexError, KeyError):
        return None


class _Program:
    """A function under construction and the arrays of its parameters."""

    def __init__(self, draw, dims) -> None:
        self.draw, self.dims = draw, dims
        self.b = FunctionBuilder("main")
        self.inputs: dict[str, np.ndarray] = {}

    def param(self, dtype: DType, shape: tuple[int, ...], may_be_const: bool = True):
        """A parameter (or, one time in three, a constant) of small integers."""
        n = math.prod(shape)
        vals = np.array(self.draw(st.lists(st.sampled_from(SMALL), min_size=n, max_size=n)) if n <= 64 else
                        np.random.default_rng(self.draw(st.integers(0, 2**32 - 1))).choice(SMALL, n))
        arr = vals.astype(dtype.numpy).reshape(shape)
        if may_be_const and self.draw(st.integers(0, 2)) == 0:
            return self.b.const(arr, dtype)
        v = self.b.param(f"p{len(self.inputs)}", TensorType(dtype, shape))
        self.inputs[v.name] = arr
        return v

    def shape(self, rank: int) -> tuple[int, ...]:
        return tuple(self.draw(st.lists(self.dims, min_size=rank, max_size=rank)))

    # ------------------------------------------------------------------ movement and broadcasts
    def move(self, v):
        draw, b = self.draw, self.b
        kind = draw(st.sampled_from(MOVES))
        shape, dt, r = v.type.shape, v.type.dtype, v.type.rank
        if kind == "transpose":
            return _try(b, kind, v, permutation=tuple(draw(st.permutations(range(r)))))
        if kind == "reshape":
            n = math.prod(shape)
            ones = [d for d in shape if d != 1]
            at = draw(st.integers(0, r))
            targets = [(n,), tuple(ones), shape[:at] + (1,) + shape[at:]]
            if n % 2 == 0:
                targets.append((2, n // 2))
            return _try(b, kind, v, shape=draw(st.sampled_from(targets)))
        if kind == "slice" and 0 not in shape:
            start, stop, step = [], [], []
            for d in shape:  # never empty: an empty slice leaves nothing to fuse
                s = draw(st.sampled_from([1, 1, 2, -1]))
                a = draw(st.integers(0, d - 1))
                start.append(a)
                stop.append(draw(st.integers(a + 1, d)) if s > 0 else draw(st.integers(-1, a - 1)))
                step.append(s)
            return _try(b, kind, v, start=tuple(start), stop=tuple(stop), step=tuple(step))
        if kind == "pad":
            return _try(b, kind, v, self.param(dt, ()), lo=tuple(draw(st.integers(0, 2)) for _ in shape),
                        hi=tuple(draw(st.integers(0, 1)) for _ in shape),
                        interior=tuple(draw(st.integers(0, 1)) for _ in shape))
        if kind in ("identity_sum", "identity_max"):  # no axes, or only axes of extent 1
            axes = tuple(a for a in range(r) if shape[a] == 1 and draw(st.booleans()))
            return _try(b, "reduce_sum" if kind == "identity_sum" else "reduce_max", v, axes=axes,
                        keepdims=draw(st.booleans()))
        if kind == "broadcast_into":  # v broadcast along new or size-1 axes of a larger operand
            lead = self.shape(draw(st.integers(0, 1)))
            big = lead + tuple(d if d != 1 else draw(self.dims) for d in shape)
            return _try(b, draw(st.sampled_from(["add", "mul", "sub"])), v, self.param(dt, big))
        if kind == "broadcast_from":  # a smaller operand broadcast into v
            small = tuple(1 if draw(st.booleans()) else d for d in shape)[draw(st.integers(0, r)):]
            return _try(b, draw(st.sampled_from(["add", "mul", "sub"])), self.param(dt, small), v)
        if kind == "select":
            c = _try(b, "compare", v, self.param(dt, ()), direction=draw(st.sampled_from(["lt", "ge", "ne"])))
            return c and _try(b, "select", c, v, self.param(dt, shape))
        other = draw(st.sampled_from([d for d in DTYPES if d is not dt]))
        return _try(b, "convert", v, dtype=other)

    # ------------------------------------------------------------------ consumers
    def consume(self, v):
        draw, b = self.draw, self.b
        kind = draw(st.sampled_from(CONSUMERS))
        shape, dt, r = v.type.shape, v.type.dtype, v.type.rank
        if kind in ("matmul", "batched_matmul") and r >= 1:
            lhs = v if r >= 2 else _try(b, "reshape", v, shape=(1, shape[0]))
            rhs_batch = lhs.type.shape[:-2][draw(st.integers(0, lhs.type.rank - 2)):] if kind == "batched_matmul" else ()
            rhs_batch = tuple(1 if draw(st.booleans()) else d for d in rhs_batch)
            return _try(b, "matmul", lhs, self.param(dt, rhs_batch + (lhs.type.shape[-1], draw(self.dims))))
        if kind == "matmul_rhs" and r >= 1:
            rhs = v if r >= 2 else _try(b, "reshape", v, shape=(shape[0], 1))
            return _try(b, "matmul", self.param(dt, (draw(self.dims), rhs.type.shape[-2])), rhs)
        if kind == "conv2d" and r in (3, 4):
            x = v if r == 4 else _try(b, "reshape", v, shape=(1,) + shape)
            c = x.type.shape[-1]
            w = self.param(dt, (draw(st.integers(1, 2)), draw(st.integers(1, 2)), c, draw(st.integers(1, 2))))
            return _try(b, "conv2d", x, w, strides=(draw(st.integers(1, 2)), 1),
                        padding=((draw(st.integers(0, 1)), 0), (0, draw(st.integers(0, 1)))),
                        lhs_dilation=(draw(st.integers(1, 2)), 1), rhs_dilation=(1, draw(st.integers(1, 2))))
        if kind == "reduce" and r >= 1:
            axes = tuple(a for a in range(r) if draw(st.booleans())) or (draw(st.integers(0, r - 1)),)
            return _try(b, draw(st.sampled_from(["reduce_sum", "reduce_max"])), v, axes=axes,
                        keepdims=draw(st.booleans()))
        if kind == "gather" and r >= 1:
            axis = draw(st.integers(0, r - 1))
            idx = b.const(np.array(draw(st.lists(st.integers(-1, 5), min_size=1, max_size=4))), DType.I32)
            return _try(b, "gather", v, idx, axis=axis)
        return self.move(v)


@st.composite
def fusion_programs(draw, dims=st.integers(1, 4), threads=st.just(1)):
    """(function, inputs, compile options): one to three rounds of movement ops, each round
    usually ending in a consumer."""
    p = _Program(draw, dims)
    dtype = draw(st.sampled_from(DTYPES))
    chain = [p.param(dtype, p.shape(draw(st.integers(1, 3))), may_be_const=False)]
    for _ in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 4))):
            chain.append(p.move(chain[-1]) or chain[-1])
        if draw(st.integers(0, 4)):
            chain.append(p.consume(chain[-1]) or chain[-1])
    last = chain[-1]
    results = [last]
    if draw(st.booleans()):
        results.append(last)  # one value into two out-parameters (prog/0284 returned %4 twice)
    if len(chain) > 2 and draw(st.integers(0, 3)) == 0:
        results.insert(0, draw(st.sampled_from(chain[1:-1])))  # an intermediate with a second user
    return p.b.finish(results), p.inputs, {"schedule": draw(st.sampled_from([True, "all"])),
                                           "threads": draw(threads)}


def _exact_in_any_order(fn, inputs) -> bool:
    """Whether every float value and accumulation of the reference run is an integer below 2^p."""
    values: dict[int, np.ndarray] = {}
    run_reference(fn, inputs, probe=lambda value, op, array: values.__setitem__(id(value), np.asarray(array)))
    for op in fn.ops:
        dt = op.result.type.dtype
        if dt not in _PRECISION:
            continue
        limit = 2.0 ** _PRECISION[dt]
        out = values[id(op.result)].astype(np.float64)
        if not (np.all(np.isfinite(out)) and np.all(np.abs(out) <= limit) and np.all(out == np.round(out))):
            return False
        acc = accumulation(op.op, [values[id(x)] for x in op.operands], op.attrs)
        if acc is not None and np.any(np.asarray(acc[1]) > limit):
            return False
    return True


def _check(prog) -> None:
    fn, inputs, options = prog
    assume(_exact_in_any_order(fn, inputs))
    got = compile_for(fn, "cpu", **options)(inputs)
    want = run_reference(fn, inputs)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (i, g.dtype, g.shape, w.dtype, w.shape, str(fn))
        assert np.array_equal(g, w, equal_nan=g.dtype.kind == "f"), \
            f"result {i} differs ({options}):\n{fn}\ngot  {g.tolist()}\nwant {w.tolist()}"


_CI = os.environ.get("MIND_HYPOTHESIS_PROFILE", "ci") == "ci"


@settings(max_examples=12, deadline=None) if _CI else settings(deadline=None)
@given(fusion_programs())
def test_fused_chains_match_reference(prog):
    _check(prog)


# Shapes large enough for whole tiles and vectors (the schedule then really tiles the fused ops),
# on one or two threads (tiled loops become OpenMP regions).
@settings(max_examples=6, deadline=None) if _CI else settings(max_examples=500, deadline=None)
@given(fusion_programs(st.sampled_from([1, 2, 3, 8, 16, 17]), st.sampled_from([1, 2])))
def test_fused_chains_with_tiled_shapes_match_reference(prog):
    _check(prog)
