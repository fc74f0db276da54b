"""Scheduling a payload module per op: each linalg op a target's planner has a section for is tagged
and gets that section; the rest stays linalg ops that the pipeline lowers to loops.

Why per op: only the ops a section tiled are vectorized, so an op without a plan never becomes a huge
vector (an untiled op vectorized whole became one vector of the whole tensor), and one unschedulable
op does not force the whole kernel to scalar code.  The planners, the cost model (``min_work``) and
the lowering of what the sections made are the target's; the walk, the tags and the script are
shared.  MLIR is imported inside the functions only.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from .payload import for_trips, op_work
from .transform_script import SCHED_ATTR, wrap_script

__all__ = ["Planner", "GroupPlanner", "schedule_module", "largest_loop_work"]

Planner = Callable[[Any, int], "str | None"]
"""``planner(op, tag)``: the script section scheduling ``op`` (matched by ``tag``), or None."""

_NOT_SCHEDULED = ("linalg.yield", "linalg.index")


def _candidates(module: Any, skip: Callable[[Any], bool] | None, in_foralls: bool = True) -> list[Any]:
    """The linalg ops of ``module`` in walk order, without those ``skip`` leaves to someone else;
    without those inside an ``scf.forall`` unless ``in_foralls``."""
    from mlir import ir
    found: list[Any] = []

    def visit(op: Any) -> ir.WalkResult:
        name = op.name
        if name == "scf.forall" and not in_foralls:
            return ir.WalkResult.SKIP
        if name.startswith("linalg.") and name not in _NOT_SCHEDULED and not (skip and skip(op)):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


GroupPlanner = Callable[[list[Any], int], "list[tuple[list[Any], Callable[[Sequence[int | None]], str]]]"]
"""``group_planner(candidates, min_work)``: groups of ops scheduled together (a reduction fused with its
consumer), each as its ops and the builder of its section from their tags (None for an op that is
not a linalg op, a view); the ops of a group get no section of their own."""


def schedule_module(module: Any, planners: Mapping[str, Planner], lowering: str, min_work: int,
                    skip: Callable[[Any], bool] | None = None,
                    group_planner: GroupPlanner | None = None) -> str | None:
    """Tag the ops of ``module`` that ``planners`` (by op name) schedule and return the transform
    script (``lowering``: the target's tail), or None when nothing is scheduled.  Ops whose
    ``op_work`` is below ``min_work`` are left alone (a cost model: 0 schedules every op that has a
    plan); so are those ``skip`` accepts (a target's library calls, say).  ``group_planner``'s groups
    come first."""
    from mlir import ir
    # an op inside a forall of the payload (a pad's band, ``Emitter._band``) has its loop placed
    # already: a section of its own would nest a second parallel loop in it
    candidates = _candidates(module, skip, in_foralls=False)
    tagged: list[Any] = []
    sections: list[str] = []
    grouped: set[int] = set()
    if group_planner is not None:
        try:
            groups = group_planner(candidates, min_work)
        except (KeyError, ValueError, TypeError, AttributeError):
            groups = []
        for ops, build in groups:
            tags: list[int | None] = []
            for op in ops:
                tags.append(len(tagged) if op.name.startswith("linalg.") else None)
                if op.name.startswith("linalg."):
                    tagged.append(op)
                grouped.add(hash(op.operation))
            sections.append(build(tags))
    for op in candidates:
        if hash(op.operation) in grouped:
            continue
        tag = len(tagged)
        section: str | None = None
        try:
            if min_work > 0:
                work = op_work(op)
                if work is not None and work < min_work:
                    continue  # too small to pay for its compile time
            planner = planners.get(op.name)
            section = planner(op, tag) if planner is not None else None
        except (KeyError, ValueError, TypeError, AttributeError):
            section = None
        if section:
            tagged.append(op)
            sections.append(section)
    if not sections:
        return None
    i64 = ir.IntegerType.get_signless(64)
    for tag, op in enumerate(tagged):
        op.attributes[SCHED_ATTR] = ir.IntegerAttr.get(i64, tag)
    return wrap_script(sections, lowering)


def largest_loop_work(module: Any, skip: Callable[[Any], bool] | None = None) -> int:
    """The largest work of the linalg ops left in ``module`` (each becomes a scalar loop nest), not
    counting those ``skip`` accepts; an op of unknown size counts as large.  Call it after the schedule
    ran: what a section tiled and vectorized is gone by then, and so is a producer it fused into its
    loops and vectorized there (a convolution's zero fill, which counted as a whole loop nest when
    the ops were weighed before the script ran).  An op left inside loops (a producer fused but not
    vectorized) counts its work times the trips of the loops around it."""
    largest = 0
    for op in _candidates(module, skip):
        work = op_work(op)
        trips = _enclosing_trips(op)
        largest = max(largest, work * trips if work is not None and trips is not None else 1 << 62)
    return largest


def _enclosing_trips(op: Any) -> int | None:
    """The product of the trip counts of the ``scf.for`` / ``scf.forall`` loops around ``op`` (1 at
    the top of its function); None when a bound is not a constant."""
    from mlir import ir
    trips = 1
    parent = op.operation.parent
    while parent is not None and parent.name != "func.func":
        if parent.name == "scf.forall":
            lows, highs, steps = (list(ir.DenseI64ArrayAttr(parent.attributes[k])) for k in
                                  ("staticLowerBound", "staticUpperBound", "staticStep"))
            for low, high, step in zip(lows, highs, steps):
                if step <= 0 or min(low, high) < 0:
                    return None  # a dynamic bound (ShapedType's dynamic marker is negative)
                trips *= max(0, -(-(high - low) // step))
        elif parent.name == "scf.for":
            n = for_trips(parent)
            if n is None:
                return None
            trips *= n
        parent = parent.parent
    return trips
