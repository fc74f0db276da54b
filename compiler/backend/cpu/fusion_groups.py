"""Fusion groups: a reduction and the consumer that reads it, scheduled as one sweep of blocks of rows
(softmax, log-softmax, layer and RMS norms reading it as a broadcast; a logsumexp's ``m + log(s)``
reading its per-row results; a row reduction alone, its own consumer).

Why: after elementwise fusion a row softmax is still several generics (a max reduction, an
exp-and-sum reading the max as a broadcast, the division reading both), and scheduled one op at a
time each is its own sweep over the whole tensor: a 16 MB input crosses DRAM three or four times and
the statistics make a round trip through memory.  A group tiles the *consumer*'s leading parallel
loops (the rows) with ``scf.forall``, fuses every producer into the forall
(``transform.structured.fuse_into_containing_op``), and tiles and vectorizes each fused op inside
the block as the per-op plans do; a block's rows of every live operand fit in a share of L2
(``block_rows``), so the statistics and the intermediate rows are read back from cache.

A group is found in the payload after elementwise fusion (``find_groups``): the consumer is an
all-parallel generic or a reduction along its last loop; the group is the transitive producers of the inputs it reads through its first
loop, among generics, fills and ``tensor.expand_shape`` (the blocked sum's view), each of whose
results is used inside the group or (a generic's) after the consumer, in its block: such a value (a
softmax a training step keeps for its gradient) becomes a result of the forall, computed and stored
once per block;
it has at least one reduction; and every op of it keeps the consumer's leading loops (``prefix``) as
its own leading parallel loops, indexed as such by every operand that flows inside the group.  The
reductions then compute per block what the consumer's block reads.  A blocked row sum that a group
reads is first made one reduction along the row (``unblock_sums``).  MLIR is imported inside
functions only.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..linalg.lowerings import SUM_RUN
from ..linalg.payload import (body_ops, element_bits, generic_inputs, generic_loops,
                              generic_operations, product, static_shape, tile_bits)
from ..linalg.transform_script import (canonicalize, largest_divisor_at_most, match, peel, sizes, tile_for,
                                      tile_forall, vectorize)
from .vector_unit import VectorUnit

__all__ = ["L2_SHARE", "MIN_BLOCKS", "MIN_BLOCK_BYTES", "SMALL_BLOCK_BYTES", "Group", "GroupPlan", "find_groups",
           "block_rows", "row_tile", "group_section", "plan_groups", "unblock_sums", "group_work", "GROUP_BODY_OPS",
           "consumer_kind", "short_rows", "reduction_tile", "ROW_VECTORS_TO_GROUP", "worth_grouping",
           "horizontal_reductions", "carried_row_tile", "masked_cover", "unit_rows"]

L2_SHARE = 2
"""A block's live rows take at most 1/L2_SHARE of L2: the rest holds the next block's prefetched
rows and whatever the other operands (a norm's gain and bias) need."""

MIN_BLOCKS = 16
"""At least this many blocks where the rows allow: every thread of a 16-core machine gets one, and
two threads get 8 each, so a late thread does not leave the other idle."""

MIN_BLOCK_BYTES = 2048
"""The fewest live bytes a block should hold where the rows allow (``block_rows``)."""

SMALL_BLOCK_BYTES = 8192
"""Blocks of fewer live bytes pay noticeably for their fixed costs (``PARTIAL_BLOCK_CONSUMERS``)."""

PARTIAL_BLOCK_CONSUMERS = ("per_row", "rows")
"""The groups (``consumer_kind``) whose rows take blocks that do not divide their count, the last
block partial, where no divisor comes near the rows a block should have and the divisor's blocks
are small (``SMALL_BLOCK_BYTES``): a prime count had blocks of one row, each paying for its loops,
statistics and buffers.  A partial block's shapes are
dynamic, so its intermediate rows are allocated per block at run time; blocks of the full size
(``block_rows``) amortize that.  A group whose consumer is a reduction (a row sum of an
elementwise chain) gained nothing and keeps dividing blocks (``docs/backend-cpu.md``,
Measurements: partial blocks)."""

SHORT_ROW_VECTORS = 3
"""Rows of at most this many vectors are short (``ROWS_PER_SHORT_TILE``)."""

ROWS_PER_SHORT_TILE = 4
"""How many short rows of the block's last row loop an op of a block takes per tile (the largest
divisor of the block's rows up to this).  Why: a row of a few vectors does not amortize a tile's
loop and horizontal reduction, and several rows side by side are independent chains (a softmax
over 165x3x48 f32 gained most); rows of 4 vectors and longer gained nothing.  A block of such rows
(whole vectors) is one tile (``block_rows``).  An op over the per-row results (``[R, 1]``, a
logsumexp's ``m + log(s)``) takes a vector of rows instead (``unit_rows``)."""

_GROUP_OPS = ("linalg.generic", "linalg.fill", "tensor.expand_shape")


class Group:
    """A consumer and its producers (block order, consumer last), how many leading loops it tiles
    (``prefix``), the consumer's loop ranges and the live bytes per row of those loops."""

    __slots__ = ("ops", "prefix", "ranges", "row_bytes")

    def __init__(self, ops: list[Any], prefix: int, ranges: list[int], row_bytes: int) -> None:
        self.ops = ops
        self.prefix = prefix
        self.ranges = ranges
        self.row_bytes = row_bytes


def _owner(v: Any) -> Any | None:
    from mlir import ir
    owner = v.owner
    return None if isinstance(owner, ir.Block) else owner


def _key(op: Any) -> int:
    """An op's identity for sets and dicts (the bindings make a new Python object per access; the hash
    is the operation's address)."""
    return hash(op.operation)


def _collect(consumer: Any, positions: dict[int, int], row_operands: dict[int, list[Any]]) -> list[Any] | None:
    """The consumer's producers among ``_GROUP_OPS`` (through inputs and inits), or None when one of
    them has a user outside the group that the forall cannot feed (``_after``; a fill or a view).
    ``positions``: each op of the consumer's block and its index (``_positions``); ``row_operands``:
    ``_row_operands`` of the ops seen so far (``_key``), kept across the consumers of one search."""
    found: list[Any] = []
    seen: set[int] = set()
    work = [consumer]
    while work:
        op = work.pop()
        operands = row_operands.get(_key(op))
        if operands is None:
            operands = row_operands[_key(op)] = _row_operands(op)
        for v in operands:
            p = _owner(v)
            if p is None or p.name not in _GROUP_OPS or _key(p) in seen:
                continue
            seen.add(_key(p))
            found.append(p)
            work.append(p)
    members = seen | {_key(consumer)}
    here = positions[_key(consumer)]
    for op in found:
        for r in op.results:
            for use in r.uses:
                user = _key(use.owner)
                if user not in members and (op.name != "linalg.generic" or not _after(user, here, positions)):
                    return None
    return found


def _positions(op: Any) -> dict[int, int]:
    """Each op of ``op``'s block (``_key``) and its index there."""
    return {_key(o): i for i, o in enumerate(op.operation.block.operations)}


def _after(user: int, here: int, positions: dict[int, int]) -> bool:
    """Whether ``user`` (``_key``) comes after the op at index ``here`` in its block: a group value
    used there is yielded by the forall that replaces that op (``fuse_into_containing_op`` adds it
    as a result of the forall when its other users are dominated by it), computed once per block
    and stored once.  A user elsewhere (before the consumer, or in another region) would need the
    value before the forall: the group is refused."""
    return positions.get(user, -1) > here


def _row_operands(op: Any) -> list[Any]:
    """The operands of a group op read through its first loop (a generic's map starts with ``d0``), and
    every operand of a fill or a view: a value read otherwise (a norm's gain computed elementwise) is
    computed whole before the group, not fused into each block."""
    from mlir import ir
    if op.name != "linalg.generic":
        return list(op.operands)
    picked = []
    for v, a in zip(op.operands, op.attributes["indexing_maps"]):
        res = list(ir.AffineMapAttr(a).value.results)
        if res and isinstance(res[0], ir.AffineDimExpr) and res[0].position == 0:
            picked.append(v)
    return picked


def _leading_dims_kept(op: Any, inside: Callable[[Any], bool], k: int, ranges: Sequence[int]) -> bool:
    """Whether ``op`` has ``ranges[:k]`` as its first k loops, parallel, and every operand that is a
    group value or an output reads them as its first k indices."""
    from mlir import ir
    if op.name == "linalg.fill":
        shape = static_shape(op.results[0].type)
        return shape is not None and shape[:k] == list(ranges[:k])
    if op.name == "tensor.expand_shape":
        src, dst = static_shape(op.operands[0].type), static_shape(op.results[0].type)
        groups = [list(ir.ArrayAttr(g)) for g in op.attributes["reassociation"]]
        if src is None or dst is None or not src[:k] == dst[:k] == list(ranges[:k]) or \
                any(len(g) != 1 for g in groups[:k - 1]):
            return False
        # the last leading dim may take unit dims after it (a keepdims statistic, [R] as [R, 1])
        return all(dst[ir.IntegerAttr(d).value] == 1 for d in groups[k - 1][1:])
    loops = generic_loops(op)
    if loops is None:
        return False
    own, kinds = loops
    if own[:k] != list(ranges[:k]) or any(kind != "parallel" for kind in kinds[:k]):
        return False
    maps = [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]
    n_in = len(generic_inputs(op))
    for i, (v, amap) in enumerate(zip(op.operands, maps)):
        if i < n_in and not inside(v):
            continue
        res = list(amap.results)
        if len(res) < k or any(not isinstance(e, ir.AffineDimExpr) or e.position != d
                               for d, e in enumerate(res[:k])):
            return False
    return True


def find_groups(candidates: Sequence[Any], plannable: Callable[[Any], bool]) -> list[Group]:
    """The fusion groups among ``candidates`` (linalg ops in walk order; a consumer must be one, and
    ``plannable``: the per-op plan accepts each generic of the group).  Groups do not overlap."""
    groups: list[Group] = []
    taken: set[int] = set()
    blocks: dict[int, dict[int, int]] = {}  # the first op of a block -> its ops' positions
    row_operands: dict[int, list[Any]] = {}
    accepted: dict[int, bool] = {}  # ``plannable``'s answers (it builds the op's whole plan)
    for consumer in reversed(candidates):
        if consumer.name != "linalg.generic" or _key(consumer) in taken:
            continue
        loops = generic_loops(consumer)
        if loops is None or not loops[0] or any(k != "parallel" for k in loops[1][:-1]):
            continue
        row_reduction = loops[1][-1] != "parallel"  # a reduction along the row, its own consumer
        first = _key(consumer.operation.block.operations[0])
        positions = blocks.get(first)
        if positions is None:
            positions = blocks[first] = _positions(consumer)
        producers = _collect(consumer, positions, row_operands)
        if producers is None or any(_key(p) in taken for p in producers):
            continue
        generics = [p for p in producers if p.name == "linalg.generic"]
        if not row_reduction and not any(any(k != "parallel" for k in generic_loops(p)[1])  # type: ignore[index]
                                         for p in generics if generic_loops(p) is not None):
            continue  # no reduction: elementwise fusion's business
        if not all(_once(plannable, op, accepted) for op in generics + [consumer]):
            continue
        ranges = loops[0]
        values = {hash(r) for p in producers for r in p.results}

        def inside(v: Any) -> bool:
            return hash(v) in values
        k = 0
        while k < len(ranges) and all(_leading_dims_kept(op, inside, k + 1, ranges)
                                          for op in producers + [consumer]):
            k += 1
        if k == 0:
            continue
        ordered = _block_order(producers) + [consumer]
        groups.append(Group(ordered, k, ranges, _row_bytes(ordered, inside, ranges[:k])))
        taken.update(_key(op) for op in ordered)
    return groups


def _once(test: Callable[[Any], bool], op: Any, answers: dict[int, bool]) -> bool:
    """``test(op)``, asked once per op (``_key``) of a search that does not change the module."""
    key = _key(op)
    if key not in answers:
        answers[key] = test(op)
    return answers[key]


def _is_empty(v: Any) -> bool:
    """Whether ``v`` is a ``tensor.empty``: an init whose memory is its op's result."""
    owner = _owner(v)
    return owner is not None and owner.name == "tensor.empty"


def _block_order(ops: Sequence[Any]) -> list[Any]:
    """``ops`` in their block's order: a producer before its users (the group is fused last first)."""
    pos = {hash(b.operation): i for i, b in enumerate(ops[0].operation.block.operations)}
    return sorted(ops, key=lambda o: pos[hash(o.operation)])


def _row_bytes(ops: Sequence[Any], inside: Callable[[Any], bool], rows: Sequence[int]) -> int:
    """Bytes per row of the leading loops that a block keeps live: each result of a group op (a view
    is its source's memory) and each operand read from outside with the rows (not the empty inits:
    their memory is the result)."""
    k = len(rows)
    seen: set[int] = set()
    total = 0
    for op in ops:
        values = [] if op.name == "tensor.expand_shape" else list(op.results)
        values += [v for v in op.operands if not inside(v) and not _is_empty(v)]
        for v in values:
            shape = static_shape(v.type)
            if hash(v) in seen or not shape or len(shape) <= k or shape[:k] != list(rows):
                continue
            seen.add(hash(v))
            total += product(shape[k:]) * element_bits(v.type) // 8
    return total


def block_rows(group: Group, unit: VectorUnit) -> list[int]:
    """Forall tile sizes of the consumer: 1 on the leading loops but the last of the prefix, which
    gets the most rows whose live bytes fit ``unit.l2_bytes / L2_SHARE`` while there are at least
    ``MIN_BLOCKS`` blocks; 0 (untiled) on the rest.  Where the rows' count has no divisor from half
    that many rows up (a prime count has none but 1) and the divisor's blocks are small
    (``SMALL_BLOCK_BYTES``), a group of ``PARTIAL_BLOCK_CONSUMERS`` takes that many rows all the
    same, its last block partial.  A block of fewer than ``MIN_BLOCK_BYTES``
    live bytes takes instead the next divisor that reaches them (or, for those groups, the fewest
    rows that do), while the loops outside still make two blocks or more: each block pays for its
    loops, its statistics and its buffers (a 4x199x83 softmax ran 796 blocks of one row, 0.54x torch
    eager).  Short rows of whole vectors (``SHORT_ROW_VECTORS``) are the exception: a block is one
    tile of ``ROWS_PER_SHORT_TILE`` rows, whose ops then run straight through with their tiles in
    registers, where a loop over a block's tiles writes each op's tile to the block's buffers;
    rows with a masked last vector (40 or 33 f32) gained nothing and keep their blocks
    (``docs/backend-cpu.md``, Measurements)."""
    k = group.prefix
    rows = group.ranges[k - 1]
    outer = product(group.ranges[:k - 1])
    row_bytes = max(1, group.row_bytes)
    budget = max(1, (unit.l2_bytes // L2_SHARE) // row_bytes)
    want_blocks = max(1, -(-MIN_BLOCKS // outer))
    wanted = max(1, min(budget, rows // want_blocks))
    r = largest_divisor_at_most(rows, wanted)
    partial = bool(group.ops) and consumer_kind(group) in PARTIAL_BLOCK_CONSUMERS and not _chains_rows(group)
    if partial and 2 * r < wanted and r * row_bytes < SMALL_BLOCK_BYTES:
        # no divisor near it: as many blocks as ``wanted`` rows make, of equal rows but the last,
        # partial one (``PARTIAL_BLOCK_CONSUMERS``), so that the threads' shares stay even
        r = -(-rows // (rows // wanted))
    elif r * row_bytes < MIN_BLOCK_BYTES:
        enough = [d for d in range(r + 1, min(rows, budget) + 1)
                  if rows % d == 0 and d * row_bytes >= MIN_BLOCK_BYTES and outer * (rows // d) >= 2]
        fewest = -(-MIN_BLOCK_BYTES // row_bytes)
        if enough:
            r = enough[0]
        elif partial and fewest <= min(budget, rows // 2):
            r = fewest  # no divisor reaches them: the last block is partial
    lanes = unit.lanes(tile_bits(group.ops[-1]) if group.ops else 32)
    row = group.ranges[-1] if len(group.ranges) > k else 0
    if 1 < row <= SHORT_ROW_VECTORS * lanes and row % lanes == 0 and r > 1:
        r = largest_divisor_at_most(rows, ROWS_PER_SHORT_TILE)  # one tile per block (see the docstring)
    return [1] * (k - 1) + [r] + [0] * (len(group.ranges) - k)


def _chains_rows(group: Group) -> bool:
    """Whether an op of ``group`` reduces over an outer loop of the block (a mean over a middle
    axis), whose tiles take several rows as independent chains (``_chained_rows``).  Such groups
    keep dividing blocks: a partial block's rows go one at a time (a tile must divide every
    block), and with partial blocks they ran slower as often as faster (``docs/backend-cpu.md``,
    Measurements: partial blocks of full size)."""
    for op in group.ops:
        loops = generic_loops(op) if op.name == "linalg.generic" else None
        if loops is not None and loops[1][-1] == "parallel" and "reduction" in loops[1]:
            return True
    return False


_BUBBLE = """\
    %{v} = transform.structured.match ops{{["func.func"]}} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %{v} {{
      transform.apply_patterns.tensor.bubble_up_extract_slice
    }} : !transform.any_op
"""


_FOLD_EMPTY = """\
    %{v} = transform.structured.match ops{{["func.func"]}} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %{v} {{
      transform.apply_patterns.tensor.fold_tensor_empty
    }} : !transform.any_op
"""


_MASKED = """\
    %{v} = transform.structured.match ops{{["func.func"]}} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %{v} {{
      transform.apply_patterns.vector.lower_masked_transfers
    }} : !transform.any_op
"""


_UNIT_DIMS = """\
    %{v} = transform.structured.match ops{{["func.func"]}} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %{v} {{
      transform.apply_patterns.vector.drop_unit_dims_with_shape_cast
      transform.apply_patterns.vector.drop_inner_most_unit_dims_from_xfer_ops
    }} : !transform.any_op
"""
"""The vectors of ``unit_rows``' tiles (``vector<16x1xf32>``) as vectors of their rows (``vector<16xf32>``):
the LLVM lowering unrolls a vector of two dimensions into one vector per row of it, here one lane each."""


_HORIZONTAL = """\
    transform.apply_patterns to {forall} {{
      transform.apply_patterns.vector.lower_multi_reduction lowering_strategy = "innerreduction"
    }} : !transform.any_op
    %{v} = transform.structured.match ops{{["vector.reduction"]}} in {forall} : (!transform.any_op) -> !transform.any_op
    %{v}_p = transform.param.constant #arith.fastmath<reassoc> -> !transform.any_param
    transform.annotate %{v} "fastmath" = %{v}_p : !transform.any_op, !transform.any_param
"""


def horizontal_reductions(var: str, forall: str) -> str:
    """The vector reductions inside ``forall`` (a handle) lowered one row at a time, each a
    horizontal reduction of the row's vector (the target's "innerparallel" lowering, right for
    the other reductions, transposes the rows and combines them one after another), reassociated:
    a sum may add in any order, so a tree of shuffles and vector adds, not one dependent scalar add
    per element (``range_max`` makes a max's tree of ``vrange``s on AVX-512)."""
    return _HORIZONTAL.format(v=var, forall=forall)


def _cse(var: str) -> str:
    return (f"    %{var} = transform.structured.match ops{{[\"func.func\"]}} in %root : (!transform.any_op) -> "
            f"!transform.any_op\n    transform.apply_cse to %{var} : !transform.any_op\n")


def group_section(group: Group, tags: Sequence[int | None], unit: VectorUnit,
                  inner_tiles: Callable[[Any, dict[int, int]], list[int]]) -> str:
    """The script of one group (``tags``: each op's ``mind.sched`` tag, None for a view): tile the
    consumer's rows into forall blocks (``block_rows``), fuse the producers into the forall from the
    last to the first (a view: its slices are moved above it, ``bubble_up_extract_slice``; identical
    slices of one producer are merged first, so that it is computed once per block), then tile each
    fused op inside the block (``inner_tiles(op, block ranges)``: sequential tile sizes) and
    vectorize it."""
    g = tags[-1]
    rows = block_rows(group, unit)
    s = match(f"%gc{g}", "linalg.generic", tags[-1])  # type: ignore[arg-type]
    s += tile_forall(f"gt{g}", f"%gc{g}", rows)
    forall = f"%gt{g}_f"
    fused: list[tuple[Any, str]] = [(group.ops[-1], f"%gt{g}")]
    for i in range(len(group.ops) - 2, -1, -1):
        op, tag = group.ops[i], tags[i]
        if tag is None:
            s += _BUBBLE.format(v=f"gb{g}_{i}")
            continue
        s += _cse(f"gs{g}_{i}")
        s += match(f"%gp{g}_{i}", op.name, tag)
        s += (f"    %gf{g}_{i}, %gn{g}_{i} = transform.structured.fuse_into_containing_op %gp{g}_{i} into {forall}"
              f" : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)\n")
        forall = f"%gn{g}_{i}"
        fused.append((op, f"%gf{g}_{i}"))
    # a block's intermediate rows in a tensor of the block's size, not a slice of a whole-tensor one
    s += _FOLD_EMPTY.format(v=f"ge{g}")
    block = {d: r for d, r in enumerate(rows[:group.prefix])}
    partial = {d for d, r in block.items() if r and group.ranges[d] % r}
    tiled, combines, rest = "", "", ""
    for op, handle in fused:
        # a producer fused for two uses of one slice is listed twice: one tiling of each op
        tiled += f"    {handle}d = transform.merge_handles deduplicate {handle} : !transform.any_op\n"
        t, c, r = _inner_section(handle[1:], f"{handle}d", op, block, unit, inner_tiles,
                                 consumer_kind(group) != "rows", partial)
        tiled, combines, rest = tiled + t, combines + c, rest + r
    s += tiled
    if "transform.loop.peel" in tiled:
        # the whole tiles' sizes, constants after peeling, folded into static shapes; applied to the
        # forall, which outlives the patterns (a peeled loop of one tile is inlined by them, and a
        # handle to it would then name an erased op; the ops' handles follow them)
        s += canonicalize(forall)
    # the per-row combinations of split reductions first, alone in the block, as horizontal
    # reductions (their row's partial results, reassociated); then the rest
    s += combines
    if combines:
        s += horizontal_reductions(f"gh{g}", forall)
    # masked transfers (rows without a whole-vector divisor) as transfers with a mask operand,
    # which the target's vector lowering turns into masked loads and stores
    s += rest + _MASKED.format(v=f"gm{g}")
    if any(unit_rows(op, block, partial) for op, _ in fused):
        s += _UNIT_DIMS.format(v=f"gu{g}")
    return s


def row_tile(n: int, lanes: int) -> tuple[int, bool]:
    """The tile of a contiguous axis of ``n`` elements: the largest multiple of ``lanes`` up to 4
    vectors that divides n, when it is at least 2 vectors (or the whole row); else 4 vectors (2, 1
    for shorter rows) with a masked last tile (``masked``: True).  A row of 1000 or 1001 f32 then
    runs whole vectors, not tiles of 50 or 13 elements that LLVM splits into odd vectors or scalars."""
    if n <= lanes:
        return n, False
    best = largest_divisor_at_most(n, 4 * lanes, lanes) if n % lanes == 0 else 0
    if best and (best >= 2 * lanes or best == n):
        return best, False
    t = _masked_vectors(n, lanes) * lanes
    return t, n % t != 0


def carried_row_tile(n: int, lanes: int) -> tuple[int, bool]:
    """The tile along the row of a reduction over an outer loop of the block (a mean over a middle
    axis), whose accumulators are carried along that loop: ``row_tile``'s, but a whole number of
    vectors that is not a power of two (3 of a row of 48 f32) becomes the most vectors, 4, 2 or 1,
    that divide the row, and a row of 1 to 4 vectors that no vector divides is one masked tile of
    the fewest vectors that cover it (``masked_cover``), not one-vector tiles and a masked last one.
    Why: LLVM keeps a loop-carried value of 1, 2 or 4 vectors in registers, and 3 went through the
    stack every step: a mean over the middle axis of 64x50x48 f32 ran 23.4-33.6 µs against 8.3-10.0
    (torch eager 10.7-16.1), of 64x100x40 28.1-32.7 against 9.3-13.2 (``docs/backend-cpu.md``,
    Measurements)."""
    if lanes < n < 4 * lanes and n % lanes:
        return masked_cover(n, lanes), True
    t, masked = row_tile(n, lanes)
    vectors = t // lanes
    if not masked and t % lanes == 0 and vectors & (vectors - 1):
        t = max(v * lanes for v in (4, 2, 1) if n % (v * lanes) == 0)
    return t, masked


def masked_cover(n: int, lanes: int) -> int:
    """The lanes of the fewest vectors, a power of two of them up to 4, that cover ``n``: one masked
    tile of a loop-carried row (1, 2 or 4 vectors stay in registers)."""
    return lanes * min(4, 1 << (-(-n // lanes) - 1).bit_length())


def elementwise_row_tile(n: int, lanes: int) -> tuple[int, bool]:
    """``row_tile`` for an op that carries nothing from tile to tile (all its loops parallel), where
    a row shorter than 2 vectors is one tile.  Why: a masked vector and its peeled masked tail
    compile the body twice for at most 2 vectors of work (a norm's per-row ``sqrt``, f64 inside, over
    blocks of 10 rows: 10 ms more compile than one vector of 10, and no faster).  A reduction keeps
    ``row_tile``'s whole vectors: its odd-width accumulators went through the stack every step (a
    mean over the middle axis of 2000x59x20 f32: 4x slower)."""
    return (n, False) if n < 2 * lanes else row_tile(n, lanes)


def per_row_tile(n: int, lanes: int) -> tuple[int, bool]:
    """The tile of an op over a block's rows alone (a norm's per-row ``sqrt``, a softmax's reciprocal
    of the sum): the whole when shorter than 2 vectors, else one vector (masked at the end when it
    does not divide n).  Why: its work is the block's rows, a few hundredths of the group's, so more
    vectors per tile only multiply its body in the machine code (an f32 norm's ``sqrt`` is an f64
    ``exp`` and ``log``: a layer norm of 4096x768 compiled 1.7 KB less code, 4 ms sooner, and ran as
    fast)."""
    if n < 2 * lanes:
        return n, False
    return lanes, n % lanes != 0


def unit_rows(op: Any, block: dict[int, int], partial: frozenset[int] | set[int] = frozenset()) -> bool:
    """Whether ``op`` of a block is elementwise over per-row values kept as ``[..., R, 1]`` (a
    logsumexp's ``m + log(s)``, the ``log`` of a ``keepdims`` row sum): its innermost loop has one
    iteration and the loop above it runs over the block's rows (whole blocks: a partial one keeps
    one row per tile).  Such an op takes ``per_row_tile``'s vector of rows per tile
    (``_UNIT_DIMS``), where one row per tile computed each row's ``log`` alone, in scalar code: the
    ``log`` of the row sums of 51545x64 f32 took as long as the sums (``docs/backend-cpu.md``,
    Measurements)."""
    loops = generic_loops(op) if op.name == "linalg.generic" else None
    if loops is None or len(loops[0]) < 2 or any(k != "parallel" for k in loops[1]):
        return False
    rows = len(loops[0]) - 2
    return loops[0][-1] == 1 and rows in block and rows not in partial


def _masked_vectors(n: int, lanes: int) -> int:
    """Vectors per tile (4, 2 or 1) of a row of ``n`` that 4 whole vectors do not divide: the most
    whose tiles cover the row with at most an eighth more lanes than the fewest do (a tile that
    divides the row covers it exactly).  Why: a short row pays for
    its whole last tile; 4 vectors made a row of 83 f32 two tiles of 64 lanes (128 for 83, where 2
    vectors cover it in 96), and the 4x199x83 softmax ran at 0.54x torch eager; a long row keeps 4
    (1000 f32: 64 vectors against 63), the most independent accumulators."""
    options = [v for v in (4, 2, 1) if n >= v * lanes] or [1]
    cover = {v: -(-n // (v * lanes)) * v for v in options}
    least = min(cover.values())
    return next(v for v in options if cover[v] * 8 <= least * 9)


_NEGATIVE_ZERO = """\
    %{v} = transform.get_producer_of_operand {fill}[0] : (!transform.any_op) -> !transform.any_op
    %{v}_p = transform.param.constant -0.000000e+00 : {elem} -> !transform.any_param
    transform.annotate %{v} "value" = %{v}_p : !transform.any_op, !transform.any_param
"""
"""The vector of partial sums of a group whose consumer reads no rows (a plain row sum, a mean)
starts at -0, the identity of a float addition (``-0 + x`` is ``x`` for every x), as the per-op
plans' sums do (``tests/backend_cpu/test_sum_accuracy.py``): ``tile_reduction_using_for`` fills it
with +0, and a row of -0 terms summed to +0.  The spec leaves the sign of a zero sum open (the
reference gives +0), and the sums inside a softmax or a norm keep +0: with -0, canonicalization
folds ``-0 + x`` of a row of one whole tile into the row's own slice, and the peeled last tile then
adds into a copy of it, one per row (``docs/backend-cpu.md``, Measurements)."""


def reduction_tile(n: int, lanes: int) -> tuple[int, bool]:
    """The tile of a reduction along a row of ``n``: 4, 2 or 1 whole vectors of partial results
    (``_masked_vectors``: 4 when they divide n; 2 vectors for a row of 6, with no mask), with a
    peeled, masked last tile when the tile does not divide n; ``row_tile`` for rows shorter than 4
    vectors; never one whole tile and a masked one (halved until there are two whole tiles or one
    vector).  Why: LLVM keeps a loop-carried vector of 1, 2 or 4
    registers in registers; 3 (a row of 432 f32: tiles of 48) went through the stack every step.
    And a loop of one whole tile is folded away, and with it a max's start (``max(-inf, x)`` is
    x): its partial maxima became the row's own slice, which the peeled tile then updated, so
    bufferization copied the slice into a fresh buffer for every row (a softmax over rows of 49-63
    or 113-127 f32 ran 1.7-2x slower than over 64 or 112; ``docs/backend-cpu.md``, Measurements)."""
    if n < 4 * lanes:
        t, masked = row_tile(n, lanes)
    else:
        t = _masked_vectors(n, lanes) * lanes
        masked = n % t != 0
    while masked and lanes < t < n < 2 * t:
        t //= 2
        masked = n % t != 0
    return t, masked


def _inner_section(name: str, handle: str, op: Any, block: dict[int, int], unit: VectorUnit,
                   inner_tiles: Callable[[Any, dict[int, int]], list[int]],
                   sums_start_negative: bool = False, partial: frozenset[int] | set[int] = frozenset()
                   ) -> tuple[str, str, str]:
    """Tiling and vectorizing one op of a block: (tiling, vectorizing the combination of a split
    reduction, vectorizing the rest).  An op whose last loop is the row (contiguous in every operand
    it reads whole) gets rows of one and ``row_tile`` along it: an elementwise op as whole vectors
    (masked at the row's end), a reduction along it as ``tile_reduction_using_for`` (vector-wide
    partial accumulators combined once per row, not a horizontal reduction per tile); short rows
    (``SHORT_ROW_VECTORS``) ``ROWS_PER_SHORT_TILE`` at a time.  Other ops (fills, the blocked sum's
    first level) get ``inner_tiles``.  ``partial``: the block's loops whose last block is partial
    (``PARTIAL_BLOCK_CONSUMERS``): their ops take one row at a time there, and their tiles are
    vectorized at sizes given (the block's extent is not in the types)."""
    from mlir import ir
    loops = generic_loops(op) if op.name == "linalg.generic" else None
    if loops is not None:
        ranges, kinds = loops
        # a loop of the rows runs over the block's rows only (an op over the rows alone, a backward
        # pass's per-row statistic: a tile of the whole range would not divide the block's)
        ranges = [block.get(d, n) for d, n in enumerate(ranges)]
        rows = [1] * (len(ranges) - 1)
        if rows and len(ranges) - 2 in block and len(ranges) - 2 not in partial and \
                1 < ranges[-1] <= SHORT_ROW_VECTORS * unit.lanes(tile_bits(op)):
            rows[-1] = largest_divisor_at_most(ranges[-2], ROWS_PER_SHORT_TILE)
        if unit_rows(op, block, partial):  # per-row values kept as [R, 1]: a vector of rows
            t, masked = per_row_tile(ranges[-2], unit.lanes(tile_bits(op)))
            s = tile_for(f"{name}i", handle, rows[:-1] + [t, 0])
            if not masked:
                return s, "", vectorize(f"%{name}i")
            peel, vec = _peeled(f"{name}i", f"%{name}i_l" + (f"#{len(rows) - 1}" if len(rows) > 1 else ""),
                                rows[:-1] + [t, 1])
            return s + peel, "", vec
        if all(k == "parallel" for k in kinds):
            per_row = all(d in block for d in range(len(ranges)))  # over the block's rows alone
            t, masked = (per_row_tile if per_row else elementwise_row_tile)(ranges[-1], unit.lanes(tile_bits(op)))
            s = tile_for(f"{name}i", handle, rows + [t])
            if not masked:
                return s, "", _vectorize(f"%{name}i", rows + [t] if partial else None)
            peel, vec = _peeled(f"{name}i", f"%{name}i_l" + (f"#{len(rows)}" if rows else ""), rows + [t],
                                bool(partial))
            return s + peel, "", vec
        # a reduction along the row; unit reduction loops before it (a softmax over [R, 1, C], whose
        # reshapes fusion folded into its reductions) are rows of one
        if kinds[-1] != "parallel" and all(k == "parallel" or n == 1 for k, n in zip(kinds[:-1], ranges)):
            t, masked = reduction_tile(ranges[-1], unit.lanes(tile_bits(op)))
            s = tile_for(f"{name}r", handle, rows + [0])
            s += (f"    %{name}f, %{name}s, %{name}c, %{name}l = transform.structured.tile_reduction_using_for "
                  f"%{name}r by tile_sizes = {sizes([0] * len(rows) + [t])} : (!transform.any_op) -> "
                  f"(!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)\n")
            if sums_start_negative and _adds_to_out(op) and len(op.results) == 1:
                s += _NEGATIVE_ZERO.format(v=f"{name}z", fill=f"%{name}f",
                                           elem=ir.RankedTensorType(op.results[0].type).element_type)
            if not masked:
                return s, vectorize(f"%{name}c"), vectorize(f"%{name}f") + vectorize(f"%{name}s")
            peel, vec = _peeled(f"{name}s", f"%{name}l", rows + [t])
            return s + peel, vectorize(f"%{name}c"), vectorize(f"%{name}f") + vec
    tiles = inner_tiles(op, block)
    for d in partial:  # a partial block's rows: one at a time (static tiles in a block of any size)
        if d < len(tiles):
            tiles[d] = 1
    masked = False
    if loops is not None:
        lanes = unit.lanes(tile_bits(op))
        if kinds[-1] == "parallel":
            # a reduction over an outer loop of the block (a mean over a middle axis): along the row,
            # whole vectors with a peeled last tile, as the block's elementwise ops have; the per-op
            # plan's column block (the whole row of 1000, a forall block, not a tile) became one
            # vector of 1000 lanes here, 8x slower than torch eager
            tiles[-1], masked = carried_row_tile(ranges[-1], lanes)
        tiles = _chained_rows(tiles, ranges, kinds, block, lanes, unit.registers // 2)
    if masked and tiles[-1] >= ranges[-1]:
        # one masked tile covers the row (``masked_cover``): the row stays untiled and is vectorized
        # with a mask, not peeled (peeled, a loop of one partial tile leaves an empty loop of whole
        # tiles, whose generic canonicalization then erases under a handle that the script
        # vectorizes next)
        cover, tiles[-1] = tiles[-1], 0
        vector = [t or n for t, n in zip(tiles, ranges)][:-1] + [cover]
        s = tile_for(f"{name}i", handle, tiles) if any(tiles) else ""
        return s, "", _vectorize(f"%{name}i" if s else handle, vector)
    if not any(tiles):
        return "", "", vectorize(handle)
    s = tile_for(f"{name}i", handle, tiles)
    if not masked:
        return s, "", _vectorize(f"%{name}i", [t or n for t, n in zip(tiles, ranges)] if partial and loops else None)
    loops_made = sum(1 for t in tiles if t)
    peel, vec = _peeled(f"{name}i", f"%{name}i_l" + (f"#{loops_made - 1}" if loops_made > 1 else ""),
                        [t or n for t, n in zip(tiles, ranges)])
    return s + peel, "", vec


CHAINS = 8
"""Independent accumulators a reduction needs to keep the vector adders busy: an add's latency (4
cycles) times the adds issued per cycle (2)."""


def _chained_rows(tiles: list[int], ranges: Sequence[int], kinds: Sequence[str], block: dict[int, int],
                  lanes: int, most_vectors: int = 16) -> list[int]:
    """The tiles of a reduction whose innermost loop is parallel (the blocked sum's first level: a
    row's q runs of n/q terms added into n/q partial sums) with several rows per tile: one row's
    partial sums are a vector or two, one dependent chain of adds along the reduction loop, so the
    rows (independent chains, the order of each row's sum unchanged) make up ``CHAINS``; the
    reduction tile shrinks to keep a tile within 8 vectors.

    The rows are the parallel loop right outside the reduction when its tile is one row (a level's
    rows beside its runs: 7 of 301 = 7 x 43), else the block's.  Their tile is the most rows up to
    ``CHAINS`` chains (a divisor); when that is fewer than half of them, the fewest rows that make
    up ``CHAINS`` within ``most_vectors`` accumulators (half the registers), where a divisor does:
    7 rows of two vectors, 14 chains, where the largest divisor of 7 up to 4 was one row, two chains
    (a mean over the middle axis of 10x301x82 f32 1.17x faster, of 12x301x160 1.14x;
    ``docs/backend-cpu.md``, Measurements)."""
    red = [d for d, k in enumerate(kinds) if k != "parallel"]
    if len(red) != 1 or kinds[-1] != "parallel":
        return tiles
    beside = [d for d in range(red[0]) if kinds[d] == "parallel" and ranges[d] > 1]
    if beside and tiles[beside[-1]] == 1:
        rows = beside[-1]
    else:
        rows = max(block, default=None)
        if rows is None or rows >= red[0] or tiles[rows] != 1:
            return tiles
    inner = product(t or n for t, n in zip(tiles[red[0] + 1:], ranges[red[0] + 1:]))
    per_row = -(-inner // lanes)
    wanted = max(1, -(-CHAINS // per_row))
    out = list(tiles)
    out[rows] = largest_divisor_at_most(ranges[rows], wanted)
    if 2 * out[rows] < wanted:  # fewer than half the chains: more rows, where they fit
        fitting = [d for d in range(wanted, most_vectors // per_row + 1) if ranges[rows] % d == 0]
        out[rows] = fitting[0] if fitting else out[rows]
    out[red[0]] = largest_divisor_at_most(ranges[red[0]], max(1, 8 * lanes // (out[rows] * inner)))
    return out


def _vectorize(handle: str, vector_sizes: Sequence[int] | None) -> str:
    """``vectorize``, with ``vector_sizes`` when given (a tile inside a partial block, whose sizes
    the vectorizer cannot read from its types)."""
    if vector_sizes is None:
        return vectorize(handle)
    return f"    transform.structured.vectorize {handle} vector_sizes {sizes(vector_sizes)} : !transform.any_op\n"


def _peeled(name: str, loop: str, vector_sizes: Sequence[int], sized: bool = False) -> tuple[str, str]:
    """(peeling, vectorizing) a row loop whose last tile is partial: the loop split into whole tiles,
    vectorized without masks, and the one partial tile, vectorized with a mask.  Why: a masked tile in
    every iteration keeps a reduction's partial sums in memory (a masked load and store of the
    accumulator per tile, each waiting for the last) and computes a mask per tile."""
    vec = _vectorize(f"%{name}_mg", vector_sizes if sized else None)
    vec += _vectorize(f"%{name}_tg", vector_sizes)
    return peel(name, loop), vec


GROUP_BODY_OPS = 8
"""The operations per iteration that one unit of ``group_work`` stands for: more than an op's
(``payload.BODY_OPS``), since a group's schedule (blocks, two or more sweeps over each row, their
masked tails and statistics) compiles to several times the code of one op's; a small softmax's
group costs more compile than its calls save (``docs/backend-cpu.md``, Schedules)."""


def group_work(group: Group) -> int:
    """The work a group's cost is compared with ``min_work`` by: the consumer's iterations, or, when
    larger, the operations of every generic of the group (iterations times body operations) in units
    of ``GROUP_BODY_OPS``.  Why: left unscheduled, a group is scalar loops that recompute whatever fusion
    put in a body for every element (a per-row ``log`` or ``sqrt`` of an f64 RMS norm of 64x77
    elements), so its cost is its operations, not its elements."""
    ops = sum(generic_operations(op) or 0 for op in group.ops if op.name == "linalg.generic")
    return max(product(group.ranges), ops // GROUP_BODY_OPS)


ROW_VECTORS_TO_GROUP = {"rows": 2, "per_row": 4, "reduction": 12}
"""The fewest vectors a group's reduction rows must hold, by what its consumer reads (``consumer_kind``):
the rows (a softmax, a norm: the group also keeps the intermediate rows in cache), the reductions'
per-row results only (a logsumexp's ``m + log(s)``: the statistics read the rows once instead of once
each), or nothing else (the consumer is the reduction: only the row sweep to gain).  Shorter rows stay
with the per-op plans (``short_rows``)."""


def consumer_kind(group: Group) -> str:
    """``"reduction"`` when the consumer of ``group`` is a reduction along the row, ``"per_row"`` when
    it reads only the reductions' per-row results (its loops after the rows are all 1), else
    ``"rows"``."""
    loops = generic_loops(group.ops[-1])
    if loops is None or loops[1][-1] != "parallel":
        return "reduction"
    return "per_row" if all(n == 1 for n in group.ranges[group.prefix:]) else "rows"


def short_rows(group: Group, unit: VectorUnit) -> bool:
    """Whether the reductions of ``group`` run along rows of fewer than ``ROW_VECTORS_TO_GROUP`` vectors
    (a reduction's row: its loops from the first reduction loop on, so a blocked sum's first level
    counts its whole row, not the few partial sums its last level adds).

    Why: a block's ops are tiled one row at a time, so each row ends in a horizontal reduction (and a
    masked tail) whose cost a row of a few vectors does not amortize; the per-op plans take several
    rows per tile and combine them across rows (``lower_multi_reduction`` "innerparallel")
    (``docs/backend-cpu.md``, Measurements)."""
    vectors = ROW_VECTORS_TO_GROUP[consumer_kind(group)]
    for op in group.ops:
        loops = generic_loops(op) if op.name == "linalg.generic" else None
        if loops is None or all(k == "parallel" for k in loops[1]):
            continue
        first = next(d for d, k in enumerate(loops[1]) if k != "parallel")
        lanes = unit.lanes(tile_bits(op))
        if product(loops[0][first:]) >= vectors * lanes:
            return False
    return True


def worth_grouping(group: Group, unit: VectorUnit, min_work: int) -> bool:
    """Whether ``group`` is scheduled as a group: enough work (``group_work``), rows long enough
    (``short_rows``) and, for a reduction that is its own consumer, more than one row.

    Why the last: one row has no blocks to spread and nothing a per-op plan does not keep in cache,
    and its result is read as a scalar (a ``tensor.collapse_shape`` to rank 0) by the ops after
    it, whose vectorized read MLIR then folds through the forall's result into an invalid
    ``vector.transfer_read`` (two indices into a 1-D tensor; convert-vector-to-llvm asserted)."""
    if group_work(group) < min_work or short_rows(group, unit):
        return False
    return consumer_kind(group) != "reduction" or product(group.ranges[:group.prefix]) > 1


GroupPlan = tuple[list[Any], Callable[[Sequence[int | None]], str]]


def plan_groups(unit: VectorUnit, plannable: Callable[[Any], bool],
                inner_tiles: Callable[[Any, dict[int, int]], list[int]],
                candidates: Sequence[Any], min_work: int) -> list[GroupPlan]:
    """The groups of ``candidates`` whose consumer does at least ``min_work`` iterations, each with
    the builder of its section from its ops' tags (``linalg.schedule.schedule_module``)."""
    plans: list[GroupPlan] = []
    for group in find_groups(candidates, plannable):
        if not worth_grouping(group, unit, min_work):
            continue
        plans.append((group.ops, lambda tags, g=group: group_section(g, tags, unit, inner_tiles)))
    return plans


# ------------------------------------------------------------------- blocked sums inside a group

def unblock_sums(module: Any, unit: VectorUnit, plannable: Callable[[Any], bool],
                 skip: Callable[[Any], bool] | None, min_work: int) -> int:
    """Rewrite each blocked row sum (``lowerings.reduce_sum``: a view ``[rows, q, p]`` of the row, a
    first level adding its q runs into p partial sums, a last level adding those) that a group of
    at least ``min_work`` iterations reads into one reduction along the row, when the group's
    vector-wide partial sums (``row_tile``) keep every partial sum within ``SUM_RUN`` terms, the
    blocking's own bound.  Returns how many were rewritten.

    Why: the blocking's p partial sums are a handful (a row of 512 is 128 runs of 4), so its first
    level is vectors of 4 lanes gathered across rows with shuffles, where one reduction along the row
    keeps vector-wide partial sums (64 for f32 on AVX-512) and combines them once per row as a tree;
    each partial sum then adds at most as many terms as a run of the blocking, and the spec's bound
    for a sum holds for every order of the additions."""
    done = 0
    # one at a time, the groups found again after each: a rewrite erases ops (a sum read by
    # another sum of the group) that a chain found before it would still name
    while (chain := _next_chain(module, unit, plannable, skip, min_work)) is not None:
        _unblock(*chain)
        done += 1
    return done


def _next_chain(module: Any, unit: VectorUnit, plannable: Callable[[Any], bool],
                skip: Callable[[Any], bool] | None, min_work: int) -> tuple[Any, Any, list[Any]] | None:
    """The first blocked row sum of a group that ``unblock_sums`` rewrites, or None."""
    from mlir import ir
    ops: list[Any] = []

    def visit(op: Any) -> ir.WalkResult:
        if op.name.startswith("linalg.") and op.name not in ("linalg.yield", "linalg.index") and \
                not (skip and skip(op)):
            ops.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    try:  # as the planners (``schedule_module``): an op of a form not foreseen is left as it is
        for group in find_groups(ops, plannable):
            if not worth_grouping(group, unit, min_work):
                continue
            members = {hash(op.operation) for op in group.ops}
            for last in group.ops:
                chain = _blocked_chain(last, members, unit)
                if chain is not None:
                    return chain
    except (KeyError, ValueError, TypeError, AttributeError):
        return None
    return None


def _adds_to_out(op: Any) -> bool:
    """Whether ``op``'s body yields ``out + x`` (``x`` computed without ``out``): an accumulation whose
    terms may be regrouped."""
    block = op.regions[0].blocks[0]
    body = body_ops(op)
    out = block.arguments[len(block.arguments) - 1]
    yielded = body[-1].operands[0] if len(body[-1].operands) == 1 else None
    add = _owner(yielded) if yielded is not None else None
    if add is None or add.name != "arith.addf" or len(list(out.uses)) != 1:
        return False
    return any(v == out for v in add.operands)


def _zero_fill(v: Any) -> bool:
    """Whether ``v`` is a fill of a float zero (the blocked sum's partial sums start at -0)."""
    from mlir import ir
    fill = _owner(v)
    if fill is None or fill.name != "linalg.fill":
        return False
    scalar = _owner(fill.operands[0])
    if scalar is None or scalar.name != "arith.constant":
        return False
    value = scalar.attributes["value"]
    return isinstance(value, ir.FloatAttr) and ir.FloatAttr(value).value == 0.0


def _blocked_chain(last: Any, members: set[int], unit: VectorUnit) -> tuple[Any, Any, list[Any]] | None:
    """(the first level, the last level, the first level's input maps over the row) of a blocked
    sum ending in ``last``, when it can be one reduction along the row (``unblock_sums``), else
    None."""
    from mlir import ir
    if last.name != "linalg.generic" or len(last.results) != 1:
        return None
    loops = generic_loops(last)
    if loops is None or len(last.operands) != 2 or not _adds_to_out(last) or not _zero_fill(last.operands[1]):
        return None
    ranges, kinds = loops
    k = len(ranges) - 1
    if kinds != ["parallel"] * k + ["reduction"]:
        return None
    first = _owner(last.operands[0])
    if first is None or first.name != "linalg.generic" or hash(first.operation) not in members or \
            len(first.results) != 1 or len(list(first.results[0].uses)) != 1:
        return None
    loops1 = generic_loops(first)
    if loops1 is None or loops1[1] != ["parallel"] * k + ["reduction", "parallel"] or loops1[0][:k] != ranges[:k] or \
            not _adds_to_out(first) or not _zero_fill(first.operands[-1]):
        return None
    q, p = loops1[0][k], loops1[0][k + 1]
    n = q * p
    elem = element_bits(first.results[0].type)
    t, _ = reduction_tile(n, unit.lanes(elem))
    if -(-n // t) > SUM_RUN:
        return None
    maps = [ir.AffineMapAttr(a).value for a in first.attributes["indexing_maps"]]
    row_dims = list(range(k))
    new_maps = []
    for v, amap in zip(first.operands[:-1], maps[:-1]):
        dims = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in amap.results]
        view = _owner(v)
        row_map = _row_view_map(view, ranges[:k], n) if dims == list(range(k + 2)) else None
        if row_map is not None:
            new_maps.append((view.operands[0], row_map))
        elif all(d is not None and d in row_dims for d in dims):
            new_maps.append((v, ir.AffineMap.get(k + 1, 0, [ir.AffineDimExpr.get(d) for d in dims])))
        else:
            return None
    return first, last, new_maps


def _row_view_map(view: Any | None, rows: Sequence[int], n: int) -> Any | None:
    """The map from the loops ``rows + [n]`` of one reduction along the row to the source of ``view``,
    when ``view`` is the blocked sum's ``tensor.expand_shape`` of that source into ``rows + [q, p]``
    (the row's n elements split into q runs of p; a leading dim may be split into unit dims: a
    keepdims statistic's ``[R, 1]``), else None."""
    from mlir import ir
    if view is None or view.name != "tensor.expand_shape":
        return None
    k = len(rows)
    groups = [[ir.IntegerAttr(a).value for a in ir.ArrayAttr(g)] for g in view.attributes["reassociation"]]
    src = static_shape(view.operands[0].type)
    if src is None or not groups or groups[-1] != [k, k + 1] or src[-1] != n or \
            any(g[-1] >= k for g in groups[:-1]):
        return None
    exprs = []
    for g in groups[:-1]:
        wide = [d for d in g if rows[d] != 1]
        if len(wide) > 1:
            return None
        exprs.append(ir.AffineDimExpr.get(wide[0] if wide else g[0]))
    return ir.AffineMap.get(k + 1, 0, exprs + [ir.AffineDimExpr.get(k)])


def _unblock(first: Any, last: Any, inputs: list[tuple[Any, Any]]) -> None:
    """Replace ``last`` (and ``first``, and its view and init when nothing else reads them) by one
    reduction along the row with ``first``'s body."""
    from mlir import ir
    out_map = ir.AffineMapAttr(list(last.attributes["indexing_maps"])[-1]).value
    maps = [m for _, m in inputs] + [out_map]
    with last.location:
        new = ir.Operation.create(
            "linalg.generic", results=[last.results[0].type],
            operands=[v for v, _ in inputs] + [last.operands[1]], regions=1, ip=ir.InsertionPoint(last),
            attributes={"indexing_maps": ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                        "iterator_types": last.attributes["iterator_types"],
                        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(inputs), 1])})
        old = first.regions[0].blocks[0]
        block = new.regions[0].blocks.append(*[a.type for a in old.arguments])
        mapping = list(zip(old.arguments, block.arguments))

        def mapped(v: Any) -> Any:
            return next((n for o, n in mapping if o == v), v)
        for op in list(old.operations):
            clone = op.clone(ip=ir.InsertionPoint(block))
            for i, v in enumerate(clone.operands):
                clone.operands[i] = mapped(v)
            mapping.extend(zip(op.results, clone.results))
    last.results[0].replace_all_uses_with(new.results[0])
    view_inits = [_owner(v) for v in first.operands]
    last.erase()
    first.erase()
    for op in view_inits:
        if op is not None and op.name in ("tensor.expand_shape", "linalg.fill") and \
                not any(True for r in op.results for _ in r.uses):
            op.erase()
