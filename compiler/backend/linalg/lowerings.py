"""One lowering per op of the spec, keyed by the op's name (``LOWERINGS``; a test checks its keys are
the spec's op list, as ``reference/ops.py``'s are).

Each lowering writes one op application (``OpApplication``) with an ``Emitter`` and returns the name
of its result, keeping the spec's total semantics (``scalar``; ``docs/backend-cpu.md``, Emission):
an empty sum is +0 (else a sum starts at -0, so ``-0 + -0`` stays -0), an empty max -inf, INT_MIN or
false; constants are exact (floats as bit patterns, dense data as the hex of its bytes).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from mind.spec.dtypes import DType

from . import scalar
from .conv_phases import AxisPhase, axis_phases, phase_padding
from .emitter import Body, Emitter, TensorValue
from .mathlib import exp_text, log_text
from .transform_script import largest_divisor_at_most
from .payload import CONTRACT_OP, SHARED_RHS_MAPS, TRANSPOSED_LHS_MAPS, TRANSPOSED_RHS_MAPS, product
from .mlir_text import ELEM, affine_map, broadcast_map, float_bits, identity_map, is_float, tensor_type, zero

__all__ = ["OpApplication", "LOWERINGS", "Lowering"]


class OpApplication:
    """One op as a lowering sees it: ``name``, operand ``xs``, ``attrs`` (concrete), result ``dtype``
    and ``shape``, and ``elem``, the result's element type."""

    __slots__ = ("name", "xs", "attrs", "dtype", "shape", "elem")

    def __init__(self, name: str, xs: list[TensorValue], attrs: Mapping[str, Any], dtype: DType,
                 shape: tuple[int, ...]) -> None:
        self.name, self.xs, self.attrs, self.dtype, self.shape = name, xs, attrs, dtype, shape
        self.elem = ELEM[dtype]


Lowering = Callable[[Emitter, OpApplication], str]


# ---------------------------------------------------------------------------------- constants

def const(em: Emitter, op: OpApplication) -> str:
    dtype, shape, elem = op.dtype, op.shape, op.elem
    arr = np.asarray(op.attrs["value"], dtype=dtype.numpy).reshape(shape)
    if arr.size == 0:
        return em.empty(shape, elem)
    flat = arr.reshape(-1)
    raw = flat.astype(np.uint8) if dtype is DType.BOOL else flat
    raw_bytes = np.ascontiguousarray(raw).astype(raw.dtype.newbyteorder("<")).tobytes()
    first = raw_bytes[:raw.dtype.itemsize]
    r = em.fresh("k")
    if raw_bytes == first * flat.size:  # a splat
        lit = float_bits(float(flat[0]), elem) if dtype.is_float else str(int(flat[0]))
        em.emit(f"{r} = arith.constant dense<{lit}> : {tensor_type(shape, elem)}")
    elif dtype is DType.BOOL:
        em.emit(f"{r} = arith.constant dense<[{', '.join(str(int(v)) for v in flat)}]> : "
                f"{tensor_type((flat.size,), elem)}")
        return em.reshape(TensorValue(r, (flat.size,), elem, dtype), shape).name
    else:
        em.emit(f'{r} = arith.constant dense<"0x{raw_bytes.hex().upper()}"> : {tensor_type(shape, elem)}')
    return r


# ---------------------------------------------------------------------------------- elementwise

def _arith(em: Emitter, op: OpApplication, name: str) -> str:
    e = op.xs[0].elem
    suffix = "f" if is_float(e) else "i"
    return em.elementwise(op.shape, op.elem, op.xs, lambda b, x, y: b.binary(name + suffix, x, y, e))


def add(em: Emitter, op: OpApplication) -> str:
    return _arith(em, op, "add")


def sub(em: Emitter, op: OpApplication) -> str:
    return _arith(em, op, "sub")


def mul(em: Emitter, op: OpApplication) -> str:
    return _arith(em, op, "mul")


def div(em: Emitter, op: OpApplication) -> str:
    e = op.xs[0].elem
    if is_float(e):
        return _arith(em, op, "div")
    return em.elementwise(op.shape, op.elem, op.xs, lambda b, x, y: scalar.int_div(b, x, y, e))


def exp(em: Emitter, op: OpApplication) -> str:
    return em.elementwise(op.shape, op.elem, op.xs, lambda b, x: b.paste(*exp_text(x, op.elem, em.fresh("m")[1:])))


def log(em: Emitter, op: OpApplication) -> str:
    return em.elementwise(op.shape, op.elem, op.xs, lambda b, x: b.paste(*log_text(x, op.elem, em.fresh("m")[1:])))


def compare(em: Emitter, op: OpApplication) -> str:
    src, direction = op.xs[0].dtype, op.attrs["direction"]
    return em.elementwise(op.shape, op.elem, op.xs, lambda b, x, y: scalar.compare(b, direction, x, y, src))


def select(em: Emitter, op: OpApplication) -> str:
    def choose(b: Body, p: str, if_true: str, if_false: str) -> str:
        return b.select(b.cmpi("ne", p, b.const("0", "i8"), "i8"), if_true, if_false, op.elem)
    return em.elementwise(op.shape, op.elem, op.xs, choose)


def convert(em: Emitter, op: OpApplication) -> str:
    src = op.xs[0].dtype
    if src is op.dtype:
        return op.xs[0].name
    return em.elementwise(op.shape, op.elem, op.xs, lambda b, x: scalar.convert(b, x, src, op.dtype))


# ---------------------------------------------------------------------------------- reductions

def _reduce(em: Emitter, op: OpApplication, init_lit: str, combine: Callable[[Body, str, str], str]) -> str:
    """``combine(b, acc, x)`` over ``axes`` from ``init_lit``, then reshaped to the result's shape
    (``keepdims``)."""
    x = op.xs[0]
    axes = tuple(op.attrs["axes"])
    rank = len(x.shape)
    kept = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    init = em.filled(kept, op.elem, init_lit)
    if not axes and op.name == "reduce_max":
        red = x.name  # the max of one element is itself (the sum still adds it to -0)
    else:
        iterators = ["reduction" if i in axes else "parallel" for i in range(rank)]
        out_map = affine_map(rank, [f"d{i}" for i in range(rank) if i not in axes])
        red = em.generic(kept, op.elem, [x], [identity_map(rank)], iterators,
                         lambda b, args, acc: combine(b, acc, args[0]), init=init, out_map=out_map)
    return em.reshape(TensorValue(red, kept, op.elem, op.dtype), op.shape).name


SUM_RUN = 128
"""The most terms a float sum adds one after another (``reduce_sum``'s blocked summation)."""

SUM_WIDTH_BYTES = 256
"""How wide (bytes) the contiguous row of partial sums of a long trailing sum may be: four 64-byte
vectors, eight 32-byte ones (``sum_width``)."""


def sum_width(n: int, elem_bytes: int) -> int:
    """The width ``w`` of the partial sums of a float sum of ``n`` contiguous terms (``reduce_sum``):
    the terms are viewed as ``n / w`` rows of ``w``, the rows added in levels (``sum_levels``), then
    the ``w`` partial sums.

    When the largest divisor ``q`` of n up to ``SUM_RUN`` leaves at most ``SUM_RUN`` partial sums,
    ``w = n / q``: one level.  Longer sums keep a width of at most ``SUM_WIDTH_BYTES`` through every
    level, so each level reads contiguous chunks of ``q`` rows of ``w``, and MLIR's reshape
    propagation (elementwise fusion expands a level's operand into the level before it) only splits
    the count of rows, never the contiguous axis: a width that shrank from level to level became
    the innermost loop of the first level after fusion (a 2048x2048 f64 sum: rows of 2 elements;
    ``docs/backend-cpu.md``, Measurements).  The width is the divisor whose rows split into levels of at most
    ``SUM_RUN`` (every term in short runs), in the fewest levels, then the widest."""
    q = largest_divisor_at_most(n, SUM_RUN)
    if n // q <= SUM_RUN:
        return n // q
    cap = max(1, SUM_WIDTH_BYTES // elem_bytes)

    def rank(w: int) -> tuple[bool, int, int]:
        levels = sum_levels(n // w)
        left = n // w
        for q in levels:
            left //= q
        return left <= SUM_RUN, -len(levels), w
    return max((d for d in range(1, min(n, cap) + 1) if n % d == 0), key=rank)


def sum_levels(rows: int) -> list[int]:
    """The levels of a blocked sum of ``rows`` rows: divisors of at most ``SUM_RUN`` while more than
    ``SUM_RUN`` rows are left (a row count without one keeps the rest for the last level)."""
    qs: list[int] = []
    while rows > SUM_RUN:
        q = largest_divisor_at_most(rows, SUM_RUN)
        if q == 1:
            break
        qs.append(q)
        rows //= q
    return qs


def _without_unit_dims(em: Emitter, op: OpApplication, lower: Lowering) -> str | None:
    """``op`` (a reduction) lowered by ``lower`` on its operand without its unit dims after the first
    other one, then reshaped to its result; None when the operand has none (or is empty).  Why: the
    elementwise ops around a reduction are emitted over their operands' dims with the unit ones
    collapsed, and a reduction that kept them (a layer norm over ``[B, 1, D]``, a decoder's one
    position) had loops of another rank than its consumer's, so no fusion group formed: the norm
    swept its rows three times, on separate parallel regions.  Leading unit dims stay: dropped, a
    softmax or norm over ``[1, R, C]`` ran slower (its ops no longer matched the function's
    boundary; the figures are in ``docs/backend-cpu.md``, Schedules).
    A unit dim reduced adds one term: -0 + x and max(-inf, x) are x, NaN and signed zeros included."""
    x = op.xs[0]
    first = next((i for i, d in enumerate(x.shape) if d != 1), len(x.shape))
    if 1 not in x.shape[first:] or 0 in x.shape:
        return None
    axes = set(op.attrs["axes"])
    dims = list(range(first)) + [i for i in range(first, len(x.shape)) if x.shape[i] != 1]
    shape = tuple(x.shape[i] for i in dims)
    kept_axes = [j for j, i in enumerate(dims) if i in axes]
    result = tuple(d for j, d in enumerate(shape) if j not in kept_axes)
    squeezed = OpApplication(op.name, [em.reshape(x, shape)], {**op.attrs, "axes": kept_axes}, op.dtype, result)
    return em.reshape(TensorValue(lower(em, squeezed), result, op.elem, op.dtype), op.shape).name


def _run_by_run(em: Emitter, op: OpApplication, lower: Lowering) -> str | None:
    """``op`` (a reduction) over axes that are not adjacent (``[0, 2]`` of ``[B, R, C]``) lowered by
    ``lower`` as two reductions: over the last run of adjacent axes, then over the others of what it
    leaves; None for adjacent axes.  Why: one reduction over every reduced axis has loops of no
    shape the blocked sums and maxima take (``_long_run`` needs a run), so a sum over the first and
    last axes of 64x333x257 f32 was one running sum per result on one thread, 0.40x torch eager.
    Run by run, each is a row or column reduction with its own schedule.  A sum's bound holds for
    every order of its additions and a max is exact in any order, so the result's accuracy is
    that of one reduction."""
    axes = sorted(op.attrs["axes"])
    if not axes or axes == list(range(axes[0], axes[-1] + 1)):
        return None
    k = len(axes) - 1
    while k > 0 and axes[k - 1] == axes[k] - 1:
        k -= 1
    x = op.xs[0]
    run, rest = axes[k:], axes[:k]
    kept = tuple(d for i, d in enumerate(x.shape) if i not in run)
    first = OpApplication(op.name, [x], {**op.attrs, "axes": run}, op.dtype, kept)
    part = TensorValue(lower(em, first), kept, op.elem, op.dtype)
    result = tuple(d for i, d in enumerate(kept) if i not in rest)
    second = OpApplication(op.name, [part], {**op.attrs, "axes": rest}, op.dtype, result)
    return em.reshape(TensorValue(lower(em, second), result, op.elem, op.dtype), op.shape).name


def reduce_sum(em: Emitter, op: OpApplication) -> str:
    """A float sum over a run of adjacent axes of more than ``SUM_RUN`` terms is blocked: with the
    operand viewed as ``[A, R, C]`` (A the axes before the run, R its terms, C the axes after it),
    the R terms are added in levels of ``q`` ≤ ``SUM_RUN`` rows each (``[A, R / q, q, C]`` reduced
    over ``q``), until at most ``SUM_RUN`` are left, which the last level adds; R whose divisors
    do not get there is split into a part that does and a few rows more (``splits_rows``).  A sum over trailing
    axes (C = 1) first views its terms as rows of ``w`` partial sums (``sum_width``), added at the
    end.  Why: each term then goes through a few additions of short runs, not one running sum of R
    (an f32 sum of 4M terms: 1.6e-5 relative error against 2.5e-9 for NumPy's pairwise sum), and
    the partial sums are vectors of independent accumulators along the contiguous axis, where one
    running sum is a chain of dependent additions.  A long trailing sum whose terms have a prime
    factor above ``SUM_RUN`` is split (``_split_sum``), and so is a long prime R along other axes.
    Unit dims are dropped first (``_without_unit_dims``)."""
    squeezed = _without_unit_dims(em, op, reduce_sum)
    if squeezed is not None:
        return squeezed
    by_runs = _run_by_run(em, op, reduce_sum)
    if by_runs is not None:
        return by_runs
    elem = op.elem
    x = op.xs[0]
    run = _long_run(x.shape, op.attrs["axes"])
    count = product(x.shape[a] for a in op.attrs["axes"])
    init = float_bits(-0.0 if count > 0 else 0.0, elem) if is_float(elem) else "0"
    if not (is_float(elem) and run):
        return _reduce(em, op, init, _add(elem))
    outer, count, inner = run
    if inner == 1:
        part = _trailing_sum(em, op, em.reshape(x, outer + (count,)), init)
    else:
        part = _blocked_rows(em, op, x, outer, count, (inner,), init)
    return em.reshape(part, op.shape).name


def _long_run(shape: tuple[int, ...], axes: Sequence[int]) -> tuple[tuple[int, ...], int, int] | None:
    """``(outer, count, inner)`` of a reduction over a run of adjacent ``axes`` of more than
    ``SUM_RUN`` terms (the operand viewed as ``[outer..., count, inner]``), which ``reduce_sum`` and
    ``reduce_max`` block in levels; None for fewer terms or axes that are not adjacent."""
    axes = sorted(axes)
    if not axes or axes != list(range(axes[0], axes[-1] + 1)):
        return None
    count = product(shape[a] for a in axes)
    return (shape[:axes[0]], count, product(shape[axes[-1] + 1:])) if count > SUM_RUN else None


def _add(elem: str) -> Callable[[Body, str, str], str]:
    add_ = "addf" if is_float(elem) else "addi"
    return lambda b, acc, v: b.binary(add_, acc, v, elem)


def _levels_then_last(em: Emitter, op: OpApplication, x: TensorValue, outer: tuple[int, ...], rows: int,
                      tail: tuple[int, ...], init: str,
                      combine: Callable[[Body, str, str], str] | None = None) -> TensorValue:
    """``x`` (viewed as ``outer + (rows,) + tail``) reduced over ``rows`` with ``combine`` (default:
    the sum's add): ``sum_levels`` levels of ``[.., rows / q, q, ..]`` reduced over ``q``, then the
    rows left; a result of ``outer + tail``."""
    elem, k = op.elem, len(outer)
    combine = combine or _add(elem)
    part = x
    for q in sum_levels(rows):
        view = em.reshape(part, outer + (rows // q, q) + tail)
        loops = k + 2 + len(tail)
        out_map = affine_map(loops, [f"d{i}" for i in range(loops) if i != k + 1])
        iterators = ["reduction" if i == k + 1 else "parallel" for i in range(loops)]
        rows //= q
        red = em.generic(outer + (rows,) + tail, elem, [view], [identity_map(loops)], iterators,
                         lambda b, args, acc: combine(b, acc, args[0]),
                         init=em.filled(outer + (rows,) + tail, elem, init), out_map=out_map)
        part = TensorValue(red, outer + (rows,) + tail, elem, op.dtype)
    part = em.reshape(part, outer + (rows,) + tail)
    last = OpApplication(op.name, [part], {**op.attrs, "axes": [k]}, op.dtype, outer + tail)
    return TensorValue(_reduce(em, last, init, combine), outer + tail, elem, op.dtype)


def _split_run(n: int) -> int:
    """The power of two ``b`` with ``n // b`` in [64, 128) (``SUM_RUN``): a split sum's first part is
    ``n // b * b`` terms, which block into levels of at most ``SUM_RUN``, and the rest fewer than
    ``n / 64`` (``_split_sum``, ``_split_rows``)."""
    return 1 << (n.bit_length() - 7)


def _unblocked(rows: int) -> bool:
    """Whether ``sum_levels`` leaves more than ``SUM_RUN`` of ``rows`` for the last level (no divisor
    up to ``SUM_RUN`` takes them below it: 362 = 2 x 181 keeps 181 after a level of 2)."""
    left = rows
    for q in sum_levels(rows):
        left //= q
    return left > SUM_RUN


def _blocked_rows(em: Emitter, op: OpApplication, x: TensorValue, outer: tuple[int, ...], rows: int,
                  tail: tuple[int, ...], init: str,
                  combine: Callable[[Body, str, str], str] | None = None) -> TensorValue:
    """``_levels_then_last``, or ``_split_rows`` where ``splits_rows`` says so."""
    if splits_rows(rows, product(tail) * op.dtype.numpy.itemsize):
        return _split_rows(em, op, x, outer, rows, tail, init, combine or _add(op.elem))
    return _levels_then_last(em, op, x, outer, rows, tail, init, combine)


SPLIT_ROWS_BYTES = 1 << 20
"""The operand size above which rows without a level are split (``splits_rows``)."""


def splits_rows(rows: int, row_bytes: int = 0) -> bool:
    """Whether a blocked reduction of ``rows`` rows of ``row_bytes`` each is split (``_split_rows``):
    rows whose levels are rough (``rough_levels``) and have a smooth head (``smooth_head``); rows
    that do not block (``_unblocked``) and are not a whole number of the split's runs, when a
    level would otherwise be made (362 = 2 x 181: a level of 2 whose partial rows are half the
    traffic of its input), or, as for trailing sums, the rows are more than ``SUM_RUN`` squared, or
    they hold more than ``SPLIT_ROWS_BYTES``.  Fewer and smaller rows of a prime count keep one
    running sum: one pass, where the split's four ops cost more than they save (a 131x352 column
    sum: 7.3 → 11.1 µs; 769x320 f32, 985 KB, 0.95x).  Why the size: from 1 MiB on, the one running
    sum per column ran at a third to a half of the split's speed (1031x300 f32 3.1x, 2957x320 1.9x,
    a 1523x200 f64 column max 3.7x; ``docs/backend-cpu.md``, Measurements)."""
    if smooth_head(rows) is not None:
        return True
    if not _unblocked(rows) or rows % _split_run(rows) == 0:
        return False
    return bool(sum_levels(rows)) or rows > SUM_RUN * SUM_RUN or rows * row_bytes > SPLIT_ROWS_BYTES


ROUGH_FACTOR = 4
"""A count with a factor from 2 to this is smooth for the schedule's tiles (``rough_levels``)."""

SMOOTH_HEAD_ROWS = 16
"""What the head of a split count with rough levels is a multiple of (``smooth_head``)."""


def rough_levels(rows: int) -> bool:
    """Whether the first level of a blocked reduction of ``rows`` rows adds runs, and has rows
    beside them, that both lack a factor from 2 to ``ROUGH_FACTOR`` (301 = 7 x 43: 7 runs of 43;
    289 = 17 x 17; not 254 = 2 x 127 or 300 = 3 x 100).  Why: the schedule tiles a level's runs
    and the rows beside them by divisors, so such a level is read one row per step, each step a
    dependent add on two or three accumulators; split into a smooth head and a few rows more
    (``_split_rows``), a mean over the middle axis of 10x301x82 f32 ran 1.5-1.6x faster
    (10x289x82 1.6x, a 289x2000 column sum 1.4-1.5x, a max over the middle axis of 6x289x100 f64
    2.2x), where splitting 254 rows ran 0.83x (``docs/backend-cpu.md``, Measurements)."""
    levels = sum_levels(rows)
    return bool(levels) and all(largest_divisor_at_most(n, ROUGH_FACTOR) == 1 for n in (levels[0], rows // levels[0]))


def smooth_head(rows: int) -> int | None:
    """The head a count of rows with rough levels (``rough_levels``) is split at: the largest
    multiple of ``SMOOTH_HEAD_ROWS`` that keeps the rest under a sixteenth of the rows and blocks
    (``_unblocked``: 2096 = 16 x 131 does not); a multiple of 16 is never rough (a level of an odd
    run has an even count beside it).  301 → 288 = 3 x 96, 13 rows apart.  None if there is none,
    or if the levels of ``rows`` are not rough."""
    if not rough_levels(rows):
        return None
    for head in range(rows // SMOOTH_HEAD_ROWS * SMOOTH_HEAD_ROWS, rows - rows // 16 - 1, -SMOOTH_HEAD_ROWS):
        if 0 < head < rows and not _unblocked(head):
            return head
    return None


def _split_rows(em: Emitter, op: OpApplication, x: TensorValue, outer: tuple[int, ...], rows: int,
                tail: tuple[int, ...], init: str, combine: Callable[[Body, str, str], str]) -> TensorValue:
    """``_levels_then_last`` of rows that do not block (``_unblocked``): the first ``k * b`` rows
    (``b`` the power of two with ``k = rows / b`` in [64, 128), which block into levels of at most
    ``SUM_RUN``) and the rest (fewer than ``rows / 64``) reduced apart, then combined; rows whose
    levels are rough (``rough_levels``), at their ``smooth_head``.  Why: a level
    of a small divisor (2 of 362) wrote and read again half as many partial rows as it read, and
    left a running sum of 181 terms anyway (a 362x3376 f32 column sum ran 2.4 times torch eager's
    time; ``docs/backend-cpu.md``, Measurements), as the trailing sums are split (``_split_sum``)."""
    b = _split_run(rows)
    head = smooth_head(rows) or rows // b * b
    view = em.reshape(x, outer + (rows,) + tail)
    zeros = [0] * len(outer)
    parts = [_levels_then_last(em, op, em.extract_slice(view, zeros + [start] + [0] * len(tail),
                                                        outer + (count,) + tail), outer, count, tail, init, combine)
             for start, count in ((0, head), (head, rows - head))]
    both = em.elementwise(outer + tail, op.elem, parts, lambda body, u, v: combine(body, u, v))
    return TensorValue(both, outer + tail, op.elem, op.dtype)


def _trailing_sum(em: Emitter, op: OpApplication, x: TensorValue, init: str,
                  combine: Callable[[Body, str, str], str] | None = None) -> TensorValue:
    """``x`` of ``outer + (n,)`` summed (or reduced with ``combine``) over its last axis: rows of
    ``sum_width`` partial sums through ``_levels_then_last``, then those partial sums; or, when that
    would leave a run of more than ``SUM_RUN`` rows in a sum of more than ``SUM_RUN`` squared terms,
    ``_split_sum``."""
    combine = combine or _add(op.elem)
    outer, n = x.shape[:-1], x.shape[-1]
    if n <= SUM_RUN:
        return TensorValue(_reduce(em, OpApplication(op.name, [x], {**op.attrs, "axes": [len(outer)]}, op.dtype, outer),
                                   init, combine), outer, op.elem, op.dtype)
    width = sum_width(n, op.dtype.numpy.itemsize)
    left = n // width
    for q in sum_levels(left):
        left //= q
    if left > SUM_RUN and n > SUM_RUN * SUM_RUN and n % _split_run(n):
        return _split_sum(em, op, x, init, combine)
    part = _levels_then_last(em, op, x, outer, n // width, (width,) if width > 1 else (), init, combine)
    if width == 1:
        return part
    return _trailing_sum(em, op, part, init, combine)


def _split_sum(em: Emitter, op: OpApplication, x: TensorValue, init: str,
               combine: Callable[[Body, str, str], str]) -> TensorValue:
    """A long sum (or reduction by ``combine``) whose terms have a prime factor above ``SUM_RUN``
    (1009 x 997): the first ``k * b`` terms (``b`` the power of two with ``k = n / b`` in [64, 128),
    so that they block into levels of at most ``SUM_RUN`` and are never split again) and the rest
    (fewer than ``n / 64``) reduced on their own, then combined.  Why: otherwise one running sum of
    all n terms, a dependent chain of scalar adds (``docs/backend-cpu.md``, Measurements) and an
    error growing with n."""
    outer, n = x.shape[:-1], x.shape[-1]
    b = _split_run(n)
    head = n // b * b
    zeros = [0] * len(outer)
    first = _trailing_sum(em, op, em.extract_slice(x, zeros + [0], outer + (head,)), init, combine)
    rest = _trailing_sum(em, op, em.extract_slice(x, zeros + [head], outer + (n - head,)), init, combine)
    total = em.elementwise(outer, op.elem, [first, rest], lambda body, u, v: combine(body, u, v))
    return TensorValue(total, outer, op.elem, op.dtype)


def reduce_max(em: Emitter, op: OpApplication) -> str:
    """A max over a run of adjacent axes followed by others (a column max) of more than ``SUM_RUN``
    terms is blocked as a sum is (``_levels_then_last``): levels of at most ``SUM_RUN`` rows, then
    the rows left; a max of every element (a 1-D max, all axes) as a trailing sum is
    (``_trailing_sum``: rows of partial maxima, a prime count split).  The max is exact in any
    order, so this changes no result; why: the first level is parallel along its blocks of rows,
    so threads share a max over many rows of few columns (126676x32: one thread streamed all of it)
    and each block reads whole contiguous rows; a max of every element was one reduction on one
    thread, in tiles of a divisor of its length (one element for 1000001 = 101 x 9901: 19x torch
    eager's time).  Row maxima keep one reduction along the row (the fusion groups' rows).  Unit
    dims are dropped first (``_without_unit_dims``)."""
    squeezed = _without_unit_dims(em, op, reduce_max)
    if squeezed is not None:
        return squeezed
    by_runs = _run_by_run(em, op, reduce_max)
    if by_runs is not None:
        return by_runs
    elem = op.elem
    if is_float(elem):
        init, max_ = float_bits(float("-inf"), elem), "maximumf"
    elif op.dtype is DType.BOOL:
        init, max_ = "0", "maxui"
    else:
        init, max_ = str(op.dtype.int_min), "maxsi"

    def combine(b: Body, acc: str, x: str) -> str:
        return b.binary(max_, acc, x, elem)
    x = op.xs[0]
    run = _long_run(x.shape, op.attrs["axes"])
    if run is not None and run[2] == 1 and product(run[0]) == 1:
        # a max of the whole operand: blocked as a trailing sum is, so that threads share it
        return em.reshape(_trailing_sum(em, op, em.reshape(x, (run[1],)), init, combine), op.shape).name
    if run is None or run[2] == 1:  # a trailing max: one reduction along the row
        return _reduce(em, op, init, combine)
    outer, count, inner = run
    part = _blocked_rows(em, op, x, outer, count, (inner,), init, combine)
    return em.reshape(part, op.shape).name


# ---------------------------------------------------------------------------------- movement

def reshape(em: Emitter, op: OpApplication) -> str:
    return em.reshape(op.xs[0], op.shape).name


def swaps_last_two(perm: Sequence[int]) -> bool:
    """Whether a transpose's ``permutation`` swaps the last two axes and keeps the others: the
    transpose a matmul may read in place (``Emitter.transposed_lhs``/``transposed_rhs``)."""
    rank = len(perm)
    return rank >= 2 and tuple(perm) == tuple(range(rank - 2)) + (rank - 1, rank - 2)


def transpose(em: Emitter, op: OpApplication) -> str:
    """A transposing copy; a reshape (a view) when only unit axes move (``[N, 1]`` to ``[1, N]``, a
    keepdims statistic turned into a row) and the value is computed: the elements keep their
    order.  Why: as a copy, its unit axis became a loop of the ops that read it, and fusion pushed
    the reshapes that make it one into the GEMM's result (a matmul made a generic again, 3x
    slower: docs/backend-cpu.md, Schedules, "Transposes of unit axes").  A parameter keeps the
    copy: a reshape of it is pushed into its readers, which then loop over its unit axis."""
    perm = tuple(op.attrs["permutation"])
    x = op.xs[0]
    moved = [a for a in perm if x.shape[a] != 1]
    if moved == sorted(moved) and em.reshaped_from.get(x.name, x).name not in em.params:
        return em.reshape(x, op.shape).name
    inverse = [0] * len(perm)
    for k, p in enumerate(perm):
        inverse[p] = k
    r = em.copy(op.xs[0], op.shape, affine_map(len(perm), [f"d{inverse[a]}" for a in range(len(perm))]))
    if swaps_last_two(perm):
        em.transposed_from[r] = op.xs[0]  # a matmul may read it in place (``Emitter.transposed_lhs/rhs``)
    return r


MERGED_STEP_ROW = 64
"""The fewest elements a row of a slice with a step along its rows is merged up to
(``_merged_step_rows``): four vectors of the widest unit's narrowest element (AVX-512, f32)."""


def _merged_step_rows(x: TensorValue, starts: list[int], steps: list[int],
                      shape: tuple[int, ...]) -> tuple[int, int] | None:
    """The result's ``rows`` and row when ``x`` is viewed as ``[rows, k * L]`` (``k`` of its rows
    of ``L`` merged, the fewest that make ``MERGED_STEP_ROW`` results and leave two rows or more),
    for a slice that takes every ``step``-th element of whole rows (the outer axes whole, ``L = step
    * n`` for ``n`` results per row, a start below the step: ``x[..., 0::2]`` of an even row) with
    fewer than ``CHANNEL_BLOCK`` (a vector) results per row; else None.  Such a slice is the same
    step through the merged row (row r's element ``s0 + step * j`` is element ``s0 + step * (r * n
    + j)`` of the rows laid end to end), and its loop is ``k`` times longer: LLVM vectorizes a
    movement loop of at least a vector (``movement_loops``), and a row of 12 results was scalar
    loads and stores.  Rows of a vector or more are vectorized as they are (a merged row of 56
    results, 2083 rows, a prime, made one row and lost the threads); an operand of more than
    ``SPLIT_ROWS_BYTES``, streamed from memory, is not merged (it ran slower merged; the figures
    are in ``docs/backend-cpu.md``, Schedules)."""
    n, step = shape[-1], steps[-1]
    outer = x.shape[:-1]
    if step < 2 or n >= CHANNEL_BLOCK or x.shape[-1] != step * n or not 0 <= starts[-1] < step:
        return None
    if any(b0 != 0 or s != 1 for b0, s in zip(starts[:-1], steps[:-1])) or tuple(shape[:-1]) != outer:
        return None
    if product(x.shape) * x.dtype.numpy.itemsize > SPLIT_ROWS_BYTES:
        return None  # streamed from memory (see the docstring)
    total = product(outer)
    k = next((d for d in range(2, total // 2 + 1) if total % d == 0 and d * n >= MERGED_STEP_ROW), None)
    return None if k is None else (total // k, k * n)


def slice(em: Emitter, op: OpApplication) -> str:  # noqa: A001 - the op's name
    x, shape = op.xs[0], op.shape
    if not shape:
        return x.name
    if 0 in shape:
        return em.empty(shape, op.elem)
    # Every dim is first cut (extract_slice) to the window of indices it reads, so the generic's
    # input extent is exactly what its map touches.  Why: a map ``d_i + 0`` simplifies to
    # ``d_i``, and so does the composition of two reversals (``(m - 1) - ((m - 1) - d_i)``)
    # when elementwise fusion merges two step -1 slices; linalg then takes that loop's range
    # from the input's extent, and a larger one made the fused loop write past the result
    # (heap corruption; found by tests/backend_cpu/test_differential_fusion.py).
    starts = [int(b0) for b0 in op.attrs["start"]]
    steps = [int(s) for s in op.attrs["step"]]
    if all(s > 0 for s in steps) and steps[-1] == 1:
        # Contiguous rows: a view (``tensor.extract_slice`` with strides).  Its readers index it as
        # any tensor, so they keep plain maps that fuse and vectorize (a step on a middle axis made
        # the map strided and left the whole fused chain scalar loops), and a slice that is a
        # result is one strided copy that moves whole rows.  Not with a step along the rows: a
        # vector read of a view whose elements are not contiguous is lowered element by element,
        # far slower than the scalar loop of the generic below (measured in docs/backend-cpu.md).
        return em.extract_slice(x, starts, shape, steps).name
    merged = _merged_step_rows(x, starts, steps, shape)
    if merged is not None:
        rows, row = merged
        view = em.reshape(x, (rows, row * steps[-1]))
        merged_attrs = {**op.attrs, "start": [0, starts[-1]], "stop": [rows, row * steps[-1]], "step": [1, steps[-1]]}
        part = slice(em, OpApplication(op.name, [view], merged_attrs, op.dtype, (rows, row)))
        return em.reshape(TensorValue(part, (rows, row), op.elem, op.dtype), shape).name
    lows = [b0 if s > 0 else b0 + (m - 1) * s for b0, s, m in zip(starts, steps, shape)]
    sizes = [(m - 1) * abs(s) + 1 for s, m in zip(steps, shape)]
    if lows != [0] * len(shape) or tuple(sizes) != x.shape:
        x = em.extract_slice(x, lows, sizes)
    exprs = [f"d{i}" if s == 1 else f"d{i} * {s} + {0 if s > 0 else size - 1}"
             for i, (s, size) in enumerate(zip(steps, sizes))]
    return em.copy(x, shape, affine_map(len(shape), exprs))


def pad(em: Emitter, op: OpApplication) -> str:
    x, v = op.xs
    if not op.shape:
        return x.name
    lo, interior = [int(n) for n in op.attrs["lo"]], [int(n) for n in op.attrs["interior"]]
    if op.shape == x.shape and not any(lo) and not any(interior):
        return x.name  # no padding anywhere: the operand itself
    value = em.fresh("p")
    em.emit(f"{value} = tensor.extract {v.name}[] : {v.ty}")
    if x.shape and 0 in x.shape:
        return em.filled(op.shape, op.elem, scalar=value)
    return em.pad(x, value, lo, interior, op.shape)


def gather(em: Emitter, op: OpApplication) -> str:
    x, idx = op.xs
    shape, axis = op.shape, int(op.attrs["axis"])
    n = x.shape[axis]
    if n == 0 or 0 in shape:
        return em.filled(shape, op.elem, zero(op.elem))
    rank, ri = len(shape), len(idx.shape)
    # A gather of rows (``x`` has axes after ``axis``) reads the index at the loop indices, not as an
    # operand: a vectorizer then sees every index of ``x`` but the row's own as invariant along the
    # last loop, and reads a gathered row as one contiguous vector (a block argument counts as
    # varying: a vector gather).  A gather of elements (the index's axes are the last loops) varies
    # along the last loop either way; its index is an operand, so that elementwise fusion takes the
    # index's producer into the gather instead of writing the index out (``sin``'s table lookups).
    elements = ri >= 1 and axis + ri == rank
    ins, maps = ([idx], [affine_map(rank, [f"d{axis + j}" for j in range(ri)])]) if elements else ([], [])

    def body(b: Body, args: list[str], out: str) -> str:
        ie = idx.elem
        picked = args[0] if elements else b.extract(idx, [b.index(axis + j) for j in range(ri)])
        lo, hi = b.const("0", ie), b.const(str(n - 1), ie)
        clamped = b.binary("minsi", b.binary("maxsi", picked, lo, ie), hi, ie)
        i = b.cast("index_cast", clamped, ie, "index")
        ids = [b.index(k) for k in range(rank) if not axis <= k < axis + ri]
        return b.extract(x, ids[:axis] + [i] + ids[axis:])
    return em.generic(shape, op.elem, ins, maps, ["parallel"] * rank, body)


# ---------------------------------------------------------------------------------- contractions

def matmul(em: Emitter, op: OpApplication) -> str:
    a, b_ = op.xs
    shape, elem = op.shape, op.elem
    if a.shape[-1] == 0 or 0 in shape:
        return em.filled(shape, elem, zero(elem))
    if shape[-1] == 1 or a.shape[-1] == 1:
        products = _vector_product(em, op)
        if products is not None:
            return products
    source = em.transposed_from.get(a.name)
    if len(shape) == 2 and source is not None and elem in em.transposed_lhs:
        return _named_matmul(em, f"linalg.matmul indexing_maps = {TRANSPOSED_LHS_MAPS}", source, b_, shape, elem)
    if len(shape) == 2 or (len(a.shape) == len(b_.shape) == 3 and a.shape[0] == b_.shape[0]):
        # one batch dim on both sides (or none): the named op, which elementwise fusion leaves whole
        named = "linalg.matmul" if len(shape) == 2 else "linalg.batch_matmul"
        rhs_source = em.transposed_from.get(b_.name) if elem in em.transposed_rhs else None
        if rhs_source is not None:  # the rhs read transposed: ``b`` itself, not a copy
            return _named_matmul(em, f"{named} indexing_maps = {TRANSPOSED_RHS_MAPS[named]}", a, rhs_source,
                                 shape, elem)
        return _named_matmul(em, named, a, b_, shape, elem)
    if len(a.shape) == 3 and len(b_.shape) == 2:
        # a batch of matrices times one (a linear layer): the named op with the rhs shared
        return _named_matmul(em, f"linalg.batch_matmul indexing_maps = {SHARED_RHS_MAPS}", a, b_, shape, elem)
    if elem in em.contractions:
        return _contract(em, a, b_, shape, elem)
    rank = len(shape)  # broadcast batch dims: a generic whose loops are batch..., m, n, k
    init = em.filled(shape, elem, zero(elem))
    nb = rank - 2

    def operand_map(src: tuple[int, ...], last2: list[str]) -> str:
        batch = src[:-2]
        exprs = ["0" if (s == 1 and shape[nb - len(batch) + j] != 1) else f"d{nb - len(batch) + j}"
                 for j, s in enumerate(batch)]
        return affine_map(rank + 1, exprs + last2)
    suffix = "f" if is_float(elem) else "i"

    def body(b: Body, args: list[str], acc: str) -> str:
        return b.binary("add" + suffix, acc, b.binary("mul" + suffix, args[0], args[1], elem), elem)
    return em.generic(shape, elem, [a, b_], [operand_map(a.shape, [f"d{nb}", f"d{nb + 2}"]),
                                            operand_map(b_.shape, [f"d{nb + 2}", f"d{nb + 1}"])],
                      ["parallel"] * rank + ["reduction"], body, init=init,
                      out_map=affine_map(rank + 1, [f"d{i}" for i in range(rank)]))


def _vector_product(em: Emitter, op: OpApplication) -> str | None:
    """A matmul of one column (N = 1: a matrix times a vector, a dot) as the sum of the elementwise
    products of each row of ``a`` with ``b``'s column (``reduce_sum``: blocked, vectorized along
    the rows, threaded across them); one of one term (K = 1: an outer product) as the products.
    Then + 0 (floats): a matmul's sum starts at +0, so a column of -0 products is +0, as the
    reference's.  Why: such a product reads each element of ``a`` once, where a GEMM packs and
    blocks for reuse there is none of (a matrix-vector product of 4096² f32 0.8x torch eager's
    speed, a dot of 8M 0.17x; docs/backend-cpu.md, Schedules, "Vector products").  None (the
    matmul's other lowerings) for a batch of columns that are not a reshaped batch of vectors
    (their slice is read lane by lane, through a constant index) and for an ``a`` that is a
    transpose (``xᵀ g``, a gradient: fused into the sum, ``x`` was read across its rows)."""
    a, b = op.xs
    shape, elem = op.shape, op.elem
    suffix = "f" if is_float(elem) else "i"

    def plus_zero(body: Body, x: str) -> str:
        return body.binary("addf", x, body.const(zero(elem), elem), elem) if suffix == "f" else x
    if a.shape[-1] == 1:
        return em.elementwise(shape, elem, [a, b],
                              lambda body, x, y: plus_zero(body, body.binary("mul" + suffix, x, y, elem)))
    k = a.shape[-1]
    if a.name in em.transposed_from:
        return None  # its rows are columns of what it transposes: the GEMM reads those in place
    # b's column as a vector [..., K]: the vector b was reshaped from, or a rank-reducing slice (a
    # view: a reshape of a parameter would be pushed into the products by fusion, which then
    # could not follow the sum's view of them and wrote them out)
    column = em.reshaped_from.get(b.name)
    if column is None or column.shape != tuple(b.shape[:-1]):
        if len(b.shape) > 2:
            return None
        column = em.extract_slice(b, (0, 0), b.shape, result_shape=(k,))
    row = em.reshape(column, tuple(b.shape[:-2]) + (1, k))  # read along the rows of a
    terms_shape = tuple(shape[:-1]) + (k,)
    terms = em.elementwise(terms_shape, elem, [a, row], lambda body, x, y: body.binary("mul" + suffix, x, y, elem))
    total = reduce_sum(em, OpApplication("reduce_sum", [TensorValue(terms, terms_shape, elem, op.dtype)],
                                         {"axes": [len(shape) - 1], "keepdims": True}, op.dtype, shape))
    if suffix == "i":
        return total
    return em.elementwise(shape, elem, [TensorValue(total, shape, elem, op.dtype)], plus_zero)


def _contract(em: Emitter, a: TensorValue, b: TensorValue, shape: tuple[int, ...], elem: str) -> str:
    """A matmul of several batch dims, or of batch dims that broadcast (``[B, H, M, K] @ [B, H, K, N]``,
    ``[B, 1, M, K] @ [1, H, K, N]``, ``[M, K] @ [B, K, N]``), as one ``linalg.contract`` over loops
    (batch..., m, n, k): a named op, which elementwise fusion leaves whole (``_named_matmul``), for a
    target whose GEMM takes it (``Emitter.contractions``).  Its maps must be projected permutations:
    an operand whose batch dims are all 1 is its matrix (a rank-reducing ``extract_slice``, a view),
    one that broadcasts along some of them is copied out to the result's batch dims first (its
    matrices repeated: batch x rows x cols elements, where the product costs that times the other
    operand's columns).  Why: as one generic over every loop, a 4-D attention product ran at 0.37x
    torch eager's speed, a broadcast one at 0.14x (``docs/backend-cpu.md``, Measurements: batch dims
    of any number)."""
    batch = tuple(shape[:-2])
    nb, rank = len(batch), len(shape)

    def operand(x: TensorValue, last2: list[str]) -> tuple[TensorValue, str]:
        own = tuple(x.shape[:-2])
        if all(n == 1 for n in own):
            if own:
                x = em.extract_slice(x, (0,) * len(x.shape), x.shape, result_shape=tuple(x.shape[-2:]))
            return x, affine_map(rank + 1, last2)
        if (1,) * (nb - len(own)) + own != batch:
            full = batch + tuple(x.shape[-2:])
            copied = em.generic(full, elem, [x], [broadcast_map(x.shape, full)], ["parallel"] * rank,
                                lambda body, args, out: args[0])
            x = TensorValue(copied, full, elem, x.dtype)
        # the trailing batch loops (a leading loop it lacks has extent 1)
        return x, affine_map(rank + 1, [f"d{j}" for j in range(nb - len(x.shape) + 2, nb)] + last2)
    lhs, lmap = operand(a, [f"d{nb}", f"d{nb + 2}"])
    rhs, rmap = operand(b, [f"d{nb + 2}", f"d{nb + 1}"])
    init = em.filled(shape, elem, zero(elem))
    r = em.fresh("mm")
    t = tensor_type(shape, elem)
    omap = affine_map(rank + 1, [f"d{j}" for j in range(rank)])
    em.emit(f"{r} = {CONTRACT_OP} indexing_maps = [{lmap}, {rmap}, {omap}] ins({lhs.name}, {rhs.name} : "
            f"{lhs.ty}, {rhs.ty}) outs({init} : {t}) -> {t}")
    return r


def _named_matmul(em: Emitter, name: str, a: TensorValue, b: TensorValue, shape: tuple[int, ...], elem: str) -> str:
    """``name`` (``linalg.matmul`` / ``linalg.batch_matmul``) of ``a`` and ``b`` into a zero-filled
    tensor of ``shape``.

    Why named ops: elementwise fusion takes only generics, so a contraction stays one op that a
    target hands whole to its GEMM (a producer fused into a contraction generic is recomputed once
    per output column: softmax's division inside attention's second matmul).  Not through reshapes
    (more batch dims collapsed into one, a batch folded into the rows): fusion pushes a reshape of
    the result into the op, which makes it a generic again."""
    init = em.filled(shape, elem, zero(elem))
    r = em.fresh("mm")
    t = tensor_type(shape, elem)
    em.emit(f"{r} = {name} ins({a.name}, {b.name} : {a.ty}, {b.ty}) outs({init} : {t}) -> {t}")
    return r


def conv2d(em: Emitter, op: OpApplication) -> str:
    x, w = op.xs
    shape, elem = op.shape, op.elem
    if 0 in shape or 0 in x.shape or 0 in w.shape:
        return em.filled(shape, elem, zero(elem))
    (pt, pb), (pl, pr) = [tuple(int(v) for v in p) for p in op.attrs["padding"]]
    dh, dw = (int(v) for v in op.attrs["lhs_dilation"])
    sh, sw = (int(v) for v in op.attrs["strides"])
    rh, rw = (int(v) for v in op.attrs["rhs_dilation"])
    if (dh, dw) != (1, 1) and (sh, sw) == (1, 1):
        return _conv_by_phases(em, x, w, shape, (pt, pl), (dh, dw), (rh, rw))
    n, oh, ow, f = shape
    pointwise = w.shape[:2] == (1, 1) and (sh, sw) == (1, 1)  # a matmul: the GEMM takes any width
    wide = ow if pointwise else block_width(ow, em.conv_pixels)
    # one pixel per image (a whole window, the GEMM's too): each filter value serves N FMAs, so a
    # padded copy of the filter would cost as much as the conv
    deep = f if pointwise or (oh, ow) == (1, 1) else block_channels(f)
    pr += (wide - ow) * sw  # the extra output columns read zeros past the input
    src = x
    if (pt, pb, pl, pr, dh, dw) != (0, 0, 0, 0, 1, 1):
        src = _padded_input(em, x, (pt, pb, pl, pr), (dh, dw))
    if (wide, deep) == (ow, f):
        return _named_conv(em, src, w, shape, (sh, sw), (rh, rw))
    if deep != f:
        w = _padded_filter(em, w, deep)
    r = _named_conv(em, src, w, (n, oh, wide, deep), (sh, sw), (rh, rw))
    return em.extract_slice(TensorValue(r, (n, oh, wide, deep), elem, op.dtype), [0, 0, 0, deep - f],
                            list(shape)).name


FEWEST_BLOCK_PIXELS = 4
"""The fewest output pixels of a conv's register block: fewer leave the FMA pipes waiting on their
latency (``cpu/conv_schedule``)."""


def block_width(ow: int, most: int = 24) -> int:
    """The output width a direct conv computes for a width of ``ow``: ``ow`` itself when it has a
    divisor from ``FEWEST_BLOCK_PIXELS`` to ``most`` (the target's accumulators: 24 on AVX-512, 12 on
    AVX2; or is at most ``most``), else the next multiple of the fewest (a prime width of 29, 31,
    37...: the conv computes 32, 32, 40 columns and the result is the first ``ow``).  Why: register
    blocks divide the width (a partial block would have dynamic shapes and stay scalar), and a width
    whose divisors are all below the fewest (or above the registers: 26 = 2 x 13 on AVX2) gets blocks
    of 1-3 pixels, which cost more per FMA than the few extra columns (``docs/backend-cpu.md``,
    Measurements)."""
    lo, hi = FEWEST_BLOCK_PIXELS, most
    if ow <= hi or any(ow % d == 0 for d in range(lo, hi + 1)):
        return ow
    return -(-ow // lo) * lo


CHANNEL_BLOCK = 16
"""Output channels a conv's register row holds whole: the lanes of the widest vector unit's narrowest
element (AVX-512, f32), a multiple of every narrower unit's (AVX2's 8, f64's 8 and 4)."""


def block_channels(f: int) -> int:
    """The output channels a direct conv computes for ``f``: ``f`` itself, or the next multiple of
    ``CHANNEL_BLOCK`` (the filter padded with zero columns, the result the last ``f`` channels) when
    that wastes a smaller share of the lanes than ``f``'s own blocks.  Why: a register row is a
    divisor of ``f`` (a partial row would have dynamic shapes and stay scalar), at most one vector
    when ``f`` is not a lane multiple; a prime ``f`` of 31, 43 ... gets rows of one lane (scalar FMAs
    on every filter load), 100 rows of 10 lanes, while 32, 48 and 112 channels fill every lane
    of their rows.  ``f`` up to a vector keeps its one narrow row (padding would waste as much)."""
    if f % CHANNEL_BLOCK == 0:
        return f
    padded = -(-f // CHANNEL_BLOCK) * CHANNEL_BLOCK
    return padded if f * CHANNEL_BLOCK > largest_divisor_at_most(f, CHANNEL_BLOCK) * padded else f


def _padded_filter(em: Emitter, w: TensorValue, deep: int) -> TensorValue:
    """``w`` with ``deep - F`` zero output channels in front (``_zero_padded``)."""
    kh, kw, c, f = w.shape
    return _zero_padded(em, w, (0, 0, 0, deep - f), (0, 0, 0, 0), (kh, kw, c, deep))


def _named_conv(em: Emitter, src: TensorValue, w: TensorValue, shape: tuple[int, ...], strides: tuple[int, int],
                dilations: tuple[int, int], init: str | None = None) -> str:
    """``linalg.conv_2d_nhwc_hwcf`` of ``src`` (padded and dilated already) and ``w`` into ``init``
    (zeros by default).

    The named op (same loops n, y, x, o, i, j, c and body as a generic; integers wrap, as the named
    op's muli/addi do) is what a target's conv schedule tiles, decomposes and vectorizes."""
    if init is None:
        init = em.filled(shape, src.elem, zero(src.elem))
    r = em.fresh("cv")
    t = tensor_type(shape, src.elem)
    em.emit(f"{r} = linalg.conv_2d_nhwc_hwcf {{dilations = dense<[{dilations[0]}, {dilations[1]}]> : tensor<2xi64>, "
            f"strides = dense<[{strides[0]}, {strides[1]}]> : tensor<2xi64>}} ins({src.name}, {w.name} : {src.ty}, "
            f"{w.ty}) outs({init} : {t}) -> {t}")
    return r


def _conv_by_phases(em: Emitter, x: TensorValue, w: TensorValue, shape: tuple[int, ...],
                    pad_lo: tuple[int, int], lhs_dilation: tuple[int, int], rhs_dilation: tuple[int, int]) -> str:
    """A stride-1 conv of an input dilated by ``lhs_dilation`` as one conv of the undilated input per
    output phase (``conv_phases``: no multiply-add on the dilation's zeros, no dilated copy), each
    with its taps of the filter (a strided copy, small), its result put into every D-th row and
    column of the output by a strided ``insert_slice``: bufferized, each conv computes in that
    window of the output, with no copy between.  Output channels are padded as ``conv2d``'s
    (``block_channels``): once, around all the phases.

    The taps a phase leaves out multiply zeros, which is 0 unless the filter holds an infinity or a
    NaN (0 * inf is NaN): each float phase starts its sums from ``_skipped_taps`` (+0, or NaN where
    the conv over the dilated input is NaN), and rows of no phase (no tap lands on an input row)
    from that of all the taps."""
    n, h, wd, c = x.shape
    kh, kw, _, f = w.shape
    deep = f if (kh, kw) == (1, 1) or shape[1:3] == (1, 1) else block_channels(f)  # as conv2d's
    if deep != f:
        w, wanted, shape = _padded_filter(em, w, deep), shape, shape[:3] + (deep,)
        out = _conv_by_phases(em, x, w, shape, pad_lo, lhs_dilation, rhs_dilation)
        return em.extract_slice(TensorValue(out, shape, x.elem, x.dtype), [0, 0, 0, deep - f], list(wanted)).name
    ys = axis_phases(h, shape[1], kh, lhs_dilation[0], rhs_dilation[0], pad_lo[0])
    xs = axis_phases(wd, shape[2], kw, lhs_dilation[1], rhs_dilation[1], pad_lo[1])
    (yl, yh), (xl, xh) = phase_padding(h, ys), phase_padding(wd, xs)
    src = x if (yl, yh, xl, xh) == (0, 0, 0, 0) else _padded_input(em, x, (yl, yh, xl, xh), (1, 1))
    complete = len(ys) == min(lhs_dilation[0], shape[1]) and len(xs) == min(lhs_dilation[1], shape[2])
    if complete:
        out = em.empty(shape, x.elem)
    elif is_float(x.elem):
        out = _broadcast_channels(em, _skipped_taps(em, w, set()), shape)
    else:
        out = em.filled(shape, x.elem, zero(x.elem))
    t = tensor_type(shape, x.elem)
    for py in ys:
        for px in xs:
            window = src
            if (py.rows, px.rows) != src.shape[1:3]:
                window = em.extract_slice(src, [0, py.first + yl, px.first + xl, 0], [n, py.rows, px.rows, c])
            part_shape = (n, py.out, px.out, f)
            init = None
            if is_float(x.elem):
                taps = {(py.k0 + i * py.step, px.k0 + j * px.step) for i in range(py.taps) for j in range(px.taps)}
                init = _broadcast_channels(em, _skipped_taps(em, w, taps), part_shape)
            part = TensorValue(_named_conv(em, window, _filter_taps(em, w, py, px), part_shape, (1, 1),
                                           (py.dilation, px.dilation), init), part_shape, x.elem, x.dtype)
            placed = em.fresh("i")
            em.emit(f"{placed} = tensor.insert_slice {part.name} into {out}[0, {py.p}, {px.p}, 0] "
                    f"[{n}, {py.out}, {px.out}, {f}] [1, {lhs_dilation[0]}, {lhs_dilation[1]}, 1] : {part.ty} into {t}")
            out = placed
    return out


def _skipped_taps(em: Emitter, w: TensorValue, taps: set[tuple[int, int]]) -> TensorValue:
    """Per output channel, +0 plus ``0 * w`` over the filter's taps not in ``taps`` (and every input
    channel): +0, or NaN where one of those is an infinity or a NaN.  What the left-out taps add to
    a sum over the dilated input, whose values under them are zeros."""
    kh, kw, c, f = w.shape
    mask = ", ".join("[" + ", ".join("0" if (i, j) in taps else "1" for j in range(kw)) + "]" for i in range(kh))
    m = em.fresh("m")
    em.emit(f"{m} = arith.constant dense<[{mask}]> : tensor<{kh}x{kw}xi8>")
    skipped = TensorValue(m, (kh, kw), "i8", None)
    e = w.elem

    def body(b: Body, args: list[str], acc: str) -> str:
        left_out = b.cmpi("ne", args[0], b.const("0", "i8"), "i8")
        term = b.binary("mulf", b.const(zero(e), e), args[1], e)
        return b.select(left_out, b.binary("addf", acc, term, e), acc, e)
    r = em.generic((f,), e, [skipped, w], [affine_map(4, ["d0", "d1"]), identity_map(4)],
                   ["reduction", "reduction", "reduction", "parallel"], body, init=em.filled((f,), e, zero(e)),
                   out_map=affine_map(4, ["d3"]))
    return TensorValue(r, (f,), e, w.dtype)


def _broadcast_channels(em: Emitter, v: TensorValue, shape: tuple[int, ...]) -> str:
    """``v`` (one value per channel) at every pixel of an NHWC tensor of ``shape``."""
    return em.generic(shape, v.elem, [v], [affine_map(4, ["d3"])], ["parallel"] * 4, lambda b, args, o: args[0])


def _grid(d: str, step: int, offset: int) -> str:
    return (f"{d} * {step}" if step != 1 else d) + (f" + {offset}" if offset else "")


def _filter_taps(em: Emitter, w: TensorValue, py: AxisPhase, px: AxisPhase) -> TensorValue:
    """The filter's taps ``k0 + m * step`` of both spatial dims (``w`` itself when that is all of them);
    cut to the taps' window first, so that the copy's map has the window's extent (see ``slice``)."""
    kh, kw, c, f = w.shape
    if (py.taps, px.taps) == (kh, kw):
        return w
    span = [(py.taps - 1) * py.step + 1, (px.taps - 1) * px.step + 1]
    cut = w if span == [kh, kw] else em.extract_slice(w, [py.k0, px.k0, 0, 0], span + [c, f])
    shape = (py.taps, px.taps, c, f)
    return TensorValue(em.copy(cut, shape, affine_map(4, [_grid("d0", py.step, 0), _grid("d1", px.step, 0),
                                                          "d2", "d3"])), shape, w.elem, w.dtype)


def _padded_input(em: Emitter, x: TensorValue, padding: tuple[int, int, int, int],
                  dilation: tuple[int, int]) -> TensorValue:
    """``x`` with its padding and input dilation (interior padding): ``_zero_padded``."""
    (pt, pb, pl, pr), (dh, dw) = padding, dilation
    n, h, w, c = x.shape
    full = (n, (h - 1) * dh + 1 + pt + pb, (w - 1) * dw + 1 + pl + pr, c)
    return _zero_padded(em, x, (0, pt, pl, 0), (0, dh - 1, dw - 1, 0), full)


def _zero_padded(em: Emitter, x: TensorValue, lo: tuple[int, ...], interior: tuple[int, ...],
                 full: tuple[int, ...]) -> TensorValue:
    """``x`` placed at ``lo`` (steps ``interior + 1``) in zeros of shape ``full``: the pad op's own
    form (``Emitter.pad``: the border filled, ``x`` copied into its window by a ``linalg.copy`` and
    an ``insert_slice``).  Why not a generic over ``x`` whose output map is the window (the earlier
    form): the linalg vectorizer takes no output map with offsets, so such a copy stayed scalar
    loops, and a transpose fused into it (a filter gradient's ``[3, 1, 2, 0]`` input) made it a
    scalar transposing copy, a fifth of the CNN train step; fusion stops at the copy, so the
    transpose is planned as a transpose (vector tiles transposed in registers) and the copy moves
    contiguous rows (``docs/backend-cpu.md``, Measurements).  A conv operand: ``Emitter.pad``'s
    ``conv_operand``."""
    zero_value = em.fresh("c")
    em.emit(f"{zero_value} = arith.constant {zero(x.elem)} : {x.elem}")
    return TensorValue(em.pad(x, zero_value, lo, interior, full, conv_operand=True), full, x.elem, x.dtype)


LOWERINGS: dict[str, Lowering] = {
    "const": const, "add": add, "sub": sub, "mul": mul, "div": div, "exp": exp, "log": log,
    "compare": compare, "select": select, "convert": convert,
    "reduce_sum": reduce_sum, "reduce_max": reduce_max,
    "reshape": reshape, "transpose": transpose, "slice": slice, "pad": pad, "gather": gather,
    "matmul": matmul, "conv2d": conv2d,
}
