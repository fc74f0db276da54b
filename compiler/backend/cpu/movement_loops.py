"""Movement loops (an innermost ``scf.for`` that only loads and stores: slices, copies, fills) are
marked for LLVM's loop vectorizer.

Why: an unscheduled slice with a step or a reversal along the contiguous axis (``lowerings.slice``)
is a scalar loop ``out[j] = x[k * j + c]``; MLIR's vector transfers of such a strided view are
lowered element by element, and the "loops" LLVM level keeps the vectorizers off (their compile
time over every scalar loop nest of a kernel).  LLVM's loop vectorizer knows exactly this access
pattern: an interleaved group (wide contiguous loads and deinterleaving shuffles, gathers where its
cost model prefers them) or a reversed one (contiguous loads and a reversing shuffle), sized by the
target's own vector width, with a remainder loop.  With ``llvm.loop.vectorize.enable`` on the loop
it runs on that loop alone (O2 runs the vectorizer on forced loops only), so the compile time is
paid where the loop moves data and nowhere else.  Run between ``pipeline.to_loops`` and
``pipeline.loops_to_llvm``: ``convert-scf-to-cf`` carries the annotation to the loop's latch, as a
discardable attribute that the translation to LLVM IR ignores; ``seat_loop_annotations`` then makes
it the branch's own ``loop_annotation``, which becomes the loop's ``!llvm.loop`` metadata.
"""

from __future__ import annotations

from typing import Any

from ..linalg.payload import body_ops, element_bits, for_trips
from .vector_unit import VectorUnit

__all__ = ["mark_movement_loops", "seat_loop_annotations", "MOVEMENT_BODY_OPS", "FEWEST_PREDICATED_TRIPS",
           "fewest_predicated_trips"]

MOVEMENT_BODY_OPS = frozenset({
    "memref.load", "memref.store", "affine.apply", "arith.constant", "arith.addi", "arith.subi",
    "arith.muli", "arith.index_cast", "scf.yield",
})
"""What a movement loop's body may hold: its reads and writes and their index arithmetic."""

ANNOTATION = "#llvm.loop_annotation<vectorize = #llvm.loop_vectorize<disable = false>>"

PREDICATED = "#llvm.loop_annotation<vectorize = #llvm.loop_vectorize<disable = false, predicateEnable = true>>"
"""The annotation of a short copy loop (``fewest_predicated_trips`` or more, fewer than a vector):
vectorized with its tail folded into masked loads and stores, so that the whole loop is one
masked vector move instead of a scalar loop."""

FEWEST_PREDICATED_TRIPS = {512: 3, 256: 4, 128: 4}
"""The fewest iterations of a copy loop marked ``PREDICATED`` (see ``mark_movement_loops``), by the
vector unit's width in bits (``fewest_predicated_trips``)."""


def fewest_predicated_trips(unit: VectorUnit) -> int:
    """``FEWEST_PREDICATED_TRIPS`` of ``unit``.  Why 3 on AVX-512 and 4 elsewhere: AVX-512's masked
    load and store are one instruction each under a mask register, and a pad's runs of 3 f32 copied
    1.25-1.49x faster as one masked move; AVX2's masked store (``vmaskmovps``) is several, and the
    same runs copied 0.54-0.58x as fast (``docs/backend-cpu.md``, Measurements: short copy runs)."""
    return FEWEST_PREDICATED_TRIPS[unit.bits]


def _moves_data(loop: Any) -> bool:
    """An innermost loop without loop-carried values whose body stores (loaded values, or a fill's
    constant) and computes nothing but indices."""
    names = [op.operation.name for op in body_ops(loop)]
    return not len(loop.results) and all(n in MOVEMENT_BODY_OPS for n in names) and "memref.store" in names


def _stored_bits(loop: Any) -> int:
    """The widest element the loop stores."""
    return max(element_bits(op.operands[1].type) for op in body_ops(loop) if op.operation.name == "memref.store")


def mark_movement_loops(module: Any, unit: VectorUnit) -> int:
    """Annotate every movement loop of ``module`` (``_moves_data``) that runs at least one vector
    of ``unit`` (or an unknown count) for the loop vectorizer, and every copy loop of
    ``fewest_predicated_trips`` up to a vector for predicated vectorization (``PREDICATED``); the
    number annotated.

    Why the short copies: a pad or slice whose contiguous runs are a few elements (a pad of
    [10720, 17, 6] to [10720, 20, 9], of [2238, 304, 3]) copied each run as a scalar loop, where one
    masked vector move does.  Why not shorter loops, nor short fills: a forced loop
    LLVM then reshapes (a 2-element fill next to a reduction) and cannot vectorize makes LLVM print
    a remark on stderr (``docs/backend-cpu.md``, Measurements: short copy runs)."""
    from mlir import ir
    loops: list[tuple[Any, str]] = []
    fewest = fewest_predicated_trips(unit)

    def find(op: Any) -> ir.WalkResult:
        if op.name == "scf.for" and _moves_data(op):
            trips = for_trips(op)
            if trips is None or trips >= unit.lanes(_stored_bits(op)):
                loops.append((op, ANNOTATION))
            elif trips >= fewest and _loads(op):
                loops.append((op, PREDICATED))
        return ir.WalkResult.ADVANCE

    module.operation.walk(find)
    attrs = {text: ir.Attribute.parse(text) for text in {text for _, text in loops}}
    for loop, text in loops:
        loop.attributes["llvm.loop_annotation"] = attrs[text]
    return len(loops)


def _loads(loop: Any) -> bool:
    """Whether the loop reads memory (a copy, not a fill)."""
    return any(op.operation.name == "memref.load" for op in body_ops(loop))


def seat_loop_annotations(module: Any) -> None:
    """Move each lowered latch's ``llvm.loop_annotation`` (carried from its ``scf.for``) into the
    ``llvm.br``'s own ``loop_annotation`` attribute, the one the translation reads."""
    from mlir import ir
    latches: list[Any] = []

    def find(op: Any) -> ir.WalkResult:
        if "llvm.loop_annotation" in op.attributes:
            latches.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(find)
    for op in latches:
        op.attributes["loop_annotation"] = op.attributes["llvm.loop_annotation"]
        del op.attributes["llvm.loop_annotation"]
