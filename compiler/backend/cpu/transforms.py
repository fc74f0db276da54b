"""Transform-dialect schedules: tile and vectorize linalg ops of a payload module.

Why generated and not pasted: tile sizes must divide the static shapes (partial tiles have dynamic
shapes, which ``vectorize_children_and_apply_patterns`` leaves scalar) and must shrink for small
shapes, so each script is built from parameters chosen per op.  Every scheduled op is tagged with a
unique ``mind.sched`` attribute and matched by it, so ops of different ranks get their own tiles.
Scheduling is per op: only the handles a section tiled are vectorized, so an op without a plan stays a
linalg op that the pipeline lowers to scalar loops, and never becomes a huge vector (toolchain.md,
pitfall 2).

Two miscompiles were behind the old all-or-nothing gate (regression tests in
tests/backend_cpu/test_schedule_regressions.py):

* shared inits: ``cse`` merges identical ``tensor.empty`` + ``linalg.fill`` inits, and
  ``eliminate-empty-tensors`` then lets one op compute in the out-parameter of another result, which
  overwrites it (``untie_shared_inits``);
* loop-invariant reductions: the linalg vectorizer folds ``out + c`` over a reduction loop into a
  single ``out + c`` when ``c`` does not depend on the reduced elements (``_vectorizable_reduction``).

MLIR is imported inside functions only.
"""

from __future__ import annotations

from typing import Any, Sequence

from mind.spec.record import FrozenRecord

_set = object.__setattr__  # FrozenRecord fields are set once, in __init__

__all__ = [
    "MatmulTiles", "ElementwiseTiles", "choose_matmul_tiles", "choose_elementwise_tiles",
    "matmul_section", "elementwise_section", "fill_section", "wrap_script", "schedule_module",
    "apply_script", "largest_divisor_at_most", "untie_shared_inits", "MIN_SCHEDULE_WORK", "op_work", "DEFAULT_MAPS",
    "largest_unscheduled_work",
]

SCHED_ATTR = "mind.sched"
INIT_ATTR = "mind.init"


def largest_divisor_at_most(n: int, bound: int, multiple_of: int = 1) -> int:
    """Largest d with d | n, d <= bound and multiple_of | d (falls back to ``multiple_of``)."""
    best = multiple_of
    for d in range(multiple_of, min(n, bound) + 1, multiple_of):
        if n % d == 0:
            best = d
    return best


class MatmulTiles(FrozenRecord):
    """Tiles of ``C[m,n] += A[m,k] B[k,n]``: K slab, parallel (forall) block, register block."""

    __slots__ = ("k", "par_m", "par_n", "reg_m", "reg_n", "batch")

    k: int
    par_m: int
    par_n: int
    reg_m: int
    reg_n: int
    batch: bool

    def __init__(self, k: int, par_m: int, par_n: int, reg_m: int, reg_n: int, batch: bool = False) -> None:
        _set(self, "k", k)
        _set(self, "par_m", par_m)
        _set(self, "par_n", par_n)
        _set(self, "reg_m", reg_m)
        _set(self, "reg_n", reg_n)
        _set(self, "batch", batch)


class ElementwiseTiles(FrozenRecord):
    """Forall tiles on parallel loops and sequential tiles on reduction loops (0 = not tiled)."""

    __slots__ = ("parallel", "reduction")

    parallel: tuple[int, ...]
    reduction: tuple[int, ...]

    def __init__(self, parallel: tuple[int, ...], reduction: tuple[int, ...]) -> None:
        _set(self, "parallel", parallel)
        _set(self, "reduction", reduction)


def choose_matmul_tiles(m: int, n: int, k: int, elem_bits: int = 32, batch: bool = False) -> MatmulTiles:
    """Tiles for AVX-512: a register block of 8 rows x 2 zmm (or 16 rows x 1 vector), 64x128 blocks
    per thread, K slabs of 128.

    The block's row is 2 whole vectors when N has an even number of them, 1 when it has an odd
    number, else the largest divisor of N that fits one vector (a narrow register).  Any other row
    length (24, 20, 48 as 3 vectors) is a vector type LLVM's AVX-512 lowering scalarizes: 9 GFLOP/s
    instead of 100-200 (256x512 @ 512xN, 1 thread: N = 48 9 -> 194, N = 40 9 -> 119, N = 24
    9 -> 134, N = 80 9 -> 199).  A row of one whole vector takes 16 rows: 16 accumulators hide the
    FMA latency and halve the broadcasts per FMA (8 rows: 5 % slower at N = 48).  A narrow row
    keeps 8: 16 would gain 5-12 % per call on it but unrolls 10 % more code into train_step, whose
    classifier head is 10 wide (its compile time is what matters there)."""
    lanes = max(1, 512 // elem_bits)
    if n % lanes == 0:
        reg_n = lanes * (2 if (n // lanes) % 2 == 0 else 1)
    else:
        reg_n = largest_divisor_at_most(n, lanes)
    reg_m = largest_divisor_at_most(m, 16 if reg_n == lanes else 8)
    par_m = reg_m * largest_divisor_at_most(m // reg_m, max(1, 64 // reg_m))
    par_n = reg_n * largest_divisor_at_most(n // reg_n, max(1, (4 * 2 * lanes) // reg_n))
    kt = largest_divisor_at_most(k, 128)
    return MatmulTiles(kt, par_m, par_n, reg_m, reg_n, batch)


def choose_elementwise_tiles(ranges: Sequence[int], kinds: Sequence[str], elem_bits: int = 32) -> ElementwiseTiles:
    """Innermost loop gets up to 4 vectors, the one above up to 2 rows, outer loops 1.

    Reduction loops (tiled sequentially after the parallel forall) share what is left of a budget of
    8 vectors per tile, innermost first, so that no tile becomes a huge vector (pitfall 2).
    """
    lanes = max(1, 512 // elem_bits)
    par: list[int] = []
    red: list[int] = []
    par_dims = [i for i, k in enumerate(kinds) if k == "parallel"]
    red_dims = [i for i, k in enumerate(kinds) if k != "parallel"]
    for i, size in enumerate(ranges):
        if kinds[i] == "parallel":
            pos = len(par_dims) - 1 - par_dims.index(i)  # 0 = innermost parallel loop
            if red_dims and i < max(red_dims):
                bound = 1 if pos > 0 else 8
            else:
                bound = 4 * lanes if pos == 0 else (2 if pos == 1 else 1)
            par.append(largest_divisor_at_most(size, bound))
            red.append(0)
        else:
            par.append(0)
            red.append(0)
    budget = max(1, (8 * lanes) // max(1, _prod(p for p in par if p)))
    for i in reversed(red_dims):
        t = largest_divisor_at_most(ranges[i], max(1, min(4 * lanes, budget)))
        red[i] = t
        budget = max(1, budget // t)
    return ElementwiseTiles(tuple(par), tuple(red))


def _prod(xs: Any) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def _sizes(ts: Sequence[int]) -> str:
    return "[" + ", ".join(str(t) for t in ts) + "]"


def _handles(n: int) -> str:
    return ", ".join(["!transform.any_op"] * n)


def _match(var: str, op: str, tag: int) -> str:
    return (f"    {var} = transform.structured.match ops{{[\"{op}\"]}} attributes {{{SCHED_ATTR} = {tag} : i64}}"
            f" in %root : (!transform.any_op) -> !transform.any_op\n")


def _tile_for(res: str, src: str, sizes: Sequence[int]) -> str:
    nloops = sum(1 for s in sizes if s)
    loops = f"%{res}_l" if nloops == 1 else f"%{res}_l:{nloops}"
    return (f"    %{res}, {loops} = transform.structured.tile_using_for {src} tile_sizes {_sizes(sizes)}"
            f" : (!transform.any_op) -> ({_handles(nloops + 1)})\n")


def _tile_forall(res: str, src: str, sizes: Sequence[int]) -> str:
    return (f"    %{res}, %{res}_f = transform.structured.tile_using_forall {src} tile_sizes {_sizes(sizes)}"
            f" : (!transform.any_op) -> (!transform.any_op, !transform.any_op)\n")


def matmul_section(tag: int, t: MatmulTiles) -> str:
    """K slab (scf.for), parallel block (scf.forall), register block (scf.for), vectorize."""
    op = "linalg.batch_matmul" if t.batch else "linalg.matmul"
    b = [1] if t.batch else []
    zb = [0] if t.batch else []
    s = _match(f"%mm{tag}", op, tag)
    s += _tile_for(f"mk{tag}", f"%mm{tag}", zb + [0, 0, t.k])
    s += _tile_forall(f"mp{tag}", f"%mk{tag}", b + [t.par_m, t.par_n])
    s += _tile_for(f"mr{tag}", f"%mp{tag}", b + [t.reg_m, t.reg_n, 1])
    s += _vectorize(f"%mr{tag}")
    return s


def _vectorize(handle: str) -> str:
    return f"    transform.structured.vectorize {handle} : !transform.any_op\n"


def fill_section(tag: int, shape: Sequence[int]) -> str:
    """Sequential tiling of a fill into (<=8) x (<=64) pieces so that it vectorizes in registers."""
    if not shape:
        return ""
    sizes = [1] * (len(shape) - 2) + ([largest_divisor_at_most(shape[-2], 8)] if len(shape) >= 2 else [])
    sizes.append(largest_divisor_at_most(shape[-1], 64))
    return _match(f"%fl{tag}", "linalg.fill", tag) + _tile_for(f"ft{tag}", f"%fl{tag}", sizes) + \
        _vectorize(f"%ft{tag}")


def elementwise_section(tag: int, op_name: str, t: ElementwiseTiles) -> str:
    """Forall over parallel loops, then scf.for over reduction loops (if any), then vectorize."""
    s = _match(f"%ew{tag}", op_name, tag)
    src = f"%ew{tag}"
    if any(t.parallel):
        s += _tile_forall(f"ep{tag}", src, t.parallel)
        src = f"%ep{tag}"
    if any(t.reduction):
        s += _tile_for(f"er{tag}", src, t.reduction)
        src = f"%er{tag}"
    s += _vectorize(src)
    return s


# Only the ops tiled by a section are vectorized (``transform.structured.vectorize`` on their
# handles), so an op left unscheduled stays a linalg op and becomes scalar loops later: one
# unschedulable op no longer forces the whole kernel to scalar code (and never becomes a huge vector,
# toolchain.md pitfall 2).
_LOWERING = """\
    %func = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.vector.reduction_to_contract
      transform.apply_patterns.vector.transfer_permutation_patterns
    } : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
      transform.apply_patterns.tensor.fold_tensor_subset_ops_into_vector_transfers
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    %loops = transform.structured.match ops{["scf.for"]} in %func : (!transform.any_op) -> !transform.any_op
    transform.apply_licm to %loops : !transform.any_op
    transform.loop.hoist_loop_invariant_subsets %loops : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.lower_multi_reduction lowering_strategy = "innerparallel"
      transform.apply_patterns.vector.split_transfer_full_partial split_transfer_strategy = "vector-transfer"
      transform.apply_patterns.vector.transfer_to_scf max_transfer_rank = 1 full_unroll = true
    } : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.vector.lower_transfer max_transfer_rank = 1
      transform.apply_patterns.vector.lower_shape_cast
      transform.apply_patterns.vector.lower_transpose lowering_strategy = "shuffle_1d"
      transform.apply_patterns.vector.lower_broadcast
      transform.apply_patterns.vector.lower_outerproduct
    } : !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
"""


def wrap_script(sections: Sequence[str], name: str = "__mind_schedule") -> str:
    """A complete transform module: the per-op sections, then vector lowering."""
    body = "".join(sections)
    return ("module attributes {transform.with_named_sequence} {\n"
            f"  transform.named_sequence @{name}(%root: !transform.any_op {{transform.readonly}}) {{\n"
            f"{body}{_LOWERING}    transform.yield\n  }}\n}}\n")


# ---------------------------------------------------------------- payload inspection (needs MLIR)

def _static_shape(t: Any) -> list[int] | None:
    from mlir import ir
    if not isinstance(t, ir.ShapedType):
        return [] if t is not None else None
    st = t
    if not st.has_static_shape:
        return None
    return list(st.shape)


def _elem_bits(t: Any) -> int:
    from mlir import ir
    et = t.element_type if isinstance(t, ir.ShapedType) else t
    try:
        return max(8, int(et.width))
    except AttributeError:
        return 32


def _generic_loops(op: Any) -> tuple[list[int], list[str]] | None:
    """Static loop ranges and iterator kinds of a linalg.generic, read from its indexing maps."""
    from mlir import ir
    maps = [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]
    kinds_attr = op.attributes["iterator_types"]
    kinds = ["parallel" if "parallel" in str(k) else "reduction" for k in kinds_attr]
    ranges: list[int | None] = [None] * len(kinds)
    for operand, amap in zip(op.operands, maps):
        shape = _static_shape(operand.type)
        if shape is None:
            return None
        for pos, expr in enumerate(amap.results):
            if isinstance(expr, ir.AffineDimExpr):
                d = expr.position
                ranges[d] = shape[pos]
    if any(r is None for r in ranges):
        return None
    return [int(r) for r in ranges], kinds  # type: ignore[misc]


DEFAULT_MAPS = {
    "linalg.matmul": "[affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, "
                     "affine_map<(d0, d1, d2) -> (d0, d1)>]",
    "linalg.batch_matmul": "[affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, "
                           "affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]",
}


# Generic bodies with these ops are left unscheduled: gathers and pads (tensor.extract at computed
# indices, linalg.index) vectorize to gathers of questionable value and were not validated.
_UNSCHEDULED_BODY_OPS = ("tensor.extract", "linalg.index")


def _map_kind(amap: Any) -> str | None:
    """'identity', 'permutation', 'projection' (dims dropped or broadcast as 0) or None (other)."""
    from mlir import ir
    dims: list[int] = []
    const = False
    for e in amap.results:
        if isinstance(e, ir.AffineDimExpr):
            dims.append(e.position)
        elif isinstance(e, ir.AffineConstantExpr) and e.value == 0:
            const = True
        else:
            return None
    if len(set(dims)) != len(dims):
        return None
    if dims != sorted(dims):
        return "permutation"
    if not const and dims == list(range(amap.n_dims)):
        return "identity"
    return "projection"


def _plan_generic(op: Any, tag: int, name: str) -> str | None:
    from mlir import ir
    loops = _generic_loops(op)
    if loops is None:
        return None
    ranges, kinds = loops
    if not ranges or 0 in ranges:
        return None
    for amap_attr in op.attributes["indexing_maps"]:
        if _map_kind(ir.AffineMapAttr(amap_attr).value) is None:
            return None  # strided or shifted reads (slices): loops
    block = op.regions[0].blocks[0]
    for block_op in block.operations:
        if block_op.operation.name in _UNSCHEDULED_BODY_OPS:
            return None
    if any(k != "parallel" for k in kinds) and not _vectorizable_reduction(op):
        return None
    # the widest element type sets the lane count: with the narrowest (an i8 mask), f32 operands of
    # the same op got 256-element tiles, 16 registers per row, and 4x the IR of a register-sized tile
    bits = max(_elem_bits(v.type) for v in op.operands)
    return elementwise_section(tag, name, choose_elementwise_tiles(ranges, kinds, bits))


# Combiners that ``vector.multi_reduction`` knows (what the linalg vectorizer matches).
_COMBINERS = ("arith.addf", "arith.addi", "arith.mulf", "arith.muli", "arith.maximumf", "arith.minimumf",
              "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui", "arith.andi", "arith.ori",
              "arith.xori", "arith.maxnumf", "arith.minnumf")


def _vectorizable_reduction(op: Any) -> bool:
    """Whether the linalg vectorizer turns this reduction generic into a correct multi_reduction.

    Each yielded value must be ``combiner(%out, x)`` (``%out`` used nowhere else) where ``x``
    depends on an input element or ``linalg.index``.  The vectorizer only emits a reduction when
    ``x`` is a vector of the iteration shape; a loop-invariant ``x`` (a constant after fusion and
    folding, e.g. the element count ``reduce_sum(select(p, 1, 1))`` that autodiff emits for
    ``mean``) stays a scalar and is combined with the init *once* instead of once per reduced
    element: a wrong result, not a failure (MLIR 22's ``reduceIfNeeded``).
    """
    from mlir import ir
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    n_out = len(op.results)
    n_in = len(args) - n_out
    inputs = {hash(a) for a in args[:n_in]}
    outs = args[n_in:]
    ops = list(block.operations)
    yield_op = ops[-1]
    if yield_op.operation.name != "linalg.yield" or len(yield_op.operands) != n_out:
        return False
    varying: set[int] = set()
    for bop in ops[:-1]:
        o = bop.operation
        if o.name == "linalg.index" or any(hash(v) in inputs or hash(v) in varying for v in o.operands):
            for r in o.results:
                varying.add(hash(r))
    for out_arg, y in zip(outs, yield_op.operands):
        uses = list(out_arg.uses)
        if not uses:
            return False  # last-write-wins over a reduction loop: not what the vectorizer assumes
        owner = y.owner
        if isinstance(owner, ir.Block) or owner.name not in _COMBINERS or len(uses) != 1:
            return False
        if uses[0].owner.operation != owner.operation:
            return False
        other = [v for v in owner.operands if v != out_arg]
        if len(other) != 1 or (hash(other[0]) not in varying and hash(other[0]) not in inputs):
            return False
    return True


def _plan_matmul(op: Any, tag: int, name: str) -> str | None:
    if len(list(op.operands)) != 3 or str(op.attributes["indexing_maps"]) != DEFAULT_MAPS[name]:
        return None
    a, b = (_static_shape(v.type) for v in list(op.operands)[:2])
    if a is None or b is None or 0 in a or 0 in b:
        return None
    m, k = a[-2], a[-1]
    n = b[-1]
    t = choose_matmul_tiles(m, n, k, _elem_bits(op.operands[0].type), False)
    if t.reg_m < 4 or t.reg_n < 8 or t.k < 8:
        return None  # odd shapes: scalar loops (a register tile this small gains little)
    return matmul_section(tag, t)


def _feeds_conv(op: Any) -> bool:
    """Whether a fill initializes a conv or the padding generic in front of one (conv_schedule)."""
    for use in op.results[0].uses:
        user = use.owner
        if user.name == "linalg.conv_2d_nhwc_hwcf":
            return True
        if user.name == "linalg.generic":
            frontier = [r for r in user.results]
            for _ in range(2):
                nxt = []
                for v in frontier:
                    for u in v.uses:
                        if u.owner.name == "linalg.conv_2d_nhwc_hwcf":
                            return True
                        if u.owner.name == "tensor.extract_slice":
                            nxt.extend(u.owner.results)
                frontier = nxt
    return False


MIN_SCHEDULE_WORK = 8192
"""Default cost model: an op with fewer iterations than this (``op_work``) stays scalar loops.

Scalar loops over a few thousand elements run in a few µs, less than the ~15 µs of argument binding
every call pays, while each scheduled op costs 5-15 ms of compile (tiling, vector lowering, LLVM),
most of all the small odd shapes (10-wide rows of a classifier head) whose vectors do not fill a
register: train_step has 25 such ops of 32x10.  ``schedule="all"`` passes 0 (schedule every op that
has a plan: what the tests use to exercise the plans on small shapes)."""


def op_work(op: Any) -> int | None:
    """Iterations of a linalg op: m*n*k for a matmul, output size times window*channels for a conv,
    the loop space of a generic, the size of a fill; None when a shape is not static."""
    name = op.name
    try:
        if name in ("linalg.matmul", "linalg.batch_matmul"):
            a, b = (_static_shape(v.type) for v in list(op.operands)[:2])
            return None if not a or not b else _prod(a) * b[-1]
        if name == "linalg.conv_2d_nhwc_hwcf":
            w, out = (_static_shape(v.type) for v in list(op.operands)[1:3])
            return None if not w or not out else _prod(out) * w[0] * w[1] * w[2]
        if name == "linalg.generic":
            loops = _generic_loops(op)
            return None if loops is None else _prod(loops[0])
        if name == "linalg.fill":
            shape = _static_shape(op.results[0].type) if len(op.results) else _static_shape(op.operands[1].type)
            return None if shape is None else _prod(shape)
    except (KeyError, ValueError, TypeError, AttributeError, IndexError):
        return None
    return None


def _plan_fill(op: Any, tag: int) -> str | None:
    shape = _static_shape(op.results[0].type) if len(op.results) else _static_shape(op.operands[1].type)
    if not shape or 0 in shape:
        return None
    return fill_section(tag, shape)


def schedule_module(module: Any, min_work: int = MIN_SCHEDULE_WORK, library: bool = False) -> str | None:
    """Tag the linalg ops of ``module`` that have a validated schedule and return the transform script.

    Per op: 2-D ``linalg.matmul`` with tiles that divide its shape, ``linalg.fill``, and
    ``linalg.generic`` ops whose indexing maps are identities, permutations (transposes) or
    projections/broadcasts and whose body reads no computed indices: elementwise chains, multi-result
    fused generics, reductions over any axes (``_vectorizable_reduction``), batched-matmul generics.
    Every other op (slices with strides/offsets, pads, gathers, zero-extent ops, reductions the
    vectorizer gets wrong) stays a linalg op and is lowered to scalar loops.  None means: nothing to
    schedule.  Ops whose ``op_work`` is below ``min_work`` are left unscheduled too (the cost model,
    see ``MIN_SCHEDULE_WORK``; 0 schedules every op that has a plan).  ``library``: the matmuls that
    ``library_calls`` will hand to the prebuilt GEMM are left alone.
    """
    from mlir import ir
    plans: list[tuple[Any, str]] = []

    def visit(op: Any) -> ir.WalkResult:
        name = op.name
        if not name.startswith("linalg.") or name in ("linalg.yield", "linalg.index") or \
                (library and _library_matmul(op)):
            return ir.WalkResult.ADVANCE
        tag = len(plans)
        section: str | None = None
        try:
            if min_work > 0:
                work = op_work(op)
                if work is not None and work < min_work:
                    return ir.WalkResult.ADVANCE  # too small to pay for its compile time
            if name == "linalg.matmul":
                section = _plan_matmul(op, tag, name)
            elif name == "linalg.fill":
                if not _feeds_conv(op):  # a conv section fuses its fills itself
                    section = _plan_fill(op, tag)
            elif name == "linalg.generic":
                section = _plan_generic(op, tag, name)
            elif name == "linalg.conv_2d_nhwc_hwcf":
                from .conv_schedule import plan_conv
                section = plan_conv(op, tag)
        except (KeyError, ValueError, TypeError, AttributeError):
            section = None
        if section:
            plans.append((op, section))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if not plans:
        return None
    i64 = ir.IntegerType.get_signless(64)
    for tag, (op, _) in enumerate(plans):
        op.attributes[SCHED_ATTR] = ir.IntegerAttr.get(i64, tag)
    return wrap_script([s for _, s in plans])


def _library_matmul(op: Any) -> bool:
    """A matmul that ``library_calls`` hands to the prebuilt GEMM, or the zero fill of its init
    (which it drops: the GEMM then overwrites its output)."""
    from .library_calls import eligible_matmul
    if op.name == "linalg.fill":
        uses = [u for r in op.results for u in r.uses]
        return bool(uses) and all(u.owner.name == "linalg.matmul" and u.operand_number == 2 and
                                  eligible_matmul(u.owner) is not None for u in uses)
    return eligible_matmul(op) is not None


def largest_unscheduled_work(module: Any, library: bool = False) -> int:
    """The largest ``op_work`` of the linalg ops that ``schedule_module`` left untagged (they become
    scalar loops; ``codegen`` gives a kernel with large ones LLVM's loop passes), not counting the
    matmuls of the prebuilt library (``library``).  Call it before the script runs; an op of unknown
    size counts as large."""
    from mlir import ir
    largest = [0]

    def visit(op: Any) -> ir.WalkResult:
        name = op.name
        if name.startswith("linalg.") and name not in ("linalg.yield", "linalg.index") and \
                SCHED_ATTR not in op.attributes and not (library and _library_matmul(op)):
            work = op_work(op)
            largest[0] = max(largest[0], work if work is not None else 1 << 62)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return largest[0]


# Ops that only produce a fresh value from constants (an init): cloning one is free of side effects.
_INIT_OPS = ("tensor.empty", "linalg.fill", "vector.transfer_write")


def untie_shared_inits(module: Any, tag_empties: bool = False) -> int:
    """Give every user of a shared init value (``tensor.empty``, a fill of it, ...) its own copy.

    Why: ``cse`` (prefusion, ``apply_cse`` in the schedule) merges identical ``tensor.empty`` +
    ``linalg.fill`` inits, so two destination-passing ops end up writing into the same init tensor.
    ``eliminate-empty-tensors`` then rewrites that ``tensor.empty`` into a ``to_tensor %outN restrict
    writable`` of one result's out-parameter; ``restrict`` hides the later ``materialize_in_destination``
    into ``%outN`` from the one-shot analysis, so the other op computes in place in ``%outN`` and its
    value is overwritten before it is copied out (a wrong result in a function with several results).
    Unshared inits keep that rewrite sound.  Run it after prefusion with ``tag_empties``: every
    ``tensor.empty`` then carries a unique ``mind.init`` attribute, so the schedule's ``apply_cse``
    cannot merge them (nor the tiled fill loops built on them) again; run it once more after the
    schedule for the inits that CSE or canonicalization created.  Returns the number of clones made.
    """
    from mlir import ir

    made = 0
    while True:
        shared: list[tuple[Any, list[Any]]] = []

        def find(op: Any) -> ir.WalkResult:
            if op.name in _INIT_OPS and len(op.results) == 1 and _init_chain(op):
                users: dict[Any, Any] = {}
                for use in op.results[0].uses:
                    users.setdefault(use.owner.operation, use.owner)
                if len(users) > 1:
                    shared.append((op, list(users.values())))
            return ir.WalkResult.ADVANCE

        module.operation.walk(find)
        if not shared:
            break
        for op, users in shared:
            v = op.results[0]
            for user in users[1:]:
                clone = op.operation.clone(ip=ir.InsertionPoint(user))
                user.operation.replace_uses_of_with(v, clone.results[0])
                made += 1
    if tag_empties:
        empties: list[Any] = []

        def collect(op: Any) -> ir.WalkResult:
            if op.name == "tensor.empty":
                empties.append(op)
            return ir.WalkResult.ADVANCE

        module.operation.walk(collect)
        i64 = ir.IntegerType.get_signless(64)
        for i, op in enumerate(empties):
            op.attributes[INIT_ATTR] = ir.IntegerAttr.get(i64, i)
    return made


def _init_chain(op: Any) -> bool:
    """Whether ``op`` computes a tensor init from constants only (empty -> fill/transfer_write ...)."""
    from mlir import ir
    name = op.name
    if name == "tensor.empty":
        return len(op.operands) == 0
    if name not in ("linalg.fill", "vector.transfer_write"):
        return False
    if not isinstance(op.results[0].type, ir.RankedTensorType):
        return False
    for v in op.operands:
        owner = v.owner
        if not isinstance(owner, ir.Operation) and not isinstance(owner, ir.OpView):
            return False  # a block argument
        if isinstance(v.type, ir.RankedTensorType):
            if not _init_chain(owner):
                return False
        elif owner.name not in ("arith.constant",):
            return False
    return True


def apply_script(module: Any, script: str, entry: str = "__mind_schedule") -> None:
    """Run ``script`` (a transform module text) on ``module`` in place, in the module's context.

    The script is parsed and interpreted through ``mlir_capi`` (the GIL is released meanwhile, and
    ``mlir.dialects.transform.interpreter``, whose import costs ~4 ms of a cold compile, is not
    needed).  Raises ``RuntimeError`` when the script does not parse or a transform fails; MLIR's
    reasons go to the context's diagnostic handler."""
    from mlir import ir

    from .mlir_capi import apply_named_sequence, parse_module
    with module.context, ir.Location.unknown():
        tmod = parse_module(module.context, script)
        if tmod is None:
            raise RuntimeError("the transform script does not parse")
        entry_op = None
        for op in tmod.body.operations:
            if op.operation.name == "transform.named_sequence" and \
                    ir.StringAttr(op.attributes["sym_name"]).value == entry:
                entry_op = op
        if entry_op is None:
            raise ValueError(f"transform script has no named sequence @{entry}")
        if not apply_named_sequence(module.operation, entry_op.operation, tmod.operation):
            raise RuntimeError(f"the transform script @{entry} failed")
