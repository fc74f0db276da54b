"""A fusion block's stored intermediate written in the block's output rows, which the block's last
loop nest then updates in place.

Why: a softmax's block stores its rows' ``exp(x - m)`` in a buffer of its own (the row sums and
the division both read them), and the division writes the block's output rows.  The output's cache
lines are then first touched in the division's sweep, each read from memory before it is written,
while the exp sweep before it computes with the memory idle.  Written into the output rows, the
exps fetch those lines during the exp sweep, and the division reads and writes lines already in
cache: the 4096x1000 f32 softmax ran 1.10-1.21x faster (``docs/backend-cpu.md``, Measurements:
a block's intermediate in its output rows).

What (on the scheduled tensors, before bufferization): in an ``scf.forall`` whose block inserts
the result of a loop nest ``C`` (``scf.for``) into its shared output at the place of the slice ``O``
that ``C`` started on, an intermediate ``R`` (the result of a loop nest started on a
``tensor.empty`` of ``O``'s type) that is read only before ``C`` and, inside ``C``, only at the
places ``C``'s step writes (``_matched_read``): ``R``'s loop starts on ``O`` instead, ``C`` starts on
``R``, and ``C`` reads its own value where it read ``R``.  Each element is read in the step that
then writes it, and the schedule's tiles are disjoint, so every read still sees the intermediate's
value: the results are bit-identical.  Target-neutral; MLIR is imported inside functions only.
"""

from __future__ import annotations

from typing import Any, Callable

from .payload import ancestor_under, as_operation, defined_by, ops_named

__all__ = ["write_blocks_in_place"]

_SLICE_PLACE = ("static_offsets", "static_sizes", "static_strides")
"""The attributes that, with the dynamic operands, say where a slice op reads or writes."""


def _dynamic(op: Any) -> list[Any]:
    """The dynamic offsets, sizes and strides of a slice op (after its source, and its destination
    for an insertion)."""
    return list(op.operands)[1 if op.name == "tensor.extract_slice" else 2:]


def _same_place(a: Any, b: Any) -> bool:
    """Whether two slice ops name the same offsets, sizes and strides."""
    return all(str(a.attributes[k]) == str(b.attributes[k]) for k in _SLICE_PLACE) and \
        len(_dynamic(a)) == len(_dynamic(b)) and all(x == y for x, y in zip(_dynamic(a), _dynamic(b)))


def _inside(op: Any, ancestor: Any) -> bool:
    """Whether ``op`` is nested in ``ancestor``'s regions."""
    parent = op.parent
    while parent is not None:
        if as_operation(parent) == ancestor:
            return True
        parent = as_operation(parent).parent
    return False


def _only_read(value: Any) -> bool:
    """Whether every use of ``value`` reads it: a ``vector.transfer_read`` or a slice only read."""
    for use in value.uses:
        user = as_operation(use.owner)
        if use.operand_number != 0:
            return False
        if user.name == "tensor.extract_slice":
            if not _only_read(user.results[0]):
                return False
        elif user.name != "vector.transfer_read":
            return False
    return True


def _yields(block: Any, value: Any) -> bool:
    """Whether ``block`` (an ``scf.for`` body) yields ``value`` as its one result."""
    terminator = as_operation(list(block.operations)[-1])
    return terminator.name == "scf.yield" and len(terminator.operands) == 1 and terminator.operands[0] == value


def _carried(block: Any, loop: Any) -> Any | None:
    """The value of ``loop``'s result that ``block`` (``loop``'s body or a loop's body nested in it)
    carries: its own iteration argument when each loop from ``block`` up to ``loop`` starts on the
    iteration argument of the loop above it and has one; else None."""
    from mlir import ir
    owner = as_operation(block.owner)
    if owner.name != "scf.for" or len(owner.results) != 1:
        return None
    argument = block.arguments[1]
    while owner != loop:
        init = owner.operands[3]
        if not isinstance(init, ir.BlockArgument) or as_operation(init.owner.owner).name != "scf.for" or \
                init.arg_number != 1 or not _inside(owner, as_operation(init.owner.owner)):
            return None
        owner = as_operation(init.owner.owner)
    return argument


def _written_only(value: Any) -> bool:
    """Whether ``value`` (a loop's carried tensor) is only written and passed on: the destination of
    a transfer write or of an insertion, a slice only written, a nested loop's start or the yield.
    Why: the loop's start becomes the intermediate, so a loop that read its start (an accumulation)
    would read the intermediate's values where it read the output's."""
    for use in value.uses:
        user, n = as_operation(use.owner), use.operand_number
        ok = (user.name in ("vector.transfer_write", "tensor.insert_slice") and n == 1) or \
            (user.name == "scf.for" and n == 3 and len(user.results) == 1 and
             _written_only(user.regions[0].blocks[0].arguments[1]) and _written_only(user.results[0])) or \
            user.name == "scf.yield" or \
            (user.name == "tensor.extract_slice" and n == 0 and _written_only(user.results[0]))
        if not ok:
            return False
    return True


def _reads(op: Any) -> list[Any]:
    """The transfer reads of ``op``'s result (through slices of it)."""
    out = []
    for use in op.results[0].uses:
        user = as_operation(use.owner)
        out += [user] if user.name == "vector.transfer_read" else _reads(user)
    return out


def _matched_read(user: Any, loop: Any) -> Any | None:
    """For a use of the intermediate inside ``loop`` (``C``): how to read ``C``'s own value instead,
    when the use reads exactly what the step then writes, else None.  Either a
    ``vector.transfer_read`` at the indices, vector type, ``in_bounds``, permutation and mask of a
    later ``vector.transfer_write`` of the same block into its carried value (``_carried``), which
    the block yields: ("value", the carried value); or a slice at the place of a slice of a value
    the block carries or computes (a nested loop's result), which a later transfer writes and the
    block inserts back at the same place and yields: ("slice", that slice)."""
    from mlir import ir
    block = user.block
    carried = _carried(block, loop)
    if carried is None:
        return None
    if user.name == "vector.transfer_read":
        rank = ir.ShapedType(user.operands[0].type).rank
        read_mask = user.operands[2 + rank] if len(user.operands) == 3 + rank else None
        for op in block.operations:
            op = as_operation(op)
            if op.name != "vector.transfer_write" or op.operands[1] != carried or not user.is_before_in_block(op):
                continue
            write_mask = op.operands[2 + rank] if len(op.operands) == 3 + rank else None
            same = op.operands[0].type == user.results[0].type and \
                all(a == b for a, b in zip(list(user.operands)[1:1 + rank], list(op.operands)[2:2 + rank])) and \
                all(str(user.attributes[k]) == str(op.attributes[k]) for k in ("in_bounds", "permutation_map")) and \
                (read_mask is None) == (write_mask is None) and (read_mask is None or read_mask == write_mask)
            if same and _yields(block, op.results[0]):
                return ("value", carried)
        return None
    if user.name != "tensor.extract_slice" or not _only_read(user.results[0]):
        return None
    reads = _reads(user)
    for op in block.operations:
        op = as_operation(op)
        if op.name != "tensor.extract_slice" or op == user or not _same_place(op, user):
            continue
        current = op.operands[0]
        inner = defined_by(current, "scf.for")
        if current != carried and (inner is None or inner.block != block or inner.operands[3] != carried):
            continue  # a slice of neither the carried value nor a nested loop's result started on it
        for use in op.results[0].uses:
            write = as_operation(use.owner)
            if write.name != "vector.transfer_write" or use.operand_number != 1 or \
                    not all(r.block == block and r.is_before_in_block(write) for r in reads):
                continue
            for wuse in write.results[0].uses:
                insert = as_operation(wuse.owner)
                if insert.name == "tensor.insert_slice" and wuse.operand_number == 0 and \
                        insert.operands[1] == current and _same_place(insert, op) and \
                        _yields(block, insert.results[0]):
                    return ("slice", op)
    return None


def _rewrite(forall: Any, consumer: Any, out_slice: Any) -> bool:
    """Write one intermediate of ``forall``'s block in place (see the module docstring)."""
    body = forall.regions[0].blocks[0]
    for producer in body.operations:
        producer = as_operation(producer)
        if producer.name != "scf.for" or len(producer.results) != 1 or producer == consumer:
            continue
        empty = defined_by(producer.operands[3], "tensor.empty")
        result = producer.results[0]
        if empty is None or len(empty.operands) or empty.results[0].type != out_slice.results[0].type or \
                len(list(empty.results[0].uses)) != 1 or not producer.is_before_in_block(consumer):
            continue
        plan, used_inside = [], False
        for use in result.uses:
            user = as_operation(use.owner)
            if _inside(user, consumer):
                matched = _matched_read(user, consumer) if use.operand_number == 0 else None
                if matched is None:
                    plan = None
                    break
                plan.append((user, matched))
                used_inside = True
            elif user == consumer or not ancestor_under(user, lambda p: p == forall).is_before_in_block(consumer) or \
                    use.operand_number != 0 or user.name not in ("vector.transfer_read", "tensor.extract_slice") or \
                    (user.name == "tensor.extract_slice" and not _only_read(user.results[0])):
                plan = None
                break
        if not plan or not used_inside:
            continue
        if any(not _defined_before(v, empty, forall) for v in out_slice.operands):
            continue
        out_slice.move_before(empty)
        empty.results[0].replace_all_uses_with(out_slice.results[0])
        empty.erase()
        consumer.operands[3] = result
        for user, (kind, value) in plan:
            if kind == "value":
                user.operands[0] = value
            else:
                user.results[0].replace_all_uses_with(value.results[0])
                user.erase()
        return True
    return False


def _defined_before(value: Any, op: Any, forall: Any) -> bool:
    """Whether ``value`` is available right before ``op``, an op of ``forall``'s block."""
    from mlir import ir
    body = forall.regions[0].blocks[0]
    if isinstance(value, ir.BlockArgument):
        return value.owner == body or _inside(forall, as_operation(value.owner.owner))
    definer = as_operation(value.owner)
    if definer.block == body:
        return definer.is_before_in_block(op)
    return not _inside(definer, forall)


def write_blocks_in_place(module: Any, keep: Callable[[Any], bool] | None = None) -> int:
    """Write each qualifying intermediate of each ``scf.forall`` block in the block's output slice
    (the module docstring), except in the blocks ``keep`` returns True for (a target whose output
    rows are better left write-only); returns how many were."""
    done = 0
    for forall in ops_named(module, "scf.forall"):
        forall = as_operation(forall)
        if keep is not None and keep(forall):
            continue
        body = forall.regions[0].blocks[0]
        terminator = as_operation(list(body.operations)[-1])
        if terminator.name != "scf.forall.in_parallel":
            continue
        for insert in terminator.regions[0].blocks[0].operations:
            insert = as_operation(insert)
            if insert.name != "tensor.parallel_insert_slice":
                continue
            consumer = defined_by(insert.operands[0], "scf.for")
            if consumer is None or as_operation(consumer.parent) != forall or len(consumer.results) != 1 or \
                    not _written_only(consumer.regions[0].blocks[0].arguments[1]):
                continue
            out_slice = defined_by(consumer.operands[3], "tensor.extract_slice")
            if out_slice is None or out_slice.operands[0] != insert.operands[1] or \
                    not _same_place(out_slice, insert) or len(list(out_slice.results[0].uses)) != 1:
                continue
            done += _rewrite(forall, consumer, out_slice)
    return done
