"""How many threads a kernel gets when none was asked for: a cost model of its one-thread time.

Why time and not an element count: a memory-bound kernel (a softmax sweeping a 16 MB matrix three
times) runs for milliseconds with a few million element operations, while a second thread halves
it; and a thread pays per call only what its parallel regions cost (a fork and a join each), not a
fixed count of elements.  ``kernel_cost`` reads from the Core IR what a kernel moves and computes
(bytes of the values it reads from and writes to memory, multiply-adds of its contractions, vector
operations of everything else, parallel regions); ``one_thread_seconds`` turns that into seconds on a
core with the options' vector unit, and ``CpuOptions.for_kernel`` goes parallel when the saving
clearly exceeds the regions' cost (``worth_threads``).  The constants are measured on the project's
machine (``docs/backend-cpu.md``, Threads and Measurements).
"""

from __future__ import annotations

from typing import Any, Mapping

from mind.spec.record import FrozenRecord

from ..linalg.emit import specialize_type
from ..linalg.lowerings import swaps_last_two
from ..linalg.mathlib import build_exp, build_log, vector_ops
from .vector_unit import VectorUnit

__all__ = ["KernelCost", "kernel_cost", "one_thread_seconds", "worth_threads", "saving_pays", "UNKNOWN_COST",
           "COSTS"]

COSTS: dict[str, float] = {
    "stream_bytes_per_s": 14e9,   # one core's streaming bandwidth from memory, bytes read + written per second
    "cache_bytes_per_s": 40e9,    # a kernel whose parameters and results fit in L2 streams them at this rate
    "vector_ops_per_s": 7.6e9,    # one core's simple vector ops (or FMAs of a polynomial) per second: 2 per cycle
    "cycles_per_s": 3.8e9,        # one core's clock, which a contraction's multiply-adds are charged at:
                                  # the vector unit's ``fma_per_cycle`` full vectors per cycle
    "region_s": 2e-6,             # one parallel region's fork and join with libgomp, 2 threads
    "gain_over_regions": 2.5,     # the saving must be this many times the regions' cost
}
"""The cost model's constants (``docs/backend-cpu.md``, Measurements, has how each was measured).
``gain_over_regions`` keeps the margin for what a per-call estimate does not see: a busy machine's
barrier waits and the OpenMP runtime's start-up in each process."""

_ELEMENTWISE = frozenset({"const", "add", "sub", "mul", "div", "exp", "log", "compare", "select", "convert"})
_FREE = frozenset({"reshape", "const"})  # no loop of their own: a view, or folded into its users
_VECTOR_OPS_PER_ELEMENT = {"exp": float(vector_ops(build_exp)), "log": float(vector_ops(build_log)), "div": 4.0}
"""Vector instructions per element of the ops that are polynomials or long-latency (``linalg.mathlib``
expands ``exp``/``log`` into a reduction and a polynomial: counted from its code, 21 and 37 for f32
where this table said 12 and 14); every other op is one."""


class KernelCost(FrozenRecord):
    """What one call of a kernel moves and computes: ``bytes`` read from and written to memory,
    ``lane_ops`` (multiply-adds and other element operations, each weighted by its element width in
    units of 32 bits, so that an f64 operation counts as two f32 lanes), of which ``multiply_adds``
    are a contraction's (matmul, conv2d: charged at the vector unit's FMA rate), and ``regions`` (the
    parallel loops a threaded kernel would start)."""

    __slots__ = ("bytes", "footprint", "lane_ops", "regions", "multiply_adds")

    bytes: int
    footprint: int
    lane_ops: float
    regions: int
    multiply_adds: float

    def __init__(self, bytes: int, footprint: int, lane_ops: float, regions: int,  # noqa: A002
                 multiply_adds: float = 0.0) -> None:
        object.__setattr__(self, "bytes", bytes)
        object.__setattr__(self, "footprint", footprint)
        object.__setattr__(self, "lane_ops", lane_ops)
        object.__setattr__(self, "regions", regions)
        object.__setattr__(self, "multiply_adds", multiply_adds)


UNKNOWN_COST = KernelCost(1 << 40, 1 << 40, 0.0, 1)
"""The cost of a kernel whose shapes cannot be read: large (threads pay)."""


def kernel_cost(fn: Any, env: Mapping[str, int]) -> KernelCost:
    """The cost of ``fn`` specialized to ``env``.  Memory: each op that is not elementwise
    (reductions, movements, contractions: fusion does not put them in registers) reads its operands
    and writes its result, and every other parameter and result is read or written once; an
    elementwise chain fuses, so its intermediates cost no traffic.  Computation: each op's elements
    (a contraction's multiply-adds, a reduction's input) times its vector instructions per element.
    Regions: one per op that is not elementwise, plus one for the elementwise chains when there are
    any outside the reductions' fusion groups (``_grouped``).  A transpose that only matmuls read
    is free: the prebuilt GEMM reads it in place (``library_calls.transposed_operands``).  Why not
    every parameter and result on top of the ops' traffic: a row sum's input was then counted twice
    (27 µs estimated for a 256x500 row sum that runs in 8), and a lone contraction or reduction paid
    for an elementwise region it does not have; why the groups and the folded transposes: a 4x64x64
    attention was counted 5 regions where it runs 3 (its two GEMMs and its softmax's group)."""
    types: dict[Any, tuple[int, int]] = {}

    def size(value: Any) -> tuple[int, int]:
        """(elements, bytes per element) of a value."""
        t = value.type
        found = types.get(t)
        if found is None:
            dtype, shape = specialize_type(t, env)
            n = 1
            for d in shape:
                n *= int(d)
            found = types[t] = (n, dtype.numpy.itemsize)
        return found
    try:
        users = _users(fn)
        boundary = list(fn.params) + list(fn.results)
        footprint = sum(n * w for n, w in map(size, boundary))
        moved = 0
        touched: set[int] = set()  # the values an op that is not elementwise reads or writes
        lane_ops = multiply_adds = 0.0
        regions = 0
        group: dict[int, tuple[Any, ...]] = {}  # value -> the row reduction whose result it carries
        for op in fn.ops:
            n, width = size(op.result)
            ins = [size(v) for v in op.operands]
            if op.op in _ELEMENTWISE or op.op in _FREE:
                carried = {group[id(v)] for v in op.operands if id(v) in group}
                if len(carried) == 1:
                    group[id(op.result)] = carried.pop()
            if op.op in _ELEMENTWISE:
                count = 0 if op.op in _FREE else n
                lane_ops += count * _VECTOR_OPS_PER_ELEMENT.get(op.op, 1.0) * width / 4
                continue
            if op.op in _FREE:
                continue
            if _read_in_place(op, users):
                touched.add(id(op.operands[0]))  # read by the matmuls, through the transpose
                continue
            key = _row_reduction(op)
            if key is None or not any(group.get(id(v)) == key for v in op.operands):
                regions += 1  # a second row reduction over what a first one's result fed: one fusion group
            if key is not None:
                group[id(op.result)] = key
            moved += n * width + sum(m * w for m, w in ins)
            touched.update(id(v) for v in (*op.operands, op.result))
            if op.op in _CONTRACTIONS:
                count = n * _CONTRACTIONS[op.op](op, env)
                multiply_adds += count * width / 4
            else:
                count = max([n] + [m for m, _ in ins])
            lane_ops += count * width / 4
        # the parameters and results that only the elementwise chains read or write, once each
        moved += sum(n * w for v in boundary if id(v) not in touched for n, w in [size(v)])
        grouped = _grouped(fn, users, group)
        regions += any(op.op in _ELEMENTWISE and op.op not in _FREE and id(op.result) not in grouped
                       for op in fn.ops)
    except Exception:  # noqa: BLE001 - an estimate only: a shape we cannot read means "large"
        return UNKNOWN_COST
    return KernelCost(moved, footprint, lane_ops, max(1, regions), multiply_adds)


def _users(fn: Any) -> dict[int, list[Any]]:
    """The ops that read each value (by ``id``); a result of the function has ``None`` among them."""
    users: dict[int, list[Any]] = {}
    for op in fn.ops:
        for v in op.operands:
            users.setdefault(id(v), []).append(op)
    for v in fn.results:
        users.setdefault(id(v), []).append(None)
    return users


def _read_in_place(op: Any, users: Mapping[int, list[Any]]) -> bool:
    """A transpose of the last two axes that only matmuls read: the prebuilt GEMM reads such an
    operand in place."""
    if op.op != "transpose":
        return False
    readers = users.get(id(op.result), [])
    return swaps_last_two(op.attrs.get("permutation", ())) and bool(readers) and \
        all(u is not None and u.op == "matmul" for u in readers)


def _grouped(fn: Any, users: Mapping[int, list[Any]], carried: Mapping[int, Any]) -> set[int]:
    """The elementwise ops (by result ``id``) that run inside a row reduction's fusion group: those
    that read a reduction's result (``carried``: a softmax's ``x - max``, its division, a norm's
    scaling), and those whose every reader is a row reduction or such an op (a softmax's scaled
    input).  Fusion puts them in the group's consumer or fuses them into its forall as producers,
    so they start no region of their own."""
    grouped: set[int] = set()
    for op in reversed(fn.ops):
        if op.op not in _ELEMENTWISE:
            continue
        readers = users.get(id(op.result), [])
        if id(op.result) in carried or readers and all(
                u is not None and (_row_reduction(u) is not None or id(u.result) in grouped) for u in readers):
            grouped.add(id(op.result))
    return grouped


def _contracted(op: Any, env: Mapping[str, int]) -> int:
    """A matmul's contraction length (the lhs's last axis)."""
    return int(specialize_type(op.operands[0].type, env)[1][-1])


def _window(op: Any, env: Mapping[str, int]) -> int:
    """A conv2d's multiply-adds per output element (filter height x width x input channels)."""
    kh, kw, c, _ = specialize_type(op.operands[1].type, env)[1]
    return int(kh) * int(kw) * int(c)


_CONTRACTIONS = {"matmul": _contracted, "conv2d": _window}


def _row_reduction(op: Any) -> tuple[Any, ...] | None:
    """What identifies a reduction's rows (its op-independent input type and axes), or None for an
    op that is not a reduction.  Why: a softmax's or a norm's reductions, the second reading what the
    first's result fed, run in one fusion group (``fusion_groups``): one parallel region, not one
    each (a 128x384 f64 softmax, counted as three regions, would have stayed on one thread, 64 µs
    against 35 on two)."""
    if not op.op.startswith("reduce_"):
        return None
    return (str(op.operands[0].type), tuple(op.attrs.get("axes", ())))
"""The contractions and their multiply-adds per output element."""


def one_thread_seconds(cost: KernelCost, unit: VectorUnit) -> float:
    """The estimated time of one call on one core: the bytes at the streaming bandwidth (of the L2
    cache when the parameters and results fit in the unit's ``l2_bytes``) plus the lane operations at
    the unit's vector rate (``unit.lanes(32)`` 32-bit lanes per instruction), a contraction's
    multiply-adds at its FMA rate (``unit.fma_per_cycle`` full vectors per cycle).  Why apart: a
    GEMM is FMAs only, which an AVX-512 core of Zen 4 issues one per cycle, half the two simple
    operations per cycle the rest is charged at; at that rate a 4x64x64 attention (1 M multiply-adds
    in each of its matmuls) was estimated at half its time and kept on one thread, 1.45x slower."""
    cached = cost.footprint <= unit.l2_bytes
    lanes = unit.lanes(32)
    return cost.bytes / COSTS["cache_bytes_per_s" if cached else "stream_bytes_per_s"] + \
        (cost.lane_ops - cost.multiply_adds) / (lanes * COSTS["vector_ops_per_s"]) + \
        cost.multiply_adds / (lanes * unit.fma_per_cycle * COSTS["cycles_per_s"])


def worth_threads(cost: KernelCost, unit: VectorUnit, threads: int) -> bool:
    """Whether ``threads`` threads clearly pay for their parallel regions (``saving_pays``)."""
    return saving_pays(one_thread_seconds(cost, unit), cost.regions, threads)


def saving_pays(one_thread_s: float, regions: int, threads: int, gain: float | None = None) -> bool:
    """The rule itself: the time ``threads`` threads save (the one-thread time split evenly) is at
    least ``gain`` (default ``gain_over_regions``) times the regions' fork/join.  Apart from the
    estimate so that ``benchmarks/thread_choice.py`` can weigh other factors by the same rule."""
    gain = COSTS["gain_over_regions"] if gain is None else gain
    return one_thread_s * (1 - 1 / threads) >= gain * regions * COSTS["region_s"]
