"""Reading a parsed payload module: static shapes, loop ranges, indexing maps, reductions the linalg
vectorizer gets right, and the work of an op; and giving shared tensor inits one user each.

What a target's schedule planners ask of the payload, the same for every target.  MLIR is imported
inside the functions only.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

__all__ = ["as_operation", "defined_by", "ancestor_under", "DEFAULT_MAPS", "CONTRACT_OP", "NAMED_CONTRACTIONS", "SHARED_RHS_MAPS", "TRANSPOSED_LHS_MAPS", "TRANSPOSED_RHS_MAPS", "INIT_ATTR", "static_shape",
           "element_bits", "compute_bits", "tile_bits", "generic_loops", "increasing", "map_kind",
           "vectorizable_reduction", "reduction_combiners", "op_work", "untie_shared_inits", "slice_written_back", "tied_out", "product",
           "splats_as_fills", "MIN_FILL_ELEMENTS", "row_reads", "dense_by_construction", "row_major_run", "constant_index", "for_trips", "ops_named",
           "static_bytes", "generic_inputs", "generic_operations", "BODY_OPS", "body_ops"]

DEFAULT_MAPS = {
    "linalg.matmul": "[affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, "
                     "affine_map<(d0, d1, d2) -> (d0, d1)>]",
    "linalg.batch_matmul": "[affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, "
                           "affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]",
}
"""The indexing maps of the plain named contractions, as MLIR prints them."""

CONTRACT_OP = "linalg.contract"
"""A matmul of several or broadcast batch dims (``lowerings._contract``)."""

NAMED_CONTRACTIONS = (*DEFAULT_MAPS, CONTRACT_OP)
"""Every named contraction the emitter writes (``lowerings``): the ops a target's GEMM takes whole."""

SHARED_RHS_MAPS = ("[affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d3, d2)>, "
                   "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]")
"""A ``linalg.batch_matmul`` whose rhs is one matrix shared by the whole batch (``[B, M, K] @ [K, N]``)."""

TRANSPOSED_LHS_MAPS = ("[affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, "
                       "affine_map<(d0, d1, d2) -> (d0, d1)>]")
"""A ``linalg.matmul`` that reads its lhs transposed (``matmul(transpose(a), b)`` with ``a`` of ``[K, M]``:
``Emitter.transposed_lhs``)."""

TRANSPOSED_RHS_MAPS = {
    "linalg.matmul": "[affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, "
                     "affine_map<(d0, d1, d2) -> (d0, d1)>]",
    "linalg.batch_matmul": "[affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, "
                           "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]",
}
"""The maps of a contraction that reads its rhs transposed (``a @ transpose(b)`` with ``b`` of
``[..., N, K]``: ``Emitter.transposed_rhs``), by op.  Not a
matrix shared by a batch (``[B, M, K] @ transpose([N, K])``): ``linalg.batch_matmul`` takes a
rank-2 rhs only as ``(d3, d2)`` ("Invalid broadcast requested"), so that transpose stays a copy."""

INIT_ATTR = "mind.init"
"""The unique attribute ``untie_shared_inits`` puts on every ``tensor.empty``."""


def as_operation(op: Any) -> Any:
    """The ``ir.Operation`` of ``op``, which the bindings hand out as an operation or as a typed view
    of one (so that comparisons and ``parent`` chains see one kind)."""
    return op.operation if hasattr(op, "operation") else op


def defined_by(value: Any, name: str) -> Any | None:
    """The operation called ``name`` that defines ``value``, else None (a block argument, another op)."""
    from mlir import ir
    if not isinstance(value, ir.OpResult):
        return None
    owner = as_operation(value.owner)
    return owner if owner.name == name else None


def ancestor_under(op: Any, is_parent: Callable[[Any], bool]) -> Any:
    """The operation holding ``op`` (``op`` itself included) whose parent operation ``is_parent``
    accepts: the op of a loop's block, or of a function's, that a nested op belongs to."""
    op = as_operation(op)
    while not is_parent(as_operation(op.parent)):
        op = as_operation(op.parent)
    return op


def constant_index(value: Any) -> int | None:
    """The integer ``value`` holds when an ``arith.constant`` defines it, else None (a block
    argument, a computed value)."""
    from mlir import ir
    owner = as_operation(value.owner)
    if getattr(owner, "name", None) != "arith.constant":
        return None
    try:
        return ir.IntegerAttr(owner.attributes["value"]).value
    except (ValueError, TypeError, KeyError):
        return None


def for_trips(loop: Any) -> int | None:
    """The trip count of an ``scf.for`` whose bounds and step are constants (step positive, bounds
    not negative), else None."""
    low, high, step = (constant_index(v) for v in list(loop.operands)[:3])
    if low is None or high is None or step is None or step <= 0 or min(low, high) < 0:
        return None
    return max(0, -(-(high - low) // step))


def product(xs: Iterable[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def static_shape(t: Any) -> list[int] | None:
    """The static shape of a shaped type (``[]`` for a scalar type), or None when it is dynamic."""
    from mlir import ir
    if not isinstance(t, ir.ShapedType):
        return [] if t is not None else None
    if not t.has_static_shape:
        return None
    return list(t.shape)


def element_bits(t: Any) -> int:
    """The bit width of a (shaped) type's element type, at least 8 (32 when it has none)."""
    from mlir import ir
    et = t.element_type if isinstance(t, ir.ShapedType) else t
    try:
        return max(8, int(et.width))
    except AttributeError:
        return 32


def compute_bits(op: Any) -> int:
    """The widest element an op computes in: its operands' and every value its body makes.

    Why: the lane count of its vectors follows from it.  An f32 norm's ``sqrt`` is ``exp(log(x) / 2)``
    in f64 (``builtins.b_sqrt``), so a tile of 64 f32 lanes computed 64 f64 lanes, 8 AVX-512
    registers per value: twice the registers and machine code of a tile sized by the f64 values, and
    a ninth of the cold compile of an RMS norm (``docs/backend-cpu.md``, Measurements).  A body value is wider than
    the operands only through a cast or a constant (``_WIDENING``), so only those are read."""
    bits = max((element_bits(v.type) for v in op.operands), default=32)
    for region in op.regions:
        for block in region.blocks:
            for body_op in block.operations:
                if body_op.operation.name in _WIDENING:
                    bits = max([bits] + [element_bits(r.type) for r in body_op.results])
    return bits


def tile_bits(op: Any) -> int:
    """The element width whose lanes size an op's tiles: a reduction's accumulated element (its
    results'), any other op's widest computed value (``compute_bits``).

    Why a reduction's own: its tiles are its summation order (how many partial sums, combined how),
    and that order must not depend on what fusion put into its body.  A row sum of an f32 ``sqrt``
    (computed in f64) had its row of 8 summed as a tree where the same sum with the ``sqrt`` in a
    generic of its own (``hoist``) was summed in a chain: one bit apart."""
    loops = generic_loops(op) if op.name == "linalg.generic" else None
    if loops is not None and any(k != "parallel" for k in loops[1]) and len(op.results):
        return max(element_bits(r.type) for r in op.results)
    return compute_bits(op)


_WIDENING = frozenset({"arith.extf", "arith.extsi", "arith.extui", "arith.sitofp", "arith.uitofp", "arith.bitcast",
                       "arith.constant"})
"""The body operations whose result can be wider than their operands (``compute_bits``)."""


def static_bytes(t: Any) -> int | None:
    """The bytes of a statically shaped type (its elements times their width), or None."""
    shape = static_shape(t)
    return None if shape is None else product(shape) * element_bits(t) // 8


def generic_inputs(op: Any) -> list[Any]:
    """A ``linalg.generic``'s inputs: its operands before the inits.  Read from its operand segments,
    so that a bufferized generic (no results: its inits are memrefs) is read right too."""
    from mlir import ir
    return list(op.operands)[:int(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[0])]


def generic_loops(op: Any) -> tuple[list[int], list[str]] | None:
    """Static loop ranges and iterator kinds of a linalg.generic, read from its indexing maps."""
    from mlir import ir
    maps = [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]
    kinds_attr = op.attributes["iterator_types"]
    kinds = ["parallel" if "parallel" in str(k) else "reduction" for k in kinds_attr]
    ranges: list[int | None] = [None] * len(kinds)
    for operand, amap in zip(op.operands, maps):
        shape = static_shape(operand.type)
        if shape is None:
            return None
        for pos, expr in enumerate(amap.results):
            if isinstance(expr, ir.AffineDimExpr):
                ranges[expr.position] = shape[pos]
    if any(r is None for r in ranges):
        return None
    return [int(r) for r in ranges], kinds  # type: ignore[misc]


def increasing(expr: Any) -> bool:
    """Whether an affine expression is sums of loops times positive constants, and constants: no
    axis read backwards (MLIR's tiling aborts on a negative coefficient)."""
    from mlir import ir
    if isinstance(expr, (ir.AffineDimExpr, ir.AffineConstantExpr)):
        return not isinstance(expr, ir.AffineConstantExpr) or expr.value >= 0
    if isinstance(expr, (ir.AffineAddExpr, ir.AffineMulExpr)):
        return increasing(expr.lhs) and increasing(expr.rhs)
    return False


def map_kind(amap: Any) -> str | None:
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


# Combiners that ``vector.multi_reduction`` knows (what the linalg vectorizer matches).
_COMBINERS = ("arith.addf", "arith.addi", "arith.mulf", "arith.muli", "arith.maximumf", "arith.minimumf",
              "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui", "arith.andi", "arith.ori",
              "arith.xori", "arith.maxnumf", "arith.minnumf")


def vectorizable_reduction(op: Any) -> bool:
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


def reduction_combiners(op: Any) -> tuple[str, ...]:
    """The names of the ops that yield a generic's results (its reductions' combiners: ``arith.addf``
    for a sum, ``arith.maximumf`` for a max).  Why not any op of the body: what fusion put into a
    reduction's body (an ``exp``'s clamp is a ``maximumf``) must not change how its rows are
    reduced, or a kernel's bits would depend on what was fused (``hoist``)."""
    from mlir import ir
    yield_op = list(op.regions[0].blocks[0].operations)[-1]
    return tuple("" if isinstance(v.owner, ir.Block) else v.owner.name for v in yield_op.operands)


def row_reads(op: Any, dense_gathers: bool = False) -> bool:
    """Whether every ``tensor.extract`` in the body of the parallel generic ``op`` reads, in a tile of
    one row of its last loop, either one element (its indices do not vary along that loop) or one
    contiguous row (its last index is that loop's ``linalg.index`` itself, the others do not vary,
    the read tensor's last extent is not 1, for any read): what MLIR 22's vectorizer (``vectorize_nd_extract``)
    turns into a scalar or contiguous read, never a ``vector.gather``.  An index varies if it depends
    on a block argument of the body or on the last loop's index; a body with any other read (a
    slice fused into a gather, a gather along the last axis) gets False.

    ``dense_gathers``: any other read is accepted too when its tensor is dense by construction
    (``dense_by_construction``): the ``vector.gather`` that the vectorizer makes of it linearizes its
    indices over the tensor's shape, which is then the buffer's layout."""
    from mlir import ir
    block = op.regions[0].blocks[0]
    last = len(list(op.attributes["iterator_types"])) - 1
    body = op.operation

    def inside(v: Any) -> Any:
        """The body op defining ``v``, None if ``v`` comes from outside; raises on a block argument."""
        owner = v.owner
        if isinstance(owner, ir.Block):
            if owner == block:
                raise LookupError  # a block argument: varies with every loop
            return None
        owner = as_operation(owner)
        return owner if owner.parent == body else None

    def varies(v: Any) -> bool:
        try:
            d = inside(v)
        except LookupError:
            return True
        if d is None:
            return False
        if d.name == "linalg.index":
            return ir.IntegerAttr(d.attributes["dim"]).value == last
        return any(varies(x) for x in d.operands)

    def is_last_index(v: Any) -> bool:
        try:
            d = inside(v)
        except LookupError:
            return False
        return d is not None and d.name == "linalg.index" and ir.IntegerAttr(d.attributes["dim"]).value == last

    for body_op in block.operations:
        if body_op.operation.name != "tensor.extract":
            continue
        operands = list(body_op.operation.operands)
        shape = static_shape(operands[0].type)
        indices = operands[1:]
        if shape is None or not indices:
            continue  # a 0-d read: one element
        if dense_gathers and dense_by_construction(operands[0]):
            continue
        if shape[-1] == 1:
            return False  # some versions of the vectorizer gather from any tensor whose last extent is 1
        if any(varies(i) for n, i in zip(shape[:-1], indices[:-1]) if n != 1):
            return False
        if varies(indices[-1]) and not (is_last_index(indices[-1]) and shape[-1] != 1):
            return False
    return True


def row_major_run(tensor: Any) -> bool:
    """Whether ``tensor`` is one run of memory in row-major order, so that collapsing it (a flattened
    loop, ``cpu.transforms._flat_section``) is a view: not a window (``tensor.extract_slice``, through
    reshapes) that leaves out part of its source's rows, nor one with steps.  Collapsed, such a
    window bufferizes to a copy into a new buffer (``x[:, 1:] - x[:, :-1]`` over 2000x2000 f32 copied
    both operands first: 5.0 ms against torch eager's 1.1)."""
    from mlir import ir
    op = tensor.owner
    if isinstance(op, ir.Block):
        return True
    op = as_operation(op)
    if op.name in ("tensor.collapse_shape", "tensor.expand_shape"):
        return row_major_run(op.operands[0])
    if op.name != "tensor.extract_slice":
        return True
    source = static_shape(op.operands[0].type)
    window = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
    steps = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
    if source is None or any(n < 0 for n in window) or any(st != 1 for st in steps):
        return False
    first = next((i for i, n in enumerate(window) if n != 1), len(window))
    return window[first + 1:] == source[first + 1:] and row_major_run(op.operands[0])


def dense_by_construction(tensor: Any) -> bool:
    """Whether ``tensor`` bufferizes to a dense buffer of its own shape whatever the schedule and
    the result placement do: a constant (a global) or an argument of the function (its boundary
    takes identity layouts, ``linalg.pipeline.bufferize``).  Not a computed tensor: its buffer may
    become a strided view of another (a block written in place, a result placed in a slice of an
    out-parameter)."""
    from mlir import ir
    owner = tensor.owner
    if isinstance(owner, ir.Block):
        parent = owner.owner
        return parent is not None and as_operation(parent).name == "func.func"
    return as_operation(owner).name == "arith.constant"


BODY_OPS = 3
"""The operations per iteration that one unit of ``op_work`` stands for: a generic whose body does
more (an ``exp``/``log`` polynomial; a norm's ``sqrt`` as ``exp(log(x) / 2)`` in f64) counts its
operations in such units.  Why 3: an ``exp``, ``sigmoid`` or ``tanh`` of a thousand elements or two
(25-45 operations each) is then scheduled, whose scalar loops took several times a call's binding; a body
of a few operations (an SGD update, a bias gradient) still counts its iterations, where at a few
thousand of them the schedule's compile outweighs what it saves a call (``docs/backend-cpu.md``,
Schedules, has both measured)."""


def body_ops(op: Any) -> list[Any]:
    """The operations of the one block of ``op``'s first region, its terminator last: a
    linalg.generic's body, a loop's."""
    return list(op.regions[0].blocks[0].operations)


def generic_operations(op: Any) -> int | None:
    """Iterations times body operations (the terminator excluded) of a linalg.generic; None when a
    shape is not static."""
    loops = generic_loops(op)
    return None if loops is None else product(loops[0]) * (len(body_ops(op)) - 1)


def op_work(op: Any) -> int | None:
    """Iterations of a linalg op: m*n*k for a matmul, output size times window*channels for a conv,
    the loop space of a generic (or its operations in units of ``BODY_OPS``, when more), the size of
    a fill or a copy; None when a shape is not static.

    Why a generic's operations: its iterations alone left a per-row ``sqrt`` of an f32 RMS norm
    over 6000 rows of 24 (an f64 ``exp`` and ``log``, about 130 operations per row) as scalar loops,
    which took 5x the time of the rest of the kernel."""
    name = op.name
    try:
        if name in ("linalg.matmul", "linalg.batch_matmul"):
            a, b = (static_shape(v.type) for v in list(op.operands)[:2])
            return None if not a or not b else product(a) * b[-1]
        if name == "linalg.conv_2d_nhwc_hwcf":
            w, out = (static_shape(v.type) for v in list(op.operands)[1:3])
            return None if not w or not out else product(out) * w[0] * w[1] * w[2]
        if name == "linalg.generic":
            ops = generic_operations(op)
            return None if ops is None else max(product(generic_loops(op)[0]), ops // BODY_OPS)
        if name in ("linalg.fill", "linalg.copy"):  # the size of the output (operand 1)
            shape = static_shape(op.results[0].type) if len(op.results) else static_shape(op.operands[1].type)
            return None if shape is None else product(shape)
    except (KeyError, ValueError, TypeError, AttributeError, IndexError):
        return None
    return None


# Ops that only produce a fresh value from constants (an init): cloning one is free of side effects.
_INIT_OPS = ("tensor.empty", "linalg.fill", "vector.transfer_write")


MIN_FILL_ELEMENTS = 256
"""A splat constant with at least this many elements is computed by a fill (``splats_as_fills``)."""


def splats_as_fills(module: Any, min_elements: int = MIN_FILL_ELEMENTS) -> int:
    """Replace every tensor constant of one repeated value (a splat: ``ones([784, 512])``) with at
    least ``min_elements`` elements by ``tensor.empty`` + ``linalg.fill`` of its scalar.

    Why: a splat constant that survives to bufferization becomes a global array whose every element
    is written out in the LLVM IR (``[784 x [512 x float]]``: 1.6 MB of data, megabytes of text that
    LLVM parses and the object carries), where a fill is one loop.  Run it after elementwise fusion,
    which folds splats read by elementwise ops into their bodies as scalars, so only the splats that
    other ops read (a matmul's operand, a reduction's input) become fills.  Returns how many."""
    from mlir import ir

    splats: list[Any] = []

    def find(op: Any) -> ir.WalkResult:
        if op.name == "arith.constant" and isinstance(op.results[0].type, ir.RankedTensorType):
            value = op.attributes["value"]
            if isinstance(value, ir.DenseElementsAttr) and value.is_splat and \
                    product(ir.RankedTensorType(op.results[0].type).shape) >= min_elements:
                splats.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(find)
    for op in splats:  # generic op creation: the linalg dialect's Python module (OpDSL) is slow to import
        t = op.results[0].type
        elem = ir.RankedTensorType(t).element_type
        with op.location:
            ip = ir.InsertionPoint(op)
            scalar = ir.Operation.create("arith.constant", results=[elem], ip=ip, attributes={
                "value": ir.DenseElementsAttr(op.attributes["value"]).get_splat_value()}).results[0]
            empty = ir.Operation.create("tensor.empty", results=[t], ip=ip).results[0]
            fill = ir.Operation.create("linalg.fill", results=[t], operands=[scalar, empty], regions=1, ip=ip,
                                       attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1])})
            body = fill.regions[0].blocks.append(elem, elem)
            ir.Operation.create("linalg.yield", operands=[body.arguments[0]], ip=ir.InsertionPoint(body))
        op.results[0].replace_all_uses_with(fill.results[0])
        op.erase()
    return len(splats)


def untie_shared_inits(module: Any, tag_empties: bool = False) -> int:
    """Give every user of a shared init value (``tensor.empty``, a fill of it, ...) its own copy.

    Why: ``cse`` (prefusion, ``apply_cse`` in a schedule) merges identical ``tensor.empty`` +
    ``linalg.fill`` inits, so two destination-passing ops end up writing into the same init tensor.
    ``eliminate-empty-tensors`` then rewrites that ``tensor.empty`` into a ``to_tensor %outN restrict
    writable`` of one result's out-parameter; ``restrict`` hides the later ``materialize_in_destination``
    into ``%outN`` from the one-shot analysis, so the other op computes in place in ``%outN`` and its
    value is overwritten before it is copied out (a wrong result in a function with several results).
    Unshared inits keep that rewrite sound.  Run it after prefusion with ``tag_empties``: every
    ``tensor.empty`` then carries a unique ``mind.init`` attribute, so a schedule's ``apply_cse``
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
                if len(users) > 1 and not slice_written_back(op.results[0], list(users.values())):
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
        i64 = ir.IntegerType.get_signless(64)
        for i, op in enumerate(ops_named(module, "tensor.empty")):
            op.attributes[INIT_ATTR] = ir.IntegerAttr.get(i64, i)
    return made


def ops_named(module: Any, name: str) -> list[Any]:
    """The operations called ``name`` in ``module``, in walk order (collected first: the callers
    rewrite them)."""
    from mlir import ir
    found: list[Any] = []

    def visit(op: Any) -> ir.WalkResult:
        if op.name == name:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def slice_written_back(value: Any, users: list[Any]) -> bool:
    """Whether ``value``'s two users are a ``tensor.extract_slice`` that a ``scf.forall`` computes in
    (its ``shared_outs``) and the ``tensor.insert_slice`` of that forall's result into ``value`` at
    the same place: a loop split in two (``transforms._flat_section``'s whole tiles, its tail
    written after them) computing in a part of its init.  One tensor, written once per element,
    in place; untied, the forall computed in a temporary copied into the result."""
    if len(users) != 2:
        return False
    extract = next((u for u in users if u.name == "tensor.extract_slice"), None)
    insert = next((u for u in users if u.name == "tensor.insert_slice"), None)
    if extract is None or insert is None or insert.operands[1] != value:
        return False
    source = insert.operands[0]
    forall = source.owner
    if getattr(forall, "name", None) != "scf.forall":
        return False
    same_place = all(str(extract.attributes[a]) == str(insert.attributes[a])
                     for a in ("static_offsets", "static_sizes", "static_strides"))
    return tied_out(forall, source) == extract.results[0] and same_place and \
        len(extract.operands) == 1 and len(insert.operands) == 2


def tied_out(forall: Any, result: Any) -> Any | None:
    """The ``shared_outs`` operand of the ``scf.forall`` ``forall`` tied to its ``result`` (the
    operands end with them), or None when they do not match its results."""
    outs = list(forall.operands)[len(forall.operands) - len(forall.results):]
    return outs[result.result_number] if len(outs) == len(forall.results) else None


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
