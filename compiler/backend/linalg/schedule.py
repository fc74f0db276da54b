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

from .payload import op_work
from .transform_script import SCHED_ATTR, wrap_script

__all__ = ["Planner", "GroupPlanner", "schedule_module", "largest_unscheduled_work"]

Planner = Callable[[Any, int], "str | None"]
"""``planner(op, tag)``: the script section scheduling ``op`` (matched by ``tag``), or None."""

_NOT_SCHEDULED = ("linalg.yield", "linalg.index")


def _candidates(module: Any, skip: Callable[[Any], bool] | None) -> list[Any]:
    """The linalg ops of ``module`` in walk order, without those ``skip`` leaves to someone else."""
    from mlir import ir
    found: list[Any] = []

    def visit(op: Any) -> ir.WalkResult:
        name = op.name
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
    candidates = _candidates(module, skip)
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


def largest_unscheduled_work(module: Any, skip: Callable[[Any], bool] | None = None) -> int:
    """The largest ``op_work`` of the linalg ops ``schedule_module`` left untagged (they become
    loops), not counting those ``skip`` accepts.  Call it before the script runs; an op of unknown
    size counts as large."""
    largest = 0
    for op in _candidates(module, skip):
        if SCHED_ATTR not in op.attributes:
            work = op_work(op)
            largest = max(largest, work if work is not None else 1 << 62)
    return largest
